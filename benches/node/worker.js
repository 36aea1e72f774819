'use strict';
// Node BullMQ side of the worker benchmarks (`cargo run --release -p bullmq-bench -- worker|latency|memory`).
//
// Args (JSON on argv[2]):
//   {mode: "throughput", queue, jobs, concurrency, workers, jobMs}
//       the queue is already filled by the Rust side; starts `workers` Workers in this process
//       and stops when `jobs` jobs completed. Output {seconds, clientCpuS, rssMb}.
//   {mode: "latency", queue, rate, seconds, concurrency}
//       one worker; adds `rate` jobs/s for `seconds`; add->active is measured from the add call
//       to the processor starting, add->completed to the `completed` event (client clocks).
//       Output {jobs, seconds, clientCpuS, rssMb, activeMs: {p50,p99,p999}, completedMs: {...}}.
//   {mode: "memory", queue, inflight, jobMs}
//       the queue holds `inflight` jobs; one worker at concurrency `inflight` whose jobs sleep
//       `jobMs`; RSS is sampled once all of them are running. Output {idleRssMb, inflightRssMb}.

const { bullmq, connectionOptions, quantile, finish } = require('./common');
const { Queue, Worker } = bullmq;

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const rssMb = () => process.memoryUsage().rss / (1024 * 1024);
const cpuS = before => {
  const c = process.cpuUsage(before);
  return (c.user + c.system) / 1e6;
};

async function throughput(args) {
  const connection = connectionOptions();
  const jobMs = args.jobMs || 0;
  let done = 0;
  let peakRss = rssMb();
  let resolveAll;
  const allDone = new Promise(resolve => (resolveAll = resolve));
  const processor = jobMs > 0 ? async () => { await sleep(jobMs); return { ok: true }; } : async () => ({ ok: true });
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const workers = [];
  for (let i = 0; i < args.workers; i++) {
    const worker = new Worker(args.queue, processor, { connection, concurrency: args.concurrency });
    worker.on('completed', () => {
      done += 1;
      if (done === args.jobs) resolveAll();
    });
    workers.push(worker);
  }
  const sampler = setInterval(() => { peakRss = Math.max(peakRss, rssMb()); }, 50);
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  clearInterval(sampler);
  peakRss = Math.max(peakRss, rssMb());
  await Promise.all(workers.map(w => w.close()));
  return { seconds, clientCpuS, rssMb: peakRss };
}

async function latency(args) {
  const connection = connectionOptions();
  const queue = new Queue(args.queue, { connection });
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
  }, { connection, concurrency: args.concurrency });
  worker.on('completed', job => {
    const t = addedAt.get(job.id);
    if (t !== undefined) completedMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (completedMs.length === total) resolveAll();
  });
  await worker.waitUntilReady();
  await sleep(200);
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const intervalNs = 1e9 / args.rate;
  for (let i = 0; i < total; i++) {
    // Paced against the start time, so the rate holds even when one tick runs late.
    const due = started + BigInt(Math.round(i * intervalNs));
    let now = process.hrtime.bigint();
    if (due > now) await sleep(Number(due - now) / 1e6);
    // The id is known before the add returns, so the worker can never see an unknown job.
    const id = `lat-${i}`;
    addedAt.set(id, process.hrtime.bigint());
    queue.add('bench', { index: i }, { jobId: id });
  }
  await allDone;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const clientCpuS = cpuS(cpuBefore);
  const peak = rssMb();
  await worker.close();
  await queue.close();
  activeMs.sort((a, b) => a - b);
  completedMs.sort((a, b) => a - b);
  const pct = s => ({ p50: quantile(s, 0.5), p99: quantile(s, 0.99), p999: quantile(s, 0.999) });
  return { jobs: total, seconds, clientCpuS, rssMb: peak, activeMs: pct(activeMs), completedMs: pct(completedMs) };
}

async function memory(args) {
  const connection = connectionOptions();
  let running = 0;
  let release;
  const gate = new Promise(resolve => (release = resolve));
  const idle = new Worker(`${args.queue}-idle`, async () => ({ ok: true }), { connection });
  await idle.waitUntilReady();
  await sleep(500);
  const idleRssMb = rssMb();
  await idle.close();
  const worker = new Worker(args.queue, async () => {
    running += 1;
    await gate;
    return { ok: true };
  }, { connection, concurrency: args.inflight });
  const deadline = Date.now() + 120000;
  while (running < args.inflight && Date.now() < deadline) await sleep(20);
  const inflightRssMb = rssMb();
  const reached = running;
  release();
  await worker.close();
  return { idleRssMb, inflightRssMb, running: reached };
}

async function main() {
  const args = JSON.parse(process.argv[2] || '{}');
  switch (args.mode) {
    case 'throughput': return throughput(args);
    case 'latency': return latency(args);
    case 'memory': return memory(args);
    default: throw new Error(`unknown mode ${args.mode}`);
  }
}

finish(main());
