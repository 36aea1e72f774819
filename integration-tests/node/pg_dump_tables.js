'use strict';
// Dumps the queue tables of one PostgreSQL schema (Node BullMQ 6.7.0's layout) as JSON rows.
//
// Args: {pgUrl?, schema, queues?: [queue, ...], tables?: [table, ...]}
//   pgUrl defaults to PG_URL, else postgres://postgres@127.0.0.1:5432/test; `backend` is
//   accepted and ignored (this script is PostgreSQL-only).
//   queues: only the rows of these queues (job_dependency: by parent_queue); default every row.
//   tables: default job, job_dependency, event, meta, dedup, dedup_next, scheduler, rate_limit,
//   metrics, job_log (not the ledger, whose applied_at is a timestamp, nor the relay tables).
// Output: {schema, tables: {table: [row, ...]}} with tables in the order asked, each table's
//   rows in primary-key order, each row an object of its columns in table order, built by
//   PostgreSQL (`json_agg`): enum columns (state, status) as text, jsonb columns as JSON,
//   bigint columns as JSON numbers printed exactly as PostgreSQL renders them (the document is
//   passed through without a JavaScript parse, so values above 2^53 keep every digit).

const { pgClient, RawJson, run } = require('./lib');

const DEFAULT_TABLES = [
  'job',
  'job_dependency',
  'event',
  'meta',
  'dedup',
  'dedup_next',
  'scheduler',
  'rate_limit',
  'metrics',
  'job_log',
];

const quoteIdent = name => `"${String(name).replace(/"/g, '""')}"`;

/** The primary-key columns of `schema.table`, in key order. */
async function primaryKey(client, schema, table) {
  const { rows } = await client.query(
    `SELECT a.attname AS name
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos) ON true
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
      WHERE n.nspname = $1 AND c.relname = $2 AND i.indisprimary
      ORDER BY k.pos`,
    [schema, table],
  );
  if (rows.length === 0) throw new Error(`table ${schema}.${table} not found or without a primary key`);
  return rows.map(r => r.name);
}

run(async args => {
  if (!args.schema) throw new Error('missing "schema"');
  const client = await pgClient(args);
  try {
    const parts = [];
    for (const table of args.tables || DEFAULT_TABLES) {
      const key = await primaryKey(client, args.schema, table);
      const order = key.map(column => `t.${quoteIdent(column)}`).join(', ');
      const params = [];
      let where = '';
      if (args.queues) {
        params.push(args.queues);
        where = ` WHERE t.${table === 'job_dependency' ? 'parent_queue' : 'queue'} = ANY($1)`;
      }
      const { rows } = await client.query(
        `SELECT COALESCE(json_agg(t ORDER BY ${order}), '[]')::text AS rows
           FROM ${quoteIdent(args.schema)}.${quoteIdent(table)} t${where}`,
        params,
      );
      // json_agg puts a newline between rows; JSON strings cannot hold a raw one, so removing
      // them keeps the document on one line without touching any value.
      parts.push(`${JSON.stringify(table)}:${rows[0].rows.replace(/\n/g, '')}`);
    }
    return new RawJson(`{"schema":${JSON.stringify(args.schema)},"tables":{${parts.join(',')}}}`);
  } finally {
    await client.end();
  }
});
