//! A flow parent's view of its children ([`JobFlows`]): what they returned, which are pending,
//! which failed and were ignored or failed the parent.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bullmq_protocol::JobRef;

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;

/// A parent's children by outcome, each child a [`JobRef`] (Node's `job.getDependencies()`
/// names them by job key, which is a [`JobRef`]'s `Display`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dependencies {
    /// Completed children and their return value, parsed as Node's `getDependencies` parses
    /// it (a value that is not JSON is kept as a JSON string of its text).
    pub processed: BTreeMap<JobRef, serde_json::Value>,
    /// Children not finished yet, sorted.
    pub unprocessed: Vec<JobRef>,
    /// Children that failed with `ignoreDependencyOnFailure`, and their failure reason.
    pub ignored: BTreeMap<JobRef, String>,
    /// Children whose failure failed the parent (`failParentOnFailure`), oldest first.
    pub failed: Vec<JobRef>,
}

/// How many children a parent has by outcome (Node's `job.getDependenciesCount()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Children by outcome; `processed` holds the return values as stored (JSON text) and is
    /// parsed here.
    pub fn new(
        processed: BTreeMap<JobRef, String>,
        unprocessed: Vec<JobRef>,
        ignored: BTreeMap<JobRef, String>,
        failed: Vec<JobRef>,
    ) -> Self {
        let processed = processed
            .into_iter()
            .map(|(key, raw)| {
                let value = serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw));
                (key, value)
            })
            .collect();
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

/// One outcome of a parent's children, for paging through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DependencyKind {
    /// Completed children, with their return values.
    Processed,
    /// Children not finished yet.
    Unprocessed,
    /// Failed children that were ignored, with their failure reasons.
    Ignored,
    /// Failed children that failed the parent.
    Failed,
}

/// One page of a parent's children of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DependencyPage {
    /// The children, with the return value (processed) or failure reason (ignored).
    pub entries: Vec<(JobRef, Option<String>)>,
    /// The cursor of the next page, opaque to callers (its meaning is the backend's); 0 when
    /// this was the last (Node's `next…Cursor`).
    pub next_cursor: u64,
}

impl DependencyPage {
    /// A page.
    pub fn new(entries: Vec<(JobRef, Option<String>)>, next_cursor: u64) -> Self {
        Self {
            entries,
            next_cursor,
        }
    }
}

/// Reading a flow parent's children.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait JobFlows: BackendName {
    /// The children of `job_id` by outcome (all of them; empty for a job without children).
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        unsupported(self, Capability::Flows)
    }

    /// How many children of `job_id` there are by outcome.
    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        unsupported(self, Capability::Flows)
    }

    /// About `count` children of `job_id` of one `kind`, from `cursor` (0 to start). The
    /// cursor is the backend's own (callers only hand it back); a page may hold more or fewer
    /// than `count` entries, and every child is on some page.
    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        unsupported(self, Capability::Flows)
    }
}

#[async_trait]
impl<T: JobFlows + ?Sized> JobFlows for std::sync::Arc<T> {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        (**self).get_dependencies(job_id).await
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        (**self).get_dependency_counts(job_id).await
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        (**self)
            .get_dependencies_page(job_id, kind, cursor, count)
            .await
    }
}

/// A page of `all` (sorted entries) from the rank `cursor`: the reference paging of backends
/// without cursors of their own.
pub fn page_of(all: Vec<(JobRef, Option<String>)>, cursor: u64, count: u64) -> DependencyPage {
    let start = usize::try_from(cursor).unwrap_or(usize::MAX);
    let take = usize::try_from(count.max(1)).unwrap_or(usize::MAX);
    let end = start.saturating_add(take);
    let next = if end >= all.len() { 0 } else { end as u64 };
    let entries = all.into_iter().skip(start).take(take).collect();
    DependencyPage::new(entries, next)
}
