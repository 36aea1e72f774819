//! The seam's job references ([`JobRef`]: a queue in a namespace, and an id) at this
//! backend's edge.
//!
//! The protocol has no namespace (the schema is it) and stores a parent as `parent_queue` = the
//! plain queue name plus `parent_key` = `<queue>:<id>`, and a child in `job_dependency` as
//! `child_key` = `<queue>:<id>`. A namespace is accepted when it is Node's default (`bull`) or
//! the schema; what this backend hands back carries the namespace the caller opened the store
//! with. `JobRecord`'s raw `parent_key` / `parent.queue_key` keep Node's display form
//! `{namespace}:{queue}[:{id}]`.

use bullmq_protocol::{JobRecord, JobRef, QueueId};

use crate::error::PgError;

/// Checks that `prefix` means this schema: Node's default or the schema itself.
pub(crate) fn check_prefix(prefix: &str, schema: &str) -> Result<(), PgError> {
    if prefix == "bull" || prefix == schema {
        return Ok(());
    }
    Err(PgError::Reply {
        operation: "opening a queue",
        detail: format!(
            "the key prefix `{prefix}` has no meaning on PostgreSQL (the schema `{schema}` is the namespace); use the default prefix"
        ),
    })
}

/// A job of the seam as the protocol's `(queue, id)`, once its namespace is checked.
pub(crate) fn job_of<'k>(job: &'k JobRef, schema: &str) -> Result<(&'k str, &'k str), PgError> {
    check_prefix(job.queue.namespace(), schema)?;
    Ok((job.queue.name(), job.id.as_str()))
}

/// The protocol's `<queue>:<id>` as the seam's reference in `namespace` (queue names hold no
/// `:`, as Node refuses them).
pub(crate) fn job_ref(namespace: &str, pg_key: &str) -> JobRef {
    let (queue, id) = pg_key.split_once(':').unwrap_or(("", pg_key));
    JobRef::new(QueueId::new(namespace, queue), id)
}

/// The protocol's `<queue>:<id>` (a `parent_key` or a `child_key`).
pub(crate) fn pg_key(queue: &str, id: &str) -> String {
    format!("{queue}:{id}")
}

/// The protocol's `<queue>:<id>` as the seam's `{prefix}:{queue}:{id}`.
pub(crate) fn seam_key(prefix: &str, pg_key: &str) -> String {
    format!("{prefix}:{pg_key}")
}

/// A job read from a row with its parent reference in the seam's form: `parent_key`
/// `{prefix}:{queue}:{id}` and `parent.queue_key` `{prefix}:{queue}`.
pub(crate) fn seam_record(mut record: JobRecord, prefix: &str) -> JobRecord {
    if let Some(key) = record.parent_key.take() {
        record.parent_key = Some(seam_key(prefix, &key));
    }
    if let Some(parent) = record.parent.as_mut() {
        parent.queue_key = seam_key(prefix, &parent.queue_key);
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_keys() {
        assert!(check_prefix("bull", "s").is_ok());
        assert!(check_prefix("s", "s").is_ok());
        assert!(check_prefix("other", "s").is_err());
        let job = JobRef::new(QueueId::new("bull", "emails"), "42");
        assert_eq!(job_of(&job, "s").unwrap(), ("emails", "42"));
        let other = JobRef::new(QueueId::new("x", "emails"), "42");
        assert!(job_of(&other, "s").is_err());
        assert_eq!(seam_key("bull", &pg_key("q", "1")), "bull:q:1");
        assert_eq!(
            job_ref("bull", "q:a:b"),
            JobRef::new(QueueId::new("bull", "q"), "a:b")
        );
    }
}
