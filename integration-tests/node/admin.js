'use strict';
// One administrative operation through Node BullMQ, so a scenario can be replayed through Node
// and through the Rust Queue and the results compared.
//
// Args: {queue, prefix?, op, ...op arguments}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js; there Node 6.7.0
//       throws "not implemented" for removeDeprecatedPriorityKey, and removeOrphanedJobs is 0)
//   pause | resume | isPaused
//   drain           {delayed?: bool}
//   clean           {grace: ms, limit: n, type: 'completed'|'failed'|'wait'|'delayed'|...}
//   obliterate      {force?: bool, count?: n}
//   remove          {id, removeChildren?: bool}
//   updateProgress  {id, progress}
//   log             {id, row, keepLogs?}
//   getJobLogs      {id, start?, end?, asc?}
//   updateData      {id, data}
//   getJobState     {id}
//   getMeta
//   retryJobs       {state?, count?, timestamp?}  queue.retryJobs (Node's defaults when absent)
//   promoteJobs     {count?}                      queue.promoteJobs
//   removeUnprocessedChildren {id}                job.removeUnprocessedChildren()
//   extendLock      {id, token, duration}         job.extendLock(token, duration): 1 or 0
//                                                 (an absent job is loaded as a bare Job so the
//                                                 call still reaches the script)
//   removeChildDependency     {id}                job.removeChildDependency(): true / false
//   removeUnprocessedChildren {id}                job.removeUnprocessedChildren()
//   removeJobDeduplicationKey {id}                job.removeDeduplicationKey(): true / false
//   removeOrphanedJobs        {count?, limit?}    queue.removeOrphanedJobs(count, limit)
//   getDelayedCount           {timestamp?}        queue.getDelayedCount(timestamp)
//   getVersion                                    queue.getVersion()
//   setGlobalConcurrency      {concurrency}       queue.setGlobalConcurrency(concurrency)
//   getWorkers                                    queue.getWorkers(): the sorted raw names
//   setGlobalRateLimit        {max, duration}     queue.setGlobalRateLimit(max, duration)
//   removeDeprecatedPriorityKey                   queue.removeDeprecatedPriorityKey()
//   recordJobCountsMetric     {types?}            queue.recordJobCountsMetric(...types)
//   isJobScheduler            {id}                (await queue.jobScheduler).isJobScheduler(id)
//   jobAction                 {id, action, args?} job[action](...args) on Job.fromId
//   stateJobIds               {getter}            queue[getter]() (getWaiting, getFailed, ...): the ids
// Output: {result: <what the BullMQ call returned, or null>}

const { Job } = require('bullmq');
const { openQueue, run } = require('./lib');

const OPS = {
  pause: queue => queue.pause(),
  resume: queue => queue.resume(),
  isPaused: queue => queue.isPaused(),
  drain: (queue, a) => queue.drain(Boolean(a.delayed)),
  clean: (queue, a) => queue.clean(a.grace || 0, a.limit || 0, a.type || 'completed'),
  obliterate: (queue, a) => queue.obliterate({ force: Boolean(a.force), count: a.count || 1000 }),
  remove: (queue, a) => queue.remove(String(a.id), { removeChildren: a.removeChildren !== false }),
  updateProgress: (queue, a) => queue.updateJobProgress(String(a.id), a.progress),
  log: (queue, a) => queue.addJobLog(String(a.id), a.row, a.keepLogs),
  getJobLogs: (queue, a) =>
    queue.getJobLogs(String(a.id), a.start || 0, a.end === undefined ? -1 : a.end, a.asc !== false),
  updateData: async (queue, a) => {
    const job = await queue.getJob(String(a.id));
    if (!job) throw new Error(`job ${a.id} not found`);
    return job.updateData(a.data);
  },
  getJobState: (queue, a) => queue.getJobState(String(a.id)),
  getMeta: queue => queue.getMeta(),
  stateJobIds: async (queue, a) => (await queue[a.getter]()).map(job => job.id),
  retryJobs: (queue, a) => {
    const opts = {};
    for (const key of ['state', 'count', 'timestamp']) if (a[key] !== undefined) opts[key] = a[key];
    return queue.retryJobs(opts);
  },
  promoteJobs: (queue, a) => queue.promoteJobs(a.count === undefined ? {} : { count: a.count }),
  removeUnprocessedChildren: async (queue, a) => {
    const job = await queue.getJob(String(a.id));
    if (!job) throw new Error(`job ${a.id} not found`);
    return job.removeUnprocessedChildren();
  },
  extendLock: async (queue, a) => {
    const job = (await Job.fromId(queue, String(a.id))) || new Job(queue, 'absent', {}, {}, String(a.id));
    return job.extendLock(a.token, a.duration);
  },
  removeChildDependency: async (queue, a) => (await mustGet(queue, a.id)).removeChildDependency(),
  removeUnprocessedChildren: async (queue, a) => (await mustGet(queue, a.id)).removeUnprocessedChildren(),
  removeJobDeduplicationKey: async (queue, a) => (await mustGet(queue, a.id)).removeDeduplicationKey(),
  removeOrphanedJobs: (queue, a) =>
    queue.removeOrphanedJobs(a.count === undefined ? 1000 : a.count, a.limit === undefined ? 0 : a.limit),
  getDelayedCount: (queue, a) => queue.getDelayedCount(a.timestamp === undefined ? undefined : a.timestamp),
  getVersion: queue => queue.getVersion(),
  setGlobalConcurrency: (queue, a) => queue.setGlobalConcurrency(a.concurrency),
  getWorkers: async queue => (await queue.getWorkers()).map(w => w.rawname || w.name).sort(),
  setGlobalRateLimit: (queue, a) => queue.setGlobalRateLimit(a.max, a.duration),
  removeDeprecatedPriorityKey: queue => queue.removeDeprecatedPriorityKey(),
  recordJobCountsMetric: (queue, a) => queue.recordJobCountsMetric(...(a.types || [])),
  isJobScheduler: async (queue, a) => (await queue.jobScheduler).isJobScheduler(String(a.id)),
  jobAction: async (queue, a) => {
    const job = await mustGet(queue, a.id);
    return job[a.action](...(a.args || []));
  },
};

async function mustGet(queue, id) {
  const job = await Job.fromId(queue, String(id));
  if (!job) throw new Error(`job ${id} not found`);
  return job;
}

run(async args => {
  const op = OPS[args.op];
  if (!op) throw new Error(`unknown op ${JSON.stringify(args.op)}; known: ${Object.keys(OPS).join(', ')}`);
  const queue = openQueue(args);
  try {
    const result = await op(queue, args);
    return { result: result === undefined ? null : result };
  } finally {
    await queue.close();
  }
});
