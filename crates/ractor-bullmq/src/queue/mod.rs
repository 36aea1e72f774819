//! The producer and admin side of a queue: [`Queue`].
//!
//! A `Queue` is a cheap-to-clone handle on one backend store ([`QueueStore`]): one Redis
//! connection for [`Queue::new`], any backend for [`Queue::with_backend`]. Adding a job is one
//! store call (one script on Redis) that validates nothing itself: options are checked here
//! first ([`bullmq_protocol::validation`]) so invalid input never reaches the store.
//!
//! ```no_run
//! use ractor_bullmq::{Queue, QueueOptions};
//!
//! # async fn demo() -> Result<(), ractor_bullmq::QueueError> {
//! let queue = Queue::new("emails", QueueOptions::from_env()?).await?;
//! let job = queue.add("welcome", &serde_json::json!({ "to": "a@b.c" })).await?;
//! let counts = queue.get_job_counts().await?;
//! assert!(counts.waiting >= 1);
//! queue.close().await?;
//! # let _ = job;
//! # Ok(()) }
//! ```

pub(crate) mod add;
mod batch_options;
mod dependencies;
mod flows;
mod job_actions;
mod job_control;
mod job_flows;
mod maintenance;
mod metrics;
mod options;
mod prometheus;
mod queue_control;
mod removal;
mod reports;
mod schedulers;
mod state_getters;
mod workers;

use std::collections::HashSet;
use std::sync::Arc;

use bullmq_backend::{Backend, QueueStore};
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::options::JobOptions;
use bullmq_protocol::state::JobState;
use bullmq_protocol::QueueId;
use bullmq_redis::fred::prelude::Client;
use bullmq_redis::RedisQueueStore;
use serde::Serialize;
use tracing::Instrument;

use crate::store::TracedQueueStore;

pub use add::AddJob;
pub use batch_options::{CleanOptions, PromoteJobsOptions, RetryJobsOptions};
pub use dependencies::{Dependencies, DependencyPage};
pub use options::QueueOptions;
pub use prometheus::prometheus_text;
pub use queue_control::RateLimitTtl;
pub use removal::{ObliterateOptions, RemoveOptions};
pub use reports::{JobCounts, JobLogs, QueueMeta};
pub use schedulers::JobSchedulersRange;
pub use workers::{parse_client_list, parse_client_lists, WorkerInfo};

use crate::error::{QueueError, Result};
use crate::job::Job;
use crate::telemetry;

/// A handle on one queue: add jobs, inspect and administer it.
///
/// Cloning is cheap and clones share the connection.
#[derive(Debug, Clone)]
pub struct Queue {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    keys: QueueKeys,
    /// The backend's store of this queue; it closes its connection (when it owns one) on
    /// [`Queue::close`] or when the last clone is dropped.
    store: Arc<dyn QueueStore>,
    /// The Redis client when the store is the Redis one, for Redis-only tools (CLI, benches).
    redis: Option<Client>,
    options: QueueOptions,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("queue", &self.keys.qualified_name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Wraps a record this queue read or wrote, with a handle on the queue (an `Arc` clone)
    /// so the job can act on it.
    pub(crate) fn job_of(&self, record: bullmq_protocol::job_record::JobRecord) -> Job {
        let handle: crate::job::QueueHandle = self.inner.clone();
        Job::with_queue_handle(self.inner.name.clone(), record, handle)
    }

    /// Connects to Redis and opens queue `name`; writes the queue's `meta` (`version`,
    /// `opts.maxLenEvents`) as a Node `Queue` does, unless
    /// [`QueueOptions::skip_meta_update`].
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] with [`bullmq_redis::RedisError::Connect`] when Redis cannot be
    /// reached within [`bullmq_redis::ConnectionConfig::connect_timeout`], with
    /// [`bullmq_redis::RedisError::CrossSlot`] (before connecting) when the connection is a
    /// Redis Cluster and the queue's keys would not share one slot (use a prefix such as
    /// `{bull}` or a queue name such as `{emails}`).
    pub async fn new(name: impl Into<String>, options: QueueOptions) -> Result<Self> {
        let name = name.into();
        let keys = QueueKeys::new(options.prefix.clone(), name.clone());
        let store = RedisQueueStore::connect(&options.connection, keys.clone()).await?;
        let redis = Some(store.client().clone());
        Self::open(name, keys, Arc::new(store), redis, options).await
    }

    /// Opens queue `name` on `backend` (the prefix comes from `options`; its `connection` is
    /// not used).
    ///
    /// # Errors
    ///
    /// [`QueueError::Backend`] when the backend cannot be reached or writing `meta` fails.
    pub async fn with_backend(
        name: impl Into<String>,
        backend: &dyn Backend,
        options: QueueOptions,
    ) -> Result<Self> {
        let name = name.into();
        let keys = QueueKeys::new(options.prefix.clone(), name.clone());
        let store = backend.queue_store(&QueueId::from(&keys)).await?;
        Self::open(name, keys, store, None, options).await
    }

    /// Opens queue `name` on an existing Redis client (shared, not closed by
    /// [`Queue::close`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] when writing `meta` fails, or with
    /// [`bullmq_redis::RedisError::CrossSlot`] when `client` is a cluster client and the
    /// queue's keys would not share one slot.
    pub async fn with_client(
        name: impl Into<String>,
        client: Client,
        options: QueueOptions,
    ) -> Result<Self> {
        let name = name.into();
        if bullmq_redis::fred::prelude::ClientLike::is_clustered(&client) {
            bullmq_protocol::cluster_slot::check_queue_slot(&options.prefix, &name)
                .map_err(bullmq_redis::RedisError::from)?;
        }
        let keys = QueueKeys::new(options.prefix.clone(), name.clone());
        let store = RedisQueueStore::with_client(client.clone(), keys.clone());
        Self::open(name, keys, Arc::new(store), Some(client), options).await
    }

    async fn open(
        name: String,
        keys: QueueKeys,
        store: Arc<dyn QueueStore>,
        redis: Option<Client>,
        options: QueueOptions,
    ) -> Result<Self> {
        let store: Arc<dyn QueueStore> = Arc::new(TracedQueueStore::new(store));
        if !options.skip_meta_update {
            store.set_meta(options.max_len_events).await?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                name,
                keys,
                store,
                redis,
                options,
            }),
        })
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The queue as the backend seam names it: namespace (the prefix) and name.
    pub fn id(&self) -> QueueId {
        QueueId::from(&self.inner.keys)
    }

    /// The queue's Redis key names (the prefix and name of [`Queue::id`]), for Redis-only
    /// tools; the backend seam takes [`Queue::id`].
    pub fn keys(&self) -> &QueueKeys {
        &self.inner.keys
    }

    /// The Redis client this handle uses, when it was opened on Redis ([`Queue::new`],
    /// [`Queue::with_client`]); `None` on another backend.
    pub fn redis_client(&self) -> Option<&Client> {
        self.inner.redis.as_ref()
    }

    /// The backend's store of this queue, traced: each call opens its `bullmq.store.<method>`
    /// span (see `docs/telemetry.md`).
    pub fn store(&self) -> &Arc<dyn QueueStore> {
        &self.inner.store
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &QueueOptions {
        &self.inner.options
    }

    /// Starts adding a job; set options on the returned builder and `.await` it.
    ///
    /// Data that fails to serialise surfaces as [`QueueError::Json`] when awaited.
    pub fn add(&self, name: impl Into<String>, data: impl Serialize) -> AddJob<'_> {
        AddJob::new(self, name.into(), data)
    }

    /// Adds a job with the given options (merged over the queue's default job options).
    ///
    /// The returned [`Job`] is what was stored, without reading it back. When the custom id
    /// already exists (`duplicated`) or the job was deduplicated (`deduplicated`), it carries
    /// the existing job's id with this call's name, data and options, as Node's does.
    ///
    /// # Errors
    ///
    /// [`QueueError::Validation`] (nothing written),
    /// [`QueueError::Json`], [`QueueError::ParentNotFound`], [`QueueError::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future may or may not have added the job.
    pub async fn add_job(
        &self,
        name: impl Into<String>,
        data: impl Serialize,
        opts: JobOptions,
    ) -> Result<Job> {
        let data = serde_json::to_string(&data)?;
        self.add_json(name.into(), data, opts).await
    }

    pub(crate) async fn add_json(
        &self,
        name: String,
        data: String,
        opts: JobOptions,
    ) -> Result<Job> {
        let queue_name = self.inner.name.as_str();
        let span = telemetry::add_span(queue_name, &name);
        let trace_metadata = telemetry::propagation_metadata(&span);
        async {
            let defaults = add::DefaultOptions::new(&self.inner.options.default_job_options)?;
            let prepared = add::prepare(
                &self.inner.keys,
                &defaults,
                name,
                data,
                opts,
                trace_metadata,
            )?;
            let result = self.inner.store.add(&prepared.new_job).await?;
            let job = prepared.into_job(self, result)?;
            telemetry::record_job_id(&tracing::Span::current(), job.id());
            telemetry::job_added(queue_name, job.id(), job.name());
            Ok(job)
        }
        .instrument(span)
        .await
    }

    /// Adds many jobs in one round trip and one script call (Node `addBulk`): Redis ends as
    /// after adding them one by one, in order. Every job is validated before anything is
    /// written.
    ///
    /// # Errors
    ///
    /// As [`Queue::add_job`]; on a validation error no job is added.
    pub async fn add_bulk<N, T>(
        &self,
        jobs: impl IntoIterator<Item = (N, T, JobOptions)>,
    ) -> Result<Vec<Job>>
    where
        N: Into<String>,
        T: Serialize,
    {
        let queue_name = self.inner.name.as_str();
        let jobs: Vec<(N, T, JobOptions)> = jobs.into_iter().collect();
        let span = telemetry::add_bulk_span(queue_name, jobs.len());
        let trace_metadata = telemetry::propagation_metadata(&span);
        let defaults = add::DefaultOptions::new(&self.inner.options.default_job_options)?;
        let mut new_jobs = Vec::with_capacity(jobs.len());
        let mut records = Vec::with_capacity(jobs.len());
        for (name, data, opts) in jobs {
            let data = serde_json::to_string(&data)?;
            let prepared = add::prepare(
                &self.inner.keys,
                &defaults,
                name.into(),
                data,
                opts,
                trace_metadata.clone(),
            )?;
            let (new_job, record) = prepared.into_parts();
            new_jobs.push(new_job);
            records.push(record);
        }
        async {
            let results = self.inner.store.add_bulk(&new_jobs).await?;
            let jobs = records
                .into_iter()
                .zip(results)
                .map(|(job, result)| job.into_job(self, result))
                .collect::<Result<Vec<_>>>()?;
            for job in &jobs {
                telemetry::job_added(queue_name, job.id(), job.name());
            }
            Ok(jobs)
        }
        .instrument(span)
        .await
    }

    /// Reads a job; `None` when it does not exist.
    ///
    /// # Errors
    ///
    /// [`QueueError::Decode`] naming the job and the field when the job hash is corrupted
    /// (including binary values that are not UTF-8); [`QueueError::Redis`].
    pub async fn get_job(&self, job_id: &str) -> Result<Option<Job>> {
        let record = self.inner.store.get_job(job_id).await?;
        Ok(record.map(|record| self.job_of(record)))
    }

    /// The state of a job ([`JobState::Unknown`] when it is in none).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn get_job_state(&self, job_id: &str) -> Result<JobState> {
        Ok(self.inner.store.get_state(job_id).await?)
    }

    /// Number of jobs in every state, in one round trip.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn get_job_counts(&self) -> Result<JobCounts> {
        let counts = self.inner.store.get_counts(&JobCounts::STATES).await?;
        Ok(JobCounts::from_counts(&counts))
    }

    /// Jobs not processed yet: waiting, delayed, prioritized and waiting-children (Node
    /// `Queue.count`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn count(&self) -> Result<u64> {
        Ok(self.get_job_counts().await?.pending())
    }

    /// Ids of the jobs in `states`, positions `start..=end` of each state (`-1` = last), oldest
    /// first when `ascending`; states are concatenated in the given order, duplicates dropped.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] (also for [`JobState::Unknown`], which has no key).
    pub async fn get_job_ids(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> Result<Vec<String>> {
        let ranges = self
            .inner
            .store
            .get_ranges(states, start, end, ascending)
            .await?;
        let mut seen = HashSet::new();
        Ok(ranges
            .into_iter()
            .flatten()
            .filter(|id| seen.insert(id.clone()))
            .collect())
    }

    /// The jobs of [`Queue::get_job_ids`], read concurrently; ids whose hash vanished meanwhile
    /// are skipped.
    ///
    /// # Errors
    ///
    /// [`QueueError::Decode`] for a corrupted job; [`QueueError::Redis`].
    pub async fn get_jobs(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> Result<Vec<Job>> {
        let ids = self.get_job_ids(states, start, end, ascending).await?;
        let reads = ids.iter().map(|id| self.get_job(id));
        let jobs = futures::future::try_join_all(reads).await?;
        Ok(jobs.into_iter().flatten().collect())
    }

    /// Pauses the queue: workers (Rust or Node) stop taking jobs; adding still works.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn pause(&self) -> Result<()> {
        self.inner.store.pause().await?;
        telemetry::queue_paused(&self.inner.name);
        Ok(())
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn resume(&self) -> Result<()> {
        self.inner.store.resume().await?;
        telemetry::queue_resumed(&self.inner.name);
        Ok(())
    }

    /// Whether the queue is paused.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_paused(&self) -> Result<bool> {
        Ok(self.inner.store.is_paused().await?)
    }

    /// Removes all waiting and prioritized jobs, and delayed ones too when `delayed`; active
    /// and finished jobs stay. Returns how many jobs were removed.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn drain(&self, delayed: bool) -> Result<u64> {
        let removed = self.inner.store.drain(delayed).await?;
        telemetry::queue_drained(&self.inner.name);
        Ok(removed)
    }

    /// Removes jobs in `options.state` (default completed) older than `options.grace` (by
    /// finishedOn, processedOn or timestamp), at most `options.limit` (default 0 = all) (Node
    /// `clean(grace, limit, type)`). Emits `cleaned`; returns the removed ids.
    ///
    /// ```no_run
    /// # async fn demo(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
    /// use std::time::Duration;
    /// use ractor_bullmq::CleanOptions;
    /// use ractor_bullmq::protocol::state::JobState;
    /// let hour = Duration::from_secs(3600);
    /// queue.clean(CleanOptions::new(hour)).await?; // completed jobs older than an hour
    /// queue.clean(CleanOptions::new(hour).state(JobState::Failed).limit(500)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] (also for [`JobState::Unknown`]).
    pub async fn clean(&self, options: CleanOptions) -> Result<Vec<String>> {
        let grace_ms = u64::try_from(options.grace.as_millis()).unwrap_or(u64::MAX);
        let cutoff = add::now_ms().saturating_sub(grace_ms);
        Ok(self
            .inner
            .store
            .clean(options.state, cutoff, options.limit)
            .await?)
    }

    /// Log lines `start..=end` (`-1` = last) of a job, oldest first when `ascending`.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn get_job_logs(
        &self,
        job_id: &str,
        start: i64,
        end: i64,
        ascending: bool,
    ) -> Result<JobLogs> {
        let (logs, count) = self
            .inner
            .store
            .get_job_logs(job_id, start, end, ascending)
            .await?;
        Ok(JobLogs { logs, count })
    }

    /// Appends a line to a job's log, keeping the newest `keep_logs` lines when given (Node
    /// `job.log` with `keepLogs`). Returns the number of lines kept.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`], [`QueueError::Redis`].
    pub async fn add_job_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> Result<u64> {
        self.inner
            .store
            .add_log(job_id, line, keep_logs)
            .await?
            .ok_or_else(|| QueueError::JobNotFound {
                job_id: job_id.to_owned(),
            })
    }

    /// Sets a job's progress (a number or any JSON object) and emits `progress`.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`], [`QueueError::Json`], [`QueueError::Redis`].
    pub async fn update_progress(&self, job_id: &str, progress: impl Serialize) -> Result<()> {
        let progress = serde_json::to_value(&progress)?;
        if self.inner.store.update_progress(job_id, &progress).await? {
            Ok(())
        } else {
            Err(QueueError::JobNotFound {
                job_id: job_id.to_owned(),
            })
        }
    }

    /// Replaces a job's data.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`], [`QueueError::Json`], [`QueueError::Redis`].
    pub async fn update_data(&self, job_id: &str, data: impl Serialize) -> Result<()> {
        let data = serde_json::to_value(&data)?;
        if self.inner.store.update_data(job_id, &data).await? {
            Ok(())
        } else {
            Err(QueueError::JobNotFound {
                job_id: job_id.to_owned(),
            })
        }
    }

    /// The queue's `meta` hash.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn get_meta(&self) -> Result<QueueMeta> {
        Ok(QueueMeta::from_raw(self.inner.store.get_meta().await?))
    }

    /// Closes the connection when this handle opened it ([`Queue::new`]); a shared client
    /// ([`Queue::with_client`]) is left open. Other clones of this handle stop working too.
    /// Without a `close`, the connection closes when the last clone is dropped.
    ///
    /// # Errors
    ///
    /// None today: closing is best effort and bounded (a server that went away cannot hold it
    /// up); the `Result` leaves room for backends whose close can fail.
    pub async fn close(&self) -> Result<()> {
        Ok(self.inner.store.close().await?)
    }
}
