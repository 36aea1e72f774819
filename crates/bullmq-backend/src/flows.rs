//! A flow parent's view of its children ([`JobFlows`]): what they returned, which are pending,
//! which failed and were ignored or failed the parent.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::BackendResult;

/// A parent's children by outcome, keyed by the child's job key (`{prefix}:{queue}:{id}`), as
/// Node's `job.getDependencies()` returns them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dependencies {
    /// Completed children and their return value (JSON text) (`:processed`).
    pub processed: BTreeMap<String, String>,
    /// Children not finished yet (`:dependencies`), sorted.
    pub unprocessed: Vec<String>,
    /// Children that failed with `ignoreDependencyOnFailure`, and their failure reason
    /// (`:failed`).
    pub ignored: BTreeMap<String, String>,
    /// Children whose failure failed the parent (`failParentOnFailure`) (`:unsuccessful`),
    /// oldest first.
    pub failed: Vec<String>,
}

/// How many children a parent has by outcome (Node's `job.getDependenciesCount()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DependencyCounts {
    /// Completed children.
    pub processed: u64,
    /// Children not finished yet.
    pub unprocessed: u64,
    /// Failed children that were ignored.
    pub ignored: u64,
    /// Failed children that failed the parent.
    pub failed: u64,
}

impl Dependencies {
    /// Children by outcome.
    pub fn new(
        processed: BTreeMap<String, String>,
        unprocessed: Vec<String>,
        ignored: BTreeMap<String, String>,
        failed: Vec<String>,
    ) -> Self {
        Self {
            processed,
            unprocessed,
            ignored,
            failed,
        }
    }
}

impl DependencyCounts {
    /// Counts by outcome: processed, unprocessed, ignored, failed.
    pub fn new(processed: u64, unprocessed: u64, ignored: u64, failed: u64) -> Self {
        Self {
            processed,
            unprocessed,
            ignored,
            failed,
        }
    }
}

/// Reading a flow parent's children.
#[async_trait]
pub trait JobFlows: Send + Sync + 'static {
    /// The children of `job_id` by outcome (all of them; empty for a job without children).
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies>;

    /// How many children of `job_id` there are by outcome.
    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts>;
}

#[async_trait]
impl<T: JobFlows + ?Sized> JobFlows for std::sync::Arc<T> {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        (**self).get_dependencies(job_id).await
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        (**self).get_dependency_counts(job_id).await
    }
}
