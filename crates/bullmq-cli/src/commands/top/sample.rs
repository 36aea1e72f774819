//! Reading what `bullmq top` shows, and the two things it changes (pause / resume and retrying
//! failed jobs). One Redis connection serves every queue (on PostgreSQL the backend's pool).

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use ractor_bullmq::queue::parse_client_lists;
use ractor_bullmq::{MetricsKind, Queue, QueueError, RetryFrom, RetryReset};

use super::model::{Failure, QueueSample, Total};
use crate::commands::session::Session;
use crate::commands::Context;

/// Queues are looked for again every this many refreshes: SCAN walks the whole keyspace, so
/// not on every refresh of a busy Redis (each look is the seam's queue discovery).
const REDISCOVER_EVERY: u64 = 5;

/// How many of the selected queue's failures are read (the screen shows what fits).
const FAILURES: i64 = 20;

/// How long one Redis command may take before the refresh reports it failed.
const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Failed ids read per page while retrying them.
const RETRY_PAGE: i64 = 500;

/// The open connection and the queues found under the prefix.
pub(crate) struct Sampler {
    session: Session,
    queues: BTreeMap<String, Queue>,
    refreshes: u64,
}

impl Sampler {
    /// Connects to the target of `ctx`.
    ///
    /// # Errors
    ///
    /// A bad URL, or the server not answering.
    pub(crate) async fn connect(ctx: &Context) -> Result<Self> {
        Ok(Self {
            session: Session::connect(ctx, Some(COMMAND_TIMEOUT)).await?,
            queues: BTreeMap::new(),
            refreshes: 0,
        })
    }

    /// One sample of every queue under the prefix (rediscovering them every few refreshes).
    ///
    /// # Errors
    ///
    /// The store failing (the caller shows it and tries again next refresh).
    pub(crate) async fn sample(&mut self) -> Result<Vec<QueueSample>> {
        if self.refreshes % REDISCOVER_EVERY == 0 {
            self.rediscover().await?;
        }
        self.refreshes += 1;
        // On Redis one CLIENT LIST for all queues (what `Queue::get_workers` reads per queue),
        // so a prefix with many queues costs one listing per refresh, not one each; on a
        // cluster, every primary's listing. Elsewhere each queue's worker listing.
        let clients: Option<Vec<String>> = match self.session.redis_client() {
            Some(client) => Some(
                bullmq_redis::cluster::client_lists(client)
                    .await
                    .context("CLIENT LIST failed (some hosted Redis services disable it)")?,
            ),
            None => None,
        };
        let mut samples = Vec::with_capacity(self.queues.len());
        for (name, queue) in &self.queues {
            samples.push(
                sample_queue(queue, clients.as_deref())
                    .await
                    .with_context(|| format!("reading queue {name:?}"))?,
            );
        }
        Ok(samples)
    }

    /// The server's facts (`None` when INFO fails: they are not worth failing a refresh).
    pub(crate) async fn server(&self) -> Option<crate::commands::server_facts::ServerFacts> {
        self.session.server_facts().await.ok()
    }

    async fn rediscover(&mut self) -> Result<()> {
        let names = self.session.list_queues().await?;
        self.queues.retain(|name, _| names.contains(name));
        for name in names {
            if self.queues.contains_key(&name) {
                continue;
            }
            // Watching must not write: the queue's `meta` is left as its owner wrote it.
            let queue = self.session.open(&name).await?;
            self.queues.insert(name, queue);
        }
        Ok(())
    }

    fn queue(&self, name: &str) -> Result<&Queue> {
        self.queues
            .get(name)
            .with_context(|| format!("queue {name:?} is no longer under the prefix"))
    }

    /// The newest failures of queue `name`.
    ///
    /// # Errors
    ///
    /// Redis failing, or a job hash that does not decode.
    pub(crate) async fn failures(&self, name: &str) -> Result<Vec<Failure>> {
        let jobs = self
            .queue(name)?
            .get_jobs(&[JobState::Failed], 0, FAILURES - 1, false)
            .await
            .with_context(|| format!("reading the failures of {name:?}"))?;
        Ok(jobs
            .iter()
            .map(|job| Failure {
                id: job.id().to_owned(),
                name: job.name().to_owned(),
                reason: job.failed_reason().unwrap_or_default().to_owned(),
            })
            .collect())
    }

    /// Pauses queue `name` when it runs, resumes it when paused; returns whether it is paused
    /// now.
    ///
    /// # Errors
    ///
    /// Redis failing.
    pub(crate) async fn toggle_pause(&self, name: &str) -> Result<bool> {
        let queue = self.queue(name)?;
        let paused = queue.is_paused().await?;
        if paused {
            queue.resume().await?;
        } else {
            queue.pause().await?;
        }
        Ok(!paused)
    }

    /// Retries the failed jobs of queue `name`; returns how many went back to be processed.
    ///
    /// # Errors
    ///
    /// Redis failing (the jobs retried before stay retried).
    pub(crate) async fn retry_failed(&self, name: &str) -> Result<u64> {
        retry_failed(self.queue(name)?).await
    }

    /// Closes the connection.
    pub(crate) async fn close(self) {
        self.session.close().await;
    }
}

/// Counts, paused flag, workers (found in `clients`, the `CLIENT LIST` replies, one per
/// cluster primary, on Redis; else the queue's worker listing) and finished totals of one
/// queue.
async fn sample_queue(queue: &Queue, clients: Option<&[String]>) -> Result<QueueSample> {
    let counts = queue.get_job_counts().await?;
    let paused = queue.is_paused().await?;
    let workers = match clients {
        Some(clients) => parse_client_lists(clients, queue.keys()).len(),
        None => queue.get_workers().await?.len(),
    };
    // Only the totals hash is wanted: the range 0..-1 would read every data point.
    let completed = queue.get_metrics(MetricsKind::Completed, 0, 0).await?;
    let failed = queue.get_metrics(MetricsKind::Failed, 0, 0).await?;
    Ok(QueueSample {
        name: queue.name().to_owned(),
        counts,
        paused,
        workers,
        completed: Total::pick(completed.meta.count, counts.completed),
        failed: Total::pick(failed.meta.count, counts.failed),
    })
}

/// Retries every job that is in `failed` when it starts, a page at a time, oldest first (as
/// Node's `retryJobs` does); a job another client moved meanwhile is skipped. Stops after as
/// many jobs as were failed at the start, so jobs failing again meanwhile cannot keep it
/// going forever.
async fn retry_failed(queue: &Queue) -> Result<u64> {
    let mut budget = queue.get_job_counts().await?.failed;
    let mut retried = 0;
    while budget > 0 {
        let page = i64::try_from(budget).unwrap_or(i64::MAX).min(RETRY_PAGE);
        let ids = queue
            .get_job_ids(&[JobState::Failed], 0, page - 1, true)
            .await?;
        if ids.is_empty() {
            break;
        }
        let mut moved = 0;
        for id in &ids {
            match queue
                .retry_job(id, RetryFrom::Failed, RetryReset::none())
                .await
            {
                Ok(()) => moved += 1,
                Err(QueueError::JobNotFound { .. } | QueueError::JobNotInState { .. }) => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("retrying job {id} ({retried} retried before it)")
                    })
                }
            }
        }
        retried += moved;
        budget = budget.saturating_sub(ids.len() as u64);
        if moved == 0 {
            break;
        }
    }
    Ok(retried)
}
