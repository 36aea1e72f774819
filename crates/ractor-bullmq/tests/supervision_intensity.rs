//! Restart intensity: more than `max_restarts` within `period` makes the supervisor give up,
//! stop its children and fail upward.

mod supervision_support;

use std::time::Duration;

use ractor_bullmq::supervision::{RuntimeEvent, SupervisorOptions};
use supervision_support::*;
use tokio::sync::{broadcast, mpsc};

#[tokio::test]
async fn exceeding_max_restarts_stops_the_supervisor_and_its_parent_sees_the_failure() {
    let probe = Probe::default();
    let (events, mut rx) = broadcast::channel(64);
    let (report_tx, mut report) = mpsc::unbounded_channel();
    let (sup_tx, mut sup_rx) = mpsc::unbounded_channel();
    let args = ParentArgs {
        options: SupervisorOptions::default()
            .max_restarts(2)
            .period(Duration::from_secs(60))
            .events(events),
        children: vec![probe.spec("flaky"), probe.spec("bystander")],
        report: report_tx,
        sup_out: sup_tx,
    };
    let (parent, _) = ractor::Actor::spawn(None, Parent, args).await.unwrap();
    let sup = sup_rx.recv().await.unwrap();

    for n in 2..=3 {
        tell(&sup, "flaky", TestMsg::Panic).await;
        wait_started(&probe, &sup, "flaky", n).await;
    }
    // The third restart within the window is one too many.
    tell(&sup, "flaky", TestMsg::Panic).await;

    let failure = tokio::time::timeout(TIMEOUT, report.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(failure.starts_with("failed:"), "{failure}");
    assert!(failure.contains("gave up"), "{failure}");
    let (child, max) = next_event(&mut rx, |e| match e {
        RuntimeEvent::SupervisorGaveUp {
            child,
            max_restarts,
            ..
        } => Some((child.clone(), *max_restarts)),
        _ => None,
    })
    .await;
    assert_eq!((child.as_str(), max), ("flaky", 2));
    assert!(is_stopped(&sup.cell()));
    // The sibling was stopped gracefully before the supervisor died.
    assert!(probe.log().contains(&"stop:bystander".to_owned()));
    assert_eq!(probe.starts("flaky"), 3);
    parent.stop(None);
}

#[tokio::test(start_paused = true)]
async fn restarts_outside_the_window_do_not_count() {
    let probe = Probe::default();
    let (report_tx, mut report) = mpsc::unbounded_channel();
    let (sup_tx, mut sup_rx) = mpsc::unbounded_channel();
    let args = ParentArgs {
        options: SupervisorOptions::default()
            .max_restarts(2)
            .period(Duration::from_secs(60)),
        children: vec![probe.spec("flaky")],
        report: report_tx,
        sup_out: sup_tx,
    };
    let (parent, _) = ractor::Actor::spawn(None, Parent, args).await.unwrap();
    let sup = sup_rx.recv().await.unwrap();

    let mut n = 1;
    for _round in 0..3 {
        for _ in 0..2 {
            tell(&sup, "flaky", TestMsg::Panic).await;
            n += 1;
            wait_started(&probe, &sup, "flaky", n).await;
        }
        // Let the window slide past these two restarts (virtual time).
        tokio::time::sleep(Duration::from_secs(61)).await;
    }
    assert_eq!(probe.starts("flaky"), 7);
    assert!(!is_stopped(&sup.cell()));
    assert!(report.try_recv().is_err(), "parent saw no failure");
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
    parent.stop(None);
}

#[tokio::test]
async fn zero_max_restarts_gives_up_on_the_first_exit() {
    let probe = Probe::default();
    let (report_tx, mut report) = mpsc::unbounded_channel();
    let (sup_tx, mut sup_rx) = mpsc::unbounded_channel();
    let args = ParentArgs {
        options: SupervisorOptions::default().max_restarts(0),
        children: vec![probe.spec("once")],
        report: report_tx,
        sup_out: sup_tx,
    };
    let (parent, _) = ractor::Actor::spawn(None, Parent, args).await.unwrap();
    let sup = sup_rx.recv().await.unwrap();
    tell(&sup, "once", TestMsg::StopNormal).await;
    let failure = tokio::time::timeout(TIMEOUT, report.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(failure.contains("gave up"), "{failure}");
    assert_eq!(probe.starts("once"), 1);
    parent.stop(None);
}

/// A child whose start function fails on chosen attempts (1-based), else starts a test child.
fn flaky_start(
    probe: &Probe,
    id: &str,
    fail_on: &'static [usize],
) -> ractor_bullmq::supervision::ChildSpec {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let attempts = Arc::new(AtomicUsize::new(0));
    let probe = probe.clone();
    let id = id.to_owned();
    ractor_bullmq::supervision::ChildSpec::new(id.clone(), move |supervisor| {
        let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
        let args = test_args(&probe, &id);
        async move {
            if fail_on.contains(&attempt) {
                return Err(ractor::SpawnErr::StartupFailed(
                    format!("attempt {attempt} refused").into(),
                ));
            }
            let (actor, _) = ractor::Actor::spawn_linked(None, TestChild, args, supervisor).await?;
            Ok(actor.get_cell())
        }
    })
}

#[tokio::test]
async fn a_failed_restart_is_retried_and_counts_against_the_intensity() {
    let probe = Probe::default();
    let (events, mut rx) = broadcast::channel(64);
    let options = SupervisorOptions::default().max_restarts(5).events(events);
    let (sup, _) = ractor_bullmq::supervision::Supervisor::spawn(
        None,
        options,
        vec![flaky_start(&probe, "x", &[2])],
    )
    .await
    .unwrap();
    tell(&sup, "x", TestMsg::Panic).await;
    let error = next_event(&mut rx, |e| match e {
        RuntimeEvent::ChildStartFailed { error, .. } => Some(error.clone()),
        _ => None,
    })
    .await;
    assert!(error.contains("attempt 2 refused"), "{error}");
    wait_started(&probe, &sup, "x", 2).await;
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_child_that_never_restarts_makes_the_supervisor_give_up() {
    let probe = Probe::default();
    let (report_tx, mut report) = mpsc::unbounded_channel();
    let (sup_tx, mut sup_rx) = mpsc::unbounded_channel();
    let args = ParentArgs {
        options: SupervisorOptions::default().max_restarts(3),
        children: vec![flaky_start(&probe, "x", &[2, 3, 4, 5, 6, 7])],
        report: report_tx,
        sup_out: sup_tx,
    };
    let (parent, _) = ractor::Actor::spawn(None, Parent, args).await.unwrap();
    let sup = sup_rx.recv().await.unwrap();
    tell(&sup, "x", TestMsg::Panic).await;
    let failure = tokio::time::timeout(TIMEOUT, report.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(failure.contains("gave up"), "{failure}");
    assert_eq!(probe.starts("x"), 1);
    parent.stop(None);
}
