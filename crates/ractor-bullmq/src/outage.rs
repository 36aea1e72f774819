//! Outage tracking: turns a run of failed attempts into one "lost" report and one "restored"
//! report, so a component retrying every few hundred milliseconds during an outage tells the
//! user once, not once per retry. Pure (the caller passes the clock), shared by the Worker and
//! the QueueEvents reader.

use std::time::{Duration, Instant};

/// Whether the component is in an outage, and since when.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    since: Option<Instant>,
}

impl Outage {
    /// An attempt failed at `now`: true when this starts an outage (report it), false during
    /// one (already reported).
    pub(crate) fn failed(&mut self, now: Instant) -> bool {
        if self.since.is_some() {
            return false;
        }
        self.since = Some(now);
        true
    }

    /// An attempt succeeded at `now`: the outage's length when this ends one.
    pub(crate) fn succeeded(&mut self, now: Instant) -> Option<Duration> {
        self.since
            .take()
            .map(|since| now.saturating_duration_since(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_report_per_outage_and_its_length_at_the_end() {
        let start = Instant::now();
        let mut outage = Outage::default();
        assert_eq!(outage.succeeded(start), None, "no outage to end");
        assert!(outage.failed(start), "the first failure starts the outage");
        for retry in 1..10 {
            assert!(!outage.failed(start + Duration::from_millis(retry * 100)));
        }
        assert_eq!(
            outage.succeeded(start + Duration::from_secs(6)),
            Some(Duration::from_secs(6))
        );
        assert!(
            outage.failed(start + Duration::from_secs(7)),
            "a new outage"
        );
    }
}
