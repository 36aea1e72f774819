//! [`PgWorkerStore`]: one Worker's side of a queue on the PostgreSQL protocol.
//!
//! Every claim and every finish is one autocommit call of an installed function, as Node's
//! Worker makes them: two claims in one transaction could deadlock against a Node worker (the
//! first claim holds the queue's concurrency lock while Node's claim waits for it holding a
//! row the second claim then needs). A batch is *pipelined* on one connection instead: each
//! statement still runs and commits alone, but the batch costs one round trip.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::NextIteration;
use bullmq_backend::{
    now_ms, BackendError, BackendResult, ChildRef, ConnectionChange, Dependencies,
    DependencyCounts, DependencyKind, DependencyPage, FetchRequest, Fetched, FetchedJob, Finish,
    FinishAction, FinishCode, FinishReply, JobFlows, JobUpdates, MoveToWaitOutcome, Retention,
    StalledReport, WaitingChildrenOutcome, WorkerStore,
};
use bullmq_protocol::scheduler::{plan_next_iteration, NextIterationPlan};
use deadpool_postgres::ClientWrapper;
use futures::future::join_all;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::error::{PgError, PgResult};
use crate::listener::Listener;
use crate::queue_store::PgQueueStore;
use crate::{row, schedulers};

/// Claim statement (`move_to_active`), columns as [`row::JOB_COLUMNS`]; built once.
static CLAIM_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM move_to_active($1::text, $2::text, $3::int8, $4::int8, $5::text, \
         $6::int4, $7::int8)",
        row::JOB_COLUMNS
    )
});

static COMPLETE_FETCH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM move_to_completed_fetch($1::text, $2::text, $3::text, $4::text::jsonb, \
         $5::int8, $6::bool, $7::int8, $8::int4, $9::int8, $10::int8, $11::text, $12::int4, \
         $13::int8)",
        row::JOB_COLUMNS
    )
});

static FAIL_FETCH_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM move_to_failed_fetch($1::text, $2::text, $3::text, $4::text, \
         $5::text::jsonb, $6::int8, $7::bool, $8::int8, $9::int4, $10::int8, $11::int8, \
         $12::text, $13::int4, $14::int8)",
        row::JOB_COLUMNS
    )
});

const COMPLETE_SQL: &str = "SELECT move_to_completed($1::text, $2::text, $3::text, \
     $4::text::jsonb, $5::int8, $6::bool, $7::int8, $8::int4)";
const FAIL_SQL: &str = "SELECT move_to_failed($1::text, $2::text, $3::text, $4::text, \
     $5::text::jsonb, $6::int8, $7::bool, $8::int8, $9::int4)";
const RETRY_SQL: &str =
    "SELECT retry_job($1::text, $2::text, $3::text, $4::bool, $5::text, $6::text::jsonb)::int8";
const DELAY_SQL: &str = "SELECT move_to_delayed($1::text, $2::text, $3::text, $4::int8, $5::int8, \
     $6::bool, $7::text, $8::text::jsonb)::int8";
const SET_RATE_LIMIT_SQL: &str =
    "SELECT set_rate_limit($1::text, $2::int8, $3::int8)::text, 0::int8";
const TO_WAIT_SQL: &str = "SELECT (SELECT state::text FROM job WHERE queue = $1 AND id = $2), \
        (SELECT lock_token FROM job WHERE queue = $1 AND id = $2), \
        move_active_to_wait($1::text, $2::text, $3::text, $4::int8)";

/// After an empty claim: why nothing came (limiter, next delayed job, pause, global
/// concurrency), read in one statement.
const SIGNAL_SQL: &str = "SELECT s.rate_limit_ttl, s.next_delay, \
        EXISTS (SELECT 1 FROM meta WHERE queue = $1 AND field = 'paused'), \
        (SELECT value FROM meta WHERE queue = $1 AND field = 'concurrency'), \
        (SELECT count(*) FROM job WHERE queue = $1 AND state = 'active') \
   FROM next_signal($1::text, $2::int4, $3::int8) s";

/// What one finish did.
struct Finished {
    code: FinishCode,
    /// The job the fused finish claimed with the finished job's token.
    next: Option<(String, Row)>,
    /// The limiter's remaining time (rate-limit finishes).
    rate_limited_for: Duration,
    /// Whether the finish claimed in its own transaction (a `*_fetch` function).
    fused: bool,
}

/// A Worker's store.
pub struct PgWorkerStore {
    queue: PgQueueStore,
    listener: Listener,
    worker_name: Option<String>,
    metrics_max_points: u32,
    /// Tokens minted so far (`{token_prefix}:{n}`).
    next_token: AtomicU64,
    /// The jobs generation seen when the last claim started: a wait returns at once when a
    /// notification came since.
    seen_jobs: AtomicU64,
    /// The events generation seen then, and whether the last claim found the queue gated (a
    /// finish on a gated queue notifies only `bullmq_events`).
    seen_events: AtomicU64,
    gated: AtomicBool,
    closed: AtomicBool,
    /// The limiter of the last fetch, for the wake-up probe.
    limiter: Mutex<Option<(u32, Duration)>>,
}

impl std::fmt::Debug for PgWorkerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWorkerStore")
            .field("queue", &self.queue.queue)
            .field("worker_name", &self.worker_name)
            .finish()
    }
}

impl PgWorkerStore {
    pub(crate) fn new(
        queue: PgQueueStore,
        listener: Listener,
        worker_name: Option<String>,
        metrics_max_points: u32,
    ) -> Self {
        let jobs = *listener.signals.jobs.borrow();
        let events = *listener.signals.events.borrow();
        Self {
            queue,
            listener,
            worker_name,
            metrics_max_points,
            next_token: AtomicU64::new(0),
            seen_jobs: AtomicU64::new(jobs),
            seen_events: AtomicU64::new(events),
            gated: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            limiter: Mutex::new(None),
        }
    }

    fn q(&self) -> &str {
        &self.queue.queue
    }

    fn check_open(&self) -> BackendResult<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(BackendError::Closed)
        } else {
            Ok(())
        }
    }

    /// Remembers the generations before a claim starts (see `seen_jobs`).
    fn note_generations(&self) {
        let signals = &self.listener.signals;
        self.seen_jobs
            .store(*signals.jobs.borrow(), Ordering::Release);
        self.seen_events
            .store(*signals.events.borrow(), Ordering::Release);
    }

    fn token(&self, request: &FetchRequest) -> String {
        let n = self.next_token.fetch_add(1, Ordering::Relaxed) + 1;
        request.token_for(n)
    }

    async fn client(&self, operation: &'static str) -> PgResult<deadpool_postgres::Object> {
        self.queue.db.client(operation).await
    }

    /// Claims up to `count` jobs with fresh tokens on `client`: one claim first, then the rest
    /// pipelined when the first found a job (an empty queue costs one statement, not `count`).
    async fn claim(
        &self,
        client: &ClientWrapper,
        request: &FetchRequest,
        count: u32,
    ) -> PgResult<Vec<(String, Row)>> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let statement = client
            .prepare_cached(&CLAIM_SQL)
            .await
            .map_err(PgError::sql("claiming a job"))?;
        let (limiter_max, limiter_ms) = limiter_args(request.limiter);
        let lock_ms = ms(request.lock_duration);
        let name = request.worker_name.clone().or(self.worker_name.clone());
        let claim_one = |token: String| {
            let statement = &statement;
            let name = &name;
            async move {
                let now = now_i64();
                let rows = client
                    .query(
                        statement,
                        &[
                            &self.q(),
                            &token,
                            &lock_ms,
                            &now,
                            name,
                            &limiter_max,
                            &limiter_ms,
                        ],
                    )
                    .await
                    .map_err(PgError::sql("claiming a job"))?;
                Ok::<_, PgError>(rows.into_iter().next().map(|r| (token, r)))
            }
        };
        // Rounds of 1, 2, 4, … pipelined claims, until a round comes back short: a busy
        // queue fills the slots in a few round trips, and a queue with one job ready costs
        // one claim, not one per free slot.
        let mut out = Vec::new();
        let mut round = 1usize;
        let count = count as usize;
        while out.len() < count {
            let size = round.min(count - out.len());
            let claims: Vec<_> = (0..size).map(|_| claim_one(self.token(request))).collect();
            let mut got = 0;
            for claimed in join_all(claims).await {
                if let Some(job) = claimed? {
                    out.push(job);
                    got += 1;
                }
            }
            if got < size {
                break;
            }
            round *= 2;
        }
        Ok(out)
    }

    /// Why a claim came back short: limiter ttl, next delayed job, gate.
    async fn signal(
        &self,
        client: &ClientWrapper,
        request: &FetchRequest,
        fetched: &mut Fetched,
    ) -> PgResult<()> {
        let (limiter_max, _) = limiter_args(request.limiter);
        let now = now_i64();
        let row = client
            .query_one(SIGNAL_SQL, &[&self.q(), &limiter_max, &now])
            .await
            .map_err(PgError::sql("reading why no job was claimed"))?;
        let ttl: Option<i64> = row.get(0);
        let next_delay: Option<i64> = row.get(1);
        let paused: bool = row.get(2);
        let concurrency: Option<String> = row.get(3);
        let active: i64 = row.get(4);
        fetched.rate_limited_for =
            Duration::from_millis(u64::try_from(ttl.unwrap_or(0)).unwrap_or(0));
        fetched.next_delayed_at = next_delay
            .and_then(|d| u64::try_from(d).ok())
            .filter(|d| *d > 0);
        let maxed = match concurrency.as_deref().map(str::parse::<i64>) {
            Some(Ok(limit)) => limit > 0 && active >= limit,
            Some(Err(_)) => {
                fetched.invalid_settings.push((
                    "concurrency".into(),
                    concurrency.clone().unwrap_or_default(),
                ));
                false
            }
            None => false,
        };
        fetched.gated = paused || maxed;
        Ok(())
    }

    /// The claimed rows as fetched jobs; for an iteration of an `every` scheduler, the next
    /// iteration is created right away, as Node's Worker does when it takes one (and as the
    /// Redis backend does in its fetch): cron runs are left to the Worker's own call.
    async fn to_fetched(
        &self,
        client: &deadpool_postgres::Object,
        claimed: Vec<(String, Row)>,
    ) -> Vec<FetchedJob> {
        let jobs: Vec<FetchedJob> = claimed
            .into_iter()
            .map(|(token, r)| match self.queue.record_of(&r) {
                Ok(record) => FetchedJob::new(token, record),
                Err(e) => FetchedJob::unreadable(row::id(&r), token, e.to_string()),
            })
            .collect();
        let advanced = jobs.iter().map(|job| self.advance_every(client, job));
        let outcomes = join_all(advanced).await;
        jobs.into_iter()
            .zip(outcomes)
            .map(|(job, next)| match next {
                Some(next) => job.with_next_iteration(next),
                None => job,
            })
            .collect()
    }

    /// What creating the next iteration of `job` did, when it is an iteration of an `every`
    /// scheduler; `None` (the Worker plans it and reports what goes wrong) otherwise, or when
    /// the call failed.
    async fn advance_every(
        &self,
        client: &deadpool_postgres::Object,
        job: &FetchedJob,
    ) -> Option<NextIteration> {
        let record = job.job.as_ref().ok()?;
        let scheduler = record
            .repeat_job_key
            .as_deref()
            .filter(|id| !id.is_empty())?;
        let repeat = record.opts.repeat.as_ref()?;
        let every = repeat
            .get("every")
            .and_then(Value::as_u64)
            .filter(|e| *e > 0);
        if every.is_none() || repeat.get("pattern").is_some_and(|p| !p.is_null()) {
            return None;
        }
        match plan_next_iteration(&record.id, scheduler, &record.opts, now_ms()) {
            Ok(Some(plan)) => match schedulers::next_iteration(client, self.q(), &plan).await {
                Ok(next) => Some(next),
                Err(error) => {
                    tracing::debug!(%error, job_id = %record.id, "next iteration left to the worker");
                    None
                }
            },
            Ok(None) => Some(NextIteration::Ended),
            Err(_) => None,
        }
    }

    /// Finishes one job (one statement, or two for a rate limit) on `client`; with
    /// `fetch`, also claims the next job with the finished job's token (the fused
    /// `*_fetch` functions), returning it.
    async fn finish_one(
        &self,
        client: &ClientWrapper,
        finish: &Finish,
        fetch: Option<&FetchRequest>,
    ) -> PgResult<Finished> {
        let q = self.q();
        let id = finish.job_id.as_str();
        let token = finish.token.as_str();
        let now = now_i64();
        let reply = match &finish.action {
            FinishAction::Complete { returnvalue, keep } => {
                let (remove_all, keep_age, keep_count) = retention_args(*keep);
                let rv = json_or_null(returnvalue);
                let params: [&(dyn ToSql + Sync); 8] = [
                    &q,
                    &id,
                    &token,
                    &rv,
                    &now,
                    &remove_all,
                    &keep_age,
                    &keep_count,
                ];
                self.finish_call(
                    client,
                    &params,
                    fetch,
                    now,
                    (COMPLETE_SQL, &COMPLETE_FETCH_SQL),
                )
                .await
            }
            FinishAction::Fail {
                reason,
                stacktrace,
                keep,
                ..
            } => {
                let (remove_all, keep_age, keep_count) = retention_args(*keep);
                let params: [&(dyn ToSql + Sync); 9] = [
                    &q,
                    &id,
                    &token,
                    reason,
                    stacktrace,
                    &now,
                    &remove_all,
                    &keep_age,
                    &keep_count,
                ];
                self.finish_call(client, &params, fetch, now, (FAIL_SQL, &FAIL_FETCH_SQL))
                    .await
            }
            FinishAction::Retry {
                reason,
                stacktrace,
                lifo,
            } => {
                let params: [&(dyn ToSql + Sync); 6] = [&q, &id, &token, lifo, reason, stacktrace];
                rows(client, RETRY_SQL, &params).await
            }
            FinishAction::Delay {
                delay,
                reason,
                stacktrace,
                skip_attempt,
            } => {
                let delay = ms(*delay);
                let params: [&(dyn ToSql + Sync); 8] = [
                    &q,
                    &id,
                    &token,
                    &(now + delay),
                    &delay,
                    skip_attempt,
                    reason,
                    stacktrace,
                ];
                rows(client, DELAY_SQL, &params).await
            }
            FinishAction::RateLimit { ttl } => {
                // A zero ttl (Node's plain RateLimitError after `Queue.rateLimit`) leaves the
                // limiter as it is.
                if !ttl.is_zero() {
                    let params: [&(dyn ToSql + Sync); 3] = [&q, &ms(*ttl), &now];
                    rows(client, SET_RATE_LIMIT_SQL, &params).await?;
                }
                let (refused, left) = to_wait(client, q, id, token).await?;
                return Ok(Finished {
                    code: refused.unwrap_or(FinishCode::Ok),
                    next: None,
                    rate_limited_for: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                    fused: false,
                });
            }
        };
        let fused = fetch.is_some()
            && matches!(
                finish.action,
                FinishAction::Complete { .. } | FinishAction::Fail { .. }
            );
        let done = |code, next| Finished {
            code,
            next,
            rate_limited_for: Duration::ZERO,
            fused,
        };
        match reply {
            Ok(rows) if fused => Ok(done(
                FinishCode::Ok,
                rows.into_iter().next().map(|r| (finish.token.clone(), r)),
            )),
            Ok(rows) => {
                let code = rows
                    .first()
                    .and_then(|r| r.try_get::<_, i64>(0).ok())
                    .unwrap_or(0);
                // Functions answer refusals with a negative code or raise them as BM001.
                let code = if code < 0 {
                    finish_code(code)
                } else {
                    FinishCode::Ok
                };
                Ok(done(code, None))
            }
            Err(e) => match e.bullmq_code() {
                Some(code) => Ok(done(finish_code(code), None)),
                None => Err(e),
            },
        }
    }

    /// A completion or failure with `params`: alone (`sql.0`), or fused with the next claim
    /// (`sql.1`, the claim's parameters appended) when `fetch` asks for one.
    async fn finish_call(
        &self,
        client: &ClientWrapper,
        params: &[&(dyn ToSql + Sync)],
        fetch: Option<&FetchRequest>,
        now: i64,
        sql: (&str, &str),
    ) -> PgResult<Vec<Row>> {
        let Some(request) = fetch else {
            return rows(client, sql.0, params).await;
        };
        let (limiter_max, limiter_ms) = limiter_args(request.limiter);
        let name = request.worker_name.clone().or(self.worker_name.clone());
        let lock_ms = ms(request.lock_duration);
        let mut all = params.to_vec();
        all.extend_from_slice(&[&lock_ms, &now, &name, &limiter_max, &limiter_ms]);
        rows(client, sql.1, &all).await
    }

    async fn collect_metrics(
        &self,
        client: &ClientWrapper,
        finishes: &[Finish],
        codes: &[FinishCode],
    ) {
        if self.metrics_max_points == 0 {
            return;
        }
        let max = i32::try_from(self.metrics_max_points).unwrap_or(i32::MAX);
        for (finish, code) in finishes.iter().zip(codes) {
            let kind = match finish.action {
                FinishAction::Complete { .. } if code.is_ok() => "completed",
                FinishAction::Fail { .. } if code.is_ok() => "failed",
                _ => continue,
            };
            // Best effort, as Node: metrics never fail a finish.
            if let Err(error) = client
                .query(
                    "SELECT collect_metrics($1::text, $2::text, $3::int4, $4::int8)::text",
                    &[&self.q(), &kind, &max, &now_i64()],
                )
                .await
            {
                tracing::debug!(%error, "collecting metrics failed");
            }
        }
    }
}

async fn rows(
    client: &ClientWrapper,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> PgResult<Vec<Row>> {
    let statement = client
        .prepare_cached(sql)
        .await
        .map_err(PgError::sql("finishing a job"))?;
    client
        .query(&statement, params)
        .await
        .map_err(PgError::sql("finishing a job"))
}

/// BullMQ's code as a finish outcome.
fn finish_code(code: i64) -> FinishCode {
    FinishCode::from_code(code)
}

fn json_or_null(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(_) => raw.to_string(),
        Err(_) => Value::String(raw.to_string()).to_string(),
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn now_i64() -> i64 {
    i64::try_from(now_ms()).unwrap_or(i64::MAX)
}

fn limiter_args(limiter: Option<(u32, Duration)>) -> (Option<i32>, Option<i64>) {
    match limiter {
        Some((max, duration)) => (
            Some(i32::try_from(max).unwrap_or(i32::MAX)),
            Some(ms(duration)),
        ),
        None => (None, None),
    }
}

/// Node's `normalizeKeep`: (remove all, keep age in seconds, keep count).
fn retention_args(keep: Retention) -> (bool, Option<i64>, Option<i32>) {
    if keep.count == Some(0) {
        return (true, None, None);
    }
    (
        false,
        keep.age
            .map(|a| i64::try_from(a.as_secs()).unwrap_or(i64::MAX)),
        keep.count.map(|c| i32::try_from(c).unwrap_or(i32::MAX)),
    )
}

#[async_trait]
impl WorkerStore for PgWorkerStore {
    fn queue_name(&self) -> &str {
        self.q()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> BackendResult<Fetched> {
        self.check_open()?;
        if let Ok(mut limiter) = self.limiter.lock() {
            *limiter = request.limiter;
        }
        self.note_generations();
        let client = self.client("claiming jobs").await?;
        let claimed = self.claim(&client, request, request.count).await?;
        let short = claimed.len() < request.count as usize;
        let mut fetched = Fetched::with_jobs(self.to_fetched(&client, claimed).await);
        if short {
            self.signal(&client, request, &mut fetched).await?;
        }
        self.gated.store(fetched.gated, Ordering::Release);
        Ok(fetched)
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> BackendResult<FinishReply> {
        self.check_open()?;
        if fetch.is_some() {
            self.note_generations();
        }
        // One connection for the whole batch, on purpose: its statements commit one after the
        // other, so their events become visible in id order and Node's QueueEvents (which
        // reads "ids above the last one seen") misses none of them. Spreading a batch over
        // several connections shares disk flushes but made Node's reader skip events.
        let client = &self.client("finishing jobs").await?;
        // The first `fetch.count` completions and failures claim the next job in their own
        // transaction (with the finished job's token, as the protocol's fused functions do).
        let mut fused_left = fetch.map_or(0, |f| f.count);
        let fuse = |finish: &Finish, left: &mut u32| {
            let can = matches!(
                finish.action,
                FinishAction::Complete { .. } | FinishAction::Fail { .. }
            ) && *left > 0
                && fetch.is_some_and(|f| !f.only_if_finished);
            if can {
                *left -= 1;
                fetch
            } else {
                None
            }
        };
        let calls: Vec<_> = finishes
            .iter()
            .map(|finish| {
                let with = fuse(finish, &mut fused_left);
                self.finish_one(client, finish, with)
            })
            .collect();
        let mut codes = Vec::with_capacity(finishes.len());
        let mut claimed = Vec::new();
        let mut limited = Duration::ZERO;
        // A fused finish that was done but claimed nothing found the queue dry (or gated).
        let mut dry = false;
        for reply in join_all(calls).await {
            let finished = reply?;
            if finished.fused && finished.code.is_ok() && finished.next.is_none() {
                dry = true;
            }
            codes.push(finished.code);
            claimed.extend(finished.next);
            limited = limited.max(finished.rate_limited_for);
        }
        self.collect_metrics(client, finishes, &codes).await;
        let mut fetched = Fetched {
            rate_limited_for: limited,
            ..Fetched::default()
        };
        if let Some(request) = fetch {
            let all_done = codes.iter().all(|c| c.is_ok());
            if !request.only_if_finished || all_done {
                let wanted = request
                    .count
                    .saturating_sub(u32::try_from(claimed.len()).unwrap_or(u32::MAX));
                // Slots the fused claims did not fill get claims of their own, unless a fused
                // claim already found nothing to take.
                if !dry && limited.is_zero() {
                    let extra = self.claim(client, request, wanted).await?;
                    claimed.extend(extra);
                }
                if claimed.len() < request.count as usize {
                    self.signal(client, request, &mut fetched).await?;
                    fetched.rate_limited_for = fetched.rate_limited_for.max(limited);
                }
                self.gated.store(fetched.gated, Ordering::Release);
            }
        }
        fetched.jobs = self.to_fetched(client, claimed).await;
        Ok(FinishReply::new(codes, fetched))
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> BackendResult<Vec<String>> {
        self.check_open()?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = jobs.iter().map(|(id, _)| id.as_str()).collect();
        let tokens: Vec<&str> = jobs.iter().map(|(_, t)| t.as_str()).collect();
        let client = self.client("renewing locks").await?;
        // Our own statement, as Node's `extend_locks` command: a plain UPDATE of the lock
        // columns of rows still active under their token (no advisory lock is involved).
        let rows = client
            .query(
                "WITH input AS ( \
                   SELECT i.id, t.token, i.ord \
                     FROM unnest($2::text[]) WITH ORDINALITY AS i(id, ord) \
                     JOIN unnest($3::text[]) WITH ORDINALITY AS t(token, ord) USING (ord)), \
                 renewed AS ( \
                   UPDATE job SET locked_until_ms = $4::int8 + $5::int8 FROM input \
                    WHERE job.queue = $1 AND job.id = input.id AND job.state = 'active' \
                      AND job.lock_token = input.token \
                   RETURNING job.id) \
                 SELECT input.id FROM input LEFT JOIN renewed ON renewed.id = input.id \
                  WHERE renewed.id IS NULL ORDER BY input.ord",
                &[&self.q(), &ids, &tokens, &now_i64(), &ms(lock_duration)],
            )
            .await
            .map_err(PgError::sql("renewing locks"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> BackendResult<StalledReport> {
        self.check_open()?;
        let client = self.client("checking for stalled jobs").await?;
        let max = i32::try_from(max_stalled_count).unwrap_or(i32::MAX);
        let rows = client
            .query(
                "SELECT move_stalled_jobs_to_wait($1::text, $2::int4, $3::int8, $4::int8)",
                &[&self.q(), &max, &now_i64(), &ms(interval)],
            )
            .await
            .map_err(PgError::sql("checking for stalled jobs"))?;
        Ok(StalledReport::recovered(
            rows.iter().map(|r| r.get(0)).collect(),
        ))
    }

    async fn wait_for_job(&self, timeout: Duration) -> BackendResult<bool> {
        self.check_open()?;
        let signals = &self.listener.signals;
        let mut jobs = signals.jobs.subscribe();
        let mut events = signals.events.subscribe();
        let gated = self.gated.load(Ordering::Acquire);
        // A notification (or a reconnect) since the last claim began: there may be work.
        if *jobs.borrow_and_update() != self.seen_jobs.load(Ordering::Acquire)
            || (gated && *events.borrow_and_update() != self.seen_events.load(Ordering::Acquire))
        {
            return Ok(true);
        }
        let woken = async {
            loop {
                tokio::select! {
                    r = jobs.changed() => return r.is_ok(),
                    // Finishes on a gated queue notify only the events channel.
                    r = events.changed(), if gated => if r.is_ok() { return true },
                }
            }
        };
        Ok(tokio::time::timeout(timeout, woken).await.unwrap_or(false))
    }

    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        Some(self.listener.signals.changes.subscribe())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.listener.close().await;
    }

    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        self.check_open()?;
        let client = self
            .client("creating a job scheduler's next iteration")
            .await?;
        Ok(schedulers::next_iteration(&client, self.q(), plan).await?)
    }

    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> BackendResult<WaitingChildrenOutcome> {
        self.check_open()?;
        let client = self.client("moving a job to waiting-children").await?;
        if let Some(child) = child {
            // The protocol's function has no child parameter: check that this child is still
            // pending first (a child finishing right after this read is then waited for in
            // vain until its parent is released; weaker than Redis' one-script check).
            let child_key = crate::keys::pg_key(child.queue.name(), &child.id);
            let pending = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM job_dependency WHERE parent_queue = $1 \
                       AND parent_id = $2 AND child_key = $3 AND status = 'pending')",
                    &[&self.q(), &job_id, &child_key],
                )
                .await
                .map_err(PgError::sql("reading a child's state"))?
                .get::<_, bool>(0);
            if !pending {
                return Ok(WaitingChildrenOutcome::NoPendingChildren);
            }
        }
        let reply = client
            .query_one(
                "SELECT move_to_waiting_children($1::text, $2::text, $3::text)",
                &[&self.q(), &job_id, &token],
            )
            .await;
        match reply {
            Ok(r) => Ok(match r.get::<_, i32>(0) {
                1 => WaitingChildrenOutcome::Moved,
                0 => WaitingChildrenOutcome::NoPendingChildren,
                code => WaitingChildrenOutcome::Refused(finish_code(i64::from(code))),
            }),
            Err(e) => match crate::error::bullmq_code(&e) {
                Some(code) => Ok(WaitingChildrenOutcome::Refused(finish_code(code))),
                None => Err(PgError::sql("moving a job to waiting-children")(e).into()),
            },
        }
    }

    async fn move_to_wait(&self, job_id: &str, token: &str) -> BackendResult<MoveToWaitOutcome> {
        self.check_open()?;
        let client = self.client("moving a job back to wait").await?;
        let (refused, left) = to_wait(&client, self.q(), job_id, token).await?;
        Ok(match refused {
            Some(code) => MoveToWaitOutcome::Refused(code),
            None => MoveToWaitOutcome::Moved {
                rate_limited_for: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
            },
        })
    }
}

/// `move_active_to_wait`, which moves only an active job under `token` but answers the
/// limiter's remaining time either way: the row read in the same statement's snapshot tells
/// whether it was moved, and if not why.
async fn to_wait(
    client: &ClientWrapper,
    queue: &str,
    job_id: &str,
    token: &str,
) -> PgResult<(Option<FinishCode>, i64)> {
    let row = client
        .query_one(TO_WAIT_SQL, &[&queue, &job_id, &token, &now_i64()])
        .await
        .map_err(PgError::sql("moving a job back to wait"))?;
    let state: Option<String> = row.get(0);
    let holder: Option<String> = row.get(1);
    let left: i64 = row.get(2);
    let refused = match (state.as_deref(), holder) {
        (None, _) => Some(FinishCode::MissingJob),
        (Some(s), _) if s != "active" => Some(FinishCode::NotActive),
        (_, None) => Some(FinishCode::MissingLock),
        (_, Some(h)) if h != token && token != "0" => Some(FinishCode::LockNotOwned),
        _ => None,
    };
    Ok((refused, left.max(0)))
}

impl bullmq_backend::BackendName for PgWorkerStore {
    fn backend_name(&self) -> &'static str {
        crate::discovery::BACKEND_NAME
    }
}

#[async_trait]
impl JobUpdates for PgWorkerStore {
    async fn update_progress(&self, job_id: &str, progress: &Value) -> BackendResult<bool> {
        self.queue.update_progress(job_id, progress).await
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>> {
        self.queue.add_log(job_id, line, keep_logs).await
    }

    async fn update_data(&self, job_id: &str, data: &Value) -> BackendResult<bool> {
        self.queue.update_data(job_id, data).await
    }
}

#[async_trait]
impl JobFlows for PgWorkerStore {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        self.queue.get_dependencies(job_id).await
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        self.queue.get_dependency_counts(job_id).await
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        self.queue
            .get_dependencies_page(job_id, kind, cursor, count)
            .await
    }
}

/// Shared ownership for the backend's `Arc<dyn WorkerStore>`.
pub(crate) fn shared(store: PgWorkerStore) -> Arc<dyn WorkerStore> {
    Arc::new(store)
}
