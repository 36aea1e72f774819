'use strict';
// Compatibility check inside a benchmark run: Node BullMQ reads back jobs a benchmarked worker
// finished and checks each is `completed` with a return value.
//
// Args (JSON on argv[2]): {queue, ids: [...]}. Output {checked, ok, bad: [{id, state, returnvalue}]}.

const { bullmq, connectionOptions, finish } = require('./common');
const { Queue, Job } = bullmq;

async function main() {
  const args = JSON.parse(process.argv[2] || '{}');
  const queue = new Queue(args.queue, { connection: connectionOptions() });
  const bad = [];
  let ok = 0;
  for (const id of args.ids) {
    const job = await Job.fromId(queue, id);
    const state = job ? await job.getState() : 'missing';
    const returnvalue = job ? job.returnvalue : undefined;
    if (state === 'completed' && returnvalue !== undefined && returnvalue !== null && job.finishedOn > 0) ok += 1;
    else bad.push({ id, state, returnvalue });
  }
  await queue.close();
  return { checked: args.ids.length, ok, bad: bad.slice(0, 10) };
}

finish(main());
