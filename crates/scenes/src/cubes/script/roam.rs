//! Closed-loop script: a player wandering through the grid.

use glam::Vec2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{BodyState, CubeInput, CubeSceneConfig, InputScript};

/// Waypoints are drawn from this share of the grid's half extent, so the
/// player stays among the cubes instead of skirting the edge.
const WAYPOINT_SPREAD: f32 = 0.85;
/// Close enough to a waypoint to count as arrived, metres.
const ARRIVE_RADIUS: f32 = 1.5;
/// Steering aims from where the player will be this far ahead (seconds at its
/// current velocity), so it lets go of the keys — or brakes — before it
/// overshoots instead of oscillating around the target.
const LOOKAHEAD_S: f32 = 0.35;
/// Per-axis dead zone, metres: no key for an axis already roughly lined up,
/// which stops W/S or A/D from flip-flopping every tick near the target.
const DEAD_ZONE: f32 = 0.75;
/// Give up on a waypoint after this long (stuck against a pile of cubes).
const WAYPOINT_TIMEOUT_S: f32 = 8.0;
/// Chance of resting at a reached waypoint.
const REST_CHANCE: f64 = 0.4;
/// Rest length range once the player has settled, seconds.
const REST_S: (f32, f32) = (0.3, 1.0);
/// Before a rest the script brakes (keys against the motion) until the player
/// is slower than this (m/s and rad/s), so key presses after the rest start
/// from rest; it rests anyway after `SETTLE_MAX_S`.
const SETTLED_SPEED: f32 = 0.3;
const SETTLED_SPIN: f32 = 0.5;
const SETTLE_MAX_S: f32 = 1.5;
/// Braking only counters velocity components above this, m/s, so it does not
/// end up pushing back and forth around zero.
const BRAKE_DEAD_ZONE: f32 = 0.4;
/// Gap between jumps, seconds, and how many ticks JUMP is held each time.
const JUMP_GAP_S: (f32, f32) = (1.5, 5.0);
const JUMP_HOLD_TICKS: u64 = 4;

/// What the script is doing between calls.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Heading for `target`; pick another after `deadline`.
    Moving { target: Vec2, deadline: u64 },
    /// Braking, waiting for the player to come to rest.
    Settling { give_up: u64 },
    /// Keys released, player at rest, until `until`.
    Resting { until: u64 },
}

/// Closed-loop input that roams the grid like a player would.
///
/// Picks seeded waypoints inside the grid and steers toward them with W/A/S/D
/// from the observed position, jumps every 1.5–5 s, and at some waypoints
/// brakes to a stop and then holds no key for 0.3–1 s, so "time from key
/// press to motion" can be measured from rest.
/// With nothing observed yet it holds no key.
///
/// The output depends on the seed and on the sequence of observations, so a
/// run is reproducible when the observations are.
#[derive(Debug, Clone)]
pub struct RoamScript {
    rng: ChaCha8Rng,
    tick_hz: f32,
    spread: f32,
    phase: Option<Phase>,
    next_jump: u64,
    jump_until: u64,
}

impl RoamScript {
    /// A roaming player for `seed` in a scene built from `config`.
    pub fn new(seed: u64, config: &CubeSceneConfig) -> Self {
        RoamScript {
            rng: ChaCha8Rng::seed_from_u64(seed),
            tick_hz: config.tick_hz.max(1) as f32,
            spread: config.grid_half_extent() * WAYPOINT_SPREAD,
            phase: None,
            next_jump: 0,
            jump_until: 0,
        }
    }

    fn ticks(&self, seconds: f32) -> u64 {
        (seconds * self.tick_hz).round().max(1.0) as u64
    }

    fn random_ticks(&mut self, (low, high): (f32, f32)) -> u64 {
        let seconds = self.rng.random_range(low..high);
        self.ticks(seconds)
    }

    fn new_target(&mut self, tick: u64) -> Phase {
        let target = Vec2::new(
            self.rng.random_range(-self.spread..self.spread),
            self.rng.random_range(-self.spread..self.spread),
        );
        Phase::Moving {
            target,
            deadline: tick + self.ticks(WAYPOINT_TIMEOUT_S),
        }
    }

    /// Keys that push against `velocity`, to stop.
    fn brake(velocity: Vec2) -> CubeInput {
        let mut keys = CubeInput::NONE;
        if velocity.x > BRAKE_DEAD_ZONE {
            keys = keys.with(CubeInput::LEFT);
        } else if velocity.x < -BRAKE_DEAD_ZONE {
            keys = keys.with(CubeInput::RIGHT);
        }
        if velocity.y > BRAKE_DEAD_ZONE {
            keys = keys.with(CubeInput::FORWARD);
        } else if velocity.y < -BRAKE_DEAD_ZONE {
            keys = keys.with(CubeInput::BACK);
        }
        keys
    }

    /// Keys that push from `position` (moving at `velocity`) toward `target`.
    fn steer(position: Vec2, velocity: Vec2, target: Vec2) -> CubeInput {
        let delta = target - (position + velocity * LOOKAHEAD_S);
        let mut keys = CubeInput::NONE;
        // Ground plane: Vec2 x is world X, y is world Z.
        if delta.x > DEAD_ZONE {
            keys = keys.with(CubeInput::RIGHT);
        } else if delta.x < -DEAD_ZONE {
            keys = keys.with(CubeInput::LEFT);
        }
        if delta.y > DEAD_ZONE {
            keys = keys.with(CubeInput::BACK);
        } else if delta.y < -DEAD_ZONE {
            keys = keys.with(CubeInput::FORWARD);
        }
        keys
    }
}

impl InputScript for RoamScript {
    fn input(&mut self, tick: u64, observed: Option<&BodyState>) -> CubeInput {
        let Some(observed) = observed else {
            return CubeInput::NONE;
        };
        let position = Vec2::new(observed.position.x, observed.position.z);
        let velocity = Vec2::new(observed.linvel.x, observed.linvel.z);

        let phase = match self.phase {
            Some(phase) => phase,
            None => {
                // The first jump waits a gap like every other one.
                self.next_jump = tick + self.random_ticks(JUMP_GAP_S);
                self.new_target(tick)
            }
        };
        let phase = match phase {
            Phase::Settling { give_up } => {
                let still = observed.linvel.length() < SETTLED_SPEED
                    && observed.angvel.length() < SETTLED_SPIN;
                if still || tick >= give_up {
                    Phase::Resting {
                        until: tick + self.random_ticks(REST_S),
                    }
                } else {
                    Phase::Settling { give_up }
                }
            }
            Phase::Resting { until } if tick >= until => {
                // Jumps resume on their own clock after the rest.
                self.next_jump = self.next_jump.max(tick + self.random_ticks(JUMP_GAP_S));
                self.new_target(tick)
            }
            Phase::Moving { target, deadline }
                if position.distance(target) < ARRIVE_RADIUS || tick >= deadline =>
            {
                if self.rng.random_bool(REST_CHANCE) {
                    Phase::Settling {
                        give_up: tick + self.ticks(SETTLE_MAX_S),
                    }
                } else {
                    self.new_target(tick)
                }
            }
            other => other,
        };
        self.phase = Some(phase);

        let target = match phase {
            Phase::Moving { target, .. } => target,
            Phase::Settling { .. } => return Self::brake(velocity),
            Phase::Resting { .. } => return CubeInput::NONE,
        };
        let mut keys = Self::steer(position, velocity, target);
        if tick >= self.next_jump {
            self.jump_until = tick + JUMP_HOLD_TICKS;
            self.next_jump = tick + self.random_ticks(JUMP_GAP_S);
        }
        if tick < self.jump_until {
            keys = keys.with(CubeInput::JUMP);
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use glam::Vec3;

    use super::*;

    fn at(x: f32, z: f32) -> BodyState {
        BodyState {
            position: Vec3::new(x, 1.0, z),
            ..BodyState::default()
        }
    }

    #[test]
    fn holds_nothing_until_it_sees_its_player() {
        let mut script = RoamScript::new(1, &CubeSceneConfig::default());
        for tick in 0..100 {
            assert_eq!(script.input(tick, None), CubeInput::NONE);
        }
    }

    #[test]
    fn steering_keys_follow_the_axis_convention_with_a_dead_zone() {
        let here = Vec2::ZERO;
        let still = Vec2::ZERO;
        assert_eq!(
            RoamScript::steer(here, still, Vec2::new(0.0, -5.0)),
            CubeInput::FORWARD
        );
        assert_eq!(
            RoamScript::steer(here, still, Vec2::new(5.0, 5.0)),
            CubeInput::RIGHT.with(CubeInput::BACK)
        );
        assert_eq!(
            RoamScript::steer(here, still, Vec2::new(0.5, -0.5)),
            CubeInput::NONE
        );
        assert_eq!(RoamScript::brake(Vec2::new(3.0, -0.1)), CubeInput::LEFT);
        // Fast toward a near target: the lookahead brakes.
        assert_eq!(
            RoamScript::steer(here, Vec2::new(0.0, -10.0), Vec2::new(0.0, -1.0)),
            CubeInput::BACK
        );
    }

    #[test]
    fn heads_into_the_grid_from_outside() {
        let config = CubeSceneConfig::default();
        let outside = config.grid_half_extent() + 3.0;
        for seed in 0..20 {
            let mut script = RoamScript::new(seed, &config);
            let keys = script.input(0, Some(&at(0.0, outside)));
            assert!(keys.contains(CubeInput::FORWARD), "seed {seed}: {keys:?}");
        }
    }
}
