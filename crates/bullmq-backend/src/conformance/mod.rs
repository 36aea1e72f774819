//! The backend conformance suite: behaviour every [`Backend`] must show, written once against
//! the traits and run against each backend.
//!
//! Each case is a public async function taking the backend and a queue name no other test
//! uses ([`unique_queue_name`]); it panics (with a message naming the behaviour) when the
//! backend does not behave as the Redis backend — Node BullMQ's behaviour — does. Cases wait
//! for expiries with real sleeps and generous margins and never assert on speed, so they hold
//! on a slow shared machine.
//!
//! [`differential::backends_agree`] runs the same pseudo-random operations on two backends
//! and compares them step by step (the Redis backend's tests compare the memory backend with
//! it).
//!
//! A backend's test file runs them all with [`conformance_tests!`](crate::conformance_tests),
//! which expands to one `#[tokio::test]` per case (the file needs tokio as a dev-dependency).
//! The memory backend's, `tests/conformance_memory.rs`, compiled and run by this crate's tests,
//! is this whole file:
//!
//! ```text
//! use std::sync::Arc;
//!
//! use bullmq_backend::memory::MemoryBackend;
//!
//! bullmq_backend::conformance_tests!(async { Arc::new(MemoryBackend::new()) });
//! ```

mod admin;
mod capabilities;
pub mod differential;
mod events;
mod flows_add;
mod job_control;
mod jobs;
mod maintenance;
mod modes;
mod profile;
mod queue_control;
mod schedulers;
mod steps;
mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::state::JobState;

use crate::{
    AddResult, Backend, EventEntry, EventStream, FetchRequest, Fetched, FetchedJob, Finish,
    FinishAction, FinishCode, NewJob, QueueId, QueueStore, Receipt, Retention, WorkerStore,
    WorkerStoreOptions,
};

pub use admin::{
    clean_removes_old_finished_jobs, drain_removes_waiting_jobs, logs_progress_and_data,
    metrics_count_finished_jobs, obliterate_deletes_a_paused_queue, remove_job_by_id,
};
pub use capabilities::{
    declined_capabilities_answer_unsupported, list_queues_finds_a_queue_with_jobs,
    list_workers_finds_open_worker_stores,
};
pub use events::{
    event_log_read_from_a_cursor, event_log_trimmed_to_max_len, publish_custom_event,
};
pub use flows_add::{
    flow_add_attaches_existing_children, flow_add_places_parents_and_children,
    flow_add_refusals_write_nothing, flow_read_node_lists_children,
    flow_remove_with_or_without_children,
};
pub use job_control::{
    change_delay_reschedules_a_delayed_job, change_priority_requeues_a_waiting_job,
    clear_logs_keeps_the_newest, extend_lock_checks_the_token,
    promote_jobs_moves_delayed_jobs_in_batches, promote_moves_a_delayed_job_now,
    retry_jobs_moves_finished_jobs_in_batches, retry_moves_a_finished_job_back,
};
pub use jobs::{
    add_and_read_back, bulk_add_keeps_order, custom_id_duplicate, deduplication_ttl_expires,
    deduplication_window_and_release, delayed_job_promoted_when_due, priorities_and_lifo_order,
};
pub use maintenance::maintenance_children_dedup_and_counts;
pub use modes::{
    deduplication_extend, deduplication_modes, flow_children_block_parent_completion,
    flow_failed_child_refuses_parent_completion, retention_by_age, retry_placement,
};
pub(crate) use profile::profile;
pub use profile::{with_profile, Profile};
pub use queue_control::{queue_control_keys_and_counts, queue_control_limits_gate_fetches};
pub use schedulers::{
    scheduler_cron_next_iteration_by_the_worker, scheduler_cron_run_collision,
    scheduler_every_walks_past_taken_slots, scheduler_iteration_kept_by_drain_and_clean,
    scheduler_listing_and_counts, scheduler_new_interval_resets_the_slot,
    scheduler_next_iteration_from_the_current_one_only,
    scheduler_offset_and_start_date_delay_the_first_run,
    scheduler_remove_deletes_scheduler_and_delayed_iteration,
    scheduler_upsert_creates_scheduler_and_iteration, scheduler_upsert_replaces_pending_iteration,
    scheduler_upsert_while_iteration_runs,
};
pub use steps::{
    step_job_moves_back_to_wait, step_job_waits_for_its_children,
    step_job_with_a_failed_child_cannot_wait,
};
pub use worker::{
    complete_with_retention, extend_locks_renews_own_locks, fetch_locks_and_counts_attempts,
    fetch_with_exact_token, finish_and_fetch_in_one_call, lock_checks_on_finish, pause_gates_fetch,
    rate_limits, retry_backoff_delay, retry_then_fail_with_retries_exhausted,
    stalled_jobs_recovered, wait_for_job_woken_by_add,
};

/// Runs every conformance case as its own `#[tokio::test]` against the backend `$make`
/// builds: an expression of a future whose output is an `Arc` of a [`Backend`](crate::Backend)
/// (evaluated once per case). The calling crate needs `tokio` (with `macros` and `rt-multi-thread`)
/// as a dev-dependency.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@cases $make;
            add_and_read_back,
            bulk_add_keeps_order,
            custom_id_duplicate,
            deduplication_window_and_release,
            deduplication_ttl_expires,
            deduplication_modes,
            deduplication_extend,
            retry_placement,
            retention_by_age,
            flow_children_block_parent_completion,
            flow_failed_child_refuses_parent_completion,
            flow_add_places_parents_and_children,
            flow_add_attaches_existing_children,
            flow_add_refusals_write_nothing,
            flow_read_node_lists_children,
            flow_remove_with_or_without_children,
            priorities_and_lifo_order,
            delayed_job_promoted_when_due,
            fetch_locks_and_counts_attempts,
            complete_with_retention,
            finish_and_fetch_in_one_call,
            retry_then_fail_with_retries_exhausted,
            retry_backoff_delay,
            lock_checks_on_finish,
            fetch_with_exact_token,
            extend_locks_renews_own_locks,
            stalled_jobs_recovered,
            pause_gates_fetch,
            rate_limits,
            wait_for_job_woken_by_add,
            step_job_waits_for_its_children,
            step_job_with_a_failed_child_cannot_wait,
            step_job_moves_back_to_wait,
            event_log_read_from_a_cursor,
            event_log_trimmed_to_max_len,
            publish_custom_event,
            drain_removes_waiting_jobs,
            clean_removes_old_finished_jobs,
            obliterate_deletes_a_paused_queue,
            remove_job_by_id,
            retry_moves_a_finished_job_back,
            promote_moves_a_delayed_job_now,
            change_priority_requeues_a_waiting_job,
            change_delay_reschedules_a_delayed_job,
            clear_logs_keeps_the_newest,
            retry_jobs_moves_finished_jobs_in_batches,
            promote_jobs_moves_delayed_jobs_in_batches,
            extend_lock_checks_the_token,
            logs_progress_and_data,
            metrics_count_finished_jobs,
            scheduler_upsert_creates_scheduler_and_iteration,
            scheduler_offset_and_start_date_delay_the_first_run,
            scheduler_upsert_replaces_pending_iteration,
            scheduler_new_interval_resets_the_slot,
            scheduler_next_iteration_from_the_current_one_only,
            scheduler_upsert_while_iteration_runs,
            scheduler_remove_deletes_scheduler_and_delayed_iteration,
            scheduler_listing_and_counts,
            scheduler_every_walks_past_taken_slots,
            scheduler_cron_next_iteration_by_the_worker,
            scheduler_cron_run_collision,
            scheduler_iteration_kept_by_drain_and_clean,
            queue_control_limits_gate_fetches,
            queue_control_keys_and_counts,
            maintenance_children_dedup_and_counts,
            declined_capabilities_answer_unsupported,
            list_workers_finds_open_worker_stores,
            list_queues_finds_a_queue_with_jobs
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $crate::conformance_tests!(@cases $make, profile = $crate::conformance::Profile::NODE_REDIS; $($case),*);
    };
    (@cases $make:expr, profile = $profile:expr; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let backend: ::std::sync::Arc<dyn $crate::Backend> = ($make).await;
                let queue = $crate::conformance::unique_queue_name(stringify!($case));
                $crate::conformance::with_profile(
                    $profile,
                    $crate::conformance::$case(backend, &queue),
                )
                .await;
            }
        )*
    };
}

/// A queue name no other test run uses: the case, the process id, the time and a counter.
pub fn unique_queue_name(case: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "conformance-{case}-{}-{}-{n}",
        std::process::id(),
        crate::now_ms()
    )
}

/// The stores of one queue under test.
pub(crate) struct Ctx {
    pub(crate) id: QueueId,
    /// The Redis key names of the queue, for the cases that still assert on them (job keys of
    /// flow children).
    pub(crate) keys: QueueKeys,
    pub(crate) queue: Arc<dyn QueueStore>,
    pub(crate) worker: Arc<dyn WorkerStore>,
    pub(crate) events: Arc<dyn EventStream>,
}

/// Lock duration of fetches that must not expire during a case.
pub(crate) const LONG_LOCK: Duration = Duration::from_secs(30);

impl Ctx {
    pub(crate) async fn new(backend: Arc<dyn Backend>, queue: &str) -> Self {
        Self::with_options(backend, queue, WorkerStoreOptions::default()).await
    }

    pub(crate) async fn with_options(
        backend: Arc<dyn Backend>,
        queue: &str,
        options: WorkerStoreOptions,
    ) -> Self {
        let id = QueueId::new("bull", queue);
        let store = backend.queue_store(&id).await.expect("open queue store");
        let worker = backend
            .worker_store(&id, &options)
            .await
            .expect("open worker store");
        let events = backend.event_stream(&id).await.expect("open event stream");
        Self {
            keys: id.keys(),
            id,
            queue: store,
            worker,
            events,
        }
    }

    /// Job `id` of this queue.
    pub(crate) fn job(&self, id: &str) -> crate::JobRef {
        crate::JobRef::new(self.id.clone(), id)
    }

    /// A link to parent `id` of this queue, registering the child, no flags.
    pub(crate) fn parent_link(&self, id: &str) -> crate::ParentLink {
        crate::ParentLink::new(self.job(id), crate::ParentFlags::default())
    }

    /// Adds a job named `name` with `opts` (JSON); returns its id.
    pub(crate) async fn add(&self, name: &str, opts: &str) -> String {
        self.add_job(NewJob::new(name, r#"{"n":1}"#, opts, crate::now_ms()))
            .await
    }

    pub(crate) async fn add_job(&self, job: NewJob) -> String {
        match self.queue.add(&job).await.expect("add") {
            AddResult::Id(id) => id,
            other => panic!("add returned {other:?}"),
        }
    }

    pub(crate) fn request(&self, count: u32, lock: Duration) -> FetchRequest {
        FetchRequest::new(count, "conformance-worker", lock)
    }

    pub(crate) async fn fetch(&self, count: u32) -> Fetched {
        self.fetch_with(&self.request(count, LONG_LOCK)).await
    }

    pub(crate) async fn fetch_with(&self, request: &FetchRequest) -> Fetched {
        self.worker.fetch_batch(request).await.expect("fetch")
    }

    pub(crate) async fn fetch_one(&self) -> FetchedJob {
        let fetched = self.fetch(1).await;
        assert_eq!(fetched.jobs.len(), 1, "one job fetched: {fetched:?}");
        fetched.jobs.into_iter().next().expect("one job")
    }

    pub(crate) async fn finish(&self, job: &FetchedJob, action: FinishAction) -> FinishCode {
        self.finish_token(&job.id, &job.token, action, job.receipt)
            .await
    }

    pub(crate) async fn finish_token(
        &self,
        id: &str,
        token: &str,
        action: FinishAction,
        receipt: Receipt,
    ) -> FinishCode {
        let finish = Finish {
            job_id: id.to_owned(),
            token: token.to_owned(),
            action,
            receipt,
        };
        let reply = self
            .worker
            .finish_batch(&[finish], None)
            .await
            .expect("finish");
        assert_eq!(reply.codes.len(), 1, "one code per finish: {reply:?}");
        reply.codes[0]
    }

    pub(crate) async fn complete(&self, job: &FetchedJob, keep: Retention) -> FinishCode {
        self.finish(
            job,
            FinishAction::Complete {
                returnvalue: r#"{"ok":1}"#.into(),
                keep,
            },
        )
        .await
    }

    pub(crate) async fn state(&self, id: &str) -> JobState {
        self.queue.get_state(id).await.expect("get_state")
    }

    pub(crate) async fn count(&self, state: JobState) -> u64 {
        self.queue.get_counts(&[state]).await.expect("get_counts")[0]
    }

    /// Every entry of the event log.
    pub(crate) async fn all_events(&self) -> Vec<EventEntry> {
        self.events
            .read("0-0", Duration::from_millis(10), 100_000)
            .await
            .expect("read events")
    }

    /// The fields of every event named `name`, in order.
    pub(crate) async fn events_named(&self, name: &str) -> Vec<HashMap<String, String>> {
        named(&self.all_events().await, name)
    }

    pub(crate) async fn close(&self) {
        self.worker.close().await;
        self.events.close().await;
        let _ = self.queue.close().await;
    }
}

/// The fields of the entries named `name`.
pub(crate) fn named(entries: &[EventEntry], name: &str) -> Vec<HashMap<String, String>> {
    entries
        .iter()
        .filter(|e| {
            e.fields
                .first()
                .is_some_and(|(k, v)| k == "event" && v == name)
        })
        .map(|e| {
            e.fields
                .iter()
                .map(|(k, v)| (k.clone(), rendered(v)))
                .collect()
        })
        .collect()
}

/// A field value with JSON objects and arrays in one rendering (`{"a":1}`): a store may keep
/// JSON in a form of its own (PostgreSQL `jsonb` renders `{"a": 1}`), which says nothing about
/// the value; the exact text Node writes is checked by the interop tests.
pub(crate) fn rendered(value: &str) -> String {
    if value.starts_with('{') || value.starts_with('[') {
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(value) {
            return json.to_string();
        }
    }
    value.to_string()
}

/// An entry's fields as the profile orders them: as written, or sorted by key when the
/// store keeps no order ([`Profile::event_field_order`]).
pub(crate) fn in_profile_order(fields: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.clone(), rendered(v)))
        .collect();
    if !profile().event_field_order {
        out[1..].sort();
    }
    out
}

/// One field map as the test expects it.
pub(crate) fn fields(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Sleeps `ms` milliseconds (real time: backends read the wall clock).
pub(crate) async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
