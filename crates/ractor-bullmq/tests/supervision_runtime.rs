//! The Runtime: root supervisor with WorkerSupervisor and QueueEventsSupervisor, event stream,
//! escalation, graceful shutdown order.

mod supervision_support;

use std::time::Duration;

use ractor_bullmq::runtime::{Branch, Runtime, RuntimeOptions};
use ractor_bullmq::supervision::{RuntimeEvent, SupervisionError, SupervisorOptions};
use supervision_support::*;

#[tokio::test]
async fn runtime_owns_two_dynamic_supervisors_and_shuts_down_in_reverse_order() {
    let probe = Probe::default();
    let runtime = Runtime::start(RuntimeOptions::default()).await.unwrap();
    assert!(runtime.is_running());
    let root_children: Vec<_> = runtime
        .root()
        .which_children()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(
        root_children,
        ["worker_supervisor", "queue_events_supervisor"]
    );

    runtime
        .start_child_under(Branch::Workers, probe.spec("worker"))
        .await
        .unwrap();
    runtime
        .start_child_under(Branch::QueueEvents, probe.spec("events"))
        .await
        .unwrap();
    runtime
        .start_child_under(Branch::Root, probe.spec("manager"))
        .await
        .unwrap();
    let workers = runtime.worker_supervisor().unwrap();
    assert_eq!(workers.which_children().await.unwrap()[0].id, "worker");
    let queue_events = runtime.queue_events_supervisor().unwrap();
    assert_eq!(queue_events.which_children().await.unwrap()[0].id, "events");

    probe.clear_log();
    runtime.shutdown(Duration::from_secs(10)).await.unwrap();
    // Root children in reverse start order: the manager, then the QueueEvents branch, then
    // the Worker branch.
    assert_eq!(probe.log(), ["stop:manager", "stop:events", "stop:worker"]);
    assert!(!runtime.is_running());
    assert!(matches!(
        runtime.worker_supervisor(),
        Err(SupervisionError::NotRunning(_))
    ));
}

#[tokio::test]
async fn restarts_and_give_ups_are_reported_on_the_event_stream() {
    let probe = Probe::default();
    let options =
        RuntimeOptions::default().worker_supervisor(SupervisorOptions::default().max_restarts(1));
    let runtime = Runtime::start(options).await.unwrap();
    let mut events = runtime.subscribe();
    let workers = runtime.worker_supervisor().unwrap();
    workers.start_child(probe.spec("w")).await.unwrap();

    tell(&workers, "w", TestMsg::Panic).await;
    let (supervisor, child) = next_event(&mut events, |e| match e {
        RuntimeEvent::ChildRestarted {
            supervisor, child, ..
        } => Some((supervisor.clone(), child.clone())),
        _ => None,
    })
    .await;
    assert_eq!(child, "w");
    assert_eq!(supervisor, format!("{}.workers", runtime.name()));

    // A second crash exceeds max_restarts = 1: the WorkerSupervisor gives up (an error event,
    // not a silent death) and the root, seeing it fail, restarts it empty.
    wait_started(&probe, &workers, "w", 2).await;
    tell(&workers, "w", TestMsg::Panic).await;
    let gave_up = next_event(&mut events, |e| match e {
        RuntimeEvent::SupervisorGaveUp {
            supervisor, child, ..
        } => Some((supervisor.clone(), child.clone())),
        _ => None,
    })
    .await;
    assert_eq!(
        gave_up,
        (format!("{}.workers", runtime.name()), "w".to_owned())
    );
    let restarted = next_event(&mut events, |e| match e {
        RuntimeEvent::ChildRestarted {
            supervisor,
            child,
            reason,
            ..
        } if supervisor == runtime.name() => Some((child.clone(), reason.clone())),
        _ => None,
    })
    .await;
    assert_eq!(restarted.0, "worker_supervisor");
    assert!(restarted.1.contains("gave up"), "{}", restarted.1);

    eventually_async("a fresh, empty WorkerSupervisor", || async {
        match runtime.worker_supervisor() {
            Ok(sup) => sup.which_children().await.is_ok_and(|c| c.is_empty()),
            Err(_) => false,
        }
    })
    .await;
    assert!(runtime.is_running());
    runtime.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn the_root_giving_up_stops_the_runtime_and_is_reported() {
    let probe = Probe::default();
    let options = RuntimeOptions::default().root(SupervisorOptions::default().max_restarts(0));
    let runtime = Runtime::start(options).await.unwrap();
    let mut events = runtime.subscribe();
    runtime
        .start_child_under(Branch::Root, probe.spec("manager"))
        .await
        .unwrap();
    tell(runtime.root(), "manager", TestMsg::Panic).await;
    let supervisor = next_event(&mut events, |e| match e {
        RuntimeEvent::SupervisorGaveUp { supervisor, .. } => Some(supervisor.clone()),
        _ => None,
    })
    .await;
    assert_eq!(supervisor, runtime.name());
    eventually("runtime stopped", || !runtime.is_running()).await;
    assert!(runtime.worker_supervisor().is_err());
}

#[tokio::test]
async fn shutdown_is_bounded_by_its_timeout() {
    let probe = Probe::default();
    let runtime = Runtime::start(RuntimeOptions::default()).await.unwrap();
    // A worker that would take a minute to stop and allows itself that long.
    let slow = probe
        .spec_with("slow", Duration::from_secs(60))
        .shutdown(Duration::from_secs(120));
    let cell = runtime
        .start_child_under(Branch::Workers, slow)
        .await
        .unwrap();
    let err = runtime
        .shutdown(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, SupervisionError::ShutdownTimedOut(_)));
    eventually("the slow worker killed", || is_stopped(&cell)).await;
    assert!(!runtime.is_running());
}

#[tokio::test]
async fn two_runtimes_coexist_in_one_process() {
    let a = Runtime::start(RuntimeOptions::default()).await.unwrap();
    let b = Runtime::start(RuntimeOptions::default()).await.unwrap();
    assert_ne!(a.name(), b.name());
    let named = Runtime::start(RuntimeOptions::default().name(a.name())).await;
    assert!(matches!(named, Err(SupervisionError::StartFailed { .. })));
    a.shutdown(Duration::from_secs(5)).await.unwrap();
    b.shutdown(Duration::from_secs(5)).await.unwrap();
}
