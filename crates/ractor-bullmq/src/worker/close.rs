//! Closing a Worker actor in two steps, the one sequence behind `WorkerHandle::close_timeout`
//! and the supervisor's stop: a graceful close for a first budget (running jobs finish), then
//! `CloseWithin` for what is left (running jobs cancelled, then left to stalled recovery).

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::ActorRef;

use super::worker::{CloseReport, WorkerMsg};

/// How a two-step close ended.
pub(crate) enum CloseOutcome {
    /// The Worker answered, with what it left for stalled recovery.
    Closed(CloseReport),
    /// Neither step was answered in time (the caller decides whether to kill).
    TimedOut,
    /// The actor was gone or stopped answering messages.
    NotRunning,
}

/// Asks `worker` to close gracefully within `graceful` (skipped when zero), then, if that did not
/// complete, to close within `grace()` (evaluated then, so it can take what is left of a
/// deadline), waiting `slack` more for the answer: the Worker answers `CloseWithin` on its own
/// clock even with Redis unresponsive.
pub(crate) async fn close_in_two_steps(
    worker: &ActorRef<WorkerMsg>,
    graceful: Duration,
    grace: impl FnOnce() -> Duration,
    slack: Duration,
) -> CloseOutcome {
    if !graceful.is_zero() {
        let closed = worker
            .call(
                |reply| WorkerMsg::Close {
                    force: false,
                    reply,
                },
                Some(graceful),
            )
            .await;
        match closed {
            Ok(CallResult::Success(report)) => return CloseOutcome::Closed(report),
            Ok(CallResult::Timeout) => {}
            _ => return CloseOutcome::NotRunning,
        }
        tracing::info!(worker = %worker.get_id(), "graceful close budget spent; cancelling running jobs");
    }
    let grace = grace();
    let closed = worker
        .call(
            |reply| WorkerMsg::CloseWithin { grace, reply },
            Some(grace + slack),
        )
        .await;
    match closed {
        Ok(CallResult::Success(report)) => CloseOutcome::Closed(report),
        Ok(CallResult::Timeout) => CloseOutcome::TimedOut,
        _ => CloseOutcome::NotRunning,
    }
}
