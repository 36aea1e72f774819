//! Manual processing: a worker without a processor, driven by the caller (Node's
//! [manually fetching jobs](https://docs.bullmq.io/patterns/manually-fetching-jobs) pattern).
//!
//! A [`ManualWorker`] hands out the next job locked with the caller's token
//! ([`ManualWorker::get_next_job`]); the caller keeps the lock alive
//! ([`ManualWorker::extend_lock`]) and records how the job ended with
//! [`ManualWorker::move_to_completed`] or [`ManualWorker::move_to_failed`], optionally taking the
//! next job in the same round trip. Retries and backoff are decided as the [`Worker`]'s are.
//! Nothing runs in the background unless asked: no lock renewal and no stalled check (start it
//! with [`ManualWorker::start_stalled_check_timer`] or call [`ManualWorker::check_stalled`]),
//! as in Node, where a worker without a processor starts neither.
//!
//! [`Worker`]: super::Worker
//!
//! See [`ManualWorker`] for an example.

mod error;
mod job;
mod worker;

pub use error::ManualError;
pub use job::ManualJob;
pub use worker::ManualWorker;
