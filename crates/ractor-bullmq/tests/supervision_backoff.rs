//! Restart backoff delays the re-spawn (virtual time via `tokio::time::pause`).

mod supervision_support;

use std::time::Duration;

use ractor_bullmq::supervision::{Backoff, RuntimeEvent, Strategy, Supervisor, SupervisorOptions};
use supervision_support::*;
use tokio::sync::broadcast;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn fixed_backoff_delays_the_restart() {
    let probe = Probe::default();
    let (tx, mut rx) = broadcast::channel(64);
    let options = SupervisorOptions::default()
        .backoff(Backoff::Fixed(Duration::from_secs(30)))
        .events(tx);
    let (sup, _) = Supervisor::spawn(None, options, vec![probe.spec("x")])
        .await
        .unwrap();
    let crashed_at = Instant::now();
    tell(&sup, "x", TestMsg::Panic).await;

    // While the backoff runs the child is reported as pending (no cell) and not started.
    eventually_async("restart pending", || async {
        sup.which_children().await.unwrap()[0].cell.is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(
        probe.starts("x"),
        1,
        "not restarted before the backoff elapsed"
    );

    wait_started(&probe, &sup, "x", 2).await;
    assert!(crashed_at.elapsed() >= Duration::from_secs(30));
    let delay = next_event(&mut rx, |e| match e {
        RuntimeEvent::ChildRestarted { delay, .. } => Some(*delay),
        _ => None,
    })
    .await;
    assert_eq!(delay, Duration::from_secs(30));
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn exponential_backoff_grows_per_consecutive_restart_and_is_capped() {
    let probe = Probe::default();
    let (tx, mut rx) = broadcast::channel(64);
    let options = SupervisorOptions::default()
        .max_restarts(10)
        .period(Duration::from_secs(600))
        .events(tx);
    let spec = probe.spec("x").backoff(Backoff::Exponential {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(4),
    });
    let (sup, _) = Supervisor::spawn(None, options, vec![spec]).await.unwrap();
    let mut delays = Vec::new();
    for n in 2..=5 {
        tell(&sup, "x", TestMsg::Fail).await;
        wait_started(&probe, &sup, "x", n).await;
        delays.push(
            next_event(&mut rx, |e| match e {
                RuntimeEvent::ChildRestarted { delay, .. } => Some(delay.as_secs()),
                _ => None,
            })
            .await,
        );
    }
    assert_eq!(delays, [1, 2, 4, 4]);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn one_for_all_backoff_restarts_the_whole_group_after_the_delay_in_order() {
    let probe = Probe::default();
    let options = SupervisorOptions::default()
        .strategy(Strategy::OneForAll)
        .backoff(Backoff::Fixed(Duration::from_secs(10)));
    let (sup, _) = Supervisor::spawn(None, options, vec![probe.spec("a"), probe.spec("b")])
        .await
        .unwrap();
    probe.clear_log();
    tell(&sup, "a", TestMsg::Panic).await;
    eventually("b stopped", || probe.log() == ["stop:b"]).await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(
        probe.log(),
        ["stop:b"],
        "nothing restarted during the backoff"
    );
    wait_started(&probe, &sup, "b", 2).await;
    assert_eq!(probe.log(), ["stop:b", "start:a", "start:b"]);
    sup.shutdown(Duration::from_secs(5)).await.unwrap();
}
