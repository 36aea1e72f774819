'use strict';
// Reads jobs back with Node BullMQ's `queue.getJob` and `job.getState`.
//
// Args: {queue, prefix?, ids: [jobId, ...]}
// Output: {jobs: [ {id, name, data, opts, timestamp, delay, priority, progress, attemptsMade,
//   processedOn, finishedOn, returnvalue, failedReason, stacktrace, ..., state, raw} | null ]}
// `raw` is the job hash exactly as stored (HGETALL), so callers can compare the wire format;
// `null` stands for a job Node cannot find.

const { openQueue, rawClient, jobFields, run } = require('./lib');

run(async args => {
  const queue = openQueue(args);
  try {
    const client = rawClient();
    const jobs = [];
    for (const id of args.ids || []) {
      const job = await queue.getJob(String(id));
      if (!job) {
        jobs.push(null);
        continue;
      }
      const fields = jobFields(job);
      fields.state = await job.getState();
      fields.raw = await client.hgetall(`${queue.keys['']}${id}`);
      jobs.push(fields);
    }
    await client.quit();
    return { jobs };
  } finally {
    await queue.close();
  }
});
