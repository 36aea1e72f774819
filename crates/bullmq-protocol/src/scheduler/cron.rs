//! PLACEHOLDER until the cron branch is merged (not to be committed as is).
#![allow(missing_docs, unreachable_pub)]

#[derive(Debug, Clone)]
pub struct CronSchedule;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CronError {
    #[error("invalid cron pattern {pattern:?}: {reason}")]
    InvalidPattern { pattern: String, reason: String },
    #[error("unknown time zone {0:?}")]
    UnknownTimeZone(String),
}

impl CronSchedule {
    pub fn parse(pattern: &str, _tz: Option<&str>) -> Result<Self, CronError> {
        Err(CronError::InvalidPattern {
            pattern: pattern.into(),
            reason: "pending".into(),
        })
    }
    pub fn next_after(&self, _after_ms: u64, _end_ms: Option<u64>) -> Option<u64> {
        None
    }
}

pub fn validate_time_zone(_name: &str) -> Result<(), CronError> {
    Ok(())
}
