'use strict';
// Adds and reads flows with Node BullMQ's FlowProducer.
//
// Args: {op: "add" | "addBulk" | "getFlow" | "getDependencies", prefix?,
//        flow?: FlowJob (add), queuesOptions?: {queue: JobsOptions} (add), flows?: [FlowJob] (addBulk),
//        id?, queueName?, depth?, maxChildren? (getFlow; id and queueName for getDependencies)}
//       (+ {backend: "postgres", pgUrl?, schema} for PostgreSQL, see lib.js)
// Output: add / addBulk: {tree} / {trees}, each node {id, name, queueName, children: [...]},
//         or {error, code} when the FlowProducer threw;
//         getFlow: {tree} with each node {id, name, queueName, data, opts, parentKey, children}
//         (null when absent);
//         getDependencies: {dependencies, counts, state} of job `id` in `queueName` (Node's
//         job.getDependencies(), job.getDependenciesCount(), job.getState()), or {job: null}.

const { FlowProducer } = require('bullmq');
const { classOptions, backendFactory, openQueue, run } = require('./lib');

function shape(node, full) {
  if (!node) return null;
  const job = node.job;
  const out = { id: job.id, name: job.name, queueName: job.queueName };
  if (full) {
    out.data = job.data;
    out.opts = job.opts;
    out.parentKey = job.parentKey === undefined ? null : job.parentKey;
  }
  out.children = (node.children || []).map(child => shape(child, full));
  return out;
}

async function dependencies(args) {
  const queue = openQueue(Object.assign({}, args, { queue: args.queueName }));
  try {
    const job = await queue.getJob(args.id);
    if (!job) return { job: null };
    return {
      dependencies: await job.getDependencies(),
      counts: await job.getDependenciesCount(),
      state: await job.getState(),
    };
  } finally {
    await queue.close();
  }
}

run(async args => {
  if (args.op === 'getDependencies') return dependencies(args);
  const producer = new FlowProducer(classOptions(args), backendFactory(args));
  try {
    if (args.op === 'add') {
      const opts = args.queuesOptions ? { queuesOptions: args.queuesOptions } : undefined;
      try {
        return { tree: shape(await producer.add(args.flow, opts), false) };
      } catch (err) {
        return { error: err.message, code: err.code === undefined ? null : err.code };
      }
    }
    if (args.op === 'addBulk') {
      try {
        const trees = await producer.addBulk(args.flows);
        return { trees: trees.map(tree => shape(tree, false)) };
      } catch (err) {
        return { error: err.message, code: err.code === undefined ? null : err.code };
      }
    }
    if (args.op === 'getFlow') {
      const opts = { id: args.id, queueName: args.queueName };
      if (args.depth !== undefined) opts.depth = args.depth;
      if (args.maxChildren !== undefined) opts.maxChildren = args.maxChildren;
      return { tree: shape(await producer.getFlow(opts), true) };
    }
    throw new Error(`unknown op ${args.op}`);
  } finally {
    await producer.close();
  }
});
