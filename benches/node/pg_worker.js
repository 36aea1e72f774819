'use strict';
// Node BullMQ side of the PostgreSQL worker scenarios (`cargo run --release -p bullmq-bench --
// postgres`), on Node's own PostgreSQL backend (`createPostgresBackend`).
//
// Args (JSON on argv[2]), each with {pgUrl?, schema} (migrated by Node's migrator beforehand):
//   {mode: "throughput", queue, jobs, concurrency}
//       the queue is already filled by the Rust side; one Worker of `concurrency` no-op slots,
//       stops when `jobs` jobs completed (the `completed` event, after the finish committed).
//       Output {seconds, clientCpuS, rssMb}.
//   {mode: "latency", queue, rate, seconds, concurrency}
//       one Worker on an empty queue; adds `rate` jobs/s for `seconds` (paced against the start,
//       ids known before the add returns); add->active to the processor starting,
//       add->completed to the `completed` event (client clocks).
//       Output {jobs, seconds, clientCpuS, rssMb, activeMs: {p50,p99,p999}, completedMs: {...}}.
// The same measurements as worker.js does on Redis.

const { bullmq, pgConnection, quantile, finish } = require('./common');
const { Queue, Worker, createPostgresBackend } = bullmq;

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const rssMb = () => process.memoryUsage().rss / (1024 * 1024);
const cpuS = before => {
  const c = process.cpuUsage(before);
  return (c.user + c.system) / 1e6;
};

async function throughput(args) {
  const connection = pgConnection(args);
  let done = 0;
  let peakRss = rssMb();
  let resolveAll;
  const allDone = new Promise(resolve => (resolveAll = resolve));
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const worker = new Worker(args.queue, async () => ({ ok: true }),
    { connection, concurrency: args.concurrency }, createPostgresBackend);
  worker.on('completed', () => {
    done += 1;
    if (done === args.jobs) resolveAll();
  });
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb()); }, 50);
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  clearInterval(sampler);
  peakRss = Math.max(peakRss, rssMb());
  await worker.close();
  return { seconds, clientCpuS, rssMb: peakRss };
}

async function latency(args) {
  const connection = pgConnection(args);
  const queue = new Queue(args.queue, { connection }, createPostgresBackend);
  await queue.waitUntilReady();
  const addedAt = new Map();
  const activeMs = [];
  const completedMs = [];
  const total = Math.round(args.rate * args.seconds);
  let resolveAll;
  const allDone = new Promise(resolve => (resolveAll = resolve));
  const worker = new Worker(args.queue, async job => {
    const t = addedAt.get(job.id);
    if (t !== undefined) activeMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    return { ok: true };
  }, { connection, concurrency: args.concurrency }, createPostgresBackend);
  worker.on('completed', job => {
    const t = addedAt.get(job.id);
    if (t !== undefined) completedMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (completedMs.length === total) resolveAll();
  });
  await worker.waitUntilReady();
  await sleep(200);
  let peakRss = rssMb();
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb()); }, 50);
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const intervalNs = 1e9 / args.rate;
  const adds = [];
  for (let i = 0; i < total; i++) {
    const due = started + BigInt(Math.round(i * intervalNs));
    const now = process.hrtime.bigint();
    if (due > now) await sleep(Number(due - now) / 1e6);
    const id = `lat-${i}`;
    addedAt.set(id, process.hrtime.bigint());
    adds.push(queue.add('bench', { index: i }, { jobId: id }));
  }
  await Promise.all(adds);
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  clearInterval(sampler);
  await worker.close();
  await queue.close();
  activeMs.sort((a, b) => a - b);
  completedMs.sort((a, b) => a - b);
  const pct = s => ({ p50: quantile(s, 0.5), p99: quantile(s, 0.99), p999: quantile(s, 0.999) });
  return { jobs: total, seconds, clientCpuS, rssMb: peakRss, activeMs: pct(activeMs), completedMs: pct(completedMs) };
}

async function main() {
  const args = JSON.parse(process.argv[2] || '{}');
  switch (args.mode) {
    case 'throughput': return throughput(args);
    case 'latency': return latency(args);
    default: throw new Error(`unknown mode ${args.mode}`);
  }
}

finish(main());
