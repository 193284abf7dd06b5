//! [`InterpolationConfig`]: how the buffer plays snapshots back, and its defaults.

use super::DelayPolicy;
use std::time::Duration;

// Named in the docs only.
#[cfg(doc)]
use super::{Interpolate, InterpolationBuffer, InterpolationStats};

/// Most slots allocated up front (snapshots, arrivals); larger capacities grow on demand.
pub(crate) const PREALLOCATE: usize = 1024;

/// Default [`InterpolationConfig::max_stretch`]: never stretch. The underruns a stretch
/// avoids are mostly extrapolations of a frame or two, which barely show, and the slow
/// motion that replaces them does (`docs/interpolation.md` has the figures).
pub const DEFAULT_MAX_STRETCH: f32 = 0.0;

/// Default [`InterpolationConfig::shift_window`]: enough recent arrivals to tell a change
/// within a few of them, few enough that the window holds eight times as many earlier
/// ones to compare with.
pub const DEFAULT_SHIFT_WINDOW: usize = 32;

/// Default [`InterpolationConfig::shift_slowdown`]: half speed.
pub const DEFAULT_SHIFT_SLOWDOWN: f32 = 0.5;

/// Default [`InterpolationConfig::history`]: 8.5 s of arrivals at 60 snapshots/s.
pub const DEFAULT_HISTORY: usize = 512;

/// Default [`InterpolationConfig::overdue_quantile`].
pub const DEFAULT_OVERDUE_QUANTILE: f32 = 0.9;

/// Smallest [`InterpolationConfig::overdue_quantile`] honoured (smaller values are raised
/// to it): a snapshot no later than the median is not overdue, and stretching for half of
/// all snapshots would keep playback in slow motion.
pub const MIN_OVERDUE_QUANTILE: f32 = 0.5;

/// Largest [`InterpolationConfig::max_stretch`] honoured (larger values are clamped to
/// it): playback never stops outright.
pub const MAX_STRETCH: f32 = 0.9;

/// How the value between two snapshots is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Curve {
    /// [`Interpolate::lerp`].
    Linear,
    /// [`Interpolate::hermite`] (which defaults to `lerp` for
    /// samples without derivatives).
    #[default]
    Hermite,
}

/// Interpolation buffer settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterpolationConfig {
    /// Server simulation rate, ticks per second (the tick numbers of snapshots count these).
    pub tick_hz: u32,
    /// How far behind the server playback runs.
    pub policy: DelayPolicy,
    /// Linear or Hermite blending between snapshots.
    pub curve: Curve,
    /// Most snapshots held (at least 2). When full, the oldest is dropped.
    pub capacity: usize,
    /// Longest extrapolation past the newest snapshot; beyond it the value is held.
    pub max_extrapolation: Duration,
    /// Snapshots further than this from the newest (either way) are refused as coming from
    /// another timeline; a few such snapshots in a row, consistent with each other and
    /// each newer than the last, reset the buffer onto their timeline. Less than a second
    /// is taken as a second.
    pub max_tick_jump: Duration,
    /// Arrivals the clock and delay statistics look back over (512: 8.5 s at 60
    /// snapshots/s, 51 s at 10). Longer windows give steadier delays and follow slow
    /// drift more slowly (a clear change of link is followed either way: see
    /// [`shift_window`](Self::shift_window)). The adaptive policy's cost per arrival
    /// grows in proportion, and its memory is 64 bytes per arrival (up to twice that
    /// after a change of link), the fixed policy's 16. At least 16: the adaptive
    /// policy waits for 16 pairs before trusting its statistics.
    pub history: usize,
    /// Largest speed-up or slow-down of playback while following a changed delay, as a
    /// fraction of real time (0.1 = between 90% and 110%). Clamped to `[0, 1]`; not a
    /// number turns slewing off, as 0 does. The other fractions of real time
    /// ([`max_stretch`](Self::max_stretch), [`shift_slowdown`](Self::shift_slowdown))
    /// are sanitized the same way, within their own bounds.
    pub max_time_scale: f32,
    /// How much the adaptive policy slows playback down while the snapshot after the
    /// newest is overdue (by default later than nine arrivals in ten: late, or lost; see
    /// [`overdue_quantile`](Self::overdue_quantile)) and playback is about to reach the
    /// newest, as a fraction of real time taken off (0.5 = half speed; at most 0.9, 0
    /// turns stretching off). What is buffered then lasts longer, so a snapshot arriving
    /// later still finds a pair to interpolate, and the policy counts on it when choosing
    /// the delay: a larger stretch buys a shorter delay at the same underrun rate, paid
    /// for by remote entities moving in slow motion for a moment after each late or lost
    /// snapshot ([`InterpolationStats::stretched`] counts those frames). Off by default
    /// ([`DEFAULT_MAX_STRETCH`]); what each setting bought on the lab's links is in
    /// `docs/interpolation.md`. The fixed policy never stretches.
    pub max_stretch: f32,
    /// When the snapshot after the newest counts as overdue, so that a stretch may
    /// start: once it is later than this share of the window's arrivals, plus one send
    /// interval (0.9: later than nine arrivals in ten; 1: later than the slowest; at least
    /// [`MIN_OVERDUE_QUANTILE`]).
    ///
    /// Not the slowest arrival by default: when snapshots come faster than jitter spreads
    /// them, a late one holds back those sent after it (links deliver in order), and the
    /// underruns come from such runs of late snapshots rather than from losses; waiting
    /// for the slowest arrival spends the delay those runs need. An earlier moment costs
    /// a stretch for every snapshot that is merely later than it.
    pub overdue_quantile: f32,
    /// Recent arrivals the adaptive policy watches for a change of link (0 turns the
    /// watch off; [`DEFAULT_SHIFT_WINDOW`]).
    ///
    /// The delay statistics span [`history`](Self::history) arrivals, so after the link
    /// changes they mix the old link and the new one until the window has turned over,
    /// which at 10 snapshots/s takes 51 s. At every arrival the buffer therefore asks
    /// whether the last `shift_window` arrivals needed more lag, came later or lost more
    /// than the window's earlier ones far more often than chance allows, or came far
    /// sooner or lost far fewer (see [`InterpolationStats::shifts_worse`]). After a worse
    /// link the delay is at least what the arrivals since the change call for, so it
    /// rises within a few arrivals; after a better one the window forgets the old link,
    /// so the delay it no longer needs is given back at once. Either test needs eight
    /// times `shift_window` earlier arrivals in the window, and the fixed policy ignores
    /// the setting. `docs/interpolation.md` tells how each test works.
    pub shift_window: usize,
    /// How far playback may slow down to reach the longer delay a link that got worse
    /// needs, once the buffer has seen it get worse (see
    /// [`shift_window`](Self::shift_window)), as a fraction of real time taken off (0.5
    /// = half speed; at most [`MAX_STRETCH`]; below
    /// [`max_time_scale`](Self::max_time_scale), that bound applies as to any change of
    /// delay). Playback past the newest snapshot is guesswork until it is back behind
    /// it, so catching up with a worse link is worth a moment of slow motion. Only the
    /// first catch-up after each change seen is this steep: a link change is rare,
    /// unlike the late snapshots [`max_stretch`](Self::max_stretch) is about.
    pub shift_slowdown: f32,
    /// Time constant of that correction: an error of `e` is corrected at `e / slew_time`
    /// per second (within `max_time_scale`).
    pub slew_time: Duration,
    /// Playback further than this ahead of its target waits, and further behind jumps,
    /// rather than slewing for seconds.
    pub snap_threshold: Duration,
    /// A silence between two arrivals at least this long (and at least four send
    /// intervals) is a hole in the link, an outage, not jitter: the arrival that ends it
    /// and those queued behind it, until one comes as early as the delay before the hole
    /// allowed for (or [`OUTAGE_LEARN_AFTER`] has passed), are played but not learned, so
    /// the delay stays where it was instead of rising to ride out the next outage
    /// (Fiedler's "Snapshot Interpolation": a hole is skipped). Default
    /// [`DEFAULT_OUTAGE`]; [`Duration::MAX`] learns every gap.
    pub outage: Duration,
}

/// Default [`InterpolationConfig::outage`]: the longest delay the adaptive policies ask
/// for by default (`max_delay`), so a gap no default delay rides out is an outage. 300 ms
/// also kept the lab's `mobile` runs as they were and stopped a 500 ms outage from being
/// learned, but shows the Bevy host-client arena's host player worse on `mobile` (p99 4.0
/// -> 5.5 cm): gaps of 300-500 ms happen there and are jitter.
pub const DEFAULT_OUTAGE: Duration = Duration::from_millis(500);

/// How long after a hole the buffer goes on not learning late arrivals: past it, arrivals
/// that are still late are a slower link, not the outage's queue draining, and are learned
/// (the change-of-link watch then follows them).
pub const OUTAGE_LEARN_AFTER: Duration = Duration::from_secs(2);

impl InterpolationConfig {
    /// [`max_time_scale`](Self::max_time_scale), sanitized.
    pub(crate) fn bounded_max_time_scale(&self) -> f64 {
        fraction_setting(f64::from(self.max_time_scale), 1.0)
    }

    /// [`shift_slowdown`](Self::shift_slowdown), sanitized.
    pub(crate) fn bounded_shift_slowdown(&self) -> f64 {
        fraction_setting(f64::from(self.shift_slowdown), f64::from(MAX_STRETCH))
    }

    /// [`overdue_quantile`](Self::overdue_quantile), within `[MIN_OVERDUE_QUANTILE, 1]`
    /// (the default when not a number).
    pub(crate) fn bounded_overdue_quantile(&self) -> f64 {
        // Rounded through decimals, so 0.9 means 0.9 and not 0.8999999761581421: the
        // quantile's index is rounded, and on a short window that would pick a neighbour.
        let q = (f64::from(self.overdue_quantile) * 1e6).round() / 1e6;
        if q.is_nan() {
            f64::from(DEFAULT_OVERDUE_QUANTILE)
        } else {
            q.clamp(f64::from(MIN_OVERDUE_QUANTILE), 1.0)
        }
    }

    /// Playback speed while the adaptive policy stretches, as a fraction of real time
    /// (1: it does not): [`max_stretch`](Self::max_stretch) taken off, sanitized.
    pub(crate) fn stretch_rate(&self) -> f64 {
        1.0 - fraction_setting(f64::from(self.max_stretch), f64::from(MAX_STRETCH))
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

impl Default for InterpolationConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            policy: DelayPolicy::default(),
            curve: Curve::Hermite,
            capacity: 64,
            max_extrapolation: Duration::from_millis(100),
            max_tick_jump: Duration::from_secs(4),
            history: DEFAULT_HISTORY,
            max_time_scale: 0.1,
            max_stretch: DEFAULT_MAX_STRETCH,
            overdue_quantile: DEFAULT_OVERDUE_QUANTILE,
            shift_window: DEFAULT_SHIFT_WINDOW,
            shift_slowdown: DEFAULT_SHIFT_SLOWDOWN,
            slew_time: Duration::from_millis(500),
            snap_threshold: Duration::from_millis(500),
            outage: DEFAULT_OUTAGE,
        }
    }
}
