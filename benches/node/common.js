'use strict';
// Shared helpers of the Node benchmark scripts: the pinned oracle package and the connection
// (Redis from REDIS_URL; PostgreSQL from the arguments, for the pg_*.js scripts).

const path = require('node:path');
const { createRequire } = require('node:module');

const oracle = createRequire(path.resolve(__dirname, '../../integration-tests/node/package.json'));

function connectionOptions() {
  const url = new URL(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const options = { host: url.hostname, port: url.port ? Number(url.port) : 6379 };
  const db = url.pathname.replace(/^\//, '');
  if (db) options.db = Number(db);
  if (url.username) options.username = decodeURIComponent(url.username);
  if (url.password) options.password = decodeURIComponent(url.password);
  if (url.protocol === 'rediss:') options.tls = {};
  // Workers need blocking connections that never give up retrying.
  options.maxRetriesPerRequest = null;
  return options;
}

const DEFAULT_PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The `connection` option of Node's PostgreSQL backend for the pg_*.js scripts: a pg.Pool
 * config (pool size: pg's default, 10, as ours) plus the schema, which must already be migrated
 * by Node's migrator. Args: {pgUrl?, schema}; the URL defaults to PG_URL, then the local
 * default.
 */
function pgConnection(args) {
  if (!args.schema) throw new Error('missing "schema"');
  return { connectionString: args.pgUrl || process.env.PG_URL || DEFAULT_PG_URL, schema: args.schema };
}

/** The q-quantile of an ascending array (nearest rank), undefined when empty. */
function quantile(sorted, q) {
  if (sorted.length === 0) return undefined;
  return sorted[Math.round((sorted.length - 1) * q)];
}

/** Prints one JSON document on stdout and exits once it is flushed. */
function finish(promise) {
  promise.then(
    result => process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0)),
    error => {
      process.stderr.write(String(error && error.stack ? error.stack : error) + '\n');
      process.exit(1);
    },
  );
}

module.exports = { bullmq: oracle('bullmq'), connectionOptions, pgConnection, quantile, finish };
