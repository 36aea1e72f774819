//! One module per subcommand, each with its clap `Args` struct and an async `run`.

pub(crate) mod add;
pub(crate) mod demo;
pub(crate) mod events;
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
    let config = ConnectionConfig::from_url(&ctx.redis_url)
        .with_context(|| format!("bad --redis-url {}", ctx.redis_url))?;
    let target = config.target();
    let options = QueueOptions::new(config)
        .prefix(ctx.prefix.clone())
        .skip_meta_update(read_only);
    Queue::new(name, options)
        .await
        .with_context(|| format!("cannot open queue {name:?} on Redis at {target}"))
}
