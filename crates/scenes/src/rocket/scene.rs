//! The simulation: an arena, one car per player, one ball.

use std::collections::BTreeMap;

use glam::{Quat, Vec3};
use rapier3d::prelude::{
    CoefficientCombineRule, ColliderBuilder, IntegrationParameters, PhysicsWorld, RigidBodyBuilder,
    RigidBodyHandle, RigidBodyType,
};

use super::{CarInput, Controls, RocketConfig};
use crate::cubes::BodyState;

// In this scene player `p` drives car `p`.
pub use crate::PlayerId;

/// Standard gravity, m/s².
const GRAVITY: f32 = 9.81;

/// Thickness of the arena's floor, walls and ceiling, m: thick, so nothing tunnels.
const WALL: f32 = 2.0;

/// Gap below which a car and the ball count as touching, m
/// ([`car_touches_ball`]): the solver keeps resting bodies a few millimetres apart.
pub const CONTACT_MARGIN: f32 = 0.05;

/// The car-and-ball scene: a closed box arena, cars driven by forces, a bouncy ball that
/// only cars move. Stepped only by [`RocketScene::step`]; `state(n) + inputs(n) =
/// state(n + 1)`, and two scenes built alike that see the same calls stay identical.
///
/// Cars only turn about the vertical axis (their other rotations are locked): a flipped
/// box is no car, and the scene is about car-ball contact, not recovery from flips.
///
/// A body may be made kinematic ([`RocketScene::set_kinematic_car`],
/// [`RocketScene::set_kinematic_ball`]): it is then moved to given poses rather than
/// simulated, and pushes dynamic bodies without being pushed. A client uses that for
/// what it shows interpolated (the Unity ball article's failure case: a predicted car against the
/// server's ball as it was in the past).
pub struct RocketScene {
    config: RocketConfig,
    world: PhysicsWorld,
    ball: RigidBodyHandle,
    cars: BTreeMap<PlayerId, RigidBodyHandle>,
    /// The keys each car was driven with in the last step (replicated, so clients can
    /// predict remote cars from them).
    last_inputs: BTreeMap<PlayerId, CarInput>,
    steps: u64,
    escapes: u64,
}

impl RocketScene {
    /// The arena with the ball at its spawn point, and no cars.
    pub fn new(config: RocketConfig) -> Self {
        let mut world = PhysicsWorld {
            gravity: Vec3::new(0.0, -GRAVITY, 0.0),
            integration_parameters: IntegrationParameters {
                dt: config.dt(),
                ..IntegrationParameters::default()
            },
            ..PhysicsWorld::default()
        };
        insert_arena(&config, &mut world);
        let spawn = ball_spawn(&config);
        let (ball, _) = world.insert(
            RigidBodyBuilder::dynamic()
                .translation(spawn.position)
                .linear_damping(config.ball_linear_damping)
                .angular_damping(config.ball_angular_damping)
                // Snapped every step; a sleeping body woken by the snap costs more than
                // one that never sleeps, and the ball rarely rests.
                .can_sleep(false),
            ColliderBuilder::ball(config.ball_radius)
                .density(config.ball_density)
                .restitution(config.ball_restitution)
                .restitution_combine_rule(CoefficientCombineRule::Max)
                .friction(config.ball_friction),
        );
        Self {
            config,
            world,
            ball,
            cars: BTreeMap::new(),
            last_inputs: BTreeMap::new(),
            steps: 0,
            escapes: 0,
        }
    }

    /// The configuration the scene was built with.
    pub fn config(&self) -> &RocketConfig {
        &self.config
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Adds car `id` at rest at its spawn point ([`car_spawn`]); nothing if it exists.
    pub fn add_car(&mut self, id: PlayerId) {
        if self.cars.contains_key(&id) {
            return;
        }
        let spawn = car_spawn(&self.config, id);
        let h = self.config.car_half;
        let (handle, _) = self.world.insert(
            RigidBodyBuilder::dynamic()
                .pose(spawn.pose())
                .enabled_rotations(false, true, false)
                .linear_damping(self.config.car_linear_damping)
                .angular_damping(self.config.car_angular_damping)
                .can_sleep(false),
            ColliderBuilder::cuboid(h.x, h.y, h.z)
                .density(self.config.car_density)
                // The tyres are the grip force (`drive`); the box itself slides.
                .friction(0.0)
                .friction_combine_rule(CoefficientCombineRule::Min),
        );
        self.cars.insert(id, handle);
        self.last_inputs.insert(id, CarInput::NONE);
    }

    /// Removes car `id`; unknown ids are ignored.
    pub fn remove_car(&mut self, id: PlayerId) {
        if let Some(h) = self.cars.remove(&id) {
            self.world.remove_body(h);
        }
        self.last_inputs.remove(&id);
    }

    /// The cars' ids, ascending.
    pub fn car_ids(&self) -> impl Iterator<Item = PlayerId> + '_ {
        self.cars.keys().copied()
    }

    /// Whether car `id` exists.
    pub fn has_car(&self, id: PlayerId) -> bool {
        self.cars.contains_key(&id)
    }

    /// One step with each listed car's keys (an id listed twice gets the union; cars not
    /// listed and unknown ids get nothing, so a player's input moves its own car only).
    pub fn step(&mut self, inputs: &[(PlayerId, CarInput)]) {
        let keys: Vec<(PlayerId, CarInput)> = self
            .cars
            .keys()
            .map(|&id| {
                let input = inputs
                    .iter()
                    .filter(|(who, _)| *who == id)
                    .fold(CarInput::NONE, |acc, (_, i)| acc.with(*i));
                (id, input)
            })
            .collect();
        let controls: Vec<(PlayerId, Controls)> =
            keys.iter().map(|&(id, i)| (id, i.controls())).collect();
        self.step_controls(&controls);
        for (id, input) in keys {
            self.last_inputs.insert(id, input);
        }
    }

    /// One step with analog controls (a client predicting remote cars from decayed
    /// inputs). Cars not listed get no control. Does not change [`Self::last_input`].
    pub fn step_controls(&mut self, controls: &[(PlayerId, Controls)]) {
        let cars: Vec<(PlayerId, RigidBodyHandle)> =
            self.cars.iter().map(|(&id, &h)| (id, h)).collect();
        for (id, handle) in cars {
            let c = controls
                .iter()
                .find(|(who, _)| *who == id)
                .map_or_else(Controls::default, |(_, c)| *c);
            let Some(body) = self.world.bodies.get_mut(handle) else {
                continue;
            };
            // Rapier keeps user forces across steps; controls must not.
            body.reset_forces(false);
            body.reset_torques(false);
            if body.is_dynamic() {
                drive(body, &self.config, c);
            }
        }
        self.world.step();
        self.recover_escaped();
        self.snap();
        self.steps += 1;
    }

    /// A body outside the arena (only a solver failure gets it there) goes back to its
    /// spawn point at rest. A function of each body's own state, so a client's prediction
    /// applies it exactly as the server does.
    fn recover_escaped(&mut self) {
        let c = self.config;
        let outside = |p: Vec3| {
            p.x.abs() > c.arena_half_width + 1.0
                || p.z.abs() > c.arena_half_length + 1.0
                || p.y < -1.0
                || p.y > c.arena_height + 1.0
                || !p.is_finite()
        };
        if self.ball_state().is_some_and(|b| outside(b.position)) {
            self.escapes += 1;
            self.set_ball_state(&ball_spawn(&c));
        }
        let escaped: Vec<PlayerId> = self
            .cars
            .keys()
            .copied()
            .filter(|&id| self.car_state(id).is_some_and(|s| outside(s.position)))
            .collect();
        for id in escaped {
            self.escapes += 1;
            self.set_car_state(id, &car_spawn(&c, id));
        }
    }

    /// Bodies put back at their spawn point after leaving the arena (see `step`).
    pub fn escapes(&self) -> u64 {
        self.escapes
    }

    /// Snaps every dynamic body to the quantization grid (see [`RocketConfig::quantize`]).
    fn snap(&mut self) {
        let q = self.config.quantize;
        let handles: Vec<RigidBodyHandle> = std::iter::once(self.ball)
            .chain(self.cars.values().copied())
            .collect();
        for h in handles {
            let Some(body) = self.world.bodies.get_mut(h) else {
                continue;
            };
            if !body.is_dynamic() {
                continue;
            }
            let state = BodyState::of(body);
            let snapped = q.snap(&state);
            if snapped != state {
                body.set_position(snapped.pose(), false);
                body.set_linvel(snapped.linvel, false);
                body.set_angvel(snapped.angvel, false);
            }
        }
    }

    /// Car `id`'s state.
    pub fn car_state(&self, id: PlayerId) -> Option<BodyState> {
        self.cars
            .get(&id)
            .and_then(|&h| self.world.bodies.get(h))
            .map(BodyState::of)
    }

    /// Every car's id and state, ascending by id.
    pub fn car_states(&self) -> impl Iterator<Item = (PlayerId, BodyState)> + '_ {
        self.cars
            .iter()
            .filter_map(|(&id, &h)| self.world.bodies.get(h).map(|b| (id, BodyState::of(b))))
    }

    /// The keys car `id` was driven with in the last step ([`CarInput::NONE`] before any).
    pub fn last_input(&self, id: PlayerId) -> Option<CarInput> {
        self.last_inputs.get(&id).copied()
    }

    /// Records the keys a car was last driven with (a client loading the server's state).
    pub fn set_last_input(&mut self, id: PlayerId, input: CarInput) {
        if self.cars.contains_key(&id) {
            self.last_inputs.insert(id, input);
        }
    }

    /// The ball's state (always present; `Option` for uniformity with the cars).
    pub fn ball_state(&self) -> Option<BodyState> {
        self.world.bodies.get(self.ball).map(BodyState::of)
    }

    /// Teleports car `id` (pose and velocities). Unknown ids and non-finite states are
    /// ignored. A kinematic car is moved there at the next step instead.
    pub fn set_car_state(&mut self, id: PlayerId, state: &BodyState) {
        if let Some(&h) = self.cars.get(&id) {
            self.set_state(h, state);
        }
    }

    /// Teleports the ball; non-finite states are ignored. A kinematic ball is moved there
    /// at the next step instead.
    pub fn set_ball_state(&mut self, state: &BodyState) {
        self.set_state(self.ball, state);
    }

    fn set_state(&mut self, h: RigidBodyHandle, state: &BodyState) {
        if !state.is_finite() {
            return;
        }
        let Some(body) = self.world.bodies.get_mut(h) else {
            return;
        };
        if body.is_kinematic() {
            body.set_next_kinematic_position(state.pose());
            return;
        }
        body.set_position(state.pose(), true);
        body.set_linvel(state.linvel, true);
        body.set_angvel(state.angvel, true);
    }

    /// Makes car `id` kinematic (moved by [`Self::set_car_state`], not simulated) or
    /// dynamic again.
    pub fn set_kinematic_car(&mut self, id: PlayerId, kinematic: bool) {
        if let Some(&h) = self.cars.get(&id) {
            self.set_kinematic(h, kinematic);
        }
    }

    /// Makes the ball kinematic or dynamic again.
    pub fn set_kinematic_ball(&mut self, kinematic: bool) {
        self.set_kinematic(self.ball, kinematic);
    }

    /// Whether the ball is simulated (not kinematic).
    pub fn ball_is_dynamic(&self) -> bool {
        self.world
            .bodies
            .get(self.ball)
            .is_some_and(|b| b.is_dynamic())
    }

    /// Whether car `id` is simulated (not kinematic).
    pub fn car_is_dynamic(&self, id: PlayerId) -> bool {
        self.cars
            .get(&id)
            .and_then(|&h| self.world.bodies.get(h))
            .is_some_and(|b| b.is_dynamic())
    }

    fn set_kinematic(&mut self, h: RigidBodyHandle, kinematic: bool) {
        let Some(body) = self.world.bodies.get_mut(h) else {
            return;
        };
        let wanted = if kinematic {
            RigidBodyType::KinematicPositionBased
        } else {
            RigidBodyType::Dynamic
        };
        if body.body_type() != wanted {
            body.set_body_type(wanted, true);
        }
    }

    /// Whether car `id` touches the ball now ([`car_touches_ball`]).
    pub fn car_touches_ball(&self, id: PlayerId) -> bool {
        match (self.car_state(id), self.ball_state()) {
            (Some(car), Some(ball)) => car_touches_ball(&self.config, &car, ball.position),
            _ => false,
        }
    }
}

/// Where car `id` starts: on the floor near one end (odd ids the +z end, even the -z end),
/// in one of five lanes, facing the middle, at rest.
pub fn car_spawn(config: &RocketConfig, id: PlayerId) -> BodyState {
    let i = id.wrapping_sub(1);
    let side = if i % 2 == 0 { 1.0 } else { -1.0 };
    let lane = ((i / 2) % 5) as f32 - 2.0;
    let x = (lane * 6.0).clamp(
        -config.arena_half_width + 2.0,
        config.arena_half_width - 2.0,
    );
    let z = side * (config.arena_half_length - 6.0).max(0.0);
    // The nose is +z: the car at +z turns half a turn to face the middle.
    let yaw = if side > 0.0 {
        std::f32::consts::PI
    } else {
        0.0
    };
    let state = BodyState {
        position: Vec3::new(x, config.car_half.y, z),
        rotation: Quat::from_rotation_y(yaw),
        ..BodyState::default()
    };
    config.quantize.snap(&state)
}

/// Where the ball starts: above the centre spot, dropping onto it.
pub fn ball_spawn(config: &RocketConfig) -> BodyState {
    config.quantize.snap(&BodyState {
        position: Vec3::new(0.0, config.ball_radius + 2.0, 0.0),
        ..BodyState::default()
    })
}

/// Whether a car in state `car` and a ball centred at `ball` touch (closer than
/// [`CONTACT_MARGIN`]): the ball's centre against the car's box. The lab uses it on the
/// server's states and on what a client rendered, so both count contacts alike.
pub fn car_touches_ball(config: &RocketConfig, car: &BodyState, ball: Vec3) -> bool {
    if !(car.is_finite() && ball.is_finite()) {
        return false;
    }
    let local = car.rotation.normalize().inverse() * (ball - car.position);
    let closest = local.clamp(-config.car_half, config.car_half);
    local.distance(closest) <= config.ball_radius + CONTACT_MARGIN
}

/// Whether a car stands on the floor (and is not already rising).
fn grounded(config: &RocketConfig, state: &BodyState) -> bool {
    state.position.y <= config.car_half.y + 0.05 && state.linvel.y.abs() < 0.5
}

/// Applies `c` to a car body for one step: throttle and steering through the tyres (on
/// the floor only), the tyres' sideways grip, boost along the nose, a jump off the floor.
fn drive(body: &mut rapier3d::prelude::RigidBody, config: &RocketConfig, c: Controls) {
    let state = BodyState::of(body);
    let mass = body.mass();
    let nose = state.rotation * Vec3::Z;
    let flat_nose = Vec3::new(nose.x, 0.0, nose.z).normalize_or_zero();
    let right = Vec3::Y.cross(flat_nose);
    let mut force = flat_nose * (c.boost * config.boost_accel * mass);
    if grounded(config, &state) {
        force += flat_nose * (c.throttle * config.drive_accel * mass);
        // The tyres do not slide sideways: remove most of the sideways speed each step.
        let sideways = state.linvel.dot(right);
        force -= right * (sideways * config.grip * mass);
        // Yaw inertia of a box about y.
        let (w, l) = (2.0 * config.car_half.x, 2.0 * config.car_half.z);
        let inertia = mass * (w * w + l * l) / 12.0;
        body.add_torque(Vec3::Y * (c.steer * config.turn_accel * inertia), true);
        if c.jump {
            body.apply_impulse(Vec3::Y * (config.jump_speed * mass), true);
        }
    }
    body.add_force(force, true);
}

/// The floor, four walls and the ceiling, fixed, around the inner box
/// `[-w, w] × [0, h] × [-l, l]`.
fn insert_arena(config: &RocketConfig, world: &mut PhysicsWorld) {
    let (w, h, l) = (
        config.arena_half_width,
        config.arena_height,
        config.arena_half_length,
    );
    let t = WALL * 0.5;
    let slabs = [
        // Floor and ceiling.
        (Vec3::new(0.0, -t, 0.0), Vec3::new(w + WALL, t, l + WALL)),
        (Vec3::new(0.0, h + t, 0.0), Vec3::new(w + WALL, t, l + WALL)),
        // Side walls (x) and end walls (z).
        (
            Vec3::new(w + t, h * 0.5, 0.0),
            Vec3::new(t, h * 0.5, l + WALL),
        ),
        (
            Vec3::new(-w - t, h * 0.5, 0.0),
            Vec3::new(t, h * 0.5, l + WALL),
        ),
        (Vec3::new(0.0, h * 0.5, l + t), Vec3::new(w, h * 0.5, t)),
        (Vec3::new(0.0, h * 0.5, -l - t), Vec3::new(w, h * 0.5, t)),
    ];
    let arena = world.insert_body(RigidBodyBuilder::fixed());
    for (centre, half) in slabs {
        world.insert_collider(
            ColliderBuilder::cuboid(half.x, half.y, half.z)
                .translation(centre)
                .friction(0.6),
            Some(arena),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scene() -> RocketScene {
        let mut s = RocketScene::new(RocketConfig::default());
        s.add_car(1);
        s.add_car(2);
        s
    }

    #[test]
    fn throttle_drives_the_nose_forward_and_steering_turns() {
        let mut s = scene();
        let start = s.car_state(1).unwrap();
        for _ in 0..64 {
            s.step(&[(1, CarInput::FORWARD)]);
        }
        let end = s.car_state(1).unwrap();
        // Car 1 spawns at the +z end facing -z.
        assert!(end.position.z < start.position.z - 3.0, "{end:?}");
        assert!(
            (end.position.y - start.position.y).abs() < 0.05,
            "stays on the floor"
        );
        let yaw = |s: &BodyState| (s.rotation * Vec3::Z).x.atan2((s.rotation * Vec3::Z).z);
        for _ in 0..32 {
            s.step(&[(1, CarInput::FORWARD | CarInput::LEFT)]);
        }
        let turned = s.car_state(1).unwrap();
        assert!(
            (yaw(&turned) - yaw(&end)).abs() > 0.3,
            "steering turns the car"
        );
        // Car 2 got no input: it has not moved.
        let two = s.car_state(2).unwrap();
        assert!(two.position.distance(car_spawn(s.config(), 2).position) < 0.01);
    }

    #[test]
    fn jumping_leaves_the_floor_once() {
        let mut s = scene();
        for _ in 0..10 {
            s.step(&[]);
        }
        s.step(&[(1, CarInput::JUMP)]);
        let mut top: f32 = 0.0;
        for _ in 0..40 {
            s.step(&[(1, CarInput::JUMP)]);
            top = top.max(s.car_state(1).unwrap().position.y);
        }
        assert!(top > 1.0, "{top}");
    }

    #[test]
    fn the_ball_bounces_and_stays_in_the_arena() {
        let mut s = scene();
        s.set_ball_state(&BodyState {
            position: Vec3::new(0.0, 8.0, 0.0),
            linvel: Vec3::new(25.0, 0.0, -30.0),
            ..BodyState::default()
        });
        let mut lowest_after_first_bounce = f32::MAX;
        let mut bounced = false;
        for _ in 0..64 * 6 {
            s.step(&[]);
            let b = s.ball_state().unwrap();
            assert!(
                b.position.x.abs() < 30.0 && b.position.z.abs() < 40.0,
                "{b:?}"
            );
            if b.linvel.y > 1.0 {
                bounced = true;
            }
            if bounced {
                lowest_after_first_bounce = lowest_after_first_bounce.min(b.position.y);
            }
        }
        assert!(bounced, "the ball bounced off the floor");
        assert!(
            lowest_after_first_bounce >= 1.1,
            "never sinks into the floor"
        );
    }

    #[test]
    fn a_car_hits_the_ball_and_only_cars_move_it() {
        let mut s = scene();
        // Nobody drives: the ball drops on the centre spot and comes to rest there.
        for _ in 0..64 * 6 {
            s.step(&[(2, CarInput::NONE)]);
        }
        let rest = s.ball_state().unwrap();
        assert!(rest.linvel.length() < 0.5, "{rest:?}");
        // Car 1 drives straight at it from its spawn in lane 0 (x = -12): put it in
        // front of the ball instead.
        s.set_car_state(
            1,
            &BodyState {
                position: Vec3::new(0.0, 0.4, 10.0),
                rotation: Quat::from_rotation_y(std::f32::consts::PI),
                ..BodyState::default()
            },
        );
        let mut touched = false;
        for _ in 0..128 {
            s.step(&[(1, CarInput::FORWARD)]);
            touched |= s.car_touches_ball(1);
        }
        assert!(touched);
        let hit = s.ball_state().unwrap();
        assert!(
            hit.position.z < rest.position.z - 2.0,
            "pushed toward -z: {hit:?}"
        );
    }

    #[test]
    fn no_input_reaches_the_ball_except_through_a_car() {
        // Every key of every car, and keys for cars that do not exist, while no car gets
        // near the ball: the ball moves exactly as with no input at all.
        let mut driven = scene();
        let mut idle = scene();
        let all = CarInput::from_bits(CarInput::VALID).unwrap();
        for _ in 0..20 {
            driven.step(&[(1, all), (2, all), (0, all), (7, all), (u32::MAX, all)]);
            idle.step(&[]);
            assert!(!driven.car_touches_ball(1) && !driven.car_touches_ball(2));
        }
        assert_eq!(driven.ball_state(), idle.ball_state());
        assert!(!driven.has_car(7), "an input does not create a car");
    }

    #[test]
    fn equal_scenes_stay_identical_and_states_stay_on_the_grid() {
        let mut a = scene();
        let mut b = scene();
        let q = a.config().quantize;
        for t in 0..200u32 {
            let i = CarInput::from_bits((t % 64) as u8).unwrap();
            a.step(&[(1, i), (2, CarInput::FORWARD)]);
            b.step(&[(2, CarInput::FORWARD), (1, i)]);
        }
        assert_eq!(
            a.car_states().collect::<Vec<_>>(),
            b.car_states().collect::<Vec<_>>()
        );
        assert_eq!(a.ball_state(), b.ball_state());
        let car = a.car_state(1).unwrap();
        assert_eq!(q.snap(&car), car);
        assert_eq!(a.last_input(1), CarInput::from_bits(199 % 64));
    }

    #[test]
    fn a_kinematic_ball_follows_given_poses_and_is_not_pushed() {
        let mut s = scene();
        s.set_kinematic_ball(true);
        assert!(!s.ball_is_dynamic());
        let at = BodyState {
            position: Vec3::new(5.0, 3.0, 5.0),
            ..BodyState::default()
        };
        s.set_ball_state(&at);
        s.step(&[]);
        assert!(s.ball_state().unwrap().position.distance(at.position) < 1e-4);
        s.step(&[]);
        assert!(
            s.ball_state().unwrap().position.distance(at.position) < 1e-4,
            "no gravity"
        );
        s.set_kinematic_ball(false);
        s.step(&[]);
        assert!(s.ball_is_dynamic());
    }

    #[test]
    fn touching_is_measured_against_the_box() {
        let c = RocketConfig::default();
        let car = BodyState {
            rotation: Quat::from_rotation_y(std::f32::consts::FRAC_PI_2),
            ..BodyState::default()
        };
        // Rotated a quarter turn, the nose points along +x: 2 m from centre to the nose.
        assert!(car_touches_ball(
            &c,
            &car,
            Vec3::new(2.0 + c.ball_radius, 0.0, 0.0)
        ));
        assert!(!car_touches_ball(
            &c,
            &car,
            Vec3::new(0.0, 0.0, 2.0 + c.ball_radius)
        ));
        assert!(!car_touches_ball(&c, &car, Vec3::NAN));
    }
}
