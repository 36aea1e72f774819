//! The autoscaling policy of a [`WorkerManager`](super::WorkerManager): a function of the
//! queue's backlog to a number of workers, evaluated on an interval, clamped to bounds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why an [`Autoscale`] rule is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AutoscaleError {
    /// The lower bound is above the upper one.
    #[error("autoscale min ({min}) is above max ({max})")]
    MinAboveMax {
        /// The configured `min`.
        min: usize,
        /// The configured `max`.
        max: usize,
    },
    /// The policy would be evaluated continuously.
    #[error("autoscale interval must be above zero")]
    ZeroInterval,
}

/// What an autoscaling policy sees at each evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoscaleInput {
    /// Jobs ready to run: `wait` plus `prioritized` (delayed jobs are not counted until due).
    pub waiting: u64,
    /// Jobs held by workers (this manager's and anyone else's) right now.
    pub active: u64,
    /// Workers this manager runs now.
    pub current_workers: usize,
}

/// A policy: from the queue's state to the desired number of workers (clamped afterwards).
pub type AutoscalePolicy = Arc<dyn Fn(AutoscaleInput) -> usize + Send + Sync>;

/// Autoscaling: every `interval` the manager reads the queue's job counts, asks `policy` for a
/// number of workers, clamps it to `[min, max]` and scales to it (down gracefully).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ractor_bullmq::manager::Autoscale;
///
/// // One worker per 100 waiting jobs, between 1 and 8 workers.
/// let autoscale = Autoscale::new(Duration::from_secs(5), 1, 8, |input| {
///     (input.waiting as usize).div_ceil(100)
/// });
/// assert_eq!(autoscale.min, 1);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Autoscale {
    /// How often the policy is evaluated (one `getJobCounts`-style call each time).
    pub interval: Duration,
    /// Fewest workers.
    pub min: usize,
    /// Most workers.
    pub max: usize,
    /// The policy.
    pub policy: AutoscalePolicy,
}

impl fmt::Debug for Autoscale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Autoscale")
            .field("interval", &self.interval)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Autoscale {
    /// An autoscaling rule.
    pub fn new<F>(interval: Duration, min: usize, max: usize, policy: F) -> Self
    where
        F: Fn(AutoscaleInput) -> usize + Send + Sync + 'static,
    {
        Self {
            interval,
            min,
            max,
            policy: Arc::new(policy),
        }
    }

    /// Checks `min <= max` and a non-zero interval.
    ///
    /// # Errors
    ///
    /// [`AutoscaleError`] naming the broken rule (the Runtime wraps it in
    /// `SupervisionError::InvalidOption`).
    pub fn validate(&self) -> Result<(), AutoscaleError> {
        if self.min > self.max {
            return Err(AutoscaleError::MinAboveMax {
                min: self.min,
                max: self.max,
            });
        }
        if self.interval.is_zero() {
            return Err(AutoscaleError::ZeroInterval);
        }
        Ok(())
    }

    /// The policy's answer for `input`, clamped to `[min, max]`.
    pub fn desired(&self, input: AutoscaleInput) -> usize {
        (self.policy)(input).clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(waiting: u64) -> AutoscaleInput {
        AutoscaleInput {
            waiting,
            active: 0,
            current_workers: 1,
        }
    }

    #[test]
    fn desired_is_clamped_to_the_bounds() {
        let a = Autoscale::new(Duration::from_secs(1), 2, 5, |i| i.waiting as usize / 10);
        assert_eq!(a.desired(input(0)), 2);
        assert_eq!(a.desired(input(35)), 3);
        assert_eq!(a.desired(input(10_000)), 5);
    }

    #[test]
    fn bad_bounds_and_zero_interval_are_refused() {
        let inverted = Autoscale::new(Duration::from_secs(1), 3, 2, |_| 0).validate();
        assert_eq!(
            inverted,
            Err(AutoscaleError::MinAboveMax { min: 3, max: 2 })
        );
        assert_eq!(
            inverted.unwrap_err().to_string(),
            "autoscale min (3) is above max (2)"
        );
        assert_eq!(
            Autoscale::new(Duration::ZERO, 1, 2, |_| 0).validate(),
            Err(AutoscaleError::ZeroInterval)
        );
        assert!(Autoscale::new(Duration::from_secs(1), 0, 0, |_| 0)
            .validate()
            .is_ok());
    }
}
