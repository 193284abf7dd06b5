//! How far behind the server playback runs: the [`DelayPolicy`] a game picks, and the
//! state the buffer keeps for it ([`Delay`]).
//!
//! Each policy lives in its own module behind the same few calls (an arrival in, a lag
//! out), so the buffer's playback never depends on how the lag was chosen, and the fixed
//! policy builds none of the adaptive one's windows.

use super::InterpolationConfig;
use super::adaptive::{AdaptiveDelay, Stretch};
use super::clock::Clock;
use super::fixed::FixedDelay;
use crate::window::shift::Shift;
use std::time::Duration;

/// Pairs needed before a policy's statistics are trusted. Until then the adaptive policy
/// plays safe (the larger of three intervals past the median arrival and the largest
/// need), and playback jumps to its target rather than slewing.
pub(crate) const WARMUP_PAIRS: usize = 16;

/// The longest lag either policy asks for beyond the earliest arrival, seconds (an hour):
/// what an infinite `intervals` or `max_delay` comes to, so every delay stays a finite
/// number and a search over it stays precise.
pub const MAX_LAG_SECS: f64 = 3600.0;

/// How far behind the server the buffer plays snapshots back.
///
/// Delays are measured on the buffer's own estimate of the server clock (see
/// [`InterpolationBuffer`](super::InterpolationBuffer)); the send interval is measured from
/// the ticks of arriving snapshots, never configured. How the adaptive policy chooses,
/// and what each policy measured on the lab's links, is told in `docs/interpolation.md`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelayPolicy {
    /// Trail the *typical* (median) snapshot arrival by `intervals` send intervals: the
    /// buffer holds about that many intervals of snapshots ahead of the render position.
    /// Three (Fiedler's rule of thumb, [`DelayPolicy::CLASSIC`]) rides out one lost
    /// snapshot with one interval to spare for jitter above the median.
    Fixed {
        /// Send intervals of delay past the median arrival. Negative or not a number is
        /// taken as 0; the delay is at most [`MAX_LAG_SECS`] past the earliest arrival.
        intervals: f32,
    },
    /// Choose the smallest delay at which, over the recent window of arrivals, snapshots
    /// would have been missing for at most `target_underrun` of the playback time.
    ///
    /// The delay is the larger of two estimates, both of which must meet the target: the
    /// window's own pairs replayed at the candidate delay (they catch what no model does:
    /// correlated delay, runs of late snapshots), and a model of the link (a loss chain,
    /// the spread of offsets, the phases frames sample at), since a strict target rests
    /// on events rarer than the window holds. The policy follows a change of link within
    /// a few arrivals ([`shift_window`](super::InterpolationConfig::shift_window)), and
    /// counts on the stretch of playback over an overdue snapshot when there is one
    /// ([`max_stretch`](super::InterpolationConfig::max_stretch)).
    Adaptive {
        /// Fraction of playback time allowed to run without a snapshot pair (0.01 = 1%),
        /// excluding outages longer than `max_delay`. Clamped to `[0, 1]`; not a number
        /// is taken as the default, 0.01.
        target_underrun: f32,
        /// Upper bound on the delay beyond the earliest arrival (at most
        /// [`MAX_LAG_SECS`]); gaps longer than this (outages) are left out of the
        /// statistics, so they cost underruns beyond the target rather than delay.
        max_delay: Duration,
    },
    /// [`DelayPolicy::Adaptive`] with its underrun target chosen by what the player
    /// feels: among targets up to `max_underrun`, the one whose delay costs least, a tick
    /// of delay priced as what the game says a tick of felt latency costs, an underrun
    /// tick as what it says an underrun costs (the jump when real snapshots return), both
    /// given by [`InterpolationBuffer::set_costs`](super::InterpolationBuffer::set_costs);
    /// the replication layer's client measures them. 1% until costs are given.
    Felt {
        /// The largest underrun share it may choose.
        max_underrun: f32,
        /// As for [`DelayPolicy::Adaptive`].
        max_delay: Duration,
    },
}

impl DelayPolicy {
    /// The felt policy with its defaults: at most 8% underrun, at most 500 ms.
    pub fn felt() -> Self {
        DelayPolicy::Felt {
            max_underrun: 0.08,
            max_delay: Duration::from_millis(500),
        }
    }

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
}

impl Default for DelayPolicy {
    /// [`DelayPolicy::adaptive`]. [`DelayPolicy::felt`] is not the default yet: how a tick
    /// of delay should be priced is not settled (`docs/interpolation.md`, "The felt
    /// policy"), and as priced it chose longer views in the shooter than lag
    /// compensation's window allows for.
    fn default() -> Self {
        Self::adaptive()
    }
}

/// What an accepted snapshot tells the delay policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    /// Its tick, as sent.
    pub(crate) tick: u32,
    /// Its arrival offset (see [`Clock`]).
    pub(crate) offset: f64,
    /// When it is newer than the newest before it: the tick gap to that one, and what the
    /// pair of the two needed. A late snapshot filling a hole has none: its pair was
    /// already counted, spanning it.
    pub(crate) pair: Option<(u32, Need)>,
}

/// One consecutive pair of snapshots: playback may show the span between the earlier one
/// and the new snapshot only once the new one has arrived, which is in time if the
/// playback lag (local time minus the server time shown) is at least `need`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Need {
    /// `arrival - earlier_tick * period`: the smallest lag that has the pair ready when
    /// playback reaches the earlier snapshot.
    pub(crate) need: f64,
    /// Server time the pair spans, seconds.
    pub(crate) span: f64,
}

impl Need {
    /// False for a pair no statistic should count (not a finite lag, or spanning no time).
    pub(crate) fn is_usable(&self) -> bool {
        self.need.is_finite() && self.span.is_finite() && self.span > 0.0
    }
}

/// The state of the buffer's [`DelayPolicy`]: what the buffer tells it, and asks it.
#[derive(Debug, Clone)]
pub(crate) enum Delay {
    /// [`DelayPolicy::Fixed`].
    Fixed(FixedDelay),
    /// [`DelayPolicy::Adaptive`], boxed: its windows dwarf the fixed policy's state.
    Adaptive(Box<AdaptiveDelay>),
}

impl Delay {
    /// The policy `config` asks for, over ticks of `period` seconds.
    pub(crate) fn new(config: &InterpolationConfig, period: f64) -> Self {
        match config.policy {
            DelayPolicy::Fixed { intervals } => {
                Delay::Fixed(FixedDelay::new(intervals, config.history, period))
            }
            DelayPolicy::Adaptive {
                target_underrun,
                max_delay,
            } => Delay::Adaptive(Box::new(AdaptiveDelay::new(
                target_underrun,
                max_delay,
                config,
                period,
            ))),
            DelayPolicy::Felt {
                max_underrun,
                max_delay,
            } => Delay::Adaptive(Box::new(
                AdaptiveDelay::new(0.01, max_delay, config, period).felt(max_underrun),
            )),
        }
    }

    /// Gives the felt policy its costs; the others ignore them.
    pub(crate) fn set_costs(&mut self, per_delay_tick: f64, per_underrun_tick: f64) {
        if let Delay::Adaptive(adaptive) = self {
            adaptive.set_costs(per_delay_tick, per_underrun_tick);
        }
    }

    /// The underrun share the adaptive policies aim at now; `None` for a fixed one.
    pub(crate) fn target_underrun(&self) -> Option<f64> {
        match self {
            Delay::Fixed(_) => None,
            Delay::Adaptive(adaptive) => Some(adaptive.target_underrun()),
        }
    }

    /// Forgets everything (a new timeline).
    pub(crate) fn clear(&mut self) {
        match self {
            Delay::Fixed(fixed) => fixed.clear(),
            Delay::Adaptive(adaptive) => adaptive.clear(),
        }
    }

    /// Records an accepted snapshot and moves the lag with it; `min_miss` is the least a
    /// miss costs (half a rendered frame). Returns the change of link it revealed, if any.
    pub(crate) fn arrive(&mut self, arrival: &Arrival, min_miss: f64) -> Option<Shift> {
        match self {
            Delay::Fixed(fixed) => {
                fixed.arrive(arrival);
                None
            }
            Delay::Adaptive(adaptive) => adaptive.arrive(arrival, min_miss),
        }
    }

    /// Records the local time of a rendered frame.
    pub(crate) fn frame(&mut self, now: f64) {
        if let Delay::Adaptive(adaptive) = self {
            adaptive.frame(now);
        }
    }

    /// The playback lag the policy asks for: local time minus the server time shown, in
    /// the offset coordinates of [`Clock`], seconds; `None` before any arrival.
    pub(crate) fn lag(&self) -> Option<f64> {
        match self {
            Delay::Fixed(fixed) => fixed.lag(),
            Delay::Adaptive(adaptive) => adaptive.lag(),
        }
    }

    /// The clock the lag is measured on.
    pub(crate) fn clock(&self) -> &Clock {
        match self {
            Delay::Fixed(fixed) => fixed.clock(),
            Delay::Adaptive(adaptive) => adaptive.clock(),
        }
    }

    /// True while too few pairs have arrived to trust the lag.
    pub(crate) fn warming_up(&self) -> bool {
        match self {
            Delay::Fixed(fixed) => fixed.warming_up(),
            Delay::Adaptive(adaptive) => adaptive.warming_up(),
        }
    }

    /// How playback stretches over an overdue snapshot now; `None` when it does not (the
    /// fixed policy never does).
    pub(crate) fn stretch(&self) -> Option<Stretch> {
        match self {
            Delay::Fixed(_) => None,
            Delay::Adaptive(adaptive) => adaptive.stretch(),
        }
    }
}
