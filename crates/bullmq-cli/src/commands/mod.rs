//! One module per subcommand, each with its clap `Args` struct and an async `run`.

pub(crate) mod add;
pub(crate) mod change_delay;
pub(crate) mod change_priority;
pub(crate) mod clean;
pub(crate) mod demo;
pub(crate) mod drain;
pub(crate) mod events;
pub(crate) mod flow;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod jobs_latest;
pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod obliterate;
pub(crate) mod pause;
pub(crate) mod pausing;
pub(crate) mod per_job;
pub(crate) mod promote;
pub(crate) mod queue_lookup;
pub(crate) mod queues;
pub(crate) mod remove;
pub(crate) mod remove_unprocessed_children;
pub(crate) mod resume;
pub(crate) mod retry;
pub(crate) mod scheduler;
pub(crate) mod schedulers;
pub(crate) mod server_facts;
pub(crate) mod sibling_queues;
pub(crate) mod stats;
pub(crate) mod top;
pub(crate) mod update_data;

/// What every command gets from the global options.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// Redis URL (`--redis-url` / `REDIS_URL`).
    pub(crate) redis_url: String,
    /// Key prefix (`--prefix`).
    pub(crate) prefix: String,
    /// Print JSON instead of text (`--json`).
    pub(crate) json: bool,
}

pub(crate) mod workers;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};

/// How a command opens its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The queue must exist (exit 3 naming close names otherwise); its `meta` is left alone,
    /// so reading never creates keys.
    Existing,
    /// The queue must exist; opening writes its `meta` as a Node `Queue` does (a change to
    /// an existing queue).
    ExistingWritingMeta,
    /// Made if missing: `meta` is written (`add`, `scheduler upsert`, `--create`).
    Create,
}

/// Opens `name` on the configured Redis and prefix, as `access` says (see
/// [`queue_lookup`] for what "exists" means).
pub(crate) async fn open_queue(ctx: &Context, name: &str, access: Access) -> Result<Queue> {
    let config = connection_config(ctx)?;
    let target = config.target();
    let backend = bullmq_redis::RedisBackend::new(config.clone());
    let options = QueueOptions::new(config)
        .prefix(ctx.prefix.clone())
        .skip_meta_update(access != Access::Create);
    let queue = Queue::new(name, options.clone())
        .await
        .with_context(|| format!("cannot open queue {name:?} on Redis at {target}"))?;
    if access == Access::Create {
        return Ok(queue);
    }
    let checked = match queue.redis_client() {
        Some(client) => queue_lookup::ensure_exists(client, &backend, queue.keys()).await,
        None => Ok(()),
    };
    if let Err(error) = checked {
        let _ = queue.close().await;
        return Err(error);
    }
    if access == Access::ExistingWritingMeta {
        if let Some(client) = queue.redis_client() {
            let written = Queue::with_client(name, client.clone(), options.skip_meta_update(false))
                .await
                .with_context(|| format!("writing the meta of queue {name:?}"));
            if let Err(error) = written {
                let _ = queue.close().await;
                return Err(error);
            }
        }
    }
    Ok(queue)
}

/// Fails with the "no queue" error (exit 3) unless `name` exists, on a connection of its own
/// (for the commands that do not open a [`Queue`]: `events`).
pub(crate) async fn ensure_queue_exists(ctx: &Context, name: &str) -> Result<()> {
    use bullmq_redis::fred::prelude::ClientLike as _;
    let config = connection_config(ctx)?;
    let target = config.target();
    let client = config
        .connect(None)
        .await
        .with_context(|| format!("cannot connect to Redis at {target}"))?;
    let keys = bullmq_protocol::keys::QueueKeys::new(ctx.prefix.clone(), name);
    let backend = bullmq_redis::RedisBackend::new(config);
    let outcome = queue_lookup::ensure_exists(&client, &backend, &keys).await;
    let _ = client.quit().await;
    outcome
}

/// Parses a `--state` value: Node's state names (`wait` for `waiting` too); `unknown`, which
/// no key holds, is refused.
pub(crate) fn parse_state(text: &str) -> Result<JobState, String> {
    match text.parse::<JobState>() {
        Ok(JobState::Unknown) | Err(_) => Err(format!(
            "expected a job state: waiting (or wait), active, delayed, prioritized, completed, \
             failed, waiting-children or paused, got {text:?}"
        )),
        Ok(state) => Ok(state),
    }
}

/// The connection of `--redis-url` / `REDIS_URL`.
///
/// # Errors
///
/// A bad URL, quoted without its password.
pub(crate) fn connection_config(ctx: &Context) -> Result<ConnectionConfig> {
    // A malformed URL is a usage error (exit 2), said in one sentence.
    ConnectionConfig::from_url(&ctx.redis_url).map_err(|error| {
        crate::exit::Exit::usage(format!(
            "bad --redis-url {}: {error} (`bullmq help connection` shows the accepted forms)",
            redact_password(&ctx.redis_url)
        ))
    })
}

/// `url` with the password of its `user:password@` part, and the value of a
/// `sentinelPassword=` parameter, replaced by `***`, for messages.
pub(crate) fn redact_password(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[authority_start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let mut shown = match rest[..authority_end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!(
                "{}{}:***{}",
                &url[..authority_start],
                &rest[..colon],
                &rest[at..]
            ),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    };
    if let Some(query_start) = shown.find('?') {
        let (head, query) = shown.split_at(query_start + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("sentinelPassword", _)) => "sentinelPassword=***".to_owned(),
                _ => pair.to_owned(),
            })
            .collect();
        shown = format!("{head}{}", query.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::{parse_state, redact_password};
    use bullmq_protocol::state::JobState;

    #[test]
    fn states_parse_by_node_names_but_unknown() {
        assert_eq!(parse_state("wait"), Ok(JobState::Waiting));
        assert_eq!(
            parse_state("waiting-children"),
            Ok(JobState::WaitingChildren)
        );
        assert!(parse_state("unknown")
            .unwrap_err()
            .contains("expected a job state"));
        assert!(parse_state("done").is_err());
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact_password("redis://u:secret@h:1/2"),
            "redis://u:***@h:1/2"
        );
        assert_eq!(redact_password("http://:secret@h"), "http://:***@h");
        assert_eq!(redact_password("u:secret@h:1"), "u:***@h:1");
        assert_eq!(redact_password("redis://h:1"), "redis://h:1");
        assert_eq!(redact_password("redis://user@h:1"), "redis://user@h:1");
        assert_eq!(
            redact_password(
                "redis-sentinel://u:pw@h?sentinelServiceName=m&sentinelPassword=sp&node=x:1"
            ),
            "redis-sentinel://u:***@h?sentinelServiceName=m&sentinelPassword=***&node=x:1"
        );
        // An `@` in a query value (a path) is not a user part.
        assert_eq!(
            redact_password("rediss://h:1?tls_ca=/a@b:c/ca.pem"),
            "rediss://h:1?tls_ca=/a@b:c/ca.pem"
        );
    }
}
