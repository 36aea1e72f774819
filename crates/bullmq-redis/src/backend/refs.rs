//! The seam's flow values from what Redis holds: child job keys become [`JobRef`]s
//! ([`crate::node_key`]); a key that does not parse is a `BackendError::Decode` naming the
//! parent and the key.

use bullmq_backend::{BackendResult, Dependencies, DependencyPage};
use bullmq_protocol::JobRef;

use crate::node_key::child_ref;
use crate::queue::{DependencyKeys, DependencyKeysPage};

/// The children of `parent_id` by outcome (unprocessed ones sorted).
pub(super) fn dependencies(parent_id: &str, keys: DependencyKeys) -> BackendResult<Dependencies> {
    let refs = |field: &str, list: Vec<String>| -> BackendResult<Vec<JobRef>> {
        list.iter()
            .map(|key| child_ref(parent_id, field, key))
            .collect()
    };
    let map = |field: &str, map: std::collections::BTreeMap<String, String>| {
        map.into_iter()
            .map(|(key, value)| Ok((child_ref(parent_id, field, &key)?, value)))
            .collect::<BackendResult<_>>()
    };
    let mut unprocessed = refs("dependencies", keys.unprocessed)?;
    unprocessed.sort();
    Ok(Dependencies::new(
        map("processed", keys.processed)?,
        unprocessed,
        map("failed", keys.ignored)?,
        refs("unsuccessful", keys.failed)?,
    ))
}

/// One page of the children of `parent_id`, its keys read from `field`.
pub(super) fn page(
    parent_id: &str,
    field: &str,
    page: DependencyKeysPage,
) -> BackendResult<DependencyPage> {
    let entries = page
        .entries
        .into_iter()
        .map(|(key, value)| Ok((child_ref(parent_id, field, &key)?, value)))
        .collect::<BackendResult<_>>()?;
    Ok(DependencyPage::new(entries, page.next_cursor))
}

/// Job keys named by job `parent_id`'s `field` (a flow node's children, the removed children).
pub(super) fn job_refs(
    parent_id: &str,
    field: &str,
    keys: &[String],
) -> BackendResult<Vec<JobRef>> {
    keys.iter()
        .map(|key| child_ref(parent_id, field, key))
        .collect()
}
