//! The BullMQ wire protocol, without I/O.
//!
//! Everything another BullMQ client (Node, Python, Elixir) can observe in Redis is described
//! here: key names ([`keys`]), job options with BullMQ's JSON short keys ([`options`]), the job
//! hash ([`job_record`]), the events stream ([`events`]), the zset scores ([`score`]), retry
//! backoff ([`backoff`]), job schedulers' cron patterns ([`scheduler`]), input validation
//! ([`validation`]), flow trees and their checks ([`flow`]) and the scripts' error codes
//! ([`error_code`]). The crate is pure so that
//! all of it is unit- and property-tested without Redis.
//!
//! The facts (field names, short keys, event fields, score formulas, limits and error messages)
//! are those of Node `bullmq` 6.7.0; `tests/fixtures/node-6.7.0.json` holds job hashes and
//! events written by it, and the golden tests decode and re-encode them.
//!
//! ```
//! use std::collections::HashMap;
//! use std::time::Duration;
//! use bullmq_protocol::job_record::encode_new;
//! use bullmq_protocol::{validate_job, JobOptions, JobRecord};
//!
//! // What a producer does before its add script runs…
//! let opts = JobOptions::new().attempts(3).delay(Duration::from_secs(5));
//! let data = r#"{"to":"a@b.c"}"#;
//! validate_job("email", data.len(), &opts).unwrap();
//! let fields = encode_new("email", data, &opts, 1_764_000_000_000);
//!
//! // …and how any client reads the job hash back.
//! let hash: HashMap<String, String> = fields.into_iter().collect();
//! let job = JobRecord::decode("1", &hash).unwrap();
//! assert_eq!(job.delay, 5_000);
//! assert_eq!(job.max_attempts(), 3);
//! ```

pub mod backoff;
pub mod cluster_slot;
pub mod error;
pub mod error_code;
pub mod events;
pub mod flow;
pub mod ids;
pub mod job_record;
pub mod keys;
mod lenient;
pub mod options;
pub mod scheduler;
pub mod score;
pub mod state;
pub mod validation;

pub use backoff::{backoff_delay, BackoffDelay};
pub use error::{DecodeError, DecodeReason, ParseJobStateError, ValidationError};
pub use error_code::{ScriptErrorCode, ScriptErrorContext};
pub use events::{Event, StreamEvent};
pub use ids::{JobRef, QueueId};
pub use job_record::{JobRecord, ParentInfo};
pub use options::{Backoff, BackoffKind, Deduplication, JobOptions, KeepJobs, ParentRef};
pub use state::JobState;
pub use validation::{validate_job, validate_job_at};
