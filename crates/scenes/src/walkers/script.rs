//! A scripted player: what a person walking around the level does with WASD.

use super::PlayerState;
use crate::cubes::CubeInput;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Roams like a player: holds a direction (one of eight) for 0.5 to 3 s, stands still a
/// quarter of the time, and heads back towards the centre when it is more than
/// `range` metres out.
#[derive(Debug, Clone)]
pub struct PlayerScript {
    rng: ChaCha8Rng,
    keys: CubeInput,
    until: u64,
    tick_hz: u32,
    range: f32,
}

impl PlayerScript {
    /// A script seeded with `seed`, at `tick_hz`, roaming within `range` m of the centre.
    pub fn new(seed: u64, tick_hz: u32, range: f32) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            keys: CubeInput::NONE,
            until: 0,
            tick_hz: tick_hz.max(1),
            range,
        }
    }

    /// The input for `tick`; `seen` is the own player as the client shows it.
    pub fn input(&mut self, tick: u64, seen: Option<&PlayerState>) -> CubeInput {
        if tick < self.until {
            return self.keys;
        }
        let secs = self.rng.random_range(0.5..3.0);
        self.until = tick + (secs * self.tick_hz as f32) as u64;
        let out = seen.is_some_and(|s| s.position[0].hypot(s.position[2]) > self.range);
        self.keys = if out {
            // Back towards the middle: the keys whose direction points at it.
            let p = seen.map_or([0.0; 3], |s| s.position);
            let mut k = CubeInput::NONE;
            if p[2] > 0.0 {
                k = k.with(CubeInput::FORWARD);
            } else {
                k = k.with(CubeInput::BACK);
            }
            if p[0] > 0.0 {
                k = k.with(CubeInput::LEFT);
            } else {
                k = k.with(CubeInput::RIGHT);
            }
            k
        } else if self.rng.random::<f32>() < 0.25 {
            CubeInput::NONE
        } else {
            const DIRS: [CubeInput; 8] = [
                CubeInput::FORWARD,
                CubeInput::BACK,
                CubeInput::LEFT,
                CubeInput::RIGHT,
                CubeInput::FORWARD.with(CubeInput::LEFT),
                CubeInput::FORWARD.with(CubeInput::RIGHT),
                CubeInput::BACK.with(CubeInput::LEFT),
                CubeInput::BACK.with(CubeInput::RIGHT),
            ];
            DIRS[self.rng.random_range(0..DIRS.len())]
        };
        self.keys
    }
}
