//! Behind Sentinel: moving open connections to the new primary as soon as the Sentinels name
//! one, instead of when the old primary is finally demoted.
//!
//! A Sentinel failover is asynchronous. The Sentinels promote the replica, then, seconds later
//! (on their next `INFO` round), turn the old primary into a replica of the new one and kill
//! its clients. In between the old primary is still a writable primary: a connection left open
//! to it keeps writing there, and everything it accepts is dropped when it resyncs. fred only
//! asks the Sentinels again after a connection drops, so on its own it stays in that window.
//!
//! The watch closes it: one poller per Sentinel service (per process) asks a Sentinel
//! `SENTINEL get-master-addr-by-name` every [`CHECK_INTERVAL`], and every client connected
//! through those Sentinels that is not on the named primary is reconnected (fred then asks the
//! Sentinels and lands on the new primary; the commands in flight are retried there). Combined
//! with the operator pausing writes on the old primary during a manual failover (see the
//! production guide), nothing written is lost. The poller asks the first Sentinel that answers,
//! as fred does when it connects, so both follow the same view.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fred::prelude::{Client, ClientLike};
use fred::types::config::Server;
use fred::types::{ClientState, ClusterHash, ConnectHandle, CustomCommand, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{quit_within, ConnectionConfig, Node, Topology, QUIT_TIMEOUT};

/// How often the Sentinels are asked for the primary. A write sent to the old primary in the
/// window between the promotion and the move is lost unless writes are paused there, so the
/// window is kept short; one small command four times a second per process is cheap.
pub(super) const CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// A client is not reconnected again sooner than this: its reconnect is still under way.
const RECONNECT_GRACE: Duration = Duration::from_secs(1);

/// `host:port` of the primary, as the Sentinels announce it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Primary {
    host: String,
    port: u16,
}

impl Primary {
    fn serves(&self, server: &Server) -> bool {
        server.port == self.port && *server.host == *self.host
    }
}

type PrimaryView = watch::Receiver<Option<Primary>>;

/// One poller per Sentinel service (service name, Sentinel nodes and credentials, TLS), found
/// by a key that holds them; a poller whose runtime has gone has a closed channel and is
/// replaced.
fn pollers() -> &'static Mutex<HashMap<String, PrimaryView>> {
    static POLLERS: OnceLock<Mutex<HashMap<String, PrimaryView>>> = OnceLock::new();
    POLLERS.get_or_init(Default::default)
}

/// Keeps `client`, connected through the Sentinels of `config`, on the primary they name, until
/// the client is closed (`connection` ends). Does nothing on other topologies.
pub(super) fn follow(config: &ConnectionConfig, client: Client, connection: ConnectHandle) {
    let Topology::Sentinel { .. } = &config.topology else {
        return;
    };
    let mut view = subscribe(config);
    tokio::spawn(async move {
        let mut connection = connection;
        let mut last_reconnect: Option<Instant> = None;
        loop {
            tokio::select! {
                // `QUIT` ends the connection task: nothing left to follow.
                _ = &mut connection => break,
                changed = view.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
            let Some(primary) = view.borrow_and_update().clone() else {
                continue;
            };
            // Only a connected client: one reconnecting asks the Sentinels anyway.
            if client.state() != ClientState::Connected {
                continue;
            }
            let active = client.active_connections();
            if active.is_empty() || active.iter().any(|server| primary.serves(server)) {
                continue;
            }
            if last_reconnect.is_some_and(|at| at.elapsed() < RECONNECT_GRACE) {
                continue;
            }
            last_reconnect = Some(Instant::now());
            tracing::info!(
                from = %active[0],
                to = %format!("{}:{}", primary.host, primary.port),
                "the Sentinels name a new primary: reconnecting"
            );
            if let Err(error) = client.force_reconnection().await {
                tracing::warn!(%error, "could not reconnect to the new primary");
            }
        }
    });
}

/// The primary view of `config`'s Sentinel service, starting its poller if there is none.
fn subscribe(config: &ConnectionConfig) -> PrimaryView {
    let key = poller_key(config);
    let mut pollers = pollers().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(view) = pollers.get(&key) {
        if view.has_changed().is_ok() {
            return view.clone();
        }
    }
    let (tx, view) = watch::channel(None);
    pollers.insert(key.clone(), view.clone());
    tokio::spawn(poll(config.clone(), key, tx));
    view
}

fn poller_key(config: &ConnectionConfig) -> String {
    let Topology::Sentinel {
        service_name,
        nodes,
        username,
        password,
    } = &config.topology
    else {
        return String::new();
    };
    // Never printed: it holds the Sentinel password.
    format!(
        "{service_name}|{}|{username:?}|{password:?}|{}|{:?}",
        super::topology::node_list(nodes),
        config.tls,
        config.tls_options
    )
}

/// Asks the Sentinels for the primary every [`CHECK_INTERVAL`] and publishes the answer (also
/// when unchanged: a client fred put back on a stale primary is moved again). Ends when no
/// client follows any more.
async fn poll(config: ConnectionConfig, key: String, tx: watch::Sender<Option<Primary>>) {
    let mut sentinel = Sentinel::new(&config);
    loop {
        tokio::time::sleep(CHECK_INTERVAL).await;
        {
            let mut pollers = pollers().lock().unwrap_or_else(|e| e.into_inner());
            // The registry's own receiver is the last one: every client has closed.
            if tx.receiver_count() <= 1 {
                pollers.remove(&key);
                break;
            }
        }
        if let Some(primary) = sentinel.primary().await {
            tx.send_replace(Some(primary));
        }
    }
    sentinel.close().await;
}

/// A connection to one of the Sentinels, moving on to the next after a failure.
struct Sentinel {
    config: ConnectionConfig,
    nodes: Vec<Node>,
    service_name: String,
    next: usize,
    client: Option<Client>,
}

impl Sentinel {
    fn new(config: &ConnectionConfig) -> Self {
        let (nodes, service_name) = match &config.topology {
            Topology::Sentinel {
                nodes,
                service_name,
                ..
            } => (nodes.clone(), service_name.clone()),
            _ => (Vec::new(), String::new()),
        };
        Self {
            config: config.clone(),
            nodes,
            service_name,
            next: 0,
            client: None,
        }
    }

    /// The primary the current Sentinel names; `None` (and the next Sentinel next time) when it
    /// does not answer.
    async fn primary(&mut self) -> Option<Primary> {
        if self.client.is_none() {
            self.client = self.connect().await;
            if self.client.is_none() {
                self.next += 1;
                return None;
            }
        }
        let client = self.client.as_ref()?;
        let command = CustomCommand::new_static("SENTINEL", ClusterHash::Random, false);
        let ask = client.custom::<Value, _>(
            command,
            vec!["get-master-addr-by-name", self.service_name.as_str()],
        );
        let reply = tokio::time::timeout(self.config.connect_timeout, ask).await;
        match reply {
            Ok(Ok(Value::Array(pair))) if pair.len() == 2 => {
                let host = pair[0].as_string()?;
                let port = pair[1].as_string()?.parse().ok()?;
                Some(Primary { host, port })
            }
            Ok(Ok(_)) => None,
            other => {
                tracing::debug!(?other, "a Sentinel did not answer; trying the next");
                self.close().await;
                self.next += 1;
                None
            }
        }
    }

    async fn connect(&self) -> Option<Client> {
        let node = self.nodes.get(self.next % self.nodes.len().max(1))?;
        let sentinel = self.config.sentinel_node(node)?;
        match sentinel.connect(None).await {
            Ok(client) => Some(client),
            Err(error) => {
                tracing::debug!(sentinel = %node, %error, "Sentinel unreachable for the primary watch");
                None
            }
        }
    }

    async fn close(&mut self) {
        if let Some(client) = self.client.take() {
            quit_within(&client, QUIT_TIMEOUT).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_on_the_primary_when_its_server_has_the_announced_address() {
        let primary = Primary {
            host: "127.0.0.1".into(),
            port: 7101,
        };
        assert!(primary.serves(&Server::new("127.0.0.1", 7101)));
        assert!(!primary.serves(&Server::new("127.0.0.1", 7100)));
        assert!(!primary.serves(&Server::new("10.0.0.1", 7101)));
    }

    #[test]
    fn clients_of_one_sentinel_service_share_a_poller_and_others_do_not() {
        let url = |service: &str| {
            ConnectionConfig::from_url(&format!(
                "redis-sentinel://127.0.0.1:26379?sentinelServiceName={service}"
            ))
            .unwrap()
        };
        assert_eq!(poller_key(&url("a")), poller_key(&url("a")));
        assert_ne!(poller_key(&url("a")), poller_key(&url("b")));
        let mut other_db = url("a");
        other_db.db = 3;
        // The primary is the same whatever the database: one poller.
        assert_eq!(poller_key(&other_db), poller_key(&url("a")));
    }
}
