'use strict';
// Node BullMQ side of the producer benchmark (`cargo run --release -p bullmq-bench -- producer`).
//
// Uses the pinned oracle package in integration-tests/node (run `npm ci` there first).
// Args (JSON on argv[2]): {queue, prefix?, jobs, mode: "add" | "add-concurrent" | "addBulk",
//                          concurrency?: 100, batch?: 1000}
// Output: one JSON document {mode, jobs, seconds, clientCpuMs, addP50Ms?, addP99Ms?}; timing
// starts once the queue's connection is ready and stops when the last add has returned. The
// percentiles of single `add` calls are given for the "add" and "add-concurrent" modes.

const path = require('node:path');
const { createRequire } = require('node:module');

const oracle = createRequire(path.resolve(__dirname, '../../integration-tests/node/package.json'));
const { Queue } = oracle('bullmq');

function connectionOptions() {
  const url = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const options = { host: url.hostname, port: url.port ? Number(url.port) : 6379 };
  const db = url.pathname.replace(/^\//, '');
  if (db) options.db = Number(db);
  if (url.username) options.username = decodeURIComponent(url.username);
  if (url.password) options.password = decodeURIComponent(url.password);
  if (url.protocol === 'rediss:') options.tls = {};
  return options;
}

/** The same small payload the Rust scenarios add. */
function payload(i) {
  return { index: i, email: `user${i}@example.com`, template: 'welcome' };
}

async function main() {
  const args = JSON.parse(process.argv[2] || '{}');
  const jobs = args.jobs || 10000;
  const queue = new Queue(args.queue, { connection: connectionOptions(), prefix: args.prefix || 'bull' });
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
    const at = q => latencies[Math.round((latencies.length - 1) * q)];
    result.addP50Ms = at(0.5);
    result.addP99Ms = at(0.99);
  }
  return result;
}

main()
  .then(result => {
    // Exit once stdout is flushed (asynchronous on a pipe).
    process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0));
  })
  .catch(error => {
    process.stderr.write(`${error && error.stack ? error.stack : error}\n`, () => process.exit(1));
  });
