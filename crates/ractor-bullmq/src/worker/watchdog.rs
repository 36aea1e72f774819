//! The progress watchdog: a Worker that waits on the store without a successful answer for
//! longer than its bound stops with [`WorkerError::NoProgress`], so its supervisor restarts it.
//!
//! Why: after a failover or a half-open TCP connection, a Redis client can stay "connected"
//! while nothing it sends is answered; the Worker then reports itself running and processes
//! nothing. Each store call is bounded already (and retried), but retrying on the same
//! connections may never succeed. A restart opens fresh connections (and a fresh LockManager);
//! the jobs the stuck Worker held come back through stalled recovery.
//!
//! What counts: any successful store answer (fetch, finish, marker wait, stalled check) is
//! progress, and so is a moment at which the Worker is not waiting on the store at all (paused,
//! slots full, rate-limited: idle by its own choice). A closing Worker is not timed: its close
//! has a deadline of its own. Nor is one whose store reported its connection lost and not yet
//! restored: the client is reconnecting by itself, a restart could not connect either, and
//! restarting through a long outage would only spend the supervisor's restart budget. The
//! watchdog is for the silent case, where the client believes it is connected.

use std::time::{Duration, Instant};

use super::errors::WorkerError;
use super::worker::WorkerState;
use crate::telemetry;

/// How often the watchdog looks, for a bound of `bound`: a quarter of it (between 50 ms and
/// 5 s), so it fires at most a quarter late.
pub(super) fn tick_period(bound: Duration) -> Duration {
    (bound / 4).clamp(Duration::from_millis(50), Duration::from_secs(5))
}

/// What the watchdog concludes at one tick: `Some(stalled_for)` when the Worker is stuck.
fn verdict(
    awaiting_store: bool,
    closing: bool,
    last_progress: &mut Instant,
    now: Instant,
    bound: Duration,
) -> Option<Duration> {
    if closing || !awaiting_store {
        *last_progress = now;
        return None;
    }
    let stalled_for = now.saturating_duration_since(*last_progress);
    (stalled_for > bound).then_some(stalled_for)
}

impl WorkerState {
    /// A store call answered successfully.
    pub(super) fn made_progress(&mut self) {
        self.last_progress = Instant::now();
        self.connection_down = false;
    }

    /// One watchdog tick: an error (which stops the Worker) when it is stuck, reported first
    /// through telemetry, the log and `on_error`.
    pub(super) fn watchdog(&mut self) -> Result<(), WorkerError> {
        let Some(bound) = self.opts.progress_bound() else {
            return Ok(());
        };
        let Some(stalled_for) = verdict(
            self.dispatcher.awaiting_store() && !self.connection_down,
            self.dispatcher.lifecycle().is_closing(),
            &mut self.last_progress,
            Instant::now(),
            bound,
        ) else {
            return Ok(());
        };
        telemetry::worker_stuck(self.store.queue_name(), &self.label, stalled_for);
        let error = WorkerError::NoProgress { stalled_for };
        self.callbacks.error(&error);
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(10);

    #[test]
    fn stuck_only_after_the_bound_while_waiting_on_the_store() {
        let t0 = Instant::now();
        let mut last = t0;
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(
            verdict(true, false, &mut last, at(10), BOUND),
            None,
            "at the bound"
        );
        assert_eq!(
            verdict(true, false, &mut last, at(11), BOUND),
            Some(Duration::from_secs(11))
        );
        assert_eq!(last, t0, "waiting does not move the mark");
    }

    #[test]
    fn idle_by_choice_or_closing_resets_the_mark() {
        let t0 = Instant::now();
        let mut last = t0;
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(verdict(false, false, &mut last, at(60), BOUND), None);
        assert_eq!(last, at(60));
        assert_eq!(verdict(true, false, &mut last, at(65), BOUND), None);
        assert_eq!(
            verdict(true, true, &mut last, at(100), BOUND),
            None,
            "closing"
        );
        assert_eq!(last, at(100));
    }

    #[test]
    fn ticks_a_quarter_of_the_bound_within_limits() {
        assert_eq!(tick_period(Duration::from_secs(8)), Duration::from_secs(2));
        assert_eq!(
            tick_period(Duration::from_millis(10)),
            Duration::from_millis(50)
        );
        assert_eq!(
            tick_period(Duration::from_secs(600)),
            Duration::from_secs(5)
        );
    }
}
