//! Negative status codes returned by BullMQ's scripts, with the numbers and messages Node
//! BullMQ 6.7.0 uses (`enums/error-code`, `finishedErrors`), so every client reports a failed
//! script call the same way.
//!
//! ```
//! use bullmq_protocol::error_code::{ScriptErrorCode, ScriptErrorContext};
//!
//! let code = ScriptErrorCode::from_code(-2).unwrap();
//! assert_eq!(code, ScriptErrorCode::JobLockNotExist);
//! let ctx = ScriptErrorContext::new("42", "moveToFinished");
//! assert_eq!(code.message(&ctx), "Missing lock for job 42. moveToFinished");
//! ```

use std::fmt;

/// A script's negative return code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScriptErrorCode {
    /// `-1`: the job hash does not exist.
    JobNotExist,
    /// `-2`: the job's lock does not exist.
    JobLockNotExist,
    /// `-3`: the job is not in the state the command needs.
    JobNotInState,
    /// `-4`: the job still has pending children.
    JobPendingChildren,
    /// `-5`: the parent job does not exist.
    ParentJobNotExist,
    /// `-6`: the job's lock is held by another token.
    JobLockMismatch,
    /// `-7`: the parent job cannot be replaced.
    ParentJobCannotBeReplaced,
    /// `-8`: the job belongs to a job scheduler and cannot be removed directly.
    JobBelongsToJobScheduler,
    /// `-9`: the job has a failed child and cannot complete.
    JobHasFailedChildren,
    /// `-10`: a job scheduler iteration's job id already exists.
    SchedulerJobIdCollision,
    /// `-11`: both time slots of a job scheduler iteration are taken.
    SchedulerJobSlotsBusy,
}

impl ScriptErrorCode {
    const ALL: [ScriptErrorCode; 11] = [
        Self::JobNotExist,
        Self::JobLockNotExist,
        Self::JobNotInState,
        Self::JobPendingChildren,
        Self::ParentJobNotExist,
        Self::JobLockMismatch,
        Self::ParentJobCannotBeReplaced,
        Self::JobBelongsToJobScheduler,
        Self::JobHasFailedChildren,
        Self::SchedulerJobIdCollision,
        Self::SchedulerJobSlotsBusy,
    ];

    /// The code for a script's return value, if it is one of BullMQ's.
    #[must_use]
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The numeric code (negative).
    #[must_use]
    pub fn code(self) -> i64 {
        match self {
            Self::JobNotExist => -1,
            Self::JobLockNotExist => -2,
            Self::JobNotInState => -3,
            Self::JobPendingChildren => -4,
            Self::ParentJobNotExist => -5,
            Self::JobLockMismatch => -6,
            Self::ParentJobCannotBeReplaced => -7,
            Self::JobBelongsToJobScheduler => -8,
            Self::JobHasFailedChildren => -9,
            Self::SchedulerJobIdCollision => -10,
            Self::SchedulerJobSlotsBusy => -11,
        }
    }

    /// Node's name of the code (`JobNotExist`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::JobNotExist => "JobNotExist",
            Self::JobLockNotExist => "JobLockNotExist",
            Self::JobNotInState => "JobNotInState",
            Self::JobPendingChildren => "JobPendingChildren",
            Self::ParentJobNotExist => "ParentJobNotExist",
            Self::JobLockMismatch => "JobLockMismatch",
            Self::ParentJobCannotBeReplaced => "ParentJobCannotBeReplaced",
            Self::JobBelongsToJobScheduler => "JobBelongsToJobScheduler",
            Self::JobHasFailedChildren => "JobHasFailedChildren",
            Self::SchedulerJobIdCollision => "SchedulerJobIdCollision",
            Self::SchedulerJobSlotsBusy => "SchedulerJobSlotsBusy",
        }
    }

    /// Whether retrying the job cannot help (Node raises `UnrecoverableError` for it).
    #[must_use]
    pub fn is_unrecoverable(self) -> bool {
        matches!(self, Self::JobHasFailedChildren)
    }

    /// The message Node builds for this code in the given context.
    #[must_use]
    pub fn message(self, ctx: &ScriptErrorContext) -> String {
        let ScriptErrorContext {
            job_id,
            command,
            parent_key,
            state,
        } = ctx;
        let parent_key = parent_key.as_deref().unwrap_or("undefined");
        let state = state.as_deref().unwrap_or("undefined");
        match self {
            Self::JobNotExist => format!("Missing key for job {job_id}. {command}"),
            Self::JobLockNotExist => format!("Missing lock for job {job_id}. {command}"),
            Self::JobNotInState => format!("Job {job_id} is not in the {state} state. {command}"),
            Self::JobPendingChildren => {
                format!("Job {job_id} has pending dependencies. {command}")
            }
            Self::ParentJobNotExist => {
                format!("Missing key for parent job {parent_key}. {command}")
            }
            Self::JobLockMismatch => {
                format!("Lock mismatch for job {job_id}. Cmd {command} from {state}")
            }
            Self::ParentJobCannotBeReplaced => {
                format!("The parent job {parent_key} cannot be replaced. {command}")
            }
            Self::JobBelongsToJobScheduler => format!(
                "Job {job_id} belongs to a job scheduler and cannot be removed directly. {command}"
            ),
            Self::JobHasFailedChildren => format!(
                "Cannot complete job {job_id} because it has at least one failed child. {command}"
            ),
            Self::SchedulerJobIdCollision => format!(
                "Cannot create job scheduler iteration - job ID already exists. {command}"
            ),
            Self::SchedulerJobSlotsBusy => format!(
                "Cannot create job scheduler iteration - current and next time slots already have jobs. {command}"
            ),
        }
    }
}

impl fmt::Display for ScriptErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// What a script error message mentions: the job, the command, and where relevant the parent
/// key and the job's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScriptErrorContext {
    /// Job id.
    pub job_id: String,
    /// Command (script) name, e.g. `moveToFinished`.
    pub command: String,
    /// Parent job key, for parent-related codes.
    pub parent_key: Option<String>,
    /// The job's state, for `JobNotInState` / `JobLockMismatch`.
    pub state: Option<String>,
}

impl ScriptErrorContext {
    /// Context of `command` on `job_id`.
    #[must_use]
    pub fn new(job_id: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            job_id: job_id.into(),
            command: command.into(),
            parent_key: None,
            state: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for (i, code) in ScriptErrorCode::ALL.into_iter().enumerate() {
            let expected = -(i as i64) - 1;
            assert_eq!(code.code(), expected);
            assert_eq!(ScriptErrorCode::from_code(expected), Some(code));
        }
        assert_eq!(ScriptErrorCode::from_code(0), None);
        assert_eq!(ScriptErrorCode::from_code(-12), None);
        assert_eq!(ScriptErrorCode::from_code(1), None);
    }

    #[test]
    fn messages_match_node() {
        let mut ctx = ScriptErrorContext::new("7", "moveToFinished");
        assert_eq!(
            ScriptErrorCode::JobNotExist.message(&ctx),
            "Missing key for job 7. moveToFinished"
        );
        ctx.state = Some("active".into());
        assert_eq!(
            ScriptErrorCode::JobNotInState.message(&ctx),
            "Job 7 is not in the active state. moveToFinished"
        );
        assert_eq!(
            ScriptErrorCode::JobLockMismatch.message(&ctx),
            "Lock mismatch for job 7. Cmd moveToFinished from active"
        );
        ctx.parent_key = Some("bull:q:p".into());
        assert_eq!(
            ScriptErrorCode::ParentJobNotExist.message(&ctx),
            "Missing key for parent job bull:q:p. moveToFinished"
        );
        assert!(ScriptErrorCode::JobHasFailedChildren.is_unrecoverable());
        assert!(!ScriptErrorCode::JobNotExist.is_unrecoverable());
        assert_eq!(
            ScriptErrorCode::JobLockNotExist.to_string(),
            "JobLockNotExist (-2)"
        );
    }
}
