//! Redis access for ractor-bullmq: connection configuration, the embedded Lua scripts and one
//! typed async function per script.
//!
//! Nothing here knows about actors; the runtime crate (`ractor-bullmq`) builds on these
//! functions.

pub mod backend;
pub mod cluster;
pub mod connection;
pub mod error;
pub mod events;
pub mod node_key;
pub mod script;

pub use backend::{
    RedisBackend, RedisEventPublisher, RedisEventStream, RedisFlowStore, RedisQueueStore,
    RedisWorkerStore,
};
pub use connection::{
    ConnectionConfig, Connections, Node, Reconnect, TlsOptions, Topology, ACCEPTED_SCHEMES,
    DEFAULT_UNRESPONSIVE_TIMEOUT,
};
pub use error::{RedisError, Result};
pub use fred;
pub use script::Script;
pub mod queue;
pub mod worker;
