//! A zoned wall clock that moves exactly as luxon's `DateTime` does under cron-parser's
//! `CronDate`, DST resolution included.
//!
//! cron-parser finds occurrences by stepping a luxon date: adding units, then snapping to the
//! start of the unit, or setting one wall-clock field. Where such a step lands on a wall time
//! that does not exist (spring forward) or exists twice (fall back), luxon resolves it with its
//! own rule (`fixOffset`: try the offset the date had before the step, then the offset found at
//! that guess). Matching Node's next-run instants means applying the same rule, so this module
//! re-implements luxon's arithmetic over the tz database instead of using a generic "resolve a
//! local time" helper.

use super::zone::Zone;

const MS_PER_SECOND: i64 = 1_000;
const MS_PER_MINUTE: i64 = 60 * MS_PER_SECOND;
const MS_PER_HOUR: i64 = 60 * MS_PER_MINUTE;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;

/// Wall-clock fields of an instant in its zone (luxon's `c`). `day` may overflow its month
/// while a date is being built, as JavaScript's `Date.UTC` allows.
#[derive(Debug, Clone, Copy)]
struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    millisecond: i64,
}

/// An instant and the zone whose wall clock it is read in (a luxon `DateTime`: luxon derives
/// the offset from the instant after every operation, so the instant is the whole state).
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    ts: i64,
    zone: Zone,
}

impl Clock {
    pub(super) fn new(ts: i64, zone: Zone) -> Self {
        Self { ts, zone }
    }

    /// Milliseconds since the epoch.
    pub(super) fn ts(self) -> i64 {
        self.ts
    }

    /// Offset from UTC in seconds at this instant.
    pub(super) fn offset(self) -> i64 {
        self.zone.offset_secs(self.ts)
    }

    fn civil(self) -> Civil {
        let local = self.ts + self.offset() * MS_PER_SECOND;
        let days = local.div_euclid(MS_PER_DAY);
        let in_day = local.rem_euclid(MS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: in_day / MS_PER_HOUR,
            minute: in_day % MS_PER_HOUR / MS_PER_MINUTE,
            second: in_day % MS_PER_MINUTE / MS_PER_SECOND,
            millisecond: in_day % MS_PER_SECOND,
        }
    }

    pub(super) fn year(self) -> i64 {
        self.civil().year
    }
    /// 1–12.
    pub(super) fn month(self) -> u32 {
        self.civil().month as u32
    }
    /// 1–31.
    pub(super) fn day(self) -> u32 {
        self.civil().day as u32
    }
    pub(super) fn hour(self) -> u32 {
        self.civil().hour as u32
    }
    pub(super) fn minute(self) -> u32 {
        self.civil().minute as u32
    }
    pub(super) fn second(self) -> u32 {
        self.civil().second as u32
    }
    pub(super) fn millisecond(self) -> u32 {
        self.civil().millisecond as u32
    }
    /// 0 = Sunday … 6 = Saturday.
    pub(super) fn weekday(self) -> u32 {
        let c = self.civil();
        // 1970-01-01 was a Thursday.
        (days_from_civil(c.year, c.month, c.day) + 4).rem_euclid(7) as u32
    }

    /// Luxon's `set`: replace wall-clock fields, keeping the rest, and find the instant with the
    /// offset this date had as the first guess.
    fn with(self, change: impl FnOnce(&mut Civil)) -> Self {
        let mut civil = self.civil();
        change(&mut civil);
        self.resolved(civil)
    }

    fn resolved(self, civil: Civil) -> Self {
        Self {
            ts: fix_offset(local_ts(civil), self.offset(), self.zone),
            zone: self.zone,
        }
    }

    pub(super) fn set_hour(self, hour: u32) -> Self {
        self.with(|c| c.hour = i64::from(hour))
    }
    pub(super) fn set_minute(self, minute: u32) -> Self {
        self.with(|c| c.minute = i64::from(minute))
    }
    pub(super) fn set_second(self, second: u32) -> Self {
        self.with(|c| c.second = i64::from(second))
    }
    pub(super) fn set_millisecond(self, millisecond: u32) -> Self {
        self.with(|c| c.millisecond = i64::from(millisecond))
    }

    /// Luxon's `plus` of hours, minutes, seconds or milliseconds: elapsed time, not wall time.
    pub(super) fn plus_ms(self, ms: i64) -> Self {
        Self {
            ts: self.ts + ms,
            zone: self.zone,
        }
    }

    /// Luxon's `plus({ days: 1 })`: the same wall time on the next calendar day.
    pub(super) fn plus_day(self) -> Self {
        let mut c = self.civil();
        c.day = c.day.min(days_in_month(c.year, c.month)) + 1;
        self.resolved(c)
    }

    /// Luxon's `plus({ months: 1 })`: the same wall time and day (clamped to the month's length)
    /// in the next month.
    pub(super) fn plus_month(self) -> Self {
        let mut c = self.civil();
        c.month += 1;
        c.day = c.day.min(days_in_month(c.year, c.month));
        self.resolved(c)
    }

    pub(super) fn start_of_month(self) -> Self {
        self.with(|c| {
            c.day = 1;
            c.hour = 0;
            c.minute = 0;
            c.second = 0;
            c.millisecond = 0;
        })
    }
    pub(super) fn start_of_day(self) -> Self {
        self.with(|c| {
            c.hour = 0;
            c.minute = 0;
            c.second = 0;
            c.millisecond = 0;
        })
    }
    pub(super) fn start_of_hour(self) -> Self {
        self.with(|c| {
            c.minute = 0;
            c.second = 0;
            c.millisecond = 0;
        })
    }
    pub(super) fn start_of_minute(self) -> Self {
        self.with(|c| {
            c.second = 0;
            c.millisecond = 0;
        })
    }
    /// Luxon's `endOf('day')`: the start of the next day, less one millisecond.
    pub(super) fn end_of_day(self) -> Self {
        self.plus_day().start_of_day().plus_ms(-1)
    }
}

/// Luxon's `fixOffset`: the instant for wall time `local` (milliseconds, as if UTC), guessing
/// offset `guess` (seconds) first. In a gap the wall time is kept and read with the later offset,
/// so 02:30 in a skipped hour becomes 03:30; in an overlap the guess picks the occurrence.
fn fix_offset(local: i64, guess: i64, zone: Zone) -> i64 {
    let mut utc = local - guess * MS_PER_SECOND;
    let o2 = zone.offset_secs(utc);
    if o2 == guess {
        return utc;
    }
    utc -= (o2 - guess) * MS_PER_SECOND;
    let o3 = zone.offset_secs(utc);
    if o2 == o3 {
        return utc;
    }
    local - o2.min(o3) * MS_PER_SECOND
}

/// `Date.UTC` of the fields: months and days past their ends roll over.
fn local_ts(c: Civil) -> i64 {
    let year = c.year + (c.month - 1).div_euclid(12);
    let month = (c.month - 1).rem_euclid(12) + 1;
    let days = days_from_civil(year, month, 1) + c.day - 1;
    days * MS_PER_DAY
        + c.hour * MS_PER_HOUR
        + c.minute * MS_PER_MINUTE
        + c.second * MS_PER_SECOND
        + c.millisecond
}

fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` of `year`; a month past December counts in the following year (luxon's
/// `daysInMonth` does the same).
pub(super) fn days_in_month(year: i64, month: i64) -> i64 {
    let year = year + (month - 1).div_euclid(12);
    match (month - 1).rem_euclid(12) + 1 {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Tz;

    const BERLIN: Zone = Zone::Named(Tz::Europe__Berlin);

    #[test]
    fn civil_round_trip() {
        for days in [-800_000, -1, 0, 59, 60, 365, 10_957, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(Clock::new(0, super::super::zone::UTC).weekday(), 4);
    }

    #[test]
    fn a_skipped_wall_time_reads_with_the_later_offset() {
        // 2026-03-29 00:00 CET; 02:30 does not exist that night in Berlin.
        let midnight = Clock::new(1_774_738_800_000, BERLIN);
        let at = midnight.set_hour(2).set_minute(30);
        assert_eq!((at.hour(), at.minute()), (3, 30));
        assert_eq!(at.ts(), 1_774_747_800_000); // 01:30Z
    }

    #[test]
    fn a_repeated_wall_time_keeps_the_offset_it_had() {
        // 2026-10-25 00:00 CEST; 02:30 happens at 00:30Z (CEST) and 01:30Z (CET).
        let midnight = Clock::new(1_792_879_200_000, BERLIN);
        assert_eq!(midnight.set_hour(2).set_minute(30).ts(), 1_792_888_200_000);
        // From 02:00 CET (01:00Z) the guess is +01:00: the second 02:30.
        let second_two = Clock::new(1_792_890_000_000, BERLIN);
        assert_eq!(second_two.set_minute(30).ts(), 1_792_891_800_000);
    }
}
