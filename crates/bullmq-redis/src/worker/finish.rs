//! Finishing a batch of jobs (and fetching the next ones): `worker_finish_batch.lua`.

use std::time::Duration;

use fred::prelude::{Client, Value};
use serde::Serialize;

use bullmq_backend::Receipt;

use super::fetch::{parse_fetched, wire, FetchRequest, WireFetch};
use super::reply::{array, integer, string, unexpected};
use super::scripts::FINISH_BATCH;
use super::WorkerKeys;
use crate::error::Result;

pub use bullmq_backend::{Finish, FinishAction, FinishCode, FinishReply, Retention};

/// What the worker read about a job when it fetched it. Each known fact spares the finish
/// script a read; unknown facts (the default) are read from Redis as usual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct JobFacts {
    /// The job's `atm` (attempts made) when it was fetched.
    pub attempts_made: Option<u32>,
    /// Whether the job has a parent (`parentKey` / `parent` in its hash).
    pub has_parent: Option<bool>,
    /// Whether the job has a deduplication id (`deid` in its hash). `Some(false)` spares the
    /// finish script reading `deid` when the job completes or fails.
    pub has_deduplication: Option<bool>,
}

impl JobFacts {
    /// Facts read from the job's hash at fetch time.
    pub fn new(attempts_made: u32, has_parent: bool) -> Self {
        Self {
            attempts_made: Some(attempts_made),
            has_parent: Some(has_parent),
            has_deduplication: None,
        }
    }

    /// Packs the facts into the receipt a worker hands back with the job's finish.
    ///
    /// Bits: 63 facts known, 62 has a parent, 61 deduplication known, 60 has a deduplication
    /// id, 0–31 attempts made.
    pub fn receipt(self) -> Receipt {
        let Some(made) = self.attempts_made else {
            return Receipt::NONE;
        };
        let mut bits = 1 << 63 | u64::from(made);
        if self.has_parent != Some(false) {
            bits |= 1 << 62;
        }
        if let Some(dedup) = self.has_deduplication {
            bits |= 1 << 61 | u64::from(dedup) << 60;
        }
        Receipt(bits)
    }

    /// The facts packed by [`JobFacts::receipt`] (none for [`Receipt::NONE`]).
    pub fn from_receipt(receipt: Receipt) -> Self {
        let bits = receipt.0;
        if bits & 1 << 63 == 0 {
            return Self::default();
        }
        Self {
            attempts_made: Some((bits & u64::from(u32::MAX)) as u32),
            has_parent: Some(bits & 1 << 62 != 0),
            has_deduplication: (bits & 1 << 61 != 0).then_some(bits & 1 << 60 != 0),
        }
    }

    /// Adds whether the job's hash has a `deid` (read at fetch time).
    #[must_use]
    pub fn with_deduplication(mut self, has_deduplication: bool) -> Self {
        self.has_deduplication = Some(has_deduplication);
        self
    }
}

/// The JSON header of the finish script (`ARGV[2]`); the items follow as flat arguments.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireFinish<'a> {
    now: u64,
    metrics_max: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    fetch: Option<WireFetch<'a>>,
}

/// Arguments per item at most (`id, token, spec, value, stacktrace`).
const ITEM_ARGS: usize = 5;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `value` as text, empty when absent.
fn text(value: Option<impl std::fmt::Display>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// One finish as the script reads it (see [`push_item`]).
struct WireItem<'a> {
    kind: &'static str,
    flags: String,
    value: Option<&'a str>,
    stacktrace: Option<&'a str>,
    /// Attempts made after this one, when the worker knows them.
    atm: Option<u32>,
    /// `attempts` (failed), delay ms (delay) or ttl ms (limit).
    number: Option<u64>,
    keep: Option<Retention>,
}

impl<'a> WireItem<'a> {
    fn new(kind: &'static str, value: Option<&'a str>, stacktrace: Option<&'a str>) -> Self {
        Self {
            kind,
            flags: String::new(),
            value,
            stacktrace,
            atm: None,
            number: None,
            keep: None,
        }
    }
}

fn wire_item(finish: &Finish) -> WireItem<'_> {
    let facts = JobFacts::from_receipt(finish.receipt);
    let next_attempts = facts.attempts_made.map(|made| made.saturating_add(1));
    let mut item = match &finish.action {
        FinishAction::Complete { returnvalue, keep } => WireItem {
            atm: next_attempts,
            keep: Some(*keep),
            ..WireItem::new("completed", Some(returnvalue), None)
        },
        FinishAction::Fail {
            reason,
            stacktrace,
            attempts,
            keep,
        } => WireItem {
            atm: next_attempts,
            number: Some(u64::from(*attempts)),
            keep: Some(*keep),
            ..WireItem::new("failed", Some(reason), stacktrace.as_deref())
        },
        FinishAction::Retry {
            reason,
            stacktrace,
            lifo,
        } => {
            let mut item = WireItem {
                atm: next_attempts,
                ..WireItem::new("retry", Some(reason), stacktrace.as_deref())
            };
            if *lifo {
                item.flags.push('l');
            }
            item
        }
        FinishAction::Delay {
            delay,
            reason,
            stacktrace,
            skip_attempt,
        } => {
            let mut item = WireItem {
                number: Some(millis(*delay)),
                atm: next_attempts.filter(|_| !*skip_attempt),
                ..WireItem::new("delay", reason.as_deref(), stacktrace.as_deref())
            };
            if *skip_attempt {
                item.flags.push('k');
            }
            item
        }
        FinishAction::RateLimit { ttl } => WireItem {
            number: Some(millis(*ttl)),
            ..WireItem::new("limit", None, None)
        },
    };
    if facts.has_parent == Some(false) {
        item.flags.push('n');
    }
    if facts.has_deduplication == Some(false) {
        item.flags.push('e');
    }
    if item.value.is_some() {
        item.flags.push('v');
    }
    if item.stacktrace.is_some() {
        item.flags.push('s');
    }
    item
}

/// Appends the arguments of one finish: `id, token, spec, value` and, when there is one,
/// `stacktrace`, where spec is `kind|flags|atm|number|keepCount|keepAge|keepLimit` (see
/// `worker_finish_batch.lua`). Items of one batch mostly share their spec, which the script
/// decodes once per distinct text.
fn push_item(args: &mut Vec<Value>, finish: &Finish) {
    let item = wire_item(finish);
    let keep = item.keep.unwrap_or(Retention::KEEP_ALL);
    let spec = format!(
        "{}|{}|{}|{}|{}|{}|{}",
        item.kind,
        item.flags,
        text(item.atm),
        text(item.number),
        text(keep.count),
        text(keep.age.map(|a| a.as_secs())),
        text(keep.limit),
    );
    args.push(Value::from(finish.job_id.as_str()));
    args.push(Value::from(finish.token.as_str()));
    args.push(Value::from(spec));
    args.push(Value::from(item.value.unwrap_or("")));
    if let Some(stacktrace) = item.stacktrace {
        args.push(Value::from(stacktrace));
    }
}

/// Finishes `finishes` in one script call and, when `fetch` is given, fetches jobs for the
/// freed slots in the same call, handing out tokens `{token_prefix}:{seq}` from the given
/// sequence number on. `metrics_max_points` > 0 collects Node-compatible
/// `metrics:completed|failed` data points (Node worker option `metrics.maxDataPoints`).
///
/// Each finish is checked against its lock token on its own; a job whose lock was lost is
/// reported in [`FinishReply::codes`] and left untouched.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails; [`crate::RedisError::UnexpectedReply`]
/// when the reply is malformed.
///
/// # Cancel safety
///
/// Not cancel safe: the script may have run when the future is dropped.
pub async fn finish_batch(
    client: &Client,
    keys: &WorkerKeys,
    finishes: &[Finish],
    fetch: Option<(&FetchRequest, u64)>,
    metrics_max_points: u32,
    now_ms: u64,
) -> Result<FinishReply> {
    let script = FINISH_BATCH.name();
    let wire = WireFinish {
        now: now_ms,
        metrics_max: metrics_max_points,
        fetch: fetch.map(|(request, seq)| wire(request, seq, now_ms)),
    };
    let wire = serde_json::to_string(&wire).map_err(|e| unexpected(script, e.to_string()))?;
    let mut args: Vec<Value> = Vec::with_capacity(2 + finishes.len() * ITEM_ARGS);
    args.push(keys.queue().base().into());
    args.push(wire.into());
    for finish in finishes {
        push_item(&mut args, finish);
    }
    let reply: Value = FINISH_BATCH.run(client, keys.script_keys(), args).await?;
    let mut parts = array(script, reply)?.into_iter();
    let (Some(codes), Some(fetched)) = (parts.next(), parts.next()) else {
        return Err(unexpected(script, "finish reply has fewer than 2 parts"));
    };
    let mut corrupted = Vec::new();
    let codes = array(script, codes)?
        .into_iter()
        .enumerate()
        .map(|(i, code)| match code {
            // A string is the reason a corrupted job was failed with instead.
            Value::String(_) | Value::Bytes(_) => {
                corrupted.push((i, string(script, code)?));
                Ok(FinishCode::Corrupted)
            }
            code => integer(script, code).map(FinishCode::from_code),
        })
        .collect::<Result<Vec<_>>>()?;
    if codes.len() != finishes.len() {
        return Err(unexpected(
            script,
            format!("{} codes for {} finishes", codes.len(), finishes.len()),
        ));
    }
    Ok(FinishReply {
        codes,
        fetched: parse_fetched(client, keys, script, fetched, fetch).await?,
        corrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_of(facts: JobFacts) -> String {
        let finish = Finish {
            job_id: "1".into(),
            token: "t".into(),
            action: FinishAction::Complete {
                returnvalue: "null".into(),
                keep: Retention::KEEP_ALL,
            },
            receipt: facts.receipt(),
        };
        let mut args = Vec::new();
        push_item(&mut args, &finish);
        args[2].as_string().unwrap_or_default()
    }

    #[test]
    fn receipts_carry_the_facts_unchanged() {
        for facts in [
            JobFacts::default(),
            JobFacts::new(0, false),
            JobFacts::new(7, true),
            JobFacts::new(u32::MAX, true).with_deduplication(false),
            JobFacts::new(3, false).with_deduplication(true),
        ] {
            assert_eq!(JobFacts::from_receipt(facts.receipt()), facts);
        }
        assert_eq!(JobFacts::from_receipt(Receipt::NONE), JobFacts::default());
    }

    #[test]
    fn a_job_known_to_have_no_deduplication_id_spares_the_deid_read() {
        let known = JobFacts::new(0, false).with_deduplication(false);
        assert_eq!(spec_of(known), "completed|nev|1||||");
    }

    #[test]
    fn a_job_with_a_deduplication_id_or_unknown_facts_has_it_read() {
        let with_id = JobFacts::new(0, false).with_deduplication(true);
        assert_eq!(spec_of(with_id), "completed|nv|1||||");
        assert_eq!(spec_of(JobFacts::new(0, false)), "completed|nv|1||||");
        assert_eq!(spec_of(JobFacts::default()), "completed|v|||||");
    }
}
