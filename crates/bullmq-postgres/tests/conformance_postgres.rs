//! The backend conformance suite on PostgreSQL, on a schema Node BullMQ 6.7.0's migrator made
//! (see `common`): every case of the suite, each asserting Node's behaviour on PostgreSQL
//! where the profile says it differs from Redis.

mod common;

use std::sync::Arc;

use bullmq_backend::Backend;

async fn postgres() -> Arc<dyn Backend> {
    common::backend().await
}

bullmq_backend::conformance_tests!(@cases postgres(), profile = bullmq_backend::conformance::Profile::NODE_POSTGRES;
    add_and_read_back,
    bulk_add_keeps_order,
    custom_id_duplicate,
    deduplication_window_and_release,
    deduplication_ttl_expires,
    deduplication_modes,
    deduplication_extend,
    retry_placement,
    retention_by_age,
    priorities_and_lifo_order,
    delayed_job_promoted_when_due,
    fetch_locks_and_counts_attempts,
    complete_with_retention,
    finish_and_fetch_in_one_call,
    retry_then_fail_with_retries_exhausted,
    retry_backoff_delay,
    lock_checks_on_finish,
    fetch_with_exact_token,
    extend_locks_renews_own_locks,
    stalled_jobs_recovered,
    pause_gates_fetch,
    rate_limits,
    wait_for_job_woken_by_add,
    step_job_moves_back_to_wait,
    event_log_read_from_a_cursor,
    event_log_trimmed_to_max_len,
    publish_custom_event,
    drain_removes_waiting_jobs,
    clean_removes_old_finished_jobs,
    obliterate_deletes_a_paused_queue,
    remove_job_by_id,
    retry_moves_a_finished_job_back,
    promote_moves_a_delayed_job_now,
    change_priority_requeues_a_waiting_job,
    change_delay_reschedules_a_delayed_job,
    clear_logs_keeps_the_newest,
    retry_jobs_moves_finished_jobs_in_batches,
    promote_jobs_moves_delayed_jobs_in_batches,
    extend_lock_checks_the_token,
    logs_progress_and_data,
    metrics_count_finished_jobs,
    queue_control_limits_gate_fetches,
    queue_control_keys_and_counts,
    declined_capabilities_answer_unsupported,
    list_workers_finds_open_worker_stores,
    list_queues_finds_a_queue_with_jobs,
    flow_children_block_parent_completion,
    flow_failed_child_refuses_parent_completion,
    flow_add_places_parents_and_children,
    flow_add_attaches_existing_children,
    flow_add_refusals_write_nothing,
    flow_read_node_lists_children,
    flow_remove_with_or_without_children,
    step_job_waits_for_its_children,
    step_job_with_a_failed_child_cannot_wait,
    scheduler_upsert_creates_scheduler_and_iteration,
    scheduler_offset_and_start_date_delay_the_first_run,
    scheduler_upsert_replaces_pending_iteration,
    scheduler_new_interval_resets_the_slot,
    scheduler_next_iteration_from_the_current_one_only,
    scheduler_upsert_while_iteration_runs,
    scheduler_remove_deletes_scheduler_and_delayed_iteration,
    scheduler_listing_and_counts,
    scheduler_every_walks_past_taken_slots,
    scheduler_cron_next_iteration_by_the_worker,
    scheduler_cron_run_collision,
    scheduler_iteration_kept_by_drain_and_clean,
    maintenance_children_dedup_and_counts,
);

/// The memory backend (Node's Redis behaviour) and PostgreSQL agree step by step over
/// pseudo-random operations, leaving out those the profile says differ by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_and_postgres_agree_where_the_protocols_do() {
    let reference: Arc<dyn Backend> = Arc::new(bullmq_backend::memory::MemoryBackend::new());
    let candidate = postgres().await;
    let queue = bullmq_backend::conformance::unique_queue_name("differential");
    bullmq_backend::conformance::with_profile(
        bullmq_backend::conformance::Profile::NODE_POSTGRES,
        bullmq_backend::conformance::differential::backends_agree(
            reference,
            candidate,
            &queue,
            1..=8,
            120,
        ),
    )
    .await;
}
