'use strict';
// Runs a manual-processing program with a Node BullMQ Worker that has no processor
// (https://docs.bullmq.io/patterns/manually-fetching-jobs).
//
// Redis only: `lock` writes a raw Redis key and `add` names a parent by its prefixed queue key.
//
// Args: {queue, prefix?, name?, lockDuration?, steps: [step]}, each step one of
//   {op: "get", token, block?: false}            worker.getNextJob(token, {block}); the job
//                                                becomes the current one (or none)
//   {op: "load", id, token}                      Job.fromId: a job someone else fetched with
//                                                `token` becomes the current one
//   {op: "extend", ms, token?}                   job.extendLock(token, ms)
//   {op: "complete", value, fetchNext, token?}   job.moveToCompleted(value, token, fetchNext)
//   {op: "fail", message, unrecoverable?, fetchNext, token?}
//                                                job.moveToFailed(err, token, fetchNext)
//   {op: "delay", ms, token?}                    job.moveToDelayed(Date.now() + ms, token)
//   {op: "sleep", ms}
//   {op: "add", name, data, opts}                queue.add (opts.parent {id} links a child to a
//                                                parent of this queue)
//   {op: "lock", id, token, ms}                  writes a stray lock (SET {id}:lock token PX ms),
//                                                as another client could
// `token` defaults to the one the current job was fetched with. A fetched next job becomes the
// current one, locked with the same token; without one the finished job stays current.
// Output: {results: [...]}, one per step: {id} (the job fetched, or null),
// {extended: bool}, {error: message} for a call that threw (the current job is unchanged),
// {delayed: true}, {added: id} for add, or {} for sleep and lock.

const { Queue, Worker, Job, UnrecoverableError } = require('bullmq');
const { connectionOptions, rawClient, run, sleep } = require('./lib');

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const worker = new Worker(args.queue, null, {
    connection: connectionOptions(),
    prefix: args.prefix || 'bull',
    name: args.name || 'manual',
    lockDuration: args.lockDuration || 30000,
    drainDelay: 1,
  });
  worker.on('error', () => {});
  const results = [];
  let current = null;
  let currentToken = null;
  // A fetched next job becomes the current one; without one, the finished job stays current
  // (so a step can try to finish it again).
  const take = (result, token) => {
    if (Array.isArray(result) && result[0]) {
      current = Job.fromJSON(worker, result[0], result[1]);
      currentToken = token;
      return { id: current.id };
    }
    return { id: null };
  };
  try {
    for (const step of args.steps || []) {
      const token = step.token || currentToken;
      try {
        switch (step.op) {
          case 'get': {
            const job = await worker.getNextJob(step.token, { block: !!step.block });
            current = job || null;
            currentToken = step.token;
            results.push({ id: current ? current.id : null });
            break;
          }
          case 'load': {
            current = await Job.fromId(worker, step.id);
            currentToken = step.token;
            results.push({ id: current ? current.id : null });
            break;
          }
          case 'extend':
            results.push({ extended: (await current.extendLock(token, step.ms)) === 1 });
            break;
          case 'complete':
            results.push(take(await current.moveToCompleted(step.value, token, !!step.fetchNext), token));
            break;
          case 'fail': {
            const err = step.unrecoverable
              ? new UnrecoverableError(step.message)
              : new Error(step.message);
            results.push(take(await current.moveToFailed(err, token, !!step.fetchNext), token));
            break;
          }
          case 'delay':
            await current.moveToDelayed(Date.now() + step.ms, token);
            results.push({ delayed: true });
            break;
          case 'sleep':
            await sleep(step.ms);
            results.push({});
            break;
          case 'add': {
            const queue = new Queue(args.queue, { connection: connectionOptions(), prefix: args.prefix || 'bull' });
            try {
              const opts = { ...(step.opts || {}) };
              // A parent of this queue unless named otherwise.
              if (opts.parent && !opts.parent.queue) {
                opts.parent = { ...opts.parent, queue: `${args.prefix || 'bull'}:${args.queue}` };
              }
              const added = await queue.add(step.name, step.data || {}, opts);
              results.push({ added: added.id });
            } finally {
              await queue.close();
            }
            break;
          }
          case 'lock': {
            const raw = rawClient();
            try {
              await raw.set(`${args.prefix || 'bull'}:${args.queue}:${step.id}:lock`, step.token, 'PX', step.ms);
            } finally {
              await raw.quit();
            }
            results.push({});
            break;
          }
          default:
            throw new Error(`unknown step ${JSON.stringify(step)}`);
        }
      } catch (error) {
        if (['sleep', 'lock', 'add'].includes(step.op) || !current) throw error;
        results.push({ error: error.message });
      }
    }
    return { results };
  } finally {
    await worker.close();
  }
});
