//! Restart strategies, per-child restart policies and the restart-intensity window.
//!
//! Everything here is pure logic (no actors, no clocks of its own) so it is unit-tested directly;
//! the supervisor actor feeds it `Instant`s and exit reasons.

use std::collections::VecDeque;
use std::time::Duration;

// tokio's clock, so supervision timing follows `tokio::time::pause` in tests.
use tokio::time::Instant;

/// Which children a supervisor restarts when one of them must be restarted (OTP's `strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Restart only the child that exited. The default, and the only sensible choice for
    /// supervisors of independent children such as Workers.
    #[default]
    OneForOne,
    /// Stop every other child (reverse start order) and restart all of them (start order).
    OneForAll,
    /// Stop the children started after the exited one (reverse start order) and restart the
    /// exited child and those (start order).
    RestForOne,
}

/// When a child is restarted after it exits (OTP's `restart` child flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restart {
    /// Always restarted, however it exits. The default.
    #[default]
    Permanent,
    /// Restarted only after an abnormal exit: a panic or error ([`ExitKind::Abnormal`]) or a
    /// stop whose reason is not a normal one (see [`ExitKind::classify_stop`]).
    Transient,
    /// Never restarted; removed from the supervisor when it exits, and not restarted either
    /// when a sibling's exit makes a `OneForAll`/`RestForOne` supervisor stop it.
    Temporary,
}

/// How a child ended, as the restart policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Stopped with no reason, or with `normal`, `shutdown` or `shutdown:<anything>`.
    Normal,
    /// Panicked, returned an error from a handler, was killed, or stopped with another reason.
    Abnormal,
}

/// Stop reasons that count as a normal exit for [`Restart::Transient`] children (as OTP's
/// `normal`, `shutdown` and `{shutdown, Term}`).
pub const NORMAL_REASON: &str = "normal";
/// The stop reason supervisors use when they stop a child themselves.
pub const SHUTDOWN_REASON: &str = "shutdown";

impl ExitKind {
    /// Classifies the reason carried by ractor's `ActorTerminated` event.
    pub fn classify_stop(reason: Option<&str>) -> Self {
        match reason {
            None => Self::Normal,
            Some(r) if r == NORMAL_REASON || r == SHUTDOWN_REASON => Self::Normal,
            Some(r) if r.starts_with("shutdown:") => Self::Normal,
            Some(_) => Self::Abnormal,
        }
    }
}

impl Restart {
    /// Whether a child with this policy is restarted after exiting as `exit`.
    pub fn should_restart(self, exit: ExitKind) -> bool {
        match self {
            Self::Permanent => true,
            Self::Transient => exit == ExitKind::Abnormal,
            Self::Temporary => false,
        }
    }
}

/// Restart intensity: more than `max_restarts` restarts within `period` make the supervisor
/// give up (OTP `intensity`/`period`, Elixir `max_restarts`/`max_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intensity {
    /// Restarts tolerated inside one window. Default 3 (as Elixir); 0 means give up on the
    /// first restart.
    pub max_restarts: u32,
    /// Length of the sliding window. Default 5 s.
    pub period: Duration,
}

impl Default for Intensity {
    fn default() -> Self {
        Self {
            max_restarts: 3,
            period: Duration::from_secs(5),
        }
    }
}

/// The intensity budget was exhausted: the supervisor must give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntensityExceeded {
    /// Restarts counted in the window, including the refused one.
    pub restarts: usize,
}

/// Sliding window of recent restart instants (one per supervisor).
#[derive(Debug, Clone, Default)]
pub struct RestartWindow {
    stamps: VecDeque<Instant>,
}

impl RestartWindow {
    /// Records a restart at `now`. Returns how many restarts the window now holds, or
    /// [`IntensityExceeded`] when that number is above `intensity.max_restarts`.
    pub fn record(
        &mut self,
        now: Instant,
        intensity: Intensity,
    ) -> Result<usize, IntensityExceeded> {
        self.stamps.push_back(now);
        // Drop restarts that have slid out of the window; a restart exactly `period` old no
        // longer counts, as in OTP.
        while let Some(oldest) = self.stamps.front() {
            if now.saturating_duration_since(*oldest) >= intensity.period {
                self.stamps.pop_front();
            } else {
                break;
            }
        }
        let restarts = self.stamps.len();
        if restarts > intensity.max_restarts as usize {
            Err(IntensityExceeded { restarts })
        } else {
            Ok(restarts)
        }
    }

    /// Restarts currently counted.
    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    /// Whether no restart is counted.
    pub fn is_empty(&self) -> bool {
        self.stamps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_restarts_only_abnormal_exits() {
        assert!(Restart::Transient.should_restart(ExitKind::Abnormal));
        assert!(!Restart::Transient.should_restart(ExitKind::Normal));
        assert!(Restart::Permanent.should_restart(ExitKind::Normal));
        assert!(Restart::Permanent.should_restart(ExitKind::Abnormal));
        assert!(!Restart::Temporary.should_restart(ExitKind::Abnormal));
        assert!(!Restart::Temporary.should_restart(ExitKind::Normal));
    }

    #[test]
    fn stop_reasons_are_classified_like_otp() {
        assert_eq!(ExitKind::classify_stop(None), ExitKind::Normal);
        assert_eq!(ExitKind::classify_stop(Some("normal")), ExitKind::Normal);
        assert_eq!(ExitKind::classify_stop(Some("shutdown")), ExitKind::Normal);
        assert_eq!(
            ExitKind::classify_stop(Some("shutdown: scale down")),
            ExitKind::Normal
        );
        assert_eq!(ExitKind::classify_stop(Some("killed")), ExitKind::Abnormal);
        assert_eq!(
            ExitKind::classify_stop(Some("redis gone")),
            ExitKind::Abnormal
        );
    }

    #[test]
    fn window_gives_up_above_max_restarts() {
        let intensity = Intensity {
            max_restarts: 2,
            period: Duration::from_secs(10),
        };
        let t0 = Instant::now();
        let mut w = RestartWindow::default();
        assert_eq!(w.record(t0, intensity), Ok(1));
        assert_eq!(w.record(t0 + Duration::from_secs(1), intensity), Ok(2));
        assert_eq!(
            w.record(t0 + Duration::from_secs(2), intensity),
            Err(IntensityExceeded { restarts: 3 })
        );
    }

    #[test]
    fn window_slides() {
        let intensity = Intensity {
            max_restarts: 2,
            period: Duration::from_secs(10),
        };
        let t0 = Instant::now();
        let mut w = RestartWindow::default();
        assert_eq!(w.record(t0, intensity), Ok(1));
        assert_eq!(w.record(t0 + Duration::from_secs(5), intensity), Ok(2));
        // t0 is exactly one period old: it no longer counts.
        assert_eq!(w.record(t0 + Duration::from_secs(10), intensity), Ok(2));
        assert_eq!(w.record(t0 + Duration::from_secs(30), intensity), Ok(1));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn zero_intensity_gives_up_immediately() {
        let intensity = Intensity {
            max_restarts: 0,
            period: Duration::from_secs(1),
        };
        let mut w = RestartWindow::default();
        assert!(w.record(Instant::now(), intensity).is_err());
    }
}
