//! What the `bullmq` command's exit status means, so scripts can branch on it.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | done |
//! | 1 | failed: Redis unreachable, a script refused, bad data |
//! | 2 | usage: unknown flag, bad value, malformed `--redis-url` (clap's own code) |
//! | 3 | not found: the queue or job named does not exist |
//! | 4 | refused: a destructive command not confirmed, or a job not in the state the operation needs |

use std::fmt;
use std::process::ExitCode;

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

/// Redis, a script or the data failed.
pub(crate) const FAILED: u8 = 1;
/// The command line is wrong (clap's own code for a usage error).
pub(crate) const USAGE: u8 = 2;
/// The queue or job named does not exist.
pub(crate) const NOT_FOUND: u8 = 3;
/// Not confirmed, or not in the state the operation needs.
pub(crate) const REFUSED: u8 = 4;

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

/// [`code_of`] as a number (for `--json` errors).
pub(crate) fn number_of(error: &anyhow::Error) -> u8 {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Exit>())
        .map_or(FAILED, |exit| exit.code)
}

/// The `kind` of a `--json` error: `usage`, `not-found`, `refused`, `connection` (Redis
/// could not be reached) or `failed`.
pub(crate) fn kind_of(error: &anyhow::Error) -> &'static str {
    match number_of(error) {
        USAGE => "usage",
        NOT_FOUND => "not-found",
        REFUSED => "refused",
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

/// Whether `cause` says Redis could not be reached.
fn is_connect(cause: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(error) = cause.downcast_ref::<ractor_bullmq::QueueError>() {
        return error.is_connect();
    }
    matches!(
        cause.downcast_ref::<bullmq_redis::RedisError>(),
        Some(bullmq_redis::RedisError::Connect { .. })
    )
}

/// The `kind` of a usage error clap found.
pub(crate) const USAGE_KIND: &str = "usage";

#[cfg(test)]
mod tests {
    use super::*;

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
}
