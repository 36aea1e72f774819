//! What the `bullmq` command's exit status means, so scripts can branch on it.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | done |
//! | 1 | failed: Redis unreachable, a script refused, bad data |
//! | 2 | usage: unknown flag, bad value (clap's own code) |
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
}

/// Redis, a script or the data failed.
pub(crate) const FAILED: u8 = 1;
/// The queue or job named does not exist.
pub(crate) const NOT_FOUND: u8 = 3;
/// Not confirmed, or not in the state the operation needs.
pub(crate) const REFUSED: u8 = 4;

impl Exit {
    /// A "does not exist" error (exit 3).
    pub(crate) fn not_found(message: impl Into<String>) -> anyhow::Error {
        Self {
            code: NOT_FOUND,
            message: message.into(),
        }
        .into()
    }

    /// A "will not do that" error (exit 4).
    pub(crate) fn refused(message: impl Into<String>) -> anyhow::Error {
        Self {
            code: REFUSED,
            message: message.into(),
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
    let code = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<Exit>())
        .map_or(FAILED, |exit| exit.code);
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_survives_added_context() {
        let error = Exit::not_found("no job 7").context("reading job 7");
        assert_eq!(code_of(&error), ExitCode::from(NOT_FOUND));
        assert_eq!(code_of(&anyhow::anyhow!("boom")), ExitCode::from(FAILED));
    }
}
