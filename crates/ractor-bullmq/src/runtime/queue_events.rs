//! Supervised QueueEvents: readers started under the QueueEventsSupervisor, restarted when they
//! crash and resuming after the last delivered event id.

use std::sync::atomic::Ordering;

use super::runtime::{Branch, Runtime};
use crate::events::{
    probe_connection, QueueEventsArgs, QueueEventsError, QueueEventsHandle, QueueEventsOptions,
};
use crate::supervision::SupervisionError;

impl Runtime {
    /// Starts a QueueEvents reader under the QueueEventsSupervisor (child id `<queue>/<n>`):
    /// restarted when it crashes, resuming after the last delivered event id. Connects once
    /// first, so an unreachable server fails the start as it does for a Worker.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::InvalidOption`] for bad options, [`SupervisionError::StartFailed`]
    /// (also when Redis cannot be reached), [`SupervisionError::NotRunning`].
    pub async fn start_queue_events(
        &self,
        options: QueueEventsOptions,
    ) -> Result<QueueEventsHandle, SupervisionError> {
        let args = QueueEventsArgs::new(options).map_err(SupervisionError::invalid_option)?;
        self.start_queue_events_args(args).await
    }

    /// As [`Runtime::start_queue_events`] from prepared arguments (e.g. with a handler:
    /// [`QueueEventsArgs::with_handler`]).
    ///
    /// # Errors
    ///
    /// As [`Runtime::start_queue_events`].
    pub async fn start_queue_events_args(
        &self,
        args: QueueEventsArgs,
    ) -> Result<QueueEventsHandle, SupervisionError> {
        let id = format!(
            "{}/{}",
            args.options().queue,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        probe_connection(args.options())
            .await
            .map_err(|error| SupervisionError::start_failed(id.clone(), error))?;
        self.start_child_under(Branch::QueueEvents, args.child_spec(id))
            .await?;
        let handle = QueueEventsHandle::from_args(&args);
        if let Ok(mut started) = self.queue_events.lock() {
            started.push(handle.clone());
        }
        Ok(handle)
    }
}

// Defined here rather than in `events` so that `events` does not depend on the Runtime (which
// depends on `events`): the QueueEvents module knows how to be supervised (its child spec), the
// application tree knows where.
impl QueueEventsHandle {
    /// Starts a QueueEvents under the [`Runtime`]'s QueueEventsSupervisor as child `id` (see
    /// [`QueueEventsArgs::child_spec`]): restarted when it crashes, resuming after the last
    /// delivered id with the same subscribers.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::Redis`] when Redis cannot be reached, [`QueueEventsError::Supervisor`]
    /// when the supervisor cannot start it.
    pub async fn start_supervised(
        runtime: &Runtime,
        id: impl Into<String>,
        args: QueueEventsArgs,
    ) -> Result<Self, QueueEventsError> {
        probe_connection(args.options()).await?;
        runtime
            .start_child_under(Branch::QueueEvents, args.child_spec(id))
            .await
            .map_err(QueueEventsError::Supervisor)?;
        Ok(Self::from_args(&args))
    }
}
