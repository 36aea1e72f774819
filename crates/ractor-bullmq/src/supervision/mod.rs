//! OTP-style supervision for ractor actors, and the [`Runtime`] that roots the tree.
//!
//! A [`Supervisor`] starts its children from [`ChildSpec`]s (any actor type: the spec's start
//! function spawns it linked to the supervisor), restarts them by [`Strategy`] and per-child
//! [`Restart`] policy within a restart [`Intensity`], optionally after a [`Backoff`], and gives
//! up — stopping its children and failing upward — when the intensity is exceeded.
//! [`DynamicSupervisor`] is the same actor started empty. Every decision is published as a
//! [`RuntimeEvent`] and logged with `tracing`. See `docs/supervision.md`.

mod backoff;
mod child_spec;
mod dynamic;
mod error;
mod event;
mod handle;
mod options;
mod runtime;
mod strategy;
mod supervisor;
mod worker_child;

pub use backoff::Backoff;
pub use child_spec::{ChildSpec, StartFn, StopFn, DEFAULT_SHUTDOWN};
pub use dynamic::DynamicSupervisor;
pub use error::SupervisionError;
pub use event::RuntimeEvent;
pub use handle::SupervisorRef;
pub use options::SupervisorOptions;
pub use runtime::{Branch, Runtime, RuntimeOptions};
pub use strategy::{
    ExitKind, Intensity, IntensityExceeded, Restart, RestartWindow, Strategy, NORMAL_REASON,
    SHUTDOWN_REASON,
};
pub use supervisor::{
    ChildInfo, RestartDue, Supervisor, SupervisorArgs, SupervisorMsg, SupervisorState,
    SUPERVISOR_SHUTDOWN,
};
pub use worker_child::{SupervisedWorker, SupervisorLocator, WorkerSpec, DEFAULT_WORKER_SHUTDOWN};
