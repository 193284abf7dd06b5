//! The view a client claims in its inputs, and its encodings.

use lagless_core::{Reader, Tick, WireError, Writer};
use lagless_wire::{BitReader, BitWriter};

/// The world a client was showing when it made an input: how far its interpolated
/// view lay behind the input's tick, in 1/32 ticks (about 1 ms at 30 ticks/s).
///
/// It travels in the game's input ([`write`](Self::write) / [`read`](Self::read) in an
/// [`Input`](lagless_core::Input) impl, which is `Copy + Eq`, hence the fixed-point
/// form), relative to the input's own tick: the server knows which tick it applies an
/// input at, the difference is small and nearly constant (lead plus interpolation
/// delay), so it costs one or two bytes and keeps runs of equal inputs equal. The
/// server turns it back into a fractional view with [`view`](Self::view) and hands that
/// to [`LagCompensator::rewind_query`](super::LagCompensator::rewind_query), which
/// clamps it to the trusted window; a lying client gains at most the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ViewClaim {
    lag: u16,
}

impl ViewClaim {
    /// Units per tick.
    pub const UNITS_PER_TICK: u32 = 32;

    /// The claim of a client making the input of `input_tick` while showing the world
    /// at fractional server tick `view` (with the high-level [`Client`](crate::Client):
    /// `client.interpolation().render_tick()`, the tick its last render showed). Views after the input tick claim no lag; lags beyond
    /// `u16::MAX / 32` (2047 ticks) saturate; NaN claims no lag.
    pub fn new(input_tick: Tick, view: f64) -> ViewClaim {
        let lag = (f64::from(input_tick.0) - view) * f64::from(Self::UNITS_PER_TICK);
        // `as` saturates and maps NaN to 0.
        ViewClaim {
            lag: lag.round().clamp(0.0, f64::from(u16::MAX)) as u16,
        }
    }

    /// A claim of `units` / 32 ticks behind the input's tick.
    pub fn from_units(units: u16) -> ViewClaim {
        ViewClaim { lag: units }
    }

    /// The lag in 1/32 ticks.
    pub fn units(self) -> u16 {
        self.lag
    }

    /// The lag in ticks.
    pub fn lag_ticks(self) -> f64 {
        f64::from(self.lag) / f64::from(Self::UNITS_PER_TICK)
    }

    /// The fractional tick the client claims it was showing, for the input of tick
    /// `input_tick` (the tick the input is *for*, which the server applies stepping
    /// from state `input_tick`, even if it applies it later). May be negative early in
    /// a session; the compensator clamps it.
    pub fn view(self, input_tick: Tick) -> f64 {
        f64::from(input_tick.0) - self.lag_ticks()
    }

    /// Byte encoding: a varint, 1 byte up to 4 ticks of lag, 2 up to 512, 3 beyond.
    pub fn write(self, w: &mut Writer) {
        w.write_varint_u32(u32::from(self.lag));
    }

    /// Reads [`write`](Self::write)'s bytes; a value beyond 16 bits is refused.
    pub fn read(r: &mut Reader<'_>) -> Result<ViewClaim, WireError> {
        Self::from_wire(r.read_varint_u32()?)
    }

    /// The claim a decoded lag stands for; a value beyond 16 bits is refused.
    fn from_wire(v: u32) -> Result<ViewClaim, WireError> {
        let lag = u16::try_from(v).map_err(|_| WireError::TooLarge {
            what: "view claim",
            len: v as usize,
            max: usize::from(u16::MAX),
        })?;
        Ok(ViewClaim { lag })
    }

    /// Bit encoding (inside a bit-packed message): lagless-wire's variable-length
    /// bits.
    pub fn write_bits(self, w: &mut BitWriter) {
        w.write_var_u32(u32::from(self.lag));
    }

    /// Reads [`write_bits`](Self::write_bits)' bits; a value beyond 16 bits is refused.
    pub fn read_bits(r: &mut BitReader<'_>) -> Result<ViewClaim, WireError> {
        Self::from_wire(r.read_var_u32()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn claims_round_to_a_32nd_and_saturate() {
        let c = ViewClaim::new(Tick(100), 95.6);
        assert_eq!(c.units(), 141); // 4.4 ticks × 32 = 140.8
        assert!((c.view(Tick(100)) - 95.59375).abs() < 1e-12);
        assert_eq!(ViewClaim::new(Tick(100), 101.0).units(), 0);
        assert_eq!(ViewClaim::new(Tick(100_000), 0.0).units(), u16::MAX);
        assert_eq!(ViewClaim::new(Tick(100), f64::NAN).units(), 0);
    }

    #[test]
    fn oversized_claims_are_refused() {
        let mut w = Writer::new();
        w.write_varint_u32(70_000);
        let bytes = w.into_bytes();
        assert!(matches!(
            ViewClaim::read(&mut Reader::new(&bytes)),
            Err(WireError::TooLarge { .. })
        ));
        let mut b = BitWriter::new();
        b.write_var_u32(70_000);
        let bytes = b.into_bytes();
        assert!(matches!(
            ViewClaim::read_bits(&mut BitReader::new(&bytes)),
            Err(WireError::TooLarge { .. })
        ));
    }

    proptest! {
        #[test]
        fn round_trips(units: u16) {
            let c = ViewClaim::from_units(units);
            let mut w = Writer::new();
            c.write(&mut w);
            let bytes = w.into_bytes();
            let mut r = Reader::new(&bytes);
            prop_assert_eq!(ViewClaim::read(&mut r), Ok(c));
            prop_assert!(r.finish().is_ok());
            let mut b = BitWriter::new();
            c.write_bits(&mut b);
            let bytes = b.into_bytes();
            let mut r = BitReader::new(&bytes);
            prop_assert_eq!(ViewClaim::read_bits(&mut r), Ok(c));
        }

        #[test]
        fn decoding_never_panics(bytes: Vec<u8>) {
            let _ = ViewClaim::read(&mut Reader::new(&bytes));
            let _ = ViewClaim::read_bits(&mut BitReader::new(&bytes));
        }
    }
}
