//! The LockManager: keeps the locks of a Worker's in-flight jobs alive.
//!
//! Spawned linked to its Worker. It holds the `(job id, token)` of every tracked job and runs
//! one timer, ticking every `lock_renew_time / 2`; each tick renews, in one store call, every
//! lock not renewed for `lock_renew_time`, in the order the jobs were tracked. Locks that could
//! not be renewed are untracked and reported to the Worker ([`Internal::locks_lost`]), which
//! cancels those jobs; the renewed ones are reported too ([`Internal::locks_renewed`], for the
//! `on_locks_renewed` callback, Node's `locksRenewed` event). A failed call (Redis unreachable)
//! is reported as an error and retried at the next tick.
//!
//! # Supervision
//!
//! If the LockManager dies, the Worker linked to it stops too (its supervisor restarts it with
//! a fresh LockManager); the Worker's jobs are then recovered by a stalled check.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;

use super::worker::{Internal, WorkerMsg};
use crate::store::Store;

/// Messages of the LockManager.
#[derive(Debug)]
pub enum LockManagerMsg {
    /// Start renewing the locks of these jobs, given as `(job id, token)` (one message per
    /// fetched batch).
    Track(Vec<(String, String)>),
    /// Stop renewing these jobs' locks (their finish was recorded, or they were abandoned).
    Untrack(Vec<String>),
    /// Timer tick: renew what is due.
    Tick,
}

/// Start arguments of a LockManager.
///
/// A Worker builds these for its own LockManager; they are public so an embedding application
/// can run the LockManager under its own supervision (it must be linked to the Worker it serves).
pub struct LockManagerArgs {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) lock_duration: Duration,
    pub(crate) renew_time: Duration,
    pub(crate) worker: ActorRef<WorkerMsg>,
}

impl LockManagerArgs {
    /// Locks are extended to `lock_duration` through `store`; each is renewed once it has gone
    /// `renew_time` without renewal; lost locks are reported to `worker`.
    pub fn new(
        store: Arc<dyn Store>,
        lock_duration: Duration,
        renew_time: Duration,
        worker: ActorRef<WorkerMsg>,
    ) -> Self {
        Self {
            store,
            lock_duration,
            renew_time,
            worker,
        }
    }
}

struct Tracked {
    token: String,
    renewed_at: Instant,
    /// When the job was tracked, counted per LockManager: renewals list jobs in this order.
    seq: u64,
}

/// State of a running LockManager (opaque).
pub struct LockManagerState {
    args: LockManagerArgs,
    tracked: HashMap<String, Tracked>,
    /// The next [`Tracked::seq`].
    next_seq: u64,
    timer: Option<JoinHandle<()>>,
}

/// The LockManager actor: one per Worker, linked to it; renews every tracked lock on one timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockManager;

impl Actor for LockManager {
    type Msg = LockManagerMsg;
    type State = LockManagerState;
    type Arguments = LockManagerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let period = (args.renew_time / 2).max(Duration::from_millis(1));
        let timer = myself.send_interval(period, || LockManagerMsg::Tick);
        Ok(LockManagerState {
            args,
            tracked: HashMap::new(),
            next_seq: 0,
            timer: Some(timer),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            LockManagerMsg::Track(jobs) => {
                let renewed_at = Instant::now();
                for (job_id, token) in jobs {
                    let seq = state.next_seq;
                    state.next_seq += 1;
                    state.tracked.insert(
                        job_id,
                        Tracked {
                            token,
                            renewed_at,
                            seq,
                        },
                    );
                }
            }
            LockManagerMsg::Untrack(job_ids) => {
                for job_id in &job_ids {
                    state.tracked.remove(job_id);
                }
            }
            LockManagerMsg::Tick => renew_due(state).await,
        }
        Ok(())
    }
}

/// Renews every lock older than the renew time, in one call, oldest tracked first.
async fn renew_due(state: &mut LockManagerState) {
    let now = Instant::now();
    let mut due: Vec<(u64, String, String)> = state
        .tracked
        .iter()
        .filter(|(_, t)| now.duration_since(t.renewed_at) >= state.args.renew_time)
        .map(|(id, t)| (t.seq, id.clone(), t.token.clone()))
        .collect();
    if due.is_empty() {
        return;
    }
    due.sort_unstable_by_key(|(seq, _, _)| *seq);
    let due: Vec<(String, String)> = due.into_iter().map(|(_, id, token)| (id, token)).collect();
    match state
        .args
        .store
        .extend_locks(&due, state.args.lock_duration)
        .await
    {
        Ok(lost) => {
            for (id, _) in &due {
                if let Some(t) = state.tracked.get_mut(id) {
                    t.renewed_at = now;
                }
            }
            // Node's order: `lockRenewalFailed` first, then `locksRenewed`.
            let lost_set: HashSet<&str> = lost.iter().map(String::as_str).collect();
            let renewed: Vec<String> = due
                .into_iter()
                .map(|(id, _)| id)
                .filter(|id| !lost_set.contains(id.as_str()))
                .collect();
            drop(lost_set);
            if !lost.is_empty() {
                for id in &lost {
                    state.tracked.remove(id);
                }
                tracing::warn!(jobs = ?lost, "could not renew job locks");
                let _ = state
                    .args
                    .worker
                    .cast(WorkerMsg::Internal(Internal::locks_lost(lost)));
            }
            if !renewed.is_empty() {
                let _ = state
                    .args
                    .worker
                    .cast(WorkerMsg::Internal(Internal::locks_renewed(renewed)));
            }
        }
        Err(error) => {
            let _ = state
                .args
                .worker
                .cast(WorkerMsg::Internal(Internal::store_error(error)));
        }
    }
}
