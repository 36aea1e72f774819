//! Finding every queue under a prefix the way dashboards do: SCAN for the keys each queue
//! has whoever created it (`{prefix}:{queue}:meta`, written when a Queue opens, and
//! `{prefix}:{queue}:id`, the job-id counter, written by the first add).

use std::collections::BTreeSet;

use fred::prelude::{Client, ClientLike, Value};
use fred::types::config::Server;
use fred::types::{ClusterHash, CustomCommand};

use super::reply::{array, string, strings, unexpected};
use crate::error::Result;

/// The key suffixes that mark a queue.
const MARKERS: [&str; 2] = ["meta", "id"];

/// How many keys one SCAN step looks at: big enough for few round trips, small enough not to
/// hold the server for long on a large keyspace.
const SCAN_COUNT: u32 = 1000;

/// The names of the queues under `prefix`, sorted, each once.
///
/// A queue is found once it has a `meta` hash or an `id` counter, so a queue filled by Node,
/// Python or this runtime is found alike, and a queue whose jobs were all removed is still
/// found until it is obliterated (as in Node dashboards).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when SCAN fails. On a cluster every primary is scanned.
pub async fn discover_queues(client: &Client, prefix: &str) -> Result<Vec<String>> {
    let mut names = BTreeSet::new();
    match crate::cluster::primaries(client) {
        None => scan_node(client, None, prefix, &mut names).await?,
        // Each primary holds only its own slots' keys: scan them all.
        Some(nodes) => {
            for node in nodes {
                scan_node(client, Some(node), prefix, &mut names).await?;
            }
        }
    }
    Ok(names.into_iter().collect())
}

/// Adds the queues whose marker keys one node holds (`node`, or the only server) to `names`.
async fn scan_node(
    client: &Client,
    node: Option<Server>,
    prefix: &str,
    names: &mut BTreeSet<String>,
) -> Result<()> {
    for marker in MARKERS {
        let pattern = format!("{}:*:{marker}", glob_escape(prefix));
        let mut cursor = "0".to_owned();
        loop {
            let (next, keys) =
                scan_step(client, node.as_ref(), &cursor, &pattern, SCAN_COUNT).await?;
            names.extend(
                keys.iter()
                    .filter_map(|key| queue_name(key, prefix, marker)),
            );
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
    }
    Ok(())
}

/// One `SCAN cursor MATCH pattern COUNT count` step on `node` (or the only server): the next
/// cursor (`"0"` when done) and the keys found.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when SCAN fails, [`crate::RedisError::UnexpectedReply`] on a
/// reply without a cursor and keys.
pub(crate) async fn scan_step(
    client: &Client,
    node: Option<&Server>,
    cursor: &str,
    pattern: &str,
    count: u32,
) -> Result<(String, Vec<String>)> {
    let command = CustomCommand::new_static("SCAN", ClusterHash::Random, false);
    let args = vec![
        cursor.to_owned(),
        "MATCH".into(),
        pattern.to_owned(),
        "COUNT".into(),
        count.max(1).to_string(),
    ];
    let reply: Value = match node {
        Some(node) => {
            client
                .with_cluster_node(node.clone())
                .custom(command, args)
                .await?
        }
        None => client.custom(command, args).await?,
    };
    let mut parts = array("SCAN", reply)?.into_iter();
    let (Some(next), Some(keys)) = (parts.next(), parts.next()) else {
        return Err(unexpected("SCAN", "cursor and keys expected"));
    };
    Ok((string("SCAN", next)?, strings("SCAN", keys)?))
}

/// The queue name in `{prefix}:{name}:{marker}`, if `key` has that shape.
fn queue_name(key: &str, prefix: &str, marker: &str) -> Option<String> {
    let name = key
        .strip_prefix(prefix)?
        .strip_prefix(':')?
        .strip_suffix(marker)?
        .strip_suffix(':')?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// `text` with SCAN's glob characters escaped, so a prefix such as `{bull}` or `a*b` matches
/// only itself.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_marker_keys_only() {
        assert_eq!(
            queue_name("bull:mail:meta", "bull", "meta").as_deref(),
            Some("mail")
        );
        assert_eq!(
            queue_name("{bull}:a:b:id", "{bull}", "id").as_deref(),
            Some("a:b")
        );
        assert_eq!(queue_name("bull::meta", "bull", "meta"), None);
        assert_eq!(queue_name("bullx:q:meta", "bull", "meta"), None);
        assert_eq!(queue_name("bull:q:wait", "bull", "meta"), None);
    }

    #[test]
    fn glob_characters_in_the_prefix_are_escaped() {
        assert_eq!(glob_escape("{bull}"), "{bull}");
        assert_eq!(glob_escape("a*b?[c]"), "a\\*b\\?\\[c\\]");
    }
}
