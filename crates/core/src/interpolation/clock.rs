//! What arrivals say about the server's clock and the network: arrival offsets, the
//! snapshot send interval, and how much playback lag each snapshot needed.
//!
//! All times are seconds as `f64` on the caller's clock. A snapshot of tick `k` arriving
//! at `a` has the *offset* `a - k * period`: the server's tick clock shifted by that
//! packet's one-way delay (plus a constant between the two clocks, which cancels out).
//! The smallest offset in a window is the path with no queueing; how far a packet's
//! offset sits above it is its lateness.

use super::shift::{self, Shift};
use std::collections::VecDeque;

/// Gaps remembered to measure the send interval.
const GAP_WINDOW: usize = 32;

/// Snapshots over which the loss rate is measured (at least the arrival history): the
/// model's tails go with the loss rate squared, so it needs more samples than the rest.
const LOSS_WINDOW: usize = 2048;

/// Pseudo-losses, at the overall loss rate, added to the losses after a loss.
const LOSS_PRIOR: f64 = 8.0;

/// Parts of the send interval the frames' phases are counted in.
const PHASE_BINS: usize = 64;

/// Frames remembered for where in the send interval rendering samples.
const FRAME_WINDOW: usize = 256;

/// Where in the send interval the link model evaluates a shown time; the missed fraction
/// is their mean.
const MODEL_PHASES: usize = 32;

/// The loss rate the model believes at most: above it, nothing useful can be played back.
const MAX_LOSS: f64 = 0.9;

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

/// How the buffer stretches playback while the snapshot after the newest is overdue: from
/// `from` seconds after the newest one's server time (in lag coordinates: the window's
/// `overdue_quantile` of offsets plus one send interval, see
/// [`InterpolationConfig::overdue_quantile`](super::InterpolationConfig::overdue_quantile)),
/// playback slows to `rate` of real time until a newer snapshot arrives or playback
/// reaches the newest, and afterwards catches up with its target lag at `1 + catch_up` of
/// real time. Made by [`ArrivalStats::stretch`], which the buffer asks both when to
/// stretch and, through the policy, what stretching buys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stretch {
    /// Lag at which the snapshot after the newest counts as overdue.
    pub from: f64,
    /// Playback speed while stretching, in `(0, 1)`.
    pub rate: f64,
    /// How much faster than real time playback catches up afterwards (0.1: 110%).
    pub catch_up: f64,
    /// How much further behind than usual playback may be for a stretch to start (one
    /// send interval). Stretching begins only when playback is about to reach the newest:
    /// at the target lag, `lag - from` short of it when it turns overdue; still behind
    /// from the last stretch, it has more in hand and waits until that has run down to
    /// within `slack`. Without a bound, a link where the next snapshot is often overdue
    /// would stretch faster than catching up makes good, and the delay would grow
    /// without end; with none at all, a playback a hair behind its target would never
    /// stretch.
    pub slack: f64,
}

impl Stretch {
    /// True when playback should be stretching: the snapshot after the newest is overdue
    /// (the newest is older than `from`, at `age`: local time minus its server time), and
    /// playback is short of the newest by `runway` seconds of server time, more than
    /// nothing and less than [`max_runway`](Self::max_runway) at the target `lag`.
    pub fn applies(&self, age: f64, runway: f64, lag: f64) -> bool {
        age > self.from && runway > 0.0 && runway < self.max_runway(lag)
    }

    /// How little of the buffer may be left ahead of playback (server time between the
    /// shown time and the newest snapshot) for a stretch to start, at a target `lag`:
    /// `lag - from` as at the target lag when the newest turns overdue, plus
    /// [`slack`](Self::slack).
    pub fn max_runway(&self, lag: f64) -> f64 {
        lag - self.from + self.slack
    }

    /// The lag that, without stretching, would wait as long for the snapshot after the
    /// newest as `lag` does with it. Playback at lag `L` reaches the newest snapshot's
    /// server time `L` after it; when `L` exceeds `from`, it spends the last `L - from`
    /// of that at `rate`, so it gets there only `from + (L - from) / rate` after. Below
    /// `from` nothing is overdue before playback runs out, and nothing changes.
    pub fn effective(&self, lag: f64) -> f64 {
        if lag > self.from {
            self.from + (lag - self.from) / self.rate
        } else {
            lag
        }
    }
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
        }
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
    /// lag than the window's earlier ones far more often than chance allows, or all of
    /// them came faster than most earlier arrivals (see [`shift`](super::shift)).
    /// `None` too while the window holds too few earlier arrivals to tell.
    pub fn shift(&mut self, recent: usize) -> Option<Shift> {
        self.scratch.clear();
        self.scratch
            .extend(last(&self.needs, recent).map(|n| n.need));
        if shift::worse(self.need_values.sorted(), &mut self.scratch) {
            return Some(Shift::Worse);
        }
        self.scratch.clear();
        self.scratch.extend(self.offsets.recent(recent));
        shift::better(self.offsets.sorted(), &mut self.scratch).then_some(Shift::Better)
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

    /// How the buffer would stretch playback now, at `rate` of real time, from the
    /// `overdue_quantile` of offsets plus an interval, catching up at `1 + catch_up` (see
    /// [`Stretch`]); `None` before the interval and offsets are known, or with `rate` 1.
    pub fn stretch(
        &self,
        period: f64,
        rate: f64,
        overdue_quantile: f64,
        catch_up: f64,
    ) -> Option<Stretch> {
        if !(rate > 0.0 && rate < 1.0) {
            return None;
        }
        let interval = f64::from(self.interval?) * period;
        Some(Stretch {
            from: self.offset_quantile(overdue_quantile)? + interval,
            rate,
            catch_up: fraction_setting(catch_up, 1.0),
            slack: interval,
        })
    }

    /// The smallest playback lag at which the fraction of server time the window's pairs
    /// would *not* have been ready for is at most `fraction`. Pairs spanning more than
    /// `max_span` seconds (outages) are left out: no sensible lag rides them over.
    ///
    /// Playback is replayed over the window's pairs in arrival order at that lag
    /// ([`replay_missed`](Self::replay_missed)), so a `stretch` is credited as the buffer
    /// does it: a pair whose snapshot is overdue waits as long as at the
    /// [effective](Stretch::effective) lag, and the lag a stretch adds carries over to
    /// the pairs after it until playback has caught up. That matters when snapshots come
    /// faster than jitter spreads them: a late snapshot holds back the ones sent after
    /// it, and the stretch over the first of them covers the rest of the run.
    ///
    /// A miss costs at least `min_miss` (the caller passes half a rendered frame): with
    /// frames at random phases a miss of `d` costs `d` of frames on average, but a
    /// renderer whose frame rate is locked to the tick rate samples the same phase every
    /// time, and when the lag sits just inside a tight cluster of needs, a miss of a
    /// fraction of a millisecond costs a whole frame, every time.
    ///
    /// `hint`, the last answer, only makes the search faster.
    pub fn lag_for_fraction(
        &self,
        fraction: f64,
        max_span: f64,
        min_miss: f64,
        stretch: Option<Stretch>,
        hint: Option<f64>,
    ) -> Option<f64> {
        let usable = || self.needs.iter().filter(|n| n.span <= max_span);
        let total: f64 = usable().map(|n| n.span).sum();
        if total <= 0.0 {
            return None;
        }
        let budget = fraction.clamp(0.0, 1.0) * total;
        let hi = usable().map(|n| n.need).max_by(f64::total_cmp)?;
        let lo = usable().map(|n| n.need - n.span).min_by(f64::total_cmp)?;
        // At `hi` every pair is ready before playback reaches it; the missed time falls
        // monotonically with the lag (a longer lag is at least as long at every moment
        // of the replay).
        Some(smallest_lag_near(lo, hi, hint, |lag| {
            self.replay_missed(lag, max_span, min_miss, stretch, budget) <= budget
        }))
    }

    /// Server time playback at a target `lag` would have run past the newest snapshot,
    /// over the window's pairs in arrival order; the sum stops growing past `enough`
    /// (the caller only asks whether it is within a budget).
    ///
    /// Each pair starts when its first snapshot arrived (then the newest), at the lag
    /// playback had then, and follows the buffer's rules: playback catches up with `lag`
    /// after a stretch, stretches while the snapshot after the newest is overdue and
    /// playback has not reached the newest, and runs past the newest (misses) from the
    /// moment it reaches it until the pair's second snapshot arrives.
    pub fn replay_missed(
        &self,
        lag: f64,
        max_span: f64,
        min_miss: f64,
        stretch: Option<Stretch>,
        enough: f64,
    ) -> f64 {
        let mut missed = 0.0;
        // The current playback lag, and the newest snapshot's offset (its age when it
        // arrived).
        let mut current = lag;
        let mut newest_offset = None;
        // Most pairs are quiet: playback at its target, the snapshot in before it is
        // overdue or due. They change nothing.
        let quiet = stretch.map_or(lag, |s| s.from.min(lag));
        for pair in &self.needs {
            let offset = pair.need - pair.span;
            let start = newest_offset
                .replace(offset)
                .unwrap_or(offset)
                .min(pair.need);
            if pair.span > max_span {
                // An outage: the buffer starts over at its target.
                current = lag;
                continue;
            }
            if current <= lag && pair.need <= quiet {
                continue;
            }
            let (miss, after) = replay_pair(lag, current, start, pair.need, stretch);
            if miss > 0.0 {
                missed += miss.max(min_miss);
                if missed > enough {
                    return missed;
                }
            }
            current = after;
        }
        missed
    }

    /// How snapshots get lost, from the window of ticks: which of the snapshots sent over
    /// the span the window covers arrived, and how losses cluster into runs. Runs longer
    /// than `max_span` seconds (outages) are left out, as in
    /// [`lag_for_fraction`](Self::lag_for_fraction). `None` until the interval is known.
    pub fn loss_model(&self, period: f64, max_span: f64) -> Option<LossModel> {
        let interval = i64::from(self.interval?);
        let ticks = self.ticks.sorted();
        if ticks.is_empty() {
            return None;
        }
        let outage = (max_span / (interval as f64 * period)).max(1.0);
        let (mut received, mut lost, mut runs) = (1u64, 0u64, 0u64);
        for pair in ticks.windows(2) {
            let gap = pair[1] - pair[0];
            // A tick recorded twice is one snapshot.
            received += u64::from(gap > 0);
            let missing = (gap / interval - 1).max(0) as u64;
            if missing > 0 && (missing as f64) < outage {
                lost += missing;
                runs += 1;
            }
        }
        Some(LossModel::estimate(received, lost, runs))
    }

    /// The smallest playback lag at which a *model* of the link misses at most `fraction`
    /// of the rendered frames: snapshots are lost as the window's
    /// [`loss_model`](Self::loss_model) says, and the others arrive with offsets drawn
    /// independently from the window's offsets. Displayed server time `s` is ready at lag
    /// `L` when any snapshot at or after `s` has arrived within `L` of it, so a frame
    /// misses with the chance that every one of them is lost or later than that. That
    /// chance depends on how far `s` is from the next send, so it is averaged over the
    /// phases at which the last frames fell (or evenly over the interval before any frame).
    ///
    /// The window's own pairs ([`lag_for_fraction`](Self::lag_for_fraction)) say how
    /// often playback *would* have missed, but a strict target rests on events rarer than
    /// the window holds (two losses in a row at 5% loss is one pair in 400): whether one
    /// happens to be in the window swings the delay, and when none is, the target is
    /// overshot. The model builds those tails from the plentiful samples (the loss rate and
    /// the spread of offsets) instead. `None` until the loss rate and interval are known.
    ///
    /// With a `stretch`, snapshots get until the [effective](Stretch::effective) lag to
    /// arrive: playback reaches the shown time that much later when the snapshot after
    /// the newest is overdue, whether it was lost or is late. (The lag a stretch adds to
    /// later pairs is not counted: the model stays on the safe side.)
    ///
    /// Lags below `at_least` are not searched (the answer is then `at_least`): the caller
    /// takes the larger of this and another estimate, and when the other one already
    /// meets the target here one evaluation settles it instead of a bisection.
    pub fn model_lag_for_fraction(
        &self,
        fraction: f64,
        max_span: f64,
        period: f64,
        at_least: f64,
        stretch: Option<Stretch>,
    ) -> Option<f64> {
        let loss = self.loss_model(period, max_span)?;
        let interval = f64::from(self.interval?) * period;
        let min = self.min_offset()?;
        let max = self.max_offset()?;
        let offsets = self.offsets.sorted();
        let count = offsets.len() as f64;
        // Chance that a snapshot that was not lost, sent `x` seconds after the shown
        // time, has not arrived yet.
        let late = |lag: f64, x: f64| -> f64 {
            let y = lag - x;
            if y >= max {
                0.0
            } else {
                1.0 - offsets.partition_point(|o| *o <= y) as f64 / count
            }
        };
        // Chance that nothing sent at or after the shown time has arrived, when the next
        // send is `x` after it: a forward pass over the loss chain, one send at a time.
        let all_missing = |lag: f64, x: f64| -> f64 {
            // Once the snapshot after the newest is overdue, playback stretches: every
            // one sent after the shown time gets until the effective lag.
            let lag = stretch.map_or(lag, |s| s.effective(lag));
            let (mut lost, mut kept) = (loss.loss, 1.0 - loss.loss);
            kept *= late(lag, x);
            let mut x = x + interval;
            // Snapshots sent later than `lag - min` after the shown time cannot have
            // arrived: they leave the chance unchanged.
            while lag - x >= min && lost + kept > 1e-12 {
                let to_lost = lost * loss.lost_after_lost + kept * loss.lost_after_kept;
                let to_kept = lost + kept - to_lost;
                lost = to_lost;
                kept = to_kept * late(lag, x);
                x += interval;
            }
            lost + kept
        };
        let bins = self.frame_phases(interval);
        let missed = |lag: f64| -> f64 {
            match &bins {
                // Where the frames actually fall: a renderer locked to the send rate
                // samples the same few phases forever, so what matters is the worst
                // moment within each bin (just after a send, if the bin straddles one).
                Some(bins) => {
                    let width = interval / PHASE_BINS as f64;
                    let mut sum = 0.0;
                    for (b, &count) in bins.iter().enumerate() {
                        if count == 0 {
                            continue;
                        }
                        let x = wrap(lag - b as f64 * width, interval);
                        let worst = if x < width { interval } else { x };
                        sum += f64::from(count) * all_missing(lag, worst);
                    }
                    sum / self.frames.len() as f64
                }
                // No frames yet: shown times anywhere in the interval, evenly.
                None => {
                    (0..MODEL_PHASES)
                        .map(|k| {
                            all_missing(lag, (k as f64 + 0.5) / MODEL_PHASES as f64 * interval)
                        })
                        .sum::<f64>()
                        / MODEL_PHASES as f64
                }
            }
        };
        let target = fraction.clamp(0.0, 1.0);
        let hi = min + max_span.max(0.0);
        let lo = at_least.max(min).min(hi);
        if missed(lo) <= target {
            return Some(lo);
        }
        if missed(hi) > target {
            return Some(hi);
        }
        // `missed` falls monotonically with the lag.
        Some(smallest_lag(lo, hi, |lag| missed(lag) <= target))
    }
}

/// A two-state (Gilbert) model of snapshot loss: whether a snapshot is lost depends on
/// whether the one sent before it was. Independent loss is the case where both
/// conditional chances are equal; bursty links (Wi-Fi, mobile) lose runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LossModel {
    /// Long-run fraction of snapshots lost.
    pub loss: f64,
    /// Chance a snapshot is lost when the one before it arrived.
    pub lost_after_kept: f64,
    /// Chance a snapshot is lost when the one before it was lost too.
    pub lost_after_lost: f64,
}

impl LossModel {
    /// The model from `received` snapshots, `lost` ones and the number of loss `runs`.
    ///
    /// Runs of two or more are rare on a link that loses independently (at 5%, one loss
    /// in twenty is followed by another), so the chance of a loss after a loss is drawn
    /// towards the overall loss rate by [`LOSS_PRIOR`] pseudo-losses: a window that
    /// happens to hold no double loss does not conclude that none can happen.
    fn estimate(received: u64, lost: u64, runs: u64) -> Self {
        let sent = (received + lost).max(1) as f64;
        let loss = (lost as f64 / sent).min(MAX_LOSS);
        let after_lost =
            (lost.saturating_sub(runs) as f64 + LOSS_PRIOR * loss) / (lost as f64 + LOSS_PRIOR);
        let after_lost = after_lost.min(MAX_LOSS);
        // Stationary: loss = loss * after_lost + (1 - loss) * after_kept.
        let after_kept = if loss < 1.0 {
            (loss * (1.0 - after_lost) / (1.0 - loss)).clamp(0.0, 1.0)
        } else {
            1.0
        };
        Self {
            loss,
            lost_after_kept: after_kept,
            lost_after_lost: after_lost,
        }
    }
}

impl ArrivalStats {
    /// How many of the remembered frames fall in each of [`PHASE_BINS`] equal parts of a
    /// send interval of `interval` seconds; `None` without frames.
    fn frame_phases(&self, interval: f64) -> Option<[u32; PHASE_BINS]> {
        if self.frames.is_empty() || interval.is_nan() || interval <= 0.0 {
            return None;
        }
        let mut bins = [0u32; PHASE_BINS];
        for now in &self.frames {
            let phase = wrap(*now, interval) / interval;
            let b = ((phase * PHASE_BINS as f64) as usize).min(PHASE_BINS - 1);
            bins[b] += 1;
        }
        Some(bins)
    }
}

/// A setting that is a fraction of real time, within `[0, max]`; 0 (no effect) when not a
/// number or infinite.
pub(crate) fn fraction_setting(value: f64, max: f64) -> f64 {
    if value.is_finite() {
        value.clamp(0.0, max)
    } else {
        0.0
    }
}

/// `x` modulo a positive `m`, in `[0, m)`: `rem_euclid` without its exact (and, here,
/// hot) library `fmod`; the rounding of the quotient does not matter for binning.
fn wrap(x: f64, m: f64) -> f64 {
    let r = x - (x / m).floor() * m;
    if r >= 0.0 && r < m { r } else { 0.0 }
}

/// One pair of [`ArrivalStats::replay_missed`], in the newest snapshot's age `u` (local
/// time minus its server time): the pair starts at age `start` (when that snapshot
/// arrived) with playback `current` behind real time, and its second snapshot arrives at
/// age `need`. Playback is past the newest once its lag is below the age. Returns the
/// time missed and the playback lag when the second snapshot arrives.
fn replay_pair(
    lag: f64,
    current: f64,
    start: f64,
    need: f64,
    stretch: Option<Stretch>,
) -> (f64, f64) {
    let catch_up = stretch.map_or(0.0, |s| s.catch_up);
    // Playback lag at age `u` while following the target: catching up after a stretch.
    let following = |u: f64| (current - catch_up * (u - start)).max(lag);
    // The first age from `earliest` on at which playback is short of the newest by at
    // most `runway` (`following(u) - u <= runway`): at once, during the catch-up if it is
    // steep enough, else once back at `lag`.
    let within = |earliest: f64, runway: f64| -> f64 {
        if following(earliest) - earliest <= runway {
            return earliest;
        }
        let during = (current - runway + catch_up * start) / (1.0 + catch_up);
        if current - catch_up * (during - start) >= lag {
            during
        } else {
            (lag - runway).max(earliest)
        }
    };
    if let Some(s) = stretch {
        // Stretching starts once the newest is overdue (`u >= from`) and playback is
        // within `max_runway` of it: later while it is still catching up.
        let begin = within(s.from.max(start), s.max_runway(lag));
        let at = following(begin);
        // Before the second snapshot arrived, with playback still short of the newest:
        // it slows to `rate` until the snapshot comes or playback reaches the newest (at
        // age `reach`).
        if begin < need && at > begin {
            let reach = begin + (at - begin) / s.rate;
            return if need <= reach {
                (0.0, at + (1.0 - s.rate) * (need - begin))
            } else {
                (need - reach, (reach - catch_up * (need - reach)).max(lag))
            };
        }
    }
    // Playback reaches the newest where its lag meets the age.
    let reach = within(start, 0.0);
    ((need - reach).max(0.0), following(need))
}

/// The smallest lag in `[lo, hi]` that is `enough`, to a hundredth of a millisecond, for
/// an `enough` that holds at `hi` and, once it holds, holds for every longer lag.
fn smallest_lag(lo: f64, hi: f64, enough: impl Fn(f64) -> bool) -> f64 {
    smallest_lag_near(lo, hi, None, enough)
}

/// First step of the search outward from a hint, seconds.
const GALLOP_STEP: f64 = 2e-4;

/// [`smallest_lag`], searching outward from `hint` first (in steps that double) when it
/// lies in `(lo, hi)`: the answer moves little from one arrival to the next, so a few
/// evaluations near the last one bracket it far tighter than the whole range.
fn smallest_lag_near(
    mut lo: f64,
    mut hi: f64,
    hint: Option<f64>,
    enough: impl Fn(f64) -> bool,
) -> f64 {
    if let Some(hint) = hint.filter(|h| *h > lo && *h < hi) {
        let below = enough(hint);
        if below {
            hi = hint;
        } else {
            lo = hint;
        }
        let mut step = GALLOP_STEP;
        loop {
            let x = if below { hint - step } else { hint + step };
            if x <= lo || x >= hi {
                break;
            }
            match (enough(x), below) {
                (true, true) => hi = x,
                (false, false) => lo = x,
                (true, false) => {
                    hi = x;
                    break;
                }
                (false, true) => {
                    lo = x;
                    break;
                }
            }
            step *= 2.0;
        }
    }
    for _ in 0..40 {
        if hi - lo < 1e-5 {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The last `capacity` values in arrival order, mirrored by a sorted copy so order
/// statistics cost a binary search and each update a shift, never a sort.
#[derive(Debug, Clone)]
struct SortedWindow<T> {
    capacity: usize,
    arrived: VecDeque<T>,
    sorted: Vec<T>,
}

impl<T: Copy + PartialOrd> SortedWindow<T> {
    fn new(capacity: usize, prealloc: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            arrived: VecDeque::with_capacity(prealloc),
            sorted: Vec::with_capacity(prealloc),
        }
    }

    /// Adds `value`, forgetting the oldest when full.
    fn push(&mut self, value: T) {
        if self.arrived.len() >= self.capacity {
            if let Some(old) = self.arrived.pop_front() {
                let i = self.sorted.partition_point(|x| *x < old);
                if i < self.sorted.len() {
                    self.sorted.remove(i);
                }
            }
        }
        self.arrived.push_back(value);
        let i = self.sorted.partition_point(|x| *x < value);
        self.sorted.insert(i, value);
    }

    fn sorted(&self) -> &[T] {
        &self.sorted
    }

    fn len(&self) -> usize {
        self.arrived.len()
    }

    /// The last `n` values, in arrival order.
    fn recent(&self, n: usize) -> impl Iterator<Item = T> + '_ {
        last(&self.arrived, n).copied()
    }

    /// A window of the same capacity holding only the last `n` values.
    fn tail(&self, n: usize) -> Self {
        let mut tail = Self {
            capacity: self.capacity,
            arrived: VecDeque::with_capacity(self.arrived.capacity()),
            sorted: Vec::with_capacity(self.sorted.capacity()),
        };
        for v in self.recent(n) {
            tail.push(v);
        }
        tail
    }

    fn clear(&mut self) {
        self.arrived.clear();
        self.sorted.clear();
    }
}

/// The last `n` entries of `q`, oldest first.
fn last<T>(q: &VecDeque<T>, n: usize) -> impl Iterator<Item = &T> {
    q.iter().skip(q.len().saturating_sub(n))
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

    /// `count` arrivals every other tick over a window of `history`: a slow link, then a
    /// fast one for the last `fast` arrivals.
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
        assert_eq!(slow_then_fast(1024, 700, 40).shift(32), Some(Shift::Better));
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
    fn a_hint_finds_the_same_lag_sooner() {
        for answer in [0.0123, 0.05, 0.0999] {
            let calls = std::cell::Cell::new(0);
            let enough = |lag: f64| {
                calls.set(calls.get() + 1);
                lag >= answer
            };
            let cold = smallest_lag(0.0, 0.1, enough);
            let cold_calls = calls.replace(0);
            assert!((cold - answer).abs() < 1e-5, "{cold}");
            for hint in [answer - 3e-4, answer, answer + 1e-4, -1.0, 0.3] {
                let warm = smallest_lag_near(0.0, 0.1, Some(hint), enough);
                assert!((warm - answer).abs() < 1e-5, "{answer} from {hint}: {warm}");
                assert!(warm >= answer, "{warm}");
            }
            // Near the answer, a handful of evaluations instead of a bisection of the range.
            calls.set(0);
            smallest_lag_near(0.0, 0.1, Some(answer - 5e-5), enough);
            assert!(
                calls.get() <= cold_calls / 2,
                "{} vs {cold_calls}",
                calls.get()
            );
        }
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
        let full = s.lag_for_fraction(0.0, 1.0, 0.0, None, None).unwrap();
        assert!((full - 0.2).abs() < 1e-4, "{full}");
        // Missing 0.5% of 10 s = 0.05 s of the late pair's 0.1 s.
        let half = s.lag_for_fraction(0.005, 1.0, 0.0, None, None).unwrap();
        assert!((half - 0.15).abs() < 1e-4, "{half}");
        // 1% can be missed by skipping the late pair entirely.
        let most = s.lag_for_fraction(0.01, 1.0, 0.0, None, None).unwrap();
        assert!((most - 0.1).abs() < 1e-4, "{most}");
        // Outages are ignored.
        assert_eq!(s.lag_for_fraction(0.0, 0.05, 0.0, None, None), None);
        assert_eq!(
            ArrivalStats::new(3).lag_for_fraction(0.01, 1.0, 0.0, None, None),
            None
        );
    }

    /// A fixed scramble of `t`, standing in for a random draw per tick.
    fn hash(t: u32) -> u32 {
        let mut x = t.wrapping_mul(0x9E37_79B9) ^ 0x85EB_CA6B;
        x ^= x >> 15;
        x = x.wrapping_mul(0x2C1B_3C6D);
        x ^ (x >> 12)
    }

    /// What `InterpolationBuffer::learn` records for an accepted arrival.
    fn arrive(s: &mut ArrivalStats, newest: &mut Option<u32>, tick: u32, at: f64, period: f64) {
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
    fn stream(count: u32, lost: impl Fn(u32) -> bool, jitter: impl Fn(u32) -> f64) -> ArrivalStats {
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

    #[test]
    fn the_loss_model_tells_bursts_from_independent_losses() {
        let period = 1.0 / 60.0;
        // One in 20 lost, independently (a hash stands in for a random draw).
        let single = stream(3000, |t| hash(t) % 20 == 0, |_| 0.0);
        let m = single.loss_model(period, 0.5).unwrap();
        assert!((m.loss - 0.05).abs() < 0.01, "{m:?}");
        assert!(m.lost_after_lost < 0.15, "{m:?}");
        // Runs of four, one in 80: the same loss rate, but a loss is usually followed by
        // another.
        let bursty = stream(3000, |t| t % 80 < 4, |_| 0.0);
        let b = bursty.loss_model(period, 0.5).unwrap();
        assert!((b.loss - 0.05).abs() < 0.002, "{b:?}");
        assert!(b.lost_after_lost > 0.65, "{b:?}");
        assert!(b.lost_after_kept < 0.02, "{b:?}");
        // An outage longer than `max_span` (here 60 ticks = 1 s against 0.5 s) is no loss.
        let outage = stream(3000, |t| t % 20 == 7 || (2000..2060).contains(&t), |_| 0.0);
        let o = outage.loss_model(period, 0.5).unwrap();
        assert!((o.loss - 0.05).abs() < 0.003, "{o:?}");
        assert!(ArrivalStats::new(8).loss_model(period, 0.5).is_none());
    }

    #[test]
    fn the_loss_model_survives_tick_wrap_around() {
        let model = |start: u32| {
            let mut s = ArrivalStats::new(512);
            s.add_gap(1);
            for k in 0..3000u32 {
                if hash(k) % 20 != 0 {
                    s.add_tick(start.wrapping_add(k));
                }
            }
            // No gap is long enough to count as an outage: a wrap taken for a jump back
            // by four billion ticks would show as that many losses.
            s.loss_model(1.0 / 60.0, 1e12).unwrap()
        };
        assert_eq!(model(u32::MAX - 1500), model(0));
        assert!(model(0).loss < 0.1);
    }

    #[test]
    fn the_model_covers_double_losses_the_window_never_saw() {
        let period = 1.0 / 60.0;
        // Snapshots every 6 ticks (10/s) with up to ±30 ms of jitter, one in 20 lost. In
        // the first 1500 every 100th loss is a double, in the rest none is: the last 512
        // pairs say one interval of slack is enough.
        let jitter = |t: u32| f64::from(hash(t) % 61) / 1000.0 - 0.03;
        let lost = |t: u32| {
            let k = t / 6;
            t % 6 != 0 || k % 20 == 7 || (k < 1500 && k % 100 == 8)
        };
        let s = stream(6 * 3000, lost, jitter);
        let target = 0.0005;
        let seen = s.lag_for_fraction(target, 0.5, 0.0, None, None).unwrap();
        let model = s
            .model_lag_for_fraction(target, 0.5, period, 0.0, None)
            .unwrap();
        // Two losses in a row happen to one pair in 400 at this loss rate; the model,
        // fitted over four times as many snapshots, keeps enough delay to ride over most
        // of them: about one interval more.
        assert!(model > seen + 0.05, "seen {seen}, model {model}");
        assert!(model < seen + 0.12, "seen {seen}, model {model}");
    }

    /// Sends every tick at 60 Hz for `count` ticks, dropping those `lost` says, with a
    /// fixed 50 ms delay plus `jitter(tick)`, delivered in order (a late packet holds
    /// back those sent after it, as netem does). Returns the arrivals too.
    fn fifo_stream(
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

    /// Plays `arrivals` back at a target `lag` in small steps by the buffer's rules (stretch
    /// while the snapshot after the newest is overdue and playback is about to reach the
    /// newest, then catch up at the time-scale bound) and returns the time playback spent past the
    /// newest snapshot: what `replay_missed` computes in closed form.
    fn step_through(arrivals: &[(f64, u32)], period: f64, lag: f64, stretch: Stretch) -> f64 {
        let dt = 1e-5;
        let (mut next, mut newest) = (1, f64::from(arrivals[0].1) * period);
        let mut now = arrivals[0].0;
        let mut shown = now - lag;
        let mut missed = 0.0;
        while next < arrivals.len() {
            now += dt;
            while next < arrivals.len() && arrivals[next].0 <= now {
                newest = newest.max(f64::from(arrivals[next].1) * period);
                next += 1;
            }
            if stretch.applies(now - newest, newest - shown, lag) {
                shown += stretch.rate * dt;
            } else {
                let behind = (now - lag) - (shown + dt);
                shown += dt + behind.clamp(0.0, stretch.catch_up * dt);
            }
            if shown > newest {
                missed += dt;
            }
        }
        missed
    }

    #[test]
    fn the_replay_plays_back_as_the_buffer_does() {
        let period = 1.0 / 60.0;
        // 60/s, one in 40 held up by 20-60 ms (holding back those behind it), 2% lost.
        let jitter = |t: u32| {
            if hash(t) % 40 == 0 {
                f64::from(20 + hash(t + 7) % 41) / 1000.0
            } else {
                f64::from(hash(t) % 6) / 1000.0
            }
        };
        let (s, arrivals) = fifo_stream(3000, |t| hash(t ^ 0x55) % 50 == 0, jitter);
        let stretch = s.stretch(period, 0.5, 0.9, 0.1).unwrap();
        // Overdue one interval after nine arrivals in ten.
        let q90 = s.offset_quantile(0.9).unwrap();
        assert!((stretch.from - (q90 + period)).abs() < 1e-12);
        assert!(stretch.from < s.max_offset().unwrap());
        let min = s.min_offset().unwrap();
        for extra in [0.0, 0.01, 0.02, 0.03, 0.045] {
            let lag = min + extra;
            let closed = s.replay_missed(lag, 1.0, 0.0, Some(stretch), f64::INFINITY);
            let stepped = step_through(&arrivals, period, lag, stretch);
            // Each event is off by at most a step or two.
            assert!(
                (closed - stepped).abs() < 1e-3 + 0.02 * stepped,
                "lag +{extra}: {closed} vs {stepped}"
            );
        }
        // Without stretching, playback misses exactly what arrives after it is due.
        let plain = s.replay_missed(min + 0.02, 1.0, 0.0, None, f64::INFINITY);
        let none = Stretch {
            from: f64::INFINITY,
            rate: 0.5,
            catch_up: 0.1,
            slack: 0.0,
        };
        let stepped = step_through(&arrivals, period, min + 0.02, none);
        assert!(
            (plain - stepped).abs() < 1e-3 + 0.02 * stepped,
            "{plain} vs {stepped}"
        );
    }

    #[test]
    fn a_stretch_carries_over_a_slow_spell() {
        let period = 1.0 / 60.0;
        // Every two seconds, a slow spell: six snapshots in a row each 8 ms later than the
        // one before (a queue building up), then back to 50 ms.
        let jitter = |t: u32| 0.008 * f64::from((t % 120).saturating_sub(113));
        let (s, _) = fifo_stream(3000, |_| false, jitter);
        let stretch = s.stretch(period, 0.5, 0.9, 0.1).unwrap();
        assert!((stretch.from - (0.05 + period)).abs() < 1e-9, "{stretch:?}");
        let target = 0.001;
        let plain = s.lag_for_fraction(target, 1.0, 0.0, None, None).unwrap();
        let stretched = s
            .lag_for_fraction(target, 1.0, 0.0, Some(stretch), None)
            .unwrap();
        // Without stretching, the lag waits for the latest of the spell, 48 ms past the
        // others (less the budget: 0.1% of two seconds per spell).
        assert!((plain - (0.098 + period)).abs() < 2e-3, "{plain}");
        // Each pair of the spell needs 8 ms more than the one before. Credited alone,
        // a pair gets `effective(lag)`, so the lag would have to bridge the last one on its
        // own. Played back in order, the lag each stretch adds is still there for the
        // next pair: the spell is bridged with much less.
        let alone = stretch.from + stretch.rate * (plain - stretch.from);
        assert!(stretched < alone - 0.01, "{stretched} vs {alone}");
        let missed = s.replay_missed(stretched, 1.0, 0.0, Some(stretch), f64::INFINITY);
        assert!(missed <= target * 50.0 + 1e-9, "{missed}");
        println!("plain {plain}, alone {alone}, in order {stretched}");
    }

    #[test]
    fn the_model_credits_stretching_over_losses() {
        let period = 1.0 / 60.0;
        // 10/s, ±30 ms of jitter, one snapshot in 20 lost and one loss in 10 a double.
        let jitter = |t: u32| f64::from(hash(t) % 61) / 1000.0 - 0.03;
        let lost = |t: u32| {
            let k = t / 6;
            t % 6 != 0 || k % 20 == 7 || k % 200 == 8
        };
        let s = stream(6 * 3000, lost, jitter);
        assert!(s.stretch(period, 1.0, 0.9, 0.1).is_none());
        let stretch = s.stretch(period, 0.5, 0.9, 0.1).unwrap();
        assert_eq!(stretch.effective(stretch.from - 0.01), stretch.from - 0.01);
        assert!((stretch.effective(stretch.from + 0.03) - (stretch.from + 0.06)).abs() < 1e-12);
        for target in [0.0005, 0.002, 0.01] {
            // The window's pairs: a double loss is ridden out with less lag.
            let plain = s.lag_for_fraction(target, 0.5, 0.0, None, None).unwrap();
            let seen = s
                .lag_for_fraction(target, 0.5, 0.0, Some(stretch), None)
                .unwrap();
            assert!(plain > stretch.from, "{target}: {plain} vs {stretch:?}");
            assert!(seen < plain - 0.02, "{target}: {seen} vs {plain}");
            // The model too.
            let plain = s
                .model_lag_for_fraction(target, 0.5, period, 0.0, None)
                .unwrap();
            let model = s
                .model_lag_for_fraction(target, 0.5, period, 0.0, Some(stretch))
                .unwrap();
            assert!(model < plain - 0.02, "{target}: {model} vs {plain}");
            assert!(model > stretch.from, "{target}: {model} vs {stretch:?}");
        }
    }

    #[test]
    fn frames_locked_to_the_sends_need_no_more_lag_than_their_phase() {
        let period = 1.0 / 60.0;
        // A steady link: every snapshot 50 ms on the way, none lost.
        let mut s = stream(600, |_| false, |_| 0.0);
        let evenly = s
            .model_lag_for_fraction(0.001, 0.5, period, 0.0, None)
            .unwrap();
        // Shown times anywhere in the interval: the worst needs a whole interval more.
        assert!((evenly - (0.05 + 0.999 * period)).abs() < 1e-3, "{evenly}");
        // Frames 4 ms after each send: a lag 4 ms past the link delay shows every frame
        // exactly at a snapshot that has just arrived.
        for f in 0..256 {
            s.add_frame(f64::from(f) * period + 0.004);
        }
        let locked = s
            .model_lag_for_fraction(0.001, 0.5, period, 0.0, None)
            .unwrap();
        assert!(locked > 0.054 && locked < 0.0546, "{locked}");
    }
}
