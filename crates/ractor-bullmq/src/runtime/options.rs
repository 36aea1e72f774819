//! [`RuntimeOptions`]: how [`Runtime::start`](super::Runtime::start) builds the tree.

use std::time::Duration;

use crate::supervision::SupervisorOptions;
use crate::worker::DEFAULT_WORKER_SHUTDOWN;
use crate::ConnectionConfig;

/// Options of [`Runtime::start`](super::Runtime::start). The runtime replaces the `events`
/// sender of the three supervisor option sets with its own channel
/// ([`Runtime::subscribe`](super::Runtime::subscribe)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// Registry name of the root; the branch supervisors are registered as `<name>.workers` and
    /// `<name>.queue_events`. Default `bullmq-runtime-<n>`, unique in the process.
    pub name: Option<String>,
    /// Root supervisor options (default OneForOne, 3 restarts in 5 s).
    pub root: SupervisorOptions,
    /// WorkerSupervisor options (default OneForOne, 3 restarts in 5 s).
    pub worker_supervisor: SupervisorOptions,
    /// QueueEventsSupervisor options (default OneForOne, 3 restarts in 5 s).
    pub queue_events_supervisor: SupervisorOptions,
    /// Capacity of the event broadcast channel; slow subscribers lose the oldest events
    /// (`RecvError::Lagged`). Default 1024.
    pub event_capacity: usize,
    /// Redis connection of the Workers and WorkerManagers the runtime starts. Default
    /// `ConnectionConfig::default()` (`redis://127.0.0.1:6379`); see
    /// [`ConnectionConfig::from_env`].
    pub connection: ConnectionConfig,
    /// How long a Worker stopped by the runtime (shutdown, scale down, close) may spend
    /// finishing its active jobs before they are cancelled. Default 30 s.
    pub worker_shutdown: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            name: None,
            root: SupervisorOptions::default(),
            worker_supervisor: SupervisorOptions::default(),
            queue_events_supervisor: SupervisorOptions::default(),
            event_capacity: 1024,
            connection: ConnectionConfig::default(),
            worker_shutdown: DEFAULT_WORKER_SHUTDOWN,
        }
    }
}

impl RuntimeOptions {
    /// Sets the registry name prefix.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the root supervisor's options.
    pub fn root(mut self, options: SupervisorOptions) -> Self {
        self.root = options;
        self
    }

    /// Sets the WorkerSupervisor's options.
    pub fn worker_supervisor(mut self, options: SupervisorOptions) -> Self {
        self.worker_supervisor = options;
        self
    }

    /// Sets the QueueEventsSupervisor's options.
    pub fn queue_events_supervisor(mut self, options: SupervisorOptions) -> Self {
        self.queue_events_supervisor = options;
        self
    }

    /// Sets the Redis connection of the Workers the runtime starts.
    pub fn connection(mut self, connection: ConnectionConfig) -> Self {
        self.connection = connection;
        self
    }

    /// Sets how long a stopped Worker may spend finishing its active jobs (default 30 s).
    pub fn worker_shutdown(mut self, shutdown: Duration) -> Self {
        self.worker_shutdown = shutdown;
        self
    }
}
