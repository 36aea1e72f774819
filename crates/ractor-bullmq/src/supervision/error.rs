//! Errors of the supervision module.

use std::time::Duration;

/// What can go wrong when talking to or running a supervisor.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SupervisionError {
    /// `start_child` was given an id that a running or restarting child already has.
    #[error("supervisor `{supervisor}` already has a child with id `{id}`")]
    DuplicateChild {
        /// The supervisor's name.
        supervisor: String,
        /// The conflicting id.
        id: String,
    },
    /// No child with this id.
    #[error("supervisor `{supervisor}` has no child with id `{id}`")]
    UnknownChild {
        /// The supervisor's name.
        supervisor: String,
        /// The id asked for.
        id: String,
    },
    /// The child's start function failed (its `pre_start` errored or panicked).
    #[error("child `{id}` failed to start: {reason}")]
    StartFailed {
        /// The child's id.
        id: String,
        /// The spawn error, rendered.
        reason: String,
    },
    /// The start function returned an actor linked to another supervisor.
    #[error("child `{id}` was not linked to its supervisor; spawn it with `spawn_linked(.., supervisor)`")]
    NotLinked {
        /// The child's id.
        id: String,
    },
    /// The supervisor actor is not running (stopped, gave up, or being restarted).
    #[error("supervisor `{0}` is not running")]
    NotRunning(String),
    /// Restart intensity exceeded: the supervisor stopped its children and itself.
    #[error(
        "supervisor `{supervisor}` gave up: child `{child}` needed a restart beyond \
         {max_restarts} restarts within {period:?}"
    )]
    GaveUp {
        /// The supervisor's name.
        supervisor: String,
        /// The child whose exit exhausted the budget.
        child: String,
        /// The configured `max_restarts`.
        max_restarts: u32,
        /// The configured window.
        period: Duration,
    },
    /// A configuration (worker options, manager bounds) is invalid; nothing was started.
    #[error("invalid configuration: {0}")]
    InvalidOption(String),
    /// A child started but could not be used as asked (e.g. its queue could not be opened).
    #[error("{0}")]
    Failed(String),
    /// A graceful shutdown did not finish in time; the remaining actors were killed.
    #[error("shutdown did not finish within {0:?}; remaining actors were killed")]
    ShutdownTimedOut(Duration),
}
