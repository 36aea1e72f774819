//! The Redis key codec of flow references: a job is stored under `{prefix}:{queue}:{id}`, and
//! flow sets (a parent's `:dependencies`, `:processed`, `:failed`, `:unsuccessful`, a flow's
//! children) name jobs by that key. The seam names them by [`JobRef`]; this module converts.

use bullmq_backend::{BackendError, BackendResult};
use bullmq_protocol::{DecodeError, DecodeReason, JobRef, QueueId};

/// Splits a job key `{prefix}:{queue}:{id}` as Node's `parseNodeKey` does: the id after the
/// last `:`, the queue before it, the prefix (which may hold `:`) the rest.
///
/// ```
/// use bullmq_redis::node_key::split_node_key;
/// assert_eq!(split_node_key("bull:emails:42"), Some(("bull", "emails", "42")));
/// assert_eq!(split_node_key("a:b:emails:42"), Some(("a:b", "emails", "42")));
/// assert_eq!(split_node_key("emails:42"), None);
/// ```
pub fn split_node_key(key: &str) -> Option<(&str, &str, &str)> {
    let (rest, id) = key.rsplit_once(':')?;
    let (prefix, queue) = rest.rsplit_once(':')?;
    Some((prefix, queue, id))
}

/// The job a job key names ([`split_node_key`]; the prefix is the queue's namespace).
///
/// ```
/// use bullmq_redis::node_key::parse_job_key;
/// let job = parse_job_key("bull:emails:42").unwrap();
/// assert_eq!(job.to_string(), "bull:emails:42");
/// assert!(parse_job_key("42").is_none());
/// ```
pub fn parse_job_key(key: &str) -> Option<JobRef> {
    let (prefix, queue, id) = split_node_key(key)?;
    Some(JobRef::new(QueueId::new(prefix, queue), id))
}

/// The job key of `job`, `{namespace}:{queue}:{id}`.
pub fn job_key(job: &JobRef) -> String {
    job.to_string()
}

/// The child named by `key` in `field` of job `parent_id` (a parent's flow set, a flow node's
/// children): a key that is not a job key (written by a foreign client) is a
/// [`BackendError::Decode`] naming the parent, the set and the key.
pub(crate) fn child_ref(parent_id: &str, field: &str, key: &str) -> BackendResult<JobRef> {
    parse_job_key(key).ok_or_else(|| BackendError::Decode {
        job_id: parent_id.to_owned(),
        source: DecodeError::new(field, DecodeReason::InvalidJobKey(key.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unparsable_child_names_its_parent_and_key() {
        let error = child_ref("p1", "dependencies", "nope").unwrap_err();
        assert_eq!(
            error.to_string(),
            "job p1 cannot be read: dependencies holds \"nope\", not a job key {prefix}:{queue}:{id}"
        );
        assert_eq!(
            child_ref("p1", "dependencies", "bull:q:7").unwrap(),
            JobRef::new(QueueId::new("bull", "q"), "7")
        );
    }
}
