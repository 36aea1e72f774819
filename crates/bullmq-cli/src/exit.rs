//! What the `bullmq` command's exit status means, so scripts can branch on it.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | done |
//! | 1 | failed: Redis or PostgreSQL unreachable, a script or statement refused, bad data |
//! | 2 | usage: unknown flag, bad value, malformed `--url` / `--redis-url` (clap's own code) |
//! | 3 | not found: the queue or job named does not exist |
//! | 4 | refused: a destructive command not confirmed, or a job not in the state the operation needs |
//! | 5 | unsupported: the backend does not have what the command needs (job schedulers on PostgreSQL, Redis' `INFO`) |
//! | 6 | schema: the PostgreSQL schema is not migrated by Node's migrator, or at a migration this release does not speak |

use std::fmt;
use std::process::ExitCode;

use bullmq_backend::BackendError;
use bullmq_postgres::PgError;

/// An error that carries its exit status; any other error exits with [`FAILED`].
#[derive(Debug)]
pub(crate) struct Exit {
    /// The status the process ends with.
    pub(crate) code: u8,
    /// What is printed after `error: `.
    pub(crate) message: String,
    /// With `--json`: the command's own report (which ids changed, which did not), printed
    /// with the error's `error`, `kind` and `exit` added, so the output stays one object.
    pub(crate) report: Option<serde_json::Value>,
}

/// Redis or PostgreSQL, a script or statement, or the data failed.
pub(crate) const FAILED: u8 = 1;
/// The command line is wrong (clap's own code for a usage error).
pub(crate) const USAGE: u8 = 2;
/// The queue or job named does not exist.
pub(crate) const NOT_FOUND: u8 = 3;
/// Not confirmed, or not in the state the operation needs.
pub(crate) const REFUSED: u8 = 4;
/// The backend declines what the command needs.
pub(crate) const UNSUPPORTED: u8 = 5;
/// The PostgreSQL schema is not one this release can use (not migrated, or at another
/// migration).
pub(crate) const SCHEMA: u8 = 6;

impl Exit {
    /// A usage error (exit 2): a value clap could not check, such as a malformed URL.
    pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
        Self::with_report(USAGE, message, None)
    }

    /// A "does not exist" error (exit 3).
    pub(crate) fn not_found(message: impl Into<String>) -> anyhow::Error {
        Self::with_report(NOT_FOUND, message, None)
    }

    /// A "will not do that" error (exit 4).
    pub(crate) fn refused(message: impl Into<String>) -> anyhow::Error {
        Self::with_report(REFUSED, message, None)
    }

    /// An "this backend does not have that" error (exit 5), for what the CLI itself declines
    /// (the seam's own refusals get the same status from [`number_of`]).
    pub(crate) fn unsupported(message: impl Into<String>) -> anyhow::Error {
        Self::with_report(UNSUPPORTED, message, None)
    }

    /// An error with exit status `code` that, with `--json`, is printed inside `report`.
    pub(crate) fn with_report(
        code: u8,
        message: impl Into<String>,
        report: Option<serde_json::Value>,
    ) -> anyhow::Error {
        Self {
            code,
            message: message.into(),
            report,
        }
        .into()
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// The exit status for `error`: the code of the first [`Exit`] in its chain, else [`FAILED`].
pub(crate) fn code_of(error: &anyhow::Error) -> ExitCode {
    ExitCode::from(number_of(error))
}

/// [`code_of`] as a number (for `--json` errors): the code of the first [`Exit`] in the
/// chain; else [`SCHEMA`] for a PostgreSQL schema it cannot use, [`UNSUPPORTED`] for a
/// capability the backend declined; else [`FAILED`].
pub(crate) fn number_of(error: &anyhow::Error) -> u8 {
    if let Some(exit) = error.chain().find_map(|cause| cause.downcast_ref::<Exit>()) {
        return exit.code;
    }
    if error
        .chain()
        .any(|cause| pg_error(cause).is_some_and(is_schema))
    {
        return SCHEMA;
    }
    if error.chain().any(is_unsupported) {
        return UNSUPPORTED;
    }
    FAILED
}

/// The `kind` of a `--json` error: `usage`, `not-found`, `refused`, `unsupported`, `schema`,
/// `connection` (Redis or PostgreSQL could not be reached) or `failed`.
pub(crate) fn kind_of(error: &anyhow::Error) -> &'static str {
    match number_of(error) {
        USAGE => "usage",
        NOT_FOUND => "not-found",
        REFUSED => "refused",
        UNSUPPORTED => "unsupported",
        SCHEMA => "schema",
        _ if error.chain().any(is_connect) => "connection",
        _ => "failed",
    }
}

/// The `--json` report an [`Exit`] in `error`'s chain carries.
pub(crate) fn report_of(error: &anyhow::Error) -> Option<&serde_json::Value> {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Exit>())
        .and_then(|exit| exit.report.as_ref())
}

/// Whether `cause` says Redis or PostgreSQL could not be reached.
fn is_connect(cause: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(error) = cause.downcast_ref::<ractor_bullmq::QueueError>() {
        return error.is_connect();
    }
    if let Some(error) = cause.downcast_ref::<BackendError>() {
        return error.is_connect();
    }
    if let Some(error) = pg_error(cause) {
        return matches!(
            error,
            PgError::Connect { .. } | PgError::ConnectTimeout { .. } | PgError::Pool { .. }
        );
    }
    matches!(
        cause.downcast_ref::<bullmq_redis::RedisError>(),
        Some(bullmq_redis::RedisError::Connect { .. })
    )
}

/// The PostgreSQL backend's error `cause` is or carries (as the seam's or the queue's
/// error: both display it transparently, so it is not a link of the chain of its own).
fn pg_error<'e>(cause: &'e (dyn std::error::Error + 'static)) -> Option<&'e PgError> {
    if let Some(error) = cause.downcast_ref::<PgError>() {
        return Some(error);
    }
    if let Some(error) = cause.downcast_ref::<BackendError>() {
        return error.downcast_ref::<PgError>();
    }
    match cause.downcast_ref::<ractor_bullmq::QueueError>() {
        Some(ractor_bullmq::QueueError::Backend(error)) => error.downcast_ref::<PgError>(),
        _ => None,
    }
}

/// Whether `error` says the schema is not one this release can use.
fn is_schema(error: &PgError) -> bool {
    matches!(
        error,
        PgError::SchemaNotMigrated { .. }
            | PgError::SchemaVersionUntested { .. }
            | PgError::SchemaNeedsNewerClient { .. }
            | PgError::MissingFunction { .. }
    )
}

/// Whether `cause` is the seam declining a capability.
fn is_unsupported(cause: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(error) = cause.downcast_ref::<BackendError>() {
        return error.unsupported_capability().is_some();
    }
    matches!(
        cause.downcast_ref::<ractor_bullmq::QueueError>(),
        Some(ractor_bullmq::QueueError::Unsupported { .. })
    )
}

/// The `kind` of a usage error clap found.
pub(crate) const USAGE_KIND: &str = "usage";

#[cfg(test)]
mod tests {
    use super::*;
    use bullmq_backend::Capability;

    #[test]
    fn the_code_survives_added_context() {
        let error = Exit::not_found("no job 7").context("reading job 7");
        assert_eq!(code_of(&error), ExitCode::from(NOT_FOUND));
        assert_eq!(code_of(&anyhow::anyhow!("boom")), ExitCode::from(FAILED));
        assert_eq!(kind_of(&error), "not-found");
        assert_eq!(kind_of(&Exit::usage("bad url")), "usage");
        assert_eq!(number_of(&Exit::refused("no")), REFUSED);
        assert_eq!(kind_of(&anyhow::anyhow!("boom")), "failed");
    }

    #[test]
    fn declined_capabilities_and_unusable_schemas_have_their_own_codes() {
        let declined = anyhow::Error::new(ractor_bullmq::QueueError::Unsupported {
            capability: Capability::Schedulers,
            backend: "postgres",
        })
        .context("reading the job schedulers");
        assert_eq!(number_of(&declined), UNSUPPORTED);
        assert_eq!(kind_of(&declined), "unsupported");
        let seam = anyhow::Error::new(BackendError::Unsupported {
            capability: Capability::Flows,
            backend: "postgres",
        });
        assert_eq!(number_of(&seam), UNSUPPORTED);
        assert_eq!(kind_of(&Exit::unsupported("no INFO")), "unsupported");
        let schema = anyhow::Error::new(PgError::SchemaNotMigrated { schema: "s".into() })
            .context("cannot open queue \"q\"");
        assert_eq!(number_of(&schema), SCHEMA);
        assert_eq!(kind_of(&schema), "schema");
        let through_the_queue = anyhow::Error::new(ractor_bullmq::QueueError::Backend(
            BackendError::backend(PgError::SchemaNotMigrated { schema: "s".into() }),
        ));
        assert_eq!(number_of(&through_the_queue), SCHEMA);
    }
}
