//! Stretching playback while a snapshot is overdue: when, how slowly, and what it buys.

use super::super::clock::Clock;
use super::super::config::fraction_setting;
// Named in the docs only.
#[cfg(doc)]
use crate::interpolation::InterpolationConfig;

/// How the buffer stretches playback while the snapshot after the newest is overdue: from
/// `from` seconds after the newest one's server time (in lag coordinates: the window's
/// `overdue_quantile` of offsets plus one send interval, see
/// [`InterpolationConfig::overdue_quantile`]),
/// playback slows to `rate` of real time until a newer snapshot arrives or playback
/// reaches the newest, and afterwards catches up with its target lag at `1 + catch_up` of
/// real time. The buffer asks it both when to stretch and, through the policy's
/// estimates, what stretching buys: one rule for both, so the delay counts on exactly
/// the stretch playback does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Stretch {
    /// Lag at which the snapshot after the newest counts as overdue.
    pub(crate) from: f64,
    /// Playback speed while stretching, in `(0, 1)`.
    pub(crate) rate: f64,
    /// How much faster than real time playback catches up afterwards (0.1: 110%).
    pub(crate) catch_up: f64,
    /// How much further behind than usual playback may be for a stretch to start (one
    /// send interval). Stretching begins only when playback is about to reach the newest:
    /// at the target lag, `lag - from` short of it when it turns overdue; still behind
    /// from the last stretch, it has more in hand and waits until that has run down to
    /// within `slack`. Without a bound, a link where the next snapshot is often overdue
    /// would stretch faster than catching up makes good, and the delay would grow
    /// without end; with none at all, a playback a hair behind its target would never
    /// stretch.
    pub(crate) slack: f64,
}

impl Stretch {
    /// How the buffer would stretch playback now, at `rate` of real time, from the
    /// `overdue_quantile` of `clock`'s offsets plus an interval (ticks of `period`
    /// seconds), catching up at `1 + catch_up`; `None` before the interval and offsets
    /// are known, or with `rate` 1.
    pub(crate) fn new(
        clock: &Clock,
        period: f64,
        rate: f64,
        overdue_quantile: f64,
        catch_up: f64,
    ) -> Option<Self> {
        if !(rate > 0.0 && rate < 1.0) {
            return None;
        }
        let interval = f64::from(clock.interval()?) * period;
        Some(Stretch {
            from: clock.offset_quantile(overdue_quantile)? + interval,
            rate,
            catch_up: fraction_setting(catch_up, 1.0),
            slack: interval,
        })
    }

    /// True when playback should be stretching: the snapshot after the newest is overdue
    /// (the newest is older than `from`, at `age`: local time minus its server time), and
    /// playback is short of the newest by `runway` seconds of server time, more than
    /// nothing and less than [`max_runway`](Self::max_runway) at the target `lag`.
    pub(crate) fn applies(&self, age: f64, runway: f64, lag: f64) -> bool {
        age > self.from && runway > 0.0 && runway < self.max_runway(lag)
    }

    /// How little of the buffer may be left ahead of playback (server time between the
    /// shown time and the newest snapshot) for a stretch to start, at a target `lag`:
    /// `lag - from` as at the target lag when the newest turns overdue, plus
    /// [`slack`](Self::slack).
    pub(crate) fn max_runway(&self, lag: f64) -> f64 {
        lag - self.from + self.slack
    }

    /// The lag that, without stretching, would wait as long for the snapshot after the
    /// newest as `lag` does with it. Playback at lag `L` reaches the newest snapshot's
    /// server time `L` after it; when `L` exceeds `from`, it spends the last `L - from`
    /// of that at `rate`, so it gets there only `from + (L - from) / rate` after. Below
    /// `from` nothing is overdue before playback runs out, and nothing changes.
    pub(crate) fn effective(&self, lag: f64) -> f64 {
        if lag > self.from {
            self.from + (lag - self.from) / self.rate
        } else {
            lag
        }
    }
}
