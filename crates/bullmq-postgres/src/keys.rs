//! The seam's Redis-shaped job references at this backend's edge.
//!
//! The seam names a job `{prefix}:{queue}:{id}` and a queue `{prefix}:{queue}`; the protocol
//! has no prefix (the schema is the namespace) and stores a parent as `parent_queue` = the
//! plain queue name plus `parent_key` = `<queue>:<id>`, and a child in `job_dependency` as
//! `child_key` = `<queue>:<id>`. A prefix is accepted when it is Node's default (`bull`) or the
//! schema; what this backend hands back carries the prefix the caller opened the store with.

use bullmq_backend::flow_store::split_node_key;
use bullmq_protocol::JobRecord;

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

/// A job key of the seam (`{prefix}:{queue}:{id}`) as the protocol's `(queue, id)`.
pub(crate) fn job_of<'k>(key: &'k str, schema: &str) -> Result<(&'k str, &'k str), PgError> {
    let Some((prefix, queue, id)) = split_node_key(key) else {
        return Err(PgError::Reply {
            operation: "reading a job key",
            detail: format!("`{key}` is not a job key `{{prefix}}:{{queue}}:{{id}}`"),
        });
    };
    check_prefix(prefix, schema)?;
    Ok((queue, id))
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
        assert_eq!(job_of("bull:emails:42", "s").unwrap(), ("emails", "42"));
        assert!(job_of("x:emails:42", "s").is_err());
        assert!(job_of("emails", "s").is_err());
        assert_eq!(seam_key("bull", &pg_key("q", "1")), "bull:q:1");
    }
}
