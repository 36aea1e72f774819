//! [`PgQueueStore`]: a queue's producer and admin side on the PostgreSQL protocol.
//!
//! State changes call the protocol's installed functions (one autocommit statement each, as
//! Node does, so the functions' own locks are all the locking there is); reads are SELECTs
//! of our own on the shared tables.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use bullmq_backend::metrics::{Metrics, MetricsKind, MetricsMeta};
use bullmq_backend::{
    AddResult, BackendError, BackendResult, Dependencies, DependencyCounts, DependencyKind,
    DependencyPage, JobEnd, JobFlows, JobUpdates, NewJob, ObliterateStep, ParentLink, Producer,
    QueueAdmin, RemoveOutcome,
};
use bullmq_protocol::{DecodeError, JobRecord, JobState};
use serde_json::{json, Value};

use crate::db::Db;
use crate::error::{PgError, PgResult};
use crate::{keys, opts, range, row};

/// BullMQ's code: the parent named by a job does not exist.
pub(crate) const PARENT_MISSING: i64 = -5;
/// BullMQ's code: the job exists as the child of another parent that still exists.
pub(crate) const PARENT_CANNOT_BE_REPLACED: i64 = -7;

/// The `version` meta a Node 6.7.0 `Queue` writes when it opens.
pub(crate) const META_VERSION: &str = "bullmq:6.7.0";

/// Node's `attempts` fallback when a job's options carry none (its `Job` always sets 0).
const NODE_ATTEMPTS_FALLBACK: i32 = 1;

/// A queue's producer and admin store.
#[derive(Debug, Clone)]
pub struct PgQueueStore {
    pub(crate) db: Db,
    pub(crate) queue: String,
    /// The key prefix the store was opened with (`bull` or the schema): the job keys it hands
    /// back (parents, children) carry it.
    pub(crate) prefix: String,
}

/// Where a child points: the parent's queue and id, and its `parent_key` `<queue>:<id>`.
pub(crate) struct PgParent {
    pub(crate) queue: String,
    pub(crate) id: String,
    pub(crate) key: String,
}

impl PgParent {
    /// The parent a link names.
    pub(crate) fn of(link: &ParentLink, schema: &str) -> PgResult<Self> {
        let (queue, id) = keys::job_of(&link.parent, schema)?;
        Ok(Self {
            queue: queue.to_owned(),
            id: id.to_owned(),
            key: keys::pg_key(queue, id),
        })
    }
}

/// The arguments of one `add_job` call / one entry of `add_jobs_bulk` or `add_flow`, decoded
/// once from a [`NewJob`].
pub(crate) struct AddArgs {
    id: String,
    opts: serde_json::Map<String, Value>,
    priority: i32,
    delay: i64,
    timestamp: i64,
    attempts: i32,
    lifo: bool,
    dedup_id: Option<String>,
    parent: Option<PgParent>,
}

impl AddArgs {
    /// The arguments of `job`; its options must be a JSON object when `strict` (flows refuse
    /// a node whose options are not, before anything is written), else anything that is not
    /// one counts as no options.
    pub(crate) fn of(job: &NewJob, schema: &str, strict: bool) -> PgResult<Self> {
        let mut opts = if strict {
            opts::try_long_form(&job.opts).ok_or_else(|| PgError::Reply {
                operation: "adding a flow",
                detail: format!(
                    "the options of job `{}` are not a JSON object: {}",
                    job.name, job.opts
                ),
            })?
        } else {
            opts::long_form(&job.opts)
        };
        let parent = job
            .parent
            .as_ref()
            .map(|link| PgParent::of(link, schema))
            .transpose()?;
        if let Some(parent) = &parent {
            opts::set_plain_parent(&mut opts, &parent.queue);
        }
        let int = |key: &str| opts.get(key).and_then(Value::as_i64).unwrap_or(0);
        let dedup_id = opts
            .get("deduplication")
            .or_else(|| opts.get("debounce"))
            .and_then(|d| d.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(Self {
            id: job.custom_id.clone().unwrap_or_default(),
            priority: i32::try_from(int("priority")).unwrap_or(i32::MAX),
            delay: int("delay").max(0),
            timestamp: i64::try_from(job.timestamp_ms).unwrap_or(i64::MAX),
            attempts: opts
                .get("attempts")
                .and_then(Value::as_i64)
                .and_then(|a| i32::try_from(a).ok())
                .unwrap_or(NODE_ATTEMPTS_FALLBACK),
            lifo: opts.get("lifo").and_then(Value::as_bool).unwrap_or(false),
            dedup_id,
            parent,
            opts,
        })
    }

    /// One entry of `add_jobs_bulk` / `add_flow` (Node's batch entry shape).
    pub(crate) fn entry(&self, queue: &str, job: &NewJob, waiting_children: bool) -> Value {
        let parent = self.parent.as_ref();
        json!({
            "queue": queue,
            "id": self.id,
            "name": job.name,
            "data": job.data,
            "opts": self.opts,
            "priority": self.priority,
            "delay": self.delay,
            "timestamp": self.timestamp,
            "attempts": self.attempts,
            "parentQueue": parent.map(|p| p.queue.as_str()),
            "parentId": parent.map(|p| p.id.as_str()),
            "parentKey": parent.map(|p| p.key.as_str()),
            "dedupId": self.dedup_id,
            "schedulerId": job.repeat_job_key,
            "lifo": self.lifo,
            "addToWaitingChildren": waiting_children,
        })
    }
}

impl PgQueueStore {
    pub(crate) fn new(db: Db, queue: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            db,
            queue: queue.into(),
            prefix: prefix.into(),
        }
    }

    /// A job row as the seam's record (parent references with this store's prefix).
    pub(crate) fn record_of(&self, row: &tokio_postgres::Row) -> Result<JobRecord, DecodeError> {
        row::decode(row).map(|record| keys::seam_record(record, &self.prefix))
    }

    /// The protocol's `<queue>:<id>` as the seam's job key, with this store's prefix.
    pub(crate) fn seam_key(&self, pg_key: &str) -> String {
        keys::seam_key(&self.prefix, pg_key)
    }

    /// The protocol's `<queue>:<id>` as the seam's reference, in this store's namespace.
    pub(crate) fn job_ref(&self, pg_key: &str) -> bullmq_protocol::JobRef {
        keys::job_ref(&self.prefix, pg_key)
    }

    async fn add_one(&self, job: &NewJob) -> PgResult<AddResult> {
        let args = AddArgs::of(job, self.db.schema(), false)?;
        let client = self.db.client("adding a job").await?;
        let statement = client
            .prepare_cached(
                "SELECT add_job($1::text, $2::text, $3::text, $4::text::jsonb, $5::text::jsonb, \
                 $6::int4, $7::int8, $8::int8, $9::int4, $10::text, $11::text, $12::text, \
                 $13::text, $14::text, $15::bool)",
            )
            .await
            .map_err(PgError::sql("adding a job"))?;
        let opts = Value::Object(args.opts).to_string();
        let parent = args.parent.as_ref();
        let reply = client
            .query_one(
                &statement,
                &[
                    &self.queue,
                    &args.id,
                    &job.name,
                    &job.data,
                    &opts,
                    &args.priority,
                    &args.delay,
                    &args.timestamp,
                    &args.attempts,
                    &parent.map(|p| p.queue.as_str()),
                    &parent.map(|p| p.id.as_str()),
                    &parent.map(|p| p.key.as_str()),
                    &args.dedup_id,
                    &job.repeat_job_key,
                    &args.lifo,
                ],
            )
            .await;
        let error = match reply {
            Ok(row) => return Ok(AddResult::Id(row.get(0))),
            Err(e) => PgError::sql("adding a job")(e),
        };
        match error.bullmq_code() {
            Some(PARENT_MISSING) => match &job.parent {
                Some(link) => Ok(AddResult::ParentMissing {
                    parent: link.parent.clone(),
                }),
                None => Err(error),
            },
            Some(PARENT_CANNOT_BE_REPLACED) => Err(self.parent_taken(&client, &args.id).await),
            _ => Err(error),
        }
    }

    /// The refusal of a job `id` of this queue that is the child of another live parent (-7),
    /// naming that parent (read after the refusal, so it may be gone by then).
    pub(crate) async fn parent_taken<C: deadpool_postgres::GenericClient + Sync>(
        &self,
        client: &C,
        id: &str,
    ) -> PgError {
        let existing = client
            .query_opt(
                "SELECT parent_key FROM job WHERE queue = $1 AND id = $2",
                &[&self.queue, &id],
            )
            .await
            .ok()
            .flatten()
            .and_then(|row| row.get::<_, Option<String>>(0));
        PgError::ParentCannotBeReplaced {
            job_key: self.seam_key(&keys::pg_key(&self.queue, id)),
            existing_parent_key: existing.map(|key| self.seam_key(&key)).unwrap_or_default(),
        }
    }

    /// A bulk with parents or deduplication ids, through `add_flow` as Node sends it, in a
    /// transaction rolled back when a job's id is taken by the child of another parent (-7):
    /// the refusal then writes nothing. A job whose parent is missing is not added and
    /// reported so; the others are.
    async fn add_bulk_as_flow(
        &self,
        jobs: &[NewJob],
        args: &[AddArgs],
    ) -> PgResult<Vec<AddResult>> {
        let operation = "adding jobs in bulk";
        let payload = Value::Array(
            args.iter()
                .zip(jobs)
                .map(|(a, job)| a.entry(&self.queue, job, false))
                .collect(),
        )
        .to_string();
        let mut client = self.db.client(operation).await?;
        let tx = client
            .transaction()
            .await
            .map_err(PgError::sql(operation))?;
        let rows = tx
            .query("SELECT add_flow($1::text::jsonb)", &[&payload])
            .await
            .map_err(PgError::sql(operation))?;
        let slots: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        if slots.len() != jobs.len() {
            return Err(PgError::Reply {
                operation,
                detail: format!("{} results for {} jobs", slots.len(), jobs.len()),
            });
        }
        if let Some(taken) = slots.iter().position(|s| s == "-7") {
            let error = self.parent_taken(&tx, &args[taken].id).await;
            tx.rollback().await.map_err(PgError::sql(operation))?;
            return Err(error);
        }
        tx.commit().await.map_err(PgError::sql(operation))?;
        Ok(slots
            .into_iter()
            .zip(jobs)
            .map(|(slot, job)| match slot.as_str() {
                "-5" => match &job.parent {
                    Some(link) => AddResult::ParentMissing {
                        parent: link.parent.clone(),
                    },
                    None => AddResult::Id(slot),
                },
                _ => AddResult::Id(slot),
            })
            .collect())
    }

    pub(crate) async fn query_rows(
        &self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> PgResult<Vec<tokio_postgres::Row>> {
        let client = self.db.client(operation).await?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(PgError::sql(operation))?;
        client
            .query(&statement, params)
            .await
            .map_err(PgError::sql(operation))
    }

    pub(crate) async fn execute(
        &self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> PgResult<u64> {
        let client = self.db.client(operation).await?;
        let statement = client
            .prepare_cached(sql)
            .await
            .map_err(PgError::sql(operation))?;
        client
            .execute(&statement, params)
            .await
            .map_err(PgError::sql(operation))
    }

    /// The raw job row of `job_id`.
    pub(crate) async fn job_row(&self, job_id: &str) -> PgResult<Option<tokio_postgres::Row>> {
        let sql = format!(
            "SELECT {} FROM job WHERE queue = $1 AND id = $2",
            row::JOB_COLUMNS
        );
        let mut rows = self
            .query_rows("reading a job", &sql, &[&self.queue, &job_id])
            .await?;
        Ok(rows.pop())
    }

    async fn dependency_rows(
        &self,
        job_id: &str,
        status: &'static str,
    ) -> PgResult<Vec<(bullmq_protocol::JobRef, Option<String>)>> {
        let value = if status == "processed" {
            "value::text"
        } else {
            "value #>> '{}'"
        };
        let sql = format!(
            "SELECT child_key, {value} FROM job_dependency \
              WHERE parent_queue = $1 AND parent_id = $2 AND status::text = $3 \
              ORDER BY child_key COLLATE \"C\""
        );
        let rows = self
            .query_rows(
                "reading a job's children",
                &sql,
                &[&self.queue, &job_id, &status],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (self.job_ref(r.get(0)), r.get(1)))
            .collect())
    }
}

fn decode_job(
    store: &PgQueueStore,
    job_id: &str,
    row: &tokio_postgres::Row,
) -> BackendResult<JobRecord> {
    store.record_of(row).map_err(|source| BackendError::Decode {
        job_id: job_id.to_string(),
        source,
    })
}

/// jsonb text (`{"a": 1}`) as `JSON.stringify` renders it (`{"a":1}`).
fn compact(raw: &str) -> String {
    serde_json::from_str::<Value>(raw).map_or_else(|_| raw.to_string(), |v| v.to_string())
}

fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[async_trait]
impl Producer for PgQueueStore {
    async fn add(&self, job: &NewJob) -> BackendResult<AddResult> {
        Ok(self.add_one(job).await?)
    }

    async fn add_bulk(&self, jobs: &[NewJob]) -> BackendResult<Vec<AddResult>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let schema = self.db.schema();
        let entries = jobs
            .iter()
            .map(|job| AddArgs::of(job, schema, false))
            .collect::<PgResult<Vec<_>>>()?;
        if entries
            .iter()
            .any(|e| e.parent.is_some() || e.dedup_id.is_some())
        {
            // As Node: the set-based insert knows neither parents nor deduplication.
            return Ok(self.add_bulk_as_flow(jobs, &entries).await?);
        }
        let payload = Value::Array(
            entries
                .iter()
                .zip(jobs)
                .map(|(args, job)| args.entry(&self.queue, job, false))
                .collect(),
        )
        .to_string();
        let rows = self
            .query_rows(
                "adding jobs in bulk",
                "SELECT add_jobs_bulk($1::text, $2::text::jsonb)",
                &[&self.queue, &payload],
            )
            .await?;
        Ok(rows.iter().map(|r| AddResult::Id(r.get(0))).collect())
    }
}

#[async_trait]
impl QueueAdmin for PgQueueStore {
    async fn set_meta(&self, max_len_events: u64) -> BackendResult<()> {
        let max = max_len_events.to_string();
        self.execute(
            "writing the queue's meta",
            "INSERT INTO meta (queue, field, value) \
             VALUES ($1, 'opts.maxLenEvents', $2), ($1, 'version', $3) \
             ON CONFLICT (queue, field) DO UPDATE SET value = EXCLUDED.value",
            &[&self.queue, &max, &META_VERSION],
        )
        .await?;
        Ok(())
    }

    async fn get_meta(&self) -> BackendResult<HashMap<String, String>> {
        let rows = self
            .query_rows(
                "reading the queue's meta",
                "SELECT field, COALESCE(value, '') FROM meta WHERE queue = $1",
                &[&self.queue],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn get_counts(&self, states: &[JobState]) -> BackendResult<Vec<u64>> {
        let rows = self
            .query_rows(
                "counting jobs",
                "SELECT count(*) FILTER (WHERE state = 'waiting' AND priority = 0), \
                        count(*) FILTER (WHERE state = 'waiting' AND priority > 0), \
                        count(*) FILTER (WHERE state = 'active'), \
                        count(*) FILTER (WHERE state = 'delayed'), \
                        count(*) FILTER (WHERE state = 'completed'), \
                        count(*) FILTER (WHERE state = 'failed'), \
                        count(*) FILTER (WHERE state = 'waiting-children'), \
                        EXISTS (SELECT 1 FROM meta WHERE queue = $1 AND field = 'paused') \
                   FROM job WHERE queue = $1",
                &[&self.queue],
            )
            .await?;
        let r = &rows[0];
        let n = |i: usize| u64::try_from(r.get::<_, i64>(i)).unwrap_or(0);
        let paused: bool = r.get(7);
        Ok(states
            .iter()
            .map(|state| match state {
                // A paused queue's waiting jobs count as paused, as Node reports them.
                JobState::Waiting if paused => 0,
                JobState::Waiting => n(0),
                JobState::Paused if paused => n(0),
                JobState::Paused | JobState::Unknown => 0,
                JobState::Prioritized => n(1),
                JobState::Active => n(2),
                JobState::Delayed => n(3),
                JobState::Completed => n(4),
                JobState::Failed => n(5),
                JobState::WaitingChildren => n(6),
            })
            .collect())
    }

    async fn get_ranges(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(states.len());
        for state in states {
            let Some(sql) = range::ids_sql(*state, ascending) else {
                out.push(Vec::new());
                continue;
            };
            let rows = self
                .query_rows("reading job ids", &sql, &[&self.queue, &start, &end])
                .await?;
            out.push(rows.iter().map(|r| r.get(0)).collect());
        }
        Ok(out)
    }

    async fn get_state(&self, job_id: &str) -> BackendResult<JobState> {
        let rows = self
            .query_rows(
                "reading a job's state",
                "SELECT state::text, priority FROM job WHERE queue = $1 AND id = $2",
                &[&self.queue, &job_id],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(JobState::Unknown);
        };
        let state: String = r.get(0);
        let priority: i32 = r.get(1);
        Ok(match state.as_str() {
            "waiting" if priority > 0 => JobState::Prioritized,
            other => other.parse().unwrap_or(JobState::Unknown),
        })
    }

    async fn get_job(&self, job_id: &str) -> BackendResult<Option<JobRecord>> {
        match self.job_row(job_id).await? {
            None => Ok(None),
            Some(r) => decode_job(self, job_id, &r).map(Some),
        }
    }

    async fn job_end(&self, job_id: &str) -> BackendResult<JobEnd> {
        let rows = self
            .query_rows(
                "reading whether a job finished",
                "SELECT state::text, return_value::text, failed_reason FROM job \
                  WHERE queue = $1 AND id = $2",
                &[&self.queue, &job_id],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(JobEnd::Missing);
        };
        let state: String = r.get(0);
        Ok(match state.as_str() {
            "completed" => {
                JobEnd::Completed(r.get::<_, Option<String>>(1).map(|raw| compact(&raw)))
            }
            "failed" => JobEnd::Failed(r.get(2)),
            _ => JobEnd::Unfinished,
        })
    }

    async fn get_job_logs(
        &self,
        job_id: &str,
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<(Vec<String>, u64)> {
        let order = if ascending { "idx" } else { "idx DESC" };
        let sql = range::window_sql(
            "SELECT row AS v, {ORDER} FROM job_log WHERE queue = $1 AND job_id = $4",
            order,
        );
        let lines = self
            .query_rows(
                "reading a job's logs",
                &sql,
                &[&self.queue, &start, &end, &job_id],
            )
            .await?;
        let count = self
            .query_rows(
                "counting a job's logs",
                "SELECT count(*) FROM job_log WHERE queue = $1 AND job_id = $2",
                &[&self.queue, &job_id],
            )
            .await?;
        Ok((
            lines.iter().map(|r| r.get(0)).collect(),
            u64::try_from(count[0].get::<_, i64>(0)).unwrap_or(0),
        ))
    }

    async fn pause(&self) -> BackendResult<()> {
        self.query_rows(
            "pausing the queue",
            "SELECT pause($1::text, true)::text",
            &[&self.queue],
        )
        .await?;
        Ok(())
    }

    async fn resume(&self) -> BackendResult<()> {
        self.query_rows(
            "resuming the queue",
            "SELECT pause($1::text, false)::text",
            &[&self.queue],
        )
        .await?;
        Ok(())
    }

    async fn is_paused(&self) -> BackendResult<bool> {
        let rows = self
            .query_rows(
                "reading whether the queue is paused",
                "SELECT EXISTS (SELECT 1 FROM meta WHERE queue = $1 AND field = 'paused')",
                &[&self.queue],
            )
            .await?;
        Ok(rows[0].get(0))
    }

    async fn drain(&self, delayed: bool) -> BackendResult<u64> {
        // `drain()` returns nothing; the count is read in the same transaction just before,
        // so it is exact unless a producer adds between the two statements.
        let operation = "draining the queue";
        let mut client = self.db.client(operation).await?;
        let tx = client
            .transaction()
            .await
            .map_err(PgError::sql(operation))?;
        let count: i64 = tx
            .query_one(
                "SELECT count(*) FROM job WHERE queue = $1 AND scheduler_id IS NULL \
                   AND (state = 'waiting' OR ($2 AND state = 'delayed'))",
                &[&self.queue, &delayed],
            )
            .await
            .map_err(PgError::sql(operation))?
            .get(0);
        tx.query_one(
            "SELECT drain($1::text, $2::bool)::text",
            &[&self.queue, &delayed],
        )
        .await
        .map_err(PgError::sql(operation))?;
        tx.commit().await.map_err(PgError::sql(operation))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn clean(
        &self,
        state: JobState,
        cutoff_ms: u64,
        limit: u64,
    ) -> BackendResult<Vec<String>> {
        let kind = match state {
            JobState::Waiting => "wait",
            other => other.as_str(),
        };
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        let rows = self
            .query_rows(
                "cleaning the queue",
                "SELECT clean($1::text, $2::text, $3::int8, $4::int4)",
                &[&self.queue, &kind, &clamp_i64(cutoff_ms), &limit],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn obliterate_batch(&self, batch: u32, force: bool) -> BackendResult<ObliterateStep> {
        let count = i32::try_from(batch).unwrap_or(i32::MAX);
        let rows = self
            .query_rows(
                "obliterating the queue",
                "SELECT obliterate($1::text, $2::int4, $3::bool)",
                &[&self.queue, &count, &force],
            )
            .await?;
        let code: i32 = rows[0].get(0);
        Ok(match code {
            0 => ObliterateStep::Done,
            1 => ObliterateStep::More,
            -1 => ObliterateStep::NotPaused,
            -2 => ObliterateStep::ActiveJobs,
            other => {
                return Err(PgError::Reply {
                    operation: "obliterating the queue",
                    detail: format!("obliterate returned {other}"),
                }
                .into())
            }
        })
    }

    async fn remove_job(&self, job_id: &str, children: bool) -> BackendResult<RemoveOutcome> {
        // One statement, one snapshot: whether the job existed and what remove() did.
        let reply = self
            .query_rows(
                "removing a job",
                "SELECT EXISTS (SELECT 1 FROM job WHERE queue = $1 AND id = $2), \
                        remove($1::text, $2::text, $3::bool)",
                &[&self.queue, &job_id, &children],
            )
            .await;
        match reply {
            Ok(rows) => {
                let existed: bool = rows[0].get(0);
                let removed: i32 = rows[0].get(1);
                Ok(match (existed, removed) {
                    (_, n) if n > 0 => RemoveOutcome::Removed,
                    (true, _) => RemoveOutcome::Locked,
                    (false, _) => RemoveOutcome::NotFound,
                })
            }
            Err(e) if e.bullmq_code() == Some(-8) => Ok(RemoveOutcome::SchedulerJob),
            Err(e) => Err(e.into()),
        }
    }

    async fn get_metrics(&self, kind: MetricsKind, start: i64, end: i64) -> BackendResult<Metrics> {
        let rows = self
            .query_rows(
                "reading metrics",
                "SELECT count, COALESCE(prev_ts, 0), prev_count, \
                        COALESCE(array_length(data, 1), 0)::int8, \
                        ARRAY(SELECT d FROM unnest(data) WITH ORDINALITY AS u(d, i) \
                               WHERE i - 1 >= CASE WHEN $3::int8 < 0 \
                                        THEN GREATEST(COALESCE(array_length(data, 1), 0) + $3::int8, 0) \
                                        ELSE $3::int8 END \
                                 AND i - 1 <= CASE WHEN $4::int8 < 0 \
                                        THEN COALESCE(array_length(data, 1), 0) + $4::int8 \
                                        ELSE $4::int8 END \
                               ORDER BY i) \
                   FROM metrics WHERE queue = $1 AND kind = $2",
                &[&self.queue, &kind.as_str(), &start, &end],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(Metrics::default());
        };
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        let data: Vec<i64> = r.get(4);
        Ok(Metrics {
            meta: MetricsMeta {
                count: u(r.get(0)),
                prev_ts: u(r.get(1)),
                prev_count: u(r.get(2)),
            },
            data: data.into_iter().map(u).collect(),
            count: u(r.get(3)),
        })
    }
}

#[async_trait]
impl JobUpdates for PgQueueStore {
    async fn update_progress(&self, job_id: &str, progress: &Value) -> BackendResult<bool> {
        let progress = progress.to_string();
        let rows = self
            .query_rows(
                "updating a job's progress",
                "SELECT update_progress($1::text, $2::text, $3::text::jsonb)",
                &[&self.queue, &job_id, &progress],
            )
            .await?;
        Ok(rows[0].get::<_, i32>(0) > 0)
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>> {
        let operation = "adding a log line";
        let insert = "INSERT INTO job_log (queue, job_id, idx, row) \
                      SELECT $1, $2, COALESCE(MAX(idx), -1) + 1, $3 FROM job_log \
                       WHERE queue = $1 AND job_id = $2 \
                      RETURNING idx";
        let mut attempt = 0;
        let idx: i64 = loop {
            match self
                .query_rows(operation, insert, &[&self.queue, &job_id, &line])
                .await
            {
                Ok(rows) => break rows[0].get(0),
                Err(PgError::Sql { source, .. })
                    if source.code()
                        == Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION) =>
                {
                    return Ok(None)
                }
                // Two writers took the same MAX(idx)+1 (Node's statement has the same race);
                // the second retries once.
                Err(PgError::Sql { source, .. })
                    if attempt == 0
                        && source.code()
                            == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                {
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let count = u64::try_from(idx + 1).unwrap_or(0);
        match keep_logs {
            Some(keep) if count > keep => {
                self.execute(
                    "trimming a job's logs",
                    "DELETE FROM job_log WHERE queue = $1 AND job_id = $2 AND idx <= $3",
                    &[&self.queue, &job_id, &(idx - clamp_i64(keep))],
                )
                .await?;
                Ok(Some(keep))
            }
            _ => Ok(Some(count)),
        }
    }

    async fn update_data(&self, job_id: &str, data: &Value) -> BackendResult<bool> {
        let data = data.to_string();
        let n = self
            .execute(
                "updating a job's data",
                "UPDATE job SET data = $3::text::jsonb WHERE queue = $1 AND id = $2",
                &[&self.queue, &job_id, &data],
            )
            .await?;
        Ok(n > 0)
    }
}

#[async_trait]
impl JobFlows for PgQueueStore {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        let processed: BTreeMap<bullmq_protocol::JobRef, String> = self
            .dependency_rows(job_id, "processed")
            .await?
            .into_iter()
            .map(|(k, v)| (k, v.unwrap_or_else(|| "null".into())))
            .collect();
        let unprocessed = self
            .dependency_rows(job_id, "pending")
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let ignored = self
            .dependency_rows(job_id, "ignored")
            .await?
            .into_iter()
            .map(|(k, v)| (k, v.unwrap_or_default()))
            .collect();
        let failed = self
            .dependency_rows(job_id, "failed")
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        Ok(Dependencies::new(processed, unprocessed, ignored, failed))
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        let rows = self
            .query_rows(
                "counting a job's children",
                "SELECT count(*) FILTER (WHERE status = 'processed'), \
                        count(*) FILTER (WHERE status = 'pending'), \
                        count(*) FILTER (WHERE status = 'ignored'), \
                        count(*) FILTER (WHERE status = 'failed') \
                   FROM job_dependency WHERE parent_queue = $1 AND parent_id = $2",
                &[&self.queue, &job_id],
            )
            .await?;
        let n = |i: usize| u64::try_from(rows[0].get::<_, i64>(i)).unwrap_or(0);
        Ok(DependencyCounts::new(n(0), n(1), n(2), n(3)))
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        let status = match kind {
            DependencyKind::Processed => "processed",
            DependencyKind::Unprocessed => "pending",
            DependencyKind::Ignored => "ignored",
            DependencyKind::Failed => "failed",
            _ => "pending",
        };
        // The cursor is an offset into the children sorted by key.
        let all = self.dependency_rows(job_id, status).await?;
        Ok(bullmq_backend::flows::page_of(all, cursor, count))
    }
}
