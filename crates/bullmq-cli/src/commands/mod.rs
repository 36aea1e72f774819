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
pub(crate) mod session;
pub(crate) mod sibling_queues;
pub(crate) mod stats;
pub(crate) mod top;
pub(crate) mod update_data;

/// What every command gets from the global options.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// The URL of `--url` / `BULLMQ_URL` (or `--redis-url` / `REDIS_URL`), as given.
    pub(crate) url: String,
    /// Where [`Context::url`] came from.
    pub(crate) url_source: UrlSource,
    /// Key prefix (`--prefix`).
    pub(crate) prefix: String,
    /// Print JSON instead of text (`--json`).
    pub(crate) json: bool,
    /// The backend, opened once by the first command that needs it.
    opened: Arc<tokio::sync::OnceCell<Opened>>,
}

impl Context {
    /// The global options, nothing opened yet.
    pub(crate) fn new(url: String, url_source: UrlSource, prefix: String, json: bool) -> Self {
        Self {
            url,
            url_source,
            prefix,
            json,
            opened: Arc::default(),
        }
    }

    /// The parsed URL.
    ///
    /// # Errors
    ///
    /// A malformed URL, or on PostgreSQL a `--prefix` other than the default or the schema's
    /// name (the schema is the namespace there): usage errors (exit 2).
    pub(crate) fn target(&self) -> Result<Target> {
        let target = Target::parse(&self.url, self.url_source)?;
        if let Some(schema) = target.schema() {
            if self.prefix != bullmq_protocol::keys::DEFAULT_PREFIX && self.prefix != schema {
                return Err(crate::exit::Exit::usage(format!(
                    "--prefix {:?} has no meaning on PostgreSQL: the schema {schema:?} is the \
                     namespace (choose it with ?schema= in the URL and leave --prefix at {:?})",
                    self.prefix,
                    bullmq_protocol::keys::DEFAULT_PREFIX
                )));
            }
        }
        Ok(target)
    }

    /// The backend of [`Context::target`], opened on first use and shared afterwards.
    ///
    /// # Errors
    ///
    /// As [`Target::open`] (without context: callers say what they were opening).
    pub(crate) async fn opened(&self) -> Result<&Opened> {
        let target = self.target()?;
        self.opened.get_or_try_init(|| target.open()).await
    }

    /// The backend, as [`Context::opened`].
    ///
    /// # Errors
    ///
    /// As [`Target::open`].
    pub(crate) async fn backend(&self) -> Result<Arc<dyn Backend>> {
        Ok(Arc::clone(&self.opened().await?.backend))
    }

    /// Where queues are named in messages: `under prefix "bull"`, `in schema "jobs"`.
    pub(crate) fn scope(&self, target: &Target) -> Scope {
        match target.schema() {
            Some(schema) => Scope::Schema(schema.to_owned()),
            None => Scope::Prefix(self.prefix.clone()),
        }
    }
}

pub(crate) mod workers;

use std::sync::Arc;

use anyhow::{Context as _, Result};
use bullmq_backend::Backend;
use bullmq_protocol::state::JobState;
use ractor_bullmq::{ConnectionConfig, Queue, QueueEventsOptions, QueueOptions};

pub(crate) use self::queue_lookup::Scope;
use crate::target::{Opened, Target, UrlSource};

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

/// Opens `name` on the configured target and prefix, as `access` says (see
/// [`queue_lookup`] for what "exists" means).
pub(crate) async fn open_queue(ctx: &Context, name: &str, access: Access) -> Result<Queue> {
    let target = ctx.target()?;
    match &target {
        Target::Redis(config) => open_redis_queue(ctx, config, name, access).await,
        Target::Postgres(_) => open_backend_queue(ctx, &target, name, access).await,
    }
}

/// [`open_queue`] on Redis: its own connection, kept by the queue (and reused for the
/// `EXISTS` check and the `meta` write).
async fn open_redis_queue(
    ctx: &Context,
    config: &ConnectionConfig,
    name: &str,
    access: Access,
) -> Result<Queue> {
    let target = config.target();
    let options = QueueOptions::new(config.clone())
        .prefix(ctx.prefix.clone())
        .skip_meta_update(access != Access::Create);
    let queue = Queue::new(name, options.clone())
        .await
        .with_context(|| format!("cannot open queue {name:?} on Redis at {target}"))?;
    if access == Access::Create {
        return Ok(queue);
    }
    let backend = ctx.backend().await?;
    let scope = Scope::Prefix(ctx.prefix.clone());
    let checked =
        queue_lookup::ensure_exists(backend.as_ref(), queue.redis_client(), queue.keys(), &scope)
            .await;
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

/// [`open_queue`] through the seam (PostgreSQL): the store of the shared backend; existence
/// is the backend's queue discovery listing the queue.
async fn open_backend_queue(
    ctx: &Context,
    target: &Target,
    name: &str,
    access: Access,
) -> Result<Queue> {
    let opening = || format!("cannot open queue {name:?} on {}", target.describe());
    let backend = ctx.backend().await.with_context(opening)?;
    let options = QueueOptions::default()
        .prefix(ctx.prefix.clone())
        .skip_meta_update(access != Access::Create);
    let queue = Queue::with_backend(name, backend.as_ref(), options.clone())
        .await
        .with_context(opening)?;
    if access == Access::Create {
        return Ok(queue);
    }
    let checked =
        queue_lookup::ensure_exists(backend.as_ref(), None, queue.keys(), &ctx.scope(target)).await;
    if let Err(error) = checked {
        let _ = queue.close().await;
        return Err(error);
    }
    if access == Access::ExistingWritingMeta {
        let written = Queue::with_backend(name, backend.as_ref(), options.skip_meta_update(false))
            .await
            .with_context(|| format!("writing the meta of queue {name:?}"));
        match written {
            Ok(writer) => {
                let _ = writer.close().await;
            }
            Err(error) => {
                let _ = queue.close().await;
                return Err(error);
            }
        }
    }
    Ok(queue)
}

/// Fails with the "no queue" error (exit 3) unless `name` exists (for the commands that do
/// not open a [`Queue`]: `events`). On Redis on a connection of its own.
pub(crate) async fn ensure_queue_exists(ctx: &Context, name: &str) -> Result<()> {
    use bullmq_redis::fred::prelude::ClientLike as _;
    let target = ctx.target()?;
    let keys = bullmq_protocol::keys::QueueKeys::new(ctx.prefix.clone(), name);
    let scope = ctx.scope(&target);
    let Target::Redis(config) = &target else {
        let backend = ctx
            .backend()
            .await
            .with_context(|| format!("cannot open queue {name:?} on {}", target.describe()))?;
        return queue_lookup::ensure_exists(backend.as_ref(), None, &keys, &scope).await;
    };
    let client = config
        .connect(None)
        .await
        .with_context(|| format!("cannot connect to Redis at {}", config.target()))?;
    let backend = ctx.backend().await?;
    let outcome = queue_lookup::ensure_exists(backend.as_ref(), Some(&client), &keys, &scope).await;
    let _ = client.quit().await;
    outcome
}

/// The options of a `QueueEvents` reading queue `name` of `target` (on `backend`): on Redis
/// from the connection (so a cluster's slot rule is checked), elsewhere from the backend.
pub(crate) fn queue_events_options(
    target: &Target,
    backend: &Arc<dyn Backend>,
    name: &str,
    prefix: &str,
) -> QueueEventsOptions {
    match target {
        Target::Redis(config) => QueueEventsOptions::new(name, config.clone()),
        Target::Postgres(_) => QueueEventsOptions::with_backend(name, Arc::clone(backend)),
    }
    .prefix(prefix.to_owned())
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
