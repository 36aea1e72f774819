'use strict';
// Runs a Node BullMQ Worker on a queue and reports what it processed, in order.
//
// Args: {queue, prefix?, concurrency?: 1, stopAfter?: n, idleMs?: ms, timeoutMs?: 60000,
//        name?: worker name, lockDuration?: ms, stalledInterval?: ms, drainDelay?: s,
//        limiter?: {max, duration}, metrics?: {maxDataPoints}}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js; same output)
// With `metrics` the worker records per-minute completed / failed counts (Node's metrics keys).
// The processor's behaviour is chosen by the job's data (all optional, combined in this order):
//   {sleepMs: n}            wait n ms
//   {progress: v | [v...]}  job.updateProgress(v) for each value
//   {log: "row" | [rows]}   job.log(row) for each row
//   {fail: true | "msg"}    throw Error(msg) (default message "failed on purpose")
//   {unrecoverable: "msg"}  throw UnrecoverableError(msg)
//   {failAttempts: n}       throw while job.attemptsMade < n (fails the first n attempts)
//   {returnValue: v}        return v (default {processedBy: "node"})
//   {rateLimitMs: n}        on the job's first run only, before all of the above:
//                           worker.rateLimit(n) then throw Worker.RateLimitError()
// Stops when `stopAfter` attempts have ended (completed + failed events), when no attempt has
// ended for `idleMs` (counted from start too), or after `timeoutMs`, whichever comes first.
// Output: {processed: [{id, name, data, attemptsMade, startedAt}] in processor start order,
//          completed: [{id, returnvalue}], failed: [{id, failedReason, attemptsMade}],
//          stoppedBy: "count" | "idle" | "timeout"}

const { Worker, UnrecoverableError } = require('bullmq');
const { classOptions, backendFactory, run, sleep } = require('./lib');

function asList(value) {
  return Array.isArray(value) ? value : [value];
}

async function processor(job) {
  const data = job.data && typeof job.data === 'object' ? job.data : {};
  if (data.sleepMs) await sleep(data.sleepMs);
  if (data.progress !== undefined) {
    for (const value of asList(data.progress)) await job.updateProgress(value);
  }
  if (data.log !== undefined) {
    for (const row of asList(data.log)) await job.log(String(row));
  }
  if (data.unrecoverable) throw new UnrecoverableError(String(data.unrecoverable));
  if (data.fail) throw new Error(data.fail === true ? 'failed on purpose' : String(data.fail));
  if (data.failAttempts !== undefined && job.attemptsMade < data.failAttempts) {
    throw new Error(`failing attempt ${job.attemptsMade + 1} on purpose`);
  }
  return data.returnValue !== undefined ? data.returnValue : { processedBy: 'node' };
}

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const processed = [];
  const completed = [];
  const failed = [];
  let lastActivity = Date.now();
  const started = Date.now();

  const worker = new Worker(
    args.queue,
    async job => {
      processed.push({
        id: job.id,
        name: job.name,
        data: job.data,
        attemptsMade: job.attemptsMade,
        startedAt: Date.now(),
      });
      const data = job.data && typeof job.data === 'object' ? job.data : {};
      if (data.rateLimitMs && processed.filter(p => p.id === job.id).length === 1) {
        await worker.rateLimit(data.rateLimitMs);
        throw Worker.RateLimitError();
      }
      return processor(job);
    },
    {
      ...classOptions(args),
      concurrency: args.concurrency || 1,
      name: args.name,
      lockDuration: args.lockDuration || 30000,
      stalledInterval: args.stalledInterval || 30000,
      drainDelay: args.drainDelay || 1,
      limiter: args.limiter,
      metrics: args.metrics,
    },
    backendFactory(args),
  );
  worker.on('completed', (job, returnvalue) => {
    lastActivity = Date.now();
    completed.push({ id: job.id, returnvalue: returnvalue === undefined ? null : returnvalue });
  });
  worker.on('failed', (job, error) => {
    lastActivity = Date.now();
    failed.push({
      id: job ? job.id : null,
      failedReason: error ? error.message : null,
      attemptsMade: job ? job.attemptsMade : null,
    });
  });
  // Connection errors are retried by the worker; report them on stderr only.
  worker.on('error', error => process.stderr.write(`worker error: ${error}\n`));

  const timeoutMs = args.timeoutMs || 60000;
  let stoppedBy;
  for (;;) {
    const now = Date.now();
    if (args.stopAfter !== undefined && completed.length + failed.length >= args.stopAfter) {
      stoppedBy = 'count';
      break;
    }
    if (args.idleMs !== undefined && now - lastActivity >= args.idleMs) {
      stoppedBy = 'idle';
      break;
    }
    if (now - started >= timeoutMs) {
      stoppedBy = 'timeout';
      break;
    }
    await sleep(20);
  }
  await worker.close();
  return { processed, completed, failed, stoppedBy };
});
