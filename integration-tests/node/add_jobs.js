'use strict';
// Adds jobs with Node BullMQ.
//
// Args: {queue, prefix?, bulk?: bool, jobs: [{name, data, opts}]}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
// Output: {ids: [jobId, ...]} in the order of `jobs`.
// With `bulk: true` one `addBulk` call is made, otherwise one `add` per job, in order.

const { openQueue, run } = require('./lib');

run(async args => {
  const queue = openQueue(args);
  try {
    const jobs = args.jobs || [];
    let added;
    if (args.bulk) {
      added = await queue.addBulk(jobs.map(j => ({ name: j.name, data: j.data, opts: j.opts })));
    } else {
      added = [];
      for (const j of jobs) added.push(await queue.add(j.name, j.data, j.opts));
    }
    return { ids: added.map(job => job.id) };
  } finally {
    await queue.close();
  }
});
