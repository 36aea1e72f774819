//! The producer and admin scripts, assembled from `lua-scripts/` at compile time.
//!
//! Each script lists the includes it needs, dependencies first (see each include's header).

use crate::lua_script;

lua_script!(pub(crate) static ADD_JOB = "add_job":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/add_to_delayed.lua", "includes/remove_job_keys.lua",
    "includes/deduplicate.lua", "includes/add_job_core.lua", "add_job.lua");
lua_script!(pub(crate) static ADD_JOBS_BULK = "add_jobs_bulk":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/add_to_delayed.lua", "includes/remove_job_keys.lua",
    "includes/deduplicate.lua", "includes/add_job_core.lua", "add_jobs_bulk.lua");
lua_script!(pub(crate) static PAUSE = "pause":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/add_to_wait.lua",
    "includes/add_to_delayed.lua", "pause.lua");
lua_script!(pub(crate) static GET_COUNTS = "get_counts": "get_counts.lua");
lua_script!(pub(crate) static GET_RANGES = "get_ranges": "get_ranges.lua");
lua_script!(pub(crate) static GET_STATE = "get_state": "get_state.lua");
lua_script!(pub(crate) static REMOVE_JOB = "remove_job":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/remove_job_keys.lua", "includes/scheduler_job.lua",
    "includes/remove_job_fully.lua", "remove_job.lua");
lua_script!(pub(crate) static DRAIN = "drain":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/remove_job_keys.lua", "includes/scheduler_job.lua",
    "includes/batches.lua", "includes/remove_job_fully.lua", "drain.lua");
lua_script!(pub(crate) static CLEAN = "clean":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/remove_job_keys.lua", "includes/scheduler_job.lua",
    "includes/batches.lua", "includes/remove_job_fully.lua", "clean.lua");
lua_script!(pub(crate) static OBLITERATE = "obliterate":
    "includes/max_events.lua", "includes/emit_event.lua", "includes/paused.lua",
    "includes/add_to_wait.lua", "includes/remove_job_keys.lua", "includes/batches.lua",
    "includes/remove_job_fully.lua", "obliterate.lua");
lua_script!(pub(crate) static UPDATE_PROGRESS = "update_progress":
    "includes/max_events.lua", "includes/emit_event.lua", "update_progress.lua");
lua_script!(pub(crate) static ADD_LOG = "add_log": "add_log.lua");
lua_script!(pub(crate) static UPDATE_DATA = "update_data": "update_data.lua");
