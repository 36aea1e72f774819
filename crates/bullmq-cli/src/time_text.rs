//! Durations and instants as people type and read them: `500ms`, `1m30s`, RFC 3339 dates,
//! local wall-clock times and "in 3m 12s" / "2s ago".

use chrono::{DateTime, Local, TimeZone as _, Utc};

/// Milliseconds per unit, largest first (the order [`format_duration_ms`] writes them in).
const UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// Parses a duration into milliseconds: one or more `<integer><unit>` parts with units `ms`,
/// `s`, `m`, `h`, `d` (`500ms`, `5s`, `1m30s`, `2h`), or a bare integer of milliseconds (the
/// unit Node's `every` is in).
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let hint = || {
        format!("expected a duration such as 500ms, 5s, 1m, 1h or 1m30s (bare numbers are milliseconds), got {text:?}")
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(hint());
    }
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(hint());
        }
        let amount: u64 = rest[..digits].parse().map_err(|_| hint())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let per = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, per)| *per)
            .ok_or_else(hint)?;
        total = amount
            .checked_mul(per)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("duration {text:?} is too long"))?;
    }
    Ok(total)
}

/// `ms` written exactly with the largest units first and no zero parts: `90000` → `1m30s`,
/// `500` → `500ms`, `0` → `0ms` (what [`parse_duration_ms`] reads back).
pub(crate) fn format_duration_ms(ms: u64) -> String {
    if ms == 0 {
        return "0ms".to_owned();
    }
    let mut out = String::new();
    let mut rest = ms;
    for (name, per) in UNITS {
        let amount = rest / per;
        if amount > 0 {
            out.push_str(&format!("{amount}{name}"));
            rest -= amount * per;
        }
    }
    out
}

/// How far `at_ms` is from `now_ms`, for people: `in 3m 12s`, `2s ago`, `in 400ms`, `now`.
/// At most the two largest units, the rest dropped (never rounded up, so "in 1m" is never
/// early).
pub(crate) fn format_relative(at_ms: u64, now_ms: u64) -> String {
    let (distance, future) = if at_ms >= now_ms {
        (at_ms - now_ms, true)
    } else {
        (now_ms - at_ms, false)
    };
    if distance == 0 {
        return "now".to_owned();
    }
    let span = if distance < 1_000 {
        format!("{distance}ms")
    } else {
        let parts: Vec<String> = UNITS[..4]
            .iter()
            .scan(distance, |rest, (name, per)| {
                let amount = *rest / per;
                *rest -= amount * per;
                Some((amount, *name))
            })
            .skip_while(|(amount, _)| *amount == 0)
            .take(2)
            .filter(|(amount, _)| *amount > 0)
            .map(|(amount, name)| format!("{amount}{name}"))
            .collect();
        parts.join(" ")
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// Parses an instant: an RFC 3339 date-time (`2027-01-31T09:00:00Z`, `…+01:00`) or
/// milliseconds since the Unix epoch; returns milliseconds since the epoch.
pub(crate) fn parse_instant_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let at = DateTime::parse_from_rfc3339(text).map_err(|e| {
        format!("expected an RFC 3339 date-time (2027-01-31T09:00:00Z) or milliseconds since the epoch, got {text:?}: {e}")
    })?;
    u64::try_from(at.timestamp_millis()).map_err(|_| format!("{text:?} is before 1970"))
}

/// `ms` since the epoch in the system's time zone (the `TZ` variable, else
/// `/etc/localtime`), e.g. `2026-12-01 16:05:00 +01:00`.
pub(crate) fn local_time(ms: u64) -> String {
    format_in(&Local, ms)
}

/// `ms` since the epoch written in `zone` (split out so tests need not depend on the host's
/// zone).
fn format_in<Z: chrono::TimeZone>(zone: &Z, ms: u64) -> String
where
    Z::Offset: std::fmt::Display,
{
    let utc = i64::try_from(ms)
        .ok()
        .and_then(|ms| Utc.timestamp_millis_opt(ms).single());
    match utc {
        Some(utc) => utc
            .with_timezone(zone)
            .format("%Y-%m-%d %H:%M:%S %:z")
            .to_string(),
        // Beyond chrono's range (year 262143): show the raw number rather than nothing.
        None => format!("{ms} ms since the epoch"),
    }
}

/// `ms` since the epoch in local time followed by how far it is from `now_ms`:
/// `2026-12-01 16:05:00 +01:00 (in 3m 12s)`.
pub(crate) fn local_time_and_relative(ms: u64, now_ms: u64) -> String {
    format!("{} ({})", local_time(ms), format_relative(ms, now_ms))
}

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> u64 {
    u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    #[test]
    fn durations_parse_with_units_or_as_milliseconds() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("5s"), Ok(5_000));
        assert_eq!(parse_duration_ms("1m"), Ok(60_000));
        assert_eq!(parse_duration_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("1s250ms"), Ok(1_250));
        assert_eq!(parse_duration_ms(" 750 "), Ok(750));
        assert_eq!(parse_duration_ms("0s"), Ok(0));
    }

    #[test]
    fn bad_durations_are_refused_with_a_hint() {
        for bad in ["", "s", "5 s", "5sec", "1.5s", "-5s", "m5", "5x"] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.contains("500ms, 5s"), "{bad:?}: {err}");
        }
        assert!(parse_duration_ms("99999999999999999d")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn durations_format_exactly_and_read_back() {
        assert_eq!(format_duration_ms(0), "0ms");
        assert_eq!(format_duration_ms(500), "500ms");
        assert_eq!(format_duration_ms(5_000), "5s");
        assert_eq!(format_duration_ms(90_000), "1m30s");
        assert_eq!(format_duration_ms(3_600_000), "1h");
        assert_eq!(format_duration_ms(86_400_001), "1d1ms");
        for ms in [1, 999, 1_000, 61_001, 7_322_000, 90_061_001] {
            assert_eq!(parse_duration_ms(&format_duration_ms(ms)), Ok(ms));
        }
    }

    #[test]
    fn relative_times_keep_the_two_largest_units() {
        let now = 1_000_000_000;
        assert_eq!(format_relative(now, now), "now");
        assert_eq!(format_relative(now + 400, now), "in 400ms");
        assert_eq!(format_relative(now - 2_000, now), "2s ago");
        assert_eq!(format_relative(now + 192_000, now), "in 3m 12s");
        assert_eq!(format_relative(now + 192_999, now), "in 3m 12s");
        assert_eq!(format_relative(now + 3_600_000 + 5_000, now), "in 1h");
        assert_eq!(format_relative(now + 3_660_000, now), "in 1h 1m");
        assert_eq!(format_relative(now - 90_000_000, now), "1d 1h ago");
        assert_eq!(format_relative(now + 1_500, now), "in 1s");
    }

    #[test]
    fn instants_are_rfc_3339_or_epoch_milliseconds() {
        assert_eq!(
            parse_instant_ms("2027-01-31T09:00:00Z"),
            Ok(1_801_386_000_000)
        );
        assert_eq!(
            parse_instant_ms("2027-01-31T10:00:00.5+01:00"),
            Ok(1_801_386_000_500)
        );
        assert_eq!(parse_instant_ms("1801386000000"), Ok(1_801_386_000_000));
        assert!(parse_instant_ms("tomorrow")
            .unwrap_err()
            .contains("RFC 3339"));
        assert!(parse_instant_ms("1960-01-01T00:00:00Z")
            .unwrap_err()
            .contains("before 1970"));
    }

    #[test]
    fn times_are_written_in_the_given_zone() {
        let berlin_winter = FixedOffset::east_opt(3_600).unwrap();
        assert_eq!(
            format_in(&berlin_winter, 1_801_386_000_000),
            "2027-01-31 10:00:00 +01:00"
        );
        assert_eq!(format_in(&Utc, 0), "1970-01-01 00:00:00 +00:00");
    }
}
