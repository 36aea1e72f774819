//! `bullmq schedulers <queue>`: the job schedulers of a queue, soonest next run first, each
//! with its next run: the time and the id of the job waiting for it (`repeat:{id}:{ms}`, as
//! Node names it) and that job's state.

use anyhow::{Context as _, Result};
use bullmq_protocol::scheduler::iteration_job_id;
use bullmq_protocol::state::JobState;
use clap::Args;
use ractor_bullmq::scheduler::JobSchedulerRecord;
use ractor_bullmq::Queue;
use serde_json::Value;

use super::Context;
use crate::output::{print_json, table};
use crate::time_text::{format_duration_ms, local_time, local_time_and_relative, now_ms};

/// Arguments of `bullmq schedulers`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SchedulersArgs {
    /// Queue name.
    queue: String,
}

/// Column headers of the table, in order.
const HEADERS: [&str; 8] = [
    "ID",
    "SCHEDULE",
    "TZ",
    "NEXT RUN",
    "ITERATIONS",
    "LIMIT",
    "END",
    "NEXT JOB",
];

/// The job of a scheduler's next run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NextJob {
    /// `repeat:{scheduler}:{next ms}`.
    id: String,
    /// Where it is (`unknown`: no such job, e.g. a worker took and removed it meanwhile).
    state: JobState,
}

/// Runs `bullmq schedulers`.
pub(crate) async fn run(ctx: &Context, args: SchedulersArgs) -> Result<()> {
    // Reading must not create anything, so the queue's `meta` is left alone.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let mut schedulers = queue
        .get_job_schedulers(ractor_bullmq::JobSchedulersRange::new().asc(true))
        .await
        .with_context(|| format!("reading the job schedulers of queue {:?}", args.queue))?;
    sort_soonest_first(&mut schedulers);
    let next_jobs = next_jobs(&queue, &schedulers).await;
    queue.close().await?;
    let next_jobs = next_jobs?;
    if ctx.json {
        print_json(&as_json(&schedulers, &next_jobs)?);
    } else if schedulers.is_empty() {
        println!("no job schedulers on queue {}", args.queue);
    } else {
        print!("{}", as_text(&schedulers, &next_jobs, now_ms()));
    }
    Ok(())
}

/// The job of each scheduler's next run, with its state.
async fn next_jobs(
    queue: &Queue,
    schedulers: &[JobSchedulerRecord],
) -> Result<Vec<Option<NextJob>>> {
    let mut jobs = Vec::with_capacity(schedulers.len());
    for record in schedulers {
        let Some(next) = record.next else {
            jobs.push(None);
            continue;
        };
        let id = iteration_job_id(&record.key, next);
        let state = queue
            .get_job_state(&id)
            .await
            .with_context(|| format!("reading the state of job {id:?}"))?;
        jobs.push(Some(NextJob { id, state }));
    }
    Ok(jobs)
}

/// Node's record shape, each with `nextJobId` and `nextJobState` added.
fn as_json(schedulers: &[JobSchedulerRecord], next_jobs: &[Option<NextJob>]) -> Result<Value> {
    let mut out = Vec::with_capacity(schedulers.len());
    for (record, next) in schedulers.iter().zip(next_jobs) {
        let mut value = serde_json::to_value(record)?;
        if let (Value::Object(map), Some(next)) = (&mut value, next) {
            map.insert("nextJobId".into(), Value::from(next.id.clone()));
            map.insert("nextJobState".into(), Value::from(next.state.as_str()));
        }
        out.push(value);
    }
    Ok(Value::Array(out))
}

/// Orders by next run, a scheduler without one last; ties by id. The `repeat` zset is read in
/// this order already, but a scheduler whose score is unreadable must not jump the queue.
fn sort_soonest_first(schedulers: &mut [JobSchedulerRecord]) {
    schedulers.sort_by(|a, b| {
        (a.next.is_none(), a.next, &a.key).cmp(&(b.next.is_none(), b.next, &b.key))
    });
}

/// How a scheduler runs: `every 5s`, `every 500ms (+100ms offset)`, or its cron pattern.
pub(crate) fn describe_schedule(record: &JobSchedulerRecord) -> String {
    match (&record.pattern, record.every) {
        (Some(pattern), _) => pattern.clone(),
        (None, Some(every)) => match record.offset.filter(|offset| *offset > 0) {
            Some(offset) => format!(
                "every {} (+{} offset)",
                format_duration_ms(every),
                format_duration_ms(offset)
            ),
            None => format!("every {}", format_duration_ms(every)),
        },
        (None, None) => "-".to_owned(),
    }
}

/// The aligned table, one scheduler a row.
fn as_text(schedulers: &[JobSchedulerRecord], next_jobs: &[Option<NextJob>], now: u64) -> String {
    let dash = || "-".to_owned();
    let number = |n: Option<u64>| n.map_or_else(dash, |n| n.to_string());
    let rows: Vec<Vec<String>> = schedulers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            vec![
                s.key.clone(),
                describe_schedule(s),
                s.tz.clone().unwrap_or_else(dash),
                s.next
                    .map_or_else(dash, |next| local_time_and_relative(next, now)),
                number(s.iteration_count),
                number(s.limit),
                s.end_date.map_or_else(dash, local_time),
                next_jobs
                    .get(i)
                    .and_then(Option::as_ref)
                    .map_or_else(dash, |job| format!("{} ({})", job.id, job.state)),
            ]
        })
        .collect();
    table(&HEADERS, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A record from Node's JSON shape (the type is `non_exhaustive`, so built by decoding).
    fn record(id: &str, fields: &[(&str, &str)], next: Option<u64>) -> JobSchedulerRecord {
        let fields = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        JobSchedulerRecord::decode(id, &fields, next)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn schedules_are_described_for_people() {
        let every = record("a", &[("name", "n"), ("every", "5000")], Some(1));
        assert_eq!(describe_schedule(&every), "every 5s");
        let offset = record(
            "b",
            &[("name", "n"), ("every", "500"), ("offset", "100")],
            Some(1),
        );
        assert_eq!(describe_schedule(&offset), "every 500ms (+100ms offset)");
        let no_offset = record(
            "c",
            &[("name", "n"), ("every", "90000"), ("offset", "0")],
            None,
        );
        assert_eq!(describe_schedule(&no_offset), "every 1m30s");
        let cron = record(
            "d",
            &[
                ("name", "n"),
                ("pattern", "0 9 * * 1-5"),
                ("tz", "Europe/Berlin"),
            ],
            None,
        );
        assert_eq!(describe_schedule(&cron), "0 9 * * 1-5");
    }

    #[test]
    fn the_table_lists_soonest_first_with_dashes_for_blanks() {
        let now = 1_800_000_000_000;
        let mut schedulers = vec![
            record("none", &[("name", "n"), ("every", "1000")], None),
            record(
                "later",
                &[
                    ("name", "n"),
                    ("pattern", "0 * * * *"),
                    ("tz", "UTC"),
                    ("ic", "3"),
                    ("limit", "10"),
                ],
                Some(now + 192_000),
            ),
            record(
                "sooner",
                &[("name", "n"), ("every", "5000"), ("ic", "1")],
                Some(now - 2_000),
            ),
        ];
        sort_soonest_first(&mut schedulers);
        let keys: Vec<&str> = schedulers.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["sooner", "later", "none"]);
        let next_jobs = vec![
            Some(NextJob {
                id: format!("repeat:sooner:{}", now - 2_000),
                state: JobState::Waiting,
            }),
            None,
            None,
        ];
        let text = as_text(&schedulers, &next_jobs, now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("ID      SCHEDULE   TZ   NEXT RUN"),
            "{text}"
        );
        assert!(lines[1].starts_with("sooner  every 5s   -    "), "{text}");
        assert!(lines[1].contains("(2s ago)"), "{text}");
        assert!(lines[2].starts_with("later   0 * * * *  UTC  "), "{text}");
        assert!(
            lines[2].contains("(in 3m 12s)  3           10     -"),
            "{text}"
        );
        assert!(lines[3].starts_with("none    every 1s   -    -"), "{text}");
        assert!(
            lines[1].ends_with(&format!("repeat:sooner:{} (waiting)", now - 2_000)),
            "{text}"
        );
        assert!(lines[2].ends_with(" -"), "{text}");
        // Every column starts where its header does.
        let at = lines[0].find("ITERATIONS").unwrap();
        assert_eq!(&lines[2][at..at + 1], "3", "{text}");
    }

    #[test]
    fn json_is_nodes_record_shape() {
        let schedulers = vec![record(
            "r",
            &[
                ("name", "n"),
                ("every", "500"),
                ("offset", "100"),
                ("ic", "2"),
            ],
            Some(7),
        )];
        assert_eq!(
            serde_json::to_value(&schedulers).unwrap(),
            json!([{"key": "r", "name": "n", "next": 7, "iterationCount": 2, "every": 500, "offset": 100}])
        );
        let next = [Some(NextJob {
            id: "repeat:r:7".into(),
            state: JobState::Delayed,
        })];
        let listed = as_json(&schedulers, &next).unwrap();
        assert_eq!(listed[0]["nextJobId"], "repeat:r:7");
        assert_eq!(listed[0]["nextJobState"], "delayed");
        assert_eq!(listed[0]["every"], 500);
    }
}
