//! The player's per-tick input.

/// Player input for one tick as a compact bitfield: one bit per key.
///
/// Axis convention (right-handed, +Y up, camera looking toward -Z):
/// `FORWARD` (W) pushes toward -Z, `BACK` (S) toward +Z, `LEFT` (A) toward -X,
/// `RIGHT` (D) toward +X. `JUMP` (space) is an upward impulse when supported.
///
/// Inputs arrive from the network, so [`CubeInput::from_bits`] refuses unknown
/// bits instead of silently keeping them: a peer that sends them is either
/// buggy or hostile, and the caller should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CubeInput(u8);

impl CubeInput {
    /// No key held.
    pub const NONE: CubeInput = CubeInput(0);
    /// W: push toward -Z.
    pub const FORWARD: CubeInput = CubeInput(1 << 0);
    /// S: push toward +Z.
    pub const BACK: CubeInput = CubeInput(1 << 1);
    /// A: push toward -X.
    pub const LEFT: CubeInput = CubeInput(1 << 2);
    /// D: push toward +X.
    pub const RIGHT: CubeInput = CubeInput(1 << 3);
    /// Space: jump (only acts when the player is supported).
    pub const JUMP: CubeInput = CubeInput(1 << 4);

    /// Every bit that means something; anything else is rejected.
    const VALID: u8 = 0b1_1111;
    const MOVES: u8 = 0b0_1111;

    /// The raw bits, for the wire.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Parses bits received from the network; `None` if any unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<CubeInput> {
        if bits & !Self::VALID == 0 {
            Some(CubeInput(bits))
        } else {
            None
        }
    }

    /// Whether every key of `other` is held in `self`.
    pub const fn contains(self, other: CubeInput) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both sets of keys.
    #[must_use]
    pub const fn with(self, other: CubeInput) -> CubeInput {
        CubeInput(self.0 | other.0)
    }

    /// Whether no key is held.
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// Whether any of W/A/S/D is held (jump alone does not count).
    pub const fn moves(self) -> bool {
        self.0 & Self::MOVES != 0
    }
}

impl std::ops::BitOr for CubeInput {
    type Output = CubeInput;

    fn bitor(self, rhs: CubeInput) -> CubeInput {
        self.with(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_bits_round_trips_every_valid_value_and_rejects_the_rest() {
        for bits in 0..=u8::MAX {
            match CubeInput::from_bits(bits) {
                Some(input) => {
                    assert!(bits < 32);
                    assert_eq!(input.bits(), bits);
                }
                None => assert!(bits >= 32),
            }
        }
    }

    #[test]
    fn combinators() {
        let wd = CubeInput::FORWARD.with(CubeInput::RIGHT);
        assert!(wd.contains(CubeInput::FORWARD));
        assert!(wd.contains(CubeInput::RIGHT));
        assert!(!wd.contains(CubeInput::JUMP));
        assert!(wd.moves());
        assert!(!CubeInput::JUMP.moves());
        assert!(CubeInput::NONE.is_none());
        assert!(!CubeInput::JUMP.is_none());
        assert!(wd.contains(CubeInput::NONE));
        assert_eq!(wd, CubeInput::FORWARD | CubeInput::RIGHT);
        assert_eq!(CubeInput::default(), CubeInput::NONE);
    }
}
