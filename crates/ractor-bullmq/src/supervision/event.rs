//! Events supervisors publish so escalations are observable instead of silent deaths.

use std::time::Duration;

/// One thing a supervisor did. A supervisor given a `tokio::sync::broadcast` sender with
/// [`SupervisorOptions::events`](super::SupervisorOptions::events) sends it every such event;
/// an application tree (the crate's `Runtime`) gives all its supervisors one sender, so one
/// subscription sees the whole tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeEvent {
    /// A child was started for the first time.
    ChildStarted {
        /// The supervisor's name.
        supervisor: String,
        /// The child's id.
        child: String,
    },
    /// A child exited and was started again.
    ChildRestarted {
        /// The supervisor's name.
        supervisor: String,
        /// The child's id.
        child: String,
        /// Why the restart happened: the exit reason of the child (or of the sibling whose exit
        /// made a `OneForAll`/`RestForOne` supervisor restart this one).
        reason: String,
        /// How many times this child has been restarted so far.
        restarts: u32,
        /// The backoff waited before re-spawning.
        delay: Duration,
    },
    /// A child exited and, by its restart policy, was not restarted.
    ChildExited {
        /// The supervisor's name.
        supervisor: String,
        /// The child's id.
        child: String,
        /// The exit reason.
        reason: String,
    },
    /// A restart attempt failed because the start function failed; it is retried.
    ChildStartFailed {
        /// The supervisor's name.
        supervisor: String,
        /// The child's id.
        child: String,
        /// The spawn error, rendered.
        error: String,
    },
    /// A child did not stop within its shutdown timeout and was killed.
    ChildKilled {
        /// The supervisor's name.
        supervisor: String,
        /// The child's id.
        child: String,
    },
    /// Restart intensity exceeded: the supervisor stopped all its children and failed, so its
    /// own parent sees an `ActorFailed`.
    SupervisorGaveUp {
        /// The supervisor's name.
        supervisor: String,
        /// The child whose exit exhausted the budget.
        child: String,
        /// The child's last exit reason.
        reason: String,
        /// The configured `max_restarts`.
        max_restarts: u32,
        /// The configured window.
        period: Duration,
    },
}
