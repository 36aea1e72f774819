//! Job control, queue control and upkeep on the PostgreSQL protocol ([`JobControl`],
//! [`QueueControl`], [`QueueMaintenance`] for [`PgQueueStore`]).
//!
//! Moves call the installed functions; settings are rows of `meta`, written and read with
//! plain statements as Node's commands do.

use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::queue_control::GlobalRateLimit;
use bullmq_backend::{
    now_ms, BackendResult, ChildDependency, ControlOutcome, JobControl, LockOutcome, QueueControl,
    QueueMaintenance, RetryFrom, RetryReset,
};

use crate::queue_store::PgQueueStore;

fn now() -> i64 {
    i64::try_from(now_ms()).unwrap_or(i64::MAX)
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn clamp_i32(v: u64) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// A move function's answer (0 or 1 moved, -1 missing job, -3 wrong state).
fn outcome(code: i32) -> ControlOutcome {
    match code {
        -1 => ControlOutcome::NotFound,
        c if c < 0 => ControlOutcome::NotInState,
        _ => ControlOutcome::Moved,
    }
}

impl PgQueueStore {
    async fn int_of(
        &self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> BackendResult<i64> {
        let rows = self.query_rows(operation, sql, params).await?;
        Ok(rows.first().map_or(0, |r| r.get::<_, i64>(0)))
    }

    async fn meta_field(&self, field: &str) -> BackendResult<Option<String>> {
        let rows = self
            .query_rows(
                "reading the queue's meta",
                "SELECT value FROM meta WHERE queue = $1 AND field = $2",
                &[&self.queue, &field],
            )
            .await?;
        Ok(rows.first().and_then(|r| r.get(0)))
    }

    async fn set_meta_fields(&self, fields: &[&str], values: &[String]) -> BackendResult<()> {
        self.execute(
            "writing the queue's meta",
            "INSERT INTO meta (queue, field, value) \
             SELECT $1, f, v FROM unnest($2::text[], $3::text[]) AS t(f, v) \
             ON CONFLICT (queue, field) DO UPDATE SET value = EXCLUDED.value",
            &[&self.queue, &fields, &values],
        )
        .await?;
        Ok(())
    }

    async fn remove_meta_fields(&self, fields: &[&str]) -> BackendResult<u64> {
        Ok(self
            .execute(
                "removing queue meta fields",
                "DELETE FROM meta WHERE queue = $1 AND field = ANY($2::text[])",
                &[&self.queue, &fields],
            )
            .await?)
    }
}

#[async_trait]
impl JobControl for PgQueueStore {
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> BackendResult<ControlOutcome> {
        // lifo comes from the job's own options, read in the same statement.
        let code = self
            .int_of(
                "retrying a job",
                "SELECT reprocess_job($1::text, $2::text, $3::text, \
                   COALESCE((SELECT (opts ->> 'lifo')::bool FROM job WHERE queue = $1 AND id = $2), false), \
                   $4::bool, $5::bool)::int8",
                &[
                    &self.queue,
                    &job_id,
                    &from.as_str(),
                    &reset.attempts_made,
                    &reset.attempts_started,
                ],
            )
            .await?;
        Ok(outcome(i32::try_from(code).unwrap_or(-3)))
    }

    async fn promote_job(&self, job_id: &str) -> BackendResult<ControlOutcome> {
        let code = self
            .int_of(
                "promoting a job",
                "SELECT promote($1::text, $2::text)::int8",
                &[&self.queue, &job_id],
            )
            .await?;
        Ok(outcome(i32::try_from(code).unwrap_or(-3)))
    }

    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> BackendResult<ControlOutcome> {
        let priority = i32::try_from(priority).unwrap_or(i32::MAX);
        let code = self
            .int_of(
                "changing a job's priority",
                "SELECT change_priority($1::text, $2::text, $3::int4, $4::bool)::int8",
                &[&self.queue, &job_id, &priority, &lifo],
            )
            .await?;
        Ok(outcome(i32::try_from(code).unwrap_or(-3)))
    }

    async fn change_delay(&self, job_id: &str, delay: Duration) -> BackendResult<ControlOutcome> {
        let code = self
            .int_of(
                "changing a job's delay",
                "SELECT change_delay($1::text, $2::text, $3::int8, $4::int8)::int8",
                &[&self.queue, &job_id, &ms(delay), &now()],
            )
            .await?;
        Ok(outcome(i32::try_from(code).unwrap_or(-3)))
    }

    async fn clear_logs(&self, job_id: &str, keep: u64) -> BackendResult<()> {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        self.execute(
            "clearing a job's logs",
            "DELETE FROM job_log WHERE queue = $1 AND job_id = $2 \
               AND idx <= (SELECT MAX(idx) FROM job_log WHERE queue = $1 AND job_id = $2) - $3::int8",
            &[&self.queue, &job_id, &keep],
        )
        .await?;
        Ok(())
    }

    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> BackendResult<u64> {
        let moved = self
            .int_of(
                "retrying jobs",
                "SELECT retry_jobs($1::text, $2::text, $3::int4, $4::int8)::int8",
                &[
                    &self.queue,
                    &from.as_str(),
                    &clamp_i32(u64::from(count.max(1))),
                    &i64::try_from(finished_by_ms).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        Ok(u64::try_from(moved).unwrap_or(0))
    }

    async fn promote_jobs(&self, count: u32) -> BackendResult<u64> {
        let moved = self
            .int_of(
                "promoting jobs",
                "SELECT promote_jobs($1::text, $2::int4)::int8",
                &[&self.queue, &clamp_i32(u64::from(count.max(1)))],
            )
            .await?;
        Ok(u64::try_from(moved).unwrap_or(0))
    }

    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: Duration,
    ) -> BackendResult<LockOutcome> {
        // extend_lock answers 0 both for "no lock" and "another token": the row tells which,
        // read in the same statement's snapshot.
        let rows = self
            .query_rows(
                "extending a lock",
                "SELECT extend_lock($1::text, $2::text, $3::text, $4::int8, $5::int8), \
                        (SELECT lock_token FROM job WHERE queue = $1 AND id = $2)",
                &[&self.queue, &job_id, &token, &ms(duration), &now()],
            )
            .await?;
        let extended: i32 = rows[0].get(0);
        let holder: Option<String> = rows[0].get(1);
        Ok(match (extended, holder) {
            (n, _) if n > 0 => LockOutcome::Extended,
            (_, None) => LockOutcome::Missing,
            (_, Some(_)) => LockOutcome::HeldByOther,
        })
    }
}

#[async_trait]
impl QueueControl for PgQueueStore {
    async fn set_global_concurrency(&self, concurrency: u64) -> BackendResult<()> {
        self.set_meta_fields(&["concurrency"], &[concurrency.to_string()])
            .await
    }

    async fn get_global_concurrency(&self) -> BackendResult<Option<u64>> {
        Ok(bullmq_backend::queue_control::concurrency_from_meta(
            self.meta_field("concurrency").await?.as_deref(),
        ))
    }

    async fn remove_global_concurrency(&self) -> BackendResult<bool> {
        Ok(self.remove_meta_fields(&["concurrency"]).await? > 0)
    }

    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> BackendResult<()> {
        self.set_meta_fields(
            &["max", "duration"],
            &[limit.max.to_string(), limit.duration_ms().to_string()],
        )
        .await
    }

    async fn get_global_rate_limit(&self) -> BackendResult<Option<GlobalRateLimit>> {
        let max = self.meta_field("max").await?;
        let duration = self.meta_field("duration").await?;
        Ok(GlobalRateLimit::from_meta(
            max.as_deref(),
            duration.as_deref(),
        ))
    }

    async fn remove_global_rate_limit(&self) -> BackendResult<u64> {
        self.remove_meta_fields(&["max", "duration"]).await
    }

    async fn set_rate_limit(&self, ttl_ms: u64) -> BackendResult<()> {
        self.query_rows(
            "rate limiting the queue",
            "SELECT set_rate_limit($1::text, $2::int8, $3::int8)::text",
            &[
                &self.queue,
                &i64::try_from(ttl_ms).unwrap_or(i64::MAX),
                &now(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> BackendResult<i64> {
        let max = clamp_i32(max_jobs.unwrap_or(0));
        self.int_of(
            "reading the rate limit",
            "SELECT rate_limit_ttl($1::text, $2::int4, $3::int8)",
            &[&self.queue, &max, &now()],
        )
        .await
    }

    async fn remove_rate_limit_key(&self) -> BackendResult<bool> {
        Ok(self
            .execute(
                "removing the rate limit",
                "DELETE FROM rate_limit WHERE queue = $1",
                &[&self.queue],
            )
            .await?
            > 0)
    }

    async fn is_maxed(&self) -> BackendResult<bool> {
        // A `concurrency` that is not a number means none (Node's cast would raise).
        let rows = self
            .query_rows(
                "reading whether the queue is maxed",
                "SELECT COALESCE( \
                   (SELECT count(*) FROM job WHERE queue = $1 AND state = 'active') >= \
                   (SELECT CASE WHEN btrim(value) ~ '^[0-9]{1,18}$' THEN btrim(value)::int8 END \
                      FROM meta WHERE queue = $1 AND field = 'concurrency'), false)",
                &[&self.queue],
            )
            .await?;
        Ok(rows[0].get(0))
    }

    async fn trim_events(&self, max_length: u64) -> BackendResult<u64> {
        // Under the try-lock Node's publish_event trims with, so two trimmers never run at
        // once; 0 when another holds it.
        let keep = i64::try_from(max_length).unwrap_or(i64::MAX);
        let removed = self
            .execute(
                "trimming the event log",
                "WITH l AS (SELECT pg_try_advisory_xact_lock(hashtext('bullmq:evtrim:' || $1)) AS got), \
                      keep AS (SELECT id FROM event WHERE queue = $1 ORDER BY id DESC LIMIT $2::int8) \
                 DELETE FROM event e USING l \
                  WHERE l.got AND e.queue = $1 AND e.id NOT IN (SELECT id FROM keep)",
                &[&self.queue, &keep],
            )
            .await?;
        Ok(removed)
    }

    async fn get_deduplication_job_id(&self, dedup_id: &str) -> BackendResult<Option<String>> {
        let rows = self
            .query_rows(
                "reading a deduplication id",
                "SELECT job_id FROM dedup WHERE queue = $1 AND dedup_id = $2 \
                   AND (expire_at_ms IS NULL OR expire_at_ms > $3)",
                &[&self.queue, &dedup_id, &now()],
            )
            .await?;
        Ok(rows.first().map(|r| r.get(0)))
    }

    async fn remove_deduplication_key(&self, dedup_id: &str) -> BackendResult<bool> {
        Ok(self
            .execute(
                "removing a deduplication id",
                "DELETE FROM dedup WHERE queue = $1 AND dedup_id = $2",
                &[&self.queue, &dedup_id],
            )
            .await?
            > 0)
    }

    async fn get_counts_per_priority(&self, priorities: &[u32]) -> BackendResult<Vec<u64>> {
        let priorities: Vec<i64> = priorities.iter().map(|p| i64::from(*p)).collect();
        let rows = self
            .query_rows(
                "counting jobs per priority",
                "SELECT count(j.id) FROM unnest($2::int8[]) WITH ORDINALITY AS p(priority, ord) \
                   LEFT JOIN job j ON j.queue = $1 AND j.state = 'waiting' AND j.priority = p.priority \
                  GROUP BY p.ord ORDER BY p.ord",
                &[&self.queue, &priorities],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0))
            .collect())
    }
}

#[async_trait]
impl QueueMaintenance for PgQueueStore {
    async fn get_delayed_count_before(&self, timestamp_ms: u64) -> BackendResult<u64> {
        let n = self
            .int_of(
                "counting delayed jobs",
                "SELECT count(*) FROM job WHERE queue = $1 AND state = 'delayed' \
                   AND process_at_ms < $2::int8",
                &[
                    &self.queue,
                    &i64::try_from(timestamp_ms).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn remove_deprecated_priority_key(&self) -> BackendResult<bool> {
        // BullMQ 4's `priority` key never existed on PostgreSQL: nothing to remove.
        Ok(false)
    }

    async fn is_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        let rows = self
            .query_rows(
                "reading whether a job scheduler exists",
                "SELECT EXISTS (SELECT 1 FROM scheduler WHERE queue = $1 AND scheduler_id = $2)",
                &[&self.queue, &id],
            )
            .await?;
        Ok(rows[0].get(0))
    }

    async fn remove_owned_deduplication_key(
        &self,
        dedup_id: &str,
        job_id: &str,
    ) -> BackendResult<bool> {
        Ok(self
            .execute(
                "removing a job's deduplication id",
                "DELETE FROM dedup WHERE queue = $1 AND dedup_id = $2 AND job_id = $3 \
                   AND (expire_at_ms IS NULL OR expire_at_ms > $4)",
                &[&self.queue, &dedup_id, &job_id, &now()],
            )
            .await?
            > 0)
    }

    async fn remove_child_dependency(&self, job_id: &str) -> BackendResult<ChildDependency> {
        let reply = self
            .query_rows(
                "detaching a child from its parent",
                "SELECT remove_child_dependency($1::text, $2::text, \
                   COALESCE((SELECT parent_key FROM job WHERE queue = $1 AND id = $2), ''), $3::int8)",
                &[&self.queue, &job_id, &now()],
            )
            .await;
        match reply {
            Ok(rows) => Ok(if rows[0].get::<_, i32>(0) == 0 {
                ChildDependency::Removed
            } else {
                ChildDependency::NotPending
            }),
            Err(e) => match e.bullmq_code() {
                Some(-1) => Ok(ChildDependency::JobMissing),
                Some(-5) => Ok(ChildDependency::ParentMissing),
                _ => Err(e.into()),
            },
        }
    }

    async fn remove_unprocessed_children(
        &self,
        job_id: &str,
    ) -> BackendResult<Vec<bullmq_protocol::JobRef>> {
        // The function returns nothing: the pending descendants are read first and those gone
        // afterwards are the ones it removed.
        let operation = "removing a job's unprocessed children";
        let before = self
            .query_rows(
                operation,
                "WITH RECURSIVE d(q, id, key, depth) AS ( \
                   SELECT child_queue, child_id, child_key, 1 FROM job_dependency \
                    WHERE parent_queue = $1 AND parent_id = $2 AND status = 'pending' \
                   UNION ALL \
                   SELECT c.child_queue, c.child_id, c.child_key, d.depth + 1 \
                     FROM job_dependency c JOIN d ON c.parent_queue = d.q AND c.parent_id = d.id \
                    WHERE c.status = 'pending') \
                 SELECT q, id, key FROM d ORDER BY depth DESC, key",
                &[&self.queue, &job_id],
            )
            .await?;
        self.query_rows(
            operation,
            "SELECT remove_unprocessed_children($1::text, $2::text)::text",
            &[&self.queue, &job_id],
        )
        .await?;
        let mut removed = Vec::new();
        for r in &before {
            let (q, id, key): (String, String, String) = (r.get(0), r.get(1), r.get(2));
            let gone = self
                .query_rows(
                    operation,
                    "SELECT NOT EXISTS (SELECT 1 FROM job WHERE queue = $1 AND id = $2)",
                    &[&q, &id],
                )
                .await?;
            if gone[0].get::<_, bool>(0) {
                removed.push(self.job_ref(&key));
            }
        }
        Ok(removed)
    }

    async fn remove_orphaned_jobs(&self, _count: u32, _limit: u64) -> BackendResult<u64> {
        // A job is its row: no key can outlive the state that references it here.
        Ok(0)
    }
}
