//! Job schedulers ([`JobSchedulers`] for [`PgQueueStore`]) on the protocol's functions:
//! `add_job_scheduler` (upsert and the pending iteration), `update_job_scheduler_next_millis`
//! (the iteration after the started one), `remove_job_scheduler`; reads are our own SELECTs on
//! `scheduler`, mapped to the hash Node's shared `JobScheduler` reads (`mapSchedulerRow`) and
//! decoded as the Redis hash is.
//!
//! As the protocol expects of its callers, cron runs are computed here (by
//! `bullmq_protocol::scheduler`, [`UpsertPlan::next_millis`]); `every` slots are computed by the
//! installed functions from the stored previous run. Options cross the seam with Redis' short
//! keys and are stored with Node's long ones, as Node stores the `JobsOptions` it is given.

use std::collections::HashMap;

use async_trait::async_trait;
use bullmq_backend::{BackendError, BackendResult, JobSchedulers, NextIteration, UpsertOutcome};
use bullmq_protocol::scheduler::{
    field, has_legacy_repeat_key_shape, iteration_job_id, JobSchedulerRecord, LegacyRepeatableJob,
    NextIterationPlan, UpsertPlan,
};
use serde_json::{Map, Value};
use tokio_postgres::Row;

use crate::error::{PgError, PgResult};
use crate::opts;
use crate::queue_store::PgQueueStore;

/// BullMQ's code: a cron run's id is taken by a job that cannot be replaced.
const ID_COLLISION: i64 = -10;
/// BullMQ's code: both `every` slots tried are taken.
const SLOTS_BUSY: i64 = -11;

/// The columns of a scheduler row, in the order [`decode`] reads them.
const COLUMNS: &str = "scheduler_id, name, iteration_count, limit_count, start_date_ms, \
     end_date_ms, tz, pattern, every_ms, offset_ms, template_data::text AS template_data, \
     template_opts::text AS template_opts, next_run_ms";

/// The same columns read from a subquery that selected [`COLUMNS`].
const OUTER_COLUMNS: &str = "scheduler_id, name, iteration_count, limit_count, start_date_ms, \
     end_date_ms, tz, pattern, every_ms, offset_ms, template_data, template_opts, next_run_ms";

/// The iteration after the started one, and what the scheduler held before the call (whose
/// `NULL` answer means "no scheduler", "not the current iteration" or "already there").
const NEXT_SQL: &str = "WITH s AS ( \
       SELECT next_run_ms, \
              CASE WHEN e.every IS NULL THEN $3::int8 \
                   ELSE (scheduler_every_next_millis(next_run_ms, e.every, $5::int8, \
                          COALESCE(offset_ms, ($4::text::jsonb #>> '{repeat,offset}')::int8, 0), \
                          start_date_ms))[1] END AS expected \
         FROM scheduler, LATERAL (SELECT COALESCE(every_ms, \
                ($4::text::jsonb #>> '{repeat,every}')::int8) AS every) e \
        WHERE queue = $1 AND scheduler_id = $2) \
     SELECT update_job_scheduler_next_millis($1::text, $2::text, $3::int8, '{}'::jsonb, \
              $4::text::jsonb, $5::int8, $6::text), \
            EXISTS (SELECT 1 FROM s), (SELECT next_run_ms FROM s), (SELECT expected FROM s)";

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A scheduler row as the `repeat:{id}` hash Node's consumer reads (string values, absent
/// fields omitted, `data` / `opts` only when not `{}`), decoded as that hash is.
fn decode(row: &Row) -> BackendResult<Option<JobSchedulerRecord>> {
    let id: String = row.get(0);
    let mut fields = HashMap::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            fields.insert(name.to_owned(), value);
        }
    };
    put(field::NAME, row.get(1));
    put(
        field::ITERATION_COUNT,
        row.get::<_, Option<i32>>(2).map(|v| v.to_string()),
    );
    put(
        field::LIMIT,
        row.get::<_, Option<i32>>(3).map(|v| v.to_string()),
    );
    put(
        field::START_DATE,
        row.get::<_, Option<i64>>(4).map(|v| v.to_string()),
    );
    put(
        field::END_DATE,
        row.get::<_, Option<i64>>(5).map(|v| v.to_string()),
    );
    put(field::TZ, row.get(6));
    put(field::PATTERN, row.get(7));
    put(
        field::EVERY,
        row.get::<_, Option<i64>>(8).map(|v| v.to_string()),
    );
    put(
        field::OFFSET,
        row.get::<_, Option<i64>>(9).map(|v| v.to_string()),
    );
    let not_empty = |raw: Option<String>| {
        raw.filter(|raw| !matches!(serde_json::from_str::<Value>(raw), Ok(Value::Object(m)) if m.is_empty()))
    };
    put(field::DATA, not_empty(row.get(10)));
    put(field::OPTS, not_empty(row.get(11)));
    let next = row
        .get::<_, Option<i64>>(12)
        .and_then(|n| u64::try_from(n).ok());
    JobSchedulerRecord::decode(&id, &fields, next).map_err(BackendError::backend)
}

/// The scheduler fields Node's `addJobScheduler` passes as `opts` (absent ones left out, as
/// `JSON.stringify` leaves out `undefined`).
fn scheduler_opts(plan: &UpsertPlan) -> String {
    let f = &plan.fields;
    let mut opts = Map::new();
    opts.insert("name".into(), Value::from(f.name.as_str()));
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            opts.insert(key.into(), value);
        }
    };
    put("startDate", f.start_date.map(Value::from));
    put("endDate", f.end_date.map(Value::from));
    put("tz", f.tz.clone().map(Value::from));
    put("pattern", f.pattern.clone().map(Value::from));
    put("every", f.every.map(Value::from));
    put("limit", f.limit.map(Value::from));
    put("offset", f.offset.map(Value::from));
    Value::Object(opts).to_string()
}

/// The options of an iteration as Node stores them (long keys; `jobId` and `delay` are set
/// by the function once it knows the slot).
fn iteration_opts(opts: &Map<String, Value>) -> String {
    Value::Object(opts::long_keys(opts.clone())).to_string()
}

/// Creates the iteration after the started one of `plan` on `client` (the queue store's
/// `create_next_iteration` and the worker's, also right after a fetch).
pub(crate) async fn next_iteration<C: deadpool_postgres::GenericClient + Sync>(
    client: &C,
    queue: &str,
    plan: &NextIterationPlan,
) -> PgResult<NextIteration> {
    let operation = "creating a job scheduler's next iteration";
    let delayed = iteration_opts(&plan.iteration_opts);
    let row = client
        .query_one(
            NEXT_SQL,
            &[
                &queue,
                &plan.scheduler_id,
                &plan.next_millis.map(i64_of),
                &delayed,
                &i64_of(plan.now_ms),
                &plan.producer_id,
            ],
        )
        .await
        .map_err(PgError::sql(operation))?;
    if let Some(created) = row.get::<_, Option<String>>(0) {
        return Ok(NextIteration::Created(created));
    }
    let exists: bool = row.get(1);
    let previous: Option<i64> = row.get(2);
    let expected: Option<i64> = row.get(3);
    if !exists {
        return Ok(if plan.legacy_key_shape {
            NextIteration::Legacy
        } else {
            NextIteration::NotCurrent
        });
    }
    let current =
        previous.map(|p| iteration_job_id(&plan.scheduler_id, u64::try_from(p).unwrap_or(0)));
    if current.as_deref() != Some(plan.producer_id.as_str()) {
        return Ok(NextIteration::NotCurrent);
    }
    match expected.and_then(|e| u64::try_from(e).ok()) {
        // The function found the next run's job already there (and emitted `duplicated`).
        Some(next) => Ok(NextIteration::Duplicated(iteration_job_id(
            &plan.scheduler_id,
            next,
        ))),
        None => Err(PgError::Reply {
            operation,
            detail: format!(
                "scheduler {} has neither a cron run nor an interval",
                plan.scheduler_id
            ),
        }),
    }
}

#[async_trait]
impl JobSchedulers for PgQueueStore {
    async fn upsert_job_scheduler(&self, plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        let operation = "upserting a job scheduler";
        let template_opts = Value::Object(opts::long_keys_of(&plan.template_opts)).to_string();
        let reply = self
            .query_rows(
                operation,
                "SELECT job_id, delay FROM add_job_scheduler($1::text, $2::text, $3::int8, \
                   $4::text::jsonb, $5::text::jsonb, $6::text::jsonb, $7::text::jsonb, $8::int8, \
                   NULL)",
                &[
                    &self.queue,
                    &plan.id,
                    &plan.next_millis.map(i64_of),
                    &plan.template_data,
                    &template_opts,
                    &scheduler_opts(plan),
                    &iteration_opts(&plan.iteration_opts),
                    &i64_of(plan.now_ms),
                ],
            )
            .await;
        match reply {
            Ok(rows) => {
                let row = rows.first().ok_or_else(|| PgError::Reply {
                    operation,
                    detail: "no row".into(),
                })?;
                Ok(UpsertOutcome::Added {
                    job_id: row.get(0),
                    delay: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
                })
            }
            Err(e) => match e.bullmq_code() {
                Some(ID_COLLISION) => Ok(UpsertOutcome::IdCollision),
                Some(SLOTS_BUSY) => Ok(UpsertOutcome::SlotsBusy),
                _ => Err(e.into()),
            },
        }
    }

    async fn create_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        let client = self
            .db
            .client("creating a job scheduler's next iteration")
            .await?;
        Ok(next_iteration(&client, &self.queue, plan).await?)
    }

    async fn get_job_scheduler(&self, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM scheduler WHERE queue = $1 AND scheduler_id = $2");
        let rows = self
            .query_rows("reading a job scheduler", &sql, &[&self.queue, &id])
            .await?;
        match rows.first() {
            Some(row) => decode(row),
            // As Node's shared consumer: a BullMQ 5 repeatable-job key must be migrated.
            None if has_legacy_repeat_key_shape(id) => {
                Err(BackendError::backend(LegacyRepeatableJob(id.to_owned())))
            }
            None => Ok(None),
        }
    }

    async fn get_job_schedulers(
        &self,
        start: i64,
        end: i64,
        asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        // Ranks as Redis' ZRANGE / ZREVRANGE of the `repeat` set read them (score, then the
        // member as tie-break), negative from the end.
        let order = if asc {
            "next_run_ms, scheduler_id COLLATE \"C\""
        } else {
            "next_run_ms DESC, scheduler_id COLLATE \"C\" DESC"
        };
        let sql = format!(
            "SELECT {OUTER_COLUMNS} FROM ( \
               SELECT {COLUMNS}, row_number() OVER (ORDER BY {order}) - 1 AS i, \
                      count(*) OVER () AS n \
                 FROM scheduler WHERE queue = $1) r \
              WHERE i >= CASE WHEN $2::int8 < 0 THEN GREATEST(n + $2::int8, 0) ELSE $2::int8 END \
                AND i <= CASE WHEN $3::int8 < 0 THEN n + $3::int8 ELSE $3::int8 END \
              ORDER BY i"
        );
        let rows = self
            .query_rows("reading job schedulers", &sql, &[&self.queue, &start, &end])
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.extend(decode(row)?);
        }
        Ok(out)
    }

    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        let rows = self
            .query_rows(
                "counting job schedulers",
                "SELECT count(*) FROM scheduler WHERE queue = $1",
                &[&self.queue],
            )
            .await?;
        Ok(u64::try_from(rows[0].get::<_, i64>(0)).unwrap_or(0))
    }

    async fn remove_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        let rows = self
            .query_rows(
                "removing a job scheduler",
                "SELECT remove_job_scheduler($1::text, $2::text)",
                &[&self.queue, &id],
            )
            .await?;
        // 0: removed, 1: there was none.
        Ok(rows[0].get::<_, i32>(0) == 0)
    }
}
