//! Job schedulers of a queue (Node's `upsertJobScheduler` and its getters).
//!
//! ```no_run
//! use std::time::Duration;
//! use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
//! use ractor_bullmq::{JobSchedulersRange, Queue, QueueOptions};
//!
//! # async fn demo() -> Result<(), ractor_bullmq::QueueError> {
//! let queue = Queue::new("reports", QueueOptions::from_env()?).await?;
//! // Every weekday at 09:00 in Berlin, summer time or not.
//! let first = queue
//!     .upsert_job_scheduler(
//!         "daily-report",
//!         Repeat::cron("0 9 * * 1-5").tz("Europe/Berlin"),
//!         SchedulerTemplate::new("report").data(serde_json::json!({ "kind": "daily" })),
//!     )
//!     .await?;
//! println!("first run: {:?}", first.map(|job| job.id().to_owned()));
//! // Every 30 s, 10 times.
//! queue
//!     .upsert_job_scheduler(
//!         "heartbeat",
//!         Repeat::every(Duration::from_secs(30)).limit(10),
//!         SchedulerTemplate::new("beat"),
//!     )
//!     .await?;
//! // All of them, soonest first (Node's default order is latest first).
//! for scheduler in queue.get_job_schedulers(JobSchedulersRange::new().asc(true)).await? {
//!     println!("{} next at {:?}", scheduler.key, scheduler.next);
//! }
//! queue.remove_job_scheduler("heartbeat").await?;
//! # Ok(()) }
//! ```

use bullmq_backend::UpsertOutcome;
use bullmq_protocol::scheduler::{plan_upsert, JobSchedulerRecord, Repeat, SchedulerTemplate};
use bullmq_protocol::validate_job;

use super::add::{now_ms, DefaultOptions};
use super::Queue;
use crate::error::{QueueError, Result};
use crate::job::Job;

/// Which job schedulers [`Queue::get_job_schedulers`] reads, by rank of next run (Node
/// `getJobSchedulers(start, end, asc)`); [`JobSchedulersRange::new`] has Node's defaults.
///
/// ```
/// use ractor_bullmq::JobSchedulersRange;
/// let all = JobSchedulersRange::new();
/// assert_eq!((all.start, all.end, all.asc), (0, -1, false));
/// let first_ten = JobSchedulersRange::new().range(0, 9).asc(true);
/// assert_eq!((first_ten.end, first_ten.asc), (9, true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSchedulersRange {
    /// First rank (Node `start`, default 0).
    pub start: i64,
    /// Last rank, negative from the end (Node `end`, default -1: the last).
    pub end: i64,
    /// Soonest next run first (Node `asc`, default false: latest first).
    pub asc: bool,
}

impl Default for JobSchedulersRange {
    fn default() -> Self {
        Self {
            start: 0,
            end: -1,
            asc: false,
        }
    }
}

impl JobSchedulersRange {
    /// Node's defaults: every scheduler, latest next run first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ranks `start..=end` (negative from the end).
    #[must_use]
    pub fn range(mut self, start: i64, end: i64) -> Self {
        self.start = start;
        self.end = end;
        self
    }

    /// Soonest next run first when `asc`.
    #[must_use]
    pub fn asc(mut self, asc: bool) -> Self {
        self.asc = asc;
        self
    }
}

impl Queue {
    /// Creates the job scheduler `id`, or updates it, and returns its pending iteration (Node
    /// `upsertJobScheduler`). The template's options are merged over the queue's default job
    /// options; the iteration's name is the scheduler id when the template has none.
    ///
    /// Updating an existing scheduler replaces it whole and replaces its pending iteration if
    /// that has not started; an `every` scheduler whose interval did not change keeps its slot.
    /// `Ok(None)` when Node creates nothing: the `limit` was already reached (`count`), or a
    /// cron pattern has no run left before `end_date`.
    ///
    /// # Errors
    ///
    /// Before anything is written: [`QueueError::Scheduler`] with Node's wording (an end date
    /// in the past, both or neither of `pattern` and `every`, `immediately` with a start date,
    /// an invalid pattern or time zone, a template option the scheduler decides),
    /// [`QueueError::Validation`] for template options Node refuses on any job. From the
    /// backend: [`QueueError::SchedulerIterationExists`] (Node -10),
    /// [`QueueError::SchedulerSlotsBusy`] (Node -11), [`QueueError::Redis`].
    pub async fn upsert_job_scheduler(
        &self,
        id: &str,
        repeat: Repeat,
        template: SchedulerTemplate,
    ) -> Result<Option<Job>> {
        if let Some(reason) = template.data_error() {
            return Err(QueueError::Json(serde::de::Error::custom(reason)));
        }
        let mut template = template;
        template.opts =
            DefaultOptions::new(&self.inner.options.default_job_options)?.merge(template.opts)?;
        let now = now_ms();
        let Some(plan) = plan_upsert(id, &repeat, &template, now)? else {
            return Ok(None);
        };
        validate_job(&plan.fields.name, plan.template_data.len(), &template.opts)?;
        match self.inner.store.upsert_job_scheduler(&plan).await? {
            UpsertOutcome::Added { job_id, .. } => {
                let record = self.inner.store.get_job(&job_id).await?;
                // A worker may have run and removed an iteration that was due at once.
                Ok(record.map(|record| self.job_of(record)))
            }
            UpsertOutcome::IdCollision => Err(QueueError::SchedulerIterationExists {
                scheduler_id: id.to_owned(),
            }),
            UpsertOutcome::SlotsBusy => Err(QueueError::SchedulerSlotsBusy {
                scheduler_id: id.to_owned(),
            }),
        }
    }

    /// The job scheduler `id` (Node `getJobScheduler`), `None` when there is none.
    ///
    /// # Errors
    ///
    /// [`QueueError::Backend`] when its hash is unreadable or the key is a BullMQ 5
    /// repeatable job (Node's migration message), [`QueueError::Redis`].
    pub async fn get_job_scheduler(&self, id: &str) -> Result<Option<JobSchedulerRecord>> {
        Ok(self.inner.store.get_job_scheduler(id).await?)
    }

    /// Job schedulers by next run, ranks `range.start..=range.end` (`-1` = last), soonest
    /// first when `range.asc` (Node `getJobSchedulers(start = 0, end = -1, asc = false)`;
    /// [`JobSchedulersRange::new`] has those defaults: all, latest first).
    ///
    /// # Errors
    ///
    /// [`QueueError::Backend`] when a hash is unreadable or a BullMQ 5 repeatable job is in
    /// the range (Node's migration message, as Node refuses the whole read),
    /// [`QueueError::Redis`].
    pub async fn get_job_schedulers(
        &self,
        range: JobSchedulersRange,
    ) -> Result<Vec<JobSchedulerRecord>> {
        Ok(self
            .inner
            .store
            .get_job_schedulers(range.start, range.end, range.asc)
            .await?)
    }

    /// Number of job schedulers (Node `getJobSchedulersCount`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn get_job_schedulers_count(&self) -> Result<u64> {
        Ok(self.inner.store.get_job_schedulers_count().await?)
    }

    /// Removes the job scheduler `id` and its pending iteration if that is delayed (one already
    /// waiting or running finishes); `false` when there was no such scheduler (Node
    /// `removeJobScheduler`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn remove_job_scheduler(&self, id: &str) -> Result<bool> {
        Ok(self.inner.store.remove_job_scheduler(id).await?)
    }
}
