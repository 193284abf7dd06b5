//! A car's per-tick input, and the analog controls the scene applies.

use lagless_wire::{Reader, WireError, Writer};

/// Car input for one tick as a bitfield, one bit per key (the Unity ball article's commands:
/// forward/back force, turn torque, jump; plus boost).
///
/// Inputs come from the network, so [`CarInput::from_bits`] refuses unknown bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CarInput(u8);

impl CarInput {
    /// No key held.
    pub const NONE: CarInput = CarInput(0);
    /// Throttle: push along the car's nose.
    pub const FORWARD: CarInput = CarInput(1 << 0);
    /// Reverse: push against the car's nose.
    pub const BACK: CarInput = CarInput(1 << 1);
    /// Turn left (counter-clockwise seen from above).
    pub const LEFT: CarInput = CarInput(1 << 2);
    /// Turn right.
    pub const RIGHT: CarInput = CarInput(1 << 3);
    /// Jump (only acts when the car stands on the floor).
    pub const JUMP: CarInput = CarInput(1 << 4);
    /// Boost: extra push along the nose.
    pub const BOOST: CarInput = CarInput(1 << 5);

    /// Every bit that means something.
    pub const VALID: u8 = 0b11_1111;

    /// The raw bits, for the wire.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Parses bits from the network; `None` if an unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<CarInput> {
        if bits & !Self::VALID == 0 {
            Some(CarInput(bits))
        } else {
            None
        }
    }

    /// Whether every key of `other` is held in `self`.
    pub const fn contains(self, other: CarInput) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both sets of keys.
    #[must_use]
    pub const fn with(self, other: CarInput) -> CarInput {
        CarInput(self.0 | other.0)
    }

    /// Whether throttle, reverse, steering or boost is held (jump alone does not count).
    pub const fn moves(self) -> bool {
        self.0 & 0b10_1111 != 0
    }

    /// The analog controls these keys stand for, at full strength.
    pub fn controls(self) -> Controls {
        let axis = |pos: CarInput, neg: CarInput| {
            f32::from(u8::from(self.contains(pos))) - f32::from(u8::from(self.contains(neg)))
        };
        Controls {
            throttle: axis(CarInput::FORWARD, CarInput::BACK),
            steer: axis(CarInput::LEFT, CarInput::RIGHT),
            boost: if self.contains(CarInput::BOOST) {
                1.0
            } else {
                0.0
            },
            jump: self.contains(CarInput::JUMP),
        }
    }
}

impl std::ops::BitOr for CarInput {
    type Output = CarInput;

    fn bitor(self, rhs: CarInput) -> CarInput {
        self.with(rhs)
    }
}

impl lagless_core::Input for CarInput {
    fn encode(&self, w: &mut Writer) {
        w.write_u8(self.bits());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        CarInput::from_bits(r.read_u8()?).ok_or(WireError::Invalid {
            what: "car input bits",
        })
    }
}

/// What the scene applies to a car in one step. The server only ever applies whole keys
/// ([`CarInput::controls`]); a client predicting a *remote* car applies its last known
/// keys scaled down as they age ([`Controls::scaled`]), as Rocket League decays remote
/// inputs toward neutral.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Controls {
    /// -1 (reverse) to 1 (full throttle).
    pub throttle: f32,
    /// -1 (right) to 1 (left).
    pub steer: f32,
    /// 0 to 1.
    pub boost: f32,
    /// Jump (never scaled: a guessed jump is worse than none, so it is dropped instead).
    pub jump: bool,
}

impl Controls {
    /// These controls with the axes scaled by `factor` (clamped to 0..=1); a jump only
    /// survives at full strength.
    pub fn scaled(self, factor: f32) -> Controls {
        let f = factor.clamp(0.0, 1.0);
        Controls {
            throttle: self.throttle * f,
            steer: self.steer * f,
            boost: self.boost * f,
            jump: self.jump && f >= 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::Input;

    #[test]
    fn bits_round_trip_and_unknown_bits_are_refused() {
        for bits in 0..=u8::MAX {
            match CarInput::from_bits(bits) {
                Some(i) => assert_eq!(i.bits(), bits),
                None => assert!(bits > CarInput::VALID),
            }
        }
        let mut w = Writer::new();
        (CarInput::FORWARD | CarInput::BOOST).encode(&mut w);
        let bytes = w.into_bytes();
        let back = CarInput::decode(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back, CarInput::FORWARD | CarInput::BOOST);
        assert!(CarInput::decode(&mut Reader::new(&[0x40])).is_err());
        assert!(CarInput::decode(&mut Reader::new(&[])).is_err());
    }

    #[test]
    fn controls_follow_the_keys_and_decay() {
        let c = (CarInput::FORWARD | CarInput::RIGHT | CarInput::JUMP).controls();
        assert_eq!((c.throttle, c.steer, c.jump), (1.0, -1.0, true));
        let both = (CarInput::FORWARD | CarInput::BACK).controls();
        assert_eq!(both.throttle, 0.0);
        let half = c.scaled(0.5);
        assert_eq!((half.throttle, half.steer, half.jump), (0.5, -0.5, false));
        assert_eq!(c.scaled(7.0), c);
        assert!(!CarInput::JUMP.moves());
        assert!(CarInput::BOOST.moves());
    }
}
