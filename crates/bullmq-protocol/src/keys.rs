//! Redis key names of one queue, exactly as BullMQ lays them out.
//!
//! Every key of a queue is `{prefix}:{queue}:{suffix}`. With a hash-tagged prefix such as
//! `{bull}` all keys of all queues share one Redis Cluster slot, so multi-key scripts run on a
//! cluster unchanged.

use std::fmt;

/// Default key prefix, as in Node BullMQ (`prefix: 'bull'`).
pub const DEFAULT_PREFIX: &str = "bull";

/// Key suffixes of the per-queue structures (not the per-job ones).
///
/// The string of each variant is the suffix BullMQ uses; [`QueueKeys::key`] joins it to the
/// queue's base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueKey {
    /// `wait` list: jobs ready to run (LPUSH FIFO / RPUSH LIFO, workers take from the right).
    Wait,
    /// `paused` list: legacy key, BullMQ 5+ keeps waiting jobs in `wait` while paused.
    Paused,
    /// `active` list: jobs a worker holds.
    Active,
    /// `prioritized` zset: score `priority·2³² + pc`.
    Prioritized,
    /// `delayed` zset: score `readyAt·0x1000 + sequence`.
    Delayed,
    /// `completed` zset scored by finishedOn.
    Completed,
    /// `failed` zset scored by finishedOn.
    Failed,
    /// `waiting-children` zset (flows).
    WaitingChildren,
    /// `marker` zset that idle workers block on with `BZPOPMIN`.
    Marker,
    /// `repeat` zset of repeatable job schedules.
    Repeat,
    /// `stalled` set: active jobs marked by the last stalled check.
    Stalled,
    /// `stalled-check` string: guard so one stalled check runs per interval.
    StalledCheck,
    /// `id` string: auto-increment job id counter.
    Id,
    /// `pc` string: priority counter (FIFO order within one priority).
    PriorityCounter,
    /// `limiter` string: global rate limiter counter.
    Limiter,
    /// `meta` hash: paused flag, version, `opts.maxLenEvents`, concurrency.
    Meta,
    /// `events` stream.
    Events,
    /// `metrics:completed` hash + list of per-minute data points.
    MetricsCompleted,
    /// `metrics:failed` hash + list of per-minute data points.
    MetricsFailed,
}

impl QueueKey {
    /// Every per-queue key, in a stable order (useful for obliterate and cleanup checks).
    pub const ALL: [QueueKey; 19] = [
        QueueKey::Wait,
        QueueKey::Paused,
        QueueKey::Active,
        QueueKey::Prioritized,
        QueueKey::Delayed,
        QueueKey::Completed,
        QueueKey::Failed,
        QueueKey::WaitingChildren,
        QueueKey::Marker,
        QueueKey::Repeat,
        QueueKey::Stalled,
        QueueKey::StalledCheck,
        QueueKey::Id,
        QueueKey::PriorityCounter,
        QueueKey::Limiter,
        QueueKey::Meta,
        QueueKey::Events,
        QueueKey::MetricsCompleted,
        QueueKey::MetricsFailed,
    ];

    /// The suffix BullMQ appends to the queue base for this key.
    pub const fn suffix(self) -> &'static str {
        match self {
            QueueKey::Wait => "wait",
            QueueKey::Paused => "paused",
            QueueKey::Active => "active",
            QueueKey::Prioritized => "prioritized",
            QueueKey::Delayed => "delayed",
            QueueKey::Completed => "completed",
            QueueKey::Failed => "failed",
            QueueKey::WaitingChildren => "waiting-children",
            QueueKey::Marker => "marker",
            QueueKey::Repeat => "repeat",
            QueueKey::Stalled => "stalled",
            QueueKey::StalledCheck => "stalled-check",
            QueueKey::Id => "id",
            QueueKey::PriorityCounter => "pc",
            QueueKey::Limiter => "limiter",
            QueueKey::Meta => "meta",
            QueueKey::Events => "events",
            QueueKey::MetricsCompleted => "metrics:completed",
            QueueKey::MetricsFailed => "metrics:failed",
        }
    }
}

/// Builds the key names of one queue.
///
/// ```
/// use bullmq_protocol::keys::{QueueKey, QueueKeys};
/// let keys = QueueKeys::new("bull", "emails");
/// assert_eq!(keys.key(QueueKey::Wait), "bull:emails:wait");
/// assert_eq!(keys.job("42"), "bull:emails:42");
/// assert_eq!(keys.lock("42"), "bull:emails:42:lock");
/// assert_eq!(keys.base(), "bull:emails:");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKeys {
    prefix: String,
    name: String,
    base: String,
}

impl QueueKeys {
    /// Keys for queue `name` under `prefix` (use [`DEFAULT_PREFIX`] for Node's default).
    pub fn new(prefix: impl Into<String>, name: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let name = name.into();
        let base = format!("{prefix}:{name}:");
        Self { prefix, name, base }
    }

    /// The key prefix (`bull` by default).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The queue name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `{prefix}:{queue}:` — what job ids are appended to; scripts receive it to build job keys.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The fully qualified queue name `{prefix}:{queue}` (Node's `queue.qualifiedName`).
    pub fn qualified_name(&self) -> &str {
        &self.base[..self.base.len() - 1]
    }

    /// The key of a per-queue structure.
    pub fn key(&self, key: QueueKey) -> String {
        format!("{}{}", self.base, key.suffix())
    }

    /// The job hash `{prefix}:{queue}:{jobId}`.
    pub fn job(&self, job_id: &str) -> String {
        format!("{}{job_id}", self.base)
    }

    /// The job's lock string `…:{jobId}:lock` holding the worker's token.
    pub fn lock(&self, job_id: &str) -> String {
        format!("{}{job_id}:lock", self.base)
    }

    /// The job's log list `…:{jobId}:logs`.
    pub fn logs(&self, job_id: &str) -> String {
        format!("{}{job_id}:logs", self.base)
    }

    /// The parent's pending children set `…:{jobId}:dependencies`.
    pub fn dependencies(&self, job_id: &str) -> String {
        format!("{}{job_id}:dependencies", self.base)
    }

    /// The parent's processed children hash `…:{jobId}:processed`.
    pub fn processed(&self, job_id: &str) -> String {
        format!("{}{job_id}:processed", self.base)
    }

    /// The parent's failed children hash `…:{jobId}:failed`.
    pub fn failed_children(&self, job_id: &str) -> String {
        format!("{}{job_id}:failed", self.base)
    }

    /// The parent's unsuccessful (ignored) children zset `…:{jobId}:unsuccessful`.
    pub fn unsuccessful(&self, job_id: &str) -> String {
        format!("{}{job_id}:unsuccessful", self.base)
    }

    /// The deduplication key `…:de:{deduplicationId}`.
    pub fn deduplication(&self, deduplication_id: &str) -> String {
        format!("{}de:{deduplication_id}", self.base)
    }

    /// Name a worker connection gets with `CLIENT SETNAME`, so Node's `getWorkers()` lists it:
    /// `{prefix}:{base64(queue)}:w:{worker name}` (Node appends `:w:` and the worker's name, or
    /// nothing after the base64 part when the worker has no name).
    pub fn worker_client_name(&self, worker_name: Option<&str>) -> String {
        let encoded = base64_encode(self.name.as_bytes());
        match worker_name {
            Some(name) => format!("{}:{encoded}:w:{name}", self.prefix),
            None => format!("{}:{encoded}", self.prefix),
        }
    }

    /// Name of a worker's command (non-blocking) connection:
    /// `{prefix}:{base64(queue)}:wc`, plus `:{worker name}` for a named worker. Node leaves that
    /// connection unnamed; we name it so a `CLIENT LIST` shows every connection of a queue's
    /// workers (and proves none outlives its worker), with a suffix none of Node's lookups
    /// (`getWorkers`: the exact base or `:w:`; `getQueueEvents`: `:qe`) matches.
    pub fn worker_command_client_name(&self, worker_name: Option<&str>) -> String {
        let encoded = base64_encode(self.name.as_bytes());
        match worker_name {
            Some(name) => format!("{}:{encoded}:wc:{name}", self.prefix),
            None => format!("{}:{encoded}:wc", self.prefix),
        }
    }
}

impl fmt::Display for QueueKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.qualified_name())
    }
}

/// Standard base64 with padding; small enough that a dependency is not worth it.
fn base64_encode(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_connection_names_escape_node_lookups() {
        let keys = QueueKeys::new("bull", "emails");
        let base = keys.worker_client_name(None);
        assert_eq!(base, "bull:ZW1haWxz");
        for name in [
            keys.worker_command_client_name(None),
            keys.worker_command_client_name(Some("w-1")),
        ] {
            // Node's getWorkers(): the exact base, or the base followed by `:w:`;
            // getQueueEvents(): the base followed by `:qe`.
            assert!(name.starts_with(&format!("{base}:wc")), "{name}");
            assert_ne!(name, base);
            assert!(!name.starts_with(&format!("{base}:w:")), "{name}");
            assert_ne!(name, format!("{base}:qe"));
        }
        assert_eq!(
            keys.worker_command_client_name(Some("w-1")),
            "bull:ZW1haWxz:wc:w-1"
        );
    }

    #[test]
    fn every_queue_key_has_the_bullmq_suffix() {
        let keys = QueueKeys::new("{bull}", "q");
        assert_eq!(keys.key(QueueKey::StalledCheck), "{bull}:q:stalled-check");
        assert_eq!(keys.key(QueueKey::PriorityCounter), "{bull}:q:pc");
        assert_eq!(keys.key(QueueKey::MetricsFailed), "{bull}:q:metrics:failed");
        assert_eq!(keys.deduplication("d1"), "{bull}:q:de:d1");
        assert_eq!(keys.qualified_name(), "{bull}:q");
    }

    #[test]
    fn base64_matches_known_vectors() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"emails"), "ZW1haWxz");
    }
}
