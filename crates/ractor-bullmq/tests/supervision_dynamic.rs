//! Dynamic supervisors: start_child / terminate_child / which_children, errors, kill after the
//! shutdown timeout.

mod supervision_support;

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_bullmq::supervision::{
    ChildSpec, DynamicSupervisor, Restart, RuntimeEvent, SupervisionError, SupervisorOptions,
};
use supervision_support::*;
use tokio::sync::broadcast;

#[tokio::test]
async fn start_terminate_and_list_children() {
    let probe = Probe::default();
    let (sup, handle) = DynamicSupervisor::spawn(None, SupervisorOptions::default())
        .await
        .unwrap();
    assert!(sup.which_children().await.unwrap().is_empty());

    let w1 = sup.start_child(probe.spec("w1")).await.unwrap();
    let w2 = sup
        .start_child(probe.spec("w2").restart(Restart::Transient))
        .await
        .unwrap();
    let children = sup.which_children().await.unwrap();
    let summary: Vec<_> = children
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.restart,
                c.cell.as_ref().map(|x| x.get_id()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("w1", Restart::Permanent, Some(w1.get_id())),
            ("w2", Restart::Transient, Some(w2.get_id())),
        ]
    );
    // The returned cell is the child: typed messages reach it.
    let pong = ractor::call!(ActorRef::<TestMsg>::from(w2.clone()), TestMsg::Ping).unwrap();
    assert_eq!(pong, "w2");

    // Ids are unique per supervisor.
    let dup = sup.start_child(probe.spec("w1")).await.unwrap_err();
    assert!(matches!(dup, SupervisionError::DuplicateChild { ref id, .. } if id == "w1"));

    // Terminate: graceful stop, removed, not restarted (even though permanent).
    sup.terminate_child("w1").await.unwrap();
    assert!(is_stopped(&w1));
    assert!(probe.log().contains(&"stop:w1".to_owned()));
    let ids: Vec<_> = sup
        .which_children()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["w2"]);
    assert_eq!(probe.starts("w1"), 1);
    let unknown = sup.terminate_child("w1").await.unwrap_err();
    assert!(matches!(unknown, SupervisionError::UnknownChild { .. }));

    // A crashed dynamic child is restarted under the same id (OneForOne by default).
    tell(&sup, "w2", TestMsg::Panic).await;
    wait_started(&probe, &sup, "w2", 2).await;

    sup.shutdown(Duration::from_secs(5)).await.unwrap();
    handle.await.unwrap();
    assert!(sup.which_children().await.is_err(), "stopped supervisor");
}

struct Refuses;

impl Actor for Refuses {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Err("cannot start: no config".into())
    }
}

#[tokio::test]
async fn start_failures_are_reported_and_the_supervisor_keeps_running() {
    let probe = Probe::default();
    let (sup, _) = DynamicSupervisor::spawn(None, SupervisorOptions::default())
        .await
        .unwrap();
    let err = sup
        .start_child(ChildSpec::for_actor("bad", || (Refuses, ())))
        .await
        .unwrap_err();
    match err {
        SupervisionError::StartFailed { id, source } => {
            assert_eq!(id, "bad");
            let reason = source.to_string();
            assert!(reason.contains("no config"), "{reason}");
            // The cause keeps its type: the start function's spawn error.
            assert!(
                source.downcast_ref::<ractor::SpawnErr>().is_some(),
                "{source:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    // A start function that forgets to link is refused rather than leaked.
    let unlinked = ChildSpec::new("unlinked", |_supervisor| async {
        let (actor, _) =
            Actor::spawn(None, TestChild, test_args(&Probe::default(), "unlinked")).await?;
        Ok(actor.get_cell())
    });
    let err = sup.start_child(unlinked).await.unwrap_err();
    assert!(matches!(err, SupervisionError::NotLinked { .. }), "{err:?}");

    sup.start_child(probe.spec("ok")).await.unwrap();
    assert_eq!(sup.which_children().await.unwrap().len(), 1);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_child_slower_than_its_shutdown_timeout_is_killed() {
    let probe = Probe::default();
    let (tx, mut rx) = broadcast::channel(16);
    let (sup, _) = DynamicSupervisor::spawn(None, SupervisorOptions::default().events(tx))
        .await
        .unwrap();
    let slow = probe
        .spec_with("slow", Duration::from_secs(60))
        .shutdown(Duration::from_millis(50));
    let cell = sup.start_child(slow).await.unwrap();
    sup.terminate_child("slow").await.unwrap();
    assert!(is_stopped(&cell));
    assert!(
        !probe.log().contains(&"stop:slow".to_owned()),
        "post_stop was cut short"
    );
    let killed = next_event(&mut rx, |e| match e {
        RuntimeEvent::ChildKilled { child, .. } => Some(child.clone()),
        _ => None,
    })
    .await;
    assert_eq!(killed, "slow");
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}
