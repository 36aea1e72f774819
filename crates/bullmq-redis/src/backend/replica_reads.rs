//! [`ReadRoute`]: where a queue store's read-only getters go, a replica when
//! [`ConnectionConfig::replica_reads`](crate::ConnectionConfig::replica_reads) found one, with
//! the primary answering whenever the replica cannot.

use std::future::Future;

use bullmq_backend::BackendError;
use fred::error::ErrorKind;
use fred::prelude::{Client, ClientLike};

use crate::RedisError;

/// The primary, and the replica getters read from if there is one.
#[derive(Debug, Clone)]
pub(crate) struct ReadRoute {
    primary: Client,
    replica: Option<Client>,
}

impl ReadRoute {
    /// Getters go to `replica` when there is one, else to `primary`.
    pub(crate) fn new(primary: Client, replica: Option<Client>) -> Self {
        Self { primary, replica }
    }

    /// The replica client, if getters read from one.
    pub(crate) fn replica(&self) -> Option<&Client> {
        self.replica.as_ref()
    }

    /// Runs the read-only `read` on the replica, or on the primary when there is no replica,
    /// it is not connected now (reconnecting after a crash: waiting for it would stall the
    /// getter), or it failed the call in a way that says "this node cannot answer" (see
    /// [`ReplicaFailure`]). Any other error (a bad reply, a decode error) is the getter's
    /// answer, as it would be from the primary.
    pub(crate) async fn read<T, E, F, Fut>(&self, read: F) -> Result<T, E>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: ReplicaFailure + std::fmt::Display,
    {
        if let Some(replica) = self.replica.as_ref().filter(|r| r.is_connected()) {
            match read(replica.clone()).await {
                Err(error) if error.is_replica_failure() => {
                    tracing::debug!(%error, "the replica could not answer: reading from the primary");
                }
                outcome => return outcome,
            }
        }
        read(self.primary.clone()).await
    }
}

/// Errors after which a read is asked again of the primary: the replica's connection failed
/// (I/O, timeout, canceled, gone) or the replica refused to serve (`LOADING` its copy,
/// `MASTERDOWN` with `replica-serve-stale-data no`, `READONLY` for a script that would write).
/// Retrying is safe: the call only reads.
pub(crate) trait ReplicaFailure {
    /// Whether the primary should be asked instead.
    fn is_replica_failure(&self) -> bool;
}

impl ReplicaFailure for fred::error::Error {
    fn is_replica_failure(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::IO | ErrorKind::Timeout | ErrorKind::Canceled
        ) || ["LOADING", "MASTERDOWN", "READONLY"]
            .iter()
            .any(|prefix| self.details().starts_with(prefix))
    }
}

impl ReplicaFailure for RedisError {
    fn is_replica_failure(&self) -> bool {
        match self {
            RedisError::Connect { .. } => true,
            RedisError::Command(error) => error.is_replica_failure(),
            _ => false,
        }
    }
}

impl ReplicaFailure for BackendError {
    fn is_replica_failure(&self) -> bool {
        match self {
            BackendError::Connect(_) => true,
            other => other
                .downcast_ref::<RedisError>()
                .is_some_and(RedisError::is_replica_failure),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fred(kind: ErrorKind, details: &str) -> RedisError {
        RedisError::Command(fred::error::Error::new(kind, details.to_owned()))
    }

    #[test]
    fn connection_failures_and_refusals_go_to_the_primary() {
        assert!(fred(ErrorKind::IO, "broken pipe").is_replica_failure());
        assert!(fred(ErrorKind::Timeout, "Request timed out.").is_replica_failure());
        assert!(fred(ErrorKind::Canceled, "Canceled.").is_replica_failure());
        assert!(fred(ErrorKind::Unknown, "LOADING Redis is loading").is_replica_failure());
        assert!(
            fred(ErrorKind::Unknown, "MASTERDOWN Link with MASTER is down").is_replica_failure()
        );
        assert!(fred(ErrorKind::Unknown, "READONLY You can't write").is_replica_failure());
        assert!(BackendError::from(fred(ErrorKind::IO, "reset")).is_replica_failure());
    }

    #[test]
    fn answers_are_not_retried() {
        assert!(!fred(ErrorKind::InvalidArgument, "WRONGTYPE Operation").is_replica_failure());
        assert!(!fred(ErrorKind::Unknown, "ERR user_script:1: boom").is_replica_failure());
        let unexpected = RedisError::UnexpectedReply {
            script: "get_counts",
            detail: "one count per state expected".into(),
        };
        assert!(!unexpected.is_replica_failure());
        assert!(!BackendError::from(unexpected).is_replica_failure());
    }
}
