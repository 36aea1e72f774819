//! `bullmq events <queue> [--follow | --no-follow] [--from ID] [--count N] [--json]`: a
//! queue's events, one line per event.
//!
//! `--follow` (the default) tails the stream with a `QueueEvents` (its own `XREAD BLOCK`
//! connection on Redis, its own LISTEN session on PostgreSQL, named as Node names its
//! QueueEvents connections), from `$` (events from now on) or from `--from ID` (`0` replays the
//! whole stream first), until Ctrl-C or until `--count` events were printed. `--no-follow`
//! replays what the stream holds when the command starts (from `--from`, default `0`) and
//! exits at its end; `--count N` then stops after N replayed events, or at the end of a shorter
//! stream. Ids are Redis stream ids (`1700000000000-0`) on Redis, the event table's ids (`17`)
//! on PostgreSQL.

use ractor_bullmq::protocol::QueueId;
use std::io::Write;
use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_backend::{Backend, BackendError};
use bullmq_protocol::events::{Event, StreamEvent};
use bullmq_protocol::keys::QueueKeys;
use clap::Args;
use ractor_bullmq::events::ConnectionEvent;
use ractor_bullmq::QueueEventsHandle;
use serde_json::{Map, Value};

use super::Context;

/// Arguments of `bullmq events`.
#[derive(Debug, Clone, Args)]
pub(crate) struct EventsArgs {
    /// Queue name.
    queue: String,
    /// Keep reading new events as they come, until Ctrl-C or `--count` (the default).
    #[arg(long, overrides_with = "no_follow")]
    follow: bool,
    /// Replay the events the stream holds now and exit at its end (`--count` caps the replay).
    #[arg(long, overrides_with = "follow")]
    no_follow: bool,
    /// Where to start: `$` (only new events), `0` (the whole stream) or a stream id (what
    /// follows it). Default: `$` when following, `0` with `--no-follow`.
    #[arg(long, value_name = "ID")]
    from: Option<String>,
    /// Stop after printing this many events (with `--no-follow`, also at the end of the
    /// stream, whichever comes first).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// How long one blocking read waits before it is issued again, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    block_ms: u64,
}

/// Runs `bullmq events`.
pub(crate) async fn run(ctx: &Context, args: EventsArgs) -> Result<()> {
    let target = ctx.target()?;
    super::ensure_queue_exists(ctx, &args.queue).await?;
    let backend = ctx.backend().await?;
    let where_ = target.describe();
    if args.no_follow {
        return replay(ctx, &args, backend.as_ref(), &where_).await;
    }
    let options = super::queue_events_options(&target, &backend, &args.queue, &ctx.prefix)
        .last_event_id(args.from.clone().unwrap_or_else(|| "$".to_owned()))
        .block_timeout(Duration::from_millis(args.block_ms.max(1)))
        // A terminal or a pipe may be slow; never drop this only subscriber for it.
        .subscriber_buffer(100_000)
        .autorun(false);
    // One line per outage on stderr (the reader retries with backoff underneath).
    let reported = ractor_bullmq::QueueEventsArgs::new(options)
        .context("invalid options")?
        .on_connection({
            let where_ = where_.clone();
            move |change| match change {
                ConnectionEvent::Lost { error } => {
                    eprintln!("warning: lost the connection to {where_} ({error}); retrying");
                }
                ConnectionEvent::Restored { downtime } => {
                    eprintln!(
                        "warning: reconnected to {where_} after {:.1} s",
                        downtime.as_secs_f64()
                    );
                }
                _ => {}
            }
        });
    let events = QueueEventsHandle::spawn(reported).await.with_context(|| {
        format!(
            "cannot read the events of queue {:?} on {where_}",
            args.queue
        )
    })?;
    // Subscribe before reading starts, so a replay is seen from its first event.
    let mut rx = events.subscribe_stream();
    events.run().await.context("cannot start reading events")?;

    let outcome = print_events(ctx.json, args.count, &mut rx).await;
    events.close().await;
    outcome
}

/// Events read per call while replaying.
const REPLAY_BATCH: u64 = 1_000;

/// `--no-follow`: prints the entries after `--from` up to the newest one when the command
/// started (reads that do not wait for new entries, through the seam's event stream), at most
/// `--count`, then returns.
async fn replay(
    ctx: &Context,
    args: &EventsArgs,
    backend: &dyn Backend,
    where_: &str,
) -> Result<()> {
    let keys = QueueKeys::new(ctx.prefix.clone(), args.queue.clone());
    let stream = backend
        .event_stream(&QueueId::from(&keys))
        .await
        .with_context(|| {
            format!(
                "cannot read the events of queue {:?} on {where_}",
                args.queue
            )
        })?;
    let outcome = async {
        // The end is fixed now: events appended while replaying belong to a follow.
        let Some(end) = stream.newest_id().await? else {
            return Ok(());
        };
        let mut position = match args.from.as_deref() {
            None | Some("0") => "0-0".to_owned(),
            // "From now on" with nothing to follow: nothing to replay.
            Some("$") => return Ok(()),
            Some(id) => id.to_owned(),
        };
        let mut printed = 0u64;
        loop {
            let batch = REPLAY_BATCH.min(args.count.map_or(u64::MAX, |n| n - printed));
            if batch == 0 {
                return Ok(());
            }
            let entries = stream.read(&position, Duration::ZERO, batch).await?;
            let Some(last) = entries.last().map(|entry| entry.id.clone()) else {
                return Ok(()); // the stream was trimmed below `end` meanwhile
            };
            for entry in entries {
                let past_end = stream_id_after(&entry.id, &end);
                if past_end {
                    return Ok(());
                }
                let event = StreamEvent::decode(entry.id, entry.fields);
                if !print_line(ctx.json, &event) {
                    return Ok(());
                }
                printed += 1;
            }
            if last == end || !stream_id_after(&end, &last) {
                return Ok(());
            }
            position = last;
        }
    }
    .await;
    stream.close().await;
    outcome.map_err(|error: BackendError| {
        anyhow::Error::new(error)
            .context(format!("cannot read the events of queue {:?}", args.queue))
    })
}

/// Whether stream id `a` comes after `b` (`ms-seq`, compared numerically).
fn stream_id_after(a: &str, b: &str) -> bool {
    let parse = |id: &str| {
        let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
        (
            ms.parse::<u64>().unwrap_or(0),
            seq.parse::<u64>().unwrap_or(0),
        )
    };
    parse(a) > parse(b)
}

/// Prints one event line; false when stdout is closed (e.g. `| head`), a normal way to stop.
fn print_line(json: bool, event: &StreamEvent) -> bool {
    let line = if json {
        json_line(event).to_string()
    } else {
        text_line(event)
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .is_ok()
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
        if !print_line(json, &event) {
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
    fn stream_ids_compare_numerically() {
        assert!(stream_id_after("10-0", "9-5"));
        assert!(stream_id_after("9-10", "9-9"));
        assert!(!stream_id_after("9-9", "9-9"));
        assert!(!stream_id_after("9-1", "10-0"));
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
