//! [`DelayPolicy::Fixed`](super::DelayPolicy::Fixed): trail the typical arrival by a set
//! number of send intervals. It reads the clock alone, so it keeps none of the adaptive
//! policy's windows.

use super::clock::Clock;
use super::policy::{Arrival, WARMUP_PAIRS};

/// The fixed policy's state: the clock, and how many pairs it has seen (playback acts on
/// large errors sooner while warming up, whatever the policy).
#[derive(Debug, Clone)]
pub(crate) struct FixedDelay {
    /// Send intervals past the median arrival, at least 0.
    intervals: f64,
    period: f64,
    clock: Clock,
    pairs: usize,
    lag: Option<f64>,
}

impl FixedDelay {
    /// `intervals` send intervals (negative or not a number: 0) of ticks of `period`
    /// seconds, over a window of `history` arrivals.
    pub(crate) fn new(intervals: f32, history: usize, period: f64) -> Self {
        Self {
            intervals: f64::from(intervals).max(0.0),
            period,
            clock: Clock::new(history),
            pairs: 0,
            lag: None,
        }
    }

    /// Forgets everything (a new timeline).
    pub(crate) fn clear(&mut self) {
        self.clock.clear();
        self.pairs = 0;
        self.lag = None;
    }

    /// Records an accepted snapshot and moves the lag with it.
    pub(crate) fn arrive(&mut self, arrival: &Arrival) {
        self.clock.add_offset(arrival.offset);
        if let Some((gap, need)) = arrival.pair {
            self.clock.add_gap(gap);
            self.pairs = self.pairs.saturating_add(usize::from(need.is_usable()));
        }
        self.lag = self
            .clock
            .behind_median(self.intervals, self.period)
            .and_then(|lag| self.clock.bound(lag));
    }

    /// The playback lag, seconds (see [`Clock::bound`]); `None` before any arrival.
    pub(crate) fn lag(&self) -> Option<f64> {
        self.lag
    }

    /// The clock the lag trails.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// True until [`WARMUP_PAIRS`] pairs have arrived.
    pub(crate) fn warming_up(&self) -> bool {
        self.pairs < WARMUP_PAIRS
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::Need;
    use super::*;

    /// Snapshots of ticks 0, 2, 4 (10 ms ticks) arriving with the given offsets.
    fn fed(intervals: f32, offsets: [f64; 3]) -> FixedDelay {
        let mut fixed = FixedDelay::new(intervals, 16, 0.01);
        for (k, offset) in (0u32..).zip(offsets) {
            let need = Need {
                need: offset + 0.02,
                span: 0.02,
            };
            let pair = (k > 0).then_some((2, need));
            fixed.arrive(&Arrival {
                tick: 2 * k,
                offset,
                pair,
            });
        }
        fixed
    }

    #[test]
    fn fixed_trails_the_median_by_whole_intervals() {
        assert_eq!(FixedDelay::new(3.0, 16, 0.01).lag(), None);
        let lag = fed(3.0, [0.05, 0.06, 0.07]).lag().unwrap();
        assert!((lag - (0.06 + 3.0 * 0.02)).abs() < 1e-12, "{lag}");
        let none = fed(-1.0, [0.05, 0.06, 0.07]).lag().unwrap();
        assert!((none - 0.06).abs() < 1e-12);
        let nan = fed(f32::NAN, [0.05, 0.06, 0.07]).lag().unwrap();
        assert!((nan - 0.06).abs() < 1e-12);
        assert!(fed(3.0, [0.05, 0.06, 0.07]).warming_up());
    }
}
