use lagless_wire::Seq16;
use std::fmt;
use std::time::Duration;

/// A simulation tick number.
///
/// Convention (the Unity physics prediction article): `state(n) + input(n) = state(n + 1)`.
/// The server and every client number ticks the same way, so an input tagged `n` is applied
/// by the server when it steps from state `n`. At 64 Hz a u32 lasts over two years of
/// continuous play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tick(pub u32);

impl Tick {
    /// The last tick a session ever runs to: `u32::MAX` less 2^20 ticks (over four hours
    /// at 64 Hz, 17 minutes at 1000 Hz) of headroom, so that a lead, an input window or a
    /// snapshot history added to any tick a session accepts stays representable, and no
    /// loop over ticks meets the saturation at `u32::MAX` (where [`Tick::next`] stops
    /// moving). A peer's packet stamped beyond it is refused, and a clock stops there.
    pub const LAST: Tick = Tick(u32::MAX - (1 << 20));

    /// The tick after this one (saturating: a server never runs for 2^32 ticks).
    #[must_use]
    pub fn next(self) -> Tick {
        Tick(self.0.saturating_add(1))
    }

    /// `self + n`, saturating.
    #[must_use]
    pub fn saturating_add(self, n: u32) -> Tick {
        Tick(self.0.saturating_add(n))
    }

    /// `self - n`, saturating at tick 0.
    #[must_use]
    pub fn saturating_sub(self, n: u32) -> Tick {
        Tick(self.0.saturating_sub(n))
    }

    /// The ticks from `self` through `last`, both included (none when `last < self`).
    /// Unlike a `while t <= last { t = t.next() }` loop it ends at `u32::MAX` too.
    pub fn through(self, last: Tick) -> impl Iterator<Item = Tick> {
        (self.0..=last.0).map(Tick)
    }

    /// The tick at fractional position `position`, rounded down and clamped to
    /// `0..=Tick::LAST` (NaN gives tick 0): how a clock position becomes a tick.
    pub fn from_position(position: f64) -> Tick {
        if position.is_nan() {
            return Tick(0);
        }
        Tick(position.floor().clamp(0.0, f64::from(Tick::LAST.0)) as u32)
    }

    /// Signed number of ticks from `other` to `self`.
    pub fn diff(self, other: Tick) -> i64 {
        i64::from(self.0) - i64::from(other.0)
    }

    /// The low 16 bits, for the wire.
    pub fn to_wire(self) -> Seq16 {
        Seq16::from_u32(self.0)
    }

    /// Expands a 16-bit wire tick to the full tick nearest `reference`.
    pub fn from_wire(wire: Seq16, reference: Tick) -> Option<Tick> {
        wire.expand(reference.0).map(Tick)
    }
}

impl fmt::Display for Tick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Tick rate helpers: the length of one tick and conversions between time and ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickRate {
    hz: u32,
}

impl TickRate {
    /// A tick rate of `hz` ticks per second.
    ///
    /// # Panics
    /// If `hz` is 0 or above 1000 (API misuse: no game ticks faster than once a millisecond).
    pub fn new(hz: u32) -> Self {
        assert!(
            (1..=1000).contains(&hz),
            "tick rate must be 1..=1000 Hz, got {hz}"
        );
        Self { hz }
    }

    /// Ticks per second.
    pub fn hz(self) -> u32 {
        self.hz
    }

    /// Duration of one tick.
    pub fn period(self) -> Duration {
        Duration::from_secs(1) / self.hz
    }

    /// Duration of one tick in seconds.
    pub fn period_secs(self) -> f64 {
        1.0 / f64::from(self.hz)
    }

    /// A duration expressed in (fractional) ticks.
    pub fn ticks_in(self, d: Duration) -> f64 {
        d.as_secs_f64() * f64::from(self.hz)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trip_across_u16_wrap() {
        let t = Tick(70_000);
        assert_eq!(Tick::from_wire(t.to_wire(), Tick(69_990)), Some(t));
        assert_eq!(Tick::from_wire(t.to_wire(), Tick(70_020)), Some(t));
        assert_eq!(
            Tick::from_wire(Tick(65_535).to_wire(), Tick(65_537)),
            Some(Tick(65_535))
        );
    }

    #[test]
    fn saturating_arithmetic() {
        assert_eq!(Tick(2).saturating_sub(5), Tick(0));
        assert_eq!(Tick(u32::MAX).next(), Tick(u32::MAX));
        assert_eq!(Tick(5).diff(Tick(8)), -3);
        let end: Vec<Tick> = Tick(u32::MAX - 1).through(Tick(u32::MAX)).collect();
        assert_eq!(end, vec![Tick(u32::MAX - 1), Tick(u32::MAX)]);
        assert_eq!(Tick(3).through(Tick(2)).count(), 0);
        assert_eq!(Tick::from_position(1e300), Tick::LAST);
        assert_eq!(Tick::from_position(-5.0), Tick(0));
        assert_eq!(Tick::from_position(f64::NAN), Tick(0));
        assert_eq!(Tick::from_position(7.9), Tick(7));
    }

    #[test]
    fn rate_conversions() {
        let r = TickRate::new(64);
        assert_eq!(r.period(), Duration::from_micros(15_625));
        assert!((r.ticks_in(Duration::from_millis(500)) - 32.0).abs() < 1e-9);
    }
}
