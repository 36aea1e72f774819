//! The Worker's loop as a pure state machine: events in, commands out.
//!
//! [`Dispatcher`] decides *when* the Worker calls the store and *what* it asks for; the actor
//! (`worker.rs`) tells it what happened ([`Event`]s) and carries out what it says
//! ([`Command`]s). It holds no actor reference, no store and no tokio handle, and takes the
//! time as an argument, so every decision is unit-tested below without Redis or a runtime.
//!
//! What it owns:
//!
//! - **slots**: `concurrency` minus running jobs minus slots reserved by fetches in flight;
//! - **calls in flight**: up to [`MAX_INFLIGHT`] fetch-or-finish calls, one marker wait, one
//!   stalled check;
//! - **pending finishes** (`P`, the actor's record of a finished job), sent in batches whose
//!   round trip also fetches for the free slots. Batching needs no timer: with nothing in
//!   flight, finishes go out on the Worker's *next* turn ([`Command::FlushSoon`]), after those
//!   already in its mailbox joined them;
//! - **cooldowns**: the backoff after store errors, the rate-limit window, and the "queue looked
//!   empty" state that turns the next fetch into a blocking wait;
//! - **the lifecycle** ([`Lifecycle`]).
//!
//! The actor applies an event's state change with [`Dispatcher::handle`], and at the end of
//! every turn (every message it handles) calls [`Dispatcher::pump`], which starts the next
//! store call if one is due and stops the Worker once a close has nothing left to wait for.
//! Both queue their commands; the actor takes them with [`Dispatcher::take_command`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// At most this many store calls in flight: a finish batch may go out while other calls are
/// still running, so Redis and the worker overlap instead of waiting for each other.
pub(super) const MAX_INFLIGHT: usize = 3;

/// The third call in flight only carries at least this many finishes. Every call has a fixed
/// Redis cost (~300k instructions: script dispatch, meta reads, reply building) that small
/// batches do not amortise: a third call measured +12 % jobs/s at concurrency 100 and +30 % at
/// 1000, but -10 % at concurrency 10 when its batches were small.
pub(super) const THIRD_CALL_MIN_BATCH: usize = 25;

/// How long a forced close waits for store calls already in flight (and for the finishes of
/// jobs that ended before it) before the Worker stops anyway: with Redis unreachable a call
/// would otherwise hold the close for the call timeout. What is still unconfirmed then is left
/// to stalled recovery and listed in the close report.
pub(super) const FORCE_CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Longest wait for a closed rate limiter before fetching again, so delayed jobs keep being
/// promoted (Node `maximumRateLimitDelay`, default 30 s).
pub(super) const MAX_RATE_LIMIT_DELAY: Duration = Duration::from_secs(30);

/// Longest pause after repeated store errors.
pub(super) const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(5);

/// Where the Worker is in its life. Replaces the `started` / `paused` / `closing` flags: a
/// close wins over everything and is never undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Spawned with `autorun = false` and not run yet; `paused` remembers a pause asked for
    /// meanwhile, so running it then leaves it paused.
    Created {
        /// A pause was asked for before the Worker was run.
        paused: bool,
    },
    /// Fetching jobs.
    Running,
    /// Not fetching; running jobs continue and their finishes are still sent.
    Paused,
    /// Not fetching; waits for running jobs (or, with `force`, has cancelled them), sends the
    /// pending finishes, then stops.
    Closing {
        /// Running jobs were cancelled; the close gives up after [`FORCE_CLOSE_GRACE`].
        force: bool,
    },
    /// Nothing left to wait for (or a forced close's grace ran out): every turn issues
    /// [`Command::Stop`].
    Closed,
}

impl Lifecycle {
    /// Closing or closed.
    pub(super) fn is_closing(self) -> bool {
        matches!(self, Self::Closing { .. } | Self::Closed)
    }

    /// Paused, also before being run (no fetch until resumed).
    pub(super) fn is_paused(self) -> bool {
        matches!(self, Self::Paused | Self::Created { paused: true })
    }

    /// Whether fetched jobs are started: not once a forced close began (a graceful close
    /// still runs the jobs a fetch in flight brings).
    pub(super) fn starts_jobs(self) -> bool {
        !matches!(self, Self::Closing { force: true } | Self::Closed)
    }
}

/// What happened, as the actor reports it. `P` is the actor's record of one finished job.
#[derive(Debug)]
pub(super) enum Event<P> {
    /// Start fetching (`autorun`, or [`WorkerMsg::Run`](super::WorkerMsg::Run)).
    Run,
    /// Stop fetching.
    Pause,
    /// Fetch again.
    Resume,
    /// Change the number of slots (at least 1). Raised: the next pump fetches for the new
    /// slots; lowered: running jobs go on, and fetches wait until fewer run than allowed.
    SetConcurrency(usize),
    /// Close, cancelling running jobs when `force`.
    Close {
        /// Cancel the running jobs.
        force: bool,
    },
    /// A forced close that waits at most this long for store calls in flight (instead of
    /// [`FORCE_CLOSE_GRACE`]): a caller with a deadline (`close_timeout`, a supervisor's stop)
    /// spends no more than what is left of it.
    CloseWithin(Duration),
    /// A forced close's [`FORCE_CLOSE_GRACE`] ran out ([`Command::ArmCloseDeadline`]).
    CloseDeadline,
    /// A fetch or finish call answered: its slots are no longer reserved and the error
    /// backoff resets. `requested` is how many jobs it was asked to fetch.
    CallSucceeded {
        /// Jobs the call was asked to fetch.
        requested: u32,
    },
    /// A fetch call failed: back off before the next call.
    FetchFailed {
        /// Jobs the call was asked to fetch.
        requested: u32,
    },
    /// A finish call failed: its finishes are retried after a backoff, or given up when
    /// closing ([`Command::GiveUp`]).
    FinishFailed {
        /// Jobs the call was asked to fetch.
        requested: u32,
        /// The finishes the call carried, in order.
        batch: Vec<P>,
    },
    /// What a successful fetch (alone or in a finish call) brought.
    Fetched(FetchSummary),
    /// A fetched job is now running (it holds a slot until [`Event::JobEnded`]).
    JobStarted,
    /// A running job ended (whatever its outcome).
    JobEnded,
    /// A finished job to record in the store with the next batch.
    Record(P),
    /// A processor ended with a rate limit (its finish follows as a [`Event::Record`]): the
    /// finish batch that carries it fetches nothing, and the Worker waits for the limiter's
    /// remaining time its answer reports before fetching again (Node waits for the PTTL
    /// `moveJobFromActiveToWait` returns).
    RateLimited,
    /// The [`Command::FlushSoon`] message came round: send the pending finishes.
    Flush,
    /// A [`Command::WakeAfter`] timer fired.
    Wake,
    /// The marker wait ([`Command::WaitForWork`]) ended: woken, timed out, or `failed`.
    WaitEnded {
        /// The wait's store call failed (back off before the next call).
        failed: bool,
    },
    /// The stalled-check interval ticked.
    StalledTick,
    /// The stalled check ([`Command::CheckStalled`]) answered.
    StalledDone,
}

/// What a successful fetch brought, in the dispatcher's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct FetchSummary {
    /// Jobs the fetch was asked for.
    pub(super) requested: u32,
    /// Ids it took from the queue: jobs to run plus those the store failed or dropped itself.
    pub(super) taken: usize,
    /// The rate limiter is closed for this long (zero when not limited).
    pub(super) rate_limited_for: Duration,
    /// The earliest delayed job is ready this long from now.
    pub(super) next_delayed_in: Option<Duration>,
}

/// What the actor is to do.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Command<P> {
    /// Fetch up to `count` jobs (their slots are reserved until the call answers).
    Fetch {
        /// Jobs to ask for.
        count: usize,
    },
    /// Record `batch` in the store, fetching up to `fetch` jobs in the same round trip.
    FinishBatch {
        /// The finishes, oldest first.
        batch: Vec<P>,
        /// Jobs to fetch with it (0: none).
        fetch: usize,
    },
    /// Block on the queue's marker for at most `timeout`, then report [`Event::WaitEnded`].
    WaitForWork {
        /// How long to block.
        timeout: Duration,
    },
    /// Abort the marker wait in flight.
    CancelWait,
    /// Send [`Event::Wake`] after this long.
    WakeAfter(Duration),
    /// Send [`Event::Flush`] to the Worker's own mailbox, behind the messages already there.
    FlushSoon,
    /// Run a stalled check, then report [`Event::StalledDone`].
    CheckStalled,
    /// Cancel every running job (forced close).
    CancelRunning,
    /// Send [`Event::CloseDeadline`] after this long.
    ArmCloseDeadline(Duration),
    /// Closing, and a finish call failed: these finishes are not retried; their jobs are left
    /// to stalled recovery.
    GiveUp(Vec<P>),
    /// The forced close's grace ran out: leave these pending finishes and every running job
    /// to stalled recovery, without waiting for calls in flight ([`Command::Stop`] follows).
    AbandonAll(Vec<P>),
    /// The rate limiter closed for this long (it was open): report it.
    ReportRateLimited(Duration),
    /// A fetch found the queue empty (reported once until a fetch finds jobs again).
    ReportQueueEmpty,
    /// Nothing is running, pending or in flight any more: stop the Worker. Issued again for
    /// every turn the actor still takes after it (harmless: stopping is idempotent).
    Stop,
}

/// Whether the pending finishes go out on the next turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// Nothing asked.
    Idle,
    /// A [`Command::FlushSoon`] message is in the mailbox.
    Queued,
    /// That message came round: send the pending finishes now.
    Due,
}

/// The limits the dispatcher works within (from [`WorkerOptions`](super::WorkerOptions)).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Slots (`concurrency`).
    pub(super) concurrency: usize,
    /// At most this many finishes per call (`max_finish_batch`).
    pub(super) max_finish_batch: usize,
    /// Longest marker wait (`drain_delay`).
    pub(super) drain_delay: Duration,
}

/// The Worker's scheduling state; see the module doc.
#[derive(Debug)]
pub(super) struct Dispatcher<P> {
    limits: Limits,
    lifecycle: Lifecycle,
    /// Jobs running.
    running: usize,
    /// Slots promised to jobs that fetches in flight may bring.
    reserved: usize,
    /// Fetch and finish calls in flight.
    inflight: usize,
    pending: Vec<P>,
    /// A marker wait is in flight.
    waiting: bool,
    /// The last fetch brought fewer jobs than asked: wait on the marker before the next one.
    idle: bool,
    next_delayed_at: Option<Instant>,
    limited_until: Option<Instant>,
    /// A processor's rate limit is pending: no fetch until its finish batch answered.
    limit_finish_held: bool,
    /// The rate-limit window a [`Command::WakeAfter`] was issued for (one timer per window).
    limit_timer_for: Option<Instant>,
    /// No call before this (error backoff).
    cooldown_until: Option<Instant>,
    error_streak: u32,
    /// [`Command::ReportQueueEmpty`] was issued since a fetch last found jobs.
    empty_reported: bool,
    stalled_busy: bool,
    flush: Flush,
    commands: VecDeque<Command<P>>,
}

impl<P> Dispatcher<P> {
    /// A dispatcher for a Worker that starts fetching at once when `autorun`.
    pub(super) fn new(limits: Limits, autorun: bool) -> Self {
        Self {
            limits,
            lifecycle: if autorun {
                Lifecycle::Running
            } else {
                Lifecycle::Created { paused: false }
            },
            running: 0,
            reserved: 0,
            inflight: 0,
            pending: Vec::new(),
            waiting: false,
            idle: false,
            next_delayed_at: None,
            limited_until: None,
            limit_finish_held: false,
            limit_timer_for: None,
            cooldown_until: None,
            error_streak: 0,
            empty_reported: false,
            stalled_busy: false,
            flush: Flush::Idle,
            commands: VecDeque::new(),
        }
    }

    /// Where the Worker is in its life.
    pub(super) fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// Whether the Worker is waiting on the store: a call or the marker wait in flight, a
    /// stalled check running, or a backoff after a failed call. When false it is idle by its
    /// own choice (paused, slots full, rate-limited), and the progress watchdog has nothing to
    /// time.
    pub(super) fn awaiting_store(&self) -> bool {
        self.inflight > 0 || self.waiting || self.stalled_busy || self.error_streak > 0
    }

    /// The number of slots.
    pub(super) fn concurrency(&self) -> usize {
        self.limits.concurrency
    }

    /// Jobs running.
    pub(super) fn running(&self) -> usize {
        self.running
    }

    /// Slots neither running a job nor reserved by a fetch in flight.
    pub(super) fn free_slots(&self) -> usize {
        self.limits
            .concurrency
            .saturating_sub(self.running + self.reserved)
    }

    /// The next command to carry out, oldest first.
    pub(super) fn take_command(&mut self) -> Option<Command<P>> {
        self.commands.pop_front()
    }

    fn may_fetch(&self) -> bool {
        self.lifecycle == Lifecycle::Running
    }

    /// `getNextJob`: reserves one slot and returns `true` when the caller may fetch one job
    /// now (not closing, nothing in flight, a slot free); the caller then issues that fetch
    /// itself and reports its answer like any other.
    pub(super) fn try_fetch_one(&mut self) -> bool {
        if self.lifecycle.is_closing() || self.inflight > 0 || self.free_slots() == 0 {
            return false;
        }
        self.inflight += 1;
        self.reserved += 1;
        true
    }

    /// Applies `event` at `now`. Commands it implies at once (cancellations, timers, reports)
    /// are queued; store calls come from [`Self::pump`].
    pub(super) fn handle(&mut self, event: Event<P>, now: Instant) {
        match event {
            Event::Run => {
                if let Lifecycle::Created { paused } = self.lifecycle {
                    self.lifecycle = if paused {
                        Lifecycle::Paused
                    } else {
                        Lifecycle::Running
                    };
                }
            }
            Event::Pause => match self.lifecycle {
                Lifecycle::Running => self.lifecycle = Lifecycle::Paused,
                Lifecycle::Created { .. } => self.lifecycle = Lifecycle::Created { paused: true },
                _ => {}
            },
            Event::Resume => match self.lifecycle {
                Lifecycle::Paused => self.lifecycle = Lifecycle::Running,
                Lifecycle::Created { .. } => self.lifecycle = Lifecycle::Created { paused: false },
                _ => {}
            },
            Event::SetConcurrency(concurrency) => self.limits.concurrency = concurrency.max(1),
            Event::Close { force } => self.close(force),
            Event::CloseWithin(grace) => {
                if self.lifecycle != Lifecycle::Closed {
                    // A shorter deadline than the one armed by an earlier forced close wins:
                    // whichever timer fires first abandons what is left.
                    self.close(true);
                    self.commands.push_back(Command::ArmCloseDeadline(grace));
                }
            }
            Event::CloseDeadline if self.lifecycle == Lifecycle::Closed => {}
            Event::CloseDeadline => {
                // Nothing more is sent: what has not been confirmed is left behind.
                self.running = 0;
                let pending = std::mem::take(&mut self.pending);
                self.commands.push_back(Command::AbandonAll(pending));
                // Calls still in flight are not waited for (the store may be unreachable).
                self.lifecycle = Lifecycle::Closed;
            }
            Event::CallSucceeded { requested } => {
                self.call_returned(requested);
                self.error_streak = 0;
            }
            Event::FetchFailed { requested } => {
                self.call_returned(requested);
                self.back_off(now);
            }
            Event::FinishFailed {
                requested,
                mut batch,
            } => {
                self.call_returned(requested);
                if self.lifecycle.is_closing() {
                    // Closing with the store unreachable: give up; the jobs' locks expire and
                    // stalled recovery brings them back.
                    self.commands.push_back(Command::GiveUp(batch));
                } else {
                    // Retry the batch first; a finish already applied reports a missing lock.
                    batch.append(&mut self.pending);
                    self.pending = batch;
                    self.back_off(now);
                }
            }
            Event::Fetched(summary) => self.fetched(summary, now),
            Event::JobStarted => self.running += 1,
            Event::JobEnded => self.running = self.running.saturating_sub(1),
            Event::Record(finish) => self.pending.push(finish),
            Event::RateLimited => self.limit_finish_held = true,
            Event::Flush => self.flush = Flush::Due,
            Event::Wake => {}
            Event::WaitEnded { failed } => {
                self.waiting = false;
                // Whatever woke us (a signal, the timeout, an error), look again.
                self.idle = false;
                if failed {
                    self.back_off(now);
                }
            }
            Event::StalledTick => {
                if !self.stalled_busy && !self.lifecycle.is_closing() {
                    self.stalled_busy = true;
                    self.commands.push_back(Command::CheckStalled);
                }
            }
            Event::StalledDone => self.stalled_busy = false,
        }
    }

    fn close(&mut self, force: bool) {
        let was_forced = self.lifecycle == Lifecycle::Closing { force: true };
        if self.lifecycle == Lifecycle::Closed {
            // Already stopping: the next pump answers this close too.
            return;
        }
        let force = force || was_forced;
        if force && !was_forced {
            self.commands
                .push_back(Command::ArmCloseDeadline(FORCE_CLOSE_GRACE));
        }
        self.lifecycle = Lifecycle::Closing { force };
        if std::mem::take(&mut self.waiting) {
            self.commands.push_back(Command::CancelWait);
        }
        if force {
            self.commands.push_back(Command::CancelRunning);
        }
    }

    fn call_returned(&mut self, requested: u32) {
        self.inflight = self.inflight.saturating_sub(1);
        self.reserved = self.reserved.saturating_sub(requested as usize);
    }

    /// A store call failed: no call before a backoff that doubles with each consecutive
    /// failure (200 ms, 400 ms, … up to [`MAX_ERROR_BACKOFF`]), never a busy loop.
    fn back_off(&mut self, now: Instant) {
        self.error_streak = self.error_streak.saturating_add(1);
        let backoff = Duration::from_millis(100u64.saturating_mul(1 << self.error_streak.min(6)))
            .min(MAX_ERROR_BACKOFF);
        self.cooldown_until = Some(now + backoff);
        self.commands.push_back(Command::WakeAfter(backoff));
    }

    fn fetched(&mut self, summary: FetchSummary, now: Instant) {
        if !summary.rate_limited_for.is_zero() {
            let was_limited = self.limited_until.is_some_and(|until| until > now);
            self.limited_until = Some(now + summary.rate_limited_for.min(MAX_RATE_LIMIT_DELAY));
            if !was_limited {
                self.commands
                    .push_back(Command::ReportRateLimited(summary.rate_limited_for));
            }
        }
        if summary.requested == 0 {
            // The answer of a finish batch that fetched nothing (it carried a processor's rate
            // limit): only the limiter's remaining time is news.
            return;
        }
        self.next_delayed_at = summary.next_delayed_in.map(|d| now + d);
        self.idle = (summary.taken as u64) < u64::from(summary.requested);
        if summary.taken == 0 {
            if !self.empty_reported {
                self.empty_reported = true;
                self.commands.push_back(Command::ReportQueueEmpty);
            }
        } else {
            self.empty_reported = false;
        }
    }

    /// Ends a turn of the Worker: starts the next store call when one is due — a finish batch
    /// (fetching for the free slots in the same call), else, with nothing in flight, a fetch,
    /// or a marker wait when the queue looked empty — and stops the Worker once closing with
    /// nothing running, pending or in flight.
    pub(super) fn pump(&mut self, now: Instant) {
        self.start_call(now);
        self.maybe_stop();
    }

    fn start_call(&mut self, now: Instant) {
        if let Some(until) = self.cooldown_until {
            if until > now {
                return;
            }
            self.cooldown_until = None;
        }
        let free = self.free_slots();
        if self.finish_batch_due() {
            let take = self.pending.len().min(self.limits.max_finish_batch);
            let batch = if take == self.pending.len() {
                std::mem::take(&mut self.pending)
            } else {
                self.pending.drain(..take).collect()
            };
            // Like Node's moveToFinished, always look for more work in the same round trip:
            // it also refreshes the next delayed timestamp. Even while rate-limited: the
            // script checks the limiter itself, and asking is what keeps it from writing a
            // `drained` Node would not write (Node's worker asks too).
            // Not in the batch that carries a processor's rate limit: its answer says how long
            // the limiter stays closed, and the next fetch waits for that.
            let held = std::mem::take(&mut self.limit_finish_held);
            let fetch = if self.may_fetch() && !held { free } else { 0 };
            self.inflight += 1;
            self.reserved += fetch;
            self.commands
                .push_back(Command::FinishBatch { batch, fetch });
            return;
        }
        if self.flush == Flush::Queued {
            // The finish batch of the next turn fetches for the free slots too.
            return;
        }
        if self.inflight > 0 || !self.may_fetch() || free == 0 || self.limit_finish_held {
            return;
        }
        if let Some(until) = self.limited_until.filter(|until| *until > now) {
            // Look again when the limit window closes (one timer per window).
            if self.limit_timer_for != Some(until) {
                self.limit_timer_for = Some(until);
                self.commands.push_back(Command::WakeAfter(until - now));
            }
            return;
        }
        let delayed_due = self.next_delayed_at.is_some_and(|at| at <= now);
        if self.idle && !delayed_due {
            self.wait_for_work(now);
            return;
        }
        self.inflight += 1;
        self.reserved += free;
        self.commands.push_back(Command::Fetch { count: free });
    }

    /// Whether the pending finishes should go out now. With nothing in flight they go on the
    /// worker's next turn (after the finishes already in its mailbox joined them); a second
    /// call in flight waits for a quarter of the slots' worth of finishes, so batches stay
    /// large under load, and a third for [`THIRD_CALL_MIN_BATCH`]; closing, or with no job
    /// left running, they go at once (within those limits).
    fn finish_batch_due(&mut self) -> bool {
        let flush_now = self.flush == Flush::Due;
        if flush_now {
            self.flush = Flush::Idle;
        }
        if self.pending.is_empty() || self.inflight >= MAX_INFLIGHT {
            return false;
        }
        if self.inflight >= 2 && self.pending.len() < THIRD_CALL_MIN_BATCH {
            // Goes out with the next pump after a call returned.
            return false;
        }
        if self.lifecycle.is_closing() || self.running == 0 {
            return true;
        }
        if self.inflight > 0 {
            return self.pending.len() >= (self.limits.concurrency / 4).max(1);
        }
        if flush_now {
            return true;
        }
        if self.flush == Flush::Idle {
            self.flush = Flush::Queued;
            self.commands.push_back(Command::FlushSoon);
        }
        false
    }

    /// Blocks on the marker until jobs may be ready, the next delayed job is due, or
    /// `drain_delay` passes.
    fn wait_for_work(&mut self, now: Instant) {
        if self.waiting {
            return;
        }
        let mut timeout = self.limits.drain_delay;
        if let Some(at) = self.next_delayed_at {
            let until = at.saturating_duration_since(now);
            timeout = timeout.min(until.max(Duration::from_millis(1)));
        }
        self.waiting = true;
        self.commands.push_back(Command::WaitForWork { timeout });
    }

    fn maybe_stop(&mut self) {
        if self.lifecycle == Lifecycle::Closed {
            self.commands.push_back(Command::Stop);
            return;
        }
        if !self.lifecycle.is_closing()
            || self.running > 0
            || !self.pending.is_empty()
            || self.inflight > 0
        {
            return;
        }
        self.lifecycle = Lifecycle::Closed;
        self.commands.push_back(Command::Stop);
    }
}

#[cfg(test)]
mod tests;
