//! A queue's event log on PostgreSQL: [`PgEventStream`] reads it without ever skipping an
//! event, [`PgEventPublisher`] appends to it through the protocol's `publish_event`.
//!
//! Event ids come from a sequence when a row is inserted, but the row becomes visible when its
//! transaction commits, so ids do not become visible in order. A reader that only asks for
//! "ids above the last one seen" (Node 6.7's QueueEvents) skips an event whose transaction
//! commits after a higher id was read. This reader uses a *lock fence* instead: after reading
//! rows up to id `H`, it looks at which transactions hold a write lock on the `event` table
//! (every transaction that took an event id holds one, from before it took the id until it
//! ends), waits until each of them has ended, and reads `..=H` again, now complete: a lower id
//! was taken before `H` was, so by one of those transactions or by one already finished.
//! Events come out exactly once, in id order. With no other writer the first read is final;
//! a long writing transaction delays delivery until it ends. (A fence on snapshot xids is not
//! enough: a transaction takes its event id a moment before it is given an xid.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bullmq_backend::{
    BackendError, BackendResult, ConnectionChange, EventEntry, EventPublisher, EventStream,
};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::db::Db;
use crate::error::PgError;
use crate::listener::Listener;

/// How often the fence is polled while writers are in progress.
const FENCE_POLL: Duration = Duration::from_millis(5);
/// Upper bound of one fence wait before the read returns nothing (and is retried by the
/// caller's next read): a writer holding its transaction open this long is not normal.
const FENCE_MAX: Duration = Duration::from_secs(30);

/// Parses a cursor this backend handed out (`"17"`), or the neutral start (`"0"`, `"0-0"`).
fn cursor(after: &str) -> BackendResult<i64> {
    let head = after.split('-').next().unwrap_or("");
    head.parse::<i64>().map_err(|_| {
        BackendError::backend(PgError::Reply {
            operation: "reading events",
            detail: format!("`{after}` is not an event id of this PostgreSQL queue"),
        })
    })
}

/// A reader of one queue's event log, on a LISTEN session named `<queue>:qe` as Node's.
pub struct PgEventStream {
    db: Db,
    queue: String,
    listener: Listener,
    closed: AtomicBool,
}

impl std::fmt::Debug for PgEventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgEventStream")
            .field("queue", &self.queue)
            .finish()
    }
}

impl PgEventStream {
    pub(crate) fn new(db: Db, queue: String, listener: Listener) -> Self {
        Self {
            db,
            queue,
            listener,
            closed: AtomicBool::new(false),
        }
    }

    async fn read_once(
        &self,
        after: i64,
        upto: Option<i64>,
        count: i64,
    ) -> BackendResult<Vec<EventEntry>> {
        let operation = "reading events";
        let client = self.db.client(operation).await?;
        let statement = client
            .prepare_cached(
                "SELECT id, event, data::text FROM event \
                  WHERE queue = $1 AND id > $2 AND ($3::int8 IS NULL OR id <= $3::int8) \
                  ORDER BY id LIMIT $4",
            )
            .await
            .map_err(PgError::sql(operation))?;
        let rows = client
            .query(&statement, &[&self.queue, &after, &upto, &count])
            .await
            .map_err(PgError::sql(operation))?;
        Ok(rows
            .iter()
            .map(|r| entry(r.get(0), r.get(1), r.get::<_, Option<String>>(2).as_deref()))
            .collect())
    }

    /// Waits until every transaction that holds a write lock on `event` now has ended;
    /// `false` when that took longer than [`FENCE_MAX`].
    async fn pass_fence(&self) -> BackendResult<bool> {
        let operation = "waiting for event writers to commit";
        let client = self.db.client(operation).await?;
        // Relation locks only (a transaction's lock on the table, fast-path ones included);
        // readers' AccessShareLock does not write.
        let holders = "SELECT virtualtransaction FROM pg_locks \
                        WHERE locktype = 'relation' AND relation = 'event'::regclass \
                          AND mode <> 'AccessShareLock' AND pid <> pg_backend_pid()";
        let writers: Vec<String> = client
            .query(holders, &[])
            .await
            .map_err(PgError::sql(operation))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if writers.is_empty() {
            return Ok(true);
        }
        let started = Instant::now();
        let still =
            format!("SELECT count(*) FROM ({holders}) h WHERE virtualtransaction = ANY($1)");
        loop {
            let left: i64 = client
                .query_one(&still, &[&writers])
                .await
                .map_err(PgError::sql(operation))?
                .get(0);
            if left == 0 {
                return Ok(true);
            }
            if started.elapsed() > FENCE_MAX {
                return Ok(false);
            }
            tokio::time::sleep(FENCE_POLL).await;
        }
    }

    /// The final entries after `after`, up to `count` (empty when none are final yet).
    async fn read_final(&self, after: i64, count: i64) -> BackendResult<Vec<EventEntry>> {
        let first = self.read_once(after, None, count).await?;
        let Some(highest) = first.last().and_then(|e| e.id.parse::<i64>().ok()) else {
            return Ok(first);
        };
        if !self.pass_fence().await? {
            return Ok(Vec::new());
        }
        self.read_once(after, Some(highest), count).await
    }
}

/// An event row as the seam's entry: `event` first, then the data fields, strings verbatim and
/// other values as JSON text.
fn entry(id: i64, name: String, data: Option<&str>) -> EventEntry {
    let mut fields = vec![("event".to_string(), name)];
    if let Some(Ok(Value::Object(map))) = data.map(serde_json::from_str::<Value>) {
        for (key, value) in map {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            fields.push((key, text));
        }
    }
    EventEntry {
        id: id.to_string(),
        fields,
    }
}

#[async_trait]
impl EventStream for PgEventStream {
    async fn newest_id(&self) -> BackendResult<Option<String>> {
        let operation = "reading the newest event id";
        let client = self.db.client(operation).await?;
        let row = client
            .query_one("SELECT max(id) FROM event WHERE queue = $1", &[&self.queue])
            .await
            .map_err(PgError::sql(operation))?;
        Ok(row.get::<_, Option<i64>>(0).map(|id| id.to_string()))
    }

    async fn read(
        &self,
        after: &str,
        block: Duration,
        count: u64,
    ) -> BackendResult<Vec<EventEntry>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed);
        }
        let after = cursor(after)?;
        let count = i64::try_from(count.max(1)).unwrap_or(i64::MAX);
        let deadline = Instant::now() + block;
        let mut events = self.listener.signals.events.subscribe();
        loop {
            events.borrow_and_update();
            let entries = self.read_final(after, count).await?;
            if !entries.is_empty() {
                return Ok(entries);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            // Woken by a NOTIFY for this queue (or a reconnect); the notification may come
            // before the writer's rows are visible to a new snapshot of ours, so a wake that
            // finds nothing waits again.
            let _ = tokio::time::timeout(left, events.changed()).await;
        }
    }

    async fn reconnect(&self) -> BackendResult<()> {
        // The LISTEN session reconnects by itself; the pool replaces broken connections.
        Ok(())
    }

    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        Some(self.listener.signals.changes.subscribe())
    }

    async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.listener.close().await;
    }
}

/// Appends custom events to a queue's log (Node's `QueueEventsProducer`).
#[derive(Debug)]
pub struct PgEventPublisher {
    db: Db,
    queue: String,
}

impl PgEventPublisher {
    pub(crate) fn new(db: Db, queue: String) -> Self {
        Self { db, queue }
    }
}

#[async_trait]
impl EventPublisher for PgEventPublisher {
    async fn publish(
        &self,
        fields: Vec<(String, String)>,
        _max_events: u64,
    ) -> BackendResult<String> {
        // The protocol trims by the queue's meta `opts.maxLenEvents` inside publish_event.
        let mut fields = fields.into_iter();
        let name = match fields.next() {
            Some((key, name)) if key == "event" => name,
            _ => {
                return Err(BackendError::backend(PgError::Reply {
                    operation: "publishing an event",
                    detail: "the first field must be (\"event\", name)".into(),
                }))
            }
        };
        let data: Map<String, Value> = fields.map(|(k, v)| (k, Value::String(v))).collect();
        let data = Value::Object(data).to_string();
        let operation = "publishing an event";
        let client = self.db.client(operation).await?;
        let row = client
            .query_one(
                "SELECT publish_event($1::text, $2::text, $3::text::jsonb)",
                &[&self.queue, &name, &data],
            )
            .await
            .map_err(PgError::sql(operation))?;
        Ok(row.get::<_, i64>(0).to_string())
    }

    async fn close(&self) -> BackendResult<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_this_backends_ids_or_the_start() {
        assert_eq!(cursor("0-0").unwrap(), 0);
        assert_eq!(cursor("0").unwrap(), 0);
        assert_eq!(cursor("42").unwrap(), 42);
        assert!(cursor("abc").is_err());
    }

    #[test]
    fn entries_start_with_the_event_and_render_values_as_text() {
        let e = entry(
            7,
            "completed".into(),
            Some(r#"{"jobId":"1","returnvalue":{"a":1},"attemptsMade":2}"#),
        );
        assert_eq!(e.id, "7");
        assert_eq!(e.fields[0], ("event".into(), "completed".into()));
        assert!(e.fields.contains(&("jobId".into(), "1".into())));
        assert!(e
            .fields
            .contains(&("returnvalue".into(), r#"{"a":1}"#.into())));
        assert!(e.fields.contains(&("attemptsMade".into(), "2".into())));
    }
}
