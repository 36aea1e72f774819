//! One module per subcommand, each with its clap `Args` struct and an async `run`.

pub(crate) mod add;
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
use bullmq_redis::fred::prelude::Client;
use bullmq_redis::ConnectionConfig;

/// A plain connection to the configured Redis, for the commands that read raw structures.
pub(crate) async fn connect(ctx: &Context) -> Result<Client> {
    let config = ConnectionConfig::from_url(&ctx.redis_url)
        .with_context(|| format!("bad --redis-url {}", ctx.redis_url))?;
    config
        .connect(None)
        .await
        .with_context(|| format!("cannot reach Redis at {}", config.target()))
}
