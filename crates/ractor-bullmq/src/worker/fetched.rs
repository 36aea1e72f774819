//! Reading a job the store handed over: a runnable [`Job`], or the reason it cannot run.
//!
//! This is the only place that looks inside a [`FetchedJob`], so a change of what the store
//! returns for a job (today the raw hash fields) is a change of [`read_fetched`] alone.

use std::collections::HashMap;

use super::Job;
use crate::store::FetchedJob;

/// A fetched job that cannot run: the Worker fails it for good with `reason`.
#[derive(Debug)]
pub(super) struct Unreadable {
    /// The job id.
    pub(super) id: String,
    /// The lock token it was fetched with.
    pub(super) token: String,
    /// `failedReason`.
    pub(super) reason: String,
}

/// Turns a fetched job of `queue` into the job to run and its lock token, or says why it
/// cannot run (a hash that is not text, a field missing, a field that does not decode).
pub(super) fn read_fetched(queue: &str, fetched: FetchedJob) -> Result<(Job, String), Unreadable> {
    let FetchedJob {
        id,
        token,
        fields,
        unreadable,
    } = fetched;
    let decoded = match unreadable {
        Some(reason) => Err(reason),
        None => runnable(&fields).and_then(|()| {
            bullmq_protocol::JobRecord::decode(&id, &fields)
                .map_err(|error| format!("corrupted job hash: {error}"))
        }),
    };
    match decoded {
        Ok(record) => Ok((Job::from_record(queue, record), token)),
        Err(reason) => Err(Unreadable { id, token, reason }),
    }
}

/// Every client writes `name` and `opts` when it creates a job: a hash without them is a
/// remnant (a job deleted under a script that wrote a field back) or a manual edit, and is
/// failed rather than run with defaults. The other fields are checked by the decoder.
fn runnable(fields: &HashMap<String, String>) -> Result<(), String> {
    match ["name", "opts"]
        .into_iter()
        .find(|f| !fields.contains_key(*f))
    {
        Some(field) => Err(format!("corrupted job hash: {field} is missing")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_complete_hash_is_runnable() {
        let fetched = FetchedJob::new(
            "7",
            "tok",
            fields(&[("name", "email"), ("data", "{}"), ("opts", "{}")]),
        );
        let (job, token) = read_fetched("q", fetched).expect("runnable");
        assert_eq!(
            (job.id(), job.name(), token.as_str()),
            ("7", "email", "tok")
        );
    }

    #[test]
    fn a_hash_without_name_or_opts_is_not() {
        let fetched = FetchedJob::new("7", "tok", fields(&[("data", "{}"), ("opts", "{}")]));
        let unreadable = read_fetched("q", fetched).expect_err("not runnable");
        assert_eq!(
            (unreadable.id.as_str(), unreadable.token.as_str()),
            ("7", "tok")
        );
        assert_eq!(unreadable.reason, "corrupted job hash: name is missing");
    }

    #[test]
    fn a_hash_that_is_not_text_keeps_the_stores_reason() {
        let mut fetched = FetchedJob::new("7", "tok", HashMap::new());
        fetched.unreadable = Some("field data is not UTF-8".to_string());
        let unreadable = read_fetched("q", fetched).expect_err("not runnable");
        assert_eq!(unreadable.reason, "field data is not UTF-8");
    }
}
