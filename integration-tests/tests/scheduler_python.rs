//! Job schedulers with Python BullMQ (PyPI `bullmq`, pinned in
//! `integration-tests/python/requirements.txt`, driven by `python/scheduler.py`): a scheduler
//! created by Python keeps running on our Worker, and Python, Node and Rust workers together
//! run each iteration once.
//!
//! The package is installed into `integration-tests/python/.venv` on first use (`python3 -m
//! venv` + `pip install`); when that is impossible (no python3, no network) the tests are
//! skipped with a loud message.

mod common;
mod scheduler_common;
mod worker_common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use common::*;
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use scheduler_common::*;
use serde_json::{json, Value as Json};

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn skip(reason: &str) {
    eprintln!(
        "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
         !!! SKIPPING Python BullMQ interop test: {reason}\n\
         !!! It needs python3 with venv and pip access to PyPI (bullmq, see\n\
         !!! integration-tests/python/requirements.txt).\n\
         !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    );
}

fn ran_ok(cmd: &mut std::process::Command) -> Result<(), String> {
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("{cmd:?} could not start: {e}")),
    }
}

/// Creates the venv with the pinned bullmq if needed (once per test binary); its python, or
/// why it cannot be had.
fn setup_python() -> Result<PathBuf, String> {
    let venv = python_dir().join(".venv");
    let python = venv.join("bin").join("python");
    let importable = |python: &PathBuf| {
        ran_ok(std::process::Command::new(python).args([
            "-c",
            "import bullmq, importlib.metadata as m; assert m.version('bullmq') == '3.4.4'",
        ]))
    };
    if importable(&python).is_ok() {
        return Ok(python);
    }
    ran_ok(
        std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv),
    )?;
    ran_ok(
        std::process::Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(python_dir().join("requirements.txt")),
    )?;
    importable(&python)?;
    Ok(python)
}

/// The venv's python, set up once; `None` (after a loud message) when it cannot be.
fn python() -> Option<PathBuf> {
    static SETUP: Mutex<Option<Result<PathBuf, String>>> = Mutex::new(None);
    let mut setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let result = setup.get_or_insert_with(setup_python).clone();
    match result {
        Ok(python) => Some(python),
        Err(reason) => {
            skip(&reason);
            None
        }
    }
}

/// Runs `python/scheduler.py` with `arg` on stdin; the JSON it prints.
async fn run_python(python: &PathBuf, arg: &Json) -> Result<Json> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(python)
        .arg("scheduler.py")
        .current_dir(python_dir())
        .env("REDIS_URL", redis_url())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("could not start python")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    stdin.write_all(arg.to_string().as_bytes()).await?;
    stdin.shutdown().await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!(
            "scheduler.py {arg} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "scheduler.py printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_scheduler_keeps_running_on_our_worker() -> Result<()> {
    let Some(python) = python() else {
        return Ok(());
    };
    let queue = unique_queue("spy-py-rust");
    let out = run_python(
        &python,
        &json!({"op": "upsert", "queue": queue, "id": "py", "repeat": {"every": 300},
                "template": {"name": "tick", "data": {"from": "python"}}}),
    )
    .await?;
    assert!(out["result"]["id"].as_str().is_some(), "{out}");
    // Python's scheduler read by us and by Node: the same.
    let q = open_queue(&queue).await?;
    if node_available() {
        let node = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "get", "id": "py"}),
        )
        .await?;
        let ours = serde_json::to_value(q.get_job_scheduler("py").await?)?;
        assert_eq!(ours, node["result"]);
        assert_eq!(
            ours["template"]["data"],
            json!({"from": "python"}),
            "{ours}"
        );
    }
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("5 iterations", 60, || started_of(&log).len() >= 5).await?;
    assert!(q.remove_job_scheduler("py").await?);
    settled(&queue).await?;
    worker.close().await?;
    let millis = assert_on_schedule("py", 300, &started_of(&log));
    assert!(millis.len() >= 5, "{millis:?}");
    assert_eq!(q.get_job_schedulers_count().await?, 0);
    // The iterations our Worker created carry the template Python stored.
    let starts = started_of(&log);
    let last = &starts.last().context("a start")?.id;
    let raw = raw_client().await?;
    let data: Option<String> =
        fred::prelude::HashesInterface::hget(&raw, format!("bull:{queue}:{last}"), "data").await?;
    assert_eq!(data.as_deref(), Some(r#"{"from":"python"}"#), "{last}");
    fred::prelude::ClientLike::quit(&raw).await?;
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_node_and_rust_workers_run_each_iteration_once() -> Result<()> {
    let Some(python) = python() else {
        return Ok(());
    };
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("spy-mixed");
    let q = open_queue(&queue).await?;
    // Each run takes almost three intervals, so the next iterations are due while the other
    // workers are busy and all three take part.
    q.upsert_job_scheduler(
        "mix",
        Repeat::every(Duration::from_millis(300)),
        SchedulerTemplate::new("tick").data(json!({"sleepMs": 800})),
    )
    .await?;
    let py_queue = queue.clone();
    let py = tokio::spawn(async move {
        run_python(
            &python,
            &json!({"op": "worker", "queue": py_queue, "idleMs": 4000, "timeoutMs": 90000}),
        )
        .await
    });
    // Python's worker starts slower: give it a head start.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let node_queue = queue.clone();
    let node = tokio::spawn(async move {
        run_node(
            "run_worker.js",
            &json!({"queue": node_queue, "idleMs": 4000, "timeoutMs": 90000}),
        )
        .await
    });
    let (worker, log) = recording_worker(&queue, "rust").await?;
    worker_common::wait_finished(&queue, 20, Duration::from_secs(90)).await?;
    assert!(q.remove_job_scheduler("mix").await?);
    settled(&queue).await?;
    let report = py.await??;
    let node_report = node.await??;
    worker.close().await?;

    let rust = started_of(&log);
    let py_starts = started_of_node(&report);
    let node_starts = started_of_node(&node_report);
    let mut runs: HashMap<String, Vec<&str>> = HashMap::new();
    for (side, starts) in [
        ("rust", &rust),
        ("python", &py_starts),
        ("node", &node_starts),
    ] {
        for s in starts.iter() {
            runs.entry(s.id.clone()).or_default().push(side);
        }
    }
    for (id, sides) in &runs {
        assert_eq!(sides.len(), 1, "{id} ran on {sides:?}");
    }
    let created: BTreeSet<String> = added(&queue).await?.into_iter().collect();
    let ran: BTreeSet<String> = runs.keys().cloned().collect();
    let not_run: Vec<&String> = created.difference(&ran).collect();
    assert!(not_run.len() <= 1, "created but never run: {not_run:?}");
    assert!(ran.is_subset(&created));
    let mut all = rust.clone();
    all.extend(py_starts.iter().cloned());
    all.extend(node_starts.iter().cloned());
    let millis = assert_on_schedule("mix", 300, &all);
    assert!(millis.len() >= 20, "{millis:?}");
    eprintln!(
        "mixed fleet: {} iterations, {} on rust, {} on python, {} on node",
        millis.len(),
        rust.len(),
        py_starts.len(),
        node_starts.len()
    );
    assert!(
        !rust.is_empty() && !py_starts.is_empty() && !node_starts.is_empty(),
        "all three workers took part"
    );
    q.close().await?;
    cleanup(&queue).await
}
