//! The event log of one queue (what Redis keeps in the `events` stream): entries with
//! `{ms}-{seq}` ids, trimmed to `opts.maxLenEvents`, read from a cursor with a blocking wait.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::World;
use crate::error::{BackendError, BackendResult};
use crate::events::{EventEntry, EventPublisher, EventStream};

/// A stream id, ordered as Redis orders them.
pub(crate) type StreamId = (u64, u64);

/// Parses `{ms}-{seq}` (a bare `{ms}` means `{ms}-0`, as XREAD reads it).
pub(crate) fn parse_id(id: &str) -> Option<StreamId> {
    match id.split_once('-') {
        Some((ms, seq)) => Some((ms.parse().ok()?, seq.parse().ok()?)),
        None => Some((id.parse().ok()?, 0)),
    }
}

/// The entries of one queue's log, oldest first.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    entries: VecDeque<(StreamId, EventEntry)>,
    last: StreamId,
}

impl EventLog {
    /// Appends an entry stamped `now` (or later than the last id when the clock went back,
    /// as `XADD *` does) and trims to the newest `max`; returns the id.
    pub(crate) fn append(&mut self, now: u64, fields: Vec<(String, String)>, max: u64) -> String {
        let id = if now > self.last.0 {
            (now, 0)
        } else {
            (self.last.0, self.last.1 + 1)
        };
        self.last = id;
        let text = format!("{}-{}", id.0, id.1);
        self.entries.push_back((
            id,
            EventEntry {
                id: text.clone(),
                fields,
            },
        ));
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        while self.entries.len() > max {
            self.entries.pop_front();
        }
        text
    }

    /// The newest entry's id.
    pub(crate) fn newest(&self) -> Option<String> {
        self.entries.back().map(|(_, e)| e.id.clone())
    }

    /// Drops the oldest entries beyond the newest `max`; returns how many were dropped.
    pub(crate) fn trim(&mut self, max: u64) -> u64 {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let drop = self.entries.len().saturating_sub(max);
        self.entries.drain(..drop);
        drop as u64
    }

    /// Up to `count` entries after `after`.
    pub(crate) fn after(&self, after: StreamId, count: u64) -> Vec<EventEntry> {
        let count = usize::try_from(count.max(1)).unwrap_or(usize::MAX);
        self.entries
            .iter()
            .filter(|(id, _)| *id > after)
            .take(count)
            .map(|(_, e)| e.clone())
            .collect()
    }
}

/// Reads one queue's event log.
#[derive(Debug)]
pub(crate) struct MemoryEventStream {
    pub(crate) world: Arc<World>,
    pub(crate) base: String,
    pub(crate) closed: AtomicBool,
}

#[async_trait]
impl EventStream for MemoryEventStream {
    async fn newest_id(&self) -> BackendResult<Option<String>> {
        self.world
            .with_queue(&self.base, |q, _| Ok(q.events.newest()))
    }

    async fn read(
        &self,
        after: &str,
        block: Duration,
        count: u64,
    ) -> BackendResult<Vec<EventEntry>> {
        let signals = self.world.signals(&self.base);
        // `$` reads what comes after the newest entry now, as XREAD does.
        let cursor = if after == "$" {
            self.world
                .with_queue(&self.base, |q, _| Ok(q.events.newest()))?
                .and_then(|id| parse_id(&id))
                .unwrap_or((0, 0))
        } else {
            parse_id(after).ok_or_else(|| {
                BackendError::backend(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("invalid stream id {after:?}"),
                ))
            })?
        };
        let deadline = tokio::time::Instant::now() + block;
        loop {
            let notified = signals.events.notified();
            tokio::pin!(notified);
            // Registered before looking, so an entry appended in between still wakes us.
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                return Err(BackendError::Closed);
            }
            let entries = self
                .world
                .with_queue(&self.base, |q, _| Ok(q.events.after(cursor, count)))?;
            if !entries.is_empty() || block.is_zero() {
                return Ok(entries);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    async fn reconnect(&self) -> BackendResult<()> {
        Ok(())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.world.signals(&self.base).events.notify_waiters();
    }
}

/// Publishes into one queue's event log.
#[derive(Debug)]
pub(crate) struct MemoryEventPublisher {
    pub(crate) world: Arc<World>,
    pub(crate) base: String,
    pub(crate) closed: AtomicBool,
}

#[async_trait]
impl EventPublisher for MemoryEventPublisher {
    async fn publish(
        &self,
        fields: Vec<(String, String)>,
        max_events: u64,
    ) -> BackendResult<String> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed);
        }
        self.world.with_queue(&self.base, |q, now| {
            let id = q.events.append(now, fields, max_events);
            q.signals.events.notify_waiters();
            Ok(id)
        })
    }

    async fn close(&self) -> BackendResult<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_within_a_millisecond_and_when_the_clock_goes_back() {
        let mut log = EventLog::default();
        assert_eq!(log.append(10, vec![], 100), "10-0");
        assert_eq!(log.append(10, vec![], 100), "10-1");
        assert_eq!(log.append(9, vec![], 100), "10-2");
        assert_eq!(log.append(11, vec![], 2), "11-0");
        assert_eq!(log.after((0, 0), 10).len(), 2);
        assert_eq!(log.after((10, 2), 10)[0].id, "11-0");
        assert_eq!(parse_id("5"), Some((5, 0)));
    }
}
