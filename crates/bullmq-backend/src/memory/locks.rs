//! Keeping locks (`worker_extend_locks.lua`) and recovering stalled jobs
//! (`worker_move_stalled.lua`).

use super::queue_state::QueueState;
use crate::worker::StalledReport;

/// Deferred failure of a job that stalled more often than allowed.
const STALLED_TOO_OFTEN: &str = "job stalled more than allowable limit";

/// Renews the locks still carrying their token; returns the ids that could not be renewed.
pub(crate) fn extend_locks(
    q: &mut QueueState,
    jobs: &[(String, String)],
    lock_ms: u64,
    now: u64,
) -> Vec<String> {
    let mut lost = Vec::new();
    for (id, token) in jobs {
        match q.locks.get_mut(id) {
            Some(lock) if lock.expires_at > now && &lock.token == token => {
                lock.expires_at = now.saturating_add(lock_ms);
                q.stalled.remove(id);
            }
            _ => lost.push(id.clone()),
        }
    }
    lost
}

/// One stalled check, at most once per `interval_ms` across every worker of the queue: jobs
/// marked by the previous check that still have no lock go back to wait; then every active
/// job is marked for the next check.
pub(crate) fn check_stalled(
    q: &mut QueueState,
    max_stalled: u32,
    interval_ms: u64,
    now: u64,
) -> StalledReport {
    let mut report = StalledReport::default();
    if q.stalled_check_until > now {
        return report;
    }
    q.stalled_check_until = now.saturating_add(interval_ms.max(1));
    let mut marked: Vec<String> = q.stalled.drain().collect();
    // Redis returns a set's members in no particular order; sorting makes runs repeatable.
    marked.sort();
    for id in marked {
        if q.lock(&id, now).is_some() {
            continue;
        }
        let Some(at) = q.active.iter().position(|a| *a == id) else {
            continue;
        };
        q.active.remove(at);
        if !q.jobs.contains_key(&id) {
            report.dropped.push(id);
            continue;
        }
        let stalled = q.int_field(&id, "stc") + 1;
        q.set_field(&id, "stc", stalled.to_string());
        // An iteration of a job scheduler is run again however often it stalls.
        let scheduled = q
            .field(&id, "rjk")
            .is_some_and(|rjk| q.schedulers.exists(rjk));
        if stalled > u64::from(max_stalled) && !scheduled {
            q.set_field(&id, "defa", STALLED_TOO_OFTEN);
        }
        let gated = q.paused_or_maxed();
        q.wait.push_back(id.clone());
        if !gated {
            q.signal_ready();
        }
        q.emit(
            now,
            "waiting",
            &[("jobId", id.clone()), ("prev", "active".into())],
        );
        q.emit(now, "stalled", &[("jobId", id.clone())]);
        report.recovered.push(id);
    }
    q.stalled = q.active.iter().cloned().collect();
    report
}
