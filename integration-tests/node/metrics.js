'use strict';
// Reads a queue's worker metrics with Node BullMQ's `queue.getMetrics(type, start, end)`.
//
// Args: {queue, prefix?, type: 'completed' | 'failed', start?: 0, end?: -1}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js; Node's PG backend
//       reports meta prevTS and prevCount as 0)
// Output: {metrics: {meta: {count, prevTS, prevCount}, data: [n, ...], count}}

const { openQueue, run } = require('./lib');

run(async args => {
  const queue = openQueue(args);
  try {
    const start = args.start === undefined ? 0 : args.start;
    const end = args.end === undefined ? -1 : args.end;
    return { metrics: await queue.getMetrics(args.type || 'completed', start, end) };
  } finally {
    await queue.close();
  }
});
