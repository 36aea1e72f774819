//! How a Worker runs its in-flight jobs: a supervised task per job (the default) or a linked
//! job actor per job.
//!
//! Both give a job the same guarantees: the processor runs once, a panic becomes a failed
//! attempt with the panic message, the job's cancellation token drops the processor's future
//! (at once for a lost lock or a forced close, after `cancel_grace` for `cancel_job` or a
//! timeout), and the Worker hears how the run ended. They differ in weight: a
//! ractor actor carries its own mailboxes and task (~8 KiB of memory each, measured by
//! `examples/measure_footprint.rs`), a task about 0.5 KiB, which is what lets one Worker hold
//! 10 000 sleeping jobs in a few tens of MB.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::ActorRef;
use tokio::task::AbortHandle;
use tracing::Instrument;

use super::context::JobContext;
use super::job_actor::{panic_message, run};
use super::outcome::Ended;
use super::worker::{Internal, WorkerMsg};
use super::{Job, Processor};

/// How a [`Worker`](super::Worker) runs each in-flight job
/// ([`WorkerOptions::job_runner`](super::WorkerOptions::job_runner)).
///
/// ```
/// use ractor_bullmq::worker::{JobRunner, WorkerOptions};
/// // One ractor actor per job, linked to the Worker, e.g. to see jobs in the actor tree.
/// let opts = WorkerOptions::new().job_runner(JobRunner::Actor);
/// assert_eq!(WorkerOptions::new().job_runner, JobRunner::Task);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobRunner {
    /// A tokio task per job, owned by its Worker: a panic is caught and fails the attempt,
    /// cancellation drops the processor, and the task is aborted if the Worker itself dies.
    /// About 0.5 KiB per job.
    #[default]
    Task,
    /// A [`JobActor`](super::JobActorMsg) per job, `spawn_linked` to its Worker, which turns
    /// the actor's death into a failed attempt. About 8 KiB more per job than a task.
    Actor,
}

/// A job's task: aborted when dropped, so the jobs of a Worker that dies (its state, which
/// holds these, is dropped) stop running with it, as linked actors would.
pub(super) struct JobTask(AbortHandle);

impl Drop for JobTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts `job` on a task that reports how it ended to `worker`.
pub(super) fn spawn_task(
    job: Job,
    context: JobContext,
    processor: Arc<dyn Processor>,
    worker: ActorRef<WorkerMsg>,
    span: tracing::Span,
) -> JobTask {
    let handle = tokio::spawn(async move {
        let job_id = job.id().to_string();
        let token = context.token().to_string();
        // `run` catches the processor's panics; this also catches one raised while its future
        // is dropped (on cancellation), which would otherwise end the task unreported.
        let ended = AssertUnwindSafe(run(job, context, processor).instrument(span))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Ended::Panicked(panic_message(panic.as_ref())));
        // The Worker may already be gone (force close); nothing else to tell then.
        let _ = worker.cast(WorkerMsg::Internal(Internal::job_ended(
            job_id, token, ended,
        )));
    });
    JobTask(handle.abort_handle())
}
