//! [`DelayPolicy::Adaptive`](super::DelayPolicy::Adaptive): the shortest delay that would
//! have met the underrun target over the recent window of arrivals.
//!
//! The buffer sees [`AdaptiveDelay`] only: arrivals and frames in, a lag and a stretch
//! out. Inside, the statistics ([`arrivals`]) are kept apart from what is done with them:
//! the two estimates of the lag (what the window saw, [`seen`]; a model of the link,
//! [`model`]), what stretching playback buys ([`stretch`]), and the windows the policy
//! keeps and watches for a change of link ([`window`]). `docs/interpolation.md` tells
//! the algorithm's story and what it measured.

mod arrivals;
mod model;
mod search;
mod seen;
mod stretch;
mod window;

#[cfg(test)]
pub(in crate::interpolation) use arrivals::streams;
pub(crate) use stretch::Stretch;

use super::InterpolationConfig;
use super::clock::Clock;
use super::policy::{Arrival, MAX_LAG_SECS, WARMUP_PAIRS};
use crate::window::shift::Shift;
use std::time::Duration;
use window::ArrivalWindow;

/// What a `target_underrun` that is not a number is taken as:
/// [`DelayPolicy::adaptive`](super::DelayPolicy::adaptive)'s.
const DEFAULT_TARGET_UNDERRUN: f32 = 0.01;

/// What the lag must achieve, sanitized once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target {
    /// Fraction of playback time allowed without a snapshot pair.
    pub(super) underrun: f64,
    /// The longest delay past the earliest arrival, and the longest gap counted (longer
    /// ones are outages), seconds.
    pub(super) max_delay: f64,
    /// Seconds per server tick.
    pub(super) period: f64,
}

/// The adaptive policy's state: the window of arrivals, and while the link is seen to have
/// got worse, the arrivals since.
#[derive(Debug, Clone)]
pub(crate) struct AdaptiveDelay {
    target: Target,
    /// [`InterpolationConfig::shift_window`].
    shift_window: usize,
    /// Playback speed while stretching, as a fraction of real time (1: no stretching).
    stretch_rate: f64,
    /// [`InterpolationConfig::overdue_quantile`], sanitized.
    overdue_quantile: f64,
    /// How much faster than real time playback catches up after a stretch.
    catch_up: f64,
    window: ArrivalWindow,
    /// The arrivals since the link was last seen to get worse, while fewer than the
    /// window holds: the delay is at least what they alone call for.
    since_worse: Option<ArrivalWindow>,
    lag: Option<f64>,
    /// With [`DelayPolicy::Felt`](super::DelayPolicy::Felt): the largest underrun share
    /// it may choose.
    felt: Option<f64>,
    /// The felt cost of a tick of delay and of an underrun tick.
    costs: Option<(f64, f64)>,
    /// Arrivals since the felt target was last chosen.
    since_choice: usize,
}

/// The underrun targets the felt policy chooses among.
const FELT_TARGETS: [f64; 8] = [0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12];

/// Arrivals between two choices of the felt target (each choice costs a search per
/// candidate; the window moves little in half a second).
const FELT_CHOICE_ARRIVALS: usize = 32;

impl AdaptiveDelay {
    /// The policy `DelayPolicy::Adaptive { target_underrun, max_delay }` with the rest of
    /// `config`, over ticks of `period` seconds.
    pub(crate) fn new(
        target_underrun: f32,
        max_delay: Duration,
        config: &InterpolationConfig,
        period: f64,
    ) -> Self {
        let target_underrun = if target_underrun.is_nan() {
            DEFAULT_TARGET_UNDERRUN
        } else {
            target_underrun
        };
        Self {
            target: Target {
                underrun: f64::from(target_underrun),
                max_delay: max_delay.as_secs_f64().min(MAX_LAG_SECS),
                period,
            },
            shift_window: config.shift_window,
            stretch_rate: config.stretch_rate(),
            overdue_quantile: config.bounded_overdue_quantile(),
            catch_up: config.bounded_max_time_scale(),
            window: ArrivalWindow::new(config.history),
            since_worse: None,
            lag: None,
            felt: None,
            costs: None,
            since_choice: 0,
        }
    }

    /// The felt policy: the target chosen by cost, up to `max_underrun`.
    pub(crate) fn felt(mut self, max_underrun: f32) -> Self {
        let max = if max_underrun.is_finite() {
            f64::from(max_underrun).clamp(FELT_TARGETS[0], 1.0)
        } else {
            0.08
        };
        self.felt = Some(max);
        self
    }

    /// The felt costs (ignored unless felt; non-finite or negative ones ignored).
    pub(crate) fn set_costs(&mut self, per_delay_tick: f64, per_underrun_tick: f64) {
        let valid = |c: f64| c.is_finite() && c >= 0.0;
        if self.felt.is_some() && valid(per_delay_tick) && valid(per_underrun_tick) {
            if self.costs.is_none() {
                self.since_choice = FELT_CHOICE_ARRIVALS;
            }
            self.costs = Some((per_delay_tick, per_underrun_tick));
        }
    }

    /// The underrun share aimed at now.
    pub(crate) fn target_underrun(&self) -> f64 {
        self.target.underrun
    }

    /// Chooses the felt target: the candidate whose lag over the window, in ticks, times
    /// a delay tick's cost, plus its underrun share times an underrun tick's, is least.
    fn choose(&mut self, min_miss: f64, stretch: Option<Stretch>) {
        let (Some(max), Some((per_delay, per_underrun))) = (self.felt, self.costs) else {
            return;
        };
        if self.since_choice < FELT_CHOICE_ARRIVALS || self.warming_up() {
            return;
        }
        self.since_choice = 0;
        let mut best: Option<(f64, f64)> = None;
        for underrun in FELT_TARGETS.into_iter().filter(|u| *u <= max) {
            let target = Target {
                underrun,
                ..self.target
            };
            let Some(lag) = self.window.lag(&target, min_miss, stretch) else {
                return;
            };
            let cost = lag / self.target.period * per_delay + underrun * per_underrun;
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, underrun));
            }
        }
        if let Some((_, underrun)) = best {
            self.target.underrun = underrun;
        }
    }

    /// Forgets everything (a new timeline).
    pub(crate) fn clear(&mut self) {
        self.window.clear();
        self.since_worse = None;
        self.lag = None;
    }

    /// Records an accepted snapshot, follows a change of link it reveals (which it
    /// returns), and moves the lag.
    pub(crate) fn arrive(&mut self, arrival: &Arrival, min_miss: f64) -> Option<Shift> {
        for window in self.windows_mut() {
            window.stats.record(arrival);
        }
        let shift = self.follow_shifts();
        let stretch = self.stretch();
        self.since_choice += 1;
        self.choose(min_miss, stretch);
        self.lag = self.window.lag(&self.target, min_miss, stretch);
        if let Some(since) = &mut self.since_worse {
            if let Some(lag) = since.lag(&self.target, min_miss, stretch) {
                self.lag = Some(self.lag.map_or(lag, |l| l.max(lag)));
            }
        }
        shift
    }

    /// Records the local time of a rendered frame: the link model counts on where in the
    /// send interval frames fall.
    pub(crate) fn frame(&mut self, now: f64) {
        for window in self.windows_mut() {
            window.stats.add_frame(now);
        }
    }

    /// The playback lag, seconds; `None` before any arrival.
    pub(crate) fn lag(&self) -> Option<f64> {
        self.lag
    }

    /// The clock of the window.
    pub(crate) fn clock(&self) -> &Clock {
        self.window.stats.clock()
    }

    /// True until the window holds [`WARMUP_PAIRS`] pairs.
    pub(crate) fn warming_up(&self) -> bool {
        self.window.stats.needs_len() < WARMUP_PAIRS
    }

    /// How playback stretches over an overdue snapshot now (`None`: it does not): the
    /// rule the buffer applies, which the estimates count on.
    pub(crate) fn stretch(&self) -> Option<Stretch> {
        Stretch::new(
            self.clock(),
            self.target.period,
            self.stretch_rate,
            self.overdue_quantile,
            self.catch_up,
        )
    }

    /// The windows every arrival and frame goes into.
    fn windows_mut(&mut self) -> impl Iterator<Item = &mut ArrivalWindow> {
        std::iter::once(&mut self.window).chain(self.since_worse.as_mut())
    }

    /// Watches for a change of link (see [`InterpolationConfig::shift_window`]) in the
    /// arrivals since the last change seen, or the whole window when there was none
    /// lately. A worse link gets a window of its own arrivals beside the whole one (the
    /// delay rises within a few arrivals, and the longer memory can only add to it); a
    /// better one has the window forget the old link (the delay it no longer needs is
    /// given back at once).
    fn follow_shifts(&mut self) -> Option<Shift> {
        let recent = self.shift_window;
        if recent == 0 {
            return None;
        }
        // Once the arrivals since the change fill a window, they are the window.
        if self
            .since_worse
            .as_ref()
            .is_some_and(ArrivalWindow::is_full)
        {
            self.since_worse = None;
        }
        let watched = self.since_worse.as_mut().unwrap_or(&mut self.window);
        let shift = watched.shift(recent)?;
        match shift {
            Shift::Worse { since } => self.since_worse = Some(watched.tail(since)),
            Shift::Better { since } => {
                self.window = watched.tail(since);
                self.since_worse = None;
            }
        }
        Some(shift)
    }
}
