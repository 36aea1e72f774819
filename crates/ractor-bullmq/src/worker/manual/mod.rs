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
//! ```no_run
//! use std::time::Duration;
//! use ractor_bullmq::worker::{ManualWorker, WorkerOptions};
//! use ractor_bullmq::ConnectionConfig;
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let config = ConnectionConfig::from_env()?;
//! let worker = ManualWorker::connect(&config, "emails", WorkerOptions::new()).await?;
//! let mut next = worker.get_next_job("my-token").await?;
//! while let Some(job) = next {
//!     worker.extend_lock(&job, Duration::from_secs(30)).await?;
//!     let value = serde_json::json!({ "sent": job.job().id() });
//!     next = worker.move_to_completed(&job, value, true).await?;
//! }
//! worker.close().await;
//! # Ok(()) }
//! ```

mod error;
mod job;
mod worker;

pub use error::ManualError;
pub use job::ManualJob;
pub use worker::ManualWorker;
