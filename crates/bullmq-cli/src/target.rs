//! Where the queues live: the one URL of `--url` / `BULLMQ_URL` (or its aliases `--redis-url` /
//! `REDIS_URL`), parsed into a [`Target`] and opened as the storage seam's `Arc<dyn Backend>`
//! (Redis or PostgreSQL). Commands reach their queues through that backend; only what the seam
//! does not have (Redis' `INFO`, one shared Redis connection for many queues, `CLIENT LIST` read
//! once for every queue) looks at which one it is.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bullmq_backend::Backend;
use bullmq_postgres::{LedgerState, PgConfig, PostgresBackend};
use ractor_bullmq::ConnectionConfig;

use crate::exit::Exit;

/// The URL when none is given.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// How long connecting to PostgreSQL may take when the URL does not say (`connect_timeout=`):
/// the Redis connect timeout, so an unreachable server fails as fast on either.
const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the URL came from, for messages (`bad --url (from BULLMQ_URL) …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UrlSource {
    /// `--url` on the command line.
    Url,
    /// The `BULLMQ_URL` variable.
    UrlEnv,
    /// `--redis-url` on the command line.
    RedisUrl,
    /// The `REDIS_URL` variable.
    RedisUrlEnv,
    /// Nothing given: [`DEFAULT_URL`].
    Default,
}

impl UrlSource {
    /// How messages name the source: the flag, and the variable when it came from one.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Url => "--url",
            Self::UrlEnv => "--url (from BULLMQ_URL)",
            Self::RedisUrl => "--redis-url",
            Self::RedisUrlEnv => "--redis-url (from REDIS_URL)",
            Self::Default => "--url (the default)",
        }
    }
}

/// One of the two URL options as clap found it: its value and whether it was typed on the
/// command line (rather than read from its variable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Given {
    /// The URL.
    pub(crate) value: String,
    /// `true`: on the command line; `false`: from the environment.
    pub(crate) on_command_line: bool,
}

/// Which URL is used when several are set: a flag on the command line beats any variable;
/// between two of the same kind `--url` / `BULLMQ_URL` beats `--redis-url` / `REDIS_URL`, except
/// that both flags on one command line are refused (they would contradict each other). Empty
/// values count as unset. Nothing set: [`DEFAULT_URL`].
///
/// # Errors
///
/// Both `--url` and `--redis-url` typed (a usage error, exit 2).
pub(crate) fn choose(url: Option<Given>, redis_url: Option<Given>) -> Result<(String, UrlSource)> {
    let url = url.filter(|given| !given.value.is_empty());
    let redis_url = redis_url.filter(|given| !given.value.is_empty());
    let typed = |given: &Option<Given>| given.as_ref().is_some_and(|g| g.on_command_line);
    if typed(&url) && typed(&redis_url) {
        return Err(Exit::usage(
            "give --url or --redis-url, not both (--redis-url is the older name of --url)",
        ));
    }
    let chosen = match (url, redis_url) {
        (Some(_), Some(redis)) if redis.on_command_line => (redis.value, UrlSource::RedisUrl),
        (Some(url), _) if url.on_command_line => (url.value, UrlSource::Url),
        (Some(url), _) => (url.value, UrlSource::UrlEnv),
        (None, Some(redis)) if redis.on_command_line => (redis.value, UrlSource::RedisUrl),
        (None, Some(redis)) => (redis.value, UrlSource::RedisUrlEnv),
        (None, None) => (DEFAULT_URL.to_owned(), UrlSource::Default),
    };
    Ok(chosen)
}

/// A parsed URL: which store, and how to reach it.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One Redis server, a cluster or a primary behind Sentinel.
    Redis(ConnectionConfig),
    /// A BullMQ schema on a PostgreSQL server.
    Postgres(PgConfig),
}

impl Target {
    /// Parses `url`: `postgres://` / `postgresql://` for PostgreSQL, every Redis form otherwise.
    ///
    /// # Errors
    ///
    /// A malformed URL or an unknown scheme: a usage error (exit 2) in one sentence naming the
    /// accepted forms, the password hidden.
    pub(crate) fn parse(url: &str, source: UrlSource) -> Result<Self> {
        let scheme = url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        let shown = crate::commands::redact_password(url);
        let bad = |why: String| {
            Exit::usage(format!(
                "bad {} {shown}: {why} (`bullmq help connection` shows the accepted forms)",
                source.label()
            ))
        };
        if matches!(scheme.as_deref(), Some("postgres" | "postgresql")) {
            let config = PgConfig::from_url(url).map_err(|error| bad(error.to_string()))?;
            let config = if url.contains("connect_timeout=") {
                config
            } else {
                config.with_connect_timeout(PG_CONNECT_TIMEOUT)
            };
            return Ok(Self::Postgres(config));
        }
        ConnectionConfig::from_url(url)
            .map(Self::Redis)
            .map_err(|error| match error {
                bullmq_redis::RedisError::UnsupportedScheme { .. } => bad(format!(
                    "{error}; or postgres://user@host:port/database?schema=NAME for PostgreSQL"
                )),
                other => bad(other.to_string()),
            })
    }

    /// The store's name in messages: `Redis` or `PostgreSQL`.
    pub(crate) fn store_name(&self) -> &'static str {
        match self {
            Self::Redis(_) => "Redis",
            Self::Postgres(_) => "PostgreSQL",
        }
    }

    /// The seam's name of its backend: `redis` or `postgres`.
    pub(crate) fn backend_name(&self) -> &'static str {
        match self {
            Self::Redis(_) => "redis",
            Self::Postgres(_) => "postgres",
        }
    }

    /// `Redis at 127.0.0.1:6379`, `PostgreSQL at 127.0.0.1:5432/test schema bullmq` (never a
    /// password).
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Redis(config) => format!("Redis at {}", config.target()),
            Self::Postgres(config) => format!("PostgreSQL at {}", config.display_target()),
        }
    }

    /// The PostgreSQL schema, on PostgreSQL.
    pub(crate) fn schema(&self) -> Option<&str> {
        match self {
            Self::Redis(_) => None,
            Self::Postgres(config) => Some(config.schema()),
        }
    }

    /// Opens the backend. On Redis nothing is connected yet (each store connects when
    /// opened); on PostgreSQL the server is reached and the schema's migration ledger checked.
    ///
    /// # Errors
    ///
    /// PostgreSQL: the server cannot be reached ([`bullmq_postgres::PgError::Connect`]), or
    /// the schema is not migrated or not one this release speaks
    /// ([`bullmq_postgres::PgError::SchemaNotMigrated`] and its siblings).
    pub(crate) async fn open(&self) -> Result<Opened> {
        match self {
            Self::Redis(config) => Ok(Opened {
                backend: Arc::new(bullmq_redis::RedisBackend::new(config.clone())),
                ledger: None,
            }),
            Self::Postgres(config) => {
                let backend = PostgresBackend::open(config.clone()).await?;
                let ledger = Some(backend.ledger());
                Ok(Opened {
                    backend: Arc::new(backend),
                    ledger,
                })
            }
        }
    }
}

/// An opened backend.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// The seam every command goes through.
    pub(crate) backend: Arc<dyn Backend>,
    /// On PostgreSQL: the server's major version and the schema's migration.
    pub(crate) ledger: Option<LedgerState>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(value: &str, on_command_line: bool) -> Option<Given> {
        Some(Given {
            value: value.to_owned(),
            on_command_line,
        })
    }

    #[test]
    fn the_command_line_beats_the_environment_and_url_beats_redis_url() {
        let pick = |url, redis| choose(url, redis).unwrap();
        assert_eq!(
            pick(None, None),
            (DEFAULT_URL.to_owned(), UrlSource::Default)
        );
        assert_eq!(
            pick(given("postgres://a/b", false), given("redis://r", false)),
            ("postgres://a/b".to_owned(), UrlSource::UrlEnv)
        );
        assert_eq!(
            pick(given("postgres://a/b", false), given("redis://r", true)),
            ("redis://r".to_owned(), UrlSource::RedisUrl)
        );
        assert_eq!(
            pick(given("postgres://a/b", true), given("redis://r", false)),
            ("postgres://a/b".to_owned(), UrlSource::Url)
        );
        assert_eq!(
            pick(None, given("redis://r", false)),
            ("redis://r".to_owned(), UrlSource::RedisUrlEnv)
        );
        assert_eq!(
            pick(given("", false), given("redis://r", false)),
            ("redis://r".to_owned(), UrlSource::RedisUrlEnv)
        );
        let both = choose(given("redis://a", true), given("redis://b", true)).unwrap_err();
        assert_eq!(crate::exit::number_of(&both), crate::exit::USAGE);
    }

    #[test]
    fn urls_parse_by_scheme() {
        let pg = Target::parse("postgres://u:pw@h:5433/db?schema=jobs", UrlSource::Url).unwrap();
        assert_eq!(pg.store_name(), "PostgreSQL");
        assert_eq!(pg.backend_name(), "postgres");
        assert_eq!(pg.schema(), Some("jobs"));
        assert_eq!(pg.describe(), "PostgreSQL at h:5433/db schema jobs");
        assert!(matches!(
            Target::parse("postgresql://h/db", UrlSource::Url).unwrap(),
            Target::Postgres(_)
        ));
        let redis = Target::parse("rediss://h:1", UrlSource::RedisUrl).unwrap();
        assert_eq!(redis.describe(), "Redis at h:1");
        let bad = Target::parse("http://u:secret@h:1", UrlSource::RedisUrlEnv).unwrap_err();
        let message = bad.to_string();
        assert!(
            message.starts_with("bad --redis-url (from REDIS_URL) http://u:***@h:1: "),
            "{message}"
        );
        assert!(
            message.contains("rediss://") && message.contains("postgres://"),
            "{message}"
        );
        assert_eq!(crate::exit::number_of(&bad), crate::exit::USAGE);
        let schema = Target::parse("postgres://h/db?schema=1x", UrlSource::Url).unwrap_err();
        assert!(
            schema
                .to_string()
                .contains("not a valid BullMQ schema name"),
            "{schema}"
        );
    }
}
