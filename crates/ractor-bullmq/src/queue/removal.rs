//! Deleting from a queue: the whole queue ([`Queue::obliterate`], Node `queue.obliterate`) or
//! one job ([`Queue::remove`], Node `queue.remove`), each with Node's options.

use bullmq_backend::{ObliterateStep, RemoveOutcome};

use super::Queue;
use crate::error::{QueueError, Result};

/// How [`Queue::obliterate_with`] deletes the queue (Node `obliterate({force, count})`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObliterateOptions {
    /// Delete active jobs too (their workers find their locks gone). Default false: a queue
    /// with active jobs is refused.
    pub force: bool,
    /// Jobs deleted per call (at least 1; Node's default 1000). Smaller batches keep each
    /// script short on a busy server, at the cost of more round trips.
    pub count: u32,
}

impl Default for ObliterateOptions {
    fn default() -> Self {
        Self {
            force: false,
            count: 1000,
        }
    }
}

impl ObliterateOptions {
    /// Node's defaults: no force, 1000 jobs per call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Deletes active jobs too.
    #[must_use]
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Jobs deleted per call.
    #[must_use]
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }
}

/// How [`Queue::remove_with`] removes a job (Node `queue.remove(id, {removeChildren})`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveOptions {
    /// Remove the job's flow children (and theirs) too. Default true, as Node. With false the
    /// children stay where they are, still naming the removed parent in their `parentKey`
    /// (as Node leaves them): they run and finish as jobs without a parent to notify.
    pub remove_children: bool,
}

impl Default for RemoveOptions {
    fn default() -> Self {
        Self {
            remove_children: true,
        }
    }
}

impl RemoveOptions {
    /// Node's default: the children go too.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the children go too.
    #[must_use]
    pub fn remove_children(mut self, remove: bool) -> Self {
        self.remove_children = remove;
        self
    }
}

impl Queue {
    /// Deletes the queue and all its jobs (pausing it first), in batches of 1000 jobs; with
    /// `force`, active jobs too. Same as [`Queue::obliterate_with`] with Node's default count.
    ///
    /// # Errors
    ///
    /// As [`Queue::obliterate_with`].
    pub async fn obliterate(&self, force: bool) -> Result<()> {
        self.obliterate_with(ObliterateOptions::new().force(force))
            .await
    }

    /// Deletes the queue and all its jobs as Node's `obliterate({force, count})`: pauses it,
    /// then deletes `count` jobs per call until nothing is left, then every queue key.
    ///
    /// ```no_run
    /// # async fn demo(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
    /// use ractor_bullmq::ObliterateOptions;
    /// queue.obliterate_with(ObliterateOptions::new().force(true).count(200)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `count` is 0 (nothing written, not even the
    /// pause); [`QueueError::ActiveJobs`] when jobs are active and `force` is false (jobs
    /// deleted in earlier batches stay deleted, none active is touched); [`QueueError::Redis`].
    pub async fn obliterate_with(&self, options: ObliterateOptions) -> Result<()> {
        if options.count == 0 {
            return Err(QueueError::InvalidArgument {
                argument: "count",
                reason: "at least 1 job per batch",
            });
        }
        let store = &self.inner.store;
        store.pause().await?;
        loop {
            match store.obliterate_batch(options.count, options.force).await? {
                ObliterateStep::More => continue,
                // Another client resumed the queue between our calls: pause again and go on.
                ObliterateStep::NotPaused => store.pause().await?,
                ObliterateStep::ActiveJobs => {
                    return Err(QueueError::ActiveJobs {
                        queue: self.inner.keys.qualified_name().to_owned(),
                    })
                }
                _ => return Ok(()),
            }
        }
    }

    /// Removes a job (and its flow children) with all its keys; `false` when it did not exist.
    /// Same as [`Queue::remove_with`] with Node's defaults.
    ///
    /// # Errors
    ///
    /// As [`Queue::remove_with`].
    pub async fn remove(&self, job_id: &str) -> Result<bool> {
        self.remove_with(job_id, RemoveOptions::new()).await
    }

    /// Removes a job with all its keys, and its flow children as `options` say (Node
    /// `queue.remove(id, {removeChildren})`); emits `removed` per job removed. A parent
    /// waiting only for this job moves on, as Node's. `false` when the job did not exist.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobLocked`] when a worker holds the job (or, removing children, one of
    /// its pending children); [`QueueError::SchedulerJob`] for a job scheduler's pending run;
    /// nothing is removed then; [`QueueError::Redis`].
    pub async fn remove_with(&self, job_id: &str, options: RemoveOptions) -> Result<bool> {
        match self
            .inner
            .store
            .remove_job(job_id, options.remove_children)
            .await?
        {
            RemoveOutcome::Removed => Ok(true),
            RemoveOutcome::NotFound => Ok(false),
            RemoveOutcome::Locked => Err(QueueError::JobLocked {
                job_id: job_id.to_owned(),
            }),
            _ => Err(QueueError::SchedulerJob {
                job_id: job_id.to_owned(),
            }),
        }
    }
}
