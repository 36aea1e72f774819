//! Cron patterns and their next run, computed as Node BullMQ 6.7.0 computes them.
//!
//! Node BullMQ's job schedulers ask `cron-parser` 5 for every next run: a fresh
//! `CronExpressionParser.parse(pattern, { currentDate, tz, endDate })` and one `next()`. Two
//! clients sharing a scheduler must agree on those instants to the millisecond (the next job's
//! id is `repeat:<scheduler>:<millis>`), so this module reproduces cron-parser itself (its
//! grammar, its step-by-step search, and the way its date library, luxon, resolves wall times
//! in DST gaps and overlaps) rather than a cron dialect of its own.
//! `tests/cron_fixture.rs` replays cron-parser's answers for a table of patterns and zones.

mod clock;
mod pattern;
mod zone;

use clock::Clock;
use pattern::Fields;
use zone::Zone;

/// cron-parser gives up after this many search steps (`LOOP_LIMIT`), and BullMQ then schedules
/// nothing; counting the same steps keeps "no next run" identical too.
const LOOP_LIMIT: u32 = 10_000;

/// The largest instant a JavaScript `Date` holds (±8.64e15 ms).
const MAX_JS_DATE_MS: u64 = 8_640_000_000_000_000;

/// A parsed cron pattern bound to a time zone, computing next runs as Node BullMQ 6.7.0 does
/// (cron-parser 5.x).
///
/// Accepted: 5 fields (`minute hour day-of-month month day-of-week`), or 6 with leading seconds;
/// fewer are padded from the left as cron-parser does (`5` alone is a day of week). Each field
/// takes `*`, `?` (same as `*`), numbers, `a-b` ranges, `/n` steps and `,` lists; months and
/// weekdays also take three-letter English names (`JAN`, `mon`), weekday 7 is Sunday, day of
/// month takes `L` (last day), day of week takes `dL` (last such weekday of the month) and `d#n`
/// (n-th such weekday, 1–5). `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`,
/// `@minutely`, `@secondly`, `@weekdays` and `@weekends` are aliases. When both day fields are
/// restricted, a day matching either runs (cron's OR rule).
///
/// Not accepted, by cron-parser either: `W` (nearest weekday), `L-n`, a 7th (year) field, values
/// out of range, duplicate values (`0,7` in day of week).
///
/// Daylight saving time, as in Node: a run whose wall time falls in a spring-forward gap happens
/// at the same wall time read after the jump (02:30 in Berlin on 2026-03-29 runs at 03:30), and
/// a run in the repeated hour of a fall-back happens once, at its first occurrence, unless the
/// hour field is `*` (then both repeated hours run). cron-parser's stepping also has odd corners
/// that are reproduced, not corrected: a daily run is skipped that day when the gap is at
/// midnight (`0 0 * * *` in America/Santiago on 2026-09-06) or is half an hour long (`15 2 * * *`
/// in Australia/Lord_Howe on 2026-10-04), and a search can exhaust the step limit on a
/// half-hour fall-back (`15 1 * * *` in Australia/Lord_Howe after 2026-04-04T14:15Z: no next
/// run).
///
/// Patterns Node accepts that we refuse: hashed values (`H`, `H(0-29)`, `H/5`). Without a
/// `hashSeed` option, which BullMQ does not pass, cron-parser picks them with a random seed on
/// every parse, so Node's own next run is random on every evaluation. Patterns we compute
/// differently: none known; the zone database is `chrono-tz`'s where Node uses ICU's, so a zone
/// whose rules changed between their releases may differ around that change.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    fields: Fields,
    zone: Zone,
}

/// Why a pattern or zone was refused; Display wording close to cron-parser's errors where
/// sensible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    /// The pattern is not one cron-parser accepts (or uses hashed values, see [`CronSchedule`]).
    #[error("invalid cron pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// cron-parser's message for it.
        reason: String,
    },
    /// The name is not a time zone Node knows.
    #[error("unknown time zone {0:?}")]
    UnknownTimeZone(String),
}

/// Validates an IANA time zone name (used by the typed options builder).
///
/// Accepts what Node BullMQ's `tz` option accepts: tz database names and links, matched
/// case-insensitively (`Europe/Berlin`, `us/eastern`), `UTC`/`GMT`, and luxon's fixed offsets
/// `UTC+5`, `UTC-03:30`.
pub fn validate_time_zone(name: &str) -> Result<(), CronError> {
    Zone::from_name(name).map(|_| ())
}

impl CronSchedule {
    /// Parses `pattern` in time zone `tz` (a tz database name, see [`validate_time_zone`]).
    ///
    /// `None` means UTC. Node passes no zone to cron-parser then, which uses the process's
    /// local zone; the Node processes this crate interoperates with run with `TZ=UTC`, and a
    /// schedule shared by several hosts must not depend on any one host's zone. `Some("local")`
    /// is read the same way.
    pub fn parse(pattern: &str, tz: Option<&str>) -> Result<Self, CronError> {
        let zone = match tz {
            Some(name) => Zone::from_name(name)?,
            None => zone::UTC,
        };
        let fields = pattern::parse(pattern).map_err(|reason| CronError::InvalidPattern {
            pattern: pattern.to_owned(),
            reason,
        })?;
        Ok(Self { fields, zone })
    }

    /// First occurrence strictly after `after_ms` (ms since epoch), exactly as
    /// cron-parser's `CronExpressionParser.parse(pattern, {currentDate: after_ms, tz}).next()`;
    /// `None` when there is none (or it would be after `end_ms` if given: cron-parser's
    /// `endDate`, inclusive).
    ///
    /// As in cron-parser, an `after_ms` with milliseconds is first rounded up to the next whole
    /// second, which may itself be the result; `end_ms` of `Some(0)` means no end (cron-parser
    /// ignores a falsy end date); and the search gives up (`None`) after cron-parser's step
    /// limit, which only patterns that can never match (`0 0 31 4,6 *`) or match years apart
    /// reach.
    pub fn next_after(&self, after_ms: u64, end_ms: Option<u64>) -> Option<u64> {
        if after_ms > MAX_JS_DATE_MS {
            return None;
        }
        let end = end_ms
            .filter(|&end| end != 0)
            .map(|end| end.min(MAX_JS_DATE_MS) as i64);
        // cron-parser starts from the end date when the current date is past it.
        let start = match end {
            Some(end) if after_ms as i64 > end => end,
            _ => after_ms as i64,
        };
        Search::new(&self.fields, Clock::new(start, self.zone))
            .run(end)
            .map(|ts| ts as u64)
    }
}

/// One `next()` of cron-parser: its `CronDate` (a luxon date plus DST bookkeeping) stepped
/// until every field matches.
struct Search<'a> {
    fields: &'a Fields,
    date: Clock,
    /// First wall hour skipped by a spring-forward the search stepped over, and the hour it
    /// landed on (cron-parser's `dstStart`/`dstStartLandingHour`).
    dst_start: Option<(u32, u32)>,
    /// Hour that repeated in a fall-back the search stepped into (`dstEnd`).
    dst_end: Option<u32>,
    /// Last day checked for a DST transition, and the answer (cron-parser caches it likewise).
    transition_day: Option<((i64, u32, u32), bool)>,
}

/// The units cron-parser steps by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

impl<'a> Search<'a> {
    fn new(fields: &'a Fields, date: Clock) -> Self {
        Self {
            fields,
            date,
            dst_start: None,
            dst_end: None,
            transition_day: None,
        }
    }

    /// cron-parser's `#findSchedule` (forward).
    fn run(mut self, end: Option<i64>) -> Option<i64> {
        let start = self.date.ts();
        if self.date.millisecond() > 0 {
            self.date = self.date.set_millisecond(0);
            self.step(Unit::Second);
        }
        let f = self.fields;
        let mut steps = 0;
        loop {
            steps += 1;
            if steps >= LOOP_LIMIT {
                return None;
            }
            if end.is_some_and(|end| self.date.ts() > end) {
                return None;
            }
            if !f.month.contains(&self.date.month()) {
                self.step(Unit::Month);
                continue;
            }
            if !self.day_matches() {
                self.step(Unit::Day);
                continue;
            }
            if !self.hour_matches() {
                continue;
            }
            if !f.minute.contains(&self.date.minute()) {
                self.advance_minute();
                continue;
            }
            if !f.second.contains(&self.date.second()) {
                self.advance_second();
                continue;
            }
            if self.date.ts() == start {
                self.step(Unit::Second);
                continue;
            }
            return Some(self.date.ts());
        }
    }

    /// cron-parser's `applyDateOperation(Add, unit)`: add one unit (snapping to its start),
    /// noting a spring-forward jump or a repeated hour crossed by a sub-day step.
    fn step(&mut self, unit: Unit) {
        let d = self.date;
        let next = match unit {
            Unit::Month => d.plus_month().start_of_month(),
            Unit::Day => d.plus_day().start_of_day(),
            Unit::Hour => d.plus_ms(3_600_000).start_of_hour(),
            Unit::Minute => d.plus_ms(60_000).start_of_minute(),
            Unit::Second => d.plus_ms(1_000),
        };
        self.date = next;
        if matches!(unit, Unit::Month | Unit::Day) {
            return;
        }
        let (previous_hour, hour) = (d.hour(), next.hour());
        let advance = (hour + 24 - previous_hour) % 24;
        // cron-parser skips the bookkeeping when every hour matches anyway.
        let all_hours = self.fields.hour.len() == 24;
        if next.offset() > d.offset() && advance >= 2 {
            if !all_hours {
                self.dst_start = Some(((previous_hour + 1) % 24, hour));
            }
        } else if advance == 0 && next.minute() == 0 && next.second() == 0 && !all_hours {
            self.dst_end = Some(hour);
        }
    }

    fn advance_second(&mut self) {
        let seconds = &self.fields.second;
        match seconds.iter().find(|&&s| s > self.date.second()) {
            Some(&s) => self.date = self.date.set_second(s),
            None => {
                self.step(Unit::Minute);
                self.date = self.date.set_second(seconds[0]);
            }
        }
    }

    fn advance_minute(&mut self) {
        let (minutes, seconds) = (&self.fields.minute, &self.fields.second);
        match minutes.iter().find(|&&m| m > self.date.minute()) {
            Some(&m) => self.date = self.date.set_minute(m),
            None => {
                self.step(Unit::Hour);
                self.date = self.date.set_minute(minutes[0]);
            }
        }
        self.date = self.date.set_second(seconds[0]);
    }

    /// cron-parser's `#matchDayOfMonth`: both day fields, with the OR rule when both are
    /// restricted.
    fn day_matches(&self) -> bool {
        let (dom, dow) = (&self.fields.day_of_month, &self.fields.day_of_week);
        let d = self.date;
        let (day, weekday) = (d.day(), d.weekday());
        let last_day = clock::days_in_month(d.year(), i64::from(d.month())) as u32;
        let matched_dom = dom.days.contains(&day) || (dom.last && day == last_day);
        let nth_ok = dow.nth == 0 || day.div_ceil(7) == dow.nth;
        let matched_dow = (dow.days.contains(&weekday) && nth_ok)
            || (dow.last && day + 7 > last_day && dow.last_days.contains(&weekday));
        (!dom.wildcard && !dow.wildcard && (matched_dom || matched_dow))
            || (matched_dom && dow.wildcard)
            || (dom.wildcard && !dow.wildcard && matched_dow)
    }

    /// cron-parser's `#matchHour`, which also moves the date when the hour does not match.
    fn hour_matches(&mut self) -> bool {
        let hours = &self.fields.hour;
        let hour = self.date.hour();
        // A scheduled hour skipped by spring-forward runs in the hour the clock landed on.
        if let Some((mut skipped, landing)) = self.dst_start {
            if landing == hour {
                while skipped != hour {
                    if hours.contains(&skipped) {
                        return true;
                    }
                    skipped = (skipped + 1) % 24;
                }
            }
        }
        // The repeated hour of a fall-back does not run a second time.
        if self.dst_end == Some(hour) {
            self.dst_end = None;
            self.step(Unit::Hour);
            return false;
        }
        if hours.contains(&hour) {
            return true;
        }
        self.dst_start = None;
        let Some(&next_hour) = hours.iter().find(|&&h| h > hour) else {
            self.step(Unit::Day);
            return false;
        };
        if self.is_transition_day() {
            // Setting the hour directly could land in the gap or the overlap; step instead.
            for _ in 0..next_hour - hour {
                self.step(Unit::Hour);
                if self.date.hour() >= next_hour {
                    break;
                }
            }
        } else {
            self.date = self.date.set_hour(next_hour);
        }
        self.date = self.date.set_minute(self.fields.minute[0]);
        self.date = self.date.set_second(self.fields.second[0]);
        false
    }

    /// Whether the date's calendar day has a UTC offset change (cron-parser's
    /// `#checkDstTransition`).
    fn is_transition_day(&mut self) -> bool {
        let d = self.date;
        let key = (d.year(), d.month(), d.day());
        if let Some((cached, answer)) = self.transition_day {
            if cached == key {
                return answer;
            }
        }
        let answer = d.start_of_day().offset() != d.end_of_day().offset();
        self.transition_day = Some((key, answer));
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-03-02T12:00:00Z, a Monday.
    const MONDAY_NOON: u64 = 1_772_452_800_000;

    #[test]
    fn next_is_strictly_after_and_rounds_milliseconds_up() {
        let every_5s = CronSchedule::parse("*/5 * * * * *", None).unwrap();
        assert_eq!(
            every_5s.next_after(MONDAY_NOON, None),
            Some(MONDAY_NOON + 5_000)
        );
        assert_eq!(
            every_5s.next_after(MONDAY_NOON + 4_999, None),
            Some(MONDAY_NOON + 5_000)
        );
        assert_eq!(
            every_5s.next_after(MONDAY_NOON + 5_001, None),
            Some(MONDAY_NOON + 10_000)
        );
    }

    #[test]
    fn end_date_is_inclusive() {
        let quarter = CronSchedule::parse("*/15 * * * *", None).unwrap();
        let at_15 = MONDAY_NOON + 15 * 60_000;
        assert_eq!(quarter.next_after(MONDAY_NOON, Some(at_15)), Some(at_15));
        assert_eq!(quarter.next_after(MONDAY_NOON, Some(at_15 - 1)), None);
        assert_eq!(quarter.next_after(at_15, Some(at_15)), None);
    }

    #[test]
    fn a_pattern_that_never_matches_has_no_next_run() {
        let never = CronSchedule::parse("0 0 31 4,6 *", None).unwrap();
        assert_eq!(never.next_after(MONDAY_NOON, None), None);
    }

    #[test]
    fn bad_patterns_are_refused_with_cron_parsers_reason() {
        let err = CronSchedule::parse("61 * * * *", None).unwrap_err();
        assert_eq!(
            err,
            CronError::InvalidPattern {
                pattern: "61 * * * *".to_owned(),
                reason: "Constraint error, got value 61 expected range 0-59".to_owned(),
            }
        );
        assert_eq!(
            err.to_string(),
            "invalid cron pattern \"61 * * * *\": Constraint error, got value 61 expected range 0-59"
        );
        for bad in [
            "* * * * * * *",
            "0 0 LW * *",
            "@DAILY",
            "0 0 * * 5#6",
            "H * * * *",
        ] {
            assert!(
                matches!(
                    CronSchedule::parse(bad, None),
                    Err(CronError::InvalidPattern { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_zones_are_refused() {
        assert_eq!(
            CronSchedule::parse("* * * * *", Some("Mars/Olympus_Mons")).unwrap_err(),
            CronError::UnknownTimeZone("Mars/Olympus_Mons".to_owned())
        );
        assert_eq!(
            validate_time_zone("Europe/Atlantis")
                .unwrap_err()
                .to_string(),
            "unknown time zone \"Europe/Atlantis\""
        );
        assert_eq!(validate_time_zone("Asia/Kolkata"), Ok(()));
        assert_eq!(validate_time_zone("UTC+05:30"), Ok(()));
    }
}
