//! Dynamic supervisors: start empty, children added with `start_child` (OTP's
//! `DynamicSupervisor`). The WorkerSupervisor and QueueEventsSupervisor are dynamic.
//!
//! It is the same [`Supervisor`] actor with no initial children, so all strategies work; the
//! default is [`Strategy::OneForOne`](super::Strategy::OneForOne), which is what independent
//! children such as Workers need.

use ractor::{ActorCell, SpawnErr};
use tokio::task::JoinHandle;

use super::child_spec::ChildSpec;
use super::handle::SupervisorRef;
use super::options::SupervisorOptions;
use super::supervisor::Supervisor;

/// Constructors for supervisors that start without children.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use ractor::{Actor, ActorProcessingErr, ActorRef};
/// use ractor_bullmq::supervision::{ChildSpec, DynamicSupervisor, SupervisorOptions};
///
/// struct Idle;
/// impl Actor for Idle {
///     type Msg = ();
///     type State = ();
///     type Arguments = ();
///     async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
///         Ok(())
///     }
/// }
///
/// let (sup, handle) = DynamicSupervisor::spawn(None, SupervisorOptions::default()).await?;
/// sup.start_child(ChildSpec::for_actor("idle-1", || (Idle, ()))).await?;
/// assert_eq!(sup.which_children().await?.len(), 1);
/// sup.terminate_child("idle-1").await?;
/// sup.shutdown(std::time::Duration::from_secs(5)).await?;
/// handle.await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DynamicSupervisor;

impl DynamicSupervisor {
    /// Spawns an unlinked dynamic supervisor.
    ///
    /// # Errors
    ///
    /// `SpawnErr` if the name is already registered.
    pub async fn spawn(
        name: Option<String>,
        options: SupervisorOptions,
    ) -> Result<(SupervisorRef, JoinHandle<()>), SpawnErr> {
        Supervisor::spawn(name, options, Vec::new()).await
    }

    /// Spawns a dynamic supervisor linked to `parent`.
    ///
    /// # Errors
    ///
    /// `SpawnErr` if the name is already registered.
    pub async fn spawn_linked(
        name: Option<String>,
        options: SupervisorOptions,
        parent: ActorCell,
    ) -> Result<(SupervisorRef, JoinHandle<()>), SpawnErr> {
        Supervisor::spawn_linked(name, options, Vec::new(), parent).await
    }

    /// A [`ChildSpec`] running a dynamic supervisor under another supervisor.
    pub fn child_spec(
        id: impl Into<String>,
        name: Option<String>,
        options: SupervisorOptions,
    ) -> ChildSpec {
        Supervisor::child_spec(id, name, options, Vec::new())
    }
}
