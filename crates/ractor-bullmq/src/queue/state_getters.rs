//! One state's jobs with Node's defaults (`queue.getWaiting()`, `getActive()`, …): every job
//! of the state, in the order Node's getter lists them. For a page, or several states at once,
//! use [`Queue::get_jobs`].

use bullmq_protocol::state::JobState;

use crate::error::Result;
use crate::job::Job;
use crate::queue::Queue;

impl Queue {
    /// Every job of `state`, in the order Node's getter of that state lists them (Node
    /// `getJobs([state], 0, -1, asc)`): oldest first for the states still to run (`wait`,
    /// `waiting-children`, `active`, `delayed`, `prioritized`), newest first for finished ones.
    async fn state_jobs(&self, state: JobState) -> Result<Vec<Job>> {
        let ascending = !matches!(state, JobState::Completed | JobState::Failed);
        self.get_jobs(&[state], 0, -1, ascending).await
    }

    /// Every waiting job, oldest first (Node `queue.getWaiting()`, whose range defaults to
    /// all).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_waiting(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Waiting).await
    }

    /// Every flow parent waiting for its children, oldest first (Node
    /// `queue.getWaitingChildren()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_waiting_children(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::WaitingChildren).await
    }

    /// Every active job, oldest first (Node `queue.getActive()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_active(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Active).await
    }

    /// Every delayed job, soonest due first (Node `queue.getDelayed()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_delayed(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Delayed).await
    }

    /// Every prioritized job, in the order they will run (Node `queue.getPrioritized()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_prioritized(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Prioritized).await
    }

    /// Every completed job, newest first (Node `queue.getCompleted()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_completed(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Completed).await
    }

    /// Every failed job, newest first (Node `queue.getFailed()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_jobs`].
    pub async fn get_failed(&self) -> Result<Vec<Job>> {
        self.state_jobs(JobState::Failed).await
    }
}
