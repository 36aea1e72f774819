'use strict';
// Queue-level view through Node BullMQ: counts, paused flag, job ids per state, workers.
//
// Args: {queue, prefix?, states?: [state...], start?: 0, end?: -1, asc?: false}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js: `workers` are then
//       the application_name of the workers' LISTEN sessions, `<queue>` or `<queue>:w:<name>`)
// Output: {counts: {active, completed, delayed, failed, paused, prioritized, waiting,
//   waiting-children}, paused: bool, jobs: {state: [ids]}, workers: [raw client names],
//   meta: {...queue.getMeta()}}
// `jobs` lists, for each requested state (all states by default), the ids `getJobs` returns for
// that single state with the given range and order.

const { openQueue, run } = require('./lib');

const ALL_STATES = [
  'active',
  'completed',
  'delayed',
  'failed',
  'paused',
  'prioritized',
  'waiting',
  'waiting-children',
];

run(async args => {
  const queue = openQueue(args);
  try {
    const counts = await queue.getJobCounts(...ALL_STATES);
    const paused = await queue.isPaused();
    const start = args.start === undefined ? 0 : args.start;
    const end = args.end === undefined ? -1 : args.end;
    const asc = Boolean(args.asc);
    const jobs = {};
    for (const state of args.states || ALL_STATES) {
      const found = await queue.getJobs([state], start, end, asc);
      jobs[state] = found.filter(Boolean).map(job => job.id);
    }
    const workers = (await queue.getWorkers()).map(w => w.rawname);
    const meta = await queue.getMeta();
    return { counts, paused, jobs, workers, meta };
  } finally {
    await queue.close();
  }
});
