'use strict';
// Runs a deduplication scenario through Node BullMQ (Queue + Worker) and reports, step by step,
// what the adds returned and the deduplication state left in Redis, so the same steps run
// through the Rust Queue and Worker (integration-tests/tests/dedup_lifecycle.rs) can be compared.
//
// Redis only: `snap` and `waitFor` read the deduplication state as Redis keys.
//
// Args: {queue, prefix?, steps: [step]} where a step is one of
//   {op: "add", label, name, data, opts}   queue.add; reports {add: label, id}
//   {op: "addBulk", label, jobs: [{name, data, opts}]}
//                                          queue.addBulk; reports {add: label, ids}
//   {op: "work", attempts: n}              a Worker (concurrency 1) runs until n attempts have
//                                          ended (completed or failed, retries included), then
//                                          closes
//   {op: "hold", steps: [step]}            a Worker takes the first job, whose data has
//                                          `hold: true`; while it runs, `steps` run; then the
//                                          worker is closed (so it fetches nothing more) and
//                                          the job released
//   {op: "snap", label}                    reports {snap: label, state} (see below)
//   {op: "remove", ref}                    queue.remove(id of the add labelled `ref`)
//   {op: "clean", type}                    queue.clean(0, 0, type)
//   {op: "drain", delayed}                 queue.drain(delayed)
//   {op: "obliterate"}                     queue.pause() then queue.obliterate({force: true})
//   {op: "waitFor", key}                   waits (up to 60 s) until the queue's key `key` exists,
//                                          e.g. written by another client
// The processor: data.hold waits for the release (first attempt only), data.fail throws,
// data.failAttempts throws while attemptsMade < n; it returns {ok: true}.
// state: {de: {id: {value, ttl: has an expiry}}, dn: {id: fields (data, opts parsed)},
// lists: {wait, active (in order), delayed, prioritized, completed, failed (sorted ids)}, id (the
// counter), jobs: {id: selected fields}, events: the added / deduplicated / removed / waiting /
// delayed events, `delay` as "<time>"}.
// Output: {results: [reports, in step order]}

const { Worker } = require('bullmq');
const { connectionOptions, openQueue, rawClient, run } = require('./lib');

const JOB_FIELDS = ['name', 'data', 'opts', 'deid', 'delay', 'priority', 'atm', 'returnvalue',
  'failedReason'];
const JSON_FIELDS = new Set(['data', 'opts', 'returnvalue']);
// The events of adds and of queueing jobs (times replaced: they differ between runs).
const EVENTS = new Set(['added', 'deduplicated', 'removed', 'waiting', 'delayed']);

function parsed(field, value) {
  if (JSON_FIELDS.has(field)) {
    try {
      return JSON.parse(value);
    } catch (_) {
      return value;
    }
  }
  return value;
}

async function snapshot(redis, base) {
  const state = { de: {}, dn: {}, lists: {}, jobs: {}, events: [] };
  for (const key of (await redis.keys(`${base}de:*`)).sort()) {
    const pttl = await redis.pttl(key);
    state.de[key.slice(base.length + 3)] = { value: await redis.get(key), ttl: pttl > 0 };
  }
  for (const key of (await redis.keys(`${base}dn:*`)).sort()) {
    const fields = await redis.hgetall(key);
    for (const field of ['data', 'opts']) {
      if (fields[field] !== undefined) fields[field] = parsed(field, fields[field]);
    }
    state.dn[key.slice(base.length + 3)] = fields;
  }
  const ids = new Set();
  for (const list of ['wait', 'active']) {
    state.lists[list] = await redis.lrange(`${base}${list}`, 0, -1);
    state.lists[list].forEach(id => ids.add(id));
  }
  // Sorted: two jobs finished in the same millisecond may tie on their score.
  for (const zset of ['delayed', 'prioritized', 'completed', 'failed']) {
    state.lists[zset] = (await redis.zrange(`${base}${zset}`, 0, -1)).sort();
    state.lists[zset].forEach(id => ids.add(id));
  }
  state.id = await redis.get(`${base}id`);
  for (const id of [...ids].sort()) {
    const values = await redis.hmget(`${base}${id}`, ...JOB_FIELDS);
    const job = {};
    JOB_FIELDS.forEach((field, i) => {
      if (values[i] !== null) job[field] = parsed(field, values[i]);
    });
    state.jobs[id] = job;
  }
  const entries = await redis.xrange(`${base}events`, '-', '+');
  for (const [, flat] of entries) {
    const fields = {};
    for (let i = 0; i < flat.length; i += 2) fields[flat[i]] = flat[i + 1];
    if (fields.delay !== undefined) fields.delay = '<time>';
    if (EVENTS.has(fields.event)) state.events.push(fields);
  }
  return state;
}

run(async args => {
  const prefix = args.prefix || 'bull';
  const base = `${prefix}:${args.queue}:`;
  const queue = openQueue(args);
  const redis = rawClient();
  const results = [];
  const labels = {};
  let holdStarted = () => {};
  let holdReleased = Promise.resolve();

  async function processor(job) {
    const data = job.data || {};
    if (data.hold && job.attemptsMade === 0) {
      holdStarted();
      await holdReleased;
    }
    if (data.fail) throw new Error('failed on purpose');
    if (data.failAttempts !== undefined && job.attemptsMade < data.failAttempts) {
      throw new Error(`failing attempt ${job.attemptsMade + 1} on purpose`);
    }
    return { ok: true };
  }

  function startWorker() {
    let ended = 0;
    let waiters = [];
    const worker = new Worker(args.queue, processor, {
      connection: connectionOptions(),
      prefix,
      concurrency: 1,
      drainDelay: 1,
    });
    const onEnd = () => {
      ended += 1;
      waiters = waiters.filter(w => !w());
    };
    worker.on('completed', onEnd);
    worker.on('failed', onEnd);
    worker.on('error', error => process.stderr.write(`worker error: ${error}\n`));
    const endedAtLeast = n =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${n} attempts did not end`)), 60000);
        const check = () => {
          if (ended >= n) {
            clearTimeout(timer);
            resolve();
            return true;
          }
          return false;
        };
        if (!check()) waiters.push(check);
      });
    return { worker, endedAtLeast };
  }

  async function runSteps(steps) {
    for (const step of steps) {
      switch (step.op) {
        case 'add': {
          const job = await queue.add(step.name, step.data, step.opts);
          labels[step.label] = job.id;
          results.push({ add: step.label, id: job.id });
          break;
        }
        case 'addBulk': {
          const jobs = await queue.addBulk(step.jobs);
          results.push({ add: step.label, ids: jobs.map(job => job.id) });
          break;
        }
        case 'work': {
          const { worker, endedAtLeast } = startWorker();
          await endedAtLeast(step.attempts);
          await worker.close();
          break;
        }
        case 'hold': {
          const started = new Promise(resolve => {
            holdStarted = resolve;
          });
          let release;
          holdReleased = new Promise(resolve => {
            release = resolve;
          });
          const { worker, endedAtLeast } = startWorker();
          await started;
          await runSteps(step.steps);
          // Closing first: the finishing job then fetches nothing (Node passes fetchNext false).
          const closing = worker.close();
          release();
          await endedAtLeast(1);
          await closing;
          break;
        }
        case 'snap':
          results.push({ snap: step.label, state: await snapshot(redis, base) });
          break;
        case 'remove':
          await queue.remove(String(labels[step.ref]));
          break;
        case 'clean':
          await queue.clean(0, 0, step.type);
          break;
        case 'drain':
          await queue.drain(Boolean(step.delayed));
          break;
        case 'obliterate':
          await queue.pause();
          await queue.obliterate({ force: true });
          break;
        case 'waitFor': {
          const deadline = Date.now() + 60000;
          while (!(await redis.exists(`${base}${step.key}`))) {
            if (Date.now() > deadline) throw new Error(`${step.key} never appeared`);
            await new Promise(resolve => setTimeout(resolve, 20));
          }
          break;
        }
        default:
          throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    }
  }

  try {
    await runSteps(args.steps || []);
    return { results };
  } finally {
    await queue.close();
    await redis.quit();
  }
});
