//! [`Profile`]: the known, deliberate differences between BullMQ protocols, so one suite
//! asserts each backend's own reference behaviour instead of Redis' shapes everywhere.
//!
//! Every flag is a behaviour of Node BullMQ 6.7.0 itself on that protocol (its Lua scripts on
//! Redis, its installed SQL functions on PostgreSQL), which a compatible backend must copy:
//! a backend that "fixed" one would disagree with Node clients on the same queue.

/// What a protocol does where Node's two backends differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Profile {
    /// Every add takes a number from the queue's id counter, custom id or not (Redis
    /// `INCR id`); otherwise only jobs without a custom id do (PostgreSQL's per-queue
    /// sequence).
    pub custom_ids_take_a_number: bool,
    /// Event fields keep the order they were written in (a Redis stream entry); otherwise
    /// they come in the store's order (PostgreSQL `jsonb` sorts keys).
    pub event_field_order: bool,
    /// A read of the event log after a bulk add finds it trimmed to about
    /// `opts.maxLenEvents` (Redis `XADD MAXLEN ~` on every add); PostgreSQL's bulk add
    /// does not trim.
    pub bulk_add_trims_events: bool,
    /// A lock lapses by itself when its duration passes (a Redis key with a TTL): finishing
    /// afterwards reports a missing lock. On PostgreSQL the lock is a column that only the
    /// stalled check takes away.
    pub locks_lapse: bool,
    /// A job that already left `active` reports [`MissingLock`](crate::FinishCode::MissingLock)
    /// to its former holder (Redis checks the lock key first); otherwise
    /// [`NotActive`](crate::FinishCode::NotActive) (PostgreSQL checks the state first).
    pub lock_checked_before_state: bool,
    /// `promote_jobs` and `retry_jobs` move jobs to the back of `wait` whatever their
    /// priority (Node's Redis scripts); otherwise prioritized jobs stay prioritized.
    pub batch_moves_ignore_priority: bool,
    /// `promote_jobs` and `retry_jobs` emit `waiting` per job; Node's PostgreSQL functions
    /// emit nothing.
    pub batch_moves_emit_events: bool,
    /// A job moved back to wait by its worker goes to the head of the line (Redis); otherwise
    /// to its back (a prioritized one to the front of its priority on both).
    pub move_to_wait_goes_first: bool,
    /// Adding a job writes the queue's `opts.maxLenEvents` and `version` meta when absent
    /// (Node's Redis scripts); otherwise only a `Queue` opening does.
    pub add_stamps_meta: bool,
    /// Promoting a job that does not exist says "not delayed" (Redis reads the delayed set
    /// only); otherwise "not found".
    pub promote_missing_is_not_in_state: bool,
    /// A bulk add that meets a taken custom id emits `duplicated` (Redis); Node's PostgreSQL
    /// bulk insert skips it silently.
    pub bulk_add_emits_duplicated: bool,
    /// `remove_job` emits `removed` (Node's Redis script); Node's PostgreSQL function emits
    /// nothing.
    pub removed_event: bool,
    /// `retry_jobs` keeps the attempt counters; otherwise it resets `attemptsMade`.
    pub retry_jobs_keeps_attempts: bool,
    /// `retries-exhausted` is emitted only when the attempts are used up; Node's PostgreSQL
    /// function emits it with every final failure.
    pub retries_exhausted_only_when_exhausted: bool,
    /// `change_delay` emits `delayed` with the new due time; Node's PostgreSQL function emits
    /// no event.
    pub change_delay_emits_delayed: bool,
    /// `clean` emits `cleaned` also when it removed nothing (count `0`).
    pub cleaned_event_when_nothing: bool,
    /// `active` is listed in the order jobs were taken (Redis' active list); on PostgreSQL in
    /// queue order (the `seq` a job got when it last entered the queue), as Node's `getActive`
    /// lists it there.
    pub active_listed_by_activation: bool,
    /// Due delayed jobs join `wait` in the order they fall due (Redis); on PostgreSQL each
    /// keeps the place it got when added.
    pub delayed_promoted_in_due_order: bool,
    /// `drained` is emitted only when no job waits (Redis); Node's PostgreSQL finish also
    /// emits it when the queue is paused with jobs waiting.
    pub drained_only_when_wait_is_empty: bool,
    /// Worker connections are named `{prefix}:{base64(queue)}:w:{name}` (Node's Redis
    /// `CLIENT SETNAME`); on PostgreSQL the session's `application_name` is `{queue}:w:{name}`.
    pub redis_connection_names: bool,
    /// A job refused because its parent is missing takes no number from the queue's id
    /// counter (Redis checks the parent first); otherwise it does (Node's PostgreSQL function
    /// takes the id before it checks the parent, and a sequence is not rolled back).
    pub missing_parent_takes_no_number: bool,
    /// A job moving itself to `waiting-children` emits `waiting-children` (Node's Redis
    /// script); Node's PostgreSQL function emits nothing.
    pub waiting_children_step_emits_event: bool,
    /// Creating a scheduler's iteration (an upsert, or the next iteration) emits `added` and
    /// `waiting` / `delayed` (Node's Redis scripts); Node's PostgreSQL functions emit none.
    pub scheduler_iterations_emit_events: bool,
    /// How many `every` slots past the first taken one an upsert tries before it reports
    /// slots busy: Node's Redis script walks on for 32, its PostgreSQL function tries one.
    pub every_upsert_slots_tried: u32,
    /// A cron upsert whose run is taken by another job, made while the scheduler's own
    /// pending iteration is waiting to be replaced, takes that job over as its iteration
    /// (Node's PostgreSQL function removes the pending iteration, then resets the taken row);
    /// otherwise it is refused and nothing changes.
    pub cron_upsert_takes_over_a_taken_run: bool,
    /// A scheduler's former iteration can be removed as a job once the scheduler is gone
    /// (Redis asks the scheduler); Node's PostgreSQL function refuses every job a scheduler
    /// made (-8).
    pub former_iteration_removable: bool,
}

impl Profile {
    /// Node BullMQ 6.7.0 on Redis (the Redis backend and the memory backend).
    pub const NODE_REDIS: Profile = Profile {
        custom_ids_take_a_number: true,
        event_field_order: true,
        bulk_add_trims_events: true,
        locks_lapse: true,
        lock_checked_before_state: true,
        batch_moves_ignore_priority: true,
        batch_moves_emit_events: true,
        move_to_wait_goes_first: true,
        add_stamps_meta: true,
        promote_missing_is_not_in_state: true,
        removed_event: true,
        bulk_add_emits_duplicated: true,
        retry_jobs_keeps_attempts: true,
        retries_exhausted_only_when_exhausted: true,
        change_delay_emits_delayed: true,
        cleaned_event_when_nothing: true,
        redis_connection_names: true,
        delayed_promoted_in_due_order: true,
        drained_only_when_wait_is_empty: true,
        active_listed_by_activation: true,
        missing_parent_takes_no_number: true,
        waiting_children_step_emits_event: true,
        scheduler_iterations_emit_events: true,
        every_upsert_slots_tried: 32,
        cron_upsert_takes_over_a_taken_run: false,
        former_iteration_removable: true,
    };

    /// Node BullMQ 6.7.0 on PostgreSQL (its schema, ledger version 11).
    pub const NODE_POSTGRES: Profile = Profile {
        custom_ids_take_a_number: false,
        event_field_order: false,
        bulk_add_trims_events: false,
        locks_lapse: false,
        lock_checked_before_state: false,
        batch_moves_ignore_priority: false,
        batch_moves_emit_events: false,
        move_to_wait_goes_first: false,
        add_stamps_meta: false,
        promote_missing_is_not_in_state: false,
        removed_event: false,
        bulk_add_emits_duplicated: false,
        retry_jobs_keeps_attempts: false,
        retries_exhausted_only_when_exhausted: false,
        change_delay_emits_delayed: false,
        cleaned_event_when_nothing: false,
        redis_connection_names: false,
        delayed_promoted_in_due_order: false,
        drained_only_when_wait_is_empty: false,
        active_listed_by_activation: false,
        missing_parent_takes_no_number: false,
        waiting_children_step_emits_event: false,
        scheduler_iterations_emit_events: false,
        every_upsert_slots_tried: 1,
        cron_upsert_takes_over_a_taken_run: true,
        former_iteration_removable: false,
    };

    /// The code a former holder gets for a job that already left `active`.
    pub(crate) fn left_active(self) -> crate::FinishCode {
        if self.lock_checked_before_state {
            crate::FinishCode::MissingLock
        } else {
            crate::FinishCode::NotActive
        }
    }
}

tokio::task_local! {
    static PROFILE: Profile;
}

/// The profile of the case running on this task ([`Profile::NODE_REDIS`] outside
/// [`with_profile`]).
pub(crate) fn profile() -> Profile {
    PROFILE.try_with(|p| *p).unwrap_or(Profile::NODE_REDIS)
}

/// Runs one case under `profile` (what `conformance_tests!(…, profile = …)` does).
pub async fn with_profile<F: std::future::Future>(profile: Profile, case: F) -> F::Output {
    PROFILE.scope(profile, case).await
}
