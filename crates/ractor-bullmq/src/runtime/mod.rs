//! The application tree: the [`Runtime`], root supervisor of an embedding application, owning
//! the WorkerSupervisor and the QueueEventsSupervisor (two dynamic supervisors) and any
//! WorkerManagers.
//!
//! ```text
//! Runtime root            (OneForOne)
//! ├── WorkerSupervisor    "<name>.workers"       dynamic; Workers
//! ├── QueueEventsSupervisor "<name>.queue_events" dynamic; QueueEvents
//! └── (children added with start_child_under(Branch::Root, ..), e.g. WorkerManagers)
//! ```
//!
//! # Supervision
//!
//! Every supervisor of the tree publishes [`RuntimeEvent`](crate::supervision::RuntimeEvent)s
//! on one broadcast channel ([`Runtime::subscribe`]). When a branch supervisor exceeds its
//! restart intensity it fails and the root restarts it (empty: its dynamic children were started
//! by callers, who see `SupervisorGaveUp` and decide); when the root itself exceeds its
//! intensity, it stops the whole tree and publishes `SupervisorGaveUp` for itself.
//!
//! Built on the generic [`supervision`](crate::supervision) layer; this module is where it
//! meets the crate's actors. Each actor module says how it is supervised (its child spec:
//! [`WorkerSpec`], [`QueueEventsArgs::child_spec`](crate::events::QueueEventsArgs::child_spec));
//! the files here wire them into the tree:
//!
//! - `runtime.rs`: the [`Runtime`] itself (start, branches, events, shutdown);
//! - `options.rs`: [`RuntimeOptions`];
//! - `workers.rs`: supervised Workers ([`Runtime::start_worker`]);
//! - `queue_events.rs`: supervised QueueEvents ([`Runtime::start_queue_events`],
//!   [`QueueEventsHandle::start_supervised`](crate::events::QueueEventsHandle::start_supervised));
//! - `managers.rs`: WorkerManagers under the root ([`Runtime::worker_manager`]).
//!
//! Nothing else in the crate depends on this module: it sits on top of the module graph.

mod managers;
mod options;
mod queue_events;
#[allow(clippy::module_inception)]
mod runtime;
mod workers;

pub use options::RuntimeOptions;
pub use runtime::{Branch, Runtime};

// The children the tree runs, re-exported where users of the Runtime look for them.
pub use crate::worker::{SupervisedWorker, WorkerSpec};
