//! OTP-style supervision for ractor actors.
//!
//! A [`Supervisor`] starts its children from [`ChildSpec`]s (any actor type: the spec's start
//! function spawns it linked to the supervisor), restarts them by [`Strategy`] and per-child
//! [`Restart`] policy within a restart [`Intensity`], optionally after a [`Backoff`], and gives
//! up — stopping its children and failing upward — when the intensity is exceeded.
//! [`DynamicSupervisor`] is the same actor started empty. Every decision is published as a
//! [`RuntimeEvent`] and logged with `tracing`. See `docs/supervision.md`.
//!
//! This layer is generic: it knows nothing of queues, Workers or Redis, and uses nothing else of
//! the crate (`tests/architecture.rs` checks it), so it could be a crate of its own. The
//! application tree built on it (the `Runtime`, supervised Workers and QueueEvents, the
//! WorkerManager wiring) lives in the crate's `runtime` module, and each actor module provides
//! its own child spec (`WorkerSpec`, `QueueEventsArgs::child_spec`).

mod backoff;
mod child_spec;
mod dynamic;
mod error;
mod event;
mod handle;
mod locator;
mod options;
mod strategy;
mod supervisor;

pub use backoff::Backoff;
pub use child_spec::{ChildSpec, StartFn, StopFn, DEFAULT_SHUTDOWN};
pub use dynamic::DynamicSupervisor;
pub use error::{Cause, SupervisionError};
pub use event::RuntimeEvent;
pub use handle::SupervisorRef;
pub use locator::SupervisorLocator;
pub use options::SupervisorOptions;
pub use strategy::{
    ExitKind, Intensity, IntensityExceeded, Restart, RestartWindow, Strategy, NORMAL_REASON,
    SHUTDOWN_REASON,
};
pub use supervisor::{
    ChildInfo, RestartDue, Supervisor, SupervisorArgs, SupervisorMsg, SupervisorState,
    SUPERVISOR_SHUTDOWN,
};
