//! Flows: adding a tree of jobs across queues at once, as Node BullMQ's `FlowProducer`.
//!
//! A [`FlowProducer`] adds a [`FlowJob`] tree (or many, [`FlowProducer::add_bulk`]) in one
//! atomic backend call — one Lua script on Redis: every node with children waits in
//! `waiting-children` until all of its children have finished, each child names its parent
//! (`parentKey` / `parent`) and is one of its `:dependencies`. The whole tree is validated
//! first ([`bullmq_protocol::flow::validate_flow`], then each node's merged options), so a
//! refused tree writes nothing; the backend refuses atomically too (a missing parent, a job id
//! that already belongs to another parent), again writing nothing — where Node's transaction
//! keeps the jobs it added before the failing one.
//!
//! Job ids default to UUIDs, as Node's. [`FlowProducer::get_flow`] reads a flow back as a
//! [`JobNode`] tree.
//!
//! ```no_run
//! use ractor_bullmq::flow::{FlowJob, FlowProducer, FlowProducerOptions};
//!
//! # async fn demo() -> Result<(), ractor_bullmq::flow::FlowError> {
//! let flows = FlowProducer::new(FlowProducerOptions::from_env()?).await?;
//! let tree = flows
//!     .add(
//!         FlowJob::new("report", "reports")
//!             .child(FlowJob::new("page", "pages").data(serde_json::json!({ "n": 1 })))
//!             .child(FlowJob::new("page", "pages").data(serde_json::json!({ "n": 2 }))),
//!     )
//!     .await?;
//! assert_eq!(tree.children.len(), 2);
//! flows.close().await?;
//! # Ok(()) }
//! ```
//!
//! # Telemetry
//!
//! Spans `bullmq.flow.add` (`queue` of the root, `job.name`, `job.id`, `count` of jobs),
//! `bullmq.flow.add_bulk` (`count` of flows, `jobs`) and `bullmq.flow.get_flow` (`queue`,
//! `job.id`); the store call inside is `bullmq.store.add_flow` / `bullmq.store.read_flow_node`.

mod error;
mod node;
mod options;
mod plan;
mod producer;

pub use bullmq_protocol::flow::{FlowJob, FlowOptions, FlowPath, FlowValidationError, QueueTag};
pub use error::FlowError;
pub use node::{GetFlowOptions, JobNode};
pub use options::FlowProducerOptions;
pub use producer::FlowProducer;
