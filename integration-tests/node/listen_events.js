'use strict';
// Listens live with a Node BullMQ QueueEvents until a stop event arrives.
//
// Args: {queue, prefix?, lastEventId?: "0-0", stopEvent?: "test-end", timeoutMs?: 60000}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js; there the default
//       lastEventId is "0", event ids being bigints, and `id` in the output is that bigint as a
//       string)
// Prints {"listening": true} on stderr once the QueueEvents is connected, then, when the event
// named `stopEvent` arrives (or after timeoutMs), prints
//   {events: [{id, event, args}], stoppedBy: "event" | "timeout"}
// with every event QueueEvents emitted before the stop event, in order: `args` is its first
// argument (parsed values included), null for `drained`.

const { QueueEvents } = require('bullmq');
const { classOptions, backendFactory, firstEventId, run, sleep } = require('./lib');

run(async args => {
  if (!args.queue) throw new Error('missing "queue"');
  const stopEvent = args.stopEvent || 'test-end';
  const events = [];
  const errors = [];
  let stopped = false;
  const queueEvents = new QueueEvents(
    args.queue,
    {
      ...classOptions(args),
      lastEventId: args.lastEventId || firstEventId(args),
      blockingTimeout: 200,
    },
    backendFactory(args),
  );
  // QueueEvents emits each event by name, and job events again as `name:jobId`: record the
  // plain names only.
  const emit = queueEvents.emit.bind(queueEvents);
  queueEvents.emit = (name, ...rest) => {
    if (name === 'error') {
      errors.push(String(rest[0]));
    } else if (name === stopEvent) {
      stopped = true;
    } else if (!stopped && name === 'drained') {
      events.push({ id: rest[0], event: name, args: null });
    } else if (!stopped && !name.includes(':')) {
      events.push({ id: rest[1], event: name, args: rest[0] === undefined ? null : rest[0] });
    }
    return emit(name, ...rest);
  };
  queueEvents.on('error', () => {});
  await queueEvents.waitUntilReady();
  process.stderr.write('{"listening": true}\n');
  const started = Date.now();
  const timeoutMs = args.timeoutMs || 60000;
  while (!stopped && Date.now() - started < timeoutMs) await sleep(20);
  await queueEvents.close();
  if (errors.length > 0) throw new Error(`QueueEvents errors: ${errors.join('; ')}`);
  return { events, stoppedBy: stopped ? 'event' : 'timeout' };
});
