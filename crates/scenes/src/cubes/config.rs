//! Tunable parameters of the cube scene.

use super::quantize::StateQuantization;

/// Parameters of a [`CubeScene`](super::CubeScene).
///
/// Every peer must use the same configuration: the simulation is only
/// deterministic between scenes built from equal configs.
///
/// Forces are physical (N, N·m, N·s). All bodies have density 1, so with the
/// default sizes a grid cube weighs 1 kg and the player 8 kg.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubeSceneConfig {
    /// Simulation rate; each [`step`](super::CubeScene::step) advances `1 / tick_hz` s.
    pub tick_hz: u32,
    /// The grid is `grid x grid` cubes.
    pub grid: u32,
    /// Centre-to-centre distance between neighbouring grid cubes, metres.
    pub spacing: f32,
    /// Edge length of a grid cube, metres.
    pub cube_size: f32,
    /// Edge length of a player cube, metres.
    pub player_size: f32,
    /// Horizontal force while a direction key is held, newtons.
    pub move_force: f32,
    /// Torque about the horizontal axis perpendicular to the push, so the
    /// player tumbles forward instead of only sliding, N·m.
    pub move_torque: f32,
    /// Upward impulse of a jump, N·s.
    pub jump_impulse: f32,
    /// Linear damping of the player, 1/s: sets its top speed
    /// (≈ `move_force / (mass × damping)` when sliding).
    pub player_linear_damping: f32,
    /// Angular damping of the player, 1/s: stops tumbling turning into
    /// endless spinning once keys are released.
    pub player_angular_damping: f32,
    /// Friction coefficient of the player's faces (rapier averages the two
    /// coefficients of a contact).
    pub player_friction: f32,
    /// Friction coefficient of the grid cubes and the ground.
    pub cube_friction: f32,
    /// Half the side of the square ground slab, metres.
    pub ground_half_extent: f32,
    /// Kill plane, metres (world y). After every step, a body whose centre is below it is
    /// put back where it started, at rest: a cube at its grid position (unrotated, asleep),
    /// a player at its spawn point. Without it a body pushed off the ground falls forever,
    /// never sleeps, and soon outruns what a snapshot can carry (64 m/s by default, then
    /// the position limit), so clients would see a clamped state the server does not have.
    ///
    /// The default, -20 m, is well below the ground (whose slab ends at y = -2 m) and
    /// reached from the ground's edge after about 2 s of free fall at about 20 m/s, well
    /// inside the default quantization's limits. Keep it below -2 m and above
    /// `-position_limit`; `f32::NEG_INFINITY` turns the rule off.
    pub kill_height: f32,
    /// Snap every player to this grid after each step, so snapshots (which carry exactly
    /// this grid) describe the player the server simulates on, and client-side prediction
    /// (whose scene snaps the same way) reproduces it bit for bit, even after a rollback.
    /// Cubes are not snapped (see `CubeScene::step`); prediction's cube tolerance covers
    /// their quantization. `None` simulates players in full `f32` precision.
    pub quantize: Option<StateQuantization>,
}

impl Default for CubeSceneConfig {
    fn default() -> Self {
        CubeSceneConfig {
            tick_hz: 64,
            grid: 30,
            spacing: 1.1,
            cube_size: 1.0,
            player_size: 2.0,
            move_force: 150.0,
            move_torque: 40.0,
            jump_impulse: 45.0,
            player_linear_damping: 1.0,
            player_angular_damping: 1.5,
            player_friction: 1.0,
            cube_friction: 0.2,
            ground_half_extent: 100.0,
            kill_height: -20.0,
            quantize: Some(StateQuantization::default()),
        }
    }
}

impl CubeSceneConfig {
    /// Length of one tick, seconds.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_hz.max(1) as f32
    }

    /// Distance from the origin to the outer faces of the grid, metres: the
    /// grid covers `[-h, h]` on both X and Z.
    pub fn grid_half_extent(&self) -> f32 {
        self.grid.saturating_sub(1) as f32 * self.spacing * 0.5 + self.cube_size * 0.5
    }
}
