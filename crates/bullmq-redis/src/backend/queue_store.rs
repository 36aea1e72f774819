//! [`RedisQueueStore`]: a queue's producer/admin store on Redis.

use std::collections::HashMap;

use async_trait::async_trait;
use bullmq_backend::queue_control::concurrency_from_meta;
use bullmq_backend::BackendName;
use bullmq_backend::{
    AddResult, BackendError, BackendResult, ControlOutcome, Dependencies, DependencyCounts,
    DependencyKind, DependencyPage, JobControl, JobEnd, JobFlows, JobRecord, JobSchedulers,
    JobUpdates, LockOutcome, Metrics, MetricsKind, NewJob, NextIteration, ObliterateStep, Producer,
    QueueAdmin, QueueStore, RemoveOutcome, RetryFrom, RetryReset, UpsertOutcome, WorkerInfo,
};
use bullmq_backend::{GlobalRateLimit, QueueControl};
use bullmq_protocol::job_record::text_fields;
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::scheduler::{JobSchedulerRecord, NextIterationPlan, UpsertPlan};
use bullmq_protocol::state::JobState;
use fred::prelude::{Client, SortedSetsInterface};

use super::replica_reads::ReadRoute;
use crate::queue as calls;
use crate::queue::queue_control as control;
use crate::{ConnectionConfig, Connections};

/// The producer and admin store of one queue on one Redis connection (two with
/// [`ConnectionConfig::replica_reads`]: the read-only getters then go to a replica, answered by
/// the primary whenever the replica cannot).
///
/// Cloning shares the connections. A store opened by [`RedisQueueStore::connect`] owns it: it
/// closes on [`QueueStore::close`] or when the last clone is dropped; one made
/// [`RedisQueueStore::with_client`] leaves the client to its owner.
#[derive(Debug, Clone)]
pub struct RedisQueueStore {
    pub(super) client: Client,
    pub(super) reads: ReadRoute,
    pub(super) keys: QueueKeys,
    owned: Option<std::sync::Arc<Connections>>,
}

impl RedisQueueStore {
    /// Connects a store for `keys`' queue (an unnamed connection, as Node's `Queue`). With
    /// [`ConnectionConfig::replica_reads`] it also connects to a healthy replica the Sentinels
    /// list (none found or reachable: every read goes to the primary, logged at debug level).
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Connect`] when Redis cannot be reached within the configured
    /// timeout; [`crate::RedisError::CrossSlot`] on a cluster when the queue's keys would not
    /// share a slot.
    pub async fn connect(config: &ConnectionConfig, keys: QueueKeys) -> crate::Result<Self> {
        config.check_queue_keys(keys.prefix(), keys.name())?;
        let client = config.connect(None).await?;
        let replica = config.connect_replica().await;
        let owned = Connections::new(
            std::iter::once(client.clone())
                .chain(replica.clone())
                .collect(),
            Vec::new(),
        );
        Ok(Self {
            reads: ReadRoute::new(client.clone(), replica),
            client,
            keys,
            owned: Some(std::sync::Arc::new(owned)),
        })
    }

    /// A store on an existing client, which [`QueueStore::close`] leaves open.
    pub fn with_client(client: Client, keys: QueueKeys) -> Self {
        Self {
            reads: ReadRoute::new(client.clone(), None),
            client,
            keys,
            owned: None,
        }
    }

    /// The Redis client (of the primary: every write goes there).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client of the replica the getters read from, `None` when they read from the primary
    /// (replica reads off, or no healthy replica found when the store opened).
    pub fn replica_client(&self) -> Option<&Client> {
        self.reads.replica()
    }

    /// The queue's keys.
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }
}

#[async_trait]
impl Producer for RedisQueueStore {
    async fn add(&self, job: &NewJob) -> BackendResult<AddResult> {
        Ok(calls::add_job(&self.client, &self.keys, job).await?)
    }

    async fn add_bulk(&self, jobs: &[NewJob]) -> BackendResult<Vec<AddResult>> {
        Ok(calls::add_jobs_bulk(&self.client, &self.keys, jobs).await?)
    }
}

#[async_trait]
impl QueueAdmin for RedisQueueStore {
    async fn set_meta(&self, max_len_events: u64) -> BackendResult<()> {
        Ok(calls::set_meta(&self.client, &self.keys, max_len_events).await?)
    }

    async fn get_meta(&self) -> BackendResult<HashMap<String, String>> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_meta(&c, keys).await })
            .await?)
    }

    async fn get_counts(&self, states: &[JobState]) -> BackendResult<Vec<u64>> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_counts(&c, keys, states).await })
            .await?)
    }

    async fn get_ranges(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<Vec<Vec<String>>> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(
                |c| async move { calls::get_ranges(&c, keys, states, start, end, ascending).await },
            )
            .await?)
    }

    async fn get_state(&self, job_id: &str) -> BackendResult<JobState> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_state(&c, keys, job_id).await })
            .await?)
    }

    async fn get_job(&self, job_id: &str) -> BackendResult<Option<JobRecord>> {
        let keys = &self.keys;
        let mut raw = self
            .reads
            .read(|c| async move { calls::get_job_hash(&c, keys, job_id).await })
            .await?;
        if raw.is_empty() && self.reads.replica().is_some() {
            // Not on the replica may mean not there yet (a job just added, as
            // `upsert_job_scheduler` reads back): the primary has the last word on absence.
            raw = calls::get_job_hash(&self.client, keys, job_id).await?;
        }
        if raw.is_empty() {
            return Ok(None);
        }
        let decode = |source| BackendError::Decode {
            job_id: job_id.to_owned(),
            source,
        };
        let fields = text_fields(raw).map_err(decode)?;
        JobRecord::decode(job_id, &fields).map(Some).map_err(decode)
    }

    async fn job_end(&self, job_id: &str) -> BackendResult<JobEnd> {
        Ok(calls::job_end(&self.client, &self.keys, job_id).await?)
    }

    async fn get_job_logs(
        &self,
        job_id: &str,
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<(Vec<String>, u64)> {
        let keys = &self.keys;
        Ok(
            self.reads
                .read(|c| async move {
                    calls::get_job_logs(&c, keys, job_id, start, end, ascending).await
                })
                .await?,
        )
    }

    async fn pause(&self) -> BackendResult<()> {
        Ok(calls::pause(&self.client, &self.keys).await?)
    }

    async fn resume(&self) -> BackendResult<()> {
        Ok(calls::resume(&self.client, &self.keys).await?)
    }

    async fn is_paused(&self) -> BackendResult<bool> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::is_paused(&c, keys).await })
            .await?)
    }

    async fn drain(&self, delayed: bool) -> BackendResult<u64> {
        Ok(calls::drain(&self.client, &self.keys, delayed).await?)
    }

    async fn clean(
        &self,
        state: JobState,
        cutoff_ms: u64,
        limit: u64,
    ) -> BackendResult<Vec<String>> {
        Ok(calls::clean(&self.client, &self.keys, state, cutoff_ms, limit).await?)
    }

    async fn obliterate_batch(&self, batch: u32, force: bool) -> BackendResult<ObliterateStep> {
        Ok(calls::obliterate_batch(&self.client, &self.keys, batch, force).await?)
    }

    async fn remove_job(&self, job_id: &str, children: bool) -> BackendResult<RemoveOutcome> {
        Ok(calls::remove_job(&self.client, &self.keys, job_id, children).await?)
    }

    async fn get_metrics(&self, kind: MetricsKind, start: i64, end: i64) -> BackendResult<Metrics> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_metrics(&c, keys, kind, start, end).await })
            .await?)
    }
}

#[async_trait]
impl JobUpdates for RedisQueueStore {
    async fn update_progress(
        &self,
        job_id: &str,
        progress: &serde_json::Value,
    ) -> BackendResult<bool> {
        let text = progress.to_string();
        Ok(calls::update_progress(&self.client, &self.keys, job_id, &text).await?)
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>> {
        Ok(calls::add_log(&self.client, &self.keys, job_id, line, keep_logs).await?)
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> BackendResult<bool> {
        let text = data.to_string();
        Ok(calls::update_data(&self.client, &self.keys, job_id, &text).await?)
    }
}

#[async_trait]
impl JobFlows for RedisQueueStore {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        let keys = &self.keys;
        let read = self
            .reads
            .read(|c| async move { calls::get_dependencies(&c, keys, job_id).await })
            .await?;
        super::refs::dependencies(job_id, read)
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_dependency_counts(&c, keys, job_id).await })
            .await?)
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        let keys = &self.keys;
        let read = self
            .reads
            .read(|c| async move {
                calls::get_dependencies_page(&c, keys, job_id, kind, cursor, count).await
            })
            .await?;
        let field = match kind {
            DependencyKind::Processed => "processed",
            DependencyKind::Unprocessed => "dependencies",
            DependencyKind::Ignored => "failed",
            _ => "unsuccessful",
        };
        super::refs::page(job_id, field, read)
    }
}

#[async_trait]
impl JobSchedulers for RedisQueueStore {
    async fn upsert_job_scheduler(&self, plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        Ok(calls::upsert_job_scheduler(&self.client, &self.keys, plan).await?)
    }

    async fn create_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        Ok(calls::create_next_iteration(&self.client, &self.keys, plan).await?)
    }

    async fn get_job_scheduler(&self, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        let keys = &self.keys;
        self.reads
            .read(|c| async move { calls::get_job_scheduler(&c, keys, id).await })
            .await
    }

    async fn get_job_schedulers(
        &self,
        start: i64,
        end: i64,
        asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        let (keys, primary) = (&self.keys, &self.client);
        self.reads
            .read(|c| async move {
                calls::get_job_schedulers_from(&c, primary, keys, start, end, asc).await
            })
            .await
    }

    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        let key = self.keys.key(QueueKey::Repeat);
        let count: u64 = self
            .reads
            .read(|c| {
                let key = key.clone();
                async move {
                    c.zcard::<u64, _>(key)
                        .await
                        .map_err(crate::RedisError::from)
                }
            })
            .await?;
        Ok(count)
    }

    async fn remove_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        Ok(calls::remove_job_scheduler(&self.client, &self.keys, id).await?)
    }
}

#[async_trait]
impl JobControl for RedisQueueStore {
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> BackendResult<ControlOutcome> {
        Ok(calls::retry_job(&self.client, &self.keys, job_id, from, reset).await?)
    }

    async fn promote_job(&self, job_id: &str) -> BackendResult<ControlOutcome> {
        Ok(calls::promote_job(&self.client, &self.keys, job_id).await?)
    }

    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> BackendResult<ControlOutcome> {
        Ok(calls::change_priority(&self.client, &self.keys, job_id, priority, lifo).await?)
    }

    async fn change_delay(
        &self,
        job_id: &str,
        delay: std::time::Duration,
    ) -> BackendResult<ControlOutcome> {
        let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        let now = bullmq_backend::now_ms();
        Ok(calls::change_delay(&self.client, &self.keys, job_id, delay_ms, now).await?)
    }

    async fn clear_logs(&self, job_id: &str, keep: u64) -> BackendResult<()> {
        Ok(calls::clear_logs(&self.client, &self.keys, job_id, keep).await?)
    }

    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> BackendResult<u64> {
        Ok(calls::retry_jobs(&self.client, &self.keys, from, count, finished_by_ms).await?)
    }

    async fn promote_jobs(&self, count: u32) -> BackendResult<u64> {
        Ok(calls::promote_jobs(&self.client, &self.keys, count).await?)
    }

    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: std::time::Duration,
    ) -> BackendResult<LockOutcome> {
        Ok(calls::extend_lock(&self.client, &self.keys, job_id, token, duration).await?)
    }
}

#[async_trait]
impl QueueStore for RedisQueueStore {
    fn queue_name(&self) -> &str {
        self.keys.name()
    }

    async fn close(&self) -> BackendResult<()> {
        if let Some(owned) = &self.owned {
            owned.close().await;
        }
        Ok(())
    }

    /// `CLIENT LIST` on the primary (every primary of a cluster), read as Node's
    /// `getWorkers()` ([`calls::list_workers`]).
    async fn list_workers(&self) -> BackendResult<Vec<WorkerInfo>> {
        Ok(calls::list_workers(&self.client, &self.keys).await?)
    }
}

impl BackendName for RedisQueueStore {
    fn backend_name(&self) -> &'static str {
        super::NAME
    }
}

#[async_trait]
impl QueueControl for RedisQueueStore {
    async fn set_global_concurrency(&self, concurrency: u64) -> BackendResult<()> {
        let fields = [("concurrency", concurrency.to_string())];
        Ok(control::set_meta_fields(&self.client, &self.keys, &fields).await?)
    }

    async fn get_global_concurrency(&self) -> BackendResult<Option<u64>> {
        let keys = &self.keys;
        let values = self
            .reads
            .read(|c| async move { control::get_meta_fields(&c, keys, &["concurrency"]).await })
            .await?;
        Ok(concurrency_from_meta(
            values.first().and_then(Option::as_deref),
        ))
    }

    async fn remove_global_concurrency(&self) -> BackendResult<bool> {
        Ok(control::remove_meta_fields(&self.client, &self.keys, &["concurrency"]).await? > 0)
    }

    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> BackendResult<()> {
        let fields = [
            ("max", limit.max.to_string()),
            ("duration", limit.duration_ms().to_string()),
        ];
        Ok(control::set_meta_fields(&self.client, &self.keys, &fields).await?)
    }

    async fn get_global_rate_limit(&self) -> BackendResult<Option<GlobalRateLimit>> {
        let keys = &self.keys;
        let values = self
            .reads
            .read(|c| async move { control::get_meta_fields(&c, keys, &["max", "duration"]).await })
            .await?;
        let field = |i: usize| values.get(i).and_then(Option::as_deref);
        Ok(GlobalRateLimit::from_meta(field(0), field(1)))
    }

    async fn remove_global_rate_limit(&self) -> BackendResult<u64> {
        Ok(control::remove_meta_fields(&self.client, &self.keys, &["max", "duration"]).await?)
    }

    async fn set_rate_limit(&self, ttl_ms: u64) -> BackendResult<()> {
        Ok(control::set_rate_limit(&self.client, &self.keys, ttl_ms.max(1)).await?)
    }

    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> BackendResult<i64> {
        Ok(control::get_rate_limit_ttl(&self.client, &self.keys, max_jobs).await?)
    }

    async fn remove_rate_limit_key(&self) -> BackendResult<bool> {
        Ok(control::delete_key(&self.client, self.keys.key(QueueKey::Limiter)).await?)
    }

    async fn is_maxed(&self) -> BackendResult<bool> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { control::is_maxed(&c, keys).await })
            .await?)
    }

    async fn trim_events(&self, max_length: u64) -> BackendResult<u64> {
        Ok(control::trim_events(&self.client, &self.keys, max_length).await?)
    }

    async fn get_deduplication_job_id(&self, dedup_id: &str) -> BackendResult<Option<String>> {
        let key = self.keys.deduplication(dedup_id);
        Ok(self
            .reads
            .read(|c| {
                let key = key.clone();
                async move { control::get_string(&c, key).await }
            })
            .await?)
    }

    async fn remove_deduplication_key(&self, dedup_id: &str) -> BackendResult<bool> {
        Ok(control::delete_key(&self.client, self.keys.deduplication(dedup_id)).await?)
    }

    async fn get_counts_per_priority(&self, priorities: &[u32]) -> BackendResult<Vec<u64>> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { control::get_counts_per_priority(&c, keys, priorities).await })
            .await?)
    }
}
