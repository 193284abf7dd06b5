//! The second estimate of the adaptive delay: a model of the link. Snapshots are lost as a
//! two-state chain fitted over the window's ticks says, the others arrive with offsets drawn
//! from the window's, and frames sample the send interval where they have been falling.
//! A strict target rests on events rarer than the window holds; the model builds their
//! tails from plentiful samples.

use super::arrivals::ArrivalStats;
use super::search::smallest_lag;
use super::stretch::Stretch;

/// Pseudo-losses, at the overall loss rate, added to the losses after a loss.
const LOSS_PRIOR: f64 = 8.0;

/// Jeffreys' prior on the loss rate, as pseudo-snapshots lost and received (see
/// [`LossModel::estimate`]).
const JEFFREYS: f64 = 0.5;

/// Parts of the send interval the frames' phases are counted in.
const PHASE_BINS: usize = 64;

/// Where in the send interval the link model evaluates a shown time; the missed fraction
/// is their mean.
const MODEL_PHASES: usize = 32;

/// The loss rate the model believes at most: above it, nothing useful can be played back.
const MAX_LOSS: f64 = 0.9;

/// The smallest playback lag at which a *model* of the link misses at most `fraction`
/// of the rendered frames: snapshots are lost as the window's [`LossModel::fit`] says,
/// and the others arrive with offsets drawn independently from the window's offsets.
/// Displayed server time `s` is ready at lag `L` when any snapshot at or after `s` has
/// arrived within `L` of it, so a frame misses with the chance that every one of them
/// is lost or later than that. That chance depends on how far `s` is from the next
/// send, so it is averaged over the phases at which the last frames fell (or evenly
/// over the interval before any frame). `None` until the loss rate and interval are
/// known.
///
/// A model, beside the window's own pairs ([`seen::lag`](super::seen::lag)), because a
/// strict target rests on events rarer than the window holds: whether one happens to be
/// in the window would swing the delay, and when none is, the target would be overshot.
///
/// With a `stretch`, snapshots get until the [effective](Stretch::effective) lag to
/// arrive: playback reaches the shown time that much later when the snapshot after
/// the newest is overdue, whether it was lost or is late. (The lag a stretch adds to
/// later pairs is not counted: the model stays on the safe side.)
///
/// Lags below `at_least` are not searched (the answer is then `at_least`): the caller
/// takes the larger of this and another estimate, and when the other one already
/// meets the target here one evaluation settles it instead of a bisection.
pub(super) fn lag(
    stats: &ArrivalStats,
    fraction: f64,
    max_span: f64,
    period: f64,
    at_least: f64,
    stretch: Option<Stretch>,
) -> Option<f64> {
    let loss = LossModel::fit(stats, period, max_span)?;
    let clock = stats.clock();
    let interval = f64::from(clock.interval()?) * period;
    let min = clock.min_offset()?;
    let max = clock.max_offset()?;
    let offsets = clock.sorted_offsets();
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
    let bins = frame_phases(stats, interval);
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
                sum / stats.frames().len() as f64
            }
            // No frames yet: shown times anywhere in the interval, evenly.
            None => {
                (0..MODEL_PHASES)
                    .map(|k| all_missing(lag, (k as f64 + 0.5) / MODEL_PHASES as f64 * interval))
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

/// How many of the remembered frames fall in each of [`PHASE_BINS`] equal parts of a
/// send interval of `interval` seconds; `None` without frames.
fn frame_phases(stats: &ArrivalStats, interval: f64) -> Option<[u32; PHASE_BINS]> {
    if stats.frames().is_empty() || interval.is_nan() || interval <= 0.0 {
        return None;
    }
    let mut bins = [0u32; PHASE_BINS];
    for now in stats.frames() {
        let phase = wrap(*now, interval) / interval;
        let b = ((phase * PHASE_BINS as f64) as usize).min(PHASE_BINS - 1);
        bins[b] += 1;
    }
    Some(bins)
}

/// A two-state (Gilbert) model of snapshot loss: whether a snapshot is lost depends on
/// whether the one sent before it was. Independent loss is the case where both
/// conditional chances are equal; bursty links (Wi-Fi, mobile) lose runs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LossModel {
    /// Long-run fraction of snapshots lost.
    loss: f64,
    /// Chance a snapshot is lost when the one before it arrived.
    lost_after_kept: f64,
    /// Chance a snapshot is lost when the one before it was lost too.
    lost_after_lost: f64,
}

impl LossModel {
    /// How snapshots get lost, from the window of ticks: which of the snapshots sent over
    /// the span the window covers arrived, and how losses cluster into runs. Runs longer
    /// than `max_span` seconds (outages) are left out, as in
    /// [`seen::lag`](super::seen::lag). `None` until the interval is known.
    fn fit(stats: &ArrivalStats, period: f64, max_span: f64) -> Option<Self> {
        let interval = i64::from(stats.clock().interval()?);
        let ticks = stats.sorted_ticks();
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
        Some(Self::estimate(received, lost, runs))
    }

    /// The model from `received` snapshots, `lost` ones and the number of loss `runs`.
    ///
    /// The loss rate is not the share lost but its expected value given that share (the
    /// mean of the posterior under Jeffreys' prior, `(lost + 1/2) / (sent + 1)`): over
    /// thousands of snapshots the two agree, but a window cut to the few arrivals since
    /// the link changed, or a buffer just started, that holds no loss yet has not seen a
    /// link that never loses, and a delay sized for one would leave losses uncovered.
    ///
    /// Runs of two or more are rare on a link that loses independently (at 5%, one loss
    /// in twenty is followed by another), so the chance of a loss after a loss is drawn
    /// towards the overall loss rate by [`LOSS_PRIOR`] pseudo-losses: a window that
    /// happens to hold no double loss does not conclude that none can happen.
    fn estimate(received: u64, lost: u64, runs: u64) -> Self {
        let sent = (received + lost).max(1) as f64;
        let loss = ((lost as f64 + JEFFREYS) / (sent + 2.0 * JEFFREYS)).min(MAX_LOSS);
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

/// `x` modulo a positive `m`, in `[0, m)`: `rem_euclid` without its exact (and, here,
/// hot) library `fmod`; the rounding of the quotient does not matter for binning.
fn wrap(x: f64, m: f64) -> f64 {
    let r = x - (x / m).floor() * m;
    if r >= 0.0 && r < m { r } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::super::arrivals::streams::{hash, stream};
    use super::super::seen;
    use super::*;

    #[test]
    fn the_loss_model_tells_bursts_from_independent_losses() {
        let period = 1.0 / 60.0;
        // One in 20 lost, independently (a hash stands in for a random draw).
        let single = stream(3000, |t| hash(t) % 20 == 0, |_| 0.0);
        let m = LossModel::fit(&single, period, 0.5).unwrap();
        assert!((m.loss - 0.05).abs() < 0.01, "{m:?}");
        assert!(m.lost_after_lost < 0.15, "{m:?}");
        // Runs of four, one in 80: the same loss rate, but a loss is usually followed by
        // another.
        let bursty = stream(3000, |t| t % 80 < 4, |_| 0.0);
        let b = LossModel::fit(&bursty, period, 0.5).unwrap();
        assert!((b.loss - 0.05).abs() < 0.002, "{b:?}");
        assert!(b.lost_after_lost > 0.65, "{b:?}");
        assert!(b.lost_after_kept < 0.02, "{b:?}");
        // An outage longer than `max_span` (here 60 ticks = 1 s against 0.5 s) is no loss.
        let outage = stream(3000, |t| t % 20 == 7 || (2000..2060).contains(&t), |_| 0.0);
        let o = LossModel::fit(&outage, period, 0.5).unwrap();
        assert!((o.loss - 0.05).abs() < 0.003, "{o:?}");
        assert!(LossModel::fit(&ArrivalStats::new(8), period, 0.5).is_none());
    }

    #[test]
    fn a_few_snapshots_without_a_loss_are_not_a_link_that_never_loses() {
        let period = 1.0 / 60.0;
        // Three seconds at 10 snapshots a second, none lost.
        let few = LossModel::fit(&stream(180, |t| t % 6 != 0, |_| 0.0), period, 0.5);
        let few = few.unwrap().loss;
        assert!(few > 0.01 && few < 0.05, "{few}");
        // Hundreds without a loss leave little doubt.
        let many = LossModel::fit(&stream(6 * 2000, |t| t % 6 != 0, |_| 0.0), period, 0.5);
        let many = many.unwrap().loss;
        assert!(many < 0.001, "{many}");
        // One loss in the first 30: the expected rate, above the share lost (1 in 30).
        let one = LossModel::fit(
            &stream(180, |t| t % 6 != 0 || t == 60, |_| 0.0),
            period,
            0.5,
        );
        let one = one.unwrap().loss;
        assert!(one > 1.0 / 30.0 && one < 0.06, "{one}");
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
            LossModel::fit(&s, 1.0 / 60.0, 1e12).unwrap()
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
        let seen = seen::lag(&s, target, 0.5, 0.0, None, None).unwrap();
        let model = lag(&s, target, 0.5, period, 0.0, None).unwrap();
        // Two losses in a row happen to one pair in 400 at this loss rate; the model,
        // fitted over four times as many snapshots, keeps enough delay to ride over most
        // of them: about one interval more.
        assert!(model > seen + 0.05, "seen {seen}, model {model}");
        assert!(model < seen + 0.12, "seen {seen}, model {model}");
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
        assert!(Stretch::new(s.clock(), period, 1.0, 0.9, 0.1).is_none());
        let stretch = Stretch::new(s.clock(), period, 0.5, 0.9, 0.1).unwrap();
        assert_eq!(stretch.effective(stretch.from - 0.01), stretch.from - 0.01);
        assert!((stretch.effective(stretch.from + 0.03) - (stretch.from + 0.06)).abs() < 1e-12);
        for target in [0.0005, 0.002, 0.01] {
            // The window's pairs: a double loss is ridden out with less lag.
            let plain = seen::lag(&s, target, 0.5, 0.0, None, None).unwrap();
            let seen = seen::lag(&s, target, 0.5, 0.0, Some(stretch), None).unwrap();
            assert!(plain > stretch.from, "{target}: {plain} vs {stretch:?}");
            assert!(seen < plain - 0.02, "{target}: {seen} vs {plain}");
            // The model too.
            let plain = lag(&s, target, 0.5, period, 0.0, None).unwrap();
            let model = lag(&s, target, 0.5, period, 0.0, Some(stretch)).unwrap();
            assert!(model < plain - 0.02, "{target}: {model} vs {plain}");
            assert!(model > stretch.from, "{target}: {model} vs {stretch:?}");
        }
    }

    #[test]
    fn frames_locked_to_the_sends_need_no_more_lag_than_their_phase() {
        let period = 1.0 / 60.0;
        // A steady link: every snapshot 50 ms on the way, none lost.
        let mut s = stream(600, |_| false, |_| 0.0);
        let evenly = lag(&s, 0.001, 0.5, period, 0.0, None).unwrap();
        // Shown times anywhere in the interval: the worst needs a whole interval more.
        assert!((evenly - (0.05 + 0.999 * period)).abs() < 1e-3, "{evenly}");
        // Frames 4 ms after each send: a lag 4 ms past the link delay shows every frame
        // exactly at a snapshot that has just arrived.
        for f in 0..256 {
            s.add_frame(f64::from(f) * period + 0.004);
        }
        let locked = lag(&s, 0.001, 0.5, period, 0.0, None).unwrap();
        assert!(locked > 0.054 && locked < 0.0546, "{locked}");
    }
}
