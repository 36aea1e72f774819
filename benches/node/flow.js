'use strict';
// Node BullMQ side of the flow benchmark (`cargo run --release -p bullmq-bench -- flow`).
//
// Args (JSON on argv[2]):
//   {mode: "add", queue, children}
//       one FlowProducer.add call: a parent with `children` children, all in `queue`.
//       Output {parentId, seconds, clientCpuS}; the clock runs from the connected producer to
//       the reply.
//   {mode: "process", queue, jobs, concurrency}
//       one Worker drains the queue until the `jobs` jobs (children and parent) completed.
//       Output {seconds, clientCpuS, parentCompletions}.
// Redis memory and the parent's `completed` events are measured by the Rust harness on the
// same Redis, the same way for every side.

const { bullmq, connectionOptions, finish } = require('./common');
const { FlowProducer, Worker } = bullmq;

const cpuS = before => {
  const c = process.cpuUsage(before);
  return (c.user + c.system) / 1e6;
};

/** The same small payload the Rust side gives every child. */
function payload(i) {
  return { index: i, email: `user${i}@example.com`, template: 'welcome' };
}

async function add(args) {
  const producer = new FlowProducer({ connection: connectionOptions() });
  await producer.waitUntilReady();
  const children = [];
  for (let i = 0; i < args.children; i++) {
    children.push({ name: 'child', queueName: args.queue, data: payload(i) });
  }
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const tree = await producer.add({ name: 'parent', queueName: args.queue, data: { children: args.children }, children });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  await producer.close();
  return { parentId: tree.job.id, seconds, clientCpuS };
}

async function processAll(args) {
  let done = 0;
  let parentCompletions = 0;
  let resolveAll;
  const allDone = new Promise(resolve => (resolveAll = resolve));
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const worker = new Worker(args.queue, async () => ({ ok: true }), {
    connection: connectionOptions(),
    concurrency: args.concurrency,
  });
  worker.on('completed', job => {
    done += 1;
    if (job.name === 'parent') parentCompletions += 1;
    if (done >= args.jobs) resolveAll();
  });
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  await worker.close();
  return { seconds, clientCpuS, parentCompletions };
}

const args = JSON.parse(process.argv[2] || '{}');
finish(args.mode === 'add' ? add(args) : processAll(args));
