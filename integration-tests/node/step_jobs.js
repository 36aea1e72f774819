'use strict';
// The step-job pattern (https://docs.bullmq.io/patterns/process-step-jobs) run by a Node
// BullMQ Worker: the oracle of integration-tests/tests/step_jobs.rs, whose Rust processor is
// the same program.
//
// Args: {queue, prefix?, parents: n (how many parent jobs to wait for), timeoutMs?: 60000,
//        delayMs?: 300}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
// Jobs named "child" return {value: data.n * 10}. Any other job walks its `data.step`:
//   "start"     adds `data.children` children {n: 1..} to the same queue with this job as
//               parent (with `data.waitForFirst`, the first child's id is kept in
//               `data.first`), then "wait"
//   "wait"      job.moveToWaitingChildren(token) (with `data.first`: `{ child: { id: first,
//               queue } }`, waiting for that child only): moved -> throw WaitingChildrenError (runs
//               again in "wait" once the children are done); nothing pending -> data.total =
//               sum of the children's values, then "requeue"
//   "requeue"   data.step = "delay"; job.moveToWait(token); throw WaitingError
//   "delay"     data.step = "finish"; job.moveToDelayed(now + delayMs, token); throw DelayedError
//   "finish"    returns {total}
// Every change of step is stored with job.updateData before the move that follows it.
// Stops once `parents` jobs other than children completed, or after `timeoutMs`.
// Output: {completed: [{id, returnvalue}], failed: [{id, failedReason}], stoppedBy}

const {
  Queue,
  Worker,
  WaitingChildrenError,
  WaitingError,
  DelayedError,
} = require('bullmq');
const { classOptions, backendFactory, run, sleep } = require('./lib');

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const delayMs = args.delayMs || 300;
  const children = new Queue(args.queue, classOptions(args), backendFactory(args));

  async function processor(job, token) {
    if (job.name === 'child') return { value: job.data.n * 10 };
    let data = job.data;
    const store = async next => {
      data = next;
      await job.updateData(data);
    };
    for (;;) {
      switch (data.step) {
        case 'start': {
          let first;
          for (let n = 1; n <= (data.children || 0); n++) {
            const child = await children.add(
              'child',
              { n },
              { parent: { id: job.id, queue: job.queueQualifiedName } },
            );
            if (first === undefined) first = child.id;
          }
          const next = { ...data, step: 'wait' };
          if (data.waitForFirst) next.first = first;
          await store(next);
          break;
        }
        case 'wait': {
          const opts = data.first
            ? { child: { id: data.first, queue: job.queueQualifiedName } }
            : {};
          if (await job.moveToWaitingChildren(token, opts)) throw new WaitingChildrenError();
          const values = await job.getChildrenValues();
          const total = Object.values(values).reduce((sum, v) => sum + v.value, 0);
          await store({ ...data, step: 'requeue', total });
          break;
        }
        case 'requeue': {
          await store({ ...data, step: 'delay' });
          await job.moveToWait(token);
          throw new WaitingError();
        }
        case 'delay': {
          await store({ ...data, step: 'finish' });
          await job.moveToDelayed(Date.now() + delayMs, token);
          throw new DelayedError();
        }
        case 'finish':
          return { total: data.total };
        default:
          throw new Error(`unknown step ${data.step}`);
      }
    }
  }

  const completed = [];
  const failed = [];
  const worker = new Worker(
    args.queue,
    processor,
    { ...classOptions(args), concurrency: 1, drainDelay: 1 },
    backendFactory(args),
  );
  worker.on('completed', (job, returnvalue) => {
    completed.push({ id: job.id, name: job.name, returnvalue });
  });
  worker.on('failed', (job, error) => {
    failed.push({ id: job ? job.id : null, failedReason: error ? error.message : null });
  });
  worker.on('error', error => process.stderr.write(`worker error: ${error}\n`));

  const started = Date.now();
  const timeoutMs = args.timeoutMs || 60000;
  let stoppedBy;
  for (;;) {
    if (completed.filter(c => c.name !== 'child').length + failed.length >= args.parents) {
      stoppedBy = 'count';
      break;
    }
    if (Date.now() - started >= timeoutMs) {
      stoppedBy = 'timeout';
      break;
    }
    await sleep(20);
  }
  await worker.close();
  await children.close();
  return { completed, failed, stoppedBy };
});
