//! Embeds a Worker in your own ractor supervision tree, without the Runtime.
//!
//!     REDIS_URL=redis://127.0.0.1:6379 cargo run -p ractor-bullmq --example embedding
//!
//! `AppSupervisor` is an ordinary ractor actor of the application. It spawns the Worker with
//! `Actor::spawn_linked(.., myself.get_cell())`, so the Worker's exit reaches its
//! `handle_supervisor_evt` — which it overrides, because ractor's default stops the parent when
//! a child exits. A crashed Worker (here: its LockManager is made to crash once) is restarted
//! with fresh arguments (new connections, a fresh LockManager); `Shutdown` closes the Worker
//! gracefully. The example adds 20 jobs, waits for them, and exits.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use ractor_bullmq::worker::{Job, JobContext, LockManagerMsg, Worker, WorkerArgs, WorkerMsg};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions, WorkerOptions};
use serde_json::json;

/// Messages of the application's supervisor.
enum AppMsg {
    /// Close the Worker gracefully, then stop.
    Shutdown(RpcReplyPort<()>),
    /// The current Worker (for the demo's fault injection).
    CurrentWorker(RpcReplyPort<Option<ActorRef<WorkerMsg>>>),
}

struct AppArgs {
    connection: ConnectionConfig,
    queue: String,
}

struct AppState {
    args: AppArgs,
    worker: Option<ActorRef<WorkerMsg>>,
    restarts: u32,
}

/// The application's own supervisor actor.
struct AppSupervisor;

/// Restarts tolerated before the supervisor gives up (and fails to its own parent).
const MAX_RESTARTS: u32 = 5;

async fn processor(job: Job, _ctx: JobContext) -> anyhow::Result<serde_json::Value> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(json!({ "processed": job.data_value() }))
}

impl AppSupervisor {
    /// Fresh arguments for every start: a restarted Worker gets new connections.
    async fn spawn_worker(
        myself: &ActorRef<AppMsg>,
        args: &AppArgs,
    ) -> Result<ActorRef<WorkerMsg>, ActorProcessingErr> {
        // Short locks so the demo's crashed jobs come back within seconds (defaults: 30 s).
        let options = WorkerOptions::new()
            .concurrency(5)
            .name("embedded")
            .lock_duration(Duration::from_secs(4))
            .stalled_interval(Duration::from_secs(2));
        let worker_args =
            WorkerArgs::connect(&args.connection, &args.queue, processor, options).await?;
        let (worker, _) = Actor::spawn_linked(None, Worker, worker_args, myself.get_cell()).await?;
        Ok(worker)
    }
}

impl Actor for AppSupervisor {
    type Msg = AppMsg;
    type State = AppState;
    type Arguments = AppArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<AppMsg>,
        args: AppArgs,
    ) -> Result<AppState, ActorProcessingErr> {
        let worker = Self::spawn_worker(&myself, &args).await?;
        Ok(AppState {
            args,
            worker: Some(worker),
            restarts: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<AppMsg>,
        msg: AppMsg,
        state: &mut AppState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AppMsg::CurrentWorker(reply) => {
                let _ = reply.send(state.worker.clone());
            }
            AppMsg::Shutdown(reply) => {
                // Forget the Worker first, so its (normal) exit is not taken for a crash.
                if let Some(worker) = state.worker.take() {
                    let report = ractor::call!(worker, |reply| WorkerMsg::Close {
                        force: false,
                        reply
                    })?;
                    println!(
                        "worker closed; left for stalled recovery: {:?}",
                        report.left_for_stalled_recovery
                    );
                }
                let _ = reply.send(());
                myself.stop(None);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<AppMsg>,
        event: SupervisionEvent,
        state: &mut AppState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match event {
            SupervisionEvent::ActorFailed(cell, error) => (cell, error.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "normal".into()))
            }
            _ => return Ok(()),
        };
        let ours = state
            .worker
            .as_ref()
            .is_some_and(|w| w.get_id() == cell.get_id());
        if !ours {
            return Ok(());
        }
        state.restarts += 1;
        if state.restarts > MAX_RESTARTS {
            return Err(
                format!("worker crashed {} times; giving up: {why}", state.restarts).into(),
            );
        }
        println!(
            "worker exited ({why}); restarting it (restart #{})",
            state.restarts
        );
        state.worker = Some(Self::spawn_worker(&myself, &state.args).await?);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let connection = ConnectionConfig::from_env()?;
    let queue_name = format!("embedding-example-{}", std::process::id());
    let queue = Queue::new(&queue_name, QueueOptions::new(connection.clone())).await?;
    for i in 0..20 {
        queue.add("greet", json!({ "i": i })).await?;
    }

    let (app, handle) = Actor::spawn(
        None,
        AppSupervisor,
        AppArgs {
            connection,
            queue: queue_name.clone(),
        },
    )
    .await?;

    // Fault injection for the demo: crash the Worker's LockManager once, mid-run. The Worker,
    // linked to it, fails; AppSupervisor restarts it with a fresh LockManager.
    tokio::time::sleep(Duration::from_millis(100)).await;
    if let Some(worker) = ractor::call!(app, AppMsg::CurrentWorker)? {
        let lock_manager = worker
            .get_children()
            .into_iter()
            .find(|c| c.is_message_type_of::<LockManagerMsg>() == Some(true));
        if let Some(lock_manager) = lock_manager {
            lock_manager.stop(Some("demo: injected lock manager crash".into()));
        }
    }

    // Jobs the crashed Worker held return once their locks expire and a stalled check runs.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let counts = queue.get_job_counts().await?;
        println!(
            "completed {} / 20 (active {})",
            counts.completed, counts.active
        );
        if counts.completed == 20 || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    ractor::call!(app, AppMsg::Shutdown)?;
    handle.await?;
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}
