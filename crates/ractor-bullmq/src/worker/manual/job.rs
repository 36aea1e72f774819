//! [`ManualJob`]: a job handed out by a [`ManualWorker`](super::ManualWorker), with its lock.

use crate::job::Job;
use crate::store::Receipt;

/// A job locked for the caller: the job as fetched and the lock token it was fetched with
/// (the caller's own, as Node's `getNextJob(token)`). Hand it back to
/// [`ManualWorker::move_to_completed`](super::ManualWorker::move_to_completed),
/// [`ManualWorker::move_to_failed`](super::ManualWorker::move_to_failed) or
/// [`ManualWorker::extend_lock`](super::ManualWorker::extend_lock).
#[derive(Debug, Clone)]
pub struct ManualJob {
    job: Job,
    token: String,
    /// The store's note from the fetch, handed back with the finish.
    receipt: Receipt,
}

impl ManualJob {
    /// A job locked with `token` by someone else (a Node worker's `getNextJob(token)`, or a
    /// token kept across restarts), to finish or renew it here. Read the job with
    /// [`Queue::get_job`](crate::Queue::get_job).
    pub fn new(job: Job, token: impl Into<String>) -> Self {
        Self {
            job,
            token: token.into(),
            receipt: Receipt::NONE,
        }
    }

    pub(super) fn fetched(job: Job, token: String, receipt: Receipt) -> Self {
        Self {
            job,
            token,
            receipt,
        }
    }

    /// The job as it was when fetched.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        self.job.id()
    }

    /// The lock token: the job's `:lock` value while the caller owns it.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The job, without its lock.
    pub fn into_job(self) -> Job {
        self.job
    }

    pub(super) fn receipt(&self) -> Receipt {
        self.receipt
    }
}
