//! Delay applied before a supervisor re-spawns a child.
//!
//! OTP restarts immediately; a job-queue worker whose Redis is down would then burn through its
//! restart intensity in milliseconds, so a delay that grows with consecutive restarts is offered.

use std::time::Duration;

/// Delay before re-spawning a child, as a function of its consecutive restart count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backoff {
    /// Restart immediately (OTP behaviour). The default.
    #[default]
    None,
    /// Wait the same delay before every restart.
    Fixed(Duration),
    /// Wait `initial`, then twice as long after each consecutive restart, never more than `max`.
    Exponential {
        /// Delay before the first restart.
        initial: Duration,
        /// Upper bound of the delay.
        max: Duration,
    },
}

impl Backoff {
    /// Delay before restart number `attempt` (1 for the first consecutive restart).
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Self::None => Duration::ZERO,
            Self::Fixed(d) => d,
            Self::Exponential { initial, max } => {
                let doublings = attempt.saturating_sub(1).min(31);
                initial
                    .checked_mul(1u32 << doublings)
                    .map_or(max, |d| d.min(max))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_and_fixed() {
        assert_eq!(Backoff::None.delay(5), Duration::ZERO);
        let fixed = Backoff::Fixed(Duration::from_millis(250));
        assert_eq!(fixed.delay(1), Duration::from_millis(250));
        assert_eq!(fixed.delay(9), Duration::from_millis(250));
    }

    #[test]
    fn exponential_doubles_and_caps() {
        let b = Backoff::Exponential {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(4), Duration::from_millis(800));
        assert_eq!(b.delay(5), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
    }
}
