//! Connection URLs: the forms fred understands, plus our `tls_*` and `replica_reads` query
//! parameters.
//!
//! The server part (host, port, credentials, database, `node=`, `sentinel*=`) is read by fred's
//! own parser so that a URL means here what it means to fred; around it we check the scheme,
//! refuse query parameters that would be silently ignored, and read the TLS parameters.

use std::path::PathBuf;

use fred::prelude::{Config, ServerConfig};

use super::{ConnectionConfig, Node, TlsOptions, Topology};
use crate::error::{RedisError, Result};

/// The deployment shapes a scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Single,
    Cluster,
    Sentinel,
}

/// Query parameters of the server part, read by fred.
const SERVER_PARAMETERS: [&str; 4] = [
    "node",
    "sentinelServiceName",
    "sentinelUsername",
    "sentinelPassword",
];

/// Our Sentinel-only query parameter: getters read from a replica
/// ([`ConnectionConfig::replica_reads`]).
const REPLICA_READS: &str = "replica_reads";

/// Our TLS query parameters (documented on [`ConnectionConfig::from_url`]).
const TLS_PARAMETERS: [&str; 5] = [
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_server_name",
    "tls_danger_accept_invalid_certs",
];

/// Parses `url` into a [`ConnectionConfig`] (see [`ConnectionConfig::from_url`]).
pub(super) fn parse(url: &str) -> Result<ConnectionConfig> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    let Some((tls, kind)) = scheme.and_then(scheme_kind) else {
        // Only the scheme is quoted: the rest of the URL may hold a password.
        let scheme = scheme.unwrap_or("").to_owned();
        return Err(RedisError::UnsupportedScheme { scheme });
    };
    let parsed = ::url::Url::parse(url).map_err(|e| {
        RedisError::Config(format!(
            "{}://…: not a valid URL: {e}",
            scheme.unwrap_or_default()
        ))
    })?;
    let shown = redacted(&parsed);
    let problem = |what: String| RedisError::Config(format!("{shown}: {what}"));

    let mut tls_options = TlsOptions::default();
    let mut replica_reads = false;
    for (key, value) in parsed.query_pairs() {
        let key = key.as_ref();
        if key == REPLICA_READS {
            if kind != Kind::Sentinel {
                return Err(problem(format!(
                    "`{REPLICA_READS}` reads from a replica the Sentinels list, which needs \
                     redis-sentinel://"
                )));
            }
            replica_reads = flag(&value).ok_or_else(|| {
                problem(format!(
                    "{REPLICA_READS} must be true or false, not `{value}`"
                ))
            })?;
            continue;
        }
        if !SERVER_PARAMETERS.contains(&key) && !TLS_PARAMETERS.contains(&key) {
            return Err(problem(format!(
                "unknown query parameter `{key}` (known: {}, {REPLICA_READS}, {})",
                SERVER_PARAMETERS.join(", "),
                TLS_PARAMETERS.join(", ")
            )));
        }
        if TLS_PARAMETERS.contains(&key) && !tls {
            return Err(problem(format!(
                "`{key}` is a TLS setting, but the scheme is not a TLS one (use rediss://, \
                 rediss-cluster:// or rediss-sentinel://)"
            )));
        }
        match (key, kind) {
            ("node", Kind::Single) => {
                return Err(problem(
                    "`node=` lists more servers, which needs redis-cluster:// or \
                     redis-sentinel://"
                        .into(),
                ))
            }
            ("sentinelServiceName" | "sentinelUsername" | "sentinelPassword", k)
                if k != Kind::Sentinel =>
            {
                return Err(problem(format!(
                    "`{key}` is a Sentinel setting, which needs redis-sentinel://"
                )))
            }
            _ => {}
        }
        let path = || PathBuf::from(value.as_ref());
        match key {
            "tls_ca" => tls_options.ca_file = Some(path()),
            "tls_cert" => tls_options.cert_file = Some(path()),
            "tls_key" => tls_options.key_file = Some(path()),
            "tls_server_name" => tls_options.server_name = Some(value.to_string()),
            "tls_danger_accept_invalid_certs" => {
                tls_options.danger_accept_invalid_certs = flag(&value).ok_or_else(|| {
                    problem(format!(
                        "tls_danger_accept_invalid_certs must be true or false, not `{value}`"
                    ))
                })?;
            }
            _ => {}
        }
    }
    if kind == Kind::Cluster && !matches!(parsed.path(), "" | "/" | "/0") {
        return Err(problem(
            "a Redis Cluster has database 0 only; remove the /db path".into(),
        ));
    }

    // fred reads the TLS scheme as "load the platform roots now"; we build TLS ourselves at
    // connect time, so it is handed the plain scheme.
    let plain = match kind {
        Kind::Single => "redis",
        Kind::Cluster => "redis-cluster",
        Kind::Sentinel => "redis-sentinel",
    };
    let rest = &url[url.find("://").map_or(0, |i| i + 3)..];
    let fred = Config::from_url(&format!("{plain}://{rest}"))
        .map_err(|e| problem(e.details().to_string()))?;

    let mut config = ConnectionConfig {
        db: fred.database.unwrap_or(0),
        username: fred.username.clone(),
        password: fred.password.clone(),
        tls,
        tls_options,
        replica_reads,
        ..ConnectionConfig::default()
    };
    let first_node_first = |hosts: &[fred::types::config::Server]| {
        // fred puts the URL's own host last; the order it is written in is the order to try.
        let mut nodes: Vec<Node> = hosts
            .iter()
            .map(|server| Node::new(server.host.to_string(), server.port))
            .collect();
        nodes.rotate_right(1);
        nodes
    };
    match fred.server {
        ServerConfig::Centralized { server } => {
            config.host = server.host.to_string();
            config.port = server.port;
        }
        ServerConfig::Clustered { hosts, .. } => {
            let nodes = first_node_first(&hosts);
            config.set_first_node(&nodes);
            config.topology = Topology::Cluster { nodes };
        }
        ServerConfig::Sentinel {
            hosts,
            service_name,
            username,
            password,
        } => {
            if service_name.is_empty() {
                return Err(problem("sentinelServiceName is empty".into()));
            }
            let nodes = first_node_first(&hosts);
            config.set_first_node(&nodes);
            config.topology = Topology::Sentinel {
                service_name,
                nodes,
                username,
                password,
            };
        }
    }
    Ok(config)
}

/// A boolean query value: `true`/`1`/`yes` or `false`/`0`/`no`.
fn flag(value: &str) -> Option<bool> {
    match value {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

/// `(tls, kind)` of a scheme, `None` when it is not one of
/// [`ACCEPTED_SCHEMES`](super::ACCEPTED_SCHEMES).
fn scheme_kind(scheme: &str) -> Option<(bool, Kind)> {
    let scheme = scheme.to_ascii_lowercase();
    let (base, kind) = match scheme.split_once('-') {
        None => (scheme.as_str(), Kind::Single),
        Some((base, "cluster")) => (base, Kind::Cluster),
        Some((base, "sentinel")) => (base, Kind::Sentinel),
        Some(_) => return None,
    };
    let tls = match base {
        "redis" | "valkey" => false,
        "rediss" | "valkeys" => true,
        _ => return None,
    };
    Some((tls, kind))
}

/// The URL with its password (and a Sentinel password parameter) replaced by `***`, for
/// messages.
fn redacted(url: &::url::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    if url.query_pairs().any(|(key, _)| key == "sentinelPassword") {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(key, value)| {
                let value = if key == "sentinelPassword" {
                    "***".to_owned()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        shown.query_pairs_mut().clear().extend_pairs(pairs);
    }
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_map_to_tls_and_kind() {
        assert_eq!(scheme_kind("redis"), Some((false, Kind::Single)));
        assert_eq!(scheme_kind("VALKEYS"), Some((true, Kind::Single)));
        assert_eq!(scheme_kind("rediss-cluster"), Some((true, Kind::Cluster)));
        assert_eq!(
            scheme_kind("valkey-sentinel"),
            Some((false, Kind::Sentinel))
        );
        assert_eq!(scheme_kind("redis-shard"), None);
        assert_eq!(scheme_kind("http"), None);
        assert_eq!(scheme_kind("redis+unix"), None);
    }

    #[test]
    fn replica_reads_is_a_sentinel_flag() {
        let on =
            parse("redis-sentinel://h:26379?sentinelServiceName=m&replica_reads=true").unwrap();
        assert!(on.replica_reads);
        let off = parse("valkeys-sentinel://h?replica_reads=0&sentinelServiceName=m").unwrap();
        assert!(!off.replica_reads);
        assert!(
            !parse("redis-sentinel://h?sentinelServiceName=m")
                .unwrap()
                .replica_reads
        );
        for url in [
            "redis://h?replica_reads=true",
            "rediss-cluster://h:7000?replica_reads=true",
        ] {
            let error = parse(url).unwrap_err().to_string();
            assert!(error.contains("needs redis-sentinel://"), "{url}: {error}");
        }
        let error = parse("redis-sentinel://h?sentinelServiceName=m&replica_reads=maybe")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("must be true or false, not `maybe`"),
            "{error}"
        );
    }

    #[test]
    fn redaction_hides_both_passwords() {
        let url = ::url::Url::parse(
            "redis-sentinel://u:hunter2@h:1?sentinelServiceName=m&sentinelPassword=swordfish",
        )
        .unwrap();
        let shown = redacted(&url);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("swordfish"), "{shown}");
        assert!(shown.contains("u:***@h:1"), "{shown}");
    }
}
