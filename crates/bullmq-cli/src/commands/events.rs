//! `bullmq events <queue> [--from ID] [--json]`: tail a queue's events, one line per event.
//!
//! Reads with a `QueueEvents` (its own `XREAD BLOCK` connection, named as Node names its
//! QueueEvents connections) from `$` (events from now on) by default, or from `--from ID`
//! (`0` replays the whole stream). Runs until Ctrl-C, or until `--count` events were printed.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_protocol::events::{Event, StreamEvent};
use clap::Args;
use ractor_bullmq::{ConnectionConfig, QueueEventsHandle, QueueEventsOptions};
use serde_json::{Map, Value};

use super::Context;

/// Arguments of `bullmq events`.
#[derive(Debug, Clone, Args)]
pub(crate) struct EventsArgs {
    /// Queue name.
    queue: String,
    /// Where to start: `$` (only new events), `0` (replay the whole stream) or a stream id
    /// (what follows it).
    #[arg(long, value_name = "ID", default_value = "$")]
    from: String,
    /// Stop after printing this many events (default: run until Ctrl-C).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// How long one blocking read waits before it is issued again, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    block_ms: u64,
}

/// Runs `bullmq events`.
pub(crate) async fn run(ctx: &Context, args: EventsArgs) -> Result<()> {
    let config = ConnectionConfig::from_url(&ctx.redis_url)
        .with_context(|| format!("bad --redis-url {}", ctx.redis_url))?;
    let options = QueueEventsOptions::new(args.queue.clone(), config)
        .prefix(ctx.prefix.clone())
        .last_event_id(args.from.clone())
        .block_timeout(Duration::from_millis(args.block_ms.max(1)))
        // A terminal or a pipe may be slow; never drop this only subscriber for it.
        .subscriber_buffer(100_000)
        .autorun(false);
    let events = QueueEventsHandle::start(options)
        .await
        .context("cannot start reading events")?;
    // Subscribe before reading starts, so a replay is seen from its first event.
    let mut rx = events.subscribe_stream();
    events.run().await.context("cannot start reading events")?;

    let outcome = print_events(ctx.json, args.count, &mut rx).await;
    events.close().await;
    outcome
}

/// Prints events until the count is reached, Ctrl-C, or stdout is closed.
async fn print_events(
    json: bool,
    count: Option<u64>,
    rx: &mut tokio::sync::mpsc::Receiver<std::sync::Arc<StreamEvent>>,
) -> Result<()> {
    let mut printed = 0u64;
    if count == Some(0) {
        return Ok(());
    }
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some(event) = event else {
            anyhow::bail!("the event stream ended unexpectedly");
        };
        let line = if json {
            json_line(&event).to_string()
        } else {
            text_line(&event)
        };
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The reader of our output went away (e.g. `| head`): a normal way to stop.
            return Ok(());
        }
        printed += 1;
        if count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
    }
}

/// `{id} {event} {field}={value} …`, fields in stream order.
fn text_line(event: &StreamEvent) -> String {
    let mut line = format!("{} {}", event.id, event.event.name());
    for (k, v) in fields(&event.event) {
        line.push(' ');
        line.push_str(&k);
        line.push('=');
        line.push_str(&v);
    }
    line
}

/// `{"event": …, "id": …, field: value, …}`. Values are the stored strings, except those BullMQ
/// stores as JSON or numbers (`returnvalue`, progress `data`, `delay`, `attemptsMade`, `count`),
/// which are given typed, as Node's QueueEvents hands them to listeners.
fn json_line(event: &StreamEvent) -> Value {
    let mut object = Map::new();
    object.insert("event".into(), Value::String(event.event.name().to_owned()));
    object.insert("id".into(), Value::String(event.id.clone()));
    for (k, v) in fields(&event.event) {
        if k == "event" || k == "id" {
            continue; // a custom event's own `id`/`event` field cannot shadow ours
        }
        let typed = typed_value(&event.event, &k, &v);
        object.insert(k, typed);
    }
    Value::Object(object)
}

/// The event's fields without the leading `event` one.
fn fields(event: &Event) -> impl Iterator<Item = (String, String)> {
    event.to_fields().into_iter().skip(1)
}

fn typed_value(event: &Event, key: &str, raw: &str) -> Value {
    let typed = match (event, key) {
        (Event::Completed { returnvalue, .. }, "returnvalue") => Some(returnvalue.clone()),
        (Event::Progress { data, .. }, "data") => Some(data.clone()),
        (Event::Delayed { delay, .. }, "delay") => Some(Value::from(*delay)),
        (Event::RetriesExhausted { attempts_made, .. }, "attemptsMade") => {
            Some(Value::from(*attempts_made))
        }
        (Event::Cleaned { count }, "count") => Some(Value::from(*count)),
        _ => None,
    };
    typed.unwrap_or_else(|| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(id: &str, fields: &[(&str, &str)]) -> StreamEvent {
        StreamEvent::decode(
            id,
            fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[test]
    fn text_lines_keep_stream_order() {
        let e = decode(
            "1-0",
            &[
                ("event", "completed"),
                ("jobId", "7"),
                ("returnvalue", r#"{"ok":true}"#),
                ("prev", "active"),
            ],
        );
        assert_eq!(
            text_line(&e),
            r#"1-0 completed jobId=7 returnvalue={"ok":true} prev=active"#
        );
        assert_eq!(
            text_line(&decode("2-0", &[("event", "drained")])),
            "2-0 drained"
        );
    }

    #[test]
    fn json_lines_have_event_id_and_typed_fields() {
        let completed = decode(
            "1-0",
            &[
                ("event", "completed"),
                ("jobId", "7"),
                ("returnvalue", r#"{"ok":true}"#),
                ("prev", "active"),
            ],
        );
        assert_eq!(
            json_line(&completed),
            json!({"event": "completed", "id": "1-0", "jobId": "7",
                   "returnvalue": {"ok": true}, "prev": "active"})
        );
        let delayed = decode(
            "2-0",
            &[
                ("event", "delayed"),
                ("jobId", "8"),
                ("delay", "1700000000000"),
            ],
        );
        assert_eq!(
            json_line(&delayed),
            json!({"event": "delayed", "id": "2-0", "jobId": "8", "delay": 1_700_000_000_000u64})
        );
        let custom = decode(
            "3-0",
            &[("event", "example"), ("custom", "value"), ("id", "mine")],
        );
        assert_eq!(
            json_line(&custom),
            json!({"event": "example", "id": "3-0", "custom": "value"})
        );
    }
}
