//! One-line charts of counts: a column per value, taller for bigger values.

/// Glyphs from zero to the largest value: unicode blocks for a terminal.
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The same eight levels in ASCII, for pipes and log files that may not be UTF-8.
const ASCII: [char; 8] = ['_', '.', ':', '-', '=', '+', '*', '#'];

/// `values` as one glyph each, scaled to the largest. Zero always takes the lowest glyph and
/// any non-zero value a higher one, so a single job in a busy hour still shows.
pub(crate) fn sparkline(values: &[u64], unicode: bool) -> String {
    let glyphs = if unicode { &BLOCKS } else { &ASCII };
    let max = values.iter().copied().max().unwrap_or(0);
    values
        .iter()
        .map(|&value| glyphs[level(value, max, glyphs.len() - 1)])
        .collect()
}

/// `0` for zero, else `1..=top` in proportion to `max` (rounded up).
fn level(value: u64, max: u64, top: usize) -> usize {
    if value == 0 || max == 0 {
        return 0;
    }
    let top = top as u128;
    let scaled = (u128::from(value) * top).div_ceil(u128::from(max));
    usize::try_from(scaled.clamp(1, top)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_flat_and_the_largest_is_full() {
        assert_eq!(sparkline(&[0, 1, 7, 3, 0], true), "▁▂█▄▁");
        assert_eq!(sparkline(&[0, 1, 7, 3, 0], false), "_.#-_");
        assert_eq!(sparkline(&[0, 0], true), "▁▁");
        assert_eq!(sparkline(&[], true), "");
    }

    #[test]
    fn a_small_value_next_to_a_huge_one_still_shows() {
        assert_eq!(sparkline(&[1, 1_000_000], false), ".#");
        assert_eq!(sparkline(&[u64::MAX, 1], false), "#.");
    }
}
