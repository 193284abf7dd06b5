//! What arrivals say about the server's clock and the network: arrival offsets, the
//! snapshot send interval, and how much playback lag each snapshot needed.
//!
//! All times are seconds as `f64` on the caller's clock. A snapshot of tick `k` arriving
//! at `a` has the *offset* `a - k * period`: the server's tick clock shifted by that
//! packet's one-way delay (plus a constant between the two clocks, which cancels out).
//! The smallest offset in a window is the path with no queueing; how far a packet's
//! offset sits above it is its lateness.

use std::collections::VecDeque;

/// Gaps remembered to measure the send interval.
const GAP_WINDOW: usize = 32;

/// One consecutive pair of snapshots: playback may show the span between `prev` and the
/// new snapshot only once the new one has arrived, which is in time if the playback lag
/// (local time minus the server time shown) is at least `need`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Need {
    /// `arrival - prev_tick * period`: the smallest lag that has the pair ready when
    /// playback reaches `prev`.
    pub need: f64,
    /// Server time the pair spans, seconds.
    pub span: f64,
}

/// Windowed arrival statistics. Bounded: every window is a fixed-capacity queue, mirrored
/// by a sorted copy so order statistics cost a binary search, not a sort.
#[derive(Debug, Clone)]
pub(crate) struct ArrivalStats {
    history: usize,
    offsets: VecDeque<f64>,
    offsets_sorted: Vec<f64>,
    needs: VecDeque<Need>,
    /// `needs`, sorted by `need`.
    needs_sorted: Vec<Need>,
    gaps: VecDeque<u32>,
    interval: Option<u32>,
}

impl ArrivalStats {
    /// Statistics over the last `history` arrivals (at least 1).
    pub fn new(history: usize) -> Self {
        let history = history.max(1);
        let prealloc = history.min(super::buffer::PREALLOCATE);
        Self {
            history,
            offsets: VecDeque::with_capacity(prealloc),
            offsets_sorted: Vec::with_capacity(prealloc),
            needs: VecDeque::with_capacity(prealloc),
            needs_sorted: Vec::with_capacity(prealloc),
            gaps: VecDeque::with_capacity(GAP_WINDOW),
            interval: None,
        }
    }

    /// Forgets everything (a new timeline).
    pub fn clear(&mut self) {
        self.offsets.clear();
        self.offsets_sorted.clear();
        self.needs.clear();
        self.needs_sorted.clear();
        self.gaps.clear();
        self.interval = None;
    }

    /// Records an arrival offset.
    pub fn add_offset(&mut self, offset: f64) {
        if !offset.is_finite() {
            return;
        }
        if self.offsets.len() >= self.history {
            if let Some(old) = self.offsets.pop_front() {
                let i = self.offsets_sorted.partition_point(|x| *x < old);
                if i < self.offsets_sorted.len() {
                    self.offsets_sorted.remove(i);
                }
            }
        }
        self.offsets.push_back(offset);
        let i = self.offsets_sorted.partition_point(|x| *x < offset);
        self.offsets_sorted.insert(i, offset);
    }

    /// Records the need of a consecutive pair.
    pub fn add_need(&mut self, need: Need) {
        if !(need.need.is_finite() && need.span.is_finite() && need.span > 0.0) {
            return;
        }
        if self.needs.len() >= self.history {
            if let Some(old) = self.needs.pop_front() {
                let start = self.needs_sorted.partition_point(|n| n.need < old.need);
                let found = self.needs_sorted[start..]
                    .iter()
                    .take_while(|n| n.need == old.need)
                    .position(|n| n.span == old.span);
                if let Some(k) = found {
                    self.needs_sorted.remove(start + k);
                }
            }
        }
        self.needs.push_back(need);
        let i = self.needs_sorted.partition_point(|n| n.need < need.need);
        self.needs_sorted.insert(i, need);
    }

    /// Records the tick gap between a snapshot and the newest before it.
    pub fn add_gap(&mut self, gap: u32) {
        if gap == 0 {
            return;
        }
        push_bounded(&mut self.gaps, gap, GAP_WINDOW);
        // Snapshots go out every `interval` ticks; losses only make gaps longer, so the
        // smallest recent gap is the interval.
        self.interval = self.gaps.iter().copied().min();
    }

    /// The earliest offset in the window: server tick time plus the smallest delay.
    pub fn min_offset(&self) -> Option<f64> {
        self.offsets_sorted.first().copied()
    }

    /// The latest offset in the window: server tick time plus the largest delay seen.
    pub fn max_offset(&self) -> Option<f64> {
        self.offsets_sorted.last().copied()
    }

    /// The median offset: server tick time plus the typical delay.
    pub fn median_offset(&self) -> Option<f64> {
        self.offsets_sorted
            .get(self.offsets_sorted.len() / 2)
            .copied()
    }

    /// The measured send interval, in ticks.
    pub fn interval(&self) -> Option<u32> {
        self.interval
    }

    /// Number of pair needs in the window.
    pub fn needs_len(&self) -> usize {
        self.needs.len()
    }

    /// The largest need in the window.
    pub fn max_need(&self) -> Option<f64> {
        self.needs_sorted.last().map(|n| n.need)
    }

    /// The smallest playback lag at which the fraction of server time the window's pairs
    /// would *not* have been ready for is at most `fraction`. Pairs spanning more than
    /// `max_span` seconds (outages) are left out: no sensible lag rides them over.
    ///
    /// The missed time of a pair at lag `L` is `need - L` when positive: playback reaches
    /// the pair's start that long before the pair is complete. It is at most the pair's
    /// span (after that the next pair's own need takes over) and at least `min_miss`
    /// (the caller passes half a rendered frame). With frames at random phases a miss
    /// of `d` costs `d` of frames on average, but a renderer whose frame rate is locked to
    /// the tick rate samples the same phase every time: when the needs cluster tightly
    /// (a steady link) and the lag sits just inside the cluster, a miss of a fraction of
    /// a millisecond costs a whole frame, every time.
    pub fn lag_for_fraction(&self, fraction: f64, max_span: f64, min_miss: f64) -> Option<f64> {
        let sorted = &self.needs_sorted;
        let total: f64 = sorted
            .iter()
            .filter(|n| n.span <= max_span)
            .map(|n| n.span)
            .sum();
        if total <= 0.0 {
            return None;
        }
        let budget = fraction.clamp(0.0, 1.0) * total;
        // Only pairs needing more than `lag` miss anything: walk down from the top.
        let missed = |lag: f64| -> f64 {
            sorted
                .iter()
                .rev()
                .take_while(|n| n.need > lag)
                .filter(|n| n.span <= max_span)
                .map(|n| (n.need - lag).max(min_miss).min(n.span))
                .sum::<f64>()
        };
        let usable = || sorted.iter().filter(|n| n.span <= max_span);
        let mut hi = usable().map(|n| n.need).max_by(f64::total_cmp)?;
        let mut lo = usable().map(|n| n.need - n.span).min_by(f64::total_cmp)?;
        // `missed` falls monotonically from `total` at `lo` to 0 at `hi`: bisect to a
        // hundredth of a millisecond.
        for _ in 0..40 {
            if hi - lo < 1e-5 {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if missed(mid) <= budget {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(hi)
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, value: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_give_min_and_median_over_the_window() {
        let mut s = ArrivalStats::new(4);
        for o in [5.0, 1.0, 3.0, 4.0, 2.0] {
            s.add_offset(o);
        }
        // 5.0 fell out of the window.
        assert_eq!(s.min_offset(), Some(1.0));
        assert_eq!(s.median_offset(), Some(3.0));
        s.add_offset(f64::NAN);
        assert_eq!(s.min_offset(), Some(1.0));
    }

    #[test]
    fn interval_is_the_smallest_recent_gap() {
        let mut s = ArrivalStats::new(8);
        for g in [6, 12, 6, 18, 0] {
            s.add_gap(g);
        }
        assert_eq!(s.interval(), Some(6));
        for _ in 0..GAP_WINDOW {
            s.add_gap(3);
        }
        assert_eq!(s.interval(), Some(3));
    }

    #[test]
    fn lag_covers_the_requested_fraction_of_time() {
        let mut s = ArrivalStats::new(100);
        // 99 pairs ready at lag 0.1, one needing 0.2; each spans 0.1 s.
        for _ in 0..99 {
            s.add_need(Need {
                need: 0.1,
                span: 0.1,
            });
        }
        s.add_need(Need {
            need: 0.2,
            span: 0.1,
        });
        let full = s.lag_for_fraction(0.0, 1.0, 0.0).unwrap();
        assert!((full - 0.2).abs() < 1e-4, "{full}");
        // Missing 0.5% of 10 s = 0.05 s of the late pair's 0.1 s.
        let half = s.lag_for_fraction(0.005, 1.0, 0.0).unwrap();
        assert!((half - 0.15).abs() < 1e-4, "{half}");
        // 1% can be missed by skipping the late pair entirely.
        let most = s.lag_for_fraction(0.01, 1.0, 0.0).unwrap();
        assert!((most - 0.1).abs() < 1e-4, "{most}");
        // Outages are ignored.
        assert_eq!(s.lag_for_fraction(0.0, 0.05, 0.0), None);
        assert_eq!(ArrivalStats::new(3).lag_for_fraction(0.01, 1.0, 0.0), None);
    }
}
