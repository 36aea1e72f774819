//! One module per subcommand, each with its clap `Args` struct and an async `run`.

pub(crate) mod add;
pub(crate) mod demo;
pub(crate) mod events;
pub(crate) mod scheduler;
pub(crate) mod schedulers;
pub(crate) mod stats;

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
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};

/// Opens `name` on the configured Redis and prefix. `read_only` skips writing the queue's
/// `meta` (which a Node `Queue` writes when it opens), so inspecting never creates keys.
pub(crate) async fn open_queue(ctx: &Context, name: &str, read_only: bool) -> Result<Queue> {
    let config = connection_config(ctx)?;
    let target = config.target();
    let options = QueueOptions::new(config)
        .prefix(ctx.prefix.clone())
        .skip_meta_update(read_only);
    Queue::new(name, options)
        .await
        .with_context(|| format!("cannot open queue {name:?} on Redis at {target}"))
}

/// The connection of `--redis-url` / `REDIS_URL`.
///
/// # Errors
///
/// A bad URL, quoted without its password.
pub(crate) fn connection_config(ctx: &Context) -> Result<ConnectionConfig> {
    ConnectionConfig::from_url(&ctx.redis_url)
        .with_context(|| format!("bad --redis-url {}", redact_password(&ctx.redis_url)))
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
    use super::redact_password;

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
