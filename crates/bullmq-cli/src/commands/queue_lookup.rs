//! What "a queue exists" means for the CLI, decided here once: on Redis some key of it exists
//! under the prefix (`meta`, `id`, `events`, any state list or set, `repeat`, `limiter`, the
//! metrics…); on any other backend its queue discovery (`Backend::list_queues`) lists it (on
//! PostgreSQL: it has jobs or meta in the schema).
//!
//! Every command that reads or acts on a named queue checks this first, so a typo never
//! answers "nothing" (empty counts, no jobs, no events): it exits 3 with
//! `no queue "X" under prefix "P"` (`in schema "S"` on PostgreSQL) and the closest names
//! `bullmq queues` would list. Only `add`, `scheduler upsert` and an explicit `--create`
//! (pause, resume, limits) make a queue.

use std::fmt;

use anyhow::{Context as _, Result};
use bullmq_backend::{Backend, BackendError};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_redis::fred::prelude::{Client, KeysInterface};

use crate::exit::Exit;

/// At most this many close names are suggested.
const SUGGESTIONS: usize = 3;

/// The namespace queues live in, as messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Redis: the key prefix (`--prefix`).
    Prefix(String),
    /// PostgreSQL: the schema (`?schema=` of the URL).
    Schema(String),
}

impl fmt::Display for Scope {
    /// `under prefix "bull"`, `in schema "jobs"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Prefix(prefix) => write!(f, "under prefix {prefix:?}"),
            Self::Schema(schema) => write!(f, "in schema {schema:?}"),
        }
    }
}

impl Scope {
    /// What to say when the namespace holds no queue at all.
    fn empty_hint(&self) -> &'static str {
        match self {
            Self::Prefix(_) => "there are no queues under that prefix; --prefix sets it",
            Self::Schema(_) => "there are no queues in that schema; ?schema= in the URL sets it",
        }
    }
}

/// Whether any key of `keys`' queue exists. One `EXISTS` over every suffix: the keys of one
/// queue share a slot on a cluster (the runtime refuses a queue whose keys would not).
///
/// # Errors
///
/// Redis failed.
pub(crate) async fn queue_exists(client: &Client, keys: &QueueKeys) -> Result<bool> {
    let names: Vec<String> = QueueKey::ALL.iter().map(|key| keys.key(*key)).collect();
    let found: u64 = client
        .exists(names)
        .await
        .with_context(|| format!("looking for queue {:?}", keys.name()))?;
    Ok(found > 0)
}

/// `Ok` when `keys`' queue exists; otherwise the "no queue" error (exit 3), naming the
/// closest queues `backend` finds under the prefix (its queue discovery). With `redis` (the
/// queue's Redis connection) existence is one `EXISTS`; without, the backend's queue
/// discovery must list the queue (a backend without discovery cannot tell: the queue is
/// taken to exist).
///
/// # Errors
///
/// The queue does not exist (exit 3), or the store failed.
pub(crate) async fn ensure_exists(
    backend: &dyn Backend,
    redis: Option<&Client>,
    keys: &QueueKeys,
    scope: &Scope,
) -> Result<()> {
    let listed = match redis {
        Some(client) => {
            if queue_exists(client, keys).await? {
                return Ok(());
            }
            None
        }
        None => match queue_names(backend, keys.prefix()).await {
            Ok(names) if names.iter().any(|n| n.as_str() == keys.name()) => return Ok(()),
            Ok(names) => Some(names),
            Err(BackendError::Unsupported { .. }) => return Ok(()),
            Err(error) => {
                return Err(error).with_context(|| format!("looking for queue {:?}", keys.name()))
            }
        },
    };
    // The suggestions are a courtesy: a failed (or declined) discovery still reports the
    // missing queue.
    let known = match listed {
        Some(names) => names,
        None => queue_names(backend, keys.prefix())
            .await
            .unwrap_or_default(),
    };
    Err(Exit::not_found(missing_message(keys.name(), scope, &known)))
}

/// The names of the queues `backend` finds under `prefix` (its queue discovery), sorted.
///
/// # Errors
///
/// The backend failed or declines queue discovery.
pub(crate) async fn queue_names(
    backend: &dyn Backend,
    prefix: &str,
) -> Result<Vec<String>, bullmq_backend::BackendError> {
    let ids = backend.list_queues(prefix).await?;
    Ok(ids.into_iter().map(|id| id.name().to_owned()).collect())
}

/// `no queue "emials" under prefix "bull" (did you mean "emails"?)`, or the queues there are
/// when none is close, or that there are none.
pub(crate) fn missing_message(name: &str, scope: &Scope, known: &[String]) -> String {
    let head = format!("no queue {name:?} {scope}");
    let close = closest(name, known);
    if !close.is_empty() {
        let quoted: Vec<String> = close.iter().map(|n| format!("{n:?}")).collect();
        return format!("{head} (did you mean {}?)", quoted.join(" or "));
    }
    match known.len() {
        0 => format!("{head} ({})", scope.empty_hint()),
        n if n <= 5 => {
            let quoted: Vec<String> = known.iter().map(|n| format!("{n:?}")).collect();
            format!("{head} (its queues: {})", quoted.join(", "))
        }
        n => format!("{head} ({n} queues there; `bullmq queues` lists them)"),
    }
}

/// The names of `known` close to `name` (edit distance at most a third of its length, at
/// least 1, at most 3; or equal ignoring case), closest first, at most [`SUGGESTIONS`].
pub(crate) fn closest<'a>(name: &str, known: &'a [String]) -> Vec<&'a str> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .filter(|candidate| candidate.as_str() != name)
        .filter_map(|candidate| {
            let distance = edit_distance(&lower, &candidate.to_lowercase());
            (distance <= limit).then_some((distance, candidate.as_str()))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(SUGGESTIONS)
        .map(|(_, n)| n)
        .collect()
}

/// Levenshtein distance over characters, with a transposition of two neighbours counting as
/// one edit (`emials` is one edit from `emails`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: two back (for transpositions), the previous and the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut current = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(edit_distance("emails", "emails"), 0);
        assert_eq!(edit_distance("emials", "emails"), 1);
        assert_eq!(edit_distance("email", "emails"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn close_names_are_suggested_closest_first() {
        let known = names(&["emails", "email-digest", "reports", "Emails2"]);
        assert_eq!(closest("emials", &known), ["emails", "Emails2"]);
        assert_eq!(closest("EMAILS", &known), ["emails", "Emails2"]);
        assert!(closest("zzz", &known).is_empty());
        let bull = Scope::Prefix("bull".into());
        let p = Scope::Prefix("p".into());
        assert_eq!(
            missing_message("emials", &bull, &known),
            r#"no queue "emials" under prefix "bull" (did you mean "emails" or "Emails2"?)"#
        );
        assert_eq!(
            missing_message("x", &p, &[]),
            r#"no queue "x" under prefix "p" (there are no queues under that prefix; --prefix sets it)"#
        );
        assert_eq!(
            missing_message("zzzzzz", &p, &names(&["a", "b"])),
            r#"no queue "zzzzzz" under prefix "p" (its queues: "a", "b")"#
        );
        assert_eq!(
            missing_message("x", &Scope::Schema("jobs".into()), &[]),
            r#"no queue "x" in schema "jobs" (there are no queues in that schema; ?schema= in the URL sets it)"#
        );
    }
}
