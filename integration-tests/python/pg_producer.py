"""Adds jobs with Python BullMQ's PostgreSQL backend, for the interop tests (tests/common/pg.rs).

Reads ONE JSON document on stdin, prints ONE JSON document on stdout, exits 0 (1 on error,
with the error on stderr).

  {url?, schema, queue, jobs: [{name, data, opts?}], bulk?: false}
      url defaults to PG_URL, else postgres://postgres@127.0.0.1:5432/test.
      One Queue.add per job, in order (with `bulk`, one Queue.addBulk).
      Prints {ids: [job id, ...]} in the order of `jobs`.

PyPI bullmq 3.4.4 selects its PostgreSQL backend with
    Queue(name, {"backend": "postgres", "connection": url, "schema": schema})
(`connection` is a libpq URL or a dict of host/port/dbname/user/password). Its Queue always runs
its own migrator when it gets ready: a no-op on a schema Node migrated to v11 (it bundles only
migrations 1-4), but on a fresh schema it would stop at v4 with a ledger lacking
`min_client_version`, so give it schemas migrated by Node (node/pg_migrate.js).
"""

import asyncio
import json
import os
import sys

from bullmq import Queue

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test"


async def produce(args):
    url = args.get("url") or os.environ.get("PG_URL") or DEFAULT_URL
    if not args.get("schema"):
        raise ValueError('missing "schema"')
    if not args.get("queue"):
        raise ValueError('missing "queue"')
    queue = Queue(
        args["queue"],
        {"backend": "postgres", "connection": url, "schema": args["schema"]},
    )
    try:
        jobs = args.get("jobs") or []
        if args.get("bulk"):
            added = await queue.addBulk(
                [
                    {"name": j.get("name"), "data": j.get("data"), "opts": j.get("opts") or {}}
                    for j in jobs
                ]
            )
        else:
            added = []
            for j in jobs:
                added.append(await queue.add(j.get("name"), j.get("data"), j.get("opts") or {}))
        return {"ids": [job.id for job in added]}
    finally:
        await queue.close()


def main():
    try:
        args = json.loads(sys.stdin.read() or "{}")
        result = asyncio.run(produce(args))
    except Exception as error:  # reported to the caller, who shows stderr
        print(f"pg_producer.py: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
