'use strict';
// Job scheduler operations through Node BullMQ, to be replayed through the Rust Queue and the
// results compared.
//
// Args: {queue, prefix?, op, ...}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
//   upsert  {id, repeat, template?}   repeat dates are ms numbers; returns {id, delay, opts} of
//                                     the pending iteration (null when none was created)
//   get     {id}                      Node's getJobScheduler
//   list    {start?, end?, asc?}      Node's getJobSchedulers
//   count                             Node's getJobSchedulersCount
//   remove  {id}                      Node's removeJobScheduler
// Output: {result}; a refusal prints {error: message} (exit 0) so its wording can be compared.

const { openQueue, run } = require('./lib');

const OPS = {
  upsert: async (queue, a) => {
    const job = await queue.upsertJobScheduler(a.id, a.repeat, a.template);
    return job ? { id: job.id, delay: job.delay, opts: job.opts, name: job.name, data: job.data } : null;
  },
  get: (queue, a) => queue.getJobScheduler(a.id),
  list: (queue, a) =>
    queue.getJobSchedulers(a.start || 0, a.end === undefined ? -1 : a.end, Boolean(a.asc)),
  count: queue => queue.getJobSchedulersCount(),
  remove: (queue, a) => queue.removeJobScheduler(a.id),
};

run(async args => {
  const op = OPS[args.op];
  if (!op) throw new Error(`unknown op ${JSON.stringify(args.op)}; known: ${Object.keys(OPS).join(', ')}`);
  const queue = openQueue(args);
  try {
    try {
      const result = await op(queue, args);
      return { result: result === undefined ? null : result };
    } catch (error) {
      return { error: error.message };
    }
  } finally {
    await queue.close();
  }
});
