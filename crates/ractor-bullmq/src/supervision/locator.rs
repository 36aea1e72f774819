//! [`SupervisorLocator`]: how a long-lived handle finds a supervisor that may have been
//! restarted since the handle was made.

use super::error::SupervisionError;
use super::handle::SupervisorRef;

/// Where a handle on a supervised child finds its supervisor: a registered name (survives the
/// supervisor's own restart, as an application's branch supervisors do) or a fixed reference.
#[derive(Debug, Clone)]
pub enum SupervisorLocator {
    /// Looked up in ractor's registry at every use.
    Named(String),
    /// A fixed supervisor.
    Ref(SupervisorRef),
}

impl SupervisorLocator {
    /// The supervisor now.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when it is not running.
    pub fn resolve(&self) -> Result<SupervisorRef, SupervisionError> {
        match self {
            Self::Named(name) => SupervisorRef::lookup(name),
            Self::Ref(sup) => Ok(sup.clone()),
        }
    }
}
