'use strict';
// Reads a queue's events stream, either as stored or as Node's QueueEvents delivers it.
//
// Args: {queue, prefix?, mode?: "range" | "listen"}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
//   range   (default) XRANGE of the whole stream.
//           Output: {events: [{id, fields: [[name, value], ...]}]} with fields in stream order.
//           On PostgreSQL: the queue's `event` rows by id, each shaped as Node's backend
//           hands them to QueueEvents (fields "event" then each data key in jsonb order,
//           non-string values String()-ed; the id is the bigint as a string).
//   listen  a QueueEvents reading from `lastEventId` (default "0-0", i.e. everything) until
//           `count` events arrived or `durationMs` (default 5000) passed.
//           Output: {events: [{id, event, args}]} where `args` is what QueueEvents emitted
//           (it JSON-parses progress data and return values, so unparsable payloads surface as
//           an error here).

const { QueueEvents } = require('bullmq');
const {
  classOptions,
  backendFactory,
  firstEventId,
  isPostgres,
  pgClient,
  rawClient,
  run,
  sleep,
} = require('./lib');

async function pgRange(args) {
  const client = await pgClient(args);
  try {
    const { rows } = await client.query(
      'SELECT e.id::text AS id, e.event, e.data FROM event e WHERE e.queue = $1 ORDER BY e.id',
      [args.queue],
    );
    return {
      events: rows.map(row => {
        const fields = [['event', row.event]];
        for (const [k, v] of Object.entries(row.data || {})) {
          fields.push([k, typeof v === 'string' ? v : String(v)]);
        }
        return { id: row.id, fields };
      }),
    };
  } finally {
    await client.end();
  }
}

async function range(args) {
  if (isPostgres(args)) return pgRange(args);
  const client = rawClient();
  try {
    const key = `${args.prefix || 'bull'}:${args.queue}:events`;
    const entries = await client.xrange(key, '-', '+');
    return {
      events: entries.map(([id, flat]) => {
        const fields = [];
        for (let i = 0; i + 1 < flat.length; i += 2) fields.push([flat[i], flat[i + 1]]);
        return { id, fields };
      }),
    };
  } finally {
    await client.quit();
  }
}

async function listen(args) {
  const events = [];
  const errors = [];
  const queueEvents = new QueueEvents(
    args.queue,
    {
      ...classOptions(args),
      lastEventId: args.lastEventId || firstEventId(args),
      blockingTimeout: 200,
    },
    backendFactory(args),
  );
  const emit = queueEvents.emit.bind(queueEvents);
  // Capture every event by name once (QueueEvents also emits `event:jobId` duplicates).
  queueEvents.emit = (event, ...rest) => {
    if (event === 'error') {
      errors.push(String(rest[0]));
    } else if (event === 'drained') {
      events.push({ id: rest[0], event, args: null });
    } else if (!event.includes(':')) {
      events.push({ id: rest[1], event, args: rest[0] });
    }
    return emit(event, ...rest);
  };
  queueEvents.on('error', () => {});
  const started = Date.now();
  const durationMs = args.durationMs || 5000;
  while (Date.now() - started < durationMs && !(args.count && events.length >= args.count)) {
    await sleep(20);
  }
  await queueEvents.close();
  if (errors.length > 0) throw new Error(`QueueEvents errors: ${errors.join('; ')}`);
  return { events };
}

run(args => {
  if (!args.queue) throw new Error('missing "queue"');
  return args.mode === 'listen' ? listen(args) : range(args);
});
