//! Entries of the queue's `events` stream (`{prefix}:{queue}:events`).
//!
//! Every entry has an `event` field naming it, followed by the event's fields in the order
//! BullMQ's scripts write them (e.g. `completed`: `jobId`, `returnvalue`, `prev`). Decoding never
//! fails: an unknown name, or a known name whose required fields are missing or malformed,
//! becomes [`Event::Custom`] with the raw fields, so a consumer never loses an entry.
//!
//! ```
//! use bullmq_protocol::events::{Event, StreamEvent};
//!
//! let fields = vec![
//!     ("event".to_owned(), "completed".to_owned()),
//!     ("jobId".to_owned(), "7".to_owned()),
//!     ("returnvalue".to_owned(), r#"{"ok":true}"#.to_owned()),
//!     ("prev".to_owned(), "active".to_owned()),
//! ];
//! let e = StreamEvent::decode("1700000000000-0", fields.clone());
//! assert_eq!(e.event.name(), "completed");
//! assert_eq!(e.event.job_id(), Some("7"));
//! assert!(matches!(&e.event, Event::Completed { returnvalue, .. } if returnvalue["ok"] == true));
//! assert_eq!(e.event.to_fields(), fields);
//! ```

use serde_json::Value;

/// Event names as they appear in the `event` field.
pub mod name {
    /// A job was created.
    pub const ADDED: &str = "added";
    /// A job entered `wait`.
    pub const WAITING: &str = "waiting";
    /// A job was taken by a worker.
    pub const ACTIVE: &str = "active";
    /// A job entered `delayed`.
    pub const DELAYED: &str = "delayed";
    /// A job reported progress.
    pub const PROGRESS: &str = "progress";
    /// A job completed.
    pub const COMPLETED: &str = "completed";
    /// An attempt failed.
    pub const FAILED: &str = "failed";
    /// The last attempt failed.
    pub const RETRIES_EXHAUSTED: &str = "retries-exhausted";
    /// A parent waits for its children.
    pub const WAITING_CHILDREN: &str = "waiting-children";
    /// A job stalled and was moved back to wait.
    pub const STALLED: &str = "stalled";
    /// A job was removed.
    pub const REMOVED: &str = "removed";
    /// Finished jobs were cleaned.
    pub const CLEANED: &str = "cleaned";
    /// The queue has no waiting jobs left.
    pub const DRAINED: &str = "drained";
    /// The queue was paused.
    pub const PAUSED: &str = "paused";
    /// The queue was resumed.
    pub const RESUMED: &str = "resumed";
    /// A job with an existing custom id was added (and ignored).
    pub const DUPLICATED: &str = "duplicated";
    /// A job was deduplicated.
    pub const DEDUPLICATED: &str = "deduplicated";
}

/// One event of the stream, typed by its name.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// `added`: `jobId`, `name`.
    Added {
        /// Job id.
        job_id: String,
        /// Job name.
        name: String,
    },
    /// `waiting`: `jobId`, `prev` (absent for new jobs).
    Waiting {
        /// Job id.
        job_id: String,
        /// Previous state (`active`, `delayed`, `waiting-children`, `failed`, …).
        prev: Option<String>,
    },
    /// `active`: `jobId`, `prev`.
    Active {
        /// Job id.
        job_id: String,
        /// Previous state (`waiting`).
        prev: Option<String>,
    },
    /// `delayed`: `jobId`, `delay` — the time the job becomes ready, ms since the Unix epoch
    /// (not a duration, despite the name).
    Delayed {
        /// Job id.
        job_id: String,
        /// Ready time, ms since the Unix epoch.
        delay: u64,
    },
    /// `progress`: `jobId`, `data` (JSON: number or object).
    Progress {
        /// Job id.
        job_id: String,
        /// Progress value.
        data: Value,
    },
    /// `completed`: `jobId`, `returnvalue` (JSON), `prev`.
    Completed {
        /// Job id.
        job_id: String,
        /// Return value.
        returnvalue: Value,
        /// Previous state (`active`).
        prev: Option<String>,
    },
    /// `failed`: `jobId`, `failedReason`, `prev`.
    Failed {
        /// Job id.
        job_id: String,
        /// Failure message.
        failed_reason: String,
        /// Previous state (`active`).
        prev: Option<String>,
    },
    /// `retries-exhausted`: `jobId`, `attemptsMade`.
    RetriesExhausted {
        /// Job id.
        job_id: String,
        /// Attempts made.
        attempts_made: u32,
    },
    /// `waiting-children`: `jobId`, `prev`.
    WaitingChildren {
        /// Job id.
        job_id: String,
        /// Previous state (`active`; absent when added as a parent).
        prev: Option<String>,
    },
    /// `stalled`: `jobId`.
    Stalled {
        /// Job id.
        job_id: String,
    },
    /// `removed`: `jobId`, `prev`.
    Removed {
        /// Job id.
        job_id: String,
        /// State the job was removed from.
        prev: Option<String>,
    },
    /// `cleaned`: `count`.
    Cleaned {
        /// Number of jobs removed.
        count: u64,
    },
    /// `drained`.
    Drained,
    /// `paused`.
    Paused,
    /// `resumed`.
    Resumed,
    /// `duplicated`: `jobId` (of the existing job).
    Duplicated {
        /// Job id.
        job_id: String,
    },
    /// `deduplicated`: `jobId`, `deduplicationId`, `deduplicatedJobId`.
    Deduplicated {
        /// Id of the job that stays.
        job_id: String,
        /// Deduplication id.
        deduplication_id: String,
        /// Id of the job that was not added (or was replaced).
        deduplicated_job_id: String,
    },
    /// Any other event, or a known one that could not be read; fields after `event`, verbatim.
    Custom {
        /// Event name.
        name: String,
        /// Other fields, in stream order.
        fields: Vec<(String, String)>,
    },
}

impl Event {
    /// The event name (the `event` field).
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Added { .. } => name::ADDED,
            Self::Waiting { .. } => name::WAITING,
            Self::Active { .. } => name::ACTIVE,
            Self::Delayed { .. } => name::DELAYED,
            Self::Progress { .. } => name::PROGRESS,
            Self::Completed { .. } => name::COMPLETED,
            Self::Failed { .. } => name::FAILED,
            Self::RetriesExhausted { .. } => name::RETRIES_EXHAUSTED,
            Self::WaitingChildren { .. } => name::WAITING_CHILDREN,
            Self::Stalled { .. } => name::STALLED,
            Self::Removed { .. } => name::REMOVED,
            Self::Cleaned { .. } => name::CLEANED,
            Self::Drained => name::DRAINED,
            Self::Paused => name::PAUSED,
            Self::Resumed => name::RESUMED,
            Self::Duplicated { .. } => name::DUPLICATED,
            Self::Deduplicated { .. } => name::DEDUPLICATED,
            Self::Custom { name, .. } => name,
        }
    }

    /// The job the event is about, if any (for `Custom`, its `jobId` field).
    #[must_use]
    pub fn job_id(&self) -> Option<&str> {
        match self {
            Self::Added { job_id, .. }
            | Self::Waiting { job_id, .. }
            | Self::Active { job_id, .. }
            | Self::Delayed { job_id, .. }
            | Self::Progress { job_id, .. }
            | Self::Completed { job_id, .. }
            | Self::Failed { job_id, .. }
            | Self::RetriesExhausted { job_id, .. }
            | Self::WaitingChildren { job_id, .. }
            | Self::Stalled { job_id }
            | Self::Removed { job_id, .. }
            | Self::Duplicated { job_id }
            | Self::Deduplicated { job_id, .. } => Some(job_id),
            Self::Cleaned { .. } | Self::Drained | Self::Paused | Self::Resumed => None,
            Self::Custom { fields, .. } => fields
                .iter()
                .find(|(k, _)| k == "jobId")
                .map(|(_, v)| v.as_str()),
        }
    }

    /// The stream fields for `XADD`: `event` first, then the event's fields in BullMQ's order.
    #[must_use]
    pub fn to_fields(&self) -> Vec<(String, String)> {
        let mut out = vec![("event".to_owned(), self.name().to_owned())];
        let mut push = |k: &str, v: &str| out.push((k.to_owned(), v.to_owned()));
        match self {
            Self::Added { job_id, name } => {
                push("jobId", job_id);
                push("name", name);
            }
            Self::Waiting { job_id, prev }
            | Self::Active { job_id, prev }
            | Self::WaitingChildren { job_id, prev }
            | Self::Removed { job_id, prev } => {
                push("jobId", job_id);
                if let Some(prev) = prev {
                    push("prev", prev);
                }
            }
            Self::Delayed { job_id, delay } => {
                push("jobId", job_id);
                push("delay", &delay.to_string());
            }
            Self::Progress { job_id, data } => {
                push("jobId", job_id);
                push("data", &data.to_string());
            }
            Self::Completed {
                job_id,
                returnvalue,
                prev,
            } => {
                push("jobId", job_id);
                push("returnvalue", &returnvalue.to_string());
                if let Some(prev) = prev {
                    push("prev", prev);
                }
            }
            Self::Failed {
                job_id,
                failed_reason,
                prev,
            } => {
                push("jobId", job_id);
                push("failedReason", failed_reason);
                if let Some(prev) = prev {
                    push("prev", prev);
                }
            }
            Self::RetriesExhausted {
                job_id,
                attempts_made,
            } => {
                push("jobId", job_id);
                push("attemptsMade", &attempts_made.to_string());
            }
            Self::Stalled { job_id } | Self::Duplicated { job_id } => push("jobId", job_id),
            Self::Cleaned { count } => push("count", &count.to_string()),
            Self::Drained | Self::Paused | Self::Resumed => {}
            Self::Deduplicated {
                job_id,
                deduplication_id,
                deduplicated_job_id,
            } => {
                push("jobId", job_id);
                push("deduplicationId", deduplication_id);
                push("deduplicatedJobId", deduplicated_job_id);
            }
            Self::Custom { fields, .. } => {
                for (k, v) in fields {
                    push(k, v);
                }
            }
        }
        out
    }

    /// Decodes the fields of one stream entry (`event` may be anywhere; a missing `event`
    /// gives a `Custom` event with an empty name).
    #[must_use]
    pub fn from_fields(fields: Vec<(String, String)>) -> Event {
        let mut event_name = None;
        let mut rest = Vec::with_capacity(fields.len());
        for (k, v) in fields {
            if k == "event" && event_name.is_none() {
                event_name = Some(v);
            } else {
                rest.push((k, v));
            }
        }
        let event_name = event_name.unwrap_or_default();
        decode_known(&event_name, &rest).unwrap_or(Event::Custom {
            name: event_name,
            fields: rest,
        })
    }
}

/// A stream entry: its id (`{ms}-{seq}`) and event.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    /// Stream entry id.
    pub id: String,
    /// The event.
    pub event: Event,
}

impl StreamEvent {
    /// Decodes one entry as read by `XREAD`/`XRANGE`. Never fails; see [`Event::from_fields`].
    #[must_use]
    pub fn decode(id: impl Into<String>, fields: Vec<(String, String)>) -> StreamEvent {
        StreamEvent {
            id: id.into(),
            event: Event::from_fields(fields),
        }
    }

    /// Time the entry was added, ms since the Unix epoch (the `{ms}` part of the id), if the
    /// id has Redis's format.
    #[must_use]
    pub fn timestamp_ms(&self) -> Option<u64> {
        self.id.split('-').next().and_then(|ms| ms.parse().ok())
    }
}

/// Typed decoding of a known event; `None` when the name is unknown or a field is unusable.
fn decode_known(event_name: &str, fields: &[(String, String)]) -> Option<Event> {
    let get = |k: &str| {
        fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let job_id = || get("jobId");
    Some(match event_name {
        name::ADDED => Event::Added {
            job_id: job_id()?,
            name: get("name")?,
        },
        name::WAITING => Event::Waiting {
            job_id: job_id()?,
            prev: get("prev"),
        },
        name::ACTIVE => Event::Active {
            job_id: job_id()?,
            prev: get("prev"),
        },
        name::DELAYED => Event::Delayed {
            job_id: job_id()?,
            delay: parse_u64(&get("delay")?)?,
        },
        name::PROGRESS => Event::Progress {
            job_id: job_id()?,
            data: serde_json::from_str(&get("data")?).ok()?,
        },
        name::COMPLETED => Event::Completed {
            job_id: job_id()?,
            returnvalue: serde_json::from_str(&get("returnvalue")?).ok()?,
            prev: get("prev"),
        },
        name::FAILED => Event::Failed {
            job_id: job_id()?,
            failed_reason: get("failedReason")?,
            prev: get("prev"),
        },
        name::RETRIES_EXHAUSTED => Event::RetriesExhausted {
            job_id: job_id()?,
            attempts_made: u32::try_from(parse_u64(&get("attemptsMade")?)?).ok()?,
        },
        name::WAITING_CHILDREN => Event::WaitingChildren {
            job_id: job_id()?,
            prev: get("prev"),
        },
        name::STALLED => Event::Stalled { job_id: job_id()? },
        name::REMOVED => Event::Removed {
            job_id: job_id()?,
            prev: get("prev"),
        },
        name::CLEANED => Event::Cleaned {
            count: parse_u64(&get("count")?)?,
        },
        name::DRAINED => Event::Drained,
        name::PAUSED => Event::Paused,
        name::RESUMED => Event::Resumed,
        name::DUPLICATED => Event::Duplicated { job_id: job_id()? },
        name::DEDUPLICATED => Event::Deduplicated {
            job_id: job_id()?,
            deduplication_id: get("deduplicationId")?,
            deduplicated_job_id: get("deduplicatedJobId")?,
        },
        _ => return None,
    })
}

/// Integer as written by Lua (`tostring` of a number may carry a fraction or exponent).
fn parse_u64(raw: &str) -> Option<u64> {
    raw.parse::<u64>().ok().or_else(|| {
        raw.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v.trunc() as u64)
    })
}
