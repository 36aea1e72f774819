//! The worker scripts, assembled from `lua-scripts/` at compile time.

use crate::lua_script;

lua_script!(pub(crate) static FETCH_BATCH = "worker_fetch_batch":
    "includes/worker_common.lua", "includes/worker_dedup.lua", "includes/worker_fetch.lua",
    "worker_fetch_batch.lua");
lua_script!(pub(crate) static FINISH_BATCH = "worker_finish_batch":
    "includes/worker_common.lua", "includes/worker_dedup.lua", "includes/worker_fetch.lua",
    "includes/worker_retention.lua", "includes/worker_flow.lua", "worker_finish_batch.lua");
lua_script!(pub(crate) static EXTEND_LOCKS = "worker_extend_locks":
    "includes/worker_common.lua", "worker_extend_locks.lua");
lua_script!(pub(crate) static MOVE_STALLED = "worker_move_stalled":
    "includes/worker_common.lua", "includes/worker_dedup.lua", "worker_move_stalled.lua");
