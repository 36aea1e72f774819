//! The `Job` read model.
