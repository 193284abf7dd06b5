//! The server's clock as arrivals show it: what every delay policy trails.
//!
//! A snapshot of tick `k` arriving at `a` has the *offset* `a - k * period`: the server's
//! tick clock shifted by that packet's one-way delay (plus a constant between the two
//! clocks, which cancels out). The smallest offset in a window is the path with no
//! queueing and the median the typical one; order statistics over hundreds of arrivals
//! barely move with jitter, so neither does playback. Times are seconds as `f64` on the
//! caller's clock.

use super::MAX_LAG_SECS;
use super::config::PREALLOCATE;
use crate::window::{SortedWindow, push_bounded};
use std::collections::VecDeque;

/// Gaps remembered to measure the send interval.
const GAP_WINDOW: usize = 32;

/// Arrival offsets over a window, and the send interval measured from the gaps between
/// snapshots' ticks (never configured: a server may change its send rate).
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    offsets: SortedWindow<f64>,
    gaps: VecDeque<u32>,
    interval: Option<u32>,
}

impl Clock {
    /// A clock over the last `history` arrivals (at least 1).
    pub(crate) fn new(history: usize) -> Self {
        let history = history.max(1);
        Self {
            offsets: SortedWindow::new(history, history.min(PREALLOCATE)),
            gaps: VecDeque::with_capacity(GAP_WINDOW),
            interval: None,
        }
    }

    /// Forgets everything (a new timeline).
    pub(crate) fn clear(&mut self) {
        self.offsets.clear();
        self.gaps.clear();
        self.interval = None;
    }

    /// Records an arrival offset.
    pub(crate) fn add_offset(&mut self, offset: f64) {
        if offset.is_finite() {
            self.offsets.push(offset);
        }
    }

    /// Records the tick gap between a snapshot and the newest before it.
    pub(crate) fn add_gap(&mut self, gap: u32) {
        if gap == 0 {
            return;
        }
        push_bounded(&mut self.gaps, gap, GAP_WINDOW);
        // Snapshots go out every `interval` ticks; losses only make gaps longer, so the
        // smallest recent gap is the interval.
        self.interval = self.gaps.iter().copied().min();
    }

    /// The same clock over only the last `recent` arrivals, with room to grow back to the
    /// full window. The send interval is kept whole: it does not depend on the link.
    pub(crate) fn tail(&self, recent: usize) -> Self {
        Self {
            offsets: self.offsets.tail(recent),
            gaps: self.gaps.clone(),
            interval: self.interval,
        }
    }

    /// Arrivals in the window.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    /// The earliest offset in the window: server tick time plus the smallest delay.
    pub(crate) fn min_offset(&self) -> Option<f64> {
        self.offsets.sorted().first().copied()
    }

    /// The latest offset in the window: server tick time plus the largest delay seen.
    pub(crate) fn max_offset(&self) -> Option<f64> {
        self.offsets.sorted().last().copied()
    }

    /// The median offset: server tick time plus the typical delay.
    pub(crate) fn median_offset(&self) -> Option<f64> {
        let sorted = self.offsets.sorted();
        sorted.get(sorted.len() / 2).copied()
    }

    /// The `q` quantile of the window's offsets (0: the earliest, 1: the latest).
    pub(crate) fn offset_quantile(&self, q: f64) -> Option<f64> {
        let sorted = self.offsets.sorted();
        let last = sorted.len().checked_sub(1)?;
        let i = (q.clamp(0.0, 1.0) * last as f64).round() as usize;
        sorted.get(i.min(last)).copied()
    }

    /// The window's offsets, smallest first.
    pub(crate) fn sorted_offsets(&self) -> &[f64] {
        self.offsets.sorted()
    }

    /// The last `n` offsets, in arrival order.
    pub(crate) fn recent_offsets(&self, n: usize) -> impl Iterator<Item = f64> + Clone + '_ {
        self.offsets.recent(n)
    }

    /// The measured send interval, in ticks.
    pub(crate) fn interval(&self) -> Option<u32> {
        self.interval
    }

    /// The lag (local time minus shown server time) that trails the median arrival by
    /// `intervals` send intervals of ticks of `period` seconds (one tick while the
    /// interval is unknown); `None` before any arrival.
    pub(crate) fn behind_median(&self, intervals: f64, period: f64) -> Option<f64> {
        let median = self.median_offset()?;
        let interval = f64::from(self.interval.unwrap_or(1)) * period;
        Some(median + intervals * interval)
    }

    /// `lag` within what playback can show: never ahead of the earliest arrival (nothing
    /// could be there yet), and at most [`MAX_LAG_SECS`] behind it, so that every delay
    /// stays a finite number. `None` before any arrival.
    pub(crate) fn bound(&self, lag: f64) -> Option<f64> {
        let min = self.min_offset()?;
        Some(lag.min(min + MAX_LAG_SECS).max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_give_min_and_median_over_the_window() {
        let mut c = Clock::new(4);
        for o in [5.0, 1.0, 3.0, 4.0, 2.0] {
            c.add_offset(o);
        }
        // 5.0 fell out of the window.
        assert_eq!(c.min_offset(), Some(1.0));
        assert_eq!(c.median_offset(), Some(3.0));
        c.add_offset(f64::NAN);
        assert_eq!(c.min_offset(), Some(1.0));
    }

    #[test]
    fn interval_is_the_smallest_recent_gap() {
        let mut c = Clock::new(8);
        for g in [6, 12, 6, 18, 0] {
            c.add_gap(g);
        }
        assert_eq!(c.interval(), Some(6));
        for _ in 0..GAP_WINDOW {
            c.add_gap(3);
        }
        assert_eq!(c.interval(), Some(3));
    }

    #[test]
    fn lags_stay_between_the_earliest_arrival_and_an_hour_past_it() {
        let mut c = Clock::new(8);
        assert_eq!((c.behind_median(3.0, 0.01), c.bound(0.0)), (None, None));
        for o in [0.05, 0.06, 0.07] {
            c.add_offset(o);
        }
        c.add_gap(2);
        let lag = c.behind_median(3.0, 0.01).unwrap();
        assert!((lag - (0.06 + 3.0 * 0.02)).abs() < 1e-12, "{lag}");
        assert_eq!(c.bound(0.0), Some(0.05));
        assert_eq!(c.bound(f64::INFINITY), Some(0.05 + MAX_LAG_SECS));
    }
}
