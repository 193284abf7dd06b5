//! The adaptive policy's statistics of arrivals: every window its estimates read, in one
//! place. Bounded: every window is a fixed-capacity queue, and those asked for order
//! statistics are mirrored by a sorted copy, so a quantile costs a lookup, not a sort.

use super::super::clock::Clock;
use super::super::config::PREALLOCATE;
use super::super::policy::{Arrival, Need};
use crate::window::{SortedWindow, last, push_bounded};
use std::collections::VecDeque;

/// Snapshots over which the loss rate is measured (at least the arrival history): the
/// model's tails go with the loss rate squared, so it needs more samples than the rest.
const LOSS_WINDOW: usize = 2048;

/// Frames remembered for where in the send interval rendering samples.
const FRAME_WINDOW: usize = 256;

/// Windowed arrival statistics: the clock, every consecutive pair's need, the ticks
/// received (for losses) and the times of rendered frames.
#[derive(Debug, Clone)]
pub(crate) struct ArrivalStats {
    history: usize,
    clock: Clock,
    /// Consecutive pairs' needs, in arrival order (the window estimate replays them).
    needs: VecDeque<Need>,
    /// The same needs' values, sorted: the shift test compares recent ones with the rest.
    need_values: SortedWindow<f64>,
    /// Ticks of the last `max(history, LOSS_WINDOW)` accepted snapshots, for the loss model.
    ticks: SortedWindow<i64>,
    /// The last tick recorded, as sent and unwrapped: ticks are kept unwrapped (counting
    /// on from the first one) so that sorting them survives wrap-around.
    last_tick: Option<(u32, i64)>,
    /// Local times of the last rendered frames: where in the send interval frames fall.
    frames: VecDeque<f64>,
}

impl ArrivalStats {
    /// Statistics over the last `history` arrivals (at least 1).
    pub(crate) fn new(history: usize) -> Self {
        let history = history.max(1);
        let prealloc = history.min(PREALLOCATE);
        Self {
            history,
            clock: Clock::new(history),
            needs: VecDeque::with_capacity(prealloc),
            need_values: SortedWindow::new(history, prealloc),
            ticks: SortedWindow::new(history.max(LOSS_WINDOW), prealloc),
            last_tick: None,
            frames: VecDeque::with_capacity(FRAME_WINDOW),
        }
    }

    /// Forgets everything (a new timeline).
    pub(crate) fn clear(&mut self) {
        self.clock.clear();
        self.needs.clear();
        self.need_values.clear();
        self.ticks.clear();
        self.last_tick = None;
        self.frames.clear();
    }

    /// Records an accepted snapshot.
    pub(crate) fn record(&mut self, arrival: &Arrival) {
        self.add_offset(arrival.offset);
        self.add_tick(arrival.tick);
        if let Some((gap, need)) = arrival.pair {
            self.add_gap(gap);
            self.add_need(need);
        }
    }

    /// Records an arrival offset.
    pub(crate) fn add_offset(&mut self, offset: f64) {
        self.clock.add_offset(offset);
    }

    /// Records the tick of an accepted snapshot (in any order).
    pub(crate) fn add_tick(&mut self, tick: u32) {
        let unwrapped = match self.last_tick {
            Some((last, at)) => at + i64::from(tick.wrapping_sub(last) as i32),
            None => 0,
        };
        self.last_tick = Some((tick, unwrapped));
        self.ticks.push(unwrapped);
    }

    /// Records the tick gap between a snapshot and the newest before it.
    pub(crate) fn add_gap(&mut self, gap: u32) {
        self.clock.add_gap(gap);
    }

    /// Records the need of a consecutive pair.
    pub(crate) fn add_need(&mut self, need: Need) {
        if !need.is_usable() {
            return;
        }
        push_bounded(&mut self.needs, need, self.history);
        self.need_values.push(need.need);
    }

    /// Records the local time of a rendered frame.
    pub(crate) fn add_frame(&mut self, now: f64) {
        if now.is_finite() {
            push_bounded(&mut self.frames, now, FRAME_WINDOW);
        }
    }

    /// The same statistics over only the last `recent` arrivals (the send interval and
    /// the frames are kept whole: neither depends on the link), with room to grow back
    /// to the full window.
    pub(crate) fn tail(&self, recent: usize) -> Self {
        let mut needs = VecDeque::with_capacity(self.needs.capacity());
        needs.extend(last(&self.needs, recent).copied());
        Self {
            history: self.history,
            clock: self.clock.tail(recent),
            needs,
            need_values: self.need_values.tail(recent),
            ticks: self.ticks.tail(recent),
            last_tick: self.last_tick,
            frames: self.frames.clone(),
        }
    }

    /// Arrivals in the window (at most the history it was made with).
    pub(crate) fn len(&self) -> usize {
        self.clock.len()
    }

    /// The arrivals the window holds when full.
    pub(crate) fn history(&self) -> usize {
        self.history
    }

    /// The clock: offsets and the send interval.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The window's pairs, in arrival order.
    pub(crate) fn needs(&self) -> impl Iterator<Item = &Need> + Clone {
        self.needs.iter()
    }

    /// The last `n` pairs' needs, in arrival order.
    pub(crate) fn recent_needs(&self, n: usize) -> impl Iterator<Item = f64> + Clone + '_ {
        last(&self.needs, n).map(|n| n.need)
    }

    /// The window's needs, smallest first.
    pub(crate) fn sorted_needs(&self) -> &[f64] {
        self.need_values.sorted()
    }

    /// Number of pair needs in the window.
    pub(crate) fn needs_len(&self) -> usize {
        self.needs.len()
    }

    /// The largest need in the window.
    pub(crate) fn max_need(&self) -> Option<f64> {
        self.needs.iter().map(|n| n.need).max_by(f64::total_cmp)
    }

    /// The ticks received, unwrapped, smallest first.
    pub(crate) fn sorted_ticks(&self) -> &[i64] {
        self.ticks.sorted()
    }

    /// The ticks the loss window holds when full.
    pub(crate) fn loss_window(&self) -> usize {
        self.ticks.capacity()
    }

    /// The loss runs among the last `last` gaps of the window of ticks (see
    /// [`LossRuns`]; `usize::MAX` for all of them); `None` until the interval is known.
    pub(crate) fn loss_runs(&self, last: usize) -> Option<LossRuns> {
        let interval = i64::from(self.clock.interval()?);
        let mut runs = LossRuns::default();
        for pair in self.ticks.sorted().windows(2).rev() {
            if runs.gaps == last {
                break;
            }
            let gap = pair[1] - pair[0];
            // A tick recorded twice is one snapshot.
            if gap <= 0 {
                continue;
            }
            runs.gaps += 1;
            if gap > interval {
                runs.runs += 1;
                runs.since_first = runs.gaps;
            }
        }
        Some(runs)
    }

    /// Local times of the last rendered frames, oldest first.
    pub(crate) fn frames(&self) -> &VecDeque<f64> {
        &self.frames
    }
}

/// Loss runs among the newest gaps of the window of ticks: a gap is the space between
/// two consecutive snapshots received, in tick order, and a run is a gap longer than the
/// send interval (one snapshot lost or more). Made by [`ArrivalStats::loss_runs`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LossRuns {
    /// Gaps counted.
    pub(crate) gaps: usize,
    /// Runs among them.
    pub(crate) runs: usize,
    /// Gaps from the oldest run among them to the newest gap, that one included (0
    /// without a run): the arrivals since losses began, if they did.
    pub(crate) since_first: usize,
}

#[cfg(test)]
mod tests {
    use super::streams::slow_then_fast;

    #[test]
    fn a_tail_is_the_window_over_only_its_last_arrivals() {
        let s = slow_then_fast(64, 100, 10);
        assert_eq!(s.len(), 64);
        let mut tail = s.tail(10);
        assert_eq!((tail.len(), tail.needs_len()), (10, 10));
        assert_eq!(tail.clock().max_offset(), Some(0.02));
        assert_eq!(tail.max_need(), Some(0.04));
        assert_eq!(tail.clock().interval(), Some(2));
        assert_eq!(tail.history(), 64);
        // It grows back to the full window.
        for k in 100..200u32 {
            tail.add_offset(0.03);
            tail.add_tick(k * 2);
        }
        assert_eq!(tail.len(), 64);
    }

    #[test]
    fn loss_runs_count_gaps_from_the_newest() {
        let mut s = super::ArrivalStats::new(64);
        assert_eq!(s.loss_runs(usize::MAX), None);
        s.add_gap(1);
        // Ticks 0..20 but 5, 6 and 15: two runs, the newer 4 gaps from the newest.
        for t in (0..20).filter(|t| ![5, 6, 15].contains(t)) {
            s.add_tick(t);
        }
        let all = s.loss_runs(usize::MAX).unwrap();
        assert_eq!((all.gaps, all.runs, all.since_first), (16, 2, 12));
        let last = s.loss_runs(5).unwrap();
        assert_eq!((last.gaps, last.runs, last.since_first), (5, 1, 4));
    }
}

/// Arrival streams for the tests of the policy's estimates.
#[cfg(test)]
pub(in crate::interpolation) mod streams {
    use super::*;

    /// A fixed scramble of `t`, standing in for a random draw per tick.
    pub(in crate::interpolation) fn hash(t: u32) -> u32 {
        let mut x = t.wrapping_mul(0x9E37_79B9) ^ 0x85EB_CA6B;
        x ^= x >> 15;
        x = x.wrapping_mul(0x2C1B_3C6D);
        x ^ (x >> 12)
    }

    /// Records, as the buffer does, the snapshot of `tick` arriving at `at`, after the
    /// newest tick so far (which it updates).
    pub(in crate::interpolation) fn arrive(
        s: &mut ArrivalStats,
        newest: &mut Option<u32>,
        tick: u32,
        at: f64,
        period: f64,
    ) {
        let pair = match *newest {
            Some(n) if tick > n => {
                *newest = Some(tick);
                let need = Need {
                    need: at - f64::from(n) * period,
                    span: f64::from(tick - n) * period,
                };
                Some((tick - n, need))
            }
            Some(_) => None,
            None => {
                *newest = Some(tick);
                None
            }
        };
        s.record(&Arrival {
            tick,
            offset: at - f64::from(tick) * period,
            pair,
        });
    }

    /// A window of `history` fed snapshots of the given ticks arriving `offset` seconds
    /// after their server time (ticks of `period` seconds).
    pub(in crate::interpolation) fn recorded(
        history: usize,
        period: f64,
        arrivals: impl Iterator<Item = (u32, f64)>,
    ) -> ArrivalStats {
        let mut s = ArrivalStats::new(history);
        let mut newest = None;
        for (tick, offset) in arrivals {
            let at = f64::from(tick) * period + offset;
            arrive(&mut s, &mut newest, tick, at, period);
        }
        s
    }

    /// `count` arrivals every other tick over a window of `history`: a slow link, then a
    /// fast one for the last `fast` arrivals. Fed directly rather than [`recorded`], so
    /// that offsets and needs are exactly the values written here.
    pub(in crate::interpolation) fn slow_then_fast(
        history: usize,
        count: u32,
        fast: u32,
    ) -> ArrivalStats {
        let mut s = ArrivalStats::new(history);
        for k in 0..count {
            let offset = if k < count - fast {
                0.1 + f64::from(k % 7) * 0.01
            } else {
                0.02
            };
            s.add_offset(offset);
            s.add_tick(k * 2);
            s.add_gap(2);
            s.add_need(Need {
                need: offset + 0.02,
                span: 0.02,
            });
        }
        s
    }

    /// Sends every tick at 60 Hz for `count` ticks, dropping those `lost` says, with a
    /// fixed 50 ms delay plus `jitter(tick)`.
    pub(in crate::interpolation) fn stream(
        count: u32,
        lost: impl Fn(u32) -> bool,
        jitter: impl Fn(u32) -> f64,
    ) -> ArrivalStats {
        let period = 1.0 / 60.0;
        let mut s = ArrivalStats::new(512);
        let mut newest = None;
        let mut arrivals: Vec<(f64, u32)> = (0..count)
            .filter(|t| !lost(*t))
            .map(|t| (f64::from(t) * period + 0.05 + jitter(t), t))
            .collect();
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (at, t) in arrivals {
            arrive(&mut s, &mut newest, t, at, period);
        }
        s
    }

    /// Sends every tick at 60 Hz for `count` ticks, dropping those `lost` says, with a
    /// fixed 50 ms delay plus `jitter(tick)`, delivered in order (a late packet holds
    /// back those sent after it, as netem does). Returns the arrivals too.
    pub(in crate::interpolation) fn fifo_stream(
        count: u32,
        lost: impl Fn(u32) -> bool,
        jitter: impl Fn(u32) -> f64,
    ) -> (ArrivalStats, Vec<(f64, u32)>) {
        let period = 1.0 / 60.0;
        let mut s = ArrivalStats::new(count as usize);
        let mut newest = None;
        let mut last = f64::NEG_INFINITY;
        let mut arrivals = Vec::new();
        for t in (0..count).filter(|t| !lost(*t)) {
            last = last.max(f64::from(t) * period + 0.05 + jitter(t));
            arrivals.push((last, t));
            arrive(&mut s, &mut newest, t, last, period);
        }
        (s, arrivals)
    }
}
