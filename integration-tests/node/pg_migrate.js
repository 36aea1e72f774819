'use strict';
// Migrates PostgreSQL schemas with Node BullMQ's own migrator, all in one process (fast: one
// connection, one `runMigrations` transaction per schema).
//
// Args: {url?, schemas: [schema, ...]}
//   url defaults to PG_URL, else postgres://postgres@127.0.0.1:5432/test.
// Output: {migrated: [schema, ...], version: n, versions: {schema: n}}
//   `versions` is MAX(version) of each schema's `migration` ledger read back after migrating;
//   `version` is the lowest of them (11 for bullmq 6.7.0 when every schema is current).
// `runMigrations(client, schema, {skipVersionCheck})` wants ONE dedicated session (its advisory
// lock and transaction must share it), so a standalone pg.Client is used, never a Pool.

const { Client } = require('pg');
const { runMigrations, quoteSchemaName } = require('bullmq/dist/cjs/postgres');
const { pgUrl, run } = require('./lib');

run(async args => {
  const schemas = args.schemas || [];
  if (!Array.isArray(schemas) || schemas.length === 0) throw new Error('missing "schemas"');
  const client = new Client({ connectionString: args.url || pgUrl() });
  await client.connect();
  try {
    const migrated = [];
    const versions = {};
    for (const schema of schemas) {
      await runMigrations(client, schema);
      const { rows } = await client.query(
        `SELECT COALESCE(MAX(version), 0)::int AS version FROM ${quoteSchemaName(schema)}.migration`,
      );
      migrated.push(schema);
      versions[schema] = rows[0].version;
    }
    return { migrated, version: Math.min(...Object.values(versions)), versions };
  } finally {
    await client.end();
  }
});
