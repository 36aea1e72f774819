//! Backend-neutral identities: [`QueueId`], which queue a call is about, and [`JobRef`], which
//! job of which queue, whatever the backend stores them as.

use crate::keys::{QueueKeys, DEFAULT_PREFIX};

/// One queue: its namespace and its name. The namespace is what groups queues in a backend
/// (the Redis key prefix, `bull` by default; a PostgreSQL schema); how a backend lays a queue
/// out is its own business (the Redis backend builds its [`QueueKeys`] from it).
///
/// Ordered by namespace, then name; displayed as `{namespace}:{name}` (Node's
/// `queue.qualifiedName` on Redis).
///
/// ```
/// use bullmq_protocol::ids::QueueId;
/// let id = QueueId::new("bull", "emails");
/// assert_eq!((id.namespace(), id.name()), ("bull", "emails"));
/// assert_eq!(id.to_string(), "bull:emails");
/// assert_eq!(QueueId::with_default_namespace("emails"), id);
/// assert!(QueueId::new("a", "z") < QueueId::new("b", "a"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId {
    namespace: String,
    name: String,
}

impl QueueId {
    /// Queue `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Queue `name` in Node's default namespace ([`DEFAULT_PREFIX`], `bull`).
    pub fn with_default_namespace(name: impl Into<String>) -> Self {
        Self::new(DEFAULT_PREFIX, name)
    }

    /// The namespace (the Redis key prefix).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Redis key names of this queue (prefix = namespace).
    pub fn keys(&self) -> QueueKeys {
        QueueKeys::new(self.namespace.clone(), self.name.clone())
    }
}

impl std::fmt::Display for QueueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.namespace, self.name)
    }
}

impl From<&QueueKeys> for QueueId {
    fn from(keys: &QueueKeys) -> Self {
        Self::new(keys.prefix(), keys.name())
    }
}

impl From<&QueueId> for QueueKeys {
    fn from(id: &QueueId) -> Self {
        id.keys()
    }
}

/// One job of one queue: a flow's parent or child, by value (never a backend's key).
///
/// Ordered by queue, then id; displayed as `{namespace}:{name}:{id}`, which is Node's job key
/// (its `parentKey`, and the keys of `job.getDependencies()`).
///
/// ```
/// use bullmq_protocol::ids::{JobRef, QueueId};
/// let job = JobRef::new(QueueId::new("bull", "emails"), "42");
/// assert_eq!(job.to_string(), "bull:emails:42");
/// assert_eq!(job.queue.name(), "emails");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobRef {
    /// The job's queue.
    pub queue: QueueId,
    /// The job's id in that queue.
    pub id: String,
}

impl JobRef {
    /// Job `id` of `queue`.
    pub fn new(queue: QueueId, id: impl Into<String>) -> Self {
        Self {
            queue,
            id: id.into(),
        }
    }
}

impl std::fmt::Display for JobRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.queue, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let id = QueueId::new("{b}", "a:b");
        let keys = id.keys();
        assert_eq!(keys.prefix(), "{b}");
        assert_eq!(keys.name(), "a:b");
        assert_eq!(QueueId::from(&keys), id);
        assert_eq!(QueueKeys::from(&id), keys);
    }
}
