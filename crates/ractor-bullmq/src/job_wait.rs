//! Waiting for a job to finish: [`Job::wait_until_finished`] and
//! [`Queue::wait_until_finished`].
//!
//! Semantics match Node BullMQ's `job.waitUntilFinished(queueEvents, ttl)`:
//!
//! - it resolves with the return value on the job's `completed` event, and fails with the
//!   `failedReason` on its `failed` event. The events stream carries `failed` only for a
//!   **final** failure (an attempt that will be retried emits `delayed` or `waiting` instead),
//!   so a job with attempts left keeps being waited for;
//! - a job that already finished before the call returns at once from its hash (`returnvalue`
//!   or `failedReason`), and a job that does not exist fails (Node rejects with "Missing key");
//! - after `timeout` it fails with [`WaitError::Timeout`].
//!
//! # Why it cannot miss the event
//!
//! The order is: subscribe to the [`QueueEventsHandle`] first, then wait until its reader has a
//! concrete position in the stream (a `$` start is pinned to the newest id when the reader
//! starts), and only then read the job's state. An event appended after that read has an id
//! above the pinned position, so it reaches the subscription; an event appended before it is
//! already visible in the job's state.

use std::time::Duration;

use bullmq_backend::{BackendError, JobEnd};
use bullmq_protocol::events::Event;
use bullmq_protocol::keys::QueueKey;
use bullmq_redis::RedisError;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::QueueError;
use crate::events::QueueEventsHandle;
use crate::job::Job;
use crate::queue::Queue;

/// How a job ended, as [`Job::wait_until_finished`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum JobFinished {
    /// The job completed with this return value (JSON `null` when the processor returned none).
    Completed(Value),
    /// The job failed for good with this `failedReason`.
    Failed(String),
}

impl JobFinished {
    /// The return value, or `Err(failedReason)`: Node's resolve / reject as a `Result`.
    ///
    /// # Errors
    ///
    /// The failure reason when the job failed.
    pub fn into_result(self) -> Result<Value, String> {
        match self {
            JobFinished::Completed(value) => Ok(value),
            JobFinished::Failed(reason) => Err(reason),
        }
    }
}

/// Why [`Job::wait_until_finished`] could not report a finish.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Neither `completed` nor `failed` arrived for the job within the timeout.
    #[error("job {job_id} did not finish within {timeout:?}")]
    Timeout {
        /// The job waited for.
        job_id: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The job's hash does not exist (never added, removed, or already cleaned).
    #[error("job {job_id} does not exist")]
    JobNotFound {
        /// The job waited for.
        job_id: String,
    },
    /// The QueueEvents was closed (or its reader stopped) while waiting.
    #[error("the QueueEvents was closed while waiting for job {job_id}")]
    EventsClosed {
        /// The job waited for.
        job_id: String,
    },
    /// The job was not read through a queue (built with `Job::decode` / `Job::from_record`, or
    /// fetched by a Worker), so there is no queue to read its state from.
    #[error("job {job_id} was not read through a queue (wait with Queue::wait_until_finished)")]
    Detached {
        /// The job waited for.
        job_id: String,
    },
    /// The QueueEvents reads another queue than the job's.
    #[error("the QueueEvents reads {events_key}, not the events of queue {queue}")]
    WrongQueue {
        /// The job's queue.
        queue: String,
        /// The stream the QueueEvents reads.
        events_key: String,
    },
    /// Reading the job's state failed on Redis.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// Reading the job's state failed on another backend.
    #[error(transparent)]
    Backend(BackendError),
}

impl From<BackendError> for WaitError {
    /// Redis failures stay [`WaitError::Redis`], as [`QueueError`] keeps them.
    fn from(error: BackendError) -> Self {
        match QueueError::from(error) {
            QueueError::Redis(redis) => WaitError::Redis(redis),
            QueueError::Backend(backend) => WaitError::Backend(backend),
            other => WaitError::Backend(BackendError::backend(other)),
        }
    }
}

/// How often the reader's position is checked while it has not pinned a `$` start yet.
const PIN_POLL: Duration = Duration::from_millis(5);

impl Job {
    /// Waits until this job completes or fails for good, as Node's `waitUntilFinished`: see
    /// the [module docs](crate::job_wait) for the exact semantics. The job's state is read
    /// through the queue the job was read from; `events` must read that queue's events and be
    /// running (or be started with `run` while this waits).
    ///
    /// # Errors
    ///
    /// [`WaitError::Detached`] for a job without a queue handle (use
    /// [`Queue::wait_until_finished`] with its id); [`WaitError::Timeout`],
    /// [`WaitError::JobNotFound`], [`WaitError::EventsClosed`], [`WaitError::WrongQueue`],
    /// [`WaitError::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops its subscription and changes nothing in Redis.
    pub async fn wait_until_finished(
        &self,
        events: &QueueEventsHandle,
        timeout: Duration,
    ) -> Result<JobFinished, WaitError> {
        let Some(queue) = self.queue() else {
            return Err(WaitError::Detached {
                job_id: self.id().to_owned(),
            });
        };
        queue.wait_until_finished(self.id(), events, timeout).await
    }
}

impl Queue {
    /// Waits until job `job_id` of this queue completes or fails for good; see
    /// [`Job::wait_until_finished`].
    ///
    /// # Errors
    ///
    /// As [`Job::wait_until_finished`].
    pub async fn wait_until_finished(
        &self,
        job_id: &str,
        events: &QueueEventsHandle,
        timeout: Duration,
    ) -> Result<JobFinished, WaitError> {
        let events_key = events.args().options().events_key();
        if events_key != self.keys().key(QueueKey::Events) {
            return Err(WaitError::WrongQueue {
                queue: self.name().to_owned(),
                events_key,
            });
        }
        let deadline = Instant::now() + timeout;
        let timed_out = || WaitError::Timeout {
            job_id: job_id.to_owned(),
            timeout,
        };
        // 1. Subscribe before anything else: every event delivered from now on reaches `rx`.
        let mut rx = events.subscribe_stream();
        // 2. Wait until the reader knows where it reads from; a `$` not pinned yet could skip
        //    an event appended between the state check and the pin.
        while events.last_event_id() == "$" {
            if events.shared().is_closed() {
                return Err(WaitError::EventsClosed {
                    job_id: job_id.to_owned(),
                });
            }
            if Instant::now() >= deadline {
                return Err(timed_out());
            }
            tokio::time::sleep(PIN_POLL).await;
        }
        // 3. Only now look at the job: a finish before this point is in its hash.
        if let Some(finished) = self.finished_state(job_id).await? {
            return finished;
        }
        // 4. The finish event comes after the check, so after the pinned position.
        loop {
            let event = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) => return Err(timed_out()),
                Ok(None) => {
                    return Err(WaitError::EventsClosed {
                        job_id: job_id.to_owned(),
                    })
                }
                Ok(Some(event)) => event,
            };
            // The event is shared with the other subscribers: copy only what is returned.
            match &event.event {
                Event::Completed {
                    job_id: id,
                    returnvalue,
                    ..
                } if id == job_id => return Ok(JobFinished::Completed(returnvalue.clone())),
                Event::Failed {
                    job_id: id,
                    failed_reason,
                    ..
                } if id == job_id => return Ok(JobFinished::Failed(failed_reason.clone())),
                _ => {}
            }
        }
    }

    /// The job's finish as stored, read atomically: `None` while it is not in `completed` or
    /// `failed`; `Some(Err(JobNotFound))` when its hash is gone.
    async fn finished_state(
        &self,
        job_id: &str,
    ) -> Result<Option<Result<JobFinished, WaitError>>, WaitError> {
        let end = self.store().job_end(job_id).await?;
        match end {
            JobEnd::Missing => Ok(Some(Err(WaitError::JobNotFound {
                job_id: job_id.to_owned(),
            }))),
            // As Node's getReturnValue: JSON when it parses, the raw text otherwise.
            JobEnd::Completed(raw) => {
                let value = match raw {
                    None => Value::Null,
                    Some(raw) => serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
                };
                Ok(Some(Ok(JobFinished::Completed(value))))
            }
            JobEnd::Failed(reason) => Ok(Some(Ok(JobFinished::Failed(reason.unwrap_or_default())))),
            _ => Ok(None),
        }
    }
}
