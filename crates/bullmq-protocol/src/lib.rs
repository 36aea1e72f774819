//! The BullMQ wire protocol, without I/O.
//!
//! Everything another BullMQ client (Node, Python, Elixir) can observe in Redis is described
//! here: key names ([`keys`]), job options with BullMQ's JSON short keys ([`options`]), the job
//! hash ([`job_record`]), the events stream ([`events`]), the zset scores ([`score`]), retry
//! backoff ([`backoff`]) and input validation ([`validation`]). The crate is pure so that all of
//! it is unit- and property-tested without Redis.

pub mod backoff;
pub mod error;
pub mod events;
pub mod job_record;
pub mod keys;
mod lenient;
pub mod options;
pub mod score;
pub mod state;
pub mod validation;

pub use backoff::{backoff_delay, BackoffDelay};
pub use error::{DecodeError, DecodeReason, ParseJobStateError, ValidationError};
pub use events::{Event, StreamEvent};
pub use job_record::{JobRecord, ParentInfo};
pub use options::{Backoff, BackoffKind, Deduplication, JobOptions, KeepJobs, ParentRef};
pub use state::JobState;
pub use validation::validate_job;
