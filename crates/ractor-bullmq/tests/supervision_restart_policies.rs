//! Permanent / Transient / Temporary: which exits lead to a restart.

mod supervision_support;

use std::time::Duration;

use ractor_bullmq::supervision::{
    Restart, RuntimeEvent, Strategy, Supervisor, SupervisorOptions, SupervisorRef,
};
use supervision_support::*;
use tokio::sync::broadcast;

async fn start_one(
    probe: &Probe,
    restart: Restart,
) -> (SupervisorRef, broadcast::Receiver<RuntimeEvent>) {
    let (tx, rx) = broadcast::channel(64);
    let options = SupervisorOptions::default().max_restarts(10).events(tx);
    let (sup, _) = Supervisor::spawn(None, options, vec![probe.spec("x").restart(restart)])
        .await
        .unwrap();
    (sup, rx)
}

async fn exited_not_restarted(
    sup: &SupervisorRef,
    rx: &mut broadcast::Receiver<RuntimeEvent>,
) -> String {
    let reason = next_event(rx, |e| match e {
        RuntimeEvent::ChildExited { child, reason, .. } if child == "x" => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        sup.which_children().await.unwrap().is_empty(),
        "removed from the supervisor"
    );
    reason
}

#[tokio::test]
async fn permanent_is_restarted_even_after_a_normal_exit() {
    let probe = Probe::default();
    let (sup, _rx) = start_one(&probe, Restart::Permanent).await;
    tell(&sup, "x", TestMsg::StopNormal).await;
    wait_started(&probe, &sup, "x", 2).await;
    tell(&sup, "x", TestMsg::Panic).await;
    wait_started(&probe, &sup, "x", 3).await;
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn transient_is_restarted_after_panic_error_or_abnormal_reason() {
    let probe = Probe::default();
    let (sup, mut rx) = start_one(&probe, Restart::Transient).await;
    tell(&sup, "x", TestMsg::Panic).await;
    wait_started(&probe, &sup, "x", 2).await;
    tell(&sup, "x", TestMsg::Fail).await;
    wait_started(&probe, &sup, "x", 3).await;
    tell(&sup, "x", TestMsg::StopWith("lost redis".into())).await;
    wait_started(&probe, &sup, "x", 4).await;
    let reason = next_event(&mut rx, |e| match e {
        RuntimeEvent::ChildRestarted {
            reason, restarts, ..
        } if *restarts == 3 => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, "lost redis");

    // ... but not after a normal exit.
    tell(&sup, "x", TestMsg::StopNormal).await;
    assert_eq!(exited_not_restarted(&sup, &mut rx).await, "normal");
    assert_eq!(probe.starts("x"), 4);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn transient_is_not_restarted_after_a_shutdown_reason() {
    let probe = Probe::default();
    let (sup, mut rx) = start_one(&probe, Restart::Transient).await;
    tell(&sup, "x", TestMsg::StopWith("shutdown: scaled down".into())).await;
    assert_eq!(
        exited_not_restarted(&sup, &mut rx).await,
        "shutdown: scaled down"
    );
    assert_eq!(probe.starts("x"), 1);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn temporary_is_never_restarted() {
    let probe = Probe::default();
    let (sup, mut rx) = start_one(&probe, Restart::Temporary).await;
    tell(&sup, "x", TestMsg::Panic).await;
    let reason = exited_not_restarted(&sup, &mut rx).await;
    assert!(reason.contains("told to panic"), "{reason}");
    assert_eq!(probe.starts("x"), 1);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn temporary_sibling_stopped_by_one_for_all_is_not_restarted() {
    let probe = Probe::default();
    let options = SupervisorOptions::default()
        .strategy(Strategy::OneForAll)
        .max_restarts(10);
    let children = vec![
        probe.spec("a"),
        probe.spec("tmp").restart(Restart::Temporary),
        probe.spec("c"),
    ];
    let (sup, _) = Supervisor::spawn(None, options, children).await.unwrap();
    tell(&sup, "c", TestMsg::Panic).await;
    wait_started(&probe, &sup, "c", 2).await;
    assert_eq!(probe.starts("a"), 2);
    assert_eq!(probe.starts("tmp"), 1);
    assert!(probe.log().contains(&"stop:tmp".to_owned()));
    let ids: Vec<_> = sup
        .which_children()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["a", "c"]);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn transient_is_restarted_after_being_killed() {
    let probe = Probe::default();
    let (sup, _rx) = start_one(&probe, Restart::Transient).await;
    child_ref(&sup, "x").await.kill();
    wait_started(&probe, &sup, "x", 2).await;
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}
