use crate::{Tick, TickRate};
use std::time::Duration;

/// A fixed-timestep driver: accumulates elapsed time and hands out ticks one at a time.
///
/// The simulation is only ever stepped by the caller, once per tick returned by
/// [`FixedTimestep::pop_tick`], so frame-rate hiccups never change the physics. The
/// accumulator is capped (`max_backlog`) so a long stall (a debugger pause, a hitch) does not
/// cause a spiral of catch-up steps; the dropped time is reported by [`FixedTimestep::dropped`].
#[derive(Debug, Clone)]
pub struct FixedTimestep {
    rate: TickRate,
    next_tick: Tick,
    accumulator: Duration,
    max_backlog: u32,
    dropped: Duration,
}

impl FixedTimestep {
    /// A driver at `rate` whose first tick is `start`; at most `max_backlog` ticks may be
    /// pending at once.
    pub fn new(rate: TickRate, start: Tick, max_backlog: u32) -> Self {
        Self {
            rate,
            next_tick: start,
            accumulator: Duration::ZERO,
            max_backlog: max_backlog.max(1),
            dropped: Duration::ZERO,
        }
    }

    /// The tick rate.
    pub fn rate(&self) -> TickRate {
        self.rate
    }

    /// The next tick [`FixedTimestep::pop_tick`] will return: the tick of the current state.
    pub fn next_tick(&self) -> Tick {
        self.next_tick
    }

    /// Adds elapsed time.
    pub fn accumulate(&mut self, elapsed: Duration) {
        self.accumulator += elapsed;
        let cap = self.rate.period() * self.max_backlog;
        if self.accumulator > cap {
            self.dropped += self.accumulator - cap;
            self.accumulator = cap;
        }
    }

    /// The next tick to simulate if a whole tick of time has accumulated.
    pub fn pop_tick(&mut self) -> Option<Tick> {
        let period = self.rate.period();
        if self.accumulator < period {
            return None;
        }
        self.accumulator -= period;
        let tick = self.next_tick;
        self.next_tick = tick.next();
        Some(tick)
    }

    /// How far the accumulator is into the next tick, in `[0, 1)` for a drained driver:
    /// the blend factor between the last two simulated states when rendering.
    pub fn alpha(&self) -> f64 {
        self.accumulator.as_secs_f64() / self.rate.period_secs()
    }

    /// Current position in fractional ticks: `next_tick + alpha`.
    pub fn position(&self) -> f64 {
        f64::from(self.next_tick.0) + self.alpha()
    }

    /// Fractional position `elapsed` from now, before any pending ticks are popped.
    pub fn position_after(&self, elapsed: std::time::Duration) -> f64 {
        self.position() + self.rate.ticks_in(elapsed)
    }

    /// Moves the driver to `tick` with `fraction` of a tick already accumulated.
    /// Used by clock synchronisation to jump; pending ticks are discarded.
    pub fn reset(&mut self, tick: Tick, fraction: f64) {
        self.next_tick = tick;
        self.accumulator = self.rate.period().mul_f64(fraction.clamp(0.0, 0.999_999));
    }

    /// Adds `ticks` (fractional) worth of time past the backlog cap: the ticks are due at
    /// once. Used by clock synchronisation to fast-forward, so that every tick is still
    /// produced (and its input sent) rather than skipped. Negative or non-finite values
    /// add nothing.
    pub fn fast_forward(&mut self, ticks: f64) {
        if ticks.is_finite() && ticks > 0.0 {
            self.accumulator += self.rate.period().mul_f64(ticks);
        }
    }

    /// Time still to accumulate before [`FixedTimestep::pop_tick`] returns a tick (zero
    /// when one is due now).
    pub fn until_next_tick(&self) -> Duration {
        self.rate.period().saturating_sub(self.accumulator)
    }

    /// Total time discarded because the backlog cap was hit.
    pub fn dropped(&self) -> Duration {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tick_per_period_regardless_of_frame_lengths() {
        let mut ts = FixedTimestep::new(TickRate::new(64), Tick(10), 8);
        let mut ticks = Vec::new();
        // 1 s of uneven frames.
        for ms in [3u64, 40, 7, 100, 1, 1, 348, 500] {
            ts.accumulate(Duration::from_millis(ms));
            while let Some(t) = ts.pop_tick() {
                ticks.push(t);
            }
        }
        // The 348 ms frame exceeds the 8-tick backlog (125 ms), so some time is dropped.
        assert!(ts.dropped() > Duration::ZERO);
        assert_eq!(ticks.first(), Some(&Tick(10)));
        assert!(ticks.windows(2).all(|w| w[1] == w[0].next()));
        let expected =
            ((Duration::from_secs(1) - ts.dropped()).as_secs_f64() * 64.0).floor() as usize;
        assert_eq!(ticks.len(), expected);
    }

    #[test]
    fn exact_ticks_without_drift() {
        let mut ts = FixedTimestep::new(TickRate::new(64), Tick(0), 4);
        let mut n = 0;
        for _ in 0..64_000 {
            ts.accumulate(Duration::from_micros(15_625));
            while ts.pop_tick().is_some() {
                n += 1;
            }
        }
        assert_eq!(n, 64_000);
        assert_eq!(ts.alpha(), 0.0);
    }

    #[test]
    fn fast_forward_makes_ticks_due_at_once() {
        let mut ts = FixedTimestep::new(TickRate::new(64), Tick(0), 4);
        ts.fast_forward(20.5);
        ts.fast_forward(f64::NAN);
        ts.fast_forward(-3.0);
        let n = std::iter::from_fn(|| ts.pop_tick()).count();
        assert_eq!(n, 20);
        assert!((ts.alpha() - 0.5).abs() < 1e-6);
    }

    #[test]
    fn reset_jumps() {
        let mut ts = FixedTimestep::new(TickRate::new(30), Tick(0), 4);
        ts.reset(Tick(500), 0.5);
        assert!((ts.position() - 500.5).abs() < 1e-6);
        ts.accumulate(Duration::from_millis(17));
        assert_eq!(ts.pop_tick(), Some(Tick(500)));
    }
}
