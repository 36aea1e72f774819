'use strict';
// Node BullMQ side of the PostgreSQL producer scenarios (`cargo run --release -p bullmq-bench --
// postgres`), on Node's own PostgreSQL backend (`createPostgresBackend`).
//
// Args (JSON on argv[2]): {pgUrl?, schema, queue, jobs, mode: "add" | "add-concurrent" | "addBulk",
//                          concurrency?: 100, batch?: 1000}
//   `schema` is migrated by Node's migrator beforehand (the Rust side does it).
// Output: one JSON document {mode, jobs, seconds, clientCpuMs, addP50Ms?, addP99Ms?}: the same
// shape and the same clock as producer.js (from the ready queue to the last add's reply).

const { bullmq, pgConnection, quantile, finish } = require('./common');
const { Queue, createPostgresBackend } = bullmq;

/** The same small payload the Rust scenarios add. */
function payload(i) {
  return { index: i, email: `user${i}@example.com`, template: 'welcome' };
}

async function main() {
  const args = JSON.parse(process.argv[2] || '{}');
  const jobs = args.jobs || 1000;
  const queue = new Queue(args.queue, { connection: pgConnection(args) }, createPostgresBackend);
  await queue.waitUntilReady();
  const latencies = [];
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  switch (args.mode) {
    case 'add':
      for (let i = 0; i < jobs; i++) {
        const t = process.hrtime.bigint();
        await queue.add('bench', payload(i));
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      break;
    case 'add-concurrent': {
      const concurrency = args.concurrency || 100;
      let next = 0;
      const lane = async () => {
        while (next < jobs) {
          const i = next++;
          const t = process.hrtime.bigint();
          await queue.add('bench', payload(i));
          latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, lane));
      break;
    }
    case 'addBulk': {
      const batch = args.batch || 1000;
      for (let start = 0; start < jobs; start += batch) {
        const chunk = [];
        for (let i = start; i < Math.min(jobs, start + batch); i++) {
          chunk.push({ name: 'bench', data: payload(i) });
        }
        await queue.addBulk(chunk);
      }
      break;
    }
    default:
      throw new Error(`unknown mode ${JSON.stringify(args.mode)}`);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = process.cpuUsage(cpuBefore);
  await queue.close();
  const result = { mode: args.mode, jobs, seconds, clientCpuMs: (cpu.user + cpu.system) / 1000 };
  if (latencies.length > 0) {
    latencies.sort((a, b) => a - b);
    result.addP50Ms = quantile(latencies, 0.5);
    result.addP99Ms = quantile(latencies, 0.99);
  }
  return result;
}

finish(main());
