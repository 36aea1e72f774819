'use strict';
// Shared plumbing of the oracle scripts: argument parsing, Redis connection options, output.
//
// Every script takes ONE JSON document (argv[2], or stdin when argv[2] is absent), prints ONE
// JSON document on stdout and exits 0; on error it prints the error on stderr and exits 1.

const { Queue } = require('bullmq');
const IORedis = require('ioredis');

const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** ioredis connection options parsed from REDIS_URL (BullMQ wants an options object). */
function connectionOptions() {
  const url = new URL(process.env.REDIS_URL || DEFAULT_URL);
  const options = {
    host: url.hostname || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
    // BullMQ requires this for blocking connections; harmless elsewhere.
    maxRetriesPerRequest: null,
  };
  const db = url.pathname.replace(/^\//, '');
  if (db) options.db = Number(db);
  if (url.username) options.username = decodeURIComponent(url.username);
  if (url.password) options.password = decodeURIComponent(url.password);
  if (url.protocol === 'rediss:') options.tls = {};
  return options;
}

async function readArgs() {
  if (process.argv.length > 2) {
    return JSON.parse(process.argv[2]);
  }
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  return input.trim() ? JSON.parse(input) : {};
}

/** Opens a Queue from the common arguments `{queue, prefix}`. */
function openQueue(args) {
  if (!args.queue) throw new Error('missing "queue"');
  return new Queue(args.queue, {
    connection: connectionOptions(),
    prefix: args.prefix || 'bull',
  });
}

/** A plain ioredis client for raw reads; the caller must `quit()` it. */
function rawClient() {
  return new IORedis(connectionOptions());
}

/** Decoded fields of a Node Job, as a plain JSON object (undefined fields become null). */
function jobFields(job) {
  const orNull = value => (value === undefined ? null : value);
  return {
    id: orNull(job.id),
    name: orNull(job.name),
    data: orNull(job.data),
    opts: orNull(job.opts),
    timestamp: orNull(job.timestamp),
    delay: orNull(job.delay),
    priority: orNull(job.priority),
    progress: orNull(job.progress),
    attemptsMade: orNull(job.attemptsMade),
    attemptsStarted: orNull(job.attemptsStarted),
    stalledCounter: orNull(job.stalledCounter),
    processedOn: orNull(job.processedOn),
    finishedOn: orNull(job.finishedOn),
    returnvalue: orNull(job.returnvalue),
    failedReason: orNull(job.failedReason),
    stacktrace: orNull(job.stacktrace),
    processedBy: orNull(job.processedBy),
  };
}

/** Runs `main(args)`, prints its result as JSON and exits with the right code. */
function run(main) {
  readArgs()
    .then(main)
    .then(result => {
      // Exit only once the output is flushed: on a pipe, stdout is asynchronous and
      // process.exit() would cut a large document at the pipe buffer size (64 KiB).
      const text = JSON.stringify(result === undefined ? null : result) + '\n';
      process.stdout.write(text, () => process.exit(0));
    })
    .catch(error => {
      process.stderr.write(`${error && error.stack ? error.stack : error}\n`, () => process.exit(1));
    });
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

module.exports = { connectionOptions, rawClient, openQueue, jobFields, run, sleep };
