//! The producer and admin side of a queue.
