//! Tunable parameters of the car-and-ball scene.

use crate::cubes::quantize::StateQuantization;
use glam::Vec3;

/// Parameters of a [`RocketScene`](super::RocketScene). Both ends must build from equal
/// configurations: the simulation is only reproducible between equal ones.
///
/// Accelerations are given per unit mass (m/s², rad/s²) and turned into forces with
/// each body's mass, as the Unity ball article's car does (`AddForce(dir * force * mass)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RocketConfig {
    /// Simulation rate; each step advances `1 / tick_hz` s.
    pub tick_hz: u32,
    /// Inner half width (x) of the arena, m.
    pub arena_half_width: f32,
    /// Inner half length (z) of the arena, m.
    pub arena_half_length: f32,
    /// Inner height of the arena (floor at y = 0, ceiling at this height), m.
    pub arena_height: f32,
    /// Half extents of a car's box, m (x: width, y: height, z: length; the nose is +z).
    pub car_half: Vec3,
    /// Density of a car (its mass is density × volume), kg/m³.
    pub car_density: f32,
    /// Throttle acceleration on the floor, m/s².
    pub drive_accel: f32,
    /// Extra acceleration along the nose while boosting (also in the air), m/s².
    pub boost_accel: f32,
    /// Yaw acceleration of full steering, rad/s².
    pub turn_accel: f32,
    /// Upward speed a jump adds, m/s.
    pub jump_speed: f32,
    /// How fast the floor kills a car's sideways sliding, 1/s (tyres' grip).
    pub grip: f32,
    /// Linear damping of a car, 1/s: sets its top speed (≈ drive_accel / damping).
    pub car_linear_damping: f32,
    /// Angular damping of a car, 1/s: sets its top turn rate.
    pub car_angular_damping: f32,
    /// Ball radius, m.
    pub ball_radius: f32,
    /// Ball density, kg/m³.
    pub ball_density: f32,
    /// Ball restitution (the largest of the two in a contact counts): how bouncy it is.
    pub ball_restitution: f32,
    /// Ball friction coefficient.
    pub ball_friction: f32,
    /// Ball linear damping (air drag), 1/s.
    pub ball_linear_damping: f32,
    /// Ball angular damping, 1/s.
    pub ball_angular_damping: f32,
    /// Snap cars and the ball to this grid after each step, so a snapshot describes
    /// exactly what the server simulates on, and a client's prediction reproduces it.
    pub quantize: StateQuantization,
}

impl Default for RocketConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            arena_half_width: 30.0,
            arena_half_length: 40.0,
            arena_height: 16.0,
            car_half: Vec3::new(1.0, 0.4, 2.0),
            car_density: 100.0,
            drive_accel: 12.0,
            boost_accel: 12.0,
            turn_accel: 12.0,
            jump_speed: 6.0,
            grip: 8.0,
            car_linear_damping: 0.6,
            car_angular_damping: 4.0,
            ball_radius: 1.2,
            ball_density: 22.0,
            ball_restitution: 0.75,
            ball_friction: 0.4,
            ball_linear_damping: 0.1,
            ball_angular_damping: 0.5,
            quantize: StateQuantization::default(),
        }
    }
}

impl RocketConfig {
    /// Length of one tick, s.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_hz.max(1) as f32
    }

    /// Ticks in `secs` at this tick rate, at least one.
    pub fn ticks(&self, secs: f32) -> u32 {
        ((self.tick_hz as f32 * secs).round() as u32).max(1)
    }
}
