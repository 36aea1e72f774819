'use strict';
// Runs a Node BullMQ Worker (and, optionally, adds jobs first) over an ioredis Cluster
// connection, as BullMQ documents for Redis Cluster (`new IORedis.Cluster([...])`, with a
// hash-tagged prefix so every key of the queue lands in one slot).
//
// Redis (Cluster) only.
//
// Args: {nodes: [{host, port}], queue, prefix: "{bull}", add?: n (jobs "node-<i>" added
//        before the worker starts), concurrency?: 1, stopAfter?: n, idleMs?: ms,
//        timeoutMs?: 60000, sleepMs?: per-job processing time, name?: worker name}
// Stops as run_worker.js does. Output: {added: [ids], completed: [ids], stoppedBy}.

const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');
const { run, sleep } = require('./lib');

function clusterConnection(nodes) {
  return new IORedis.Cluster(nodes, {
    // BullMQ's blocking connection needs unlimited retries per request.
    redisOptions: { maxRetriesPerRequest: null },
  });
}

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  if (!Array.isArray(args.nodes) || args.nodes.length === 0) throw new Error('missing "nodes"');
  const prefix = args.prefix || '{bull}';

  const added = [];
  if (args.add) {
    const connection = clusterConnection(args.nodes);
    const queue = new Queue(args.queue, { connection, prefix });
    for (let i = 0; i < args.add; i += 1) {
      const job = await queue.add(`node-${i}`, { from: 'node', i });
      added.push(job.id);
    }
    await queue.close();
    await connection.quit();
  }

  const completed = [];
  let lastActivity = Date.now();
  const started = Date.now();
  const connection = clusterConnection(args.nodes);
  const worker = new Worker(
    args.queue,
    async () => {
      if (args.sleepMs) await sleep(args.sleepMs);
      return { processedBy: 'node' };
    },
    { connection, prefix, concurrency: args.concurrency || 1, name: args.name, drainDelay: 1 },
  );
  worker.on('completed', job => {
    lastActivity = Date.now();
    completed.push(job.id);
  });
  worker.on('error', error => process.stderr.write(`worker error: ${error}\n`));

  const timeoutMs = args.timeoutMs || 60000;
  let stoppedBy;
  for (;;) {
    const now = Date.now();
    if (args.stopAfter !== undefined && completed.length >= args.stopAfter) {
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
  await connection.quit();
  return { added, completed, stoppedBy };
});
