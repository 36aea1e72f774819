//! The worker scripts, assembled from the crate's `lua/` directory at compile time.
//!
//! Every worker script starts with the shared helpers the producer and admin scripts use too
//! (scores, events, queue gates, markers, enqueueing, job keys), then `worker_common.lua`.

use crate::lua_script;

lua_script!(pub(crate) static FETCH_BATCH = "worker_fetch_batch":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "includes/worker_dedup.lua", "includes/scheduler_store.lua", "includes/scheduler_next.lua",
    "includes/worker_fetch.lua", "worker_fetch_batch.lua");
lua_script!(pub(crate) static FINISH_BATCH = "worker_finish_batch":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "includes/worker_dedup.lua", "includes/scheduler_store.lua", "includes/scheduler_next.lua",
    "includes/worker_fetch.lua", "includes/worker_retention.lua", "includes/worker_flow.lua",
    "worker_finish_batch.lua");
lua_script!(pub(crate) static EXTEND_LOCKS = "worker_extend_locks":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "worker_extend_locks.lua");
lua_script!(pub(crate) static MOVE_STALLED = "worker_move_stalled":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "includes/worker_dedup.lua", "worker_move_stalled.lua");
lua_script!(pub(crate) static MOVE_TO_WAITING_CHILDREN = "worker_move_to_waiting_children":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "worker_move_to_waiting_children.lua");
lua_script!(pub(crate) static MOVE_TO_WAIT = "worker_move_to_wait":
    "includes/scores.lua", "includes/events.lua", "includes/gates.lua", "includes/markers.lua",
    "includes/enqueue.lua", "includes/job_keys.lua", "includes/worker_common.lua",
    "worker_move_to_wait.lua");
