"""Job schedulers through Python BullMQ, for the interop tests (scheduler_python.rs).

Reads ONE JSON document on stdin, prints ONE JSON document on stdout, exits 0 (1 on error,
with the error on stderr).

  {op: "upsert", queue, id, repeat, template?: {name?, data?, opts?}}
      Queue.upsertJobScheduler; prints {result: {id, delay} | null} or {error: message}.
  {op: "worker", queue, stopAfter?, idleMs?, timeoutMs?: 60000, concurrency?: 1}
      Runs a Worker; the processor records each start, sleeps `data.sleepMs` if given and
      returns {processedBy: "python"}.
      Stops when `stopAfter` jobs ended, when none ended for `idleMs` (counted from start
      too), or after `timeoutMs`. Prints {processed: [{id, name, attemptsMade, startedAt}],
      completed: [id], stoppedBy}.
Connection: REDIS_URL (default redis://127.0.0.1:6379); prefix "bull".
"""

import asyncio
import json
import os
import sys
import time

from bullmq import Queue, Worker


def now_ms():
    return int(time.time() * 1000)


def connection():
    return os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379"


async def upsert(args):
    queue = Queue(args["queue"], {"connection": connection(), "prefix": "bull"})
    try:
        template = args.get("template") or {}
        try:
            job = await queue.upsertJobScheduler(
                args["id"],
                args["repeat"],
                template.get("name"),
                template.get("data"),
                template.get("opts"),
            )
        except Exception as error:  # a refusal: its wording is compared
            return {"error": str(error)}
        if job is None:
            return {"result": None}
        return {"result": {"id": job.id, "delay": job.delay}}
    finally:
        await queue.close()


async def work(args):
    processed = []
    completed = []
    last_activity = now_ms()
    started = now_ms()

    async def process(job, token):
        processed.append(
            {
                "id": job.id,
                "name": job.name,
                "attemptsMade": job.attemptsMade,
                "startedAt": now_ms(),
            }
        )
        data = job.data if isinstance(job.data, dict) else {}
        if data.get("sleepMs"):
            await asyncio.sleep(data["sleepMs"] / 1000)
        return {"processedBy": "python"}

    worker = Worker(
        args["queue"],
        process,
        {
            "connection": connection(),
            "prefix": "bull",
            "concurrency": args.get("concurrency", 1),
            # Short blocking waits, so the worker notices delayed iterations promptly and
            # closes quickly.
            "drainDelay": 1,
        },
    )

    def on_completed(job, result):
        nonlocal last_activity
        last_activity = now_ms()
        completed.append(job.id)

    worker.on("completed", on_completed)
    worker.on("error", lambda err, *rest: sys.stderr.write(f"worker error: {err}\n"))
    timeout_ms = args.get("timeoutMs", 60000)
    stop_after = args.get("stopAfter")
    idle_ms = args.get("idleMs")
    while True:
        now = now_ms()
        if stop_after is not None and len(completed) >= stop_after:
            stopped_by = "count"
            break
        if idle_ms is not None and now - last_activity >= idle_ms:
            stopped_by = "idle"
            break
        if now - started >= timeout_ms:
            stopped_by = "timeout"
            break
        await asyncio.sleep(0.02)
    await worker.close()
    return {"processed": processed, "completed": completed, "stoppedBy": stopped_by}


async def main():
    args = json.loads(sys.stdin.read() or "{}")
    ops = {"upsert": upsert, "worker": work}
    op = ops.get(args.get("op"))
    if op is None:
        raise ValueError(f"unknown op {args.get('op')!r}; known: {', '.join(ops)}")
    return await op(args)


if __name__ == "__main__":
    result = asyncio.run(main())
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
