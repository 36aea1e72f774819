//! The BullMQ wire protocol, without I/O.
//!
//! Everything another BullMQ client (Node, Python, Elixir) can observe in Redis is described
//! here: key names ([`keys`]), job options with BullMQ's JSON short keys ([`options`]), the job
//! hash ([`job_record`]), the events stream ([`events`]), the zset scores ([`score`]), retry
//! backoff ([`backoff`]) and input validation ([`validation`]). The crate is pure so that all of
//! it is unit- and property-tested without Redis.

pub mod keys;
