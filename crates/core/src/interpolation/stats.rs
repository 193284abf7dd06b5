//! [`InterpolationStats`]: what the buffer did with every snapshot and every frame.

// Named in the docs only.
#[cfg(doc)]
use super::{InterpolationBuffer, InterpolationConfig, PushError};

/// Counters. Every push and every answered [`InterpolationBuffer::sample_at`] lands in
/// exactly one of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InterpolationStats {
    /// Snapshots accepted.
    pub accepted: u64,
    /// Refused as stale ([`PushError::Stale`]).
    pub stale: u64,
    /// Refused as duplicates ([`PushError::Duplicate`]).
    pub duplicates: u64,
    /// Refused as too far ahead ([`PushError::TooFarAhead`]).
    pub too_far_ahead: u64,
    /// Refused because the buffer was full of newer snapshots ([`PushError::Full`]).
    pub full: u64,
    /// Accepted snapshots later dropped unplayed because the buffer was full.
    pub evicted: u64,
    /// Times the buffer restarted on a new server timeline.
    pub resyncs: u64,
    /// Samples answered.
    pub frames: u64,
    /// Of which interpolated.
    pub interpolated: u64,
    /// Of which extrapolated.
    pub extrapolated: u64,
    /// Of which held past the extrapolation limit.
    pub held: u64,
    /// Of which before the oldest snapshot.
    pub early: u64,
    /// Samples answered while playback was slowed down to stretch the buffer over an
    /// overdue snapshot ([`InterpolationConfig::max_stretch`]), whatever their kind.
    pub stretched: u64,
    /// Stretches begun: runs of consecutive [stretched](Self::stretched) samples. How
    /// slow motion feels depends on whether it comes as a few long moments or many
    /// short ones; `stretched / stretches` is the mean length in frames.
    pub stretches: u64,
    /// Times the adaptive policy saw the link get worse (see
    /// [`InterpolationConfig::shift_window`]): the recent pairs needed more lag, arrived
    /// later or lost more snapshots than the window's earlier ones. On a link that does
    /// not change this stays near zero.
    pub shifts_worse: u64,
    /// Times the adaptive policy saw the link get better, and forgot the arrivals from
    /// before.
    pub shifts_better: u64,
    /// Holes in the link seen: silences of at least
    /// [`InterpolationConfig::outage`] between two arrivals.
    pub outages: u64,
    /// Arrivals queued behind a hole that the delay policy did not learn (they came later
    /// than the delay before the hole allowed for).
    pub outage_arrivals: u64,
    /// Of the early ones, those before playback first reached a snapshot since the start
    /// (or a reset): the buffer filling up to its delay when a client joins. They are
    /// not [underruns](InterpolationStats::underruns): nothing ran dry, and counting them
    /// would charge a longer delay for its start-up once more, per run rather than per
    /// second.
    pub filling: u64,
    /// Sum over answered samples of the delay behind the newest snapshot, seconds (0 for
    /// a sample past the newest: an extrapolation is counted as an underrun, not as a
    /// negative delay).
    pub delay_sum_secs: f64,
    /// Local time between consecutive answered samples, summed: the playback time over
    /// which [`warp_secs`](Self::warp_secs) accrued, seconds.
    pub played_secs: f64,
    /// How far shown time strayed from real time, summed over frames: per frame, the
    /// server time playback advanced minus the local time that passed, taken absolute.
    /// Slow motion (a stretch, or slewing to a longer delay), catching up afterwards and
    /// jumps all add to it; playback at real speed adds nothing. Seconds.
    pub warp_secs: f64,
}

impl InterpolationStats {
    /// Samples without a pair to interpolate between, once playback had started:
    /// extrapolated, held, and early ones except the initial [fill](Self::filling).
    pub fn underruns(&self) -> u64 {
        self.extrapolated + self.held + self.early.saturating_sub(self.filling)
    }

    /// Underruns as a fraction of the samples answered once playback had started (0
    /// before any).
    pub fn underrun_ratio(&self) -> f64 {
        let played = self.frames.saturating_sub(self.filling);
        if played == 0 {
            0.0
        } else {
            self.underruns() as f64 / played as f64
        }
    }

    /// [Stretched](Self::stretched) samples as a fraction of all samples answered (0
    /// before any).
    pub fn stretched_ratio(&self) -> f64 {
        if self.frames == 0 {
            0.0
        } else {
            self.stretched as f64 / self.frames as f64
        }
    }

    /// How far playback speed strayed from real time on average: [`warp_secs`] over
    /// [`played_secs`] (0.05: shown motion ran 5% off real speed, averaged over the
    /// time played; 0 before two samples). Stretching half speed for one frame in fifty
    /// and catching up afterwards comes to about 0.02. The lab reports it as
    /// `interpolation.speed_error_pct`.
    ///
    /// [`warp_secs`]: Self::warp_secs
    /// [`played_secs`]: Self::played_secs
    pub fn speed_error(&self) -> f64 {
        if self.played_secs > 0.0 {
            self.warp_secs / self.played_secs
        } else {
            0.0
        }
    }

    /// Mean over answered samples of how far the shown state trailed the newest snapshot
    /// received, in seconds (the lab's `interpolation.delay_ms_mean`, divided by 1000).
    pub fn mean_delay_secs(&self) -> Option<f64> {
        (self.frames > 0).then(|| self.delay_sum_secs / self.frames as f64)
    }

    /// Changes of link seen, worse and better
    /// ([`shifts_worse`](Self::shifts_worse) + [`shifts_better`](Self::shifts_better)).
    pub fn link_shifts(&self) -> u64 {
        self.shifts_worse + self.shifts_better
    }

    /// The counts since `earlier` (a copy of these counters taken before): what happened
    /// over a stretch of time, say the last minute for a network HUD, or one phase of a
    /// test whose link conditions change. Counters never decrease, so an `earlier` taken
    /// from another buffer, or after these, gives zero counts rather than wrapping.
    pub fn since(&self, earlier: &InterpolationStats) -> InterpolationStats {
        let n = |now: u64, then: u64| now.saturating_sub(then);
        let x = |now: f64, then: f64| (now - then).max(0.0);
        InterpolationStats {
            accepted: n(self.accepted, earlier.accepted),
            stale: n(self.stale, earlier.stale),
            duplicates: n(self.duplicates, earlier.duplicates),
            too_far_ahead: n(self.too_far_ahead, earlier.too_far_ahead),
            full: n(self.full, earlier.full),
            evicted: n(self.evicted, earlier.evicted),
            resyncs: n(self.resyncs, earlier.resyncs),
            frames: n(self.frames, earlier.frames),
            interpolated: n(self.interpolated, earlier.interpolated),
            extrapolated: n(self.extrapolated, earlier.extrapolated),
            held: n(self.held, earlier.held),
            early: n(self.early, earlier.early),
            stretched: n(self.stretched, earlier.stretched),
            stretches: n(self.stretches, earlier.stretches),
            shifts_worse: n(self.shifts_worse, earlier.shifts_worse),
            shifts_better: n(self.shifts_better, earlier.shifts_better),
            outages: n(self.outages, earlier.outages),
            outage_arrivals: n(self.outage_arrivals, earlier.outage_arrivals),
            filling: n(self.filling, earlier.filling),
            delay_sum_secs: self.delay_sum_secs - earlier.delay_sum_secs,
            played_secs: x(self.played_secs, earlier.played_secs),
            warp_secs: x(self.warp_secs, earlier.warp_secs),
        }
    }
}
