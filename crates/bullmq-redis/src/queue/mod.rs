//! Typed calls of the producer and admin scripts (add, pause, counts, clean, ...).
