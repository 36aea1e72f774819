//! How often a job scheduler runs: Node's `RepeatOptions`, typed, in the JSON shape Node stores
//! under a scheduler job's `opts.repeat`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::lenient;
use crate::options::duration_ms;

/// The schedule of a job scheduler: a fixed interval ([`Repeat::every`]) or a cron pattern
/// ([`Repeat::cron`]), with its bounds.
///
/// Serialises to the object Node stores as `opts.repeat` of every iteration (`every`,
/// `pattern`, `tz`, `offset`, `limit`, `startDate`, `endDate`, `count`, `immediately`);
/// keys it does not know (cron-parser options such as `utc`) are kept in
/// [`Repeat::extra`].
///
/// ```
/// use std::time::Duration;
/// use bullmq_protocol::scheduler::Repeat;
///
/// let hourly = Repeat::cron("0 * * * *").tz("Europe/Berlin").limit(24);
/// assert_eq!(hourly.pattern.as_deref(), Some("0 * * * *"));
/// let fast = Repeat::every(Duration::from_millis(500)).offset(Duration::from_millis(100));
/// assert_eq!(
///     serde_json::to_string(&fast).unwrap(),
///     r#"{"every":500,"offset":100}"#
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Repeat {
    /// Interval in ms (Node `every`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub every: Option<u64>,
    /// Cron pattern, 5 fields or 6 with leading seconds (Node `pattern`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// IANA time zone the pattern is read in (Node `tz`); UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Shift of every `every` slot, in ms (Node `offset`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub offset: Option<u64>,
    /// Maximum number of iterations (Node `limit`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub limit: Option<u64>,
    /// No iteration before this time, ms since the Unix epoch (Node `startDate`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_date: Option<u64>,
    /// No iteration after this time, ms since the Unix epoch (Node `endDate`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_date: Option<u64>,
    /// Run the first iteration now rather than at the first slot (Node `immediately`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immediately: Option<bool>,
    /// Iterations created so far, counting the one carrying these options (Node `count`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub count: Option<u64>,
    /// Keys this type does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Repeat {
    /// Every `interval` (rounded down to whole milliseconds).
    #[must_use]
    pub fn every(interval: Duration) -> Self {
        Self {
            every: Some(duration_ms(interval)),
            ..Self::default()
        }
    }

    /// On a cron `pattern` (validated when the scheduler is upserted).
    #[must_use]
    pub fn cron(pattern: impl Into<String>) -> Self {
        Self {
            pattern: Some(pattern.into()),
            ..Self::default()
        }
    }

    /// Reads the pattern in the IANA time zone `tz` (validated when the scheduler is
    /// upserted; see [`crate::scheduler::cron::validate_time_zone`]).
    #[must_use]
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }

    /// Reads the pattern in the tz-database zone `tz`, typed (no validation left to do).
    ///
    /// ```
    /// use bullmq_protocol::scheduler::{Repeat, Tz};
    /// let r = Repeat::cron("0 9 * * *").time_zone(Tz::America__New_York);
    /// assert_eq!(r.tz.as_deref(), Some("America/New_York"));
    /// ```
    #[must_use]
    pub fn time_zone(mut self, tz: chrono_tz::Tz) -> Self {
        self.tz = Some(tz.name().to_owned());
        self
    }

    /// Shifts every `every` slot by `offset`.
    #[must_use]
    pub fn offset(mut self, offset: Duration) -> Self {
        self.offset = Some(duration_ms(offset));
        self
    }

    /// Stops after `limit` iterations.
    #[must_use]
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// No iteration before `at`.
    #[must_use]
    pub fn start_date(mut self, at: SystemTime) -> Self {
        self.start_date = Some(system_time_ms(at));
        self
    }

    /// No iteration after `at`.
    #[must_use]
    pub fn end_date(mut self, at: SystemTime) -> Self {
        self.end_date = Some(system_time_ms(at));
        self
    }

    /// Runs the first iteration at once.
    #[must_use]
    pub fn immediately(mut self) -> Self {
        self.immediately = Some(true);
        self
    }

    /// Starts counting iterations at `count` (Node `count`: the next upsert creates iteration
    /// `count + 1`).
    #[must_use]
    pub fn count(mut self, count: u64) -> Self {
        self.count = Some(count);
        self
    }

    /// `every` as a [`Duration`].
    #[must_use]
    pub fn every_duration(&self) -> Option<Duration> {
        self.every.map(Duration::from_millis)
    }
}

/// Milliseconds since the Unix epoch of `at` (0 before the epoch).
pub(crate) fn system_time_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map(duration_ms).unwrap_or(0)
}
