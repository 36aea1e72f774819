//! The producer and admin scripts, assembled from the crate's `lua/` directory at compile time.
//!
//! Each script lists the includes it needs, dependencies first (see each include's header).
//! The shared helpers (`scores`, `events`, `gates`, `markers`, `enqueue`, `job_keys`) are the
//! same files the worker scripts include.

use crate::lua_script;

lua_script!(pub(crate) static ADD_JOB = "add_job":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/deduplicate.lua",
    "includes/add_job_core.lua", "add_job.lua");
lua_script!(pub(crate) static ADD_JOBS_BULK = "add_jobs_bulk":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/deduplicate.lua",
    "includes/add_job_core.lua", "add_jobs_bulk.lua");
lua_script!(pub(crate) static ADD_FLOW = "add_flow":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/deduplicate.lua",
    "includes/add_job_core.lua", "includes/worker_common.lua", "includes/worker_flow.lua",
    "add_flow.lua");
lua_script!(pub(crate) static PAUSE = "pause":
    "includes/scores.lua", "includes/events.lua", "includes/markers.lua", "pause.lua");
lua_script!(pub(crate) static GET_COUNTS = "get_counts": "get_counts.lua");
lua_script!(pub(crate) static GET_RANGES = "get_ranges": "get_ranges.lua");
lua_script!(pub(crate) static GET_STATE = "get_state": "get_state.lua");
lua_script!(pub(crate) static REMOVE_JOB = "remove_job":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/scheduler_job.lua",
    "includes/remove_job_fully.lua", "remove_job.lua");
lua_script!(pub(crate) static DRAIN = "drain":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/scheduler_job.lua",
    "includes/batches.lua", "includes/remove_job_fully.lua", "drain.lua");
lua_script!(pub(crate) static CLEAN = "clean":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/scheduler_job.lua",
    "includes/batches.lua", "includes/remove_job_fully.lua", "clean.lua");
lua_script!(pub(crate) static OBLITERATE = "obliterate":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/batches.lua",
    "includes/remove_job_fully.lua", "obliterate.lua");
lua_script!(pub(crate) static UPDATE_PROGRESS = "update_progress":
    "includes/events.lua", "update_progress.lua");
lua_script!(pub(crate) static ADD_LOG = "add_log": "add_log.lua");
lua_script!(pub(crate) static UPDATE_DATA = "update_data": "update_data.lua");
lua_script!(pub(crate) static ADD_JOB_SCHEDULER = "add_job_scheduler":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/remove_job_fully.lua",
    "includes/scheduler_store.lua", "add_job_scheduler.lua");
lua_script!(pub(crate) static NEXT_SCHEDULER_ITERATION = "next_scheduler_iteration":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/scheduler_store.lua", "includes/scheduler_next.lua",
    "next_scheduler_iteration.lua");
lua_script!(pub(crate) static REMOVE_JOB_SCHEDULER = "remove_job_scheduler":
    "includes/job_keys.lua", "remove_job_scheduler.lua");
lua_script!(pub(crate) static READ_JOB_SCHEDULERS = "read_job_schedulers":
    "read_job_schedulers.lua");
lua_script!(pub(crate) static READ_DEPENDENCIES_PAGE = "read_dependencies_page":
    "read_dependencies_page.lua");
lua_script!(pub(crate) static IS_MAXED = "is_maxed": "is_maxed.lua");
lua_script!(pub(crate) static GET_RATE_LIMIT_TTL = "get_rate_limit_ttl": "get_rate_limit_ttl.lua");
lua_script!(pub(crate) static GET_COUNTS_PER_PRIORITY = "get_counts_per_priority":
    "get_counts_per_priority.lua");
lua_script!(pub(crate) static RETRY_JOB = "retry_job":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/retry_parent.lua", "retry_job.lua");
lua_script!(pub(crate) static MOVE_JOBS_TO_WAIT = "move_jobs_to_wait":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/batches.lua", "includes/retry_parent.lua", "move_jobs_to_wait.lua");
lua_script!(pub(crate) static EXTEND_LOCK = "extend_lock": "extend_lock.lua");
lua_script!(pub(crate) static PROMOTE_JOB = "promote_job":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "promote_job.lua");
lua_script!(pub(crate) static CHANGE_PRIORITY = "change_priority":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "change_priority.lua");
lua_script!(pub(crate) static CHANGE_DELAY = "change_delay":
    "includes/scores.lua", "includes/events.lua", "includes/markers.lua", "change_delay.lua");
lua_script!(pub(crate) static REMOVE_CHILD_DEPENDENCY = "remove_child_dependency":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/remove_job_fully.lua",
    "remove_child_dependency.lua");
lua_script!(pub(crate) static REMOVE_UNPROCESSED_CHILDREN = "remove_unprocessed_children":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/remove_job_fully.lua",
    "remove_unprocessed_children.lua");
lua_script!(pub(crate) static REMOVE_OWNED_DEDUP_KEY = "remove_owned_dedup_key":
    "remove_owned_dedup_key.lua");
lua_script!(pub(crate) static REMOVE_ORPHANED_JOBS = "remove_orphaned_jobs":
    "remove_orphaned_jobs.lua");
