//! What this backend declines, as typed errors that name the capability.

use bullmq_backend::BackendError;

use crate::error::PgError;

/// A refusal of `what` on PostgreSQL in this release.
pub(crate) fn unsupported(what: &'static str) -> BackendError {
    BackendError::backend(PgError::Reply {
        operation: what,
        detail: "not available on PostgreSQL in this release".into(),
    })
}
