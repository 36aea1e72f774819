//! The next run of an `every` scheduler, as Node 6.7.0's scripts compute it.
//!
//! Backends compute this where they write (the Redis scripts hold the same arithmetic in Lua,
//! so the next slot is decided atomically with the write); this is the reference the other
//! backends use and the Lua is tested against.

/// The next run of an `every` scheduler and the offset it keeps.
///
/// - First run (`prev` absent): at `start_date` if later than `now`; else, with an `offset`,
///   at the first slot `k * every + offset` after `now`; else now.
/// - Later runs: `prev + every`; when that is already past (workers were down), the first
///   aligned slot after `now` — missed runs are skipped, not replayed.
/// - The returned offset is `offset` when it is non-zero, else the phase of the run within its
///   slot (`next mod every`), which is what Node stores in the scheduler hash.
///
/// `every` must be at least 1.
///
/// ```
/// use bullmq_protocol::scheduler::every_next_millis;
///
/// // First run of `every: 1000` at 10_250: now, with the phase 250 remembered.
/// assert_eq!(every_next_millis(None, 1000, 10_250, None, None), (10_250, 250));
/// // With offset 100 the first run waits for the next slot.
/// assert_eq!(every_next_millis(None, 1000, 10_250, Some(100), None), (11_100, 100));
/// // Workers were down from 11_250 to 15_700: the missed slots are skipped.
/// assert_eq!(every_next_millis(Some(11_250), 1000, 15_700, Some(250), None), (16_250, 250));
/// ```
#[must_use]
pub fn every_next_millis(
    prev: Option<u64>,
    every: u64,
    now: u64,
    offset: Option<u64>,
    start_date: Option<u64>,
) -> (u64, u64) {
    let every = every.max(1);
    let offset = offset.unwrap_or(0);
    let slot_start = |t: u64| t / every * every;
    let next = match prev {
        None => match start_date {
            Some(start) => start.max(now),
            None if offset > 0 => {
                let aligned = slot_start(now) + offset;
                if aligned <= now {
                    aligned + every
                } else {
                    aligned
                }
            }
            None => now,
        },
        Some(prev) => {
            let next = prev + every;
            if next < now {
                let aligned = slot_start(now) + offset;
                if aligned <= now {
                    aligned + every
                } else {
                    aligned
                }
            } else {
                next
            }
        }
    };
    let offset = if offset == 0 {
        next - slot_start(next)
    } else {
        offset
    };
    (next, offset)
}

#[cfg(test)]
mod tests {
    use super::every_next_millis;

    #[test]
    fn start_date_in_the_future_is_the_first_run() {
        assert_eq!(
            every_next_millis(None, 1000, 5_000, None, Some(9_300)),
            (9_300, 300)
        );
        // A start date already past counts as now.
        assert_eq!(
            every_next_millis(None, 1000, 5_000, None, Some(1_000)),
            (5_000, 0)
        );
    }

    #[test]
    fn an_offset_equal_to_the_phase_of_now_waits_a_whole_slot() {
        assert_eq!(
            every_next_millis(None, 1000, 10_100, Some(100), None),
            (11_100, 100)
        );
    }

    #[test]
    fn on_time_runs_follow_the_previous_one() {
        assert_eq!(
            every_next_millis(Some(10_250), 1000, 10_260, Some(250), None),
            (11_250, 250)
        );
        // The next slot exactly now is not a missed one.
        assert_eq!(
            every_next_millis(Some(10_250), 1000, 11_250, Some(250), None),
            (11_250, 250)
        );
    }

    #[test]
    fn catch_up_lands_on_the_offset_grid() {
        // Aligned slot after now: 15_000 + 900 > 15_700.
        assert_eq!(
            every_next_millis(Some(10_900), 1000, 15_700, Some(900), None),
            (15_900, 900)
        );
        // Without an offset the grid is the interval's own.
        assert_eq!(
            every_next_millis(Some(10_000), 1000, 15_700, None, None),
            (16_000, 0)
        );
    }
}
