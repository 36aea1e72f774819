//! Typed calls of the worker scripts (fetch batch, finish batch, extend locks, stalled check).
