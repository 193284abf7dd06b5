//! Reproducible input drivers standing in for a human at the keyboard.
//!
//! * [`RoamScript`] (`"roam"`, the default) plays like a person: it steers
//!   toward random waypoints in the grid from where it *sees* its player,
//!   kicks cubes around, jumps now and then and sometimes stops to rest.
//! * [`PatternScript`] (`"pattern"`) ignores what it sees: its input is a pure
//!   function of the tick, for determinism tests.
//!
//! Both are seeded ([`rand_chacha::ChaCha8Rng`]), so a seed always gives the
//! same run.

mod pattern;
mod roam;

pub use pattern::PatternScript;
pub use roam::RoamScript;

use super::{BodyState, CubeInput, CubeSceneConfig};

/// Produces one player's input, tick by tick.
pub trait InputScript {
    /// Input for `tick`. `observed` is where the client currently sees its
    /// own player (which may lag the authoritative state), or `None` before
    /// the first state has arrived.
    fn input(&mut self, tick: u64, observed: Option<&BodyState>) -> CubeInput;
}

/// Names accepted by [`script_by_name`]; the first is the default.
pub const SCRIPT_NAMES: &[&str] = &["roam", "pattern"];

/// Builds the script called `name` (see [`SCRIPT_NAMES`]), or `None` for an
/// unknown name.
pub fn script_by_name(
    name: &str,
    seed: u64,
    config: &CubeSceneConfig,
) -> Option<Box<dyn InputScript + Send>> {
    match name {
        "roam" => Some(Box::new(RoamScript::new(seed, config))),
        "pattern" => Some(Box::new(PatternScript::new(seed))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds_and_others_do_not() {
        let config = CubeSceneConfig::default();
        for name in SCRIPT_NAMES {
            assert!(script_by_name(name, 1, &config).is_some(), "{name}");
        }
        assert!(script_by_name("nope", 1, &config).is_none());
    }
}
