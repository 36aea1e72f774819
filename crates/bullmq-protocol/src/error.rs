//! Errors of the protocol crate: rejected job input ([`ValidationError`]), unreadable job hashes
//! ([`DecodeError`]) and unknown state names ([`ParseJobStateError`]).
//!
//! Where Node BullMQ 6.7.0 rejects the same input, the message is Node's wording, so an operator
//! reading logs from a mixed Node/Rust deployment sees one message per problem.

use std::fmt;

use crate::score::MAX_PRIORITY;

/// Job input that BullMQ would reject (or that cannot be stored without corrupting the queue).
///
/// Returned by [`validate_job`](crate::validation::validate_job) before anything is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// The serialised `data` is larger than the job's `sizeLimit` (Node's check).
    #[error("The size of job {name} exceeds the limit {limit} bytes")]
    SizeLimitExceeded {
        /// Job name.
        name: String,
        /// Size of the serialised data in bytes.
        size: usize,
        /// The job's `sizeLimit` in bytes.
        limit: u64,
    },
    /// More than one of the mutually exclusive parent-failure options is enabled.
    #[error("The following options cannot be used together: {}", .options.join(", "))]
    ExclusiveOptions {
        /// Node names of the enabled options, in Node's order.
        options: Vec<&'static str>,
    },
    /// Custom job id `0` or starting with `0:` (Node's `Queue.add` check).
    #[error("JobId cannot be '0' or start with '0:'")]
    JobIdZero {
        /// The rejected id.
        job_id: String,
    },
    /// A custom job id that is an integer would collide with generated ids.
    #[error("Custom Id cannot be integers")]
    JobIdInteger {
        /// The rejected id.
        job_id: String,
    },
    /// A custom job id may contain `:` only as `a:b:c` (legacy repeatable job ids).
    #[error("Custom Id cannot contain :")]
    JobIdColon {
        /// The rejected id.
        job_id: String,
    },
    /// Priority above [`MAX_PRIORITY`].
    #[error("Priority should be between 0 and {MAX_PRIORITY}")]
    PriorityOutOfRange {
        /// The rejected priority.
        priority: u32,
    },
    /// `deduplication` given without an id.
    #[error("Deduplication id must be provided")]
    DeduplicationIdMissing,
    /// `deduplication` and `parent` on the same job.
    #[error("Deduplication and parent options cannot be used together")]
    DeduplicationWithParent,
    /// The removed `debounce` option is present (Node rejects it since 5.x).
    #[error("Debounce option has been removed. Use deduplication option instead")]
    DebounceRemoved,
    /// Backoff jitter outside `0..=1`.
    #[error("Jitter should be between 0 and 1")]
    JitterOutOfRange {
        /// The rejected jitter.
        jitter: f64,
    },
    /// The job would become ready after the last millisecond whose delayed score is exact in a
    /// Redis double (see [`MAX_READY_AT_MS`](crate::score::MAX_READY_AT_MS)).
    #[error(
        "Delay of {delay_ms} ms makes the job ready at {ready_at_ms} ms, after the latest \
         supported time {max_ready_at_ms} ms"
    )]
    DelayTooLarge {
        /// The requested delay in milliseconds.
        delay_ms: u64,
        /// `timestamp + delay` in milliseconds since the Unix epoch.
        ready_at_ms: u64,
        /// The latest supported ready time.
        max_ready_at_ms: u64,
    },
}

/// A job hash field that could not be decoded.
///
/// Displays as `atm is "abc", not an integer` or `data holds invalid JSON: ...`: the wording
/// the worker scripts use for the fields they check, so a failed job's `failedReason` reads
/// the same whichever side found the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct DecodeError {
    /// The job hash field (Redis name, e.g. `data`, `opts`, `atm`).
    pub field: String,
    /// Why it could not be read.
    pub reason: DecodeReason,
}

impl DecodeError {
    /// A decode error of `field` (backends other than Redis decode their own rows).
    pub fn new(field: &str, reason: DecodeReason) -> Self {
        Self {
            field: field.to_owned(),
            reason,
        }
    }
}

/// Why a job hash field could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeReason {
    /// The value is not valid JSON, or not JSON of the expected shape.
    InvalidJson(String),
    /// The value is not a (non-negative) number.
    InvalidNumber(String),
    /// A field without which the job is unusable is absent.
    Missing,
    /// A flow reference (a parent's child, a child's parent) is not a job key
    /// `{prefix}:{queue}:{id}`.
    InvalidJobKey(String),
    /// The value (or the field's name) is binary, not UTF-8 text, so nothing of the job can
    /// be read as BullMQ writes it (another client wrote raw bytes).
    NotUtf8 {
        /// Length of the value in bytes.
        bytes: usize,
        /// Offset of the first byte that is not valid UTF-8.
        valid_up_to: usize,
    },
}

impl fmt::Display for DecodeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidJson(e) => write!(f, "holds invalid JSON: {e}"),
            Self::InvalidNumber(v) => write!(f, "is {v:?}, not an integer"),
            Self::Missing => f.write_str("is missing"),
            Self::InvalidJobKey(key) => {
                write!(
                    f,
                    "holds {key:?}, not a job key {{prefix}}:{{queue}}:{{id}}"
                )
            }
            Self::NotUtf8 { bytes, valid_up_to } => write!(
                f,
                "is not valid UTF-8 (binary data: invalid byte at offset {valid_up_to} of {bytes})"
            ),
        }
    }
}

/// A string that is not one of BullMQ's job state names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}")]
pub struct ParseJobStateError(pub String);
