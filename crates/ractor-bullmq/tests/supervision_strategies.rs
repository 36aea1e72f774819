//! OneForOne / OneForAll / RestForOne: which siblings restart, in which order.

mod supervision_support;

use std::time::Duration;

use ractor_bullmq::supervision::{Strategy, Supervisor, SupervisorOptions, SupervisorRef};
use supervision_support::*;

async fn start(strategy: Strategy, probe: &Probe) -> SupervisorRef {
    let options = SupervisorOptions::default()
        .strategy(strategy)
        .max_restarts(10);
    let children = vec![probe.spec("a"), probe.spec("b"), probe.spec("c")];
    let (sup, _) = Supervisor::spawn(None, options, children).await.unwrap();
    sup
}

#[tokio::test]
async fn children_start_in_order_and_stop_in_reverse() {
    let probe = Probe::default();
    let sup = start(Strategy::OneForOne, &probe).await;
    assert_eq!(probe.log(), ["start:a", "start:b", "start:c"]);
    let ids: Vec<_> = sup
        .which_children()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    probe.clear_log();
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(probe.log(), ["stop:c", "stop:b", "stop:a"]);
}

#[tokio::test]
async fn one_for_one_restarts_only_the_failed_child() {
    let probe = Probe::default();
    let sup = start(Strategy::OneForOne, &probe).await;
    let old_b = child_ref(&sup, "b").await;
    tell(&sup, "b", TestMsg::Panic).await;
    wait_started(&probe, &sup, "b", 2).await;
    assert_eq!(probe.starts("a"), 1);
    assert_eq!(probe.starts("c"), 1);
    let new_b = child_ref(&sup, "b").await;
    assert_ne!(old_b.get_id(), new_b.get_id(), "a fresh incarnation");
    let info = sup.which_children().await.unwrap();
    assert_eq!(info[1].restarts, 1);
    assert_eq!(info[0].restarts, 0);
    // The new incarnation works.
    let pong = ractor::call!(new_b, TestMsg::Ping).unwrap();
    assert_eq!(pong, "b");
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn one_for_all_stops_siblings_in_reverse_and_restarts_all_in_order() {
    let probe = Probe::default();
    let sup = start(Strategy::OneForAll, &probe).await;
    probe.clear_log();
    tell(&sup, "b", TestMsg::Panic).await;
    wait_started(&probe, &sup, "c", 2).await;
    // b panicked (no post_stop); the others were stopped last-started first, then all
    // restarted in start order.
    assert_eq!(
        probe.log(),
        ["stop:c", "stop:a", "start:a", "start:b", "start:c"]
    );
    for id in ["a", "b", "c"] {
        assert_eq!(probe.starts(id), 2, "{id}");
    }
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn rest_for_one_restarts_the_failed_child_and_those_after_it() {
    let probe = Probe::default();
    let sup = start(Strategy::RestForOne, &probe).await;
    probe.clear_log();
    tell(&sup, "b", TestMsg::Fail).await;
    wait_started(&probe, &sup, "c", 2).await;
    assert_eq!(probe.log(), ["stop:c", "start:b", "start:c"]);
    assert_eq!(probe.starts("a"), 1, "a started before b: untouched");
    assert_eq!(probe.starts("b"), 2);
    probe.clear_log();

    // The last child failing restarts only itself.
    tell(&sup, "c", TestMsg::Panic).await;
    wait_started(&probe, &sup, "c", 3).await;
    assert_eq!(probe.log(), ["start:c"]);
    assert_eq!((probe.starts("a"), probe.starts("b")), (1, 2));
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategies_hold_on_a_multi_thread_runtime() {
    for strategy in [
        Strategy::OneForOne,
        Strategy::OneForAll,
        Strategy::RestForOne,
    ] {
        let probe = Probe::default();
        let sup = start(strategy, &probe).await;
        for round in 2..=4 {
            probe.clear_log();
            tell(&sup, "b", TestMsg::Panic).await;
            wait_started(&probe, &sup, "b", round).await;
            let expected: &[&str] = match strategy {
                Strategy::OneForOne => &["start:b"],
                Strategy::OneForAll => &["stop:c", "stop:a", "start:a", "start:b", "start:c"],
                Strategy::RestForOne => &["stop:c", "start:b", "start:c"],
            };
            eventually("the restart to finish", || {
                probe.log().len() >= expected.len()
            })
            .await;
            assert_eq!(probe.log(), expected, "{strategy:?} round {round}");
        }
        sup.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}
