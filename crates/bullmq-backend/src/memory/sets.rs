//! The two containers the memory backend mirrors Redis with: a sorted set ([`ZSet`]) and the
//! position arithmetic of Redis lists ([`range_indices`]), so ranges read as `LRANGE`/`ZRANGE`.

use std::collections::{BTreeSet, HashMap};

/// A Redis sorted set: members ordered by score, then by member (as Redis orders ties).
#[derive(Debug, Default, Clone)]
pub(crate) struct ZSet {
    by_order: BTreeSet<(u64, String)>,
    scores: HashMap<String, u64>,
}

impl ZSet {
    /// `ZADD`: inserts or re-scores `member`.
    pub(crate) fn add(&mut self, score: u64, member: &str) {
        if let Some(old) = self.scores.insert(member.to_owned(), score) {
            self.by_order.remove(&(old, member.to_owned()));
        }
        self.by_order.insert((score, member.to_owned()));
    }

    /// `ZREM`: whether the member was there.
    pub(crate) fn remove(&mut self, member: &str) -> bool {
        match self.scores.remove(member) {
            Some(score) => {
                self.by_order.remove(&(score, member.to_owned()));
                true
            }
            None => false,
        }
    }

    /// `ZSCORE`.
    pub(crate) fn score(&self, member: &str) -> Option<u64> {
        self.scores.get(member).copied()
    }

    /// `ZCARD`.
    pub(crate) fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// `ZPOPMIN`: the lowest-scored member.
    pub(crate) fn pop_min(&mut self) -> Option<String> {
        let first = self.by_order.pop_first()?;
        self.scores.remove(&first.1);
        Some(first.1)
    }

    /// The lowest score and its member.
    pub(crate) fn first(&self) -> Option<(u64, &str)> {
        self.by_order.iter().next().map(|(s, m)| (*s, m.as_str()))
    }

    /// Members with `min <= score <= max`, lowest first.
    pub(crate) fn range_by_score(&self, min: u64, max: u64) -> Vec<String> {
        if min > max {
            return Vec::new();
        }
        self.by_order
            .range((min, String::new())..)
            .take_while(|(s, _)| *s <= max)
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// The highest score within `min..=max`.
    pub(crate) fn max_score_in(&self, min: u64, max: u64) -> Option<u64> {
        self.by_order
            .range((min, String::new())..)
            .take_while(|(s, _)| *s <= max)
            .last()
            .map(|(s, _)| *s)
    }

    /// Every member, lowest score first.
    pub(crate) fn members(&self) -> Vec<String> {
        self.by_order.iter().map(|(_, m)| m.clone()).collect()
    }

    /// `ZRANGE start end` (ascending) or `ZREVRANGE start end`, with Redis' index rules.
    pub(crate) fn range(&self, start: i64, end: i64, ascending: bool) -> Vec<String> {
        let Some((from, to)) = range_indices(self.len(), start, end) else {
            return Vec::new();
        };
        let take = to - from + 1;
        if ascending {
            self.by_order
                .iter()
                .skip(from)
                .take(take)
                .map(|(_, m)| m.clone())
                .collect()
        } else {
            self.by_order
                .iter()
                .rev()
                .skip(from)
                .take(take)
                .map(|(_, m)| m.clone())
                .collect()
        }
    }
}

/// Redis' inclusive range `start..=end` over `len` items (negative counts from the end), as
/// concrete indices; `None` when the range is empty.
pub(crate) fn range_indices(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    if len == 0 || start > end || start >= len || end < 0 {
        return None;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

/// `LRANGE` over a list held with its left end first.
pub(crate) fn list_range<'a, I>(list: I, len: usize, start: i64, end: i64) -> Vec<String>
where
    I: Iterator<Item = &'a String>,
{
    match range_indices(len, start, end) {
        Some((from, to)) => list.skip(from).take(to - from + 1).cloned().collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_redis_rules() {
        assert_eq!(range_indices(5, 0, -1), Some((0, 4)));
        assert_eq!(range_indices(5, -2, -1), Some((3, 4)));
        assert_eq!(range_indices(5, 3, 100), Some((3, 4)));
        assert_eq!(range_indices(5, 4, 3), None);
        assert_eq!(range_indices(0, 0, -1), None);
        assert_eq!(range_indices(5, -100, 1), Some((0, 1)));
    }

    #[test]
    fn zset_orders_by_score_then_member() {
        let mut z = ZSet::default();
        z.add(2, "b");
        z.add(1, "z");
        z.add(2, "a");
        assert_eq!(z.members(), ["z", "a", "b"]);
        assert_eq!(z.range(0, 0, false), ["b"]);
        assert_eq!(z.range_by_score(2, 2), ["a", "b"]);
        assert_eq!(z.max_score_in(0, 1), Some(1));
        z.add(0, "b");
        assert_eq!(z.pop_min().as_deref(), Some("b"));
        assert!(z.remove("a"));
        assert_eq!(z.len(), 1);
    }
}
