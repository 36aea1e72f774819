//! Sorted-set scores of the `delayed` and `prioritized` zsets.
//!
//! Both encode two numbers in one Redis score (a double), so both must stay below 2⁵³ to be
//! exact:
//!
//! - **delayed**: `ready_at_ms · 0x1000 + sequence`, where `sequence` (12 bits) keeps jobs that
//!   become ready in the same millisecond in insertion order. BullMQ's scripts pick the sequence
//!   as "one more than the highest score already in that millisecond's bucket, capped at
//!   `0xfff`" — [`next_delayed_score`] is that rule.
//! - **prioritized**: `priority · 2³² + (pc mod 2³²)`, where `pc` is the queue's priority counter
//!   (`INCR {queue}:pc`), so equal priorities are FIFO and lower numbers run first.
//!
//! ```
//! use bullmq_protocol::score::{delayed_score, ready_at_from_score, priority_score};
//!
//! let s = delayed_score(1_700_000_000_000, 3);
//! assert_eq!(ready_at_from_score(s as f64), 1_700_000_000_000);
//! assert!(priority_score(1, 99) < priority_score(2, 1));
//! ```

/// Multiplier of the ready time in a delayed score (`0x1000`: 12 bits of sequence).
pub const DELAYED_SCORE_MULTIPLIER: u64 = 0x1000;

/// Largest sequence number within one millisecond of a delayed score.
pub const DELAYED_SEQUENCE_MAX: u64 = DELAYED_SCORE_MULTIPLIER - 1;

/// Latest ready time (ms since the Unix epoch) whose delayed score, including the sequence,
/// is exact in a double: `(2⁵³ − 1) / 0x1000`, about 2039-09-07.
///
/// Node BullMQ does not check this; past it, jobs still fire at the right millisecond but the
/// order of jobs due in the same millisecond is lost. We reject such delays in validation.
pub const MAX_READY_AT_MS: u64 = ((1u64 << 53) - 1) / DELAYED_SCORE_MULTIPLIER;

/// Highest allowed priority: Node's `PRIORITY_LIMIT`, `2²¹ − 1` = 2 097 151.
///
/// `0` means "no priority" (the job goes to `wait`, ahead of all prioritized jobs).
pub const MAX_PRIORITY: u32 = (1 << 21) - 1;

/// Multiplier of the priority in a prioritized score (`2³²`).
pub const PRIORITY_SCORE_MULTIPLIER: u64 = 1 << 32;

/// Delayed score of a job ready at `ready_at_ms` with the given within-millisecond sequence
/// (only the low 12 bits are used).
#[must_use]
pub fn delayed_score(ready_at_ms: u64, sequence: u64) -> u64 {
    ready_at_ms
        .saturating_mul(DELAYED_SCORE_MULTIPLIER)
        .saturating_add(sequence & DELAYED_SEQUENCE_MAX)
}

/// Delayed score for a new job, given the highest score already present in its millisecond's
/// bucket (`ZREVRANGEBYSCORE delayed max min LIMIT 0 1`), as BullMQ's scripts choose it.
///
/// An empty bucket gives sequence 0; a full bucket (4096 jobs in one millisecond) keeps giving
/// the bucket's last score, so those jobs share a score and order by member id.
#[must_use]
pub fn next_delayed_score(ready_at_ms: u64, current_max_in_bucket: Option<u64>) -> u64 {
    let min = delayed_score(ready_at_ms, 0);
    let max = delayed_score(ready_at_ms, DELAYED_SEQUENCE_MAX);
    match current_max_in_bucket {
        Some(current) if current >= max => max,
        Some(current) if current >= min => current + 1,
        _ => min,
    }
}

/// Inclusive score range of one millisecond's bucket in the delayed zset.
#[must_use]
pub fn delayed_bucket(ready_at_ms: u64) -> (u64, u64) {
    (
        delayed_score(ready_at_ms, 0),
        delayed_score(ready_at_ms, DELAYED_SEQUENCE_MAX),
    )
}

/// Ready time (ms since the Unix epoch) encoded in a delayed score as Redis returns it.
///
/// Negative or non-finite scores (not written by BullMQ) give 0.
#[must_use]
pub fn ready_at_from_score(score: f64) -> u64 {
    if score.is_finite() && score > 0.0 {
        // `as` saturates; floor division matches the scripts' `math.floor(score / 0x1000)`.
        (score / DELAYED_SCORE_MULTIPLIER as f64).floor() as u64
    } else {
        0
    }
}

/// Within-millisecond sequence encoded in a delayed score.
#[must_use]
pub fn sequence_from_score(score: u64) -> u64 {
    score & DELAYED_SEQUENCE_MAX
}

/// Prioritized score of a job with `priority` and the value `counter` returned by
/// `INCR {queue}:pc` (taken modulo 2³², as the scripts do).
#[must_use]
pub fn priority_score(priority: u32, counter: u64) -> u64 {
    u64::from(priority) * PRIORITY_SCORE_MULTIPLIER + counter % PRIORITY_SCORE_MULTIPLIER
}

/// Priority encoded in a prioritized score as Redis returns it.
#[must_use]
pub fn priority_from_score(score: f64) -> u32 {
    if score.is_finite() && score > 0.0 {
        let p = (score / PRIORITY_SCORE_MULTIPLIER as f64).floor();
        p.min(f64::from(u32::MAX)) as u32
    } else {
        0
    }
}

/// Counter part (mod 2³²) of a prioritized score.
#[must_use]
pub fn counter_from_priority_score(score: u64) -> u64 {
    score % PRIORITY_SCORE_MULTIPLIER
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constants_match_node() {
        assert_eq!(MAX_PRIORITY, 2_097_151);
        assert_eq!(DELAYED_SCORE_MULTIPLIER, 4096);
        assert!(delayed_score(MAX_READY_AT_MS, DELAYED_SEQUENCE_MAX) < 1 << 53);
        assert!(delayed_score(MAX_READY_AT_MS + 1, 0) >= 1 << 53);
        assert!(priority_score(MAX_PRIORITY, u64::MAX) < 1 << 53);
    }

    #[test]
    fn delayed_score_examples() {
        assert_eq!(delayed_score(1, 0), 4096);
        assert_eq!(delayed_score(1, 5), 4101);
        // only 12 bits of sequence
        assert_eq!(delayed_score(1, 0x1005), 4101);
        assert_eq!(ready_at_from_score(4101.0), 1);
        assert_eq!(sequence_from_score(4101), 5);
        assert_eq!(ready_at_from_score(-1.0), 0);
        assert_eq!(ready_at_from_score(f64::NAN), 0);
    }

    #[test]
    fn next_delayed_score_follows_bucket() {
        let t = 1_700_000_000_000;
        let (min, max) = delayed_bucket(t);
        assert_eq!(next_delayed_score(t, None), min);
        assert_eq!(next_delayed_score(t, Some(min)), min + 1);
        assert_eq!(next_delayed_score(t, Some(max - 1)), max);
        assert_eq!(next_delayed_score(t, Some(max)), max);
        // a score from another bucket (should not happen) falls back to the bucket start
        assert_eq!(next_delayed_score(t, Some(min - 1)), min);
    }

    #[test]
    fn priority_examples() {
        assert_eq!(priority_score(1, 1), (1 << 32) + 1);
        assert_eq!(priority_score(0, (1 << 32) + 7), 7);
        assert_eq!(priority_from_score(((1u64 << 32) * 5 + 9) as f64), 5);
        assert_eq!(counter_from_priority_score((1 << 32) * 5 + 9), 9);
        assert_eq!(priority_from_score(-3.0), 0);
    }

    proptest! {
        #[test]
        fn delayed_round_trip(t in 0..=MAX_READY_AT_MS, seq in 0..=DELAYED_SEQUENCE_MAX) {
            let s = delayed_score(t, seq);
            // exact through a double, as Redis stores it
            prop_assert_eq!(s as f64 as u64, s);
            prop_assert_eq!(ready_at_from_score(s as f64), t);
            prop_assert_eq!(sequence_from_score(s), seq);
        }

        #[test]
        fn earlier_ready_time_sorts_first(
            t in 0..MAX_READY_AT_MS,
            dt in 1..1_000_000u64,
            s1 in 0..=DELAYED_SEQUENCE_MAX,
            s2 in 0..=DELAYED_SEQUENCE_MAX,
        ) {
            let later = (t + dt).min(MAX_READY_AT_MS);
            prop_assume!(later > t);
            prop_assert!(delayed_score(t, s1) < delayed_score(later, s2));
        }

        #[test]
        fn same_ms_is_fifo(t in 0..=MAX_READY_AT_MS, n in 1..50usize) {
            let mut current = None;
            let mut scores = Vec::new();
            for _ in 0..n {
                let s = next_delayed_score(t, current);
                current = Some(s);
                scores.push(s);
            }
            prop_assert!(scores.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(scores.iter().all(|s| ready_at_from_score(*s as f64) == t));
        }

        #[test]
        fn priority_round_trip(p in 0..=MAX_PRIORITY, c in 0..u64::from(u32::MAX)) {
            let s = priority_score(p, c);
            prop_assert_eq!(s as f64 as u64, s);
            prop_assert_eq!(priority_from_score(s as f64), p);
            prop_assert_eq!(counter_from_priority_score(s), c);
        }

        #[test]
        fn priority_ordering(p in 0..MAX_PRIORITY, c1 in 0..u64::from(u32::MAX), c2 in 0..u64::from(u32::MAX)) {
            // lower priority number first, whatever the counters
            prop_assert!(priority_score(p, c1) < priority_score(p + 1, c2));
            // same priority: FIFO by counter
            if c1 < c2 {
                prop_assert!(priority_score(p, c1) < priority_score(p, c2));
            }
        }
    }
}
