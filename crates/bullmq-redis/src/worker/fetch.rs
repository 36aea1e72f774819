//! Fetching a batch of jobs: `worker_fetch_batch.lua`.

use std::collections::HashMap;
use std::time::Duration;

use fred::prelude::{Client, HashesInterface, Value};
use serde::Serialize;

use super::reply::{array, integer, job_hash, string, strings, unexpected};
use super::scripts::FETCH_BATCH;
use super::{JobFacts, WorkerKeys};
use crate::error::Result;
use bullmq_protocol::JobRecord;

pub use bullmq_backend::{CorruptedJob, FetchRequest, Fetched, FetchedJob};

/// The fetch part of a script's JSON header; tokens are `{token_prefix}:{token_seq + i}`, or
/// the request's exact token.
pub(crate) fn wire(request: &FetchRequest, token_seq: u64, now_ms: u64) -> WireFetch<'_> {
    WireFetch {
        count: request.count,
        now: now_ms,
        token_prefix: &request.token_prefix,
        token_seq,
        token: request.token.as_deref(),
        only_if_finished: request.only_if_finished,
        lock_duration: u64::try_from(request.lock_duration.as_millis())
            .unwrap_or(u64::MAX)
            .max(1),
        name: request.worker_name.as_deref(),
        limiter_max: request.limiter.map_or(0, |(max, _)| max),
        limiter_duration: request
            .limiter
            .map_or(0, |(_, d)| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
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
    /// The caller's exact lock token, which replaces `{tokenPrefix}:{seq}` when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'a str>,
    /// Read by the finish script: fetch only when every finish was done.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    only_if_finished: bool,
    lock_duration: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    limiter_max: u32,
    limiter_duration: u64,
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

/// Decodes a fetched job's hash into its record, with the facts its finish can skip reading
/// packed in the receipt. Every client writes `name` and `opts` when it creates a job: a hash
/// without them is a remnant (a job deleted under a script that wrote a field back) or a
/// manual edit, and is failed rather than run with defaults; the decoder checks the rest.
fn decode_job(id: String, token: String, fields: &HashMap<String, String>) -> FetchedJob {
    if let Some(field) = ["name", "opts"]
        .into_iter()
        .find(|f| !fields.contains_key(*f))
    {
        return FetchedJob::unreadable(
            id,
            token,
            format!("corrupted job hash: {field} is missing"),
        );
    }
    match JobRecord::decode(&id, fields) {
        Ok(record) => {
            let facts = JobFacts::new(
                record.attempts_made,
                record.parent_key.is_some() || record.parent.is_some(),
            )
            .with_deduplication(record.deduplication_id.is_some());
            FetchedJob::new(token, record).with_receipt(facts.receipt())
        }
        Err(error) => FetchedJob::unreadable(id, token, format!("corrupted job hash: {error}")),
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
    token_seq: u64,
    now_ms: u64,
) -> Result<Fetched> {
    let wire = serde_json::to_string(&wire(request, token_seq, now_ms))
        .map_err(|e| unexpected(FETCH_BATCH.name(), e.to_string()))?;
    let reply: Value = FETCH_BATCH
        .run(
            client,
            keys.script_keys(),
            vec![keys.queue().base().into(), wire.into()],
        )
        .await?;
    parse_fetched(
        client,
        keys,
        FETCH_BATCH.name(),
        reply,
        Some((request, token_seq)),
    )
    .await
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
    request: Option<(&FetchRequest, u64)>,
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
    let iterations = match parts.next() {
        Some(list) => array(script, list)?,
        None => Vec::new(),
    };
    let mut invalid_settings = Vec::new();
    if let Some(list) = parts.next() {
        // Another client's bytes: shown, never refused.
        let text = |v: Value| match v {
            Value::Bytes(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            other => string(script, other),
        };
        let mut flat = array(script, list)?.into_iter();
        while let (Some(field), Some(value)) = (flat.next(), flat.next()) {
            invalid_settings.push((text(field)?, text(value)?));
        }
    }
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
        invalid_settings,
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
    let (request, token_seq) = request;
    for ((seq, id), fields) in (token_seq..).zip(ids).zip(hashes) {
        let token = request.token_for(seq);
        let job = match job_hash(script, fields?)? {
            Ok(fields) => decode_job(id, token, &fields),
            Err(reason) => FetchedJob::unreadable(id, token, reason),
        };
        fetched.jobs.push(job);
    }
    // Next iterations the script created (or decided on) for the scheduler jobs it fetched.
    let mut iterations = iterations.into_iter();
    while let (Some(i), Some(code), Some(next)) =
        (iterations.next(), iterations.next(), iterations.next())
    {
        let i = usize::try_from(integer(script, i)?).unwrap_or(0);
        let outcome = crate::queue::schedulers::next_iteration(
            script,
            integer(script, code)?,
            Some(string(script, next)?),
        )?;
        let job = i
            .checked_sub(1)
            .and_then(|i| fetched.jobs.get_mut(i))
            .ok_or_else(|| unexpected(script, format!("next iteration of unknown job {i}")))?;
        job.next_iteration = Some(outcome);
    }
    Ok(fetched)
}
