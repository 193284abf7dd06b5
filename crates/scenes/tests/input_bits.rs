//! CubeInput on the wire: valid bits round-trip, unknown bits are refused.

use lagless_scenes::cubes::CubeInput;
use proptest::prelude::*;

const KEYS: [CubeInput; 5] = [
    CubeInput::FORWARD,
    CubeInput::BACK,
    CubeInput::LEFT,
    CubeInput::RIGHT,
    CubeInput::JUMP,
];

#[test]
fn keys_are_distinct_single_bits() {
    let mut all = CubeInput::NONE;
    for key in KEYS {
        assert_eq!(key.bits().count_ones(), 1);
        assert!(!all.contains(key));
        all = all.with(key);
    }
    assert_eq!(all.bits(), 0b1_1111);
}

proptest! {
    #[test]
    fn from_bits_accepts_exactly_combinations_of_keys(bits in any::<u8>()) {
        let built = KEYS
            .iter()
            .filter(|k| bits & k.bits() != 0)
            .fold(CubeInput::NONE, |acc, k| acc.with(*k));
        match CubeInput::from_bits(bits) {
            Some(input) => {
                prop_assert_eq!(input, built);
                prop_assert_eq!(input.bits(), bits);
                prop_assert_eq!(input.moves(), bits & 0b1111 != 0);
                prop_assert_eq!(input.is_none(), bits == 0);
            }
            None => prop_assert!(bits & !0b1_1111 != 0),
        }
    }
}
