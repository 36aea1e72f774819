//! Errors of the runtime crate.
