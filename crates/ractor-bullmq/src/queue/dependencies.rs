//! A flow parent's children as Node's `job.getDependencies()` returns them: by child job key
//! (`{prefix}:{queue}:{id}`). The backend seam names children by
//! [`JobRef`](bullmq_backend::JobRef) ([`bullmq_backend::Dependencies`]); these are its
//! Node-shaped views, what `Queue`, `Job` and `JobContext` return.

use std::collections::BTreeMap;

use serde_json::Value;

/// A parent's children by outcome, keyed by the child's job key (`{prefix}:{queue}:{id}`), as
/// Node's `job.getDependencies()` returns them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Dependencies {
    /// Completed children and their return value, parsed as Node's `getDependencies` parses
    /// it (a value that is not JSON is kept as a JSON string of its text).
    pub processed: BTreeMap<String, Value>,
    /// Children not finished yet, sorted.
    pub unprocessed: Vec<String>,
    /// Children that failed with `ignoreDependencyOnFailure`, and their failure reason.
    pub ignored: BTreeMap<String, String>,
    /// Children whose failure failed the parent (`failParentOnFailure`), oldest first.
    pub failed: Vec<String>,
}

impl From<bullmq_backend::Dependencies> for Dependencies {
    fn from(deps: bullmq_backend::Dependencies) -> Self {
        let key = |job: bullmq_backend::JobRef| job.to_string();
        let mut unprocessed: Vec<String> = deps.unprocessed.into_iter().map(key).collect();
        unprocessed.sort();
        Self {
            processed: deps
                .processed
                .into_iter()
                .map(|(job, value)| (key(job), value))
                .collect(),
            unprocessed,
            ignored: deps
                .ignored
                .into_iter()
                .map(|(job, reason)| (key(job), reason))
                .collect(),
            failed: deps.failed.into_iter().map(key).collect(),
        }
    }
}

/// One page of a parent's children of one kind, by child job key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DependencyPage {
    /// Child job keys, with the return value (processed) or failure reason (ignored).
    pub entries: Vec<(String, Option<String>)>,
    /// The cursor of the next page; 0 when this was the last (Node's `next…Cursor`).
    pub next_cursor: u64,
}

impl From<bullmq_backend::DependencyPage> for DependencyPage {
    fn from(page: bullmq_backend::DependencyPage) -> Self {
        Self {
            entries: page
                .entries
                .into_iter()
                .map(|(job, value)| (job.to_string(), value))
                .collect(),
            next_cursor: page.next_cursor,
        }
    }
}
