//! Flows: a tree of jobs across queues, as Node BullMQ's `FlowProducer` adds them.
//!
//! [`FlowJob`] is one node of the tree (Node's `FlowJob`), [`FlowOptions`] the per-queue
//! defaults of one `add` (Node's `FlowOpts.queuesOptions`). [`validate_flow`] checks a whole
//! tree before anything is written, naming the node at fault by its [`FlowPath`];
//! [`hash_tag`] is the Redis Cluster hash-tag rule the cross-slot check is built on.
//!
//! ```
//! use bullmq_protocol::flow::{validate_flow, FlowJob};
//!
//! let tree = FlowJob::new("report", "reports")
//!     .child(FlowJob::new("page", "pages").data(serde_json::json!({ "n": 1 })))
//!     .child(FlowJob::new("page", "pages").data(serde_json::json!({ "n": 2 })));
//! assert!(validate_flow(&tree, "bull").is_ok());
//! ```

mod hash_tag;
mod tree;
mod validate;

pub use hash_tag::hash_tag;
pub use tree::{FlowJob, FlowOptions};
pub use validate::{validate_flow, validate_flows, FlowPath, FlowValidationError, QueueTag};
