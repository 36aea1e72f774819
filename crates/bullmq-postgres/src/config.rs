//! [`PgConfig`]: where the BullMQ schema lives and how to reach it, parsed from a URL.
//!
//! `postgres://user:pass@host:port/db?schema=bullmq&sslmode=verify-full&sslrootcert=ca.pem`.
//! tokio-postgres refuses URL keys it does not know, so the keys that are ours (`schema`,
//! `pool_size`, `connect_timeout_ms`) and the TLS keys libpq knows but tokio-postgres does
//! not (`sslmode=verify-ca|verify-full`, `sslrootcert`) are taken out first; the rest is
//! handed to tokio-postgres as it is.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

/// The schema Node BullMQ uses when none is given.
pub const DEFAULT_SCHEMA: &str = "bullmq";

/// How TLS is used, with libpq's meaning of each `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// TLS when the server offers it, without verifying the certificate (libpq's default).
    #[default]
    Prefer,
    /// TLS always; the certificate is verified against `sslrootcert` when one is given (libpq's
    /// rule), else not at all.
    Require,
    /// TLS always, the certificate chain verified (not the host name).
    VerifyCa,
    /// TLS always, the chain and the host name verified.
    VerifyFull,
}

impl FromStr for SslMode {
    type Err = PgConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "disable" => Self::Disable,
            "allow" | "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(PgConfigError::InvalidValue {
                    key: "sslmode",
                    value: other.to_string(),
                    expected: "disable, allow, prefer, require, verify-ca or verify-full",
                })
            }
        })
    }
}

/// Why a PostgreSQL URL or setting was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgConfigError {
    /// Not a URL at all, or not `postgres://` / `postgresql://`.
    #[error("`{url}` is not a PostgreSQL URL (postgres://user@host:port/database): {reason}")]
    NotAUrl {
        /// The URL with its password hidden.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key has a value it cannot take.
    #[error("`{key}={value}` is not valid: expected {expected}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// The schema name is not one BullMQ accepts (`^[A-Za-z_][A-Za-z0-9_$]*$`, at most 63
    /// characters, as Node checks it).
    #[error("`{0}` is not a valid BullMQ schema name (letters, digits, `_` and `$`, not starting with a digit, at most 63 characters)")]
    InvalidSchema(String),
    /// A URL setting that is unknown, or whose value is refused.
    #[error("the URL setting `{key}={value}` is unknown or invalid (see libpq's connection parameters, plus schema and pool_size)")]
    Setting {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// tokio-postgres refused the remaining settings.
    #[error("invalid PostgreSQL setting: {0}")]
    Client(#[source] tokio_postgres::Error),
}

/// Where the BullMQ schema lives and how to connect to it.
///
/// ```
/// use bullmq_postgres::PgConfig;
/// let config = PgConfig::from_url("postgres://postgres@127.0.0.1:5432/test?schema=jobs").unwrap();
/// assert_eq!(config.schema(), "jobs");
/// assert!(PgConfig::from_url("postgres://h/db?schema=1bad").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct PgConfig {
    pub(crate) client: tokio_postgres::Config,
    schema: String,
    pub(crate) ssl_mode: SslMode,
    pub(crate) ssl_root_cert: Option<PathBuf>,
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) accept_untested_schema: bool,
}

impl PgConfig {
    /// Pool size when the URL does not say (`?pool_size=`): Node's `pg.Pool` default.
    pub const DEFAULT_POOL_SIZE: usize = 10;
    /// Connect timeout when the URL does not say (`?connect_timeout=` seconds, as libpq).
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Parses `postgres://…` or `postgresql://…`.
    ///
    /// # Errors
    ///
    /// [`PgConfigError`] naming the part that is wrong.
    pub fn from_url(url: &str) -> Result<Self, PgConfigError> {
        let mut parsed = url::Url::parse(url).map_err(|e| PgConfigError::NotAUrl {
            url: redact(url),
            reason: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err(PgConfigError::NotAUrl {
                url: redact(url),
                reason: format!("the scheme is `{}`", parsed.scheme()),
            });
        }
        let mut schema = DEFAULT_SCHEMA.to_string();
        let mut ssl_mode = SslMode::default();
        let mut ssl_root_cert = None;
        let mut pool_size = Self::DEFAULT_POOL_SIZE;
        let mut connect_timeout = Self::DEFAULT_CONNECT_TIMEOUT;
        let mut rest = Vec::new();
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "schema" => schema = value.into_owned(),
                "sslmode" => ssl_mode = value.parse()?,
                "sslrootcert" => ssl_root_cert = Some(PathBuf::from(value.as_ref())),
                "pool_size" => {
                    pool_size = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        PgConfigError::InvalidValue {
                            key: "pool_size",
                            value: value.to_string(),
                            expected: "a number of connections above 0",
                        }
                    })?
                }
                "connect_timeout" => {
                    connect_timeout = value
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .map(Duration::from_secs)
                        .ok_or_else(|| PgConfigError::InvalidValue {
                            key: "connect_timeout",
                            value: value.to_string(),
                            expected: "a number of seconds above 0",
                        })?
                }
                _ => rest.push((key.into_owned(), value.into_owned())),
            }
        }
        // tokio-postgres says only "invalid connection string": find the setting it refuses.
        for (key, value) in &rest {
            let mut probe = url::Url::parse("postgres://localhost/").expect("a valid URL");
            probe.query_pairs_mut().append_pair(key, value);
            if tokio_postgres::Config::from_str(probe.as_str()).is_err() {
                return Err(PgConfigError::Setting {
                    key: key.clone(),
                    value: value.clone(),
                });
            }
        }
        if rest.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(rest);
        }
        let client =
            tokio_postgres::Config::from_str(parsed.as_str()).map_err(PgConfigError::Client)?;
        let mut config = Self {
            client,
            schema: String::new(),
            ssl_mode,
            ssl_root_cert,
            pool_size,
            connect_timeout,
            accept_untested_schema: false,
        };
        config.set_schema(schema)?;
        Ok(config)
    }

    /// The same server, another schema.
    ///
    /// # Errors
    ///
    /// [`PgConfigError::InvalidSchema`] for a name Node would refuse.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Result<Self, PgConfigError> {
        self.set_schema(schema.into())?;
        Ok(self)
    }

    fn set_schema(&mut self, schema: String) -> Result<(), PgConfigError> {
        if !valid_schema(&schema) {
            return Err(PgConfigError::InvalidSchema(schema));
        }
        self.schema = schema;
        Ok(())
    }

    /// Connections in the pool of short calls (the LISTEN connections come on top).
    #[must_use]
    pub fn with_pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long one connect may take before it fails.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Opens a schema whose migration ledger is at a version this release was not tested on
    /// (it still refuses a schema that demands a newer client).
    #[must_use]
    pub fn accept_untested_schema(mut self) -> Self {
        self.accept_untested_schema = true;
        self
    }

    /// The BullMQ schema (Node's `schema` option, default `bullmq`).
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The schema quoted as an SQL identifier.
    pub(crate) fn quoted_schema(&self) -> String {
        // valid_schema admits no quote character, so wrapping is enough.
        format!("\"{}\"", self.schema)
    }

    /// The pool size.
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The TLS mode.
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// The client settings of one connection named `application_name` (empty for pooled
    /// connections, so they never count as workers), with the schema on its `search_path`.
    pub(crate) fn session(&self, application_name: &str) -> tokio_postgres::Config {
        let mut config = self.client.clone();
        let mut options = config.get_options().unwrap_or_default().to_string();
        if !options.is_empty() {
            options.push(' ');
        }
        options.push_str(&format!("-c search_path={}", self.quoted_schema()));
        config
            .options(&options)
            .application_name(application_name)
            .connect_timeout(self.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .ssl_mode(match self.ssl_mode {
                SslMode::Disable => tokio_postgres::config::SslMode::Disable,
                SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
                _ => tokio_postgres::config::SslMode::Require,
            });
        config
    }

    /// `host:port/db` for messages (never the password).
    pub fn display_target(&self) -> String {
        let host = self
            .client
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".to_string());
        let port = self.client.get_ports().first().copied().unwrap_or(5432);
        let db = self.client.get_dbname().unwrap_or("");
        format!("{host}:{port}/{db} schema {}", self.schema)
    }
}

impl FromStr for PgConfig {
    type Err = PgConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_url(s)
    }
}

/// Node's rule for schema names.
pub(crate) fn valid_schema(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok && name.len() <= 63 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_keys_are_taken_out_and_the_rest_reaches_the_client() {
        let config = PgConfig::from_url(
            "postgresql://u:p@db.example:6543/app?schema=q_1&sslmode=verify-full&sslrootcert=/ca.pem&pool_size=3&application_name=x",
        )
        .unwrap();
        assert_eq!(config.schema(), "q_1");
        assert_eq!(config.ssl_mode(), SslMode::VerifyFull);
        assert_eq!(config.ssl_root_cert, Some(PathBuf::from("/ca.pem")));
        assert_eq!(config.pool_size(), 3);
        assert_eq!(config.client.get_dbname(), Some("app"));
        assert_eq!(config.client.get_ports(), &[6543]);
        let session = config.session("");
        assert_eq!(session.get_application_name(), Some(""));
        assert_eq!(session.get_options(), Some("-c search_path=\"q_1\""));
    }

    #[test]
    fn defaults_are_nodes() {
        let config = PgConfig::from_url("postgres://postgres@127.0.0.1/test").unwrap();
        assert_eq!(config.schema(), "bullmq");
        assert_eq!(config.ssl_mode(), SslMode::Prefer);
        assert_eq!(config.pool_size(), 10);
    }

    #[test]
    fn bad_values_are_named() {
        for (url, needle) in [
            ("redis://h", "scheme"),
            ("postgres://h/db?schema=a-b", "schema"),
            ("postgres://h/db?sslmode=sometimes", "sslmode"),
            ("postgres://h/db?pool_size=0", "pool_size"),
            ("postgres://h/db?frobnicate=1", "frobnicate"),
        ] {
            let error = PgConfig::from_url(url).unwrap_err().to_string();
            assert!(error.contains(needle), "{url}: {error}");
        }
    }

    #[test]
    fn schema_names_follow_nodes_rule() {
        assert!(valid_schema("bullmq"));
        assert!(valid_schema("_a$1"));
        assert!(!valid_schema(""));
        assert!(!valid_schema("1a"));
        assert!(!valid_schema("a\"b"));
        assert!(!valid_schema(&"a".repeat(64)));
    }

    #[test]
    fn passwords_are_hidden_in_errors() {
        let error = PgConfig::from_url("mysql://u:secret@h/db").unwrap_err();
        assert!(!error.to_string().contains("secret"));
    }
}
