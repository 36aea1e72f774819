//! [`ManualError`]: what can go wrong driving a [`ManualWorker`](super::ManualWorker).

use crate::store::{FinishCode, StoreError};
use crate::worker::errors::{refusal_message, WorkerError};

/// What can go wrong fetching, renewing or finishing a job by hand. The refusals of a finish
/// (one variant per code of Node's scripts) name the job and carry Node's message
/// (`finishedErrors`), so mixed fleets log one text; a refused finish changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManualError {
    /// Bad options ([`WorkerError::InvalidOption`]).
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// The backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The worker was closed.
    #[error("the manual worker is closed")]
    Closed,
    /// A lock token must not be empty (Node would lock the job with a value nobody holds).
    #[error("invalid lock token: it must not be empty")]
    EmptyToken,
    /// The job no longer exists (Node: `Missing key for job {id}`, code -1).
    #[error("{}", refusal_message(.job_id, FinishCode::MissingJob, .command))]
    JobMissing {
        /// The job.
        job_id: String,
        /// The operation, in Node's words (`moveToFinished`, `retryJob`, `moveToDelayed`).
        command: &'static str,
    },
    /// The job has no lock: it expired, so the job may be stalled and taken again (Node:
    /// `Missing lock for job {id}`, code -2).
    #[error("{}", refusal_message(.job_id, FinishCode::MissingLock, .command))]
    LockMissing {
        /// The job.
        job_id: String,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// The job is not active (Node: `Job {id} is not in the active state`, code -3).
    #[error("{}", refusal_message(.job_id, FinishCode::NotActive, .command))]
    NotActive {
        /// The job.
        job_id: String,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// Another token holds the lock: the token is wrong, or the job was taken again after its
    /// lock expired (Node: `Lock mismatch for job {id}`, code -6).
    #[error("{}", refusal_message(.job_id, FinishCode::LockNotOwned, .command))]
    LockMismatch {
        /// The job.
        job_id: String,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// The job cannot complete while it has pending children; it stays active (Node: `Job
    /// {id} has pending dependencies`, code -4).
    #[error("{}", refusal_message(.job_id, FinishCode::PendingChildren, .command))]
    PendingChildren {
        /// The job.
        job_id: String,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// The job cannot complete because a child failed; it stays active (Node's
    /// `UnrecoverableError`, code -9): fail it with [`ManualWorker::move_to_failed`](super::ManualWorker::move_to_failed).
    #[error("{}", refusal_message(.job_id, FinishCode::FailedChildren, .command))]
    FailedChildren {
        /// The job.
        job_id: String,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// The job's stored record is corrupted: the backend failed it with `reason` instead.
    #[error("job {job_id} has a corrupted hash and was failed: {reason}")]
    Corrupted {
        /// The job.
        job_id: String,
        /// Its `failedReason`.
        reason: String,
    },
    /// A code this version does not know.
    #[error("{}", refusal_message(.job_id, *.code, .command))]
    Refused {
        /// The job.
        job_id: String,
        /// What the store answered.
        code: FinishCode,
        /// The operation, in Node's words.
        command: &'static str,
    },
    /// The lock could not be renewed: it expired or another token holds it (Node's
    /// `extendLock` returns 0).
    #[error(
        "the lock of job {job_id} could not be extended: it is missing or held by another token"
    )]
    LockNotExtended {
        /// The job.
        job_id: String,
    },
}

impl ManualError {
    /// The refusal for finish code `code` of job `job_id`; `None` for [`FinishCode::Ok`].
    /// `corrupted` is the reason the store failed a corrupted job with.
    pub(super) fn refusal(
        job_id: &str,
        code: FinishCode,
        command: &'static str,
        corrupted: Option<String>,
    ) -> Option<Self> {
        let job_id = job_id.to_owned();
        Some(match code {
            FinishCode::Ok => return None,
            FinishCode::MissingJob => Self::JobMissing { job_id, command },
            FinishCode::MissingLock => Self::LockMissing { job_id, command },
            FinishCode::NotActive => Self::NotActive { job_id, command },
            FinishCode::LockNotOwned => Self::LockMismatch { job_id, command },
            FinishCode::PendingChildren => Self::PendingChildren { job_id, command },
            FinishCode::FailedChildren => Self::FailedChildren { job_id, command },
            FinishCode::Corrupted => Self::Corrupted {
                job_id,
                reason: corrupted.unwrap_or_else(|| "corrupted job hash".to_owned()),
            },
            code => Self::Refused {
                job_id,
                code,
                command,
            },
        })
    }

    /// The job the error is about, when it is about one.
    pub fn job_id(&self) -> Option<&str> {
        match self {
            Self::JobMissing { job_id, .. }
            | Self::LockMissing { job_id, .. }
            | Self::NotActive { job_id, .. }
            | Self::LockMismatch { job_id, .. }
            | Self::PendingChildren { job_id, .. }
            | Self::FailedChildren { job_id, .. }
            | Self::Corrupted { job_id, .. }
            | Self::Refused { job_id, .. }
            | Self::LockNotExtended { job_id } => Some(job_id),
            _ => None,
        }
    }

    /// The code of Node's scripts for a refused finish (-1 missing job, -2 missing lock, -3
    /// not active, -4 pending children, -6 lock mismatch, -9 failed children).
    pub fn code(&self) -> Option<FinishCode> {
        Some(match self {
            Self::JobMissing { .. } => FinishCode::MissingJob,
            Self::LockMissing { .. } => FinishCode::MissingLock,
            Self::NotActive { .. } => FinishCode::NotActive,
            Self::LockMismatch { .. } => FinishCode::LockNotOwned,
            Self::PendingChildren { .. } => FinishCode::PendingChildren,
            Self::FailedChildren { .. } => FinishCode::FailedChildren,
            Self::Corrupted { .. } => FinishCode::Corrupted,
            Self::Refused { code, .. } => *code,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_code_maps_to_its_variant_with_nodes_message() {
        let cases = [
            (-1, "Missing key for job 7. moveToFinished"),
            (-2, "Missing lock for job 7. moveToFinished"),
            (-3, "Job 7 is not in the active state. moveToFinished"),
            (-4, "Job 7 has pending dependencies. moveToFinished"),
            (
                -6,
                "Lock mismatch for job 7. Cmd moveToFinished from active",
            ),
            (
                -9,
                "Cannot complete job 7 because it has at least one failed child. moveToFinished",
            ),
            (-42, "Unknown code -42 error for 7. moveToFinished"),
        ];
        for (code, message) in cases {
            let code = FinishCode::from_code(code);
            let error = ManualError::refusal("7", code, "moveToFinished", None).expect("refused");
            assert_eq!(error.to_string(), message);
            assert_eq!(error.job_id(), Some("7"));
            assert_eq!(error.code(), Some(code));
        }
        assert!(ManualError::refusal("7", FinishCode::Ok, "moveToFinished", None).is_none());
        let corrupted = ManualError::refusal(
            "7",
            FinishCode::Corrupted,
            "moveToFinished",
            Some("opts is missing".into()),
        )
        .expect("refused");
        assert!(
            matches!(corrupted, ManualError::Corrupted { ref reason, .. } if reason == "opts is missing")
        );
    }
}
