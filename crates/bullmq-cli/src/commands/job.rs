//! `bullmq job <queue> <id>`: everything about one job — data, options, return value, failure
//! reason, stack trace, progress, logs, parent and children, state and timestamps in local time.

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use ractor_bullmq::Dependencies;
use ractor_bullmq::Job;
use serde_json::{json, Map, Value};

use super::Context;
use crate::exit::Exit;
use crate::output::{print_json, two_columns, Paint};
use crate::time_text::{format_duration_ms, local_time_and_relative, now_ms};

/// Arguments of `bullmq job`.
#[derive(Debug, Clone, Args)]
pub(crate) struct JobArgs {
    /// Queue name.
    queue: String,
    /// Job id.
    id: String,
}

/// Everything `job` shows, read before anything is printed.
#[derive(Debug, Clone)]
struct JobReport {
    job: Job,
    qualified_key: String,
    state: JobState,
    logs: Vec<String>,
    log_count: u64,
    dependencies: Dependencies,
}

/// Runs `bullmq job`.
pub(crate) async fn run(ctx: &Context, args: JobArgs) -> Result<()> {
    // Reading must not create anything, so the queue's `meta` is left alone.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let id = args.id.as_str();
    let Some(job) = queue
        .get_job(id)
        .await
        .with_context(|| format!("reading job {id:?}"))?
    else {
        queue.close().await?;
        return Err(Exit::not_found(format!(
            "no job {id:?} in queue {:?} (prefix {:?})",
            args.queue, ctx.prefix
        )));
    };
    let state = queue
        .get_job_state(id)
        .await
        .context("reading the job's state")?;
    let logs = queue
        .get_job_logs(id, 0, -1, true)
        .await
        .context("reading the job's logs")?;
    let dependencies = queue
        .get_dependencies(id)
        .await
        .context("reading the job's children")?;
    let report = JobReport {
        qualified_key: queue.keys().job(id),
        job,
        state,
        logs: logs.logs,
        log_count: logs.count,
        dependencies,
    };
    queue.close().await?;
    if ctx.json {
        print_json(&as_json(&report));
    } else {
        print!("{}", as_text(&report, now_ms(), Paint::stdout()));
    }
    Ok(())
}

/// A job in the shape of Node's `Job` fields (camelCase names, `null` for what is unset), the
/// JSON `job` and `jobs` print.
pub(crate) fn job_json(job: &Job) -> Value {
    let record = job.record();
    json!({
        "id": job.id(),
        "name": job.name(),
        "data": job.data_value(),
        "opts": serde_json::to_value(job.opts()).unwrap_or(Value::Null),
        "timestamp": job.timestamp(),
        "delay": record.delay,
        "priority": job.priority(),
        "progress": job.progress(),
        "attemptsMade": job.attempts_made(),
        "attemptsStarted": job.attempts_started(),
        "stalledCounter": job.stalled_counter(),
        "processedOn": job.processed_on(),
        "finishedOn": job.finished_on(),
        "returnvalue": job.returnvalue(),
        "failedReason": job.failed_reason(),
        "stacktrace": job.stacktrace(),
        "processedBy": job.processed_by(),
        "parentKey": job.parent_key(),
        "parent": job.parent(),
        "repeatJobKey": job.repeat_job_key(),
        "deduplicationId": job.deduplication_id(),
    })
}

/// `finished / allowed` attempts, e.g. `1/3` (Node's `attempts: 0` or none means one try).
pub(crate) fn attempts_text(job: &Job) -> String {
    format!("{}/{}", job.attempts_made(), job.opts().max_attempts())
}

fn as_json(report: &JobReport) -> Value {
    let mut value = job_json(&report.job);
    let deps = &report.dependencies;
    let processed: Map<String, Value> = deps
        .processed
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Value::Object(fields) = &mut value {
        fields.insert("key".into(), json!(report.qualified_key));
        fields.insert("state".into(), json!(report.state.as_str()));
        fields.insert("logs".into(), json!(report.logs));
        fields.insert("logCount".into(), json!(report.log_count));
        fields.insert(
            "dependencies".into(),
            json!({
                "processed": processed,
                "unprocessed": deps.unprocessed,
                "ignored": deps.ignored,
                "failed": deps.failed,
            }),
        );
    }
    value
}

/// The state, coloured by outcome.
pub(crate) fn state_text(state: JobState, paint: Paint) -> String {
    match state {
        JobState::Failed => paint.red(state.as_str()),
        JobState::Completed => paint.green(state.as_str()),
        JobState::Delayed | JobState::Paused => paint.yellow(state.as_str()),
        other => other.as_str().to_owned(),
    }
}

/// `value` as indented pretty JSON lines (a string is shown as is, without quotes).
fn indented_json(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    };
    indented(&text)
}

/// Every line of `text` indented by two spaces.
fn indented(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

fn as_text(report: &JobReport, now: u64, paint: Paint) -> String {
    let job = &report.job;
    let at =
        |ms: Option<u64>| ms.map_or_else(|| "-".to_owned(), |ms| local_time_and_relative(ms, now));
    let mut rows: Vec<(String, String)> = vec![
        ("job".into(), report.qualified_key.clone()),
        ("name".into(), job.name().to_owned()),
        ("state".into(), state_text(report.state, paint)),
        (
            "attempts".into(),
            format!(
                "{} made of {} allowed ({} started, {} stalled)",
                job.attempts_made(),
                job.opts().max_attempts(),
                job.attempts_started(),
                job.stalled_counter()
            ),
        ),
        ("created".into(), at(Some(job.timestamp()))),
        ("processed".into(), at(job.processed_on())),
        ("finished".into(), at(job.finished_on())),
    ];
    let delay = job.record().delay;
    if delay > 0 {
        rows.push((
            "delay".into(),
            format!(
                "{} (due {})",
                format_duration_ms(delay),
                local_time_and_relative(job.timestamp().saturating_add(delay), now)
            ),
        ));
    }
    if job.priority() > 0 {
        rows.push(("priority".into(), job.priority().to_string()));
    }
    rows.push(("progress".into(), job.progress().to_string()));
    if let Some(worker) = job.processed_by() {
        rows.push(("processed by".into(), worker.to_owned()));
    }
    if let Some(reason) = job.failed_reason() {
        rows.push(("failed reason".into(), paint.red(reason)));
    }
    if let Some(parent) = job.parent() {
        rows.push((
            "parent".into(),
            format!("{}:{}", parent.queue_key, parent.id),
        ));
    } else if let Some(key) = job.parent_key() {
        rows.push(("parent".into(), key.to_owned()));
    }
    if let Some(key) = job.repeat_job_key() {
        rows.push(("job scheduler".into(), key.to_owned()));
    }
    if let Some(id) = job.deduplication_id() {
        rows.push(("deduplication id".into(), id.to_owned()));
    }
    let mut out = two_columns(&rows);
    let mut section = |title: &str, body: String| {
        out.push('\n');
        out.push_str(&paint.bold(title));
        out.push('\n');
        out.push_str(&body);
    };
    section("data", indented_json(job.data_value()));
    section(
        "options",
        indented_json(&serde_json::to_value(job.opts()).unwrap_or(Value::Null)),
    );
    if let Some(value) = job.returnvalue() {
        section("return value", indented_json(value));
    }
    if !job.stacktrace().is_empty() {
        // One entry per failed attempt (oldest first, as many as `stackTraceLimit` keeps),
        // a blank line between them.
        let traces: Vec<String> = job.stacktrace().iter().map(|t| indented(t)).collect();
        let title = match traces.len() {
            1 => "stack trace".to_owned(),
            n => format!("stack traces ({n}, oldest first)"),
        };
        section(&title, traces.join("\n"));
    }
    if report.log_count > 0 {
        section(
            &format!("logs ({})", report.log_count),
            report.logs.iter().map(|l| indented(l)).collect(),
        );
    }
    let deps = &report.dependencies;
    let mut children: Vec<Vec<String>> = Vec::new();
    children.extend(
        deps.processed
            .iter()
            .map(|(key, value)| vec![paint.green("processed"), key.clone(), value.to_string()]),
    );
    children.extend(
        deps.unprocessed
            .iter()
            .map(|key| vec!["pending".to_owned(), key.clone(), String::new()]),
    );
    children.extend(
        deps.ignored
            .iter()
            .map(|(key, reason)| vec![paint.yellow("ignored"), key.clone(), reason.clone()]),
    );
    children.extend(
        deps.failed
            .iter()
            .map(|key| vec![paint.red("failed"), key.clone(), String::new()]),
    );
    if !children.is_empty() {
        let body = crate::output::table(&["OUTCOME", "CHILD", "VALUE / REASON"], &children);
        section(&format!("children ({})", children.len()), indented(&body));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    fn failed_job() -> Job {
        let fields: HashMap<String, String> = [
            ("name", "welcome"),
            ("data", r#"{"to":"a@b.c"}"#),
            ("opts", r#"{"attempts":3}"#),
            ("timestamp", "1800000000000"),
            ("processedOn", "1800000001000"),
            ("finishedOn", "1800000002000"),
            ("atm", "3"),
            ("ats", "3"),
            ("failedReason", "boom"),
            ("stacktrace", r#"["Error: boom\n    at f (x.js:1:1)"]"#),
            ("pb", "w-1"),
            ("progress", "50"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        Job::decode("mail", "7", &fields).unwrap()
    }

    fn report() -> JobReport {
        let mut dependencies = Dependencies::default();
        dependencies
            .processed
            .insert("bull:kids:1".into(), serde_json::json!({"ok": true}));
        dependencies.unprocessed.push("bull:kids:2".into());
        dependencies.ignored = BTreeMap::from([("bull:kids:3".into(), "nope".into())]);
        JobReport {
            job: failed_job(),
            qualified_key: "bull:mail:7".into(),
            state: JobState::Failed,
            logs: vec!["first".into(), "second".into()],
            log_count: 2,
            dependencies,
        }
    }

    #[test]
    fn text_shows_every_part_of_the_job() {
        let text = as_text(&report(), 1_800_000_003_000, Paint::forced(false));
        for expected in [
            "job            bull:mail:7\n",
            "state          failed\n",
            "attempts       3 made of 3 allowed (3 started, 0 stalled)\n",
            "(3s ago)\n",
            "progress       50\n",
            "processed by   w-1\n",
            "failed reason  boom\n",
            "\ndata\n  {\n    \"to\": \"a@b.c\"\n  }\n",
            "\nstack trace\n  Error: boom\n      at f (x.js:1:1)\n",
            "\nlogs (2)\n  first\n  second\n",
            "\nchildren (3)\n",
            "processed  bull:kids:1  {\"ok\":true}",
            "pending    bull:kids:2",
            "ignored    bull:kids:3  nope",
        ] {
            assert!(text.contains(expected), "{expected:?} missing in:\n{text}");
        }
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn json_has_nodes_field_names_and_the_extras() {
        let value = as_json(&report());
        assert_eq!(value["id"], "7");
        assert_eq!(value["state"], "failed");
        assert_eq!(value["failedReason"], "boom");
        assert_eq!(value["attemptsMade"], 3);
        assert_eq!(value["opts"]["attempts"], 3);
        assert_eq!(value["stacktrace"][0], "Error: boom\n    at f (x.js:1:1)");
        assert_eq!(value["logs"], json!(["first", "second"]));
        assert_eq!(value["logCount"], 2);
        assert_eq!(
            value["dependencies"]["processed"]["bull:kids:1"],
            json!({"ok": true})
        );
        assert_eq!(value["dependencies"]["unprocessed"][0], "bull:kids:2");
        assert_eq!(value["returnvalue"], Value::Null);
    }
}
