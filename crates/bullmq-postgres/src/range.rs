//! Node's `start..=end` windows (negative counts from the end, as Redis `LRANGE`/`ZRANGE`) over
//! an ordered set of rows, in SQL.
//!
//! The order of each state is the order of the Redis key that holds it, so a window means the
//! same on both backends: `wait` and `active` are lists whose head is the newest job (`seq`
//! descending; ascending reads the list from its tail), the other states are sorted sets by
//! score (`delayed` by due time, `prioritized` by priority then insertion, `completed` and
//! `failed` by finish time, `waiting-children` by insertion), with the member as tie-break.

use bullmq_protocol::JobState;

/// The filter and the ascending order of the jobs of `state`, or `None` for a state that holds
/// no job on this protocol (`paused` is a flag here, `unknown` has no rows).
pub(crate) fn state_order(state: JobState) -> Option<(&'static str, &'static str)> {
    Some(match state {
        JobState::Waiting => ("state = 'waiting' AND priority = 0", "seq"),
        JobState::Active => ("state = 'active'", "seq"),
        JobState::Delayed => ("state = 'delayed'", "process_at_ms, seq, id"),
        JobState::Prioritized => ("state = 'waiting' AND priority > 0", "priority, seq, id"),
        JobState::Completed => ("state = 'completed'", "finished_at_ms, id"),
        JobState::Failed => ("state = 'failed'", "finished_at_ms, id"),
        JobState::WaitingChildren => ("state = 'waiting-children'", "seq, id"),
        JobState::Paused | JobState::Unknown => return None,
    })
}

/// `order` reversed (`a, b` → `a DESC, b DESC`).
fn descending(order: &str) -> String {
    order
        .split(", ")
        .map(|c| format!("{c} DESC"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The SQL reading the ids of `state` in the window `$2..=$3` (`$1` the queue), or `None` when
/// the state holds nothing. Both bounds are bound as `int8`.
pub(crate) fn ids_sql(state: JobState, ascending: bool) -> Option<String> {
    let (filter, order) = state_order(state)?;
    // A list read descending is LRANGE from its head (newest first, `seq` descending), read
    // ascending it is the same list from its tail; a sorted set is ZRANGE / ZREVRANGE. Either
    // way ascending is the order above.
    let order = if ascending {
        order.to_string()
    } else {
        descending(order)
    };
    Some(window_sql(
        &format!("SELECT id AS v, {{ORDER}} FROM job WHERE queue = $1 AND {filter}"),
        &order,
    ))
}

/// Wraps `inner` (a SELECT of `v` with `{ORDER}` where the row number goes) so only the rows
/// of the window `$2..=$3` come out, in order.
pub(crate) fn window_sql(inner: &str, order: &str) -> String {
    let numbered = inner.replace(
        "{ORDER}",
        &format!("row_number() OVER (ORDER BY {order}) - 1 AS i, count(*) OVER () AS n"),
    );
    format!(
        "SELECT v FROM ({numbered}) r \
          WHERE i >= CASE WHEN $2::int8 < 0 THEN GREATEST(n + $2::int8, 0) ELSE $2::int8 END \
            AND i <= CASE WHEN $3::int8 < 0 THEN n + $3::int8 ELSE $3::int8 END \
          ORDER BY i"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_from_the_newest_by_default_and_sets_by_score() {
        let wait = ids_sql(JobState::Waiting, false).unwrap();
        assert!(wait.contains("ORDER BY seq DESC"), "{wait}");
        let wait_asc = ids_sql(JobState::Waiting, true).unwrap();
        assert!(wait_asc.contains("ORDER BY seq)"), "{wait_asc}");
        let delayed = ids_sql(JobState::Delayed, true).unwrap();
        assert!(
            delayed.contains("ORDER BY process_at_ms, seq, id)"),
            "{delayed}"
        );
        assert!(ids_sql(JobState::Paused, true).is_none());
    }
}
