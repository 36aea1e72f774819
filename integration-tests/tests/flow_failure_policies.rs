//! The per-child failure policies of a flow applied by our Worker, compared with Node's Worker
//! doing the same: for a parent with a child that completes and a child that fails with no
//! policy, `failParentOnFailure` (`fpof`), `continueParentOnFailure` (`cpof`),
//! `ignoreDependencyOnFailure` (`idof`) or `removeDependencyOnFailure` (`rdof`), the flow is
//! added by Node's FlowProducer twice (two pairs of queues, the same job ids); Node's Worker
//! processes one copy, ours the other — children first, then the parent's queue — and both
//! copies end in the same raw Redis state (every key of both queues: job hashes, the parent's
//! `:dependencies`, `:processed`, `:failed`, `:unsuccessful`, the state sets) with the same
//! per-job event sequences.

mod common;
mod raw_state;
mod worker_common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use raw_state::{assert_same_state, snapshot};
use serde_json::{json, Value};
use worker_common::*;

/// The flow of one case: parent `parent` in `parents`, children `ok` and `bad` in `kids`, the
/// failing child with `policy` (a Node option name) when given.
async fn add_flow(parents: &str, kids: &str, policy: Option<&str>) -> Result<()> {
    let mut bad_opts = json!({"jobId": "bad"});
    if let Some(policy) = policy {
        bad_opts[policy] = json!(true);
    }
    let children = json!([
        {"name": "ok", "queueName": kids, "data": {"returnValue": 1}, "opts": {"jobId": "ok"}},
        {"name": "bad", "queueName": kids, "data": {"fail": "boom"}, "opts": bad_opts},
    ]);
    let script = format!(
        "const {{ FlowProducer }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const fp = new FlowProducer({{ connection: connectionOptions() }});\
         fp.add({{ name: 'parent', queueName: {parents:?}, data: {{ returnValue: 'parent done' }},\
                   opts: {{ jobId: 'parent' }}, children: {children} }})\
           .then(() => {{ process.stdout.write('{{}}'); return fp.close(); }})\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await?;
    Ok(())
}

/// Whether the parent leaves `waiting-children` once both children ended.
fn parent_released(policy: Option<&str>) -> bool {
    policy.is_some()
}

async fn run_node_worker(queue: &str, jobs: usize) -> Result<()> {
    let report = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": jobs, "idleMs": 3000, "timeoutMs": 60000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "count", "{report}");
    Ok(())
}

async fn run_our_worker(queue: &str, jobs: i64) -> Result<()> {
    let worker = spawn_worker(queue, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(queue, jobs, Duration::from_secs(60)).await?;
    worker.close().await?;
    Ok(())
}

struct Side {
    parents: String,
    kids: String,
}

impl Side {
    fn new(tag: &str, policy: &str) -> Self {
        Self {
            parents: unique_queue(&format!("fpol-{policy}-{tag}-p")),
            kids: unique_queue(&format!("fpol-{policy}-{tag}-c")),
        }
    }

    fn names(&self) -> [(&str, &str); 2] {
        [
            (self.parents.as_str(), "<parents>"),
            (self.kids.as_str(), "<kids>"),
        ]
    }

    async fn state(&self) -> Result<(BTreeMap<String, Value>, BTreeMap<String, Value>)> {
        let names = self.names();
        Ok((
            snapshot(&self.parents, &names).await?,
            snapshot(&self.kids, &names).await?,
        ))
    }

    async fn events(
        &self,
    ) -> Result<(BTreeMap<String, Vec<String>>, BTreeMap<String, Vec<String>>)> {
        let names = self.names();
        Ok((
            raw_state::per_job_events(&self.parents, &names).await?,
            raw_state::per_job_events(&self.kids, &names).await?,
        ))
    }

    async fn cleanup(&self) -> Result<()> {
        cleanup(&self.parents).await?;
        cleanup(&self.kids).await
    }
}

async fn same_outcome_as_node(policy: Option<&str>) -> Result<()> {
    let label = policy.unwrap_or("none");
    let (node, ours) = (Side::new("node", label), Side::new("rust", label));
    add_flow(&node.parents, &node.kids, policy).await?;
    add_flow(&ours.parents, &ours.kids, policy).await?;

    run_node_worker(&node.kids, 2).await?;
    run_our_worker(&ours.kids, 2).await?;
    if parent_released(policy) {
        run_node_worker(&node.parents, 1).await?;
        run_our_worker(&ours.parents, 1).await?;
    }

    let (node_parents, node_kids) = node.state().await?;
    let (our_parents, our_kids) = ours.state().await?;
    assert_same_state(
        &our_parents,
        &node_parents,
        &format!("{label}: parent queue"),
    );
    assert_same_state(&our_kids, &node_kids, &format!("{label}: children queue"));
    // Where each policy leaves its mark on the parent (so the comparison above compared them).
    let marks: &[&str] = match policy {
        None => &["parent:dependencies", "parent:processed"],
        Some("failParentOnFailure") => &["parent:processed", "parent:unsuccessful"],
        Some("continueParentOnFailure") | Some("ignoreDependencyOnFailure") => {
            &["parent:processed", "parent:failed"]
        }
        Some(_) => &["parent:processed"],
    };
    for mark in marks {
        assert!(
            our_parents.contains_key(*mark),
            "{label}: no `{mark}` in {our_parents:?}"
        );
    }
    let expected_parent_state = match policy {
        None => "waiting-children",
        Some("failParentOnFailure") => "failed",
        Some(_) => "completed",
    };
    let read = run_node(
        "read_jobs.js",
        &json!({"queue": ours.parents, "ids": ["parent"]}),
    )
    .await?;
    assert_eq!(
        read["jobs"][0]["state"], expected_parent_state,
        "{label}: {read}"
    );

    let (node_parent_events, node_kid_events) = node.events().await?;
    let (our_parent_events, our_kid_events) = ours.events().await?;
    assert_eq!(
        our_parent_events, node_parent_events,
        "{label}: parent queue events"
    );
    assert_eq!(
        our_kid_events, node_kid_events,
        "{label}: children queue events"
    );
    node.cleanup().await?;
    ours.cleanup().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_without_policy_leaves_the_parent_waiting_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_outcome_as_node(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_parent_on_failure_is_applied_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_outcome_as_node(Some("failParentOnFailure")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_parent_on_failure_is_applied_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_outcome_as_node(Some("continueParentOnFailure")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_dependency_on_failure_is_applied_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_outcome_as_node(Some("ignoreDependencyOnFailure")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_dependency_on_failure_is_applied_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_outcome_as_node(Some("removeDependencyOnFailure")).await
}
