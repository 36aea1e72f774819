//! Graceful-stop hooks: the supervisor runs a child's hook (with the budget) instead of a plain
//! stop, `terminate_child_within` passes its own budget, and a terminate does not block the
//! supervisor while the child drains.

mod supervision_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor_bullmq::supervision::{DynamicSupervisor, SupervisorOptions, SupervisorRef};
use supervision_support::*;

/// Records the budgets the hook was called with, then stops the child after `drain`.
fn hooked(
    probe: &Probe,
    id: &str,
    drain: Duration,
    budgets: Arc<Mutex<Vec<Duration>>>,
) -> ractor_bullmq::supervision::ChildSpec {
    probe
        .spec(id)
        .shutdown(Duration::from_secs(7))
        .graceful_stop(move |cell, budget| {
            budgets.lock().unwrap().push(budget);
            async move {
                tokio::time::sleep(drain).await;
                cell.stop(Some("shutdown: drained".into()));
            }
        })
}

/// A dynamic supervisor, with the probe and the budget list its hooked children use.
async fn dynamic_supervisor() -> (SupervisorRef, Probe, Arc<Mutex<Vec<Duration>>>) {
    let (sup, _) = DynamicSupervisor::spawn(None, SupervisorOptions::default())
        .await
        .unwrap();
    (sup, Probe::default(), Arc::new(Mutex::new(Vec::new())))
}

#[tokio::test]
async fn terminate_runs_the_hook_with_the_shutdown_or_the_given_budget() {
    let (sup, probe, budgets) = dynamic_supervisor().await;
    sup.start_child(hooked(&probe, "a", Duration::ZERO, budgets.clone()))
        .await
        .unwrap();
    sup.start_child(hooked(&probe, "b", Duration::ZERO, budgets.clone()))
        .await
        .unwrap();

    sup.terminate_child("a").await.unwrap();
    sup.terminate_child_within("b", Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        *budgets.lock().unwrap(),
        [Duration::from_secs(7), Duration::ZERO]
    );
    assert!(sup.which_children().await.unwrap().is_empty());
    // Stopped by the hook, once each, and never restarted.
    assert_eq!((probe.starts("a"), probe.starts("b")), (1, 1));
    sup.shutdown(TIMEOUT).await.unwrap();
}

#[tokio::test]
async fn a_draining_child_does_not_block_the_supervisor() {
    let (sup, probe, budgets) = dynamic_supervisor().await;
    sup.start_child(hooked(
        &probe,
        "slow",
        Duration::from_secs(3),
        budgets.clone(),
    ))
    .await
    .unwrap();

    let terminating = {
        let sup = sup.clone();
        tokio::spawn(async move { sup.terminate_child("slow").await })
    };
    eventually("the hook to run", || !budgets.lock().unwrap().is_empty()).await;
    // While "slow" drains, the supervisor still starts and lists children.
    sup.start_child(probe.spec("fast")).await.unwrap();
    let ids: Vec<String> = sup
        .which_children()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["fast"]);
    assert!(!terminating.is_finished(), "the drain takes 3 s");
    terminating.await.unwrap().unwrap();
    sup.shutdown(TIMEOUT).await.unwrap();
}

#[tokio::test]
async fn shutdown_runs_the_hooks_too() {
    let (sup, probe, budgets) = dynamic_supervisor().await;
    sup.start_child(hooked(
        &probe,
        "a",
        Duration::from_millis(50),
        budgets.clone(),
    ))
    .await
    .unwrap();
    sup.shutdown(TIMEOUT).await.unwrap();
    assert_eq!(*budgets.lock().unwrap(), [Duration::from_secs(7)]);
}
