//! A flow parent's children, read from a [`Job`] a queue read, as Node has them on its `Job`
//! class (`getChildrenValues`, `getIgnoredChildrenFailures`, `getFailedChildrenValues`,
//! `getDependencies`, `getDependenciesCount`). Each is the [`Queue`](crate::Queue) read of the
//! same name on this job's id.
//!
//! ```no_run
//! # async fn run(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
//! if let Some(parent) = queue.get_job("report-1").await? {
//!     let totals = parent.get_children_values::<u64>().await?;
//!     let counts = parent.get_dependencies_count().await?;
//!     println!("{} children done, {} pending: {totals:?}", counts.processed, counts.unprocessed);
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;

use bullmq_backend::{DependencyCounts, DependencyKind};

use crate::queue::{Dependencies, DependencyPage};
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::job::Job;

impl Job {
    /// What this job's completed children returned, by child job key, each read as `T`
    /// ([`Queue::get_children_values`](crate::Queue::get_children_values)).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached) for a job without a queue
    /// handle, and those of the queue's read.
    pub async fn get_children_values<T: DeserializeOwned>(&self) -> Result<BTreeMap<String, T>> {
        self.acting_queue()?.get_children_values(self.id()).await
    }

    /// The failure reasons of this job's children ignored on failure
    /// ([`Queue::get_ignored_children_failures`](crate::Queue::get_ignored_children_failures)).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn get_ignored_children_failures(&self) -> Result<BTreeMap<String, String>> {
        self.acting_queue()?
            .get_ignored_children_failures(self.id())
            .await
    }

    /// The same as [`Job::get_ignored_children_failures`] (Node's deprecated
    /// `getFailedChildrenValues`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_ignored_children_failures`].
    pub async fn get_failed_children_values(&self) -> Result<BTreeMap<String, String>> {
        self.get_ignored_children_failures().await
    }

    /// This job's children by outcome
    /// ([`Queue::get_dependencies`](crate::Queue::get_dependencies)).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn get_dependencies(&self) -> Result<Dependencies> {
        self.acting_queue()?.get_dependencies(self.id()).await
    }

    /// A page of this job's children of one `kind`
    /// ([`Queue::get_dependencies_page`](crate::Queue::get_dependencies_page)).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn get_dependencies_page(
        &self,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> Result<DependencyPage> {
        self.acting_queue()?
            .get_dependencies_page(self.id(), kind, cursor, count)
            .await
    }

    /// How many children this job has by outcome
    /// ([`Queue::get_dependencies_count`](crate::Queue::get_dependencies_count)).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn get_dependencies_count(&self) -> Result<DependencyCounts> {
        self.acting_queue()?.get_dependencies_count(self.id()).await
    }
}
