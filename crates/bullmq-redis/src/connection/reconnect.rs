//! How a client reconnects after losing its connection, and when it gives up on a connection
//! that stays open but stops answering.

use std::time::Duration;

use fred::prelude::ReconnectPolicy;

/// The reconnect policy of every client a [`ConnectionConfig`](super::ConnectionConfig)
/// opens: exponential backoff from [`Reconnect::initial`] doubling up to [`Reconnect::max`],
/// each delay plus up to [`Reconnect::jitter`] at random (so a fleet that lost the same
/// server does not come back in lock step), forever unless [`Reconnect::max_attempts`] says
/// otherwise.
///
/// ```
/// use std::time::Duration;
/// use bullmq_redis::{ConnectionConfig, Reconnect};
///
/// let config = ConnectionConfig::default().reconnect(Reconnect {
///     initial: Duration::from_millis(50),
///     max: Duration::from_secs(10),
///     ..Reconnect::default()
/// });
/// assert_eq!(config.reconnect.max_attempts, None); // still forever
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// The first delay (default 100 ms).
    pub initial: Duration,
    /// The largest delay (default 2 s).
    pub max: Duration,
    /// Up to this much is added to each delay at random (default 100 ms).
    pub jitter: Duration,
    /// Give up after this many failed attempts in a row; `None` (the default) never gives up,
    /// as a worker fleet should ride out any outage.
    pub max_attempts: Option<u32>,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(2),
            jitter: Duration::from_millis(100),
            max_attempts: None,
        }
    }
}

impl Reconnect {
    /// The fred policy this describes (fred counts `0` attempts as "no limit").
    pub(crate) fn policy(&self) -> ReconnectPolicy {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let mut policy = ReconnectPolicy::new_exponential(
            self.max_attempts.unwrap_or(0),
            ms(self.initial).max(1),
            ms(self.max).max(ms(self.initial)).max(1),
            2,
        );
        policy.set_jitter(ms(self.jitter));
        policy
    }
}

/// How long a command may wait for its reply on an open connection before the connection is
/// taken for dead, closed and reconnected (fred's unresponsive-connection check). Blocking
/// commands (the marker wait, `XREAD BLOCK`) are exempt; every other command of ours answers
/// in milliseconds, so only a server that hangs (a partition, a failover in progress, a stopped
/// process) reaches this. The commands in flight are retried on the new connection.
pub const DEFAULT_UNRESPONSIVE_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_is_exponential_with_jitter_forever() {
        let policy = Reconnect::default().policy();
        assert_eq!(
            policy,
            {
                let mut expected = ReconnectPolicy::new_exponential(0, 100, 2_000, 2);
                expected.set_jitter(100);
                expected
            },
            "{policy:?}"
        );
    }

    #[test]
    fn a_limit_and_degenerate_delays_are_kept_sane() {
        let policy = Reconnect {
            initial: Duration::ZERO,
            max: Duration::ZERO,
            jitter: Duration::ZERO,
            max_attempts: Some(3),
        }
        .policy();
        let mut expected = ReconnectPolicy::new_exponential(3, 1, 1, 2);
        expected.set_jitter(0);
        assert_eq!(policy, expected);
    }
}
