//! Replays cron-parser's next runs (as Node BullMQ 6.7.0 computes them) through
//! [`CronSchedule`].
//!
//! `tests/fixtures/cron_next.json` is written by `integration-tests/node/cron_fixture.js`, which
//! holds the table of cases (patterns, zones, start and end dates) and adds seeded random ones
//! (well-formed patterns around DST transitions, and malformed ones). After changing the table,
//! regenerate it from the repository root with:
//!
//! ```text
//! cd integration-tests/node && TZ=UTC node cron_fixture.js \
//!   > ../../crates/bullmq-protocol/tests/fixtures/cron_next.json
//! ```
//!
//! Each case's `next` is a chain: every value is cron-parser's next run after the previous one
//! (from a fresh parse, as BullMQ does); fewer than five values means cron-parser found no
//! further run, so ours must be `None` there too. Cases with `error` are patterns or zones
//! cron-parser refuses.

use bullmq_protocol::scheduler::cron::{CronError, CronSchedule};
use serde_json::Value;

const FIXTURE: &str = include_str!("fixtures/cron_next.json");

/// How many values the generator asks for per case.
const COUNT: usize = 5;

struct Case<'a> {
    pattern: &'a str,
    tz: Option<&'a str>,
    raw: &'a Value,
}

fn cases(all: &Value) -> Vec<Case<'_>> {
    all.as_array()
        .expect("the fixture is a JSON array")
        .iter()
        .map(|raw| Case {
            pattern: raw["pattern"].as_str().expect("pattern"),
            tz: raw["tz"].as_str(),
            raw,
        })
        .collect()
}

fn describe(case: &Case<'_>) -> String {
    format!("pattern {:?} tz {:?}", case.pattern, case.tz)
}

#[test]
fn next_runs_match_cron_parser() {
    let all: Value = serde_json::from_str(FIXTURE).expect("valid fixture JSON");
    let mut checked = 0;
    for case in cases(&all).iter().filter(|c| c.raw.get("next").is_some()) {
        let schedule = CronSchedule::parse(case.pattern, case.tz)
            .unwrap_or_else(|e| panic!("{}: Node accepts it, we refuse: {e}", describe(case)));
        let current = case.raw["current"].as_u64().expect("current");
        let end = case.raw["end"].as_u64();
        let expected: Vec<u64> = case.raw["next"]
            .as_array()
            .expect("next")
            .iter()
            .map(|v| v.as_u64().expect("ms"))
            .collect();
        let mut ours = Vec::new();
        let mut at = current;
        while ours.len() < COUNT {
            match schedule.next_after(at, end) {
                Some(next) => {
                    ours.push(next);
                    at = next;
                }
                None => break,
            }
        }
        assert_eq!(
            ours,
            expected,
            "{} from {current} end {end:?}",
            describe(case)
        );
        checked += 1;
    }
    assert!(
        checked >= 100,
        "only {checked} cases with runs in the fixture"
    );
}

#[test]
fn refusals_match_cron_parser() {
    let all: Value = serde_json::from_str(FIXTURE).expect("valid fixture JSON");
    let mut checked = 0;
    for case in cases(&all).iter().filter(|c| c.raw.get("error").is_some()) {
        let message = case.raw["error"].as_str().expect("error");
        let err = CronSchedule::parse(case.pattern, case.tz)
            .expect_err(&format!("{}: Node refuses it ({message})", describe(case)));
        // cron-parser only notices a bad zone when it builds its first date.
        if message.starts_with("CronDate: unhandled timestamp") {
            assert_eq!(
                err,
                CronError::UnknownTimeZone(case.tz.expect("a zone").to_owned()),
                "{}",
                describe(case)
            );
        } else {
            assert_eq!(
                err,
                CronError::InvalidPattern {
                    pattern: case.pattern.to_owned(),
                    reason: message.to_owned(),
                },
                "{}",
                describe(case)
            );
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} refused cases in the fixture");
}
