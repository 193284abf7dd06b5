//! A scripted driver: chases the ball and hits it, again and again, from varied angles.

use super::{CarInput, RocketConfig, car_touches_ball};
use crate::cubes::BodyState;
use glam::Vec3;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Drives a car at the ball along a chosen direction (the "aim"): it first goes round to
/// a point behind the ball on that line, then charges through it, boosting. After each
/// hit, and whenever a charge takes too long, it picks a new aim at random, so hits come
/// from every side. Deterministic for a seed.
pub struct ChaseDriver {
    config: RocketConfig,
    rng: ChaCha8Rng,
    /// Horizontal unit vector the driver wants to send the ball along.
    aim: Vec3,
    /// Tick the current aim was chosen.
    aimed_at: u64,
    /// Ticks left backing away after a hit (so the car does not push the ball forever).
    backing: u32,
    /// Ticks the car has been nearly still while it wants to move.
    stuck: u32,
    touching: bool,
    hits: u64,
    /// Whether the first aim was taken from where the car first saw the ball.
    started: bool,
}

impl ChaseDriver {
    /// A driver for `config`'s arena, seeded with `seed`.
    pub fn new(config: RocketConfig, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let aim = random_aim(&mut rng);
        Self {
            config,
            rng,
            aim,
            aimed_at: 0,
            backing: 0,
            stuck: 0,
            touching: false,
            hits: 0,
            started: false,
        }
    }

    /// Hits the driver saw (contacts that began), by its own view of the car and ball.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// The input for `tick`, given the car and ball as the client shows them (`None`:
    /// nothing known yet, so no keys).
    pub fn input(
        &mut self,
        tick: u64,
        car: Option<&BodyState>,
        ball: Option<&BodyState>,
    ) -> CarInput {
        let (Some(car), Some(ball)) = (car, ball) else {
            return CarInput::NONE;
        };
        if !(car.is_finite() && ball.is_finite()) {
            return CarInput::NONE;
        }
        let hz = u64::from(self.config.tick_hz.max(1));
        if !self.started {
            // Kick-off: straight at the ball, give or take, from wherever the car is.
            self.started = true;
            self.new_aim(tick, ball.position - car.position);
        }
        let touching = car_touches_ball(&self.config, car, ball.position);
        if touching && !self.touching {
            self.hits += 1;
            self.new_aim(tick, ball.position - car.position);
            // Back off for a moment so the next hit is a new approach.
            self.backing = (hz / 3) as u32;
        }
        self.touching = touching;
        if tick.saturating_sub(self.aimed_at) > 6 * hz {
            self.new_aim(tick, ball.position - car.position);
        }
        if self.backing > 0 {
            self.backing -= 1;
            return CarInput::BACK;
        }
        let flat = |v: Vec3| Vec3::new(v.x, 0.0, v.z);
        let to_ball = flat(ball.position - car.position);
        let dist = to_ball.length();
        // Keep the aim pointing into the arena: near a wall, aim away from it.
        let aim = self.effective_aim(ball.position);
        let reach = self.config.ball_radius + self.config.car_half.z + 1.5;
        let behind = ball.position - aim * (reach + 2.0);
        let lined_up = to_ball.normalize_or_zero().dot(aim) > 0.8;
        let target = if lined_up || dist < reach {
            // Charge, leading the ball a little by its velocity.
            ball.position + flat(ball.linvel) * 0.2
        } else {
            behind
        };
        let nose = flat(car.rotation * Vec3::Z).normalize_or_zero();
        let want = flat(target - car.position).normalize_or_zero();
        let cross = nose.cross(want).y;
        let dot = nose.dot(want);
        let mut keys = CarInput::NONE;
        if dot > -0.3 {
            keys = keys | CarInput::FORWARD;
        } else {
            // Target behind: reverse while turning (a three-point turn).
            keys = keys | CarInput::BACK;
        }
        let steer_left = if dot > -0.3 { cross > 0.0 } else { cross < 0.0 };
        if cross.abs() > 0.05 || dot < 0.0 {
            keys = keys
                | if steer_left {
                    CarInput::LEFT
                } else {
                    CarInput::RIGHT
                };
        }
        if lined_up && dot > 0.95 && dist < 20.0 {
            keys = keys | CarInput::BOOST;
        }
        // Jump at a ball in the air just ahead.
        if dist < reach + 1.0 && ball.position.y > 2.5 && dot > 0.8 {
            keys = keys | CarInput::JUMP;
        }
        // Unstick: a car pressed into a wall or the ball backs off.
        if car.linvel.length() < 0.5 && keys.moves() {
            self.stuck += 1;
        } else {
            self.stuck = 0;
        }
        if self.stuck > hz as u32 {
            self.stuck = 0;
            self.backing = (hz / 2) as u32;
        }
        keys
    }

    /// A new aim: the direction from the car to the ball turned by up to 80° either way,
    /// so the next approach starts from where the car is (a quick hit) yet comes from a
    /// new angle each time.
    fn new_aim(&mut self, tick: u64, car_to_ball: Vec3) {
        let base = Vec3::new(car_to_ball.x, 0.0, car_to_ball.z).normalize_or_zero();
        let turn: f32 = self.rng.random_range(-80f32..80.0).to_radians();
        self.aim = if base == Vec3::ZERO {
            random_aim(&mut self.rng)
        } else {
            glam::Quat::from_rotation_y(turn) * base
        };
        self.aimed_at = tick;
    }

    /// The aim, bent away from a wall the ball is close to, so the car never tries to get
    /// behind the ball through the wall.
    fn effective_aim(&self, ball: Vec3) -> Vec3 {
        let c = &self.config;
        let margin = c.ball_radius + c.car_half.z * 2.0 + 4.0;
        let mut aim = self.aim;
        if ball.x > c.arena_half_width - margin {
            aim.x = aim.x.min(-0.5);
        } else if ball.x < -c.arena_half_width + margin {
            aim.x = aim.x.max(0.5);
        }
        if ball.z > c.arena_half_length - margin {
            aim.z = aim.z.min(-0.5);
        } else if ball.z < -c.arena_half_length + margin {
            aim.z = aim.z.max(0.5);
        }
        aim.normalize_or_zero()
    }
}

fn random_aim(rng: &mut ChaCha8Rng) -> Vec3 {
    let angle: f32 = rng.random_range(0.0..std::f32::consts::TAU);
    Vec3::new(angle.cos(), 0.0, angle.sin())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rocket::RocketScene;

    #[test]
    fn drivers_hit_the_ball_repeatedly_from_varied_directions() {
        let config = RocketConfig::default();
        let mut scene = RocketScene::new(config);
        let mut drivers: Vec<ChaseDriver> = (1..=2)
            .map(|p| {
                scene.add_car(p);
                ChaseDriver::new(config, 7 + u64::from(p))
            })
            .collect();
        let mut contact = [false; 2];
        let mut onsets = 0;
        let mut directions = Vec::new();
        for tick in 0..64 * 30 {
            let ball = scene.ball_state();
            let inputs: Vec<(u32, CarInput)> = drivers
                .iter_mut()
                .enumerate()
                .map(|(i, d)| {
                    let p = i as u32 + 1;
                    (p, d.input(tick, scene.car_state(p).as_ref(), ball.as_ref()))
                })
                .collect();
            scene.step(&inputs);
            for p in 1..=2u32 {
                let now = scene.car_touches_ball(p);
                if now && !contact[p as usize - 1] {
                    onsets += 1;
                    let car = scene.car_state(p).unwrap();
                    let b = scene.ball_state().unwrap();
                    let d = b.position - car.position;
                    directions.push(d.z.atan2(d.x));
                }
                contact[p as usize - 1] = now;
            }
        }
        // About one hit per car every 5 s or more often (the lab sees 9-27 in 30 s).
        assert!(onsets >= 6, "only {onsets} hits in 30 s");
        // Hits from at least three of the four quadrants of the compass.
        let mut quadrants = [false; 4];
        for a in &directions {
            let q = ((a + std::f32::consts::PI) / std::f32::consts::FRAC_PI_2) as usize;
            quadrants[q.min(3)] = true;
        }
        assert!(
            quadrants.iter().filter(|&&q| q).count() >= 3,
            "{directions:?}"
        );
        assert!(drivers.iter().all(|d| d.hits() > 0));
    }
}
