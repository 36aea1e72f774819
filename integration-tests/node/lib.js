'use strict';
// Shared plumbing of the oracle scripts: argument parsing, connection options (Redis or
// PostgreSQL), output.
//
// Every script takes ONE JSON document (argv[2], or stdin when argv[2] is absent), prints ONE
// JSON document on stdout and exits 0; on error it prints the error on stderr and exits 1.
//
// Backend selection, common to every script that supports PostgreSQL:
//   {backend?: "redis" | "postgres", pgUrl?, schema?}
// Redis (the default) uses REDIS_URL and the script's `prefix` (default "bull").
// "postgres" uses Node BullMQ 6.7.0's PostgreSQL backend: the URL is `pgUrl`, else PG_URL, else
// postgres://postgres@127.0.0.1:5432/test; `schema` (required) must already be migrated
// (pg_migrate.js): the scripts never migrate. `prefix` is ignored there (the schema is the
// namespace). Node's form, used by `classOptions` + `backendFactory` below:
//   new Queue(name, {connection: {connectionString, schema}}, createPostgresBackend)
// (same last constructor argument for Worker, QueueEvents, QueueEventsProducer; FlowProducer
// takes (opts, factory)).

const { Queue, createPostgresBackend } = require('bullmq');
const IORedis = require('ioredis');

const DEFAULT_URL = 'redis://127.0.0.1:6379';
const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

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

/** The PostgreSQL URL: `args.pgUrl`, else PG_URL, else the local default. */
function pgUrl(args) {
  return (args && args.pgUrl) || process.env.PG_URL || DEFAULT_PG_URL;
}

/** Whether the arguments select Node's PostgreSQL backend (`backend: "postgres"`). */
function isPostgres(args) {
  const backend = (args && args.backend) || 'redis';
  if (backend !== 'redis' && backend !== 'postgres') throw new Error(`unknown backend ${backend}`);
  return backend === 'postgres';
}

/** The PostgreSQL `connection` option of the queue classes (a pg.Pool config plus `schema`). */
function pgConnection(args) {
  if (!args.schema) throw new Error('backend "postgres" needs "schema"');
  const connection = { connectionString: pgUrl(args), schema: args.schema };
  if (args.pgPoolMax) connection.max = args.pgPoolMax;
  return connection;
}

/**
 * The backend part of a Queue / Worker / QueueEvents / FlowProducer options object, to spread
 * into the class's own options: `{connection, prefix}` on Redis, `{connection}` on PostgreSQL.
 */
function classOptions(args) {
  if (isPostgres(args)) return { connection: pgConnection(args) };
  return { connection: connectionOptions(), prefix: args.prefix || 'bull' };
}

/** The backend factory to pass as the classes' last constructor argument (undefined = Redis). */
function backendFactory(args) {
  return isPostgres(args) ? createPostgresBackend : undefined;
}

/**
 * The QueueEvents `lastEventId` that means "from the first event": Redis stream ids are
 * "<ms>-<n>", PostgreSQL event ids are bigints (`id > $cursor`), so "0-0" would not parse there.
 */
function firstEventId(args) {
  return isPostgres(args) ? '0' : '0-0';
}

/** Opens a Queue from the common arguments `{queue, prefix}` (or `{queue, backend, schema}`). */
function openQueue(args) {
  if (!args.queue) throw new Error('missing "queue"');
  return new Queue(args.queue, classOptions(args), backendFactory(args));
}

/** A plain ioredis client for raw reads; the caller must `quit()` it. */
function rawClient() {
  return new IORedis(connectionOptions());
}

/**
 * A connected node-postgres Client for raw reads of `args.schema` (search_path pinned to it,
 * as Node's backend does); the caller must `end()` it.
 */
async function pgClient(args) {
  if (!args.schema) throw new Error('backend "postgres" needs "schema"');
  const { Client } = require('pg');
  const { quoteSchemaName } = require('bullmq/dist/cjs/postgres');
  const client = new Client({
    connectionString: pgUrl(args),
    options: `-c search_path=${quoteSchemaName(args.schema)}`,
  });
  await client.connect();
  return client;
}

/** A JSON text printed by `run` as is (for documents built by PostgreSQL, bigints intact). */
class RawJson {
  constructor(text) {
    this.text = text;
  }
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
      const text =
        (result instanceof RawJson ? result.text : JSON.stringify(result === undefined ? null : result)) + '\n';
      process.stdout.write(text, () => process.exit(0));
    })
    .catch(error => {
      process.stderr.write(`${error && error.stack ? error.stack : error}\n`, () => process.exit(1));
    });
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

module.exports = {
  connectionOptions,
  rawClient,
  openQueue,
  jobFields,
  run,
  sleep,
  pgUrl,
  isPostgres,
  classOptions,
  backendFactory,
  firstEventId,
  pgClient,
  RawJson,
};
