//! What arrivals say about the server's clock and the network: arrival offsets, the
//! snapshot send interval, and how much playback lag each snapshot needed.
//!
//! All times are seconds as `f64` on the caller's clock. A snapshot of tick `k` arriving
//! at `a` has the *offset* `a - k * period`: the server's tick clock shifted by that
//! packet's one-way delay (plus a constant between the two clocks, which cancels out).
//! The smallest offset in a window is the path with no queueing; how far a packet's
//! offset sits above it is its lateness.
//!
//! This module keeps the windows ([`ArrivalStats`]); the two estimates the adaptive
//! policy takes from them live beside it: what the window saw in `replay`, a model of
//! the link in `model`, and what stretching playback buys in `stretch`.

mod model;
mod replay;
mod search;
mod stretch;

pub(crate) use stretch::Stretch;

use crate::window::shift::{self, Shift};
use crate::window::{SortedWindow, last, push_bounded};
use std::collections::VecDeque;

/// Gaps remembered to measure the send interval.
const GAP_WINDOW: usize = 32;

/// Snapshots over which the loss rate is measured (at least the arrival history): the
/// model's tails go with the loss rate squared, so it needs more samples than the rest.
const LOSS_WINDOW: usize = 2048;

/// Arrivals between two looks for a link that loses less: telling takes hundreds of
/// arrivals, and each look walks the whole loss window.
const LOSS_CHECK_EVERY: u32 = 16;

/// Frames remembered for where in the send interval rendering samples.
const FRAME_WINDOW: usize = 256;

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

/// Windowed arrival statistics. Bounded: every window is a fixed-capacity queue; those
/// asked for order statistics (offsets, ticks) are mirrored by a sorted copy, so a quantile
/// costs a lookup, not a sort.
#[derive(Debug, Clone)]
pub(crate) struct ArrivalStats {
    history: usize,
    offsets: SortedWindow<f64>,
    /// Consecutive pairs' needs, in arrival order (the window estimate replays them).
    needs: VecDeque<Need>,
    /// The same needs' values, sorted: the shift test compares recent ones with the rest.
    need_values: SortedWindow<f64>,
    gaps: VecDeque<u32>,
    interval: Option<u32>,
    /// Ticks of the last `max(history, LOSS_WINDOW)` accepted snapshots, for the loss model.
    ticks: SortedWindow<i64>,
    /// The last tick recorded, as sent and unwrapped: ticks are kept unwrapped (counting
    /// on from the first one) so that sorting them survives wrap-around.
    last_tick: Option<(u32, i64)>,
    /// Local times of the last rendered frames: where in the send interval frames fall.
    frames: VecDeque<f64>,
    /// Room for the recent needs the shift test sorts, kept to spare an allocation per
    /// arrival.
    scratch: Vec<f64>,
    /// Cut from a longer window by [`tail`](Self::tail): see [`is_cut`](Self::is_cut).
    cut: bool,
    /// Arrivals until the shift test next looks for a link that loses less.
    arrivals_to_loss_check: u32,
}

impl ArrivalStats {
    /// Statistics over the last `history` arrivals (at least 1).
    pub fn new(history: usize) -> Self {
        let history = history.max(1);
        let prealloc = history.min(super::buffer::PREALLOCATE);
        Self {
            history,
            offsets: SortedWindow::new(history, prealloc),
            needs: VecDeque::with_capacity(prealloc),
            need_values: SortedWindow::new(history, prealloc),
            gaps: VecDeque::with_capacity(GAP_WINDOW),
            interval: None,
            ticks: SortedWindow::new(history.max(LOSS_WINDOW), prealloc),
            last_tick: None,
            frames: VecDeque::with_capacity(FRAME_WINDOW),
            scratch: Vec::new(),
            cut: false,
            arrivals_to_loss_check: 0,
        }
    }

    /// Forgets everything (a new timeline).
    pub fn clear(&mut self) {
        self.offsets.clear();
        self.needs.clear();
        self.need_values.clear();
        self.gaps.clear();
        self.interval = None;
        self.ticks.clear();
        self.last_tick = None;
        self.frames.clear();
        // A new timeline is not a window cut at a change of link: it warms up afresh.
        self.cut = false;
        self.arrivals_to_loss_check = 0;
    }

    /// Records the local time of a rendered frame.
    pub fn add_frame(&mut self, now: f64) {
        if now.is_finite() {
            push_bounded(&mut self.frames, now, FRAME_WINDOW);
        }
    }

    /// Records the tick of an accepted snapshot (in any order).
    pub fn add_tick(&mut self, tick: u32) {
        let unwrapped = match self.last_tick {
            Some((last, at)) => at + i64::from(tick.wrapping_sub(last) as i32),
            None => 0,
        };
        self.last_tick = Some((tick, unwrapped));
        self.ticks.push(unwrapped);
    }

    /// Records an arrival offset.
    pub fn add_offset(&mut self, offset: f64) {
        if !offset.is_finite() {
            return;
        }
        self.offsets.push(offset);
    }

    /// Records the need of a consecutive pair.
    pub fn add_need(&mut self, need: Need) {
        if !(need.need.is_finite() && need.span.is_finite() && need.span > 0.0) {
            return;
        }
        push_bounded(&mut self.needs, need, self.history);
        self.need_values.push(need.need);
    }

    /// The same statistics over only the last `recent` arrivals (the send interval and
    /// the frames are kept whole: neither depends on the link), with room to grow back
    /// to the full window.
    pub fn tail(&self, recent: usize) -> Self {
        let mut needs = VecDeque::with_capacity(self.needs.capacity());
        needs.extend(last(&self.needs, recent).copied());
        Self {
            history: self.history,
            offsets: self.offsets.tail(recent),
            needs,
            need_values: self.need_values.tail(recent),
            gaps: self.gaps.clone(),
            interval: self.interval,
            ticks: self.ticks.tail(recent),
            last_tick: self.last_tick,
            frames: self.frames.clone(),
            scratch: Vec::new(),
            cut: true,
            arrivals_to_loss_check: 0,
        }
    }

    /// Whether the window was cut from a longer one (by [`tail`](Self::tail)) rather
    /// than started afresh. A cut window holds the arrivals since the link changed, and
    /// the policy's estimates are trusted from its first pair: the warm-up's three
    /// intervals are for a buffer that knows nothing yet, and would overshoot by far.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Arrivals in the window (at most the history it was made with).
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// The arrivals the window holds when full.
    pub fn history(&self) -> usize {
        self.history
    }

    /// Whether the link changed over the last `recent` arrivals: their pairs needed more
    /// lag, or they came later, than the window's earlier ones far more often than
    /// chance allows, or all of them came faster than most earlier arrivals (see the
    /// [shift test](super::shift)). `None` too while the window holds too few earlier
    /// arrivals to tell.
    pub fn shift(&mut self, recent: usize) -> Option<Shift> {
        // Needs show a link that loses more, as longer spans; offsets show a slower link
        // even when a few losses in the window put the needs' tail a whole send interval
        // up, out of reach of a few tens of milliseconds more delay (at 10 snapshots a
        // second, a handful of losses in 512 do).
        let by_needs = shift::worse_since(
            self.need_values.sorted(),
            last(&self.needs, recent).map(|n| n.need),
            &mut self.scratch,
        );
        let by_offsets = shift::worse_since(
            self.offsets.sorted(),
            self.offsets.recent(recent),
            &mut self.scratch,
        );
        // A link that loses more shows in the loss runs among the last arrivals' gaps.
        // Most arrivals are settled by those alone: were they all of the window's runs,
        // they still would not be rare enough.
        let gaps = self.ticks.len().saturating_sub(1);
        let by_losses = self
            .loss_runs(recent)
            .filter(|last| shift::may_be_more_losses(gaps, last.gaps, last.runs))
            .and_then(|last| {
                let all = self.loss_runs(usize::MAX)?;
                shift::more_losses(all.gaps, all.runs, last.gaps, last.runs)
                    .then_some(last.since_first)
            });
        if let Some(since) = by_needs.max(by_offsets).max(by_losses) {
            return Some(Shift::Worse { since });
        }
        self.scratch.clear();
        self.scratch.extend(self.offsets.recent(recent));
        if shift::better(self.offsets.sorted(), &mut self.scratch) {
            return Some(Shift::Better { since: recent });
        }
        // One that loses less shows only over many arrivals (see `shift::fewer_losses`):
        // the loss window's last quarter, looked at every few arrivals.
        self.arrivals_to_loss_check = self.arrivals_to_loss_check.saturating_sub(1);
        if self.arrivals_to_loss_check > 0 {
            return None;
        }
        self.arrivals_to_loss_check = LOSS_CHECK_EVERY;
        let long = self.ticks.capacity() / 4;
        let (last, all) = (self.loss_runs(long)?, self.loss_runs(usize::MAX)?);
        (all.gaps >= 2 * long && shift::fewer_losses(all.gaps, all.runs, long, last.runs))
            .then_some(Shift::Better { since: long })
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
        self.offsets.sorted().first().copied()
    }

    /// The latest offset in the window: server tick time plus the largest delay seen.
    pub fn max_offset(&self) -> Option<f64> {
        self.offsets.sorted().last().copied()
    }

    /// The median offset: server tick time plus the typical delay.
    pub fn median_offset(&self) -> Option<f64> {
        let sorted = self.offsets.sorted();
        sorted.get(sorted.len() / 2).copied()
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
        self.needs.iter().map(|n| n.need).max_by(f64::total_cmp)
    }

    /// The `q` quantile of the window's offsets (0: the earliest, 1: the latest).
    pub fn offset_quantile(&self, q: f64) -> Option<f64> {
        let sorted = self.offsets.sorted();
        let last = sorted.len().checked_sub(1)?;
        let i = (q.clamp(0.0, 1.0) * last as f64).round() as usize;
        sorted.get(i.min(last)).copied()
    }
}

/// A setting that is a fraction of real time, within `[0, max]`: larger values (infinity
/// included) are `max`; 0 (no effect) when not a number.
pub(crate) fn fraction_setting(value: f64, max: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(0.0, max)
    }
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

    /// A window of `history` fed, as the buffer feeds it, snapshots of the given ticks
    /// arriving `offset` seconds after their server time (ticks of `period` seconds).
    fn recorded(
        history: usize,
        period: f64,
        arrivals: impl Iterator<Item = (u32, f64)>,
    ) -> ArrivalStats {
        let mut s = ArrivalStats::new(history);
        let mut newest = None;
        for (tick, offset) in arrivals {
            let at = f64::from(tick) * period + offset;
            streams::arrive(&mut s, &mut newest, tick, at, period);
        }
        s
    }

    /// `count` arrivals every other tick over a window of `history`: a slow link, then a
    /// fast one for the last `fast` arrivals. Fed directly rather than [`recorded`], so
    /// that offsets and needs are exactly the values written here.
    fn slow_then_fast(history: usize, count: u32, fast: u32) -> ArrivalStats {
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

    #[test]
    fn a_tail_is_the_window_over_only_its_last_arrivals() {
        let mut s = slow_then_fast(64, 100, 10);
        assert_eq!(s.len(), 64);
        let mut tail = s.tail(10);
        assert_eq!((tail.len(), tail.needs_len()), (10, 10));
        assert_eq!(tail.max_offset(), Some(0.02));
        assert_eq!(tail.max_need(), Some(0.04));
        assert_eq!(tail.interval(), Some(2));
        assert_eq!(tail.history(), 64);
        // It grows back to the full window.
        for k in 100..200u32 {
            tail.add_offset(0.03);
            tail.add_tick(k * 2);
        }
        assert_eq!(tail.len(), 64);
        // The test wants eight earlier arrivals per recent one: 54 cannot tell about 10.
        assert!(s.shift(10).is_none());
        assert_eq!(
            slow_then_fast(1024, 700, 40).shift(32),
            Some(Shift::Better { since: 32 })
        );
    }

    #[test]
    fn a_worse_link_is_cut_where_its_arrivals_begin() {
        // 500 arrivals needing 20-30 ms, then 12 needing 60-126 ms (every other tick of
        // 10 ms: a pair spans 20 ms, and needs that much more than its offset).
        let need = |k: u32| {
            if k < 500 {
                0.02 + f64::from(k * 7 % 11) * 0.001
            } else {
                0.06 + f64::from(k * 5 % 13) * 0.005
            }
        };
        let mut s = recorded(512, 0.01, (0..512).map(|k| (k * 2, need(k) - 0.02)));
        assert_eq!(s.shift(32), Some(Shift::Worse { since: 12 }));
        let since = s.tail(12);
        assert!(since.is_cut() && !s.is_cut());
        // Every one of them from the new link.
        assert_eq!(since.len(), 12);
        assert!(since.min_offset().unwrap() > 0.039, "{since:?}");
        // Cleared for a new timeline, it is no longer a window cut at a change of link:
        // the policy must not trust its first pair.
        let mut since = since;
        since.clear();
        assert!(!since.is_cut());
    }

    #[test]
    fn a_slower_link_shows_in_the_offsets_when_losses_fill_the_needs_tail() {
        // 10 snapshots a second, 20-24 ms on the way, one in 50 lost: the needs' tail is
        // the lost snapshots' pairs, 100 ms above the rest. Then 12 arrivals 40-70 ms on
        // the way: their needs stay below that tail, their offsets do not.
        let delay = |k: u32| {
            if k < 500 {
                0.02 + f64::from(k * 7 % 5) * 0.001
            } else {
                0.04 + f64::from(k * 5 % 13) * 0.0025
            }
        };
        let sent = (0..512).filter(|k| *k >= 500 || k % 50 != 25);
        let mut s = recorded(512, 1.0 / 60.0, sent.map(|k| (k * 6, delay(k))));
        assert_eq!(s.shift(32), Some(Shift::Worse { since: 12 }));
    }

    #[test]
    fn losses_that_start_or_stop_are_told() {
        use super::streams::{hash, stream};
        // 60 snapshots a second, one in 20 lost until tick 2000, none after: no alarm
        // while the window's last quarter still holds losses, then the window keeps
        // only that quarter.
        let fewer = |until: u32, count: u32| {
            stream(count, |t| t < until && hash(t) % 20 == 0, |_| 0.0).shift(32)
        };
        assert_eq!(fewer(2000, 2000), None);
        assert_eq!(fewer(2000, 2150), None);
        assert_eq!(fewer(2000, 2600), Some(Shift::Better { since: 512 }));
        // None lost until tick 2000, then four in the last 30: the losses started with
        // the first of them, and the 21 snapshots received since are the new link's.
        let lost = |t: u32| [2005, 2013, 2021, 2027].contains(&t);
        assert_eq!(
            stream(2000 + 30, lost, |_| 0.0).shift(32),
            Some(Shift::Worse { since: 21 })
        );
        // Three are chance.
        let lost = |t: u32| [2005, 2013, 2021].contains(&t);
        assert_eq!(stream(2000 + 30, lost, |_| 0.0).shift(32), None);
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
}

/// Arrival streams for the tests of the estimates (`replay`, `model`).
#[cfg(test)]
pub(super) mod streams {
    use super::*;

    /// A fixed scramble of `t`, standing in for a random draw per tick.
    pub(in crate::interpolation) fn hash(t: u32) -> u32 {
        let mut x = t.wrapping_mul(0x9E37_79B9) ^ 0x85EB_CA6B;
        x ^= x >> 15;
        x = x.wrapping_mul(0x2C1B_3C6D);
        x ^ (x >> 12)
    }

    /// What `InterpolationBuffer::learn` records for an accepted arrival.
    pub(super) fn arrive(
        s: &mut ArrivalStats,
        newest: &mut Option<u32>,
        tick: u32,
        at: f64,
        period: f64,
    ) {
        s.add_offset(at - f64::from(tick) * period);
        s.add_tick(tick);
        match *newest {
            Some(n) if tick > n => {
                s.add_gap(tick - n);
                s.add_need(Need {
                    need: at - f64::from(n) * period,
                    span: f64::from(tick - n) * period,
                });
                *newest = Some(tick);
            }
            Some(_) => {}
            None => *newest = Some(tick),
        }
    }

    /// Sends every tick at 60 Hz for `count` ticks, dropping those `lost` says, with a
    /// fixed 50 ms delay plus `jitter(tick)`.
    pub(super) fn stream(
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
    pub(super) fn fifo_stream(
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
