//! The job actor: runs the user's processor for one in-flight job.
//!
//! Spawned linked to its Worker, one per job. It runs the processor once, catching a panic
//! into a failure with the panic message, and racing it against the job's cancellation token
//! (lock lost or force close: the processor's future is dropped at once; `cancel_job` or the
//! attempt's timeout: after the worker's `cancel_grace`). It then reports how the run
//! [`Ended`] to the Worker and stops. If the actor itself dies without reporting, the Worker's
//! supervision handler records the job as panicked, so the job is never forgotten.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tracing::Instrument;

use super::context::JobContext;
use super::outcome::{Cancellation, Ended};
use super::worker::{Internal, WorkerMsg};
use super::{Job, Processor};

/// Messages of the job actor (it only tells itself to start).
#[derive(Debug)]
pub enum JobActorMsg {
    /// Run the processor (sent by the actor to itself once started).
    Run,
}

/// Start arguments.
pub(crate) struct JobActorArgs {
    pub(crate) job: Job,
    pub(crate) context: JobContext,
    pub(crate) processor: Arc<dyn Processor>,
    pub(crate) worker: ActorRef<WorkerMsg>,
    /// The attempt's `bullmq.worker.process` span; the processor runs inside it.
    pub(crate) span: tracing::Span,
}

/// State: the arguments until the run takes them.
pub(crate) struct JobActorState {
    args: Option<JobActorArgs>,
}

/// The job actor.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JobActor;

impl Actor for JobActor {
    type Msg = JobActorMsg;
    type State = JobActorState;
    type Arguments = JobActorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.cast(JobActorMsg::Run)?;
        Ok(JobActorState { args: Some(args) })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let JobActorMsg::Run = message;
        let Some(args) = state.args.take() else {
            return Ok(());
        };
        let job_id = args.job.id().to_string();
        let token = args.context.token().to_string();
        let ended = run(args.job, args.context, args.processor)
            .instrument(args.span)
            .await;
        // The Worker may already be gone (force close); nothing else to tell then.
        let _ = args.worker.cast(WorkerMsg::Internal(Internal::job_ended(
            job_id, token, ended,
        )));
        myself.stop(None);
        Ok(())
    }
}

/// Runs the processor: catches panics, stops at cancellation. Also what
/// `testing::run_processor` runs, so unit tests see the worker's behaviour.
///
/// A hard cancellation (lock lost, forced close) drops the processor at once. The attempt's
/// timeout, when it has one, cancels the token softly ([`CancelReason::TimedOut`](super::CancelReason::TimedOut)); a soft
/// cancellation (also `cancel_job`) leaves the processor its grace period to return before it
/// is dropped. What is recorded for a soft cancellation does not depend on which came first:
/// `classify` fails the attempt with the cancellation's message.
pub(crate) async fn run(job: Job, context: JobContext, processor: Arc<dyn Processor>) -> Ended {
    let token = context.cancellation_token().clone();
    let hard = context.hard_token().clone();
    let limits = context.limits();
    let timeout = async {
        match limits.timeout {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    let work = AssertUnwindSafe(processor.process(job, context.clone())).catch_unwind();
    tokio::pin!(work, timeout);
    let ended = |result: std::thread::Result<anyhow::Result<Value>>| match result {
        Ok(returned) => Ended::Returned(returned),
        Err(panic) => Ended::Panicked(panic_message(panic.as_ref())),
    };
    tokio::select! {
        biased;
        () = token.cancelled() => {}
        () = &mut timeout => {
            if let Some(after) = limits.timeout {
                context.cancel_with(Cancellation::timed_out(after));
            }
        }
        result = &mut work => return ended(result),
    }
    tokio::select! {
        biased;
        () = hard.cancelled() => Ended::Cancelled,
        () = tokio::time::sleep(limits.grace) => Ended::Cancelled,
        result = &mut work => ended(result),
    }
}

/// The text of a panic payload (`panic!("...")` gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "processor panicked with a non-string payload".to_string()
    }
}
