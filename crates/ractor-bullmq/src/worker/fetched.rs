//! Reading a job the store handed over: a runnable [`Job`], or the reason it cannot run.
//!
//! This is the only place that looks inside a [`FetchedJob`]: the store hands over a decoded
//! record (or why it could not decode one) and a receipt to give back with the finish.

use super::Job;
use crate::store::{FetchedJob, NextIteration, Receipt};

/// A fetched job that cannot run: the Worker fails it for good with `reason`.
#[derive(Debug)]
pub(super) struct Unreadable {
    /// The job id.
    pub(super) id: String,
    /// The lock token it was fetched with.
    pub(super) token: String,
    /// `failedReason`.
    pub(super) reason: String,
    /// The store's note from the fetch.
    pub(super) receipt: Receipt,
}

/// A job the Worker holds: its lock token and the store's note, both handed back with its
/// finish.
#[derive(Debug, Clone)]
pub(super) struct Lease {
    /// The lock token.
    pub(super) token: String,
    /// The store's note from the fetch.
    pub(super) receipt: Receipt,
}

/// A job to run, its lease, and what the fetch already did about the next iteration of its job
/// scheduler (`None`: nothing, the Worker asks for it).
pub(super) type Runnable = (Job, Lease, Option<NextIteration>);

/// Turns a fetched job of `queue` into the job to run and its lease, or says why it cannot
/// run (the store's reason: a hash that is not text, a field missing or not decodable).
pub(super) fn read_fetched(queue: &str, fetched: FetchedJob) -> Result<Runnable, Unreadable> {
    let FetchedJob {
        id,
        token,
        job,
        receipt,
        next_iteration,
    } = fetched;
    match job {
        Ok(record) => Ok((
            Job::from_record(queue, record),
            Lease { token, receipt },
            next_iteration,
        )),
        Err(reason) => Err(Unreadable {
            id,
            token,
            reason,
            receipt,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullmq_protocol::JobRecord;

    #[test]
    fn a_decoded_record_is_runnable_with_its_lease() {
        let record = JobRecord::new("7", "email", serde_json::json!({}), Default::default(), 1);
        let fetched = FetchedJob::new("tok", record).with_receipt(Receipt(42));
        let (job, lease, next) = read_fetched("q", fetched).expect("runnable");
        assert_eq!(next, None);
        assert_eq!(
            (job.id(), job.name(), lease.token.as_str(), lease.receipt),
            ("7", "email", "tok", Receipt(42))
        );
    }

    #[test]
    fn an_unreadable_job_keeps_the_stores_reason() {
        let fetched = FetchedJob::unreadable("7", "tok", "field data is not UTF-8".to_string());
        let unreadable = read_fetched("q", fetched).expect_err("not runnable");
        assert_eq!(
            (unreadable.id.as_str(), unreadable.token.as_str()),
            ("7", "tok")
        );
        assert_eq!(unreadable.reason, "field data is not UTF-8");
    }
}
