//! Errors of the supervision module.
//!
//! The layer knows nothing of what its children are, so the causes it carries from them (a start
//! function's error, an application's configuration error) are kept as
//! `Arc<dyn Error + Send + Sync>`: [`Error::source`] returns the original error, which callers
//! can `downcast_ref` to its type (a `WorkerError`, say). `Arc` rather than `Box` keeps
//! [`SupervisionError`] `Clone`, as replies and events need.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The cause an error of this module carries from outside it.
pub type Cause = Arc<dyn Error + Send + Sync + 'static>;

/// What can go wrong when talking to or running a supervisor.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SupervisionError {
    /// `start_child` was given an id that a running or restarting child already has.
    DuplicateChild {
        /// The supervisor's name.
        supervisor: String,
        /// The conflicting id.
        id: String,
    },
    /// No child with this id.
    UnknownChild {
        /// The supervisor's name.
        supervisor: String,
        /// The id asked for.
        id: String,
    },
    /// The child's start function failed (its `pre_start` errored or panicked, or what it
    /// needs first — a connection, say — could not be had); `source` is that error.
    StartFailed {
        /// The child's id.
        id: String,
        /// Why: the start function's error (usually a `ractor::SpawnErr`).
        source: Cause,
    },
    /// The start function returned an actor linked to another supervisor.
    NotLinked {
        /// The child's id.
        id: String,
    },
    /// The supervisor actor is not running (stopped, gave up, or being restarted).
    NotRunning(String),
    /// Restart intensity exceeded: the supervisor stopped its children and itself.
    GaveUp {
        /// The supervisor's name.
        supervisor: String,
        /// The child whose exit exhausted the budget.
        child: String,
        /// The configured `max_restarts`.
        max_restarts: u32,
        /// The configured window.
        period: Duration,
    },
    /// What a child was to be started with is invalid (worker options, manager bounds); nothing
    /// was started. The source is the validation error, of the child's own type.
    InvalidOption(Cause),
    /// A graceful shutdown did not finish in time; the remaining actors were killed.
    ShutdownTimedOut(Duration),
}

impl SupervisionError {
    /// [`SupervisionError::InvalidOption`] caused by `error`.
    pub fn invalid_option(error: impl Error + Send + Sync + 'static) -> Self {
        Self::InvalidOption(Arc::new(error))
    }

    /// [`SupervisionError::StartFailed`] of child `id`, caused by `error`.
    pub fn start_failed(id: impl Into<String>, error: impl Error + Send + Sync + 'static) -> Self {
        Self::StartFailed {
            id: id.into(),
            source: Arc::new(error),
        }
    }
}

impl fmt::Display for SupervisionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateChild { supervisor, id } => {
                write!(
                    f,
                    "supervisor `{supervisor}` already has a child with id `{id}`"
                )
            }
            Self::UnknownChild { supervisor, id } => {
                write!(f, "supervisor `{supervisor}` has no child with id `{id}`")
            }
            // The cause is part of the text as well as the source: these messages end up in
            // logs and test assertions that print only the top error.
            Self::StartFailed { id, source } => write!(f, "child `{id}` failed to start: {source}"),
            Self::NotLinked { id } => write!(
                f,
                "child `{id}` was not linked to its supervisor; spawn it with \
                 `spawn_linked(.., supervisor)`"
            ),
            Self::NotRunning(name) => write!(f, "supervisor `{name}` is not running"),
            Self::GaveUp {
                supervisor,
                child,
                max_restarts,
                period,
            } => write!(
                f,
                "supervisor `{supervisor}` gave up: child `{child}` needed a restart beyond \
                 {max_restarts} restarts within {period:?}"
            ),
            Self::InvalidOption(source) => write!(f, "invalid configuration: {source}"),
            Self::ShutdownTimedOut(timeout) => write!(
                f,
                "shutdown did not finish within {timeout:?}; remaining actors were killed"
            ),
        }
    }
}

impl Error for SupervisionError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // The error inside the `Arc`, not the `Arc`, so `downcast_ref` finds its type.
            Self::StartFailed { source, .. } | Self::InvalidOption(source) => Some(&**source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct BadOption;

    impl fmt::Display for BadOption {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("option `x` must be positive")
        }
    }

    impl Error for BadOption {}

    #[test]
    fn the_cause_is_the_source_with_its_own_type() {
        let error = SupervisionError::invalid_option(BadOption);
        assert_eq!(
            error.to_string(),
            "invalid configuration: option `x` must be positive"
        );
        let source = error.source().expect("a source");
        assert_eq!(source.downcast_ref::<BadOption>(), Some(&BadOption));

        let error = SupervisionError::start_failed("w1", BadOption).clone();
        assert_eq!(
            error.to_string(),
            "child `w1` failed to start: option `x` must be positive"
        );
        assert!(error
            .source()
            .is_some_and(|s| s.downcast_ref::<BadOption>().is_some()));
    }

    #[test]
    fn errors_of_the_layer_itself_have_no_source() {
        let error = SupervisionError::NotRunning("sup".into());
        assert!(error.source().is_none());
        assert_eq!(error.to_string(), "supervisor `sup` is not running");
    }
}
