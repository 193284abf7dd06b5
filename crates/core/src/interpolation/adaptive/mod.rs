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
}

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
