//! The dispatcher's decisions, step by step: each test feeds events at chosen instants and
//! asserts the exact commands that come out. Finishes are plain numbers (`P = u32`).

use super::*;

type D = Dispatcher<u32>;
type C = Command<u32>;

const DRAIN_DELAY: Duration = Duration::from_secs(5);

fn limits(concurrency: usize) -> Limits {
    Limits {
        concurrency,
        max_finish_batch: 1000,
        drain_delay: DRAIN_DELAY,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The commands queued so far.
fn commands(d: &mut D) -> Vec<C> {
    std::iter::from_fn(|| d.take_command()).collect()
}

/// One turn of the Worker: the event, then the end-of-turn pump.
fn turn(d: &mut D, event: Event<u32>, now: Instant) -> Vec<C> {
    d.handle(event, now);
    d.pump(now);
    commands(d)
}

/// Several events in one turn (as one message of the actor feeds them).
fn turn_of(d: &mut D, events: Vec<Event<u32>>, now: Instant) -> Vec<C> {
    for event in events {
        d.handle(event, now);
    }
    d.pump(now);
    commands(d)
}

fn fetched(requested: u32, taken: usize) -> Event<u32> {
    Event::Fetched(FetchSummary {
        requested,
        taken,
        ..FetchSummary::default()
    })
}

/// A fetch for `n` answered with `n` jobs, all started.
fn fetch_answered(n: u32) -> Vec<Event<u32>> {
    let mut events = vec![
        Event::CallSucceeded { requested: n },
        fetched(n, n as usize),
    ];
    events.extend((0..n).map(|_| Event::JobStarted));
    events
}

/// An autorun dispatcher whose `concurrency` slots all run a job, nothing in flight.
fn full(concurrency: usize, t0: Instant) -> D {
    let mut d = D::new(limits(concurrency), true);
    d.pump(t0);
    assert_eq!(commands(&mut d), vec![C::Fetch { count: concurrency }]);
    assert_eq!(
        turn_of(&mut d, fetch_answered(concurrency as u32), t0),
        vec![]
    );
    assert_eq!((d.running(), d.free_slots()), (concurrency, 0));
    d
}

/// A job ended and its finish was recorded.
fn ended(finish: u32) -> Vec<Event<u32>> {
    vec![Event::JobEnded, Event::Record(finish)]
}

// ---- fetching and slots ----

#[test]
fn autorun_fetches_for_every_slot_with_one_call_in_flight() {
    let t0 = Instant::now();
    let mut d = D::new(limits(4), true);
    d.pump(t0);
    assert_eq!(commands(&mut d), vec![C::Fetch { count: 4 }]);
    assert_eq!(d.free_slots(), 0, "the fetch reserved every slot");
    d.pump(t0);
    assert_eq!(commands(&mut d), vec![], "one fetch at a time");
}

#[test]
fn a_short_fetch_frees_its_reservation_and_waits_on_the_marker() {
    let t0 = Instant::now();
    let mut d = D::new(limits(4), true);
    d.pump(t0);
    commands(&mut d);
    let events = vec![
        Event::CallSucceeded { requested: 4 },
        fetched(4, 2),
        Event::JobStarted,
        Event::JobStarted,
    ];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::WaitForWork {
            timeout: DRAIN_DELAY
        }]
    );
    assert_eq!((d.running(), d.free_slots()), (2, 2));
    // Woken: fetch for the two free slots.
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: false }, t0),
        vec![C::Fetch { count: 2 }]
    );
}

#[test]
fn a_full_fetch_fetches_again_at_once() {
    let t0 = Instant::now();
    let mut d = D::new(limits(2), true);
    d.pump(t0);
    commands(&mut d);
    // Two jobs asked, two taken (one of them failed by the store): not idle.
    let events = vec![
        Event::CallSucceeded { requested: 2 },
        fetched(2, 2),
        Event::JobStarted,
    ];
    assert_eq!(turn_of(&mut d, events, t0), vec![C::Fetch { count: 1 }]);
}

#[test]
fn get_next_job_needs_a_free_slot_nothing_in_flight_and_no_close() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), false);
    d.pump(t0);
    assert_eq!(commands(&mut d), vec![], "not run: no fetch of its own");
    assert!(d.try_fetch_one());
    assert!(!d.try_fetch_one(), "a call is in flight");
    assert_eq!(turn_of(&mut d, fetch_answered(1), t0), vec![]);
    assert!(!d.try_fetch_one(), "no free slot");
    assert_eq!(
        turn_of(&mut d, ended(1), t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![]
    );
    assert!(d.try_fetch_one());
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 1 }, t0),
        vec![]
    );
    d.handle(Event::Close { force: false }, t0);
    assert!(!d.try_fetch_one(), "closing");
}

// ---- finish batches ----

#[test]
fn a_finish_waits_one_turn_to_batch_and_fetches_in_the_same_call() {
    let t0 = Instant::now();
    let mut d = full(4, t0);
    // Two jobs still run: the first finish asks for a flush on the next turn.
    assert_eq!(turn_of(&mut d, ended(1), t0), vec![C::FlushSoon]);
    // Finishes already in the mailbox join it; no second flush is asked.
    assert_eq!(turn_of(&mut d, ended(2), t0), vec![]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1, 2],
            fetch: 2
        }]
    );
    assert_eq!(
        d.free_slots(),
        0,
        "the finish call reserved the freed slots"
    );
}

#[test]
fn the_last_running_job_finishes_at_once() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    assert_eq!(
        turn_of(&mut d, ended(7), t0),
        vec![C::FinishBatch {
            batch: vec![7],
            fetch: 1
        }]
    );
}

#[test]
fn a_second_call_waits_for_a_quarter_of_the_slots() {
    let t0 = Instant::now();
    let mut d = full(8, t0);
    assert_eq!(turn_of(&mut d, ended(1), t0), vec![C::FlushSoon]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 1
        }]
    );
    // One call in flight: the next batch needs 8 / 4 = 2 finishes.
    assert_eq!(turn_of(&mut d, ended(2), t0), vec![]);
    assert_eq!(
        turn_of(&mut d, ended(3), t0),
        vec![C::FinishBatch {
            batch: vec![2, 3],
            fetch: 2
        }]
    );
}

#[test]
fn a_third_call_needs_a_large_batch_and_a_fourth_never_goes() {
    let t0 = Instant::now();
    let mut d = full(40, t0);
    assert_eq!(turn_of(&mut d, ended(0), t0), vec![C::FlushSoon]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![0],
            fetch: 1
        }]
    );
    // Second call: a quarter of the slots (10).
    for i in 1..10 {
        assert_eq!(turn_of(&mut d, ended(i), t0), vec![], "finish {i}");
    }
    match turn_of(&mut d, ended(10), t0).as_slice() {
        [C::FinishBatch { batch, fetch: 10 }] => assert_eq!(batch.len(), 10),
        other => panic!("expected the second batch, got {other:?}"),
    }
    // Third call: at least THIRD_CALL_MIN_BATCH finishes, more than a quarter of the slots.
    for i in 1..THIRD_CALL_MIN_BATCH as u32 {
        assert_eq!(turn_of(&mut d, ended(100 + i), t0), vec![]);
    }
    match turn_of(&mut d, ended(200), t0).as_slice() {
        [C::FinishBatch { batch, fetch: 25 }] => assert_eq!(batch.len(), THIRD_CALL_MIN_BATCH),
        other => panic!("expected the third batch, got {other:?}"),
    }
    // MAX_INFLIGHT calls in flight: nothing more, even with no job left running.
    for i in 0..4 {
        assert_eq!(turn_of(&mut d, ended(300 + i), t0), vec![]);
    }
    assert_eq!(d.running(), 0);
    // One call returns: still two in flight, and 4 finishes are too few for a third.
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 1 }, t0),
        vec![]
    );
    // Another returns: the waiting finishes go out at once (nothing runs), fetching for
    // every slot not reserved by the third call (40 - 25).
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 10 }, t0),
        vec![C::FinishBatch {
            batch: vec![300, 301, 302, 303],
            fetch: 15
        }]
    );
}

#[test]
fn batches_are_cut_at_max_finish_batch() {
    let t0 = Instant::now();
    let mut d = D::new(
        Limits {
            max_finish_batch: 2,
            ..limits(3)
        },
        true,
    );
    d.pump(t0);
    commands(&mut d);
    turn_of(&mut d, fetch_answered(3), t0);
    let mut events = ended(1);
    events.extend(ended(2));
    events.extend(ended(3));
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::FinishBatch {
            batch: vec![1, 2],
            fetch: 3
        }]
    );
    // The rest goes with the next turn, as a second call (nothing runs: at once).
    assert_eq!(
        turn(&mut d, Event::Wake, t0),
        vec![C::FinishBatch {
            batch: vec![3],
            fetch: 0
        }]
    );
}

// ---- errors and cooldowns ----

#[test]
fn store_errors_back_off_exponentially_up_to_five_seconds_and_reset_on_success() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    let mut now = t0;
    for expected in [200, 400, 800, 1600, 3200, 5000, 5000] {
        assert_eq!(
            turn(&mut d, Event::FetchFailed { requested: 1 }, now),
            vec![C::WakeAfter(ms(expected))]
        );
        // Nothing before the backoff ends, whatever wakes the Worker.
        assert_eq!(turn(&mut d, Event::Wake, now + ms(expected - 1)), vec![]);
        now += ms(expected);
        assert_eq!(turn(&mut d, Event::Wake, now), vec![C::Fetch { count: 1 }]);
    }
    assert_eq!(
        turn_of(
            &mut d,
            vec![Event::CallSucceeded { requested: 1 }, fetched(1, 1)],
            now
        ),
        vec![C::Fetch { count: 1 }]
    );
    assert_eq!(
        turn(&mut d, Event::FetchFailed { requested: 1 }, now),
        vec![C::WakeAfter(ms(200))],
        "a success resets the backoff"
    );
}

#[test]
fn a_failed_finish_batch_is_retried_first_after_the_backoff() {
    let t0 = Instant::now();
    let mut d = full(4, t0);
    turn_of(&mut d, ended(1), t0);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 1
        }]
    );
    // Another job ends while the call fails.
    d.handle(Event::JobEnded, t0);
    d.handle(
        Event::FinishFailed {
            requested: 1,
            batch: vec![1],
        },
        t0,
    );
    d.handle(Event::Record(2), t0);
    d.pump(t0);
    assert_eq!(
        commands(&mut d),
        vec![C::WakeAfter(ms(200))],
        "cooling down"
    );
    // After the backoff the failed finish goes first, batched with the new one as usual.
    assert_eq!(turn(&mut d, Event::Wake, t0 + ms(200)), vec![C::FlushSoon]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0 + ms(200)),
        vec![C::FinishBatch {
            batch: vec![1, 2],
            fetch: 2
        }]
    );
}

#[test]
fn a_failed_marker_wait_backs_off() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    let events = vec![Event::CallSucceeded { requested: 1 }, fetched(1, 0)];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![
            C::ReportQueueEmpty,
            C::WaitForWork {
                timeout: DRAIN_DELAY
            }
        ]
    );
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: true }, t0),
        vec![C::WakeAfter(ms(200))]
    );
    // After the backoff it fetches (a wait that ended is never resumed as is).
    assert_eq!(
        turn(&mut d, Event::Wake, t0 + ms(200)),
        vec![C::Fetch { count: 1 }]
    );
}

#[test]
fn a_rate_limited_fetch_waits_for_the_window_with_one_timer() {
    let t0 = Instant::now();
    let mut d = D::new(limits(2), true);
    d.pump(t0);
    commands(&mut d);
    let limited = |ms_left| {
        Event::Fetched(FetchSummary {
            requested: 2,
            taken: 1,
            rate_limited_for: ms(ms_left),
            next_delayed_in: None,
        })
    };
    let events = vec![
        Event::CallSucceeded { requested: 2 },
        limited(1000),
        Event::JobStarted,
    ];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::ReportRateLimited(ms(1000)), C::WakeAfter(ms(1000))]
    );
    assert_eq!(turn(&mut d, Event::Wake, t0 + ms(10)), vec![], "one timer");
    // When the window closes: the last fetch was short, so wait on the marker.
    assert_eq!(
        turn(&mut d, Event::Wake, t0 + ms(1000)),
        vec![C::WaitForWork {
            timeout: DRAIN_DELAY
        }]
    );
}

#[test]
fn a_limit_reported_while_limited_is_not_reported_again() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    let limited = Event::Fetched(FetchSummary {
        requested: 1,
        taken: 1,
        rate_limited_for: ms(500),
        next_delayed_in: None,
    });
    d.handle(Event::CallSucceeded { requested: 1 }, t0);
    d.handle(limited, t0);
    assert_eq!(commands(&mut d), vec![C::ReportRateLimited(ms(500))]);
    let limited = Event::Fetched(FetchSummary {
        requested: 1,
        taken: 0,
        rate_limited_for: ms(500),
        next_delayed_in: None,
    });
    d.handle(limited, t0 + ms(100));
    assert_eq!(
        commands(&mut d),
        vec![C::ReportQueueEmpty],
        "no second rate-limit report"
    );
}

#[test]
fn a_processor_rate_limit_waits_for_the_limiter_ttl_its_finish_reports() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    // The processor reported a rate limit: its finish goes out without a fetch (as Node's
    // moveJobFromActiveToWait), and no fetch starts before that call answered.
    let events = vec![Event::JobEnded, Event::RateLimited, Event::Record(1)];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    // The answer carries the limiter's remaining time: wait for it, then fetch (not block:
    // the job just went back to wait).
    let answered = vec![
        Event::CallSucceeded { requested: 0 },
        Event::Fetched(FetchSummary {
            requested: 0,
            taken: 0,
            rate_limited_for: ms(800),
            next_delayed_in: None,
        }),
    ];
    assert_eq!(
        turn_of(&mut d, answered, t0 + ms(5)),
        vec![C::ReportRateLimited(ms(800)), C::WakeAfter(ms(800))]
    );
    assert_eq!(turn(&mut d, Event::Wake, t0 + ms(804)), vec![]);
    assert_eq!(
        turn(&mut d, Event::Wake, t0 + ms(805)),
        vec![C::Fetch { count: 1 }]
    );
}

#[test]
fn a_processor_rate_limit_without_a_limiter_ttl_fetches_at_once() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    let events = vec![Event::JobEnded, Event::RateLimited, Event::Record(1)];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    // No limiter TTL: the Worker does not hear of a fetch, and fetches at once.
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![C::Fetch { count: 1 }]
    );
}

#[test]
fn a_long_limiter_ttl_is_waited_for_at_most_the_maximum_rate_limit_delay() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    let events = vec![Event::JobEnded, Event::RateLimited, Event::Record(1)];
    turn_of(&mut d, events, t0);
    let answered = vec![
        Event::CallSucceeded { requested: 0 },
        Event::Fetched(FetchSummary {
            requested: 0,
            taken: 0,
            rate_limited_for: Duration::from_secs(120),
            next_delayed_in: None,
        }),
    ];
    assert_eq!(
        turn_of(&mut d, answered, t0),
        vec![
            C::ReportRateLimited(Duration::from_secs(120)),
            C::WakeAfter(MAX_RATE_LIMIT_DELAY)
        ]
    );
}

// ---- an empty queue ----

#[test]
fn an_empty_queue_is_reported_once_until_jobs_come_back() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    let empty = vec![Event::CallSucceeded { requested: 1 }, fetched(1, 0)];
    let wait = C::WaitForWork {
        timeout: DRAIN_DELAY,
    };
    assert_eq!(turn_of(&mut d, empty, t0), vec![C::ReportQueueEmpty, wait]);
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: false }, t0),
        vec![C::Fetch { count: 1 }]
    );
    let empty = vec![Event::CallSucceeded { requested: 1 }, fetched(1, 0)];
    assert_eq!(
        turn_of(&mut d, empty, t0),
        vec![C::WaitForWork {
            timeout: DRAIN_DELAY
        }],
        "still empty: not reported again"
    );
    turn(&mut d, Event::WaitEnded { failed: false }, t0);
    // A job comes and goes: the next empty fetch is reported again.
    turn_of(&mut d, fetch_answered(1), t0);
    assert_eq!(
        turn_of(&mut d, ended(1), t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 1
        }]
    );
    let empty = vec![Event::CallSucceeded { requested: 1 }, fetched(1, 0)];
    assert_eq!(
        turn_of(&mut d, empty, t0),
        vec![
            C::ReportQueueEmpty,
            C::WaitForWork {
                timeout: DRAIN_DELAY
            }
        ]
    );
}

#[test]
fn the_marker_wait_ends_when_the_next_delayed_job_is_due() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    let delayed = |in_ms| {
        Event::Fetched(FetchSummary {
            requested: 1,
            taken: 0,
            rate_limited_for: Duration::ZERO,
            next_delayed_in: Some(ms(in_ms)),
        })
    };
    let events = vec![Event::CallSucceeded { requested: 1 }, delayed(2000)];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::ReportQueueEmpty, C::WaitForWork { timeout: ms(2000) }]
    );
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: false }, t0),
        vec![C::Fetch { count: 1 }]
    );
    // Empty again, but a delayed job is due now: fetch instead of waiting.
    let events = vec![Event::CallSucceeded { requested: 1 }, delayed(0)];
    assert_eq!(turn_of(&mut d, events, t0), vec![C::Fetch { count: 1 }]);
    // Due in 50 ms: wait that long, then the wait's end fetches.
    let events = vec![Event::CallSucceeded { requested: 1 }, delayed(50)];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::WaitForWork { timeout: ms(50) }]
    );
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: false }, t0 + ms(50)),
        vec![C::Fetch { count: 1 }]
    );
}

#[test]
fn drain_delay_caps_the_wait_for_a_later_delayed_job() {
    let t0 = Instant::now();
    let mut d = D::new(
        Limits {
            drain_delay: ms(100),
            ..limits(1)
        },
        true,
    );
    d.pump(t0);
    commands(&mut d);
    let events = vec![
        Event::CallSucceeded { requested: 1 },
        Event::Fetched(FetchSummary {
            requested: 1,
            taken: 0,
            rate_limited_for: Duration::ZERO,
            next_delayed_in: Some(ms(300)),
        }),
    ];
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::ReportQueueEmpty, C::WaitForWork { timeout: ms(100) }],
        "drain_delay is shorter than the delay"
    );
}

// ---- run-time concurrency ----

#[test]
fn raising_concurrency_fetches_for_the_new_slots_at_once() {
    let t0 = Instant::now();
    let mut d = full(2, t0);
    assert_eq!(
        turn(&mut d, Event::SetConcurrency(5), t0),
        vec![C::Fetch { count: 3 }]
    );
    assert_eq!(d.concurrency(), 5);
}

#[test]
fn lowering_concurrency_lets_running_jobs_finish_and_fetches_only_below_it() {
    let t0 = Instant::now();
    let mut d = full(3, t0);
    assert_eq!(turn(&mut d, Event::SetConcurrency(1), t0), vec![]);
    assert_eq!((d.running(), d.free_slots()), (3, 0));
    // Two of the three end: one still runs, the one slot is taken; the finishes go out
    // without fetching.
    assert_eq!(turn_of(&mut d, ended(1), t0), vec![C::FlushSoon]);
    d.handle(Event::JobEnded, t0);
    d.handle(Event::Record(2), t0);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1, 2],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![]
    );
    // The last one ends: now a slot is free.
    assert_eq!(
        turn_of(&mut d, ended(3), t0),
        vec![C::FinishBatch {
            batch: vec![3],
            fetch: 1
        }]
    );
}

#[test]
fn concurrency_is_never_set_below_one() {
    let t0 = Instant::now();
    let mut d = D::new(limits(2), true);
    d.handle(Event::SetConcurrency(0), t0);
    assert_eq!(d.concurrency(), 1);
}

// ---- lifecycle ----

#[test]
fn run_starts_fetching_and_a_pause_before_it_is_kept() {
    let t0 = Instant::now();
    let mut d = D::new(limits(2), false);
    assert_eq!(d.lifecycle(), Lifecycle::Created { paused: false });
    assert_eq!(turn(&mut d, Event::Pause, t0), vec![]);
    assert_eq!(turn(&mut d, Event::Run, t0), vec![]);
    assert_eq!(d.lifecycle(), Lifecycle::Paused);
    assert_eq!(turn(&mut d, Event::Resume, t0), vec![C::Fetch { count: 2 }]);
    assert_eq!(d.lifecycle(), Lifecycle::Running);
}

#[test]
fn a_paused_worker_still_sends_finishes_but_fetches_nothing() {
    let t0 = Instant::now();
    let mut d = full(2, t0);
    assert_eq!(turn(&mut d, Event::Pause, t0), vec![]);
    assert_eq!(turn_of(&mut d, ended(1), t0), vec![C::FlushSoon]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![]
    );
    assert_eq!(turn(&mut d, Event::Resume, t0), vec![C::Fetch { count: 1 }]);
}

#[test]
fn a_graceful_close_waits_for_running_jobs_sends_their_finishes_then_stops() {
    let t0 = Instant::now();
    let mut d = full(2, t0);
    assert_eq!(turn(&mut d, Event::Close { force: false }, t0), vec![]);
    assert!(d.lifecycle().is_closing() && d.lifecycle().starts_jobs());
    // Closing: finishes go at once, without fetching.
    assert_eq!(
        turn_of(&mut d, ended(1), t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    assert_eq!(
        turn_of(&mut d, ended(2), t0),
        vec![C::FinishBatch {
            batch: vec![2],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![C::Stop]
    );
    assert_eq!(d.lifecycle(), Lifecycle::Closed);
    // A turn after the stop (a message already in the mailbox) stops again.
    assert_eq!(turn(&mut d, Event::Wake, t0), vec![C::Stop]);
}

#[test]
fn closing_an_idle_worker_cancels_its_marker_wait_and_stops() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    d.pump(t0);
    commands(&mut d);
    turn_of(
        &mut d,
        vec![Event::CallSucceeded { requested: 1 }, fetched(1, 0)],
        t0,
    );
    assert_eq!(
        turn(&mut d, Event::Close { force: false }, t0),
        vec![C::CancelWait, C::Stop]
    );
}

#[test]
fn a_fetch_in_flight_holds_a_graceful_close_and_its_jobs_still_run() {
    let t0 = Instant::now();
    let mut d = D::new(limits(2), true);
    d.pump(t0);
    commands(&mut d);
    assert_eq!(turn(&mut d, Event::Close { force: false }, t0), vec![]);
    d.handle(Event::CallSucceeded { requested: 2 }, t0);
    d.handle(fetched(2, 1), t0);
    assert!(d.lifecycle().starts_jobs());
    assert_eq!(turn(&mut d, Event::JobStarted, t0), vec![]);
    assert_eq!(
        turn_of(&mut d, ended(1), t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(&mut d, Event::CallSucceeded { requested: 0 }, t0),
        vec![C::Stop]
    );
}

#[test]
fn closing_gives_up_a_finish_batch_that_failed() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    turn(&mut d, Event::Close { force: false }, t0);
    assert_eq!(
        turn_of(&mut d, ended(1), t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 0
        }]
    );
    assert_eq!(
        turn(
            &mut d,
            Event::FinishFailed {
                requested: 0,
                batch: vec![1]
            },
            t0
        ),
        vec![C::GiveUp(vec![1]), C::Stop],
        "no retry, no backoff"
    );
}

#[test]
fn a_forced_close_cancels_jobs_arms_its_deadline_once_and_starts_nothing() {
    let t0 = Instant::now();
    let mut d = full(2, t0);
    assert_eq!(
        turn(&mut d, Event::Close { force: true }, t0),
        vec![C::ArmCloseDeadline(FORCE_CLOSE_GRACE), C::CancelRunning]
    );
    assert!(!d.lifecycle().starts_jobs());
    // Closing again (even gracefully) keeps it forced, with the same deadline.
    assert_eq!(
        turn(&mut d, Event::Close { force: false }, t0),
        vec![C::CancelRunning]
    );
    assert_eq!(d.lifecycle(), Lifecycle::Closing { force: true });
    // Cancelled jobs that leave no finish (left to stalled recovery) still free the close.
    assert_eq!(turn(&mut d, Event::JobEnded, t0), vec![]);
    assert_eq!(turn(&mut d, Event::JobEnded, t0), vec![C::Stop]);
}

#[test]
fn a_close_within_a_grace_arms_that_deadline_and_a_late_deadline_changes_nothing() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    assert_eq!(
        turn(&mut d, Event::Close { force: true }, t0)[0],
        C::ArmCloseDeadline(FORCE_CLOSE_GRACE)
    );
    // A caller with less time left arms a shorter deadline on top.
    assert_eq!(
        turn(&mut d, Event::CloseWithin(ms(300)), t0),
        vec![C::CancelRunning, C::ArmCloseDeadline(ms(300))]
    );
    assert_eq!(
        turn(&mut d, Event::CloseDeadline, t0 + ms(300)),
        vec![C::AbandonAll(vec![]), C::Stop]
    );
    // The first deadline firing after the stop abandons nothing more.
    assert_eq!(
        turn(&mut d, Event::CloseDeadline, t0 + FORCE_CLOSE_GRACE),
        vec![C::Stop]
    );
    assert_eq!(turn(&mut d, Event::CloseWithin(ms(1)), t0), vec![C::Stop]);
}

#[test]
fn awaiting_store_is_true_while_a_call_is_out_or_after_a_failure() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), true);
    assert!(!d.awaiting_store(), "nothing asked yet");
    d.pump(t0);
    commands(&mut d);
    assert!(d.awaiting_store(), "the first fetch is in flight");
    turn(&mut d, Event::FetchFailed { requested: 1 }, t0);
    assert!(d.awaiting_store(), "backing off after a failure");
    assert_eq!(
        turn(&mut d, Event::Wake, t0 + ms(200)),
        vec![C::Fetch { count: 1 }]
    );
    turn_of(&mut d, fetch_answered(1), t0 + ms(200));
    assert!(
        !d.awaiting_store(),
        "the slot is full and nothing is in flight"
    );
}

#[test]
fn a_graceful_close_made_forced_arms_the_deadline_then() {
    let t0 = Instant::now();
    let mut d = full(1, t0);
    assert_eq!(turn(&mut d, Event::Close { force: false }, t0), vec![]);
    assert_eq!(
        turn(&mut d, Event::Close { force: true }, t0),
        vec![C::ArmCloseDeadline(FORCE_CLOSE_GRACE), C::CancelRunning]
    );
}

#[test]
fn the_forced_close_deadline_abandons_calls_in_flight_and_pending_finishes() {
    let t0 = Instant::now();
    let mut d = D::new(limits(4), true);
    d.pump(t0);
    commands(&mut d);
    let mut events = vec![Event::CallSucceeded { requested: 4 }, fetched(4, 3)];
    events.extend((0..3).map(|_| Event::JobStarted));
    assert_eq!(
        turn_of(&mut d, events, t0),
        vec![C::WaitForWork {
            timeout: DRAIN_DELAY
        }]
    );
    assert_eq!(turn_of(&mut d, ended(1), t0), vec![C::FlushSoon]);
    assert_eq!(
        turn(&mut d, Event::Flush, t0),
        vec![C::FinishBatch {
            batch: vec![1],
            fetch: 2
        }]
    );
    // The store goes away: the marker wait fails (backoff), the finish call hangs.
    assert_eq!(
        turn(&mut d, Event::WaitEnded { failed: true }, t0),
        vec![C::WakeAfter(ms(200))]
    );
    assert_eq!(
        turn(&mut d, Event::Close { force: true }, t0),
        vec![C::ArmCloseDeadline(FORCE_CLOSE_GRACE), C::CancelRunning]
    );
    assert_eq!(
        turn_of(&mut d, ended(2), t0),
        vec![],
        "cooling down: finish 2 waits"
    );
    // One job still runs, a call is in flight, finish 2 is pending: the deadline ends all.
    assert_eq!(
        turn(&mut d, Event::CloseDeadline, t0 + FORCE_CLOSE_GRACE),
        vec![C::AbandonAll(vec![2]), C::Stop]
    );
    assert_eq!((d.running(), d.lifecycle()), (0, Lifecycle::Closed));
    // The call's late answer changes nothing.
    assert_eq!(
        turn(
            &mut d,
            Event::CallSucceeded { requested: 2 },
            t0 + FORCE_CLOSE_GRACE
        ),
        vec![C::Stop]
    );
}

#[test]
fn stalled_checks_never_overlap_and_stop_with_the_close() {
    let t0 = Instant::now();
    let mut d = D::new(limits(1), false);
    // Stalled checks run even before the Worker is run (as they always did).
    assert_eq!(turn(&mut d, Event::StalledTick, t0), vec![C::CheckStalled]);
    assert_eq!(turn(&mut d, Event::StalledTick, t0), vec![]);
    assert_eq!(turn(&mut d, Event::StalledDone, t0), vec![]);
    assert_eq!(turn(&mut d, Event::StalledTick, t0), vec![C::CheckStalled]);
    turn(&mut d, Event::StalledDone, t0);
    d.handle(Event::Close { force: false }, t0);
    d.handle(Event::StalledTick, t0);
    assert_eq!(commands(&mut d), vec![]);
}
