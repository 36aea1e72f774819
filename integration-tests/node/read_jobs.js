'use strict';
// Reads jobs back with Node BullMQ's `queue.getJob` and `job.getState`.
//
// Args: {queue, prefix?, ids: [jobId, ...]}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
// Output: {jobs: [ {id, name, data, opts, timestamp, delay, priority, progress, attemptsMade,
//   processedOn, finishedOn, returnvalue, failedReason, stacktrace, ..., state, raw} | null ]}
// `raw` is the job hash exactly as stored (HGETALL), so callers can compare the wire format;
// on PostgreSQL it is the `job` row (`row_to_json`: columns in table order, enum state as text, jsonb
// columns as JSON). `null` stands for a job Node cannot find.

const { openQueue, rawClient, isPostgres, pgClient, jobFields, run } = require('./lib');

/** Raw stored form of one job: the Redis hash, or the PostgreSQL row. */
async function rawReader(args, queue) {
  if (isPostgres(args)) {
    const client = await pgClient(args);
    return {
      read: async id => {
        const { rows } = await client.query(
          'SELECT row_to_json(j) AS row FROM job j WHERE queue = $1 AND id = $2',
          [args.queue, id],
        );
        return rows.length ? rows[0].row : null;
      },
      close: () => client.end(),
    };
  }
  const client = rawClient();
  return {
    read: id => client.hgetall(`${queue.keys['']}${id}`),
    close: () => client.quit(),
  };
}

run(async args => {
  const queue = openQueue(args);
  try {
    const raw = await rawReader(args, queue);
    const jobs = [];
    try {
      for (const id of args.ids || []) {
        const job = await queue.getJob(String(id));
        if (!job) {
          jobs.push(null);
          continue;
        }
        const fields = jobFields(job);
        fields.state = await job.getState();
        fields.raw = await raw.read(String(id));
        jobs.push(fields);
      }
    } finally {
      await raw.close();
    }
    return { jobs };
  } finally {
    await queue.close();
  }
});
