//! The Redis limit: what Redis itself can do for the minimal BullMQ-compatible lifecycle, with
//! no client work. A tight Lua loop, batched, moves jobs to active with a lock, `processedOn`,
//! `ats` and an `active` event, then completes them (lock checked and released, `completed`
//! set, `returnvalue` / `finishedOn` / `atm`, `completed` event). Several calls stay in flight
//! so Redis never waits for the client. Worker throughput is reported as a fraction of it.

use std::time::Instant;

use anyhow::{ensure, Result};
use bullmq_redis::fred::prelude::Client;
use bullmq_redis::Script;
use futures::StreamExt;
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};

use crate::worker::{fill, queue_name};
use crate::worker_report::WorkerMeasurement;
use crate::{process_cpu, redis_stats};

/// The lifecycle loop. KEYS: wait, active, completed, events. ARGV: queue base, batch, now.
static LIFECYCLE: Script = Script::new(
    "bench_redis_limit",
    r#"
local base, batch, now = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local ids = {}
for i = 1, batch do
  local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[2])
  if not id then break end
  local jobKey = base .. id
  redis.call("SET", jobKey .. ":lock", "bench:" .. id, "PX", 30000)
  redis.call("HSET", jobKey, "processedOn", now)
  redis.call("HINCRBY", jobKey, "ats", 1)
  redis.call("XADD", KEYS[4], "*", "event", "active", "jobId", id, "prev", "waiting")
  ids[#ids + 1] = id
end
for _, id in ipairs(ids) do
  local jobKey = base .. id
  if redis.call("GET", jobKey .. ":lock") == "bench:" .. id then
    redis.call("DEL", jobKey .. ":lock")
    redis.call("LREM", KEYS[2], -1, id)
    redis.call("ZADD", KEYS[3], now, id)
    redis.call("HSET", jobKey, "returnvalue", '{"ok":true}', "finishedOn", now)
    redis.call("HINCRBY", jobKey, "atm", 1)
    redis.call("XADD", KEYS[4], "*", "event", "completed", "jobId", id,
      "returnvalue", '{"ok":true}', "prev", "active")
  end
end
redis.call("XTRIM", KEYS[4], "MAXLEN", "~", 10000)
return #ids
"#,
);

/// Jobs per script call, and calls in flight.
const BATCH: u64 = 200;
const IN_FLIGHT: usize = 4;

/// Drains `jobs` filled jobs through the lifecycle loop.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    jobs: u64,
) -> Result<WorkerMeasurement> {
    let name = queue_name("limit", "lua", "lifecycle");
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    fill(&queue, jobs).await?;
    let keys = queue.keys().clone();
    use ractor_bullmq::protocol::keys::QueueKey;
    let script_keys = vec![
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Active),
        keys.key(QueueKey::Completed),
        keys.key(QueueKey::Events),
    ];
    let base = keys.base().to_string();
    let client = queue.redis_client().expect("a Redis queue").clone();
    let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
    let client_before = process_cpu::cpu_seconds();
    let started = Instant::now();
    let calls = jobs.div_ceil(BATCH);
    let done: Vec<Result<u64, bullmq_redis::RedisError>> = futures::stream::iter(0..calls)
        .map(|_| {
            let (client, keys, base) = (&client, script_keys.clone(), base.clone());
            async move {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis().to_string())
                    .unwrap_or_default();
                LIFECYCLE
                    .run::<u64>(
                        client,
                        keys,
                        vec![base.into(), BATCH.to_string().into(), now.into()],
                    )
                    .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = process_cpu::cpu_seconds()
        .zip(client_before)
        .map(|(after, before)| after - before);
    let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
    let mut processed = 0;
    for result in done {
        processed += result?;
    }
    ensure!(
        processed == jobs,
        "redis limit: {processed} of {jobs} jobs went through"
    );
    let mut m = WorkerMeasurement::new("redis-lua", "redis_limit", jobs, (1, 1, 0), seconds)
        .redis_cpu(redis_cpu);
    m.client_cpu_s = client_cpu_s;
    m.print_json_line();
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(m)
}
