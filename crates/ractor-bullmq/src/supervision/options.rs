//! Options shared by static and dynamic supervisors.

use std::time::Duration;

use tokio::sync::broadcast;

use super::backoff::Backoff;
use super::event::RuntimeEvent;
use super::strategy::{Intensity, Strategy};

/// How a supervisor restarts its children.
///
/// Defaults: [`Strategy::OneForOne`], 3 restarts within 5 s, no backoff, no event channel.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ractor_bullmq::supervision::{Backoff, Strategy, SupervisorOptions};
///
/// let options = SupervisorOptions::default()
///     .strategy(Strategy::RestForOne)
///     .max_restarts(10)
///     .period(Duration::from_secs(60))
///     .backoff(Backoff::Exponential {
///         initial: Duration::from_millis(100),
///         max: Duration::from_secs(5),
///     });
/// assert_eq!(options.intensity.max_restarts, 10);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SupervisorOptions {
    /// Which children restart together. Default [`Strategy::OneForOne`].
    pub strategy: Strategy,
    /// Restart budget; exceeding it makes the supervisor give up and fail upward.
    pub intensity: Intensity,
    /// Delay before re-spawning, unless a child overrides it. Default [`Backoff::None`].
    pub backoff: Backoff,
    /// Where to publish [`RuntimeEvent`]s (the Runtime sets this for its supervisors).
    pub events: Option<broadcast::Sender<RuntimeEvent>>,
}

impl SupervisorOptions {
    /// Sets the strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Sets `max_restarts` (OTP `intensity`, default 3).
    pub fn max_restarts(mut self, max_restarts: u32) -> Self {
        self.intensity.max_restarts = max_restarts;
        self
    }

    /// Sets the intensity window (OTP `period`, Elixir `max_seconds`; default 5 s).
    pub fn period(mut self, period: Duration) -> Self {
        self.intensity.period = period;
        self
    }

    /// Sets the default restart backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Publishes this supervisor's events on `sender`.
    pub fn events(mut self, sender: broadcast::Sender<RuntimeEvent>) -> Self {
        self.events = Some(sender);
        self
    }
}
