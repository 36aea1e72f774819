//! What a backend may decline: [`Capability`], the set a backend offers ([`Capabilities`]),
//! and [`BackendName`], which every store with optional methods implements so that a declined
//! call can say whose it was.
//!
//! The seam has a **required core** (adding jobs, the queue's counts, ranges, states and jobs,
//! pause and resume, removing a job, a job's own updates, and the worker's fetch, finish,
//! locks, stalled check and wait; opening the stores) and **optional** methods, grouped in the
//! capabilities below. Every optional method has a default body that returns
//! [`BackendError::Unsupported`](crate::BackendError::Unsupported) naming its capability and
//! the store's [`BackendName::backend_name`], so a backend that declines, say, job schedulers
//! writes only
//!
//! ```
//! use bullmq_backend::{BackendName, JobSchedulers};
//!
//! struct MyStore;
//!
//! impl BackendName for MyStore {
//!     fn backend_name(&self) -> &'static str {
//!         "my-store"
//!     }
//! }
//!
//! impl JobSchedulers for MyStore {}
//! ```
//!
//! and a caller gets a typed error ("the my-store backend does not support job schedulers"),
//! never a panic or a silent no-op. [`Backend::capabilities`](crate::Backend::capabilities)
//! says up front which capabilities a backend offers (for the CLI, docs and tests).
//!
//! The required core, the methods without a default body:
//!
//! - [`BackendName::backend_name`], on the backend and on each store;
//! - [`Backend`](crate::Backend): `queue_store`, `worker_store`, `event_stream`,
//!   `event_publisher`;
//! - [`Producer`](crate::Producer): `add`, `add_bulk`; [`JobUpdates`](crate::JobUpdates):
//!   `update_progress`, `add_log`, `update_data`;
//! - [`QueueAdmin`](crate::QueueAdmin): `set_meta`, `get_meta`, `get_counts`, `get_ranges`,
//!   `get_state`, `get_job`, `job_end`, `pause`, `resume`, `is_paused`, `remove_job`;
//!   [`QueueStore`](crate::QueueStore): `queue_name`, `close`;
//! - [`WorkerStore`](crate::WorkerStore): `queue_name`, `fetch_batch`, `finish_batch`,
//!   `extend_locks`, `check_stalled`, `wait_for_job`, `close`;
//! - [`EventStream`](crate::EventStream) and [`EventPublisher`](crate::EventPublisher): all.
//!
//! Why a required name on a supertrait rather than a default `"this backend"`: a default body
//! has only `&self` of its own trait, so the name must be reachable from each store trait, and
//! a message that names the backend ("the postgres backend does not support …") is worth the
//! three lines each store type pays. The stores of a `QueueStore` are one value, so it
//! implements `BackendName` once for all of its traits.

/// One optional part of the seam a backend may decline. Each variant lists the seam methods
/// it covers; a declined method returns
/// [`BackendError::Unsupported`](crate::BackendError::Unsupported) with it.
///
/// ```
/// use bullmq_backend::Capability;
/// assert_eq!(Capability::Schedulers.to_string(), "job schedulers");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Capability {
    /// Flows: adding and reading a tree of jobs ([`FlowStore::add_flow`],
    /// [`FlowStore::read_node`]) and a parent's view of its children ([`JobFlows`], on the
    /// queue's and the worker's store).
    ///
    /// [`FlowStore::add_flow`]: crate::FlowStore::add_flow
    /// [`FlowStore::read_node`]: crate::FlowStore::read_node
    /// [`JobFlows`]: crate::JobFlows
    Flows,
    /// Job schedulers: every [`JobSchedulers`](crate::JobSchedulers) method and
    /// [`WorkerStore::schedule_next_iteration`](crate::WorkerStore::schedule_next_iteration).
    Schedulers,
    /// Moving jobs by hand: every [`JobControl`](crate::JobControl) method but `clear_logs`
    /// (retry, promote, change priority or delay, extend one lock).
    JobControl,
    /// A queue's limits and bookkeeping: every [`QueueControl`](crate::QueueControl) method
    /// but `trim_events` (global concurrency, global rate limit, the rate limiter,
    /// deduplication ids, counts per priority).
    QueueControl,
    /// Queue and job upkeep: every [`QueueMaintenance`](crate::QueueMaintenance) method.
    Maintenance,
    /// Reading and clearing a job's log: [`QueueAdmin::get_job_logs`] and
    /// [`JobControl::clear_logs`] (appending, [`JobUpdates::add_log`], is core).
    ///
    /// [`QueueAdmin::get_job_logs`]: crate::QueueAdmin::get_job_logs
    /// [`JobControl::clear_logs`]: crate::JobControl::clear_logs
    /// [`JobUpdates::add_log`]: crate::JobUpdates::add_log
    Logs,
    /// Node's per-minute metrics: [`QueueAdmin::get_metrics`](crate::QueueAdmin::get_metrics)
    /// (a backend without them ignores
    /// [`WorkerStoreOptions::metrics_max_points`](crate::WorkerStoreOptions::metrics_max_points)).
    Metrics,
    /// Removing jobs in bulk: [`QueueAdmin::drain`], [`QueueAdmin::clean`] and
    /// [`QueueAdmin::obliterate_batch`].
    ///
    /// [`QueueAdmin::drain`]: crate::QueueAdmin::drain
    /// [`QueueAdmin::clean`]: crate::QueueAdmin::clean
    /// [`QueueAdmin::obliterate_batch`]: crate::QueueAdmin::obliterate_batch
    Cleanup,
    /// A running job's own moves (step jobs):
    /// [`WorkerStore::move_to_waiting_children`] and [`WorkerStore::move_to_wait`].
    ///
    /// [`WorkerStore::move_to_waiting_children`]: crate::WorkerStore::move_to_waiting_children
    /// [`WorkerStore::move_to_wait`]: crate::WorkerStore::move_to_wait
    Steps,
    /// Trimming the event log by hand:
    /// [`QueueControl::trim_events`](crate::QueueControl::trim_events).
    EventTrimming,
    /// Listing the workers connected to a queue:
    /// [`QueueStore::list_workers`](crate::QueueStore::list_workers).
    WorkerListing,
    /// Listing the queues of a namespace: [`Backend::list_queues`](crate::Backend::list_queues).
    QueueDiscovery,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 12] = [
        Capability::Flows,
        Capability::Schedulers,
        Capability::JobControl,
        Capability::QueueControl,
        Capability::Maintenance,
        Capability::Logs,
        Capability::Metrics,
        Capability::Cleanup,
        Capability::Steps,
        Capability::EventTrimming,
        Capability::WorkerListing,
        Capability::QueueDiscovery,
    ];

    /// The capability in words, as error messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Flows => "flows",
            Capability::Schedulers => "job schedulers",
            Capability::JobControl => "job control",
            Capability::QueueControl => "queue control",
            Capability::Maintenance => "queue maintenance",
            Capability::Logs => "job logs",
            Capability::Metrics => "metrics",
            Capability::Cleanup => "drain, clean and obliterate",
            Capability::Steps => "step moves (move_to_waiting_children, move_to_wait)",
            Capability::EventTrimming => "event trimming",
            Capability::WorkerListing => "worker listing",
            Capability::QueueDiscovery => "queue discovery",
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The optional capabilities a backend offers, one flag per [`Capability`]; the required core
/// is always there and has no flag. [`Default`] (and [`Capabilities::none`]) is the core only.
///
/// ```
/// use bullmq_backend::{Capabilities, Capability};
/// let caps = Capabilities::none().with(Capability::Flows);
/// assert!(caps.supports(Capability::Flows));
/// assert!(!caps.supports(Capability::Schedulers));
/// assert!(Capabilities::all().supports(Capability::QueueDiscovery));
/// assert_eq!(Capabilities::default(), Capabilities::none());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Capabilities {
    /// [`Capability::Flows`].
    pub flows: bool,
    /// [`Capability::Schedulers`].
    pub schedulers: bool,
    /// [`Capability::JobControl`].
    pub job_control: bool,
    /// [`Capability::QueueControl`].
    pub queue_control: bool,
    /// [`Capability::Maintenance`].
    pub maintenance: bool,
    /// [`Capability::Logs`].
    pub logs: bool,
    /// [`Capability::Metrics`].
    pub metrics: bool,
    /// [`Capability::Cleanup`].
    pub cleanup: bool,
    /// [`Capability::Steps`].
    pub steps: bool,
    /// [`Capability::EventTrimming`].
    pub event_trimming: bool,
    /// [`Capability::WorkerListing`].
    pub worker_listing: bool,
    /// [`Capability::QueueDiscovery`].
    pub queue_discovery: bool,
}

impl Capabilities {
    /// The required core only: every optional capability declined.
    pub const fn none() -> Self {
        Self {
            flows: false,
            schedulers: false,
            job_control: false,
            queue_control: false,
            maintenance: false,
            logs: false,
            metrics: false,
            cleanup: false,
            steps: false,
            event_trimming: false,
            worker_listing: false,
            queue_discovery: false,
        }
    }

    /// Every capability.
    pub const fn all() -> Self {
        Self {
            flows: true,
            schedulers: true,
            job_control: true,
            queue_control: true,
            maintenance: true,
            logs: true,
            metrics: true,
            cleanup: true,
            steps: true,
            event_trimming: true,
            worker_listing: true,
            queue_discovery: true,
        }
    }

    fn flag(&mut self, capability: Capability) -> &mut bool {
        match capability {
            Capability::Flows => &mut self.flows,
            Capability::Schedulers => &mut self.schedulers,
            Capability::JobControl => &mut self.job_control,
            Capability::QueueControl => &mut self.queue_control,
            Capability::Maintenance => &mut self.maintenance,
            Capability::Logs => &mut self.logs,
            Capability::Metrics => &mut self.metrics,
            Capability::Cleanup => &mut self.cleanup,
            Capability::Steps => &mut self.steps,
            Capability::EventTrimming => &mut self.event_trimming,
            Capability::WorkerListing => &mut self.worker_listing,
            Capability::QueueDiscovery => &mut self.queue_discovery,
        }
    }

    /// Whether `capability` is offered.
    pub fn supports(mut self, capability: Capability) -> bool {
        *self.flag(capability)
    }

    /// With `capability` offered.
    #[must_use]
    pub fn with(mut self, capability: Capability) -> Self {
        *self.flag(capability) = true;
        self
    }

    /// With `capability` declined.
    #[must_use]
    pub fn without(mut self, capability: Capability) -> Self {
        *self.flag(capability) = false;
        self
    }

    /// The capabilities offered, in [`Capability::ALL`]'s order.
    pub fn offered(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |capability| self.supports(*capability))
    }
}

/// Which backend a store (or a [`Backend`](crate::Backend)) belongs to: the name a declined
/// call reports in [`BackendError::Unsupported`](crate::BackendError::Unsupported).
///
/// The base of every seam trait with optional methods (the traits behind
/// [`QueueStore`](crate::QueueStore), [`WorkerStore`](crate::WorkerStore),
/// [`FlowStore`](crate::FlowStore) and [`Backend`](crate::Backend)), so a default body can
/// name its backend. One short lowercase name per backend: `"redis"`, `"memory"`,
/// `"postgres"`. Wrappers (a tracing store) forward their inner store's name.
pub trait BackendName: Send + Sync + 'static {
    /// The backend's short name (`"redis"`, `"memory"`).
    fn backend_name(&self) -> &'static str;
}

impl<T: BackendName + ?Sized> BackendName for std::sync::Arc<T> {
    fn backend_name(&self) -> &'static str {
        (**self).backend_name()
    }
}

/// The error of a declined call: `capability` is not offered by `store`'s backend. What
/// every default body of an optional seam method returns.
pub fn unsupported<T>(
    store: &(impl BackendName + ?Sized),
    capability: Capability,
) -> crate::BackendResult<T> {
    Err(crate::BackendError::Unsupported {
        capability,
        backend: store.backend_name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        BackendError, FlowStore, JobControl, JobFlows, JobSchedulers, QueueControl,
        QueueMaintenance,
    };

    /// A store that declines every optional trait with empty impls.
    struct Declining;

    impl BackendName for Declining {
        fn backend_name(&self) -> &'static str {
            "declining"
        }
    }

    impl JobFlows for Declining {}
    impl JobSchedulers for Declining {}
    impl QueueControl for Declining {}
    impl JobControl for Declining {}
    impl QueueMaintenance for Declining {}

    #[async_trait::async_trait]
    impl FlowStore for Declining {
        async fn close(&self) -> crate::BackendResult<()> {
            Ok(())
        }
    }

    fn declined<T: std::fmt::Debug>(result: crate::BackendResult<T>) -> (Capability, String) {
        match result {
            Err(error @ BackendError::Unsupported { backend, .. }) => {
                assert_eq!(backend, "declining");
                (
                    error.unsupported_capability().expect("a capability"),
                    error.to_string(),
                )
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn empty_impls_decline_with_the_capability_and_the_backend() {
        let store = Declining;
        assert_eq!(
            declined(store.get_dependencies("1").await),
            (
                Capability::Flows,
                "the declining backend does not support flows".to_owned()
            )
        );
        assert_eq!(
            declined(store.get_job_schedulers_count().await).0,
            Capability::Schedulers
        );
        assert_eq!(declined(store.is_maxed().await).0, Capability::QueueControl);
        assert_eq!(
            declined(store.trim_events(10).await).0,
            Capability::EventTrimming
        );
        assert_eq!(
            declined(store.promote_job("1").await).0,
            Capability::JobControl
        );
        assert_eq!(declined(store.clear_logs("1", 0).await).0, Capability::Logs);
        assert_eq!(
            declined(store.remove_orphaned_jobs(10, 0).await).0,
            Capability::Maintenance
        );
        assert_eq!(declined(store.add_flow(&[]).await).0, Capability::Flows);
        // Through an `Arc<dyn …>`, as the runtime holds stores.
        let shared: std::sync::Arc<dyn JobSchedulers> = std::sync::Arc::new(Declining);
        assert_eq!(
            declined(shared.remove_job_scheduler("s").await).0,
            Capability::Schedulers
        );
    }

    #[test]
    fn every_capability_has_its_flag() {
        for capability in Capability::ALL {
            let only = Capabilities::none().with(capability);
            assert_eq!(only.offered().collect::<Vec<_>>(), [capability]);
            assert!(!Capabilities::all().without(capability).supports(capability));
        }
        assert_eq!(Capabilities::all().offered().count(), Capability::ALL.len());
    }
}
