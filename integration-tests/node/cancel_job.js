'use strict';
// Node BullMQ's `worker.cancelJob(id, reason)` on jobs whose processor honours its abort
// signal: the oracle of integration-tests/tests/worker_control.rs.
//
// Args: {queue, prefix?, jobs: n (attempts to wait for: completed + failed events),
//        timeoutMs?: 60000}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
// The processor (it takes the signal, so the Worker gives it one):
//   data.cancel set and first attempt (attemptsMade 0): listens to its signal, then asks its own
//   Worker to cancel it with `data.cancel` as the reason, and rejects with
//   `new Error(signal.reason)` once aborted (what a processor honouring the signal does);
//   otherwise returns {ok: true}.
// Output: {cancelled: [{id, found}], completed: [id], failed: [{id, failedReason}], stoppedBy}

const { Worker } = require('bullmq');
const { classOptions, backendFactory, run } = require('./lib');

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const expected = args.jobs || 1;
  const cancelled = [];
  const completed = [];
  const failed = [];
  let worker;
  const processor = async (job, token, signal) => {
    const reason = job.data && job.data.cancel;
    if (!reason || job.attemptsMade > 0) return { ok: true };
    const aborted = new Promise((_, reject) => {
      signal.addEventListener('abort', () => reject(new Error(String(signal.reason))), {
        once: true,
      });
    });
    cancelled.push({ id: job.id, found: worker.cancelJob(job.id, reason) });
    return aborted;
  };
  let finish;
  const done = new Promise(resolve => (finish = resolve));
  const ended = () => {
    if (completed.length + failed.length >= expected) finish('count');
  };
  worker = new Worker(
    args.queue,
    processor,
    { ...classOptions(args), concurrency: 1 },
    backendFactory(args),
  );
  worker.on('completed', job => {
    completed.push(job.id);
    ended();
  });
  worker.on('failed', (job, err) => {
    failed.push({ id: job.id, failedReason: err.message });
    ended();
  });
  const timer = setTimeout(() => finish('timeout'), args.timeoutMs || 60000);
  const stoppedBy = await done;
  clearTimeout(timer);
  await worker.close();
  return { cancelled, completed, failed, stoppedBy };
});
