//! The stable names of the catalogue, as constants so tests and dashboards-as-code can use
//! them instead of repeating strings.

/// Target of every telemetry event (`tracing` `target:`), for filters such as
/// `RUST_LOG=bullmq=debug`.
pub const TARGET: &str = "bullmq";

/// Span names.
pub mod span_names {
    /// Adding one job (`Queue::add`).
    pub const QUEUE_ADD: &str = "bullmq.queue.add";
    /// Adding jobs in bulk (`Queue::add_bulk`).
    pub const QUEUE_ADD_BULK: &str = "bullmq.queue.add_bulk";
    /// Adding one flow (`FlowProducer::add`).
    pub const FLOW_ADD: &str = "bullmq.flow.add";
    /// Adding flows in bulk (`FlowProducer::add_bulk`).
    pub const FLOW_ADD_BULK: &str = "bullmq.flow.add_bulk";
    /// Reading a flow (`FlowProducer::get_flow`).
    pub const FLOW_GET: &str = "bullmq.flow.get_flow";
    /// One attempt of one job in a worker.
    pub const WORKER_PROCESS: &str = "bullmq.worker.process";
    /// Prefix of the spans around every call through the backend seam (a Worker's, a Queue's
    /// or a FlowProducer's store).
    pub const STORE_PREFIX: &str = "bullmq.store.";
}

/// Values of the `event` field of telemetry events.
pub mod event_names {
    /// A job was added.
    pub const JOB_ADDED: &str = "bullmq.job.added";
    /// A worker started an attempt of a job.
    pub const JOB_STARTED: &str = "bullmq.job.started";
    /// A job completed.
    pub const JOB_COMPLETED: &str = "bullmq.job.completed";
    /// A job failed for good.
    pub const JOB_FAILED: &str = "bullmq.job.failed";
    /// An attempt failed and the job will run again.
    pub const JOB_RETRIED: &str = "bullmq.job.retried";
    /// A processor reported progress.
    pub const JOB_PROGRESS: &str = "bullmq.job.progress";
    /// A processor moved its own job to `waiting-children` or back to `wait` (step jobs):
    /// the attempt ended without a finish.
    pub const JOB_MOVED: &str = "bullmq.job.moved";
    /// A running job's token was cancelled on request (`cancel_job`) or by its timeout; the
    /// attempt fails with `reason`.
    pub const JOB_CANCELLED: &str = "bullmq.job.cancelled";
    /// A worker started.
    pub const WORKER_STARTED: &str = "bullmq.worker.started";
    /// A worker stopped.
    pub const WORKER_STOPPED: &str = "bullmq.worker.stopped";
    /// A worker's concurrency was changed at run time.
    pub const WORKER_CONCURRENCY_CHANGED: &str = "bullmq.worker.concurrency_changed";
    /// A stalled-jobs check ran.
    pub const STALLED_CHECK: &str = "bullmq.worker.stalled_check";
    /// The queue was paused.
    pub const QUEUE_PAUSED: &str = "bullmq.queue.paused";
    /// The queue was resumed.
    pub const QUEUE_RESUMED: &str = "bullmq.queue.resumed";
    /// An admin drained the queue (`Queue::drain`: waiting and delayed jobs removed).
    pub const QUEUE_DRAINED: &str = "bullmq.queue.drained";
    /// A worker's fetch found no job to run (Node's Worker `drained` event); once until a
    /// fetch finds jobs again.
    pub const WORKER_QUEUE_EMPTY: &str = "bullmq.worker.queue_empty";
    /// The queue's rate limit was reached.
    pub const RATE_LIMIT_HIT: &str = "bullmq.rate_limit.hit";
    /// The store refused to record how a job ended.
    pub const JOB_FINISH_REFUSED: &str = "bullmq.job.finish_refused";

    /// A connection to the backend was lost (once per outage, not per retry).
    pub const CONNECTION_LOST: &str = "bullmq.connection.lost";
    /// A lost connection works again.
    pub const CONNECTION_RESTORED: &str = "bullmq.connection.restored";
    /// A Worker's store calls made no progress for longer than its `progress_timeout`: it
    /// stops with an error so its supervisor restarts it on fresh connections.
    pub const WORKER_STUCK: &str = "bullmq.worker.stuck";

    /// Every event name, in catalogue order.
    pub const ALL: [&str; 21] = [
        JOB_ADDED,
        JOB_STARTED,
        JOB_COMPLETED,
        JOB_FAILED,
        JOB_RETRIED,
        JOB_PROGRESS,
        JOB_MOVED,
        JOB_CANCELLED,
        WORKER_STARTED,
        WORKER_STOPPED,
        WORKER_CONCURRENCY_CHANGED,
        STALLED_CHECK,
        WORKER_QUEUE_EMPTY,
        QUEUE_PAUSED,
        QUEUE_RESUMED,
        QUEUE_DRAINED,
        RATE_LIMIT_HIT,
        JOB_FINISH_REFUSED,
        CONNECTION_LOST,
        CONNECTION_RESTORED,
        WORKER_STUCK,
    ];
}

/// Metric names (through the `metrics` facade).
pub mod metric_names {
    /// Counter: jobs added (`queue`, `job_name`).
    pub const JOBS_ADDED: &str = "bullmq_jobs_added_total";
    /// Counter: jobs completed (`queue`, `job_name`).
    pub const JOBS_COMPLETED: &str = "bullmq_jobs_completed_total";
    /// Counter: jobs failed for good (`queue`, `job_name`).
    pub const JOBS_FAILED: &str = "bullmq_jobs_failed_total";
    /// Counter: failed attempts that will be retried (`queue`, `job_name`).
    pub const JOBS_RETRIED: &str = "bullmq_jobs_retried_total";
    /// Counter: jobs found stalled (`queue`, `outcome` = `recovered` | `failed`).
    pub const JOBS_STALLED: &str = "bullmq_jobs_stalled_total";
    /// Counter: rate limit hits (`queue`).
    pub const RATE_LIMIT_HITS: &str = "bullmq_rate_limit_hits_total";
    /// Histogram: processing time of one attempt, seconds (`queue`, `job_name`, `status`).
    pub const JOB_DURATION: &str = "bullmq_job_duration_seconds";
    /// Histogram: time from ready to started, seconds (`queue`, `job_name`).
    pub const JOB_WAIT: &str = "bullmq_job_wait_seconds";
    /// Gauge: attempts being processed in this process (`queue`).
    pub const WORKER_ACTIVE_JOBS: &str = "bullmq_worker_active_jobs";
    /// Gauge: running workers in this process (`queue`).
    pub const WORKERS: &str = "bullmq_workers";
    /// Gauge: jobs of the queue in one state, set by `Queue::record_job_counts_metric`
    /// (`queue`, `state`).
    pub const QUEUE_JOBS: &str = "bullmq_queue_jobs";

    /// Every metric name, in catalogue order.
    pub const ALL: [&str; 11] = [
        JOBS_ADDED,
        JOBS_COMPLETED,
        JOBS_FAILED,
        JOBS_RETRIED,
        JOBS_STALLED,
        RATE_LIMIT_HITS,
        JOB_DURATION,
        JOB_WAIT,
        WORKER_ACTIVE_JOBS,
        WORKERS,
        QUEUE_JOBS,
    ];
}
