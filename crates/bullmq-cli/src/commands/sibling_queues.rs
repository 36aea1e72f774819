//! The queues of a flow: a job's children may live in other queues of the same prefix. Opened
//! read-only (no `meta` written) once each, on the first queue's connection on Redis, on the
//! same backend elsewhere, and closed together. Used by `flow`.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use bullmq_backend::Backend;
use ractor_bullmq::Queue;

/// The first queue and the others opened so far.
pub(crate) struct SiblingQueues {
    prefix: String,
    root: Queue,
    /// Where the others are opened when `root` has no Redis connection to share.
    backend: Arc<dyn Backend>,
    opened: HashMap<String, Queue>,
}

impl SiblingQueues {
    /// Starts from `root`, under `prefix`, on `backend` (the one `root` was opened on).
    pub(crate) fn new(prefix: impl Into<String>, root: Queue, backend: Arc<dyn Backend>) -> Self {
        Self {
            prefix: prefix.into(),
            root,
            backend,
            opened: HashMap::new(),
        }
    }

    /// The prefix every queue of the flow shares.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The queue `name`, opened the first time it is asked for.
    ///
    /// # Errors
    ///
    /// Opening failed (on a cluster: the queue's keys would not share a slot).
    pub(crate) async fn get(&mut self, name: &str) -> Result<Queue> {
        if name == self.root.name() {
            return Ok(self.root.clone());
        }
        if let Some(queue) = self.opened.get(name) {
            return Ok(queue.clone());
        }
        let options = self
            .root
            .options()
            .clone()
            .prefix(self.prefix.clone())
            .skip_meta_update(true);
        let queue = match self.root.redis_client() {
            Some(client) => Queue::with_client(name, client.clone(), options).await?,
            None => Queue::with_backend(name, self.backend.as_ref(), options).await?,
        };
        self.opened.insert(name.to_owned(), queue.clone());
        Ok(queue)
    }

    /// Closes the queues opened here (not the root, which the caller owns).
    pub(crate) async fn close(&self) {
        for queue in self.opened.values() {
            let _ = queue.close().await;
        }
    }
}

/// `(queue, id)` of a job key `{prefix}:{queue}:{id}` (a child key in a parent's
/// dependencies); `None` for a key under another prefix.
pub(crate) fn split_key<'k>(key: &'k str, prefix: &str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(prefix)?.strip_prefix(':')?;
    let (queue, id) = rest.rsplit_once(':')?;
    (!queue.is_empty() && !id.is_empty()).then_some((queue, id))
}

#[cfg(test)]
mod tests {
    use super::split_key;

    #[test]
    fn child_keys_split_into_queue_and_id() {
        assert_eq!(split_key("bull:kids:2", "bull"), Some(("kids", "2")));
        assert_eq!(split_key("{b}:a:b:7", "{b}"), Some(("a:b", "7")));
        assert_eq!(split_key("other:kids:2", "bull"), None);
        assert_eq!(split_key("bull:kids", "bull"), None);
    }
}
