//! Whether a queue's keys can live on a Redis Cluster: every script of a queue touches several
//! of its keys at once, and a cluster runs a multi-key script only when all its keys hash to
//! one slot. Redis hashes only the key's hash tag (the text between the first `{` and the
//! first `}` after it, when not empty), so a queue is cluster-safe exactly when the common
//! start of all its keys, `{prefix}:{queue}:`, holds a complete hash tag: then job keys, whose
//! ids may contain braces themselves, land in the same slot as `wait` or `meta`.

use crate::flow::hash_tag;

/// A queue (or a prefix, for flows spanning queues) whose keys would spread over several
/// Redis Cluster slots; the message says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", message(prefix, queue.as_deref()))]
pub struct CrossSlotError {
    /// The key prefix.
    pub prefix: String,
    /// The queue name; `None` when the prefix alone must carry the tag (a flow producer, whose
    /// flows may span queues of that prefix).
    pub queue: Option<String>,
}

fn message(prefix: &str, queue: Option<&str>) -> String {
    match queue {
        Some(queue) => format!(
            "queue `{queue}` with prefix `{prefix}` cannot run on a Redis Cluster: its keys \
             (`{prefix}:{queue}:…`) hash to different slots because they carry no hash tag; use \
             a prefix with a hash tag such as `{{{prefix}}}` (all queues of that prefix share one \
             slot, which flows across queues need) or a queue name with one such as \
             `{{{queue}}}`"
        ),
        None => format!(
            "prefix `{prefix}` cannot be used on a Redis Cluster here: the keys under it carry \
             no hash tag, so queues of one flow would land in different slots; use a prefix \
             with a hash tag such as `{{{prefix}}}`"
        ),
    }
}

/// The hash tag all keys of queue `queue` under `prefix` share, if there is one.
///
/// ```
/// use bullmq_protocol::cluster_slot::queue_hash_tag;
/// assert_eq!(queue_hash_tag("{bull}", "emails").as_deref(), Some("bull"));
/// assert_eq!(queue_hash_tag("bull", "{emails}").as_deref(), Some("emails"));
/// assert_eq!(queue_hash_tag("bull", "emails"), None);
/// ```
pub fn queue_hash_tag(prefix: &str, queue: &str) -> Option<String> {
    // Decided on the common start of every key: the tag must close before the suffix (a job
    // id, which may hold braces of its own) begins.
    hash_tag(&format!("{prefix}:{queue}:")).map(str::to_owned)
}

/// Checks that every key of queue `queue` under `prefix` hashes to one cluster slot.
///
/// ```
/// use bullmq_protocol::cluster_slot::check_queue_slot;
/// assert!(check_queue_slot("{bull}", "emails").is_ok());
/// let error = check_queue_slot("bull", "emails").unwrap_err();
/// assert!(error.to_string().contains("`{bull}`"));
/// ```
///
/// # Errors
///
/// [`CrossSlotError`] when the keys share no hash tag.
pub fn check_queue_slot(prefix: &str, queue: &str) -> Result<(), CrossSlotError> {
    if queue_hash_tag(prefix, queue).is_some() {
        Ok(())
    } else {
        Err(CrossSlotError {
            prefix: prefix.to_owned(),
            queue: Some(queue.to_owned()),
        })
    }
}

/// Checks that every key under `prefix`, of any queue, hashes to one slot: what a flow
/// producer needs, whose parent and children may sit in different queues.
///
/// # Errors
///
/// [`CrossSlotError`] (with no queue) when the prefix holds no complete hash tag.
pub fn check_prefix_slot(prefix: &str) -> Result<(), CrossSlotError> {
    if hash_tag(prefix).is_some() {
        Ok(())
    } else {
        Err(CrossSlotError {
            prefix: prefix.to_owned(),
            queue: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_in_the_prefix_or_the_queue_name_is_enough() {
        assert!(check_queue_slot("{bull}", "emails").is_ok());
        assert!(check_queue_slot("bull", "{emails}").is_ok());
        assert!(check_queue_slot("bull", "mail{eu}").is_ok());
        assert!(check_queue_slot("app{x}", "emails").is_ok());
        // The tag may span the separator: still one tag for every key.
        assert!(check_queue_slot("a{b", "c}d").is_ok());
        assert_eq!(queue_hash_tag("a{b", "c}d").as_deref(), Some("b:c"));
        assert_eq!(
            queue_hash_tag("{bull}", "{emails}").as_deref(),
            Some("bull")
        );
    }

    #[test]
    fn no_tag_or_an_open_tag_is_refused() {
        for (prefix, queue) in [
            ("bull", "emails"),
            ("{}bull", "emails"),
            ("bull", "{}emails"),
            // Unclosed before the suffix: a job id with `}` would choose the slot.
            ("{bull", "emails"),
            ("bull", "emails{"),
            ("bull}", "emails"),
        ] {
            let error = check_queue_slot(prefix, queue).unwrap_err();
            assert_eq!(error.queue.as_deref(), Some(queue));
            assert_eq!(queue_hash_tag(prefix, queue), None, "{prefix} {queue}");
        }
    }

    #[test]
    fn the_message_says_how_to_fix_it() {
        let text = check_queue_slot("bull", "emails").unwrap_err().to_string();
        assert!(text.contains("hash tag"), "{text}");
        assert!(text.contains("`{bull}`"), "{text}");
        assert!(text.contains("`{emails}`"), "{text}");
        let text = check_prefix_slot("bull").unwrap_err().to_string();
        assert!(text.contains("`{bull}`"), "{text}");
    }

    #[test]
    fn flows_need_the_tag_in_the_prefix() {
        assert!(check_prefix_slot("{bull}").is_ok());
        assert!(check_prefix_slot("app:{eu}").is_ok());
        assert!(check_prefix_slot("bull").is_err());
        assert!(check_prefix_slot("{bull").is_err());
    }
}
