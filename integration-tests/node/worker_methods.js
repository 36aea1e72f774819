'use strict';
// Node's Worker methods of issue 22 §2, for `tests/worker_node_methods.rs`.
//
// Redis only: `renewals` steals a lock by writing the Redis lock key.
//
// Args: {queue, prefix?, op, ...}
//   {op: "extend", jobIds, tokens, duration}
//       worker.extendJobLocks(jobIds, tokens, duration) on a Worker without a processor.
//       Output: {failed: [ids]}.
//   {op: "paused"}
//       worker.isPaused() through: created (autorun false), pause(), run(), resume(), pause(),
//       close(). Output: {paused: [6 booleans], running: [6 booleans]}.
//   {op: "renewals", count, lockDuration, lockRenewTime, steal}
//       A Worker with `count` slots takes the `count` jobs already in the queue; its processor
//       waits. Once every job was renewed at least once, the lock of job `steal` is taken by
//       another token (SET {id}:lock thief); once the other jobs were renewed again after the
//       failure, the processors return and the worker closes.
//       Output: {renewed: [[ids] per locksRenewed event, until the steal], failed: [[ids] per
//       lockRenewalFailed event], renewedAfter: [[ids] per locksRenewed event after the first
//       failure]}.

const { Worker } = require('bullmq');
const { connectionOptions, rawClient, run, sleep } = require('./lib');

async function waitFor(what, condition, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const prefix = args.prefix || 'bull';
  switch (args.op) {
    case 'extend': {
      const worker = new Worker(args.queue, null, {
        connection: connectionOptions(),
        prefix,
        autorun: false,
      });
      worker.on('error', () => {});
      try {
        const failed = await worker.extendJobLocks(args.jobIds, args.tokens, args.duration);
        return { failed };
      } finally {
        await worker.close();
      }
    }
    case 'paused': {
      const worker = new Worker(args.queue, async () => 1, {
        connection: connectionOptions(),
        prefix,
        autorun: false,
        drainDelay: 1,
      });
      worker.on('error', () => {});
      const paused = [];
      const running = [];
      const look = () => {
        paused.push(worker.isPaused());
        running.push(worker.isRunning());
      };
      look();
      await worker.pause(true);
      look();
      const loop = worker.run();
      await sleep(50);
      look();
      worker.resume();
      await sleep(50);
      look();
      await worker.pause(true);
      look();
      await worker.close();
      await loop.catch(() => {});
      look();
      return { paused, running };
    }
    case 'renewals': {
      const release = [];
      let started = 0;
      const worker = new Worker(
        args.queue,
        () => {
          started += 1;
          return new Promise(resolve => release.push(resolve));
        },
        {
          connection: connectionOptions(),
          prefix,
          concurrency: args.count,
          lockDuration: args.lockDuration,
          lockRenewTime: args.lockRenewTime,
          drainDelay: 1,
        },
      );
      worker.on('error', () => {});
      const renewed = [];
      const failed = [];
      const renewedAfter = [];
      worker.on('locksRenewed', ({ count, jobIds }) => {
        if (count !== jobIds.length) throw new Error(`count ${count} for ${jobIds}`);
        (failed.length ? renewedAfter : renewed).push(jobIds);
      });
      worker.on('lockRenewalFailed', jobIds => failed.push(jobIds));
      const seen = list => new Set(list.flat());
      await waitFor('every job started', () => started === args.count);
      await waitFor('every lock renewed', () => seen(renewed).size === args.count);
      const client = rawClient();
      await client.set(`${prefix}:${args.queue}:${args.steal}:lock`, 'thief', 'PX', 60000);
      await waitFor('the stolen lock reported', () => failed.length > 0);
      await waitFor(
        'the other locks renewed again',
        () => seen(renewedAfter).size >= args.count - 1,
      );
      await client.quit();
      release.forEach(resolve => resolve(1));
      await worker.close();
      return { renewed, failed, renewedAfter };
    }
    default:
      throw new Error(`unknown op ${args.op}`);
  }
});
