//! `bullmq top` when stdout is no terminal (a pipe, a file, `--json`, `--plain`): one table
//! (or one JSON line) per refresh, for logs and scripts.

use serde_json::{json, Map, Value};

use super::model::{Model, QueueView, STATES};
use crate::output::{table, Paint};
use crate::time_text::local_time;

/// The text of one refresh: a heading line, then one row per queue.
pub(crate) fn as_text(model: &Model, paint: Paint) -> String {
    let mut out = format!(
        "{}\n",
        paint.bold(&format!(
            "bullmq top  prefix {}  {}  {} queue{}{}",
            model.prefix,
            local_time(model.refreshed_at_ms),
            model.queues.len(),
            if model.queues.len() == 1 { "" } else { "s" },
            model
                .server
                .as_ref()
                .map_or_else(String::new, |server| format!("  {}", server.summary()))
        ))
    );
    if model.queues.is_empty() {
        out.push_str(&format!("no queues under prefix {:?}\n", model.prefix));
        return out;
    }
    let mut headers: Vec<&str> = vec!["QUEUE"];
    headers.extend(STATES.iter().map(|state| state.as_str()));
    headers.extend(["paused", "workers", "completed/s", "failed/s"]);
    let upper: Vec<String> = headers.iter().map(|h| h.to_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = model.queues.iter().map(row).collect();
    // Padding is computed on the plain cells; colour is added to whole lines afterwards so
    // escape codes never count as width.
    for (i, line) in table(&upper, &rows).lines().enumerate() {
        let line = match i.checked_sub(1).and_then(|row| model.queues.get(row)) {
            Some(view) if view.sample.paused => paint.yellow(line),
            Some(view) if view.sample.counts.failed > 0 => paint.red(line),
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn row(view: &QueueView) -> Vec<String> {
    let sample = &view.sample;
    let mut cells = vec![sample.name.clone()];
    cells.extend(
        STATES
            .iter()
            .map(|state| sample.counts.get(*state).to_string()),
    );
    cells.push(if sample.paused { "yes" } else { "no" }.into());
    cells.push(sample.workers.to_string());
    cells.push(rate_text(view.completed_rate));
    cells.push(rate_text(view.failed_rate));
    cells
}

/// A per-second rate with one decimal, `-` before there are two samples.
pub(crate) fn rate_text(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".into(), |r| format!("{r:.1}"))
}

/// The JSON document of one refresh (printed on one line: JSON lines).
pub(crate) fn as_json(model: &Model) -> Value {
    let queues: Vec<Value> = model
        .queues
        .iter()
        .map(|view| {
            let sample = &view.sample;
            let counts: Map<String, Value> = STATES
                .iter()
                .map(|state| (state.as_str().to_owned(), json!(sample.counts.get(*state))))
                .collect();
            json!({
                "queue": sample.name,
                "counts": counts,
                "paused": sample.paused,
                "workers": sample.workers,
                "completedPerSec": view.completed_rate,
                "failedPerSec": view.failed_rate,
            })
        })
        .collect();
    json!({
        "at": model.refreshed_at_ms,
        "prefix": model.prefix,
        "server": model.server,
        "queues": queues,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::commands::top::model::tests::sample;

    #[test]
    fn one_row_per_queue_with_every_count() {
        let mut model = Model::new("bull", Duration::from_secs(1));
        let mut paused = sample("emails", 4, 2);
        paused.paused = true;
        paused.counts.waiting = 7;
        paused.workers = 3;
        model.apply(vec![paused, sample("resize", 1, 0)], Duration::ZERO, 0);
        let text = without_colour(&as_text(&model, Paint::stdout()));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("prefix bull"), "{text}");
        assert!(lines[0].ends_with("2 queues"), "{text}");
        assert!(lines[1].starts_with("QUEUE   WAITING  ACTIVE"), "{text}");
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            cells,
            ["emails", "7", "0", "0", "0", "4", "2", "0", "yes", "3", "-", "-"]
        );
        assert!(lines[3].starts_with("resize "), "{text}");

        let value = as_json(&model);
        assert_eq!(value["prefix"], "bull");
        assert_eq!(value["queues"][0]["counts"]["waiting"], 7);
        assert_eq!(value["queues"][0]["counts"]["waiting-children"], 0);
        assert_eq!(value["queues"][0]["paused"], true);
        assert_eq!(value["queues"][1]["completedPerSec"], Value::Null);
    }

    /// `text` without ANSI colour codes (the test's stdout may be a terminal).
    fn without_colour(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                chars.by_ref().find(|c| *c == 'm');
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn no_queues_is_said() {
        let model = Model::new("empty", Duration::from_secs(1));
        assert!(as_text(&model, Paint::stdout()).contains("no queues under prefix \"empty\""));
    }
}
