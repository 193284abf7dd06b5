//! How far behind the server playback runs: the [`DelayPolicy`].

use super::clock::{ArrivalStats, Stretch};
use std::time::Duration;

/// Pairs needed before the adaptive policy trusts its statistics; until then it plays
/// safe (the larger of three intervals past the median arrival and the largest need), and
/// playback jumps to its target rather than slewing.
pub(crate) const WARMUP_PAIRS: usize = 16;

/// The longest lag either policy asks for beyond the earliest arrival, seconds (an hour):
/// what an infinite `intervals` or `max_delay` comes to, so every delay stays a finite
/// number and a search over it stays precise.
pub const MAX_LAG_SECS: f64 = 3600.0;

/// What a `target_underrun` that is not a number is taken as: [`DelayPolicy::adaptive`]'s.
const DEFAULT_TARGET_UNDERRUN: f32 = 0.01;

/// How far behind the server the buffer plays snapshots back.
///
/// Delays are measured on the buffer's own estimate of the server clock (see
/// [`InterpolationBuffer`](super::InterpolationBuffer)); the send interval is measured from
/// the ticks of arriving snapshots, never configured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelayPolicy {
    /// Trail the *typical* (median) snapshot arrival by `intervals` send intervals: the
    /// buffer holds about that many intervals of snapshots ahead of the render position.
    /// Three (source 003's rule of thumb, [`DelayPolicy::CLASSIC`]) rides out one lost
    /// snapshot with one interval to spare for jitter above the median. Measured from the
    /// fastest arrival, that is "three intervals plus jitter": under ±33 ms of jitter it
    /// comes to about 88 ms at 60 snapshots/s and 334 ms at 10, against the source's 85
    /// and 350.
    Fixed {
        /// Send intervals of delay past the median arrival. Negative or not a number is
        /// taken as 0; the delay is at most [`MAX_LAG_SECS`] past the earliest arrival.
        intervals: f32,
    },
    /// Choose the smallest delay at which, over the recent window, snapshots would have
    /// been missing for at most `target_underrun` of the playback time.
    ///
    /// Two estimates must both meet the target; the delay is the larger of the two:
    ///
    /// - **What the window saw.** Each arriving snapshot records the lag it needed: its
    ///   arrival time minus the server time of the snapshot before it (the moment playback
    ///   starts depending on it). A lost snapshot lengthens that span by one send interval,
    ///   and jitter, queueing and loss all show up in the same number. Playback of the
    ///   window's pairs ([`history`](super::InterpolationConfig::history), 512 by
    ///   default) is replayed at the candidate lag, and the time it would have run
    ///   past the newest snapshot is what counts. A miss is counted as at least half a
    ///   rendered frame, since a renderer locked to the tick rate keeps sampling at the
    ///   same phase.
    /// - **A model of the link.** A strict target rests on events rarer than the window
    ///   holds (two losses in a row at 5% loss happen once in 400 snapshots), so the seen
    ///   estimate swings with whether one is in the window and undershoots when none is.
    ///   The model builds those tails from plentiful samples instead: a two-state loss
    ///   chain fitted over the last 2048 snapshots (or `history`, if longer), the spread of arrival offsets, and the
    ///   phases at which frames actually sample the send interval.
    ///
    /// Gaps longer than `max_delay` (outages) are left out of both, so they cost underruns
    /// beyond the target rather than delay.
    ///
    /// Both look back over the buffer's window of arrivals, which after a change of link
    /// mixes the old link with the new one; the buffer watches for such a change and
    /// then bases the delay on the arrivals since (see
    /// [`shift_window`](super::InterpolationConfig::shift_window)).
    ///
    /// The delay moves only as the window moves, and playback follows it by time-scaling
    /// (within [`max_time_scale`](super::InterpolationConfig::max_time_scale)), never by
    /// jumping. On top of that, if [`max_stretch`](super::InterpolationConfig::max_stretch)
    /// is set (it is off by default), when the snapshot after the newest is later than nine
    /// arrivals in ten in the window (late, or lost; see
    /// [`overdue_quantile`](super::InterpolationConfig::overdue_quantile)) and playback is
    /// about to reach the newest, playback slows down by
    /// [`max_stretch`](super::InterpolationConfig::max_stretch) until a newer one arrives,
    /// so what is buffered lasts until it or a replacement comes. Both estimates count on
    /// it: a pair waits for its snapshot as long as a longer delay would without
    /// stretching, and the window's pairs are replayed in order, so the lag one stretch
    /// adds carries over to the pairs right after it. This is what lets a short delay ride
    /// out two losses in a row, or a run of snapshots held back behind a late one, the
    /// events that set a strict target's delay, at the price of a moment of slow motion
    /// after each.
    Adaptive {
        /// Fraction of playback time allowed to run without a snapshot pair (0.01 = 1%),
        /// excluding outages longer than `max_delay`. Clamped to `[0, 1]`; not a number
        /// is taken as the default, 0.01.
        target_underrun: f32,
        /// Upper bound on the delay beyond the earliest arrival (at most
        /// [`MAX_LAG_SECS`]); gaps longer than this (outages) are left out of the
        /// statistics.
        max_delay: Duration,
    },
}

impl DelayPolicy {
    /// Source 003's rule of thumb: three send intervals.
    pub const CLASSIC: DelayPolicy = DelayPolicy::Fixed { intervals: 3.0 };

    /// The adaptive policy with default settings: 1% underrun, at most 500 ms.
    pub fn adaptive() -> Self {
        Self::adaptive_with_target(0.01)
    }

    /// The adaptive policy aiming at `target_underrun` (0.01 = 1%), otherwise with the
    /// defaults of [`DelayPolicy::adaptive`].
    pub fn adaptive_with_target(target_underrun: f32) -> Self {
        DelayPolicy::Adaptive {
            target_underrun,
            max_delay: Duration::from_millis(500),
        }
    }

    /// The playback lag (local time minus displayed server time, in the offset coordinates
    /// of [`ArrivalStats`]) this policy asks for, in seconds; `None` before any arrival.
    /// `frame` is the least a miss costs; `stretch` how the buffer stretches playback
    /// while a snapshot is overdue (`None`: it does not). `seen_hint` keeps the window
    /// estimate from one call to the next (it moves little between arrivals), which
    /// only speeds its search up.
    pub(crate) fn lag(
        &self,
        stats: &ArrivalStats,
        period: f64,
        frame: f64,
        stretch: Option<Stretch>,
        seen_hint: &mut Option<f64>,
    ) -> Option<f64> {
        let min = stats.min_offset()?;
        let median = stats.median_offset()?;
        let interval = f64::from(stats.interval().unwrap_or(1)) * period;
        let fixed = |intervals: f64| median + intervals * interval;
        let lag = match *self {
            DelayPolicy::Fixed { intervals } => fixed(f64::from(intervals).max(0.0)),
            DelayPolicy::Adaptive {
                target_underrun,
                max_delay,
            } => {
                let max_delay = max_delay.as_secs_f64().min(MAX_LAG_SECS);
                let target_underrun = if target_underrun.is_nan() {
                    DEFAULT_TARGET_UNDERRUN
                } else {
                    target_underrun
                };
                // A window cut at a change of link is trusted from its first pair.
                let warmed_up = if stats.is_cut() { 1 } else { WARMUP_PAIRS };
                let warm = if stats.needs_len() >= warmed_up {
                    let target = f64::from(target_underrun);
                    let seen =
                        stats.lag_for_fraction(target, max_delay, frame, stretch, *seen_hint);
                    *seen_hint = seen;
                    // The window's own pairs catch what the model cannot (correlated
                    // delay, anything but the loss chain); the model covers the rare
                    // runs of losses the window may happen not to hold. Both must agree
                    // the target is met.
                    let floor = seen.unwrap_or(f64::NEG_INFINITY);
                    stats
                        .model_lag_for_fraction(target, max_delay, period, floor, stretch)
                        .or(seen)
                } else {
                    None
                };
                match warm {
                    Some(lag) => lag.min(min + max_delay),
                    None => fixed(3.0)
                        .max(stats.max_need().unwrap_or(min))
                        .min(min + max_delay),
                }
            }
        };
        // Never ahead of the earliest arrival: nothing could be there to show.
        Some(lag.min(min + MAX_LAG_SECS).max(min))
    }
}

impl Default for DelayPolicy {
    fn default() -> Self {
        Self::adaptive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpolation::clock::Need;

    #[test]
    fn fixed_trails_the_median_by_whole_intervals() {
        let mut s = ArrivalStats::new(16);
        assert_eq!(
            DelayPolicy::CLASSIC.lag(&s, 0.01, 0.0, None, &mut None),
            None
        );
        for o in [0.05, 0.06, 0.07] {
            s.add_offset(o);
        }
        s.add_gap(2);
        let lag = DelayPolicy::CLASSIC
            .lag(&s, 0.01, 0.0, None, &mut None)
            .unwrap();
        assert!((lag - (0.06 + 3.0 * 0.02)).abs() < 1e-12, "{lag}");
        let none = DelayPolicy::Fixed { intervals: -1.0 }
            .lag(&s, 0.01, 0.0, None, &mut None)
            .unwrap();
        assert!((none - 0.06).abs() < 1e-12);
    }

    #[test]
    fn adaptive_follows_needs_once_warm() {
        let mut s = ArrivalStats::new(64);
        s.add_offset(0.05);
        s.add_gap(1);
        for _ in 0..WARMUP_PAIRS {
            s.add_need(Need {
                need: 0.07,
                span: 0.01,
            });
        }
        let lag = DelayPolicy::adaptive()
            .lag(&s, 0.01, 0.0, None, &mut None)
            .unwrap();
        assert!((lag - 0.07).abs() < 1e-4, "{lag}");
        // Capped at max_delay past the earliest arrival.
        let capped = DelayPolicy::Adaptive {
            target_underrun: 0.0,
            max_delay: Duration::from_millis(10),
        };
        assert!((capped.lag(&s, 0.01, 0.0, None, &mut None).unwrap() - 0.06).abs() < 1e-9);
    }
}
