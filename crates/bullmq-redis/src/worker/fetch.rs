//! Fetching a batch of jobs: `worker_fetch_batch.lua`.

use std::collections::HashMap;
use std::time::Duration;

use fred::prelude::{Client, HashesInterface, Value};
use serde::Serialize;

use super::reply::{array, integer, job_hash, string, strings, unexpected};
use super::scripts::FETCH_BATCH;
use super::WorkerKeys;
use crate::error::Result;

/// What a worker asks for when it fetches jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchRequest {
    /// How many jobs at most (the worker's free slots).
    pub count: u32,
    /// Lock tokens are `{token_prefix}:{token_seq + i}`; the prefix identifies the worker.
    pub token_prefix: String,
    /// First sequence number for the tokens of this call; advance it by the jobs returned.
    pub token_seq: u64,
    /// Lock time to live (Node `lockDuration`).
    pub lock_duration: Duration,
    /// Worker name, stored in the job hash as `pb` (processed by) when set.
    pub worker_name: Option<String>,
    /// Worker rate limit: at most `max` jobs per `duration` (Node `limiter`). The queue-level
    /// limit in `meta` (`max`) takes precedence, as in Node.
    pub limiter: Option<(u32, Duration)>,
}

impl FetchRequest {
    /// A request for `count` jobs with the given token prefix and lock duration.
    pub fn new(count: u32, token_prefix: impl Into<String>, lock_duration: Duration) -> Self {
        Self {
            count,
            token_prefix: token_prefix.into(),
            token_seq: 0,
            lock_duration,
            worker_name: None,
            limiter: None,
        }
    }

    pub(crate) fn wire(&self, now_ms: u64) -> WireFetch<'_> {
        WireFetch {
            count: self.count,
            now: now_ms,
            token_prefix: &self.token_prefix,
            token_seq: self.token_seq,
            lock_duration: u64::try_from(self.lock_duration.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            name: self.worker_name.as_deref(),
            limiter_max: self.limiter.map_or(0, |(max, _)| max),
            limiter_duration: self
                .limiter
                .map_or(0, |(_, d)| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// The JSON the fetch include decodes.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireFetch<'a> {
    count: u32,
    now: u64,
    token_prefix: &'a str,
    token_seq: u64,
    lock_duration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    limiter_max: u32,
    limiter_duration: u64,
}

/// One job moved to active for this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedJob {
    /// The job id.
    pub id: String,
    /// The lock token the worker must present to renew the lock and finish the job.
    pub token: String,
    /// The job hash as stored (fields `name`, `data`, `opts`, `timestamp`, `atm`, `ats`, …).
    pub fields: HashMap<String, String>,
    /// Why the hash could not be read as text (a field that is not UTF-8), in which case
    /// `fields` is empty: the worker fails the job with this reason rather than run it on data
    /// decoded lossily.
    pub unreadable: Option<String>,
}

impl FetchedJob {
    /// A fetched job with a readable hash.
    pub fn new(
        id: impl Into<String>,
        token: impl Into<String>,
        fields: HashMap<String, String>,
    ) -> Self {
        Self {
            id: id.into(),
            token: token.into(),
            fields,
            unreadable: None,
        }
    }
}

/// A job a script failed on its own because its hash is corrupted (see the "Bad input"
/// section of `docs/compatibility.md`): it is in `failed` with `reason` as `failedReason`, and
/// a `failed` event was emitted. The other jobs of the call were processed as usual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptedJob {
    /// The job id (lossily decoded when it is not UTF-8, which is then the reason).
    pub id: String,
    /// `failedReason`, naming the field and its value.
    pub reason: String,
}

/// Parses the flat `id, reason, …` list of the corrupted jobs a script failed.
pub(crate) fn corrupted_jobs(script: &'static str, value: Value) -> Result<Vec<CorruptedJob>> {
    let mut items = array(script, value)?.into_iter();
    let mut out = Vec::new();
    while let (Some(id), Some(reason)) = (items.next(), items.next()) {
        out.push(CorruptedJob {
            id: string(script, id)?,
            reason: string(script, reason)?,
        });
    }
    Ok(out)
}

/// What a fetch returned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fetched {
    /// Jobs now active and locked for this worker, in the order they were taken.
    pub jobs: Vec<FetchedJob>,
    /// The rate limiter is closed for this long (zero when not limited).
    pub rate_limited_for: Duration,
    /// Ready time (ms since the epoch) of the earliest delayed job, when nothing was fetched.
    pub next_delayed_at: Option<u64>,
    /// The queue is paused or at its global concurrency.
    pub gated: bool,
    /// Jobs taken from wait that the script failed because their hash is corrupted.
    pub corrupted: Vec<CorruptedJob>,
    /// Ids taken from wait that had no job hash: nothing to run or to fail; they were removed
    /// from the queue's lists.
    pub dropped: Vec<String>,
}

impl Fetched {
    /// A reply carrying `jobs` (for fake stores in tests).
    pub fn with_jobs(jobs: Vec<FetchedJob>) -> Self {
        Self {
            jobs,
            ..Self::default()
        }
    }
}

/// Moves up to `request.count` jobs to active (promoting due delayed jobs first, honouring
/// pause, global concurrency and rate limits) and returns them with their lock tokens.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails; [`crate::RedisError::UnexpectedReply`]
/// when the reply is malformed.
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future after the script ran leaves the jobs active and
/// locked; they return to wait through stalled recovery once their locks expire.
pub async fn fetch_batch(
    client: &Client,
    keys: &WorkerKeys,
    request: &FetchRequest,
    now_ms: u64,
) -> Result<Fetched> {
    let wire = serde_json::to_string(&request.wire(now_ms))
        .map_err(|e| unexpected(FETCH_BATCH.name(), e.to_string()))?;
    let reply: Value = FETCH_BATCH
        .run(
            client,
            keys.script_keys(),
            vec![keys.queue().base().into(), wire.into()],
        )
        .await?;
    parse_fetched(client, keys, FETCH_BATCH.name(), reply, Some(request)).await
}

/// Parses the `{ jobs, rateLimitTtl, nextDelayedAt, gated, hashes, corrupted, dropped }` reply of the fetch include,
/// reading the hashes of the jobs it moved to active when the reply does not carry them.
///
/// The i-th job's token is derived from `request`. A fetch of up to `WFETCH_INLINE_MAX` jobs
/// (100, in the include) returns their hashes inline (`hashes[i]` is the flat `HGETALL` of
/// `jobs[i]`), which spares a round trip; that round trip, not Redis CPU, bounds a worker's
/// cycle. A larger one (thousands of free slots at once) returns an empty `hashes`, keeping
/// one script's reply and Lua memory bounded; the hashes are then read with pipelined
/// `HGETALL`s after the script, while the jobs are locked by this worker.
pub(crate) async fn parse_fetched(
    client: &Client,
    keys: &WorkerKeys,
    script: &'static str,
    reply: Value,
    request: Option<&FetchRequest>,
) -> Result<Fetched> {
    let mut parts = array(script, reply)?.into_iter();
    let (Some(jobs), Some(ttl), Some(next), Some(gated)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(unexpected(script, "fetch reply has fewer than 4 parts"));
    };
    let inline = match parts.next() {
        Some(hashes) => array(script, hashes)?,
        None => Vec::new(),
    };
    let corrupted = match parts.next() {
        Some(list) => corrupted_jobs(script, list)?,
        None => Vec::new(),
    };
    let dropped = match parts.next() {
        Some(list) => strings(script, list)?,
        None => Vec::new(),
    };
    let ids = array(script, jobs)?
        .into_iter()
        .map(|id| string(script, id))
        .collect::<Result<Vec<_>>>()?;
    let ttl = integer(script, ttl)?;
    let next = integer(script, next)?;
    let mut fetched = Fetched {
        jobs: Vec::with_capacity(ids.len()),
        rate_limited_for: Duration::from_millis(u64::try_from(ttl).unwrap_or(0)),
        next_delayed_at: u64::try_from(next).ok().filter(|n| *n > 0),
        gated: integer(script, gated)? != 0,
        corrupted,
        dropped,
    };
    if ids.is_empty() {
        return Ok(fetched);
    }
    let Some(request) = request else {
        return Err(unexpected(script, "jobs fetched without a fetch request"));
    };
    let hashes = if inline.is_empty() {
        let pipeline = client.pipeline();
        for id in &ids {
            let _: () = pipeline.hgetall(keys.queue().job(id)).await?;
        }
        pipeline.try_all::<Value>().await
    } else {
        inline.into_iter().map(Ok).collect()
    };
    if hashes.len() != ids.len() {
        return Err(unexpected(
            script,
            format!("{} job hashes read for {} jobs", hashes.len(), ids.len()),
        ));
    }
    for ((seq, id), fields) in (request.token_seq..).zip(ids).zip(hashes) {
        let (fields, unreadable) = match job_hash(script, fields?)? {
            Ok(fields) => (fields, None),
            Err(reason) => (HashMap::new(), Some(reason)),
        };
        fetched.jobs.push(FetchedJob {
            token: format!("{}:{seq}", request.token_prefix),
            id,
            fields,
            unreadable,
        });
    }
    Ok(fetched)
}
