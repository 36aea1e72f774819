//! Checks run before a job is written, matching what Node BullMQ 6.7.0 rejects in
//! `Queue.add` and `Job.validateOptions` (same messages), plus one check of our own: the
//! delayed score must stay exact in a Redis double.
//!
//! ```
//! use bullmq_protocol::options::JobOptions;
//! use bullmq_protocol::validation::validate_job;
//! use bullmq_protocol::ValidationError;
//!
//! assert!(validate_job("email", 2, &JobOptions::new().priority(10)).is_ok());
//! let err = validate_job("email", 2, &JobOptions::new().job_id("42")).unwrap_err();
//! assert!(matches!(err, ValidationError::JobIdInteger { .. }));
//! assert_eq!(err.to_string(), "Custom Id cannot be integers");
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::ValidationError;
use crate::options::JobOptions;
use crate::score::{MAX_PRIORITY, MAX_READY_AT_MS};

/// Validates a job about to be added: its `name`, the byte length of its serialised `data`
/// and its options. The ready time of a delayed job is computed from `opts.timestamp`, or the
/// system clock when absent.
///
/// # Errors
///
/// The first [`ValidationError`] found, checked in Node's order.
pub fn validate_job(
    name: &str,
    data_json_len: usize,
    opts: &JobOptions,
) -> Result<(), ValidationError> {
    let now_ms = opts.timestamp.unwrap_or_else(system_now_ms);
    validate_job_at(name, data_json_len, opts, now_ms)
}

/// [`validate_job`] with an explicit creation time (ms since the Unix epoch), for callers that
/// already took the timestamp they will store, and for tests.
///
/// # Errors
///
/// The first [`ValidationError`] found, checked in Node's order.
pub fn validate_job_at(
    name: &str,
    data_json_len: usize,
    opts: &JobOptions,
    timestamp_ms: u64,
) -> Result<(), ValidationError> {
    if let Some(job_id) = opts.job_id.as_deref() {
        validate_job_id(job_id)?;
    }
    if let Some(limit) = opts.size_limit.filter(|limit| *limit > 0) {
        if data_json_len as u64 > limit {
            return Err(ValidationError::SizeLimitExceeded {
                name: name.to_owned(),
                size: data_json_len,
                limit,
            });
        }
    }
    // Node lists the enabled ones in this order in its message.
    let exclusive: Vec<&'static str> = [
        (
            "removeDependencyOnFailure",
            opts.remove_dependency_on_failure,
        ),
        ("failParentOnFailure", opts.fail_parent_on_failure),
        ("continueParentOnFailure", opts.continue_parent_on_failure),
        (
            "ignoreDependencyOnFailure",
            opts.ignore_dependency_on_failure,
        ),
    ]
    .into_iter()
    .filter(|(_, on)| *on == Some(true))
    .map(|(name, _)| name)
    .collect();
    if exclusive.len() > 1 {
        return Err(ValidationError::ExclusiveOptions { options: exclusive });
    }
    if let Some(priority) = opts.priority {
        if priority > MAX_PRIORITY {
            return Err(ValidationError::PriorityOutOfRange { priority });
        }
    }
    if let Some(dedup) = &opts.deduplication {
        if dedup.id.is_empty() {
            return Err(ValidationError::DeduplicationIdMissing);
        }
        if opts.parent.is_some() {
            return Err(ValidationError::DeduplicationWithParent);
        }
    }
    if opts.extra.contains_key("debounce") {
        return Err(ValidationError::DebounceRemoved);
    }
    if let Some(jitter) = opts.backoff.as_ref().and_then(|b| b.jitter) {
        if !(0.0..=1.0).contains(&jitter) {
            return Err(ValidationError::JitterOutOfRange { jitter });
        }
    }
    let delay_ms = opts.delay.unwrap_or(0);
    let ready_at_ms = timestamp_ms.saturating_add(delay_ms);
    if ready_at_ms > MAX_READY_AT_MS {
        return Err(ValidationError::DelayTooLarge {
            delay_ms,
            ready_at_ms,
            max_ready_at_ms: MAX_READY_AT_MS,
        });
    }
    Ok(())
}

/// Node's custom job id rules: not `0` nor `0:…`, not an integer, and `:` only as `a:b:c`.
/// An empty id means "generate one", as in Node.
///
/// # Errors
///
/// [`ValidationError::JobIdZero`], [`ValidationError::JobIdInteger`] or
/// [`ValidationError::JobIdColon`].
pub fn validate_job_id(job_id: &str) -> Result<(), ValidationError> {
    if job_id.is_empty() {
        return Ok(());
    }
    if job_id == "0" || job_id.starts_with("0:") {
        return Err(ValidationError::JobIdZero {
            job_id: job_id.to_owned(),
        });
    }
    if is_js_integer_string(job_id) {
        return Err(ValidationError::JobIdInteger {
            job_id: job_id.to_owned(),
        });
    }
    if job_id.contains(':') && job_id.split(':').count() != 3 {
        return Err(ValidationError::JobIdColon {
            job_id: job_id.to_owned(),
        });
    }
    Ok(())
}

/// Whether `String(parseInt(s, 10)) === s` in JavaScript: a canonical decimal integer that
/// survives the trip through a double (JS prints integers below 10²¹ without an exponent and
/// with the shortest round-trip digits, as Rust's `Display` for `f64` does).
fn is_js_integer_string(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !canonical || s == "-0" {
        // "-0" parses to -0, which JS prints as "0".
        return false;
    }
    match s.parse::<f64>() {
        Ok(v) if v.abs() < 1e21 => format!("{v}") == s,
        _ => false,
    }
}

pub(crate) fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::options::{Backoff, Deduplication, ParentRef};

    const NOW: u64 = 1_764_000_000_000;

    fn check(opts: &JobOptions) -> Result<(), ValidationError> {
        validate_job_at("job", 10, opts, NOW)
    }

    #[test]
    fn accepts_plain_and_edge_options() {
        assert_eq!(check(&JobOptions::new()), Ok(()));
        assert_eq!(check(&JobOptions::new().attempts(0)), Ok(()));
        assert_eq!(check(&JobOptions::new().priority(MAX_PRIORITY)), Ok(()));
        assert_eq!(check(&JobOptions::new().job_id("")), Ok(()));
        assert_eq!(check(&JobOptions::new().job_id("repeat:abc:123")), Ok(()));
        assert_eq!(check(&JobOptions::new().job_id("007")), Ok(()));
        assert_eq!(check(&JobOptions::new().job_id("1.5")), Ok(()));
        assert_eq!(check(&JobOptions::new().job_id("-0")), Ok(()));
        assert_eq!(
            check(&JobOptions::new().job_id("12345678901234567891")),
            Ok(())
        );
        assert_eq!(check(&JobOptions::new().size_limit(10)), Ok(()));
        assert_eq!(check(&JobOptions::new().size_limit(0)), Ok(()));
        assert_eq!(
            check(&JobOptions::new().fail_parent_on_failure(true)),
            Ok(())
        );
    }

    #[test]
    fn rejects_like_node() {
        let cases: Vec<(JobOptions, &str)> = vec![
            (JobOptions::new().job_id("0"), "JobId cannot be '0' or start with '0:'"),
            (JobOptions::new().job_id("0:x"), "JobId cannot be '0' or start with '0:'"),
            (JobOptions::new().job_id("12"), "Custom Id cannot be integers"),
            (JobOptions::new().job_id("-12"), "Custom Id cannot be integers"),
            (JobOptions::new().job_id("12345678901234567000"), "Custom Id cannot be integers"),
            (JobOptions::new().job_id("a:b"), "Custom Id cannot contain :"),
            (JobOptions::new().job_id("a:b:c:d"), "Custom Id cannot contain :"),
            (JobOptions::new().size_limit(9), "The size of job job exceeds the limit 9 bytes"),
            (
                JobOptions::new().priority(MAX_PRIORITY + 1),
                "Priority should be between 0 and 2097151",
            ),
            (
                JobOptions::new().deduplication(Deduplication::new("")),
                "Deduplication id must be provided",
            ),
            (
                JobOptions::new()
                    .deduplication(Deduplication::new("d"))
                    .parent(ParentRef::new("p", "bull:q")),
                "Deduplication and parent options cannot be used together",
            ),
            (
                JobOptions::new().backoff(Backoff::fixed(Duration::from_secs(1)).with_jitter(1.5)),
                "Jitter should be between 0 and 1",
            ),
            (
                JobOptions::new()
                    .fail_parent_on_failure(true)
                    .remove_dependency_on_failure(true)
                    .ignore_dependency_on_failure(false),
                "The following options cannot be used together: removeDependencyOnFailure, failParentOnFailure",
            ),
        ];
        for (opts, message) in cases {
            let err = check(&opts).expect_err(message);
            assert_eq!(err.to_string(), message);
        }
        let mut debounce = JobOptions::new();
        debounce
            .extra
            .insert("debounce".into(), serde_json::json!({"id": "x"}));
        assert_eq!(check(&debounce), Err(ValidationError::DebounceRemoved));
    }

    #[test]
    fn delay_must_keep_score_exact() {
        let max_delay = MAX_READY_AT_MS - NOW;
        let ok = JobOptions::new().delay(Duration::from_millis(max_delay));
        assert_eq!(check(&ok), Ok(()));
        let too_far = JobOptions::new().delay(Duration::from_millis(max_delay + 1));
        assert!(matches!(
            check(&too_far),
            Err(ValidationError::DelayTooLarge { .. })
        ));
        let huge = JobOptions::new().delay(Duration::from_millis(u64::MAX));
        assert!(check(&huge).is_err());
        // validate_job reads the timestamp from the options when present
        assert!(validate_job("j", 1, &too_far.clone().timestamp_ms(NOW)).is_err());
        assert!(validate_job("j", 1, &JobOptions::new().delay(Duration::from_secs(60))).is_ok());
    }
}
