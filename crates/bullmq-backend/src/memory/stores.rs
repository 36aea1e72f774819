//! The store handles a [`MemoryBackend`](super::MemoryBackend) opens: one per queue (and per
//! worker), each a name for a queue in the shared world plus its own `closed` flag.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::scheduler::{JobSchedulerRecord, NextIterationPlan, UpsertPlan};
use bullmq_protocol::state::JobState;
use bullmq_protocol::JobRecord;

use super::queue_state::META_VERSION;
use super::{add, admin, fetch, finish, flow, job_control, locks, schedulers, steps, World};
use crate::backend::WorkerStoreOptions;
use crate::capability::BackendName;
use crate::error::{BackendError, BackendResult};
use crate::flows::{Dependencies, DependencyCounts, DependencyKind, DependencyPage, JobFlows};
use crate::job_control::{ControlOutcome, JobControl, LockOutcome, RetryFrom, RetryReset};
use crate::metrics::{Metrics, MetricsKind};
use crate::queue::{
    AddResult, JobEnd, NewJob, ObliterateStep, Producer, QueueAdmin, QueueStore, RemoveOutcome,
    WorkerInfo,
};
use crate::schedulers::{JobSchedulers, NextIteration, UpsertOutcome};
use crate::worker::{
    ChildRef, FetchRequest, Fetched, Finish, FinishReply, JobUpdates, MoveToWaitOutcome,
    StalledReport, WaitingChildrenOutcome, WorkerStore,
};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One queue of the world, as seen by a handle; calls fail once the handle is closed.
#[derive(Debug)]
struct Handle<'a> {
    world: &'a World,
    base: &'a str,
    closed: &'a AtomicBool,
}

impl Handle<'_> {
    fn check(&self) -> BackendResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed);
        }
        Ok(())
    }

    fn update_progress(&self, job_id: &str, progress: &serde_json::Value) -> BackendResult<bool> {
        self.check()?;
        self.world.with_queue(self.base, |q, now| {
            if !q.jobs.contains_key(job_id) {
                return Ok(false);
            }
            let text = progress.to_string();
            q.set_field(job_id, "progress", text.clone());
            q.emit_queue(
                now,
                "progress",
                &[("jobId", job_id.to_owned()), ("data", text)],
            );
            Ok(true)
        })
    }

    fn add_log(&self, job_id: &str, line: &str, keep: Option<u64>) -> BackendResult<Option<u64>> {
        self.check()?;
        self.world
            .with_queue(self.base, |q, _| Ok(admin::add_log(q, job_id, line, keep)))
    }

    fn update_data(&self, job_id: &str, data: &serde_json::Value) -> BackendResult<bool> {
        self.check()?;
        self.world.with_queue(self.base, |q, _| {
            if !q.jobs.contains_key(job_id) {
                return Ok(false);
            }
            q.set_field(job_id, "data", data.to_string());
            Ok(true)
        })
    }

    fn dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        self.check()?;
        self.world
            .with_queue(self.base, |q, _| Ok(flow::dependencies(q, job_id)))
    }

    fn dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        self.check()?;
        self.world
            .with_queue(self.base, |q, _| Ok(flow::dependency_counts(q, job_id)))
    }

    fn dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        self.check()?;
        self.world.with_queue(self.base, |q, _| {
            Ok(flow::dependencies_page(q, job_id, kind, cursor, count))
        })
    }
}

/// Implements [`BackendName`], [`JobUpdates`] and [`JobFlows`] for a store with a `handle()`: both stores
/// answer them the same way (the job's queue, refused once the store is closed), and the
/// traits are async, so the impls are written once here rather than twice by hand.
macro_rules! job_updates_and_flows {
    ($store:ty) => {
        impl BackendName for $store {
            fn backend_name(&self) -> &'static str {
                super::NAME
            }
        }

        #[async_trait]
        impl JobUpdates for $store {
            async fn update_progress(
                &self,
                job_id: &str,
                progress: &serde_json::Value,
            ) -> BackendResult<bool> {
                self.handle().update_progress(job_id, progress)
            }

            async fn add_log(
                &self,
                job_id: &str,
                line: &str,
                keep_logs: Option<u64>,
            ) -> BackendResult<Option<u64>> {
                self.handle().add_log(job_id, line, keep_logs)
            }

            async fn update_data(
                &self,
                job_id: &str,
                data: &serde_json::Value,
            ) -> BackendResult<bool> {
                self.handle().update_data(job_id, data)
            }
        }

        #[async_trait]
        impl JobFlows for $store {
            async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
                self.handle().dependencies(job_id)
            }

            async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
                self.handle().dependency_counts(job_id)
            }

            async fn get_dependencies_page(
                &self,
                job_id: &str,
                kind: DependencyKind,
                cursor: u64,
                count: u64,
            ) -> BackendResult<DependencyPage> {
                self.handle().dependencies_page(job_id, kind, cursor, count)
            }
        }
    };
}

/// The producer/admin store of one queue.
#[derive(Debug)]
pub(crate) struct MemoryQueueStore {
    pub(crate) world: Arc<World>,
    pub(crate) base: String,
    pub(crate) name: String,
    pub(crate) closed: AtomicBool,
}

impl MemoryQueueStore {
    fn handle(&self) -> Handle<'_> {
        Handle {
            world: &self.world,
            base: &self.base,
            closed: &self.closed,
        }
    }

    pub(super) fn queue<T>(
        &self,
        f: impl FnOnce(&mut super::queue_state::QueueState, u64) -> BackendResult<T>,
    ) -> BackendResult<T> {
        self.handle().check()?;
        self.world.with_queue(&self.base, f)
    }

    pub(super) fn queues<T>(
        &self,
        f: impl FnOnce(&mut super::Queues, u64) -> BackendResult<T>,
    ) -> BackendResult<T> {
        self.handle().check()?;
        self.world.with_queues(f)
    }
}

#[async_trait]
impl Producer for MemoryQueueStore {
    async fn add(&self, job: &NewJob) -> BackendResult<AddResult> {
        let mut results = self.add_bulk(std::slice::from_ref(job)).await?;
        Ok(results.remove(0))
    }

    async fn add_bulk(&self, jobs: &[NewJob]) -> BackendResult<Vec<AddResult>> {
        self.queues(|queues, now| add::add_jobs(queues, &self.base, jobs, now))
    }
}

#[async_trait]
impl QueueAdmin for MemoryQueueStore {
    async fn set_meta(&self, max_len_events: u64) -> BackendResult<()> {
        self.queue(|q, _| {
            q.meta
                .insert("opts.maxLenEvents".into(), max_len_events.to_string());
            q.meta.insert("version".into(), META_VERSION.into());
            Ok(())
        })
    }

    async fn get_meta(&self) -> BackendResult<HashMap<String, String>> {
        self.queue(|q, _| Ok(q.meta.clone()))
    }

    async fn get_counts(&self, states: &[JobState]) -> BackendResult<Vec<u64>> {
        self.queue(|q, _| Ok(admin::counts(q, states)))
    }

    async fn get_ranges(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<Vec<Vec<String>>> {
        self.queue(|q, _| Ok(admin::ranges(q, states, start, end, ascending)))
    }

    async fn get_state(&self, job_id: &str) -> BackendResult<JobState> {
        self.queue(|q, _| Ok(admin::state(q, job_id)))
    }

    async fn get_job(&self, job_id: &str) -> BackendResult<Option<JobRecord>> {
        self.queue(|q, _| match q.jobs.get(job_id) {
            None => Ok(None),
            Some(hash) => {
                JobRecord::decode(job_id, hash)
                    .map(Some)
                    .map_err(|source| BackendError::Decode {
                        job_id: job_id.to_owned(),
                        source,
                    })
            }
        })
    }

    async fn job_end(&self, job_id: &str) -> BackendResult<JobEnd> {
        self.queue(|q, _| Ok(admin::job_end(q, job_id)))
    }

    async fn get_job_logs(
        &self,
        job_id: &str,
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<(Vec<String>, u64)> {
        self.queue(|q, _| Ok(admin::logs(q, job_id, start, end, ascending)))
    }

    async fn pause(&self) -> BackendResult<()> {
        self.queue(|q, now| {
            admin::set_paused(q, true, now);
            Ok(())
        })
    }

    async fn resume(&self) -> BackendResult<()> {
        self.queue(|q, now| {
            admin::set_paused(q, false, now);
            Ok(())
        })
    }

    async fn is_paused(&self) -> BackendResult<bool> {
        self.queue(|q, _| Ok(q.is_paused()))
    }

    async fn drain(&self, delayed: bool) -> BackendResult<u64> {
        self.queues(|queues, now| Ok(admin::drain(queues, &self.base, delayed, now)))
    }

    async fn clean(
        &self,
        state: JobState,
        cutoff_ms: u64,
        limit: u64,
    ) -> BackendResult<Vec<String>> {
        self.queues(|queues, now| admin::clean(queues, &self.base, state, cutoff_ms, limit, now))
    }

    async fn obliterate_batch(&self, batch: u32, force: bool) -> BackendResult<ObliterateStep> {
        self.queues(|queues, now| Ok(admin::obliterate(queues, &self.base, batch, force, now)))
    }

    async fn remove_job(&self, job_id: &str, children: bool) -> BackendResult<RemoveOutcome> {
        self.queues(|queues, now| Ok(admin::remove(queues, &self.base, job_id, children, now)))
    }

    async fn get_metrics(&self, kind: MetricsKind, start: i64, end: i64) -> BackendResult<Metrics> {
        self.queue(|q, _| {
            let m = match kind {
                MetricsKind::Completed => &q.metrics_completed,
                MetricsKind::Failed => &q.metrics_failed,
            };
            Ok(admin::metrics(m, start, end))
        })
    }
}

job_updates_and_flows!(MemoryQueueStore);

#[async_trait]
impl JobSchedulers for MemoryQueueStore {
    async fn upsert_job_scheduler(&self, plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        self.queues(|queues, now| schedulers::upsert(queues, &self.base, plan, now))
    }

    async fn create_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        self.queue(|q, now| schedulers::next_iteration(q, plan, now))
    }

    async fn get_job_scheduler(&self, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        self.queue(|q, _| schedulers::get(q, id))
    }

    async fn get_job_schedulers(
        &self,
        start: i64,
        end: i64,
        asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        self.queue(|q, now| schedulers::range(q, start, end, asc, now))
    }

    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        self.queue(|q, _| Ok(q.schedulers.next.len() as u64))
    }

    async fn remove_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        self.queue(|q, now| Ok(schedulers::remove(q, id, now)))
    }
}

#[async_trait]
impl JobControl for MemoryQueueStore {
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> BackendResult<ControlOutcome> {
        self.queues(|queues, now| {
            Ok(job_control::retry(
                queues, &self.base, job_id, from, reset, now,
            ))
        })
    }

    async fn promote_job(&self, job_id: &str) -> BackendResult<ControlOutcome> {
        self.queue(|q, now| Ok(job_control::promote(q, job_id, now)))
    }

    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> BackendResult<ControlOutcome> {
        self.queue(|q, _| Ok(job_control::change_priority(q, job_id, priority, lifo)))
    }

    async fn change_delay(&self, job_id: &str, delay: Duration) -> BackendResult<ControlOutcome> {
        self.queue(|q, now| Ok(job_control::change_delay(q, job_id, ms(delay), now)))
    }

    async fn clear_logs(&self, job_id: &str, keep: u64) -> BackendResult<()> {
        self.queue(|q, _| {
            job_control::clear_logs(q, job_id, keep);
            Ok(())
        })
    }

    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> BackendResult<u64> {
        let source = job_control::MoveSource::Finished(from, finished_by_ms);
        self.queues(|queues, now| {
            Ok(job_control::move_jobs_to_wait(
                queues, &self.base, source, count, now,
            ))
        })
    }

    async fn promote_jobs(&self, count: u32) -> BackendResult<u64> {
        let source = job_control::MoveSource::Delayed;
        self.queues(|queues, now| {
            Ok(job_control::move_jobs_to_wait(
                queues, &self.base, source, count, now,
            ))
        })
    }

    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: Duration,
    ) -> BackendResult<LockOutcome> {
        self.queue(|q, now| {
            Ok(job_control::extend_lock(
                q,
                job_id,
                token,
                ms(duration),
                now,
            ))
        })
    }
}

#[async_trait]
impl QueueStore for MemoryQueueStore {
    fn queue_name(&self) -> &str {
        &self.name
    }

    async fn close(&self) -> BackendResult<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    /// The worker stores of this queue the backend has open (see
    /// [`WorkerInfo`](crate::WorkerInfo): `addr` is `memory`, `id` the store's registration
    /// number, `raw_name` the name a Node-compatible connection of that worker would have).
    async fn list_workers(&self) -> BackendResult<Vec<WorkerInfo>> {
        self.handle().check()?;
        let now = self.world.now();
        Ok(self.world.workers().list(&self.base, &self.name, now))
    }
}

/// The store of one worker of one queue.
#[derive(Debug)]
pub(crate) struct MemoryWorkerStore {
    world: Arc<World>,
    base: String,
    name: String,
    options: WorkerStoreOptions,
    closed: AtomicBool,
    /// The sequence number of the next lock token this worker hands out.
    token_seq: AtomicU64,
    /// Its number in the backend's registry of open worker stores.
    registration: u64,
    /// When it was last called (ms), for [`WorkerInfo::idle`].
    last_call_ms: Arc<AtomicU64>,
}

impl MemoryWorkerStore {
    pub(crate) fn new(world: Arc<World>, queue: &QueueKeys, options: WorkerStoreOptions) -> Self {
        let now = world.now();
        let last_call_ms = Arc::new(AtomicU64::new(now));
        let registration = world.workers().register(
            queue.base(),
            queue.worker_client_name(options.worker_name.as_deref()),
            options.worker_name.clone(),
            now,
            last_call_ms.clone(),
        );
        Self {
            world,
            base: queue.base().to_owned(),
            name: queue.name().to_owned(),
            options,
            closed: AtomicBool::new(false),
            token_seq: AtomicU64::new(1),
            registration,
            last_call_ms,
        }
    }

    fn handle(&self) -> Handle<'_> {
        self.last_call_ms.store(self.world.now(), Ordering::Relaxed);
        Handle {
            world: &self.world,
            base: &self.base,
            closed: &self.closed,
        }
    }

    fn with_name(&self, request: &FetchRequest) -> FetchRequest {
        let mut request = request.clone();
        if request.worker_name.is_none() {
            request.worker_name.clone_from(&self.options.worker_name);
        }
        request
    }
}

impl Drop for MemoryWorkerStore {
    fn drop(&mut self) {
        self.world.workers().deregister(self.registration);
    }
}

job_updates_and_flows!(MemoryWorkerStore);

#[async_trait]
impl WorkerStore for MemoryWorkerStore {
    fn queue_name(&self) -> &str {
        &self.name
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> BackendResult<Fetched> {
        self.handle().check()?;
        let request = self.with_name(request);
        self.world.with_queue(&self.base, |q, now| {
            Ok(fetch::fetch(q, &request, now, &self.token_seq))
        })
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> BackendResult<FinishReply> {
        self.handle().check()?;
        let fetch = fetch.map(|r| self.with_name(r));
        let metrics_max = self.options.metrics_max_points;
        self.world.with_queues(|queues, now| {
            Ok(finish::finish_batch(
                queues,
                &self.base,
                finishes,
                fetch.as_ref(),
                metrics_max,
                now,
                &self.token_seq,
            ))
        })
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> BackendResult<Vec<String>> {
        self.handle().check()?;
        self.world.with_queue(&self.base, |q, now| {
            Ok(locks::extend_locks(q, jobs, ms(lock_duration), now))
        })
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> BackendResult<StalledReport> {
        self.handle().check()?;
        self.world.with_queue(&self.base, |q, now| {
            Ok(locks::check_stalled(
                q,
                max_stalled_count,
                ms(interval),
                now,
            ))
        })
    }

    async fn wait_for_job(&self, timeout: Duration) -> BackendResult<bool> {
        let signals = self.world.signals(&self.base);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = signals.work.notified();
            tokio::pin!(notified);
            // Registered before looking, so a signal in between still wakes us.
            notified.as_mut().enable();
            self.handle().check()?;
            let (ready, due_in) = self.world.with_queue(&self.base, |q, now| {
                if q.marker_ready {
                    q.marker_ready = false;
                    return Ok((true, None));
                }
                if q.is_paused() {
                    return Ok((false, None));
                }
                Ok((false, q.next_delayed_at().map(|at| at.saturating_sub(now))))
            })?;
            if ready || due_in == Some(0) {
                return Ok(true);
            }
            let mut until = deadline;
            if let Some(due_in) = due_in {
                until = until.min(tokio::time::Instant::now() + Duration::from_millis(due_in));
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                if until < deadline {
                    // The earliest delayed job is due: a fetch now promotes it.
                    return Ok(true);
                }
                return Ok(false);
            }
        }
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.world.workers().deregister(self.registration);
        self.world.signals(&self.base).work.notify_waiters();
    }

    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        self.handle().check()?;
        self.world.with_queue(&self.base, |q, now| {
            schedulers::next_iteration(q, plan, now)
        })
    }

    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> BackendResult<WaitingChildrenOutcome> {
        self.handle().check()?;
        let child_key = child.map(ChildRef::to_string);
        self.world.with_queue(&self.base, |q, now| {
            Ok(steps::move_to_waiting_children(
                q,
                job_id,
                token,
                child_key.as_deref(),
                now,
            ))
        })
    }

    async fn move_to_wait(&self, job_id: &str, token: &str) -> BackendResult<MoveToWaitOutcome> {
        self.handle().check()?;
        self.world.with_queue(&self.base, |q, now| {
            Ok(steps::move_to_wait(q, job_id, token, now))
        })
    }
}
