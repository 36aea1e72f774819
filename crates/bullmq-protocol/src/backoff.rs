//! Delay before a failed job's next attempt, computed as Node BullMQ's built-in strategies do.
//!
//! - `fixed`: `delay`; with jitter `j`, uniformly in `[delay·(1−j), delay)` (floored).
//! - `exponential`: `round(2^(attemptsMade−1) · delay)`; with jitter, uniformly in
//!   `[max·(1−j), max)` (floored) where `max` is that value.
//! - any other `type`: a strategy the worker registered; [`backoff_delay`] says so and the
//!   caller runs it.
//!
//! The randomness is an argument so the function stays pure and testable.
//!
//! ```
//! use std::time::Duration;
//! use bullmq_protocol::backoff::{backoff_delay, BackoffDelay};
//! use bullmq_protocol::options::Backoff;
//!
//! let b = Backoff::exponential(Duration::from_millis(1000));
//! assert_eq!(backoff_delay(&b, 3, 0.5), BackoffDelay::After(Duration::from_millis(4000)));
//! ```

use std::time::Duration;

use crate::options::{Backoff, BackoffKind};

/// What to wait before the next attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackoffDelay {
    /// Retry after this long (zero: retry at once).
    After(Duration),
    /// Ask the worker's custom strategy registered under this name.
    Custom(String),
}

/// Delay before the next attempt after `attempts_made` failed attempts (Node passes the count
/// including the attempt that just failed), with `random01` a uniform sample in `[0, 1)`.
///
/// A missing `delay` counts as 0. Values that do not fit are saturated.
#[must_use]
pub fn backoff_delay(backoff: &Backoff, attempts_made: u32, random01: f64) -> BackoffDelay {
    let base = backoff.delay.unwrap_or(0) as f64;
    let jitter = backoff.jitter.unwrap_or(0.0);
    let random = if random01.is_finite() {
        random01.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let full = match &backoff.kind {
        BackoffKind::Fixed => base,
        BackoffKind::Exponential => {
            let exponent = f64::from(attempts_made) - 1.0;
            (2f64.powf(exponent) * base).round()
        }
        BackoffKind::Custom(name) => return BackoffDelay::Custom(name.clone()),
    };
    let ms = if jitter > 0.0 {
        (random * full * jitter + full * (1.0 - jitter)).floor()
    } else {
        full
    };
    BackoffDelay::After(Duration::from_millis(to_millis(ms)))
}

/// f64 milliseconds to u64, saturating (NaN and negatives are 0).
fn to_millis(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        // `as` saturates at u64::MAX for huge values, which is the intent.
        ms as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(d: BackoffDelay) -> u64 {
        match d {
            BackoffDelay::After(d) => d.as_millis() as u64,
            BackoffDelay::Custom(n) => panic!("unexpected custom {n}"),
        }
    }

    #[test]
    fn fixed_ignores_attempts() {
        let b = Backoff::fixed(Duration::from_millis(1500));
        for attempts in [1, 2, 10] {
            assert_eq!(ms(backoff_delay(&b, attempts, 0.3)), 1500);
        }
    }

    #[test]
    fn exponential_doubles() {
        let b = Backoff::exponential(Duration::from_millis(100));
        let got: Vec<u64> = (1..=5).map(|a| ms(backoff_delay(&b, a, 0.0))).collect();
        assert_eq!(got, [100, 200, 400, 800, 1600]);
        // attempts_made 0 (not produced by a worker) gives half the delay, as in Node
        assert_eq!(ms(backoff_delay(&b, 0, 0.0)), 50);
        // huge exponents saturate instead of overflowing
        assert_eq!(ms(backoff_delay(&b, 5000, 0.0)), u64::MAX);
    }

    #[test]
    fn jitter_bounds() {
        let b = Backoff::fixed(Duration::from_millis(1000)).with_jitter(0.5);
        assert_eq!(ms(backoff_delay(&b, 1, 0.0)), 500);
        assert_eq!(ms(backoff_delay(&b, 1, 0.999_999)), 999);
        let e = Backoff::exponential(Duration::from_millis(1000)).with_jitter(1.0);
        assert_eq!(ms(backoff_delay(&e, 2, 0.0)), 0);
        assert_eq!(ms(backoff_delay(&e, 2, 0.5)), 1000);
    }

    #[test]
    fn custom_and_missing_delay() {
        let c = Backoff::custom("linear");
        assert_eq!(
            backoff_delay(&c, 1, 0.5),
            BackoffDelay::Custom("linear".into())
        );
        let mut f = Backoff::fixed(Duration::ZERO);
        f.delay = None;
        assert_eq!(ms(backoff_delay(&f, 1, 0.5)), 0);
    }

    proptest! {
        #[test]
        fn jittered_delay_within_bounds(
            delay in 0u64..10_000_000,
            attempts in 1u32..20,
            jitter in 0.0f64..=1.0,
            r in 0.0f64..1.0,
        ) {
            let b = Backoff::exponential(Duration::from_millis(delay)).with_jitter(jitter);
            let max = ms(backoff_delay(&Backoff::exponential(Duration::from_millis(delay)), attempts, r));
            let got = ms(backoff_delay(&b, attempts, r));
            prop_assert!(got <= max);
            let min = (max as f64 * (1.0 - jitter)).floor() as u64;
            prop_assert!(got >= min);
        }
    }
}
