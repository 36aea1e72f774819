//! What a command that is not about one key must do on a Redis Cluster: go to every primary.
//!
//! A cluster client routes a keyed command (every script of a queue, `BZPOPMIN marker`,
//! `XREAD BLOCK … events`) to the node owning the key's slot, and follows `MOVED` after a
//! reshard by itself. Commands about the server rather than a key (`CLIENT LIST`,
//! `CLIENT SETNAME`, `SCAN`) reach one node only; the helpers here run them on each primary,
//! so a lookup sees every connection and every key, and a connection is named on whichever
//! node its blocking command runs.

use fred::interfaces::{ClientInterface, ClusterInterface};
use fred::prelude::{Client, ClientLike};
use fred::types::config::Server;

use crate::error::Result;

/// The primaries a cluster client knows (from its cached slot map), or `None` for a client of
/// one server.
pub fn primaries(client: &Client) -> Option<Vec<Server>> {
    if !client.is_clustered() {
        return None;
    }
    Some(
        client
            .cached_cluster_state()
            .map(|state| state.unique_primary_nodes())
            .unwrap_or_default(),
    )
}

/// `CLIENT LIST` of the server, or one per primary of a cluster (each connection is listed by
/// the node it is connected to; a cluster client has a connection to every primary).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a node refuses the command (some hosted services
/// disable it) or cannot be reached.
pub async fn client_lists(client: &Client) -> Result<Vec<String>> {
    let Some(nodes) = primaries(client) else {
        return Ok(vec![
            client.client_list::<String, String>(None, None).await?,
        ]);
    };
    let mut lists = Vec::with_capacity(nodes.len());
    for node in nodes {
        lists.push(
            client
                .with_cluster_node(node)
                .client_list::<String, String>(None, None)
                .await?,
        );
    }
    Ok(lists)
}

/// Names the client's connection to every primary (`CLIENT SETNAME`), or its one connection.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a node refuses the name or cannot be reached.
pub async fn set_name(client: &Client, name: &str) -> Result<()> {
    match primaries(client) {
        None => client.client_setname(name).await?,
        Some(nodes) => {
            for node in nodes {
                client.with_cluster_node(node).client_setname(name).await?;
            }
        }
    }
    Ok(())
}

/// Names the client's connection to `server` (one node of a cluster, after it reconnected
/// there), or its one connection.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the node refuses the name or cannot be reached.
pub async fn set_name_on(client: &Client, server: &Server, name: &str) -> Result<()> {
    if client.is_clustered() {
        client
            .with_cluster_node(server.clone())
            .client_setname(name)
            .await?;
    } else {
        client.client_setname(name).await?;
    }
    Ok(())
}
