//! Typed calls of the producer and admin scripts (add, pause, counts, clean, ...).
//!
//! One async function per script. Every function takes the client and the queue's
//! [`QueueKeys`](bullmq_protocol::keys::QueueKeys) and already-encoded JSON where the job hash
//! stores JSON, so this layer never decides what a payload looks like. Script codes that mean
//! "not found", "locked" and so on come back as typed outcomes (e.g. [`RemoveOutcome`]), not
//! errors, so the caller decides what is exceptional.

mod add;
mod admin;
mod discover;
mod flow_add;
mod flows;
mod getters;
mod job_control;
pub(crate) mod maintenance;
pub mod queue_control;
mod reads;
mod reply;
pub(crate) mod schedulers;
mod scripts;
mod updates;
mod workers;

pub use add::{add_job, add_jobs_bulk, AddResult, NewJob, ParentLink};
pub use admin::{
    clean, drain, is_paused, obliterate, obliterate_batch, pause, remove_job, resume,
    ObliterateStep, RemoveOutcome,
};
pub use discover::discover_queues;
pub use flow_add::{add_flow, flow_children};
pub use flows::{
    get_dependencies, get_dependencies_page, get_dependency_counts, DependencyKeys,
    DependencyKeysPage,
};
pub use getters::{
    get_counts, get_job_hash, get_job_logs, get_meta, get_ranges, get_state, set_meta,
    DEFAULT_MAX_LEN_EVENTS, META_VERSION,
};
pub use job_control::{
    change_delay, change_priority, clear_logs, extend_lock, promote_job, promote_jobs, retry_job,
    retry_jobs,
};
pub use reads::{get_metrics, job_end, metrics_data_key, metrics_key};
pub use schedulers::{
    create_next_iteration, get_job_scheduler, get_job_schedulers, get_job_schedulers_from,
    remove_job_scheduler, upsert_job_scheduler,
};
pub use updates::{add_log, update_data, update_progress};
pub use workers::{
    list_queue_events, list_workers, parse_client_list, parse_client_lists,
    parse_queue_events_lists,
};
