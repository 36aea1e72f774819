//! Time zone names as luxon (cron-parser's date library) reads them, backed by the tz database
//! compiled into `chrono-tz`.

use chrono::{Offset, TimeZone};
use chrono_tz::Tz;

use super::CronError;

/// A zone a schedule's wall clock runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Zone {
    /// A constant offset from UTC, in seconds (UTC itself, or luxon's `UTC+5`-style specifiers).
    Fixed(i64),
    /// A tz database zone, whose offset changes with daylight saving time and history.
    Named(Tz),
}

/// What luxon calls `UTC`/`GMT`, and what an absent zone means here (see `CronSchedule::parse`).
pub(super) const UTC: Zone = Zone::Fixed(0);

impl Zone {
    /// Resolves `name` as luxon's `normalizeZone` does for a string.
    ///
    /// Luxon lower-cases the name for its own keywords, accepts `UTC±H[:MM]` specifiers, and
    /// otherwise asks `Intl` (ICU) for the IANA zone, which matches names case-insensitively and
    /// knows the tz database's backward-compatible links (`US/Eastern`, `Asia/Calcutta`).
    pub(super) fn from_name(name: &str) -> Result<Self, CronError> {
        let unknown = || CronError::UnknownTimeZone(name.to_owned());
        let lowered = name.to_ascii_lowercase();
        match lowered.as_str() {
            // Luxon's "process zone" keywords: the process zone of the Node harness is UTC
            // (TZ=UTC), and a distributed scheduler must not depend on the host's zone anyway.
            "local" | "system" | "default" | "utc" | "gmt" => return Ok(UTC),
            // ICU refuses the tz database's placeholder zone, so Node does too.
            "factory" => return Err(unknown()),
            _ => {}
        }
        if let Some(offset) = fixed_offset_specifier(&lowered) {
            return Ok(Self::Fixed(offset));
        }
        Tz::from_str_insensitive(name)
            .map(Self::Named)
            .map_err(|_| unknown())
    }

    /// The zone's offset from UTC at instant `ts_ms`, in seconds (local = UTC + offset).
    pub(super) fn offset_secs(self, ts_ms: i64) -> i64 {
        match self {
            Self::Fixed(offset) => offset,
            Self::Named(tz) => match chrono::DateTime::from_timestamp_millis(ts_ms) {
                Some(utc) => i64::from(
                    tz.offset_from_utc_datetime(&utc.naive_utc())
                        .fix()
                        .local_minus_utc(),
                ),
                // Outside chrono's range (never reached: instants are bounded by JS dates).
                None => 0,
            },
        }
    }
}

/// Luxon's `FixedOffsetZone.parseSpecifier`: `utc`, `utc+5`, `utc-03:30` (already lower-cased),
/// as an offset in seconds. Like luxon, the hour is not range-checked (`utc+25` is +25:00) and
/// the minutes take the hour's sign (`utc-0:30` is -00:30).
fn fixed_offset_specifier(lowered: &str) -> Option<i64> {
    let rest = lowered.strip_prefix("utc")?;
    if rest.is_empty() {
        return Some(0);
    }
    let (sign, rest) = match rest.as_bytes()[0] {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let (hours, minutes) = match rest.split_once(':') {
        Some((hours, minutes)) => (hours, Some(minutes)),
        None => (rest, None),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !(1..=2).contains(&hours.len()) || !all_digits(hours) {
        return None;
    }
    let minutes: i64 = match minutes {
        Some(m) if m.len() == 2 && all_digits(m) => m.parse().ok()?,
        Some(_) => return None,
        None => 0,
    };
    let hours: i64 = hours.parse().ok()?;
    Some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luxon_specifiers_and_keywords() {
        assert_eq!(Zone::from_name("UTC"), Ok(UTC));
        assert_eq!(Zone::from_name("gmt"), Ok(UTC));
        assert_eq!(Zone::from_name("UTC+5"), Ok(Zone::Fixed(5 * 3600)));
        assert_eq!(
            Zone::from_name("utc-03:30"),
            Ok(Zone::Fixed(-(3 * 3600 + 1800)))
        );
        assert_eq!(Zone::from_name("UTC-0:30"), Ok(Zone::Fixed(-1800)));
        assert_eq!(Zone::from_name("UTC+25"), Ok(Zone::Fixed(25 * 3600)));
        assert!(Zone::from_name("UTC+123").is_err());
        assert!(Zone::from_name("UTC+5:3").is_err());
    }

    #[test]
    fn iana_names_are_case_insensitive_and_include_links() {
        assert_eq!(
            Zone::from_name("europe/berlin"),
            Ok(Zone::Named(Tz::Europe__Berlin))
        );
        assert!(Zone::from_name("US/Eastern").is_ok());
        assert!(Zone::from_name("Factory").is_err());
        assert!(Zone::from_name("").is_err());
        assert!(Zone::from_name("Mars/Olympus_Mons").is_err());
    }
}
