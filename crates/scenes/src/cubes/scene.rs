//! The simulation itself: ground, grid of cubes, player cubes.

use std::collections::BTreeMap;
use std::fmt;

use glam::Vec3;
use rapier3d::parry::shape::Cuboid;
use rapier3d::prelude::{
    ColliderBuilder, CollisionPipeline, IntegrationParameters, PhysicsPipeline, PhysicsWorld,
    RigidBody, RigidBodyBuilder, RigidBodyHandle,
};

use super::quantize::StateQuantization;
use super::spawn::spawn_point;
use super::support::{Obstacle, is_supported, touches_from_below};
use super::{BodyState, CubeInput, CubeSceneConfig};

pub use crate::PlayerId;

/// Standard gravity, m/s².
const GRAVITY: f32 = 9.81;

/// A jump may not start while the player already rises faster than this
/// (m/s). Every jump leaves the player rising faster (see [`drive`]), so
/// together with the contact gap this allows one jump per landing even when
/// JUMP is held.
const MAX_RISE_FOR_JUMP: f32 = 1.0;

/// Half thickness of the ground slab; thick so nothing tunnels through it.
const GROUND_HALF_THICKNESS: f32 = 1.0;

/// The cube scene: a ground slab, a grid of unit cubes and any number of
/// player cubes, stepped only by [`CubeScene::step`].
///
/// `state(n) + inputs(n) = state(n + 1)`, bit for bit: two scenes built from
/// the same config that see the same calls produce identical states.
/// Cloning copies the complete physics state, so a clone stepped with the
/// same inputs stays bit-identical to the original (useful for rollback).
pub struct CubeScene {
    config: CubeSceneConfig,
    world: PhysicsWorld,
    ground: RigidBodyHandle,
    /// One slot per grid position; `None` where a sparse scene holds no cube.
    cubes: Vec<Option<RigidBodyHandle>>,
    /// Occupied slots, ascending: a sparse scene lists its few cubes without a scan.
    present: Vec<usize>,
    players: BTreeMap<PlayerId, RigidBodyHandle>,
    steps: u64,
    ground_shape: Cuboid,
    cube_shape: Cuboid,
    player_shape: Cuboid,
}

impl CubeScene {
    /// Builds the ground and the grid. The grid is centred on the origin and
    /// its cubes start asleep, resting on the ground (top face y = 0).
    ///
    /// Construction runs a few dozen internal steps to let the grid settle,
    /// which takes on the order of 0.1 s.
    pub fn new(config: CubeSceneConfig) -> Self {
        let mut scene = Self::new_sparse(config);
        for index in 0..scene.cube_count() {
            if let Some(state) = scene.cube_spawn(index) {
                // Inserted awake: a body inserted asleep is strong-woken when its
                // first ground contact appears, and then sinks for a few steps before
                // the contact catches it (see `settle`).
                scene.insert_cube(index, &state, true);
            }
        }
        scene.settle();
        scene
    }

    /// Where grid cube `index` starts, and where the kill plane puts it back: its grid
    /// position, resting on the ground, unrotated, at rest. Row-major, X fastest:
    /// `index = row * grid + column`, row along +Z. `None` past the end. The same in a
    /// sparse scene, whether or not it holds that cube.
    pub fn cube_spawn(&self, index: usize) -> Option<BodyState> {
        if index >= self.cubes.len() {
            return None;
        }
        let config = &self.config;
        let grid = config.grid.max(1) as usize;
        let (row, column) = (index / grid, index % grid);
        let origin = -(config.grid.saturating_sub(1) as f32) * config.spacing * 0.5;
        Some(BodyState {
            position: Vec3::new(
                origin + column as f32 * config.spacing,
                config.cube_size * 0.5,
                origin + row as f32 * config.spacing,
            ),
            ..BodyState::default()
        })
    }

    /// Where player `id` appears (see [`Self::add_player`]), and where the kill plane puts
    /// it back: resting on its spawn point, unrotated, at rest.
    pub fn player_spawn(&self, id: PlayerId) -> BodyState {
        BodyState {
            position: spawn_point(&self.config, id),
            ..BodyState::default()
        }
    }

    /// A scene with the ground but no grid cubes: every grid slot is empty until
    /// [`Self::insert_cube`] fills it. Client-side prediction uses this to simulate only
    /// the bodies it predicts, with exactly the same step code as the server.
    pub fn new_sparse(config: CubeSceneConfig) -> Self {
        let mut world = PhysicsWorld {
            gravity: Vec3::new(0.0, -GRAVITY, 0.0),
            integration_parameters: integration_parameters(&config),
            ..PhysicsWorld::default()
        };
        let (ground, ground_shape) = insert_ground(&config, &mut world);
        let slots = (config.grid * config.grid) as usize;
        CubeScene {
            config,
            world,
            ground,
            cubes: vec![None; slots],
            present: Vec::new(),
            players: BTreeMap::new(),
            steps: 0,
            ground_shape,
            cube_shape: Cuboid::new(Vec3::splat(config.cube_size * 0.5)),
            player_shape: Cuboid::new(Vec3::splat(config.player_size * 0.5)),
        }
    }

    /// Steps the fresh scene until the grid has found its ground contacts and
    /// fallen asleep (≈ 0.6 s of simulated time), so every scene starts from
    /// the same quiet state. These steps are not counted by [`Self::steps`].
    fn settle(&mut self) {
        let max_steps = 10 * self.config.tick_hz.max(1);
        for _ in 0..max_steps {
            if self.awake_cube_count() == 0 {
                break;
            }
            self.step(&[]);
        }
        self.steps = 0;
    }

    /// The configuration the scene was built with.
    pub fn config(&self) -> &CubeSceneConfig {
        &self.config
    }

    /// Spawns player `id` at rest at its spawn point; does nothing if the
    /// player already exists.
    ///
    /// Spawn points lie on square rings just outside the grid, 1.5 player
    /// sizes apart, so distinct ids never overlap: ids 0, 1, 2, 3 take the
    /// middle of the +Z, -Z, +X and -X sides (W drives player 0 into the
    /// grid), later ids fan out along the sides and then onto outer rings.
    /// The rings stop at the ground's edge and ids past their capacity
    /// (thousands with the default config) wrap around. A spawn point is not
    /// checked for cubes that were pushed onto it.
    pub fn add_player(&mut self, id: PlayerId) {
        if self.players.contains_key(&id) {
            return;
        }
        let half = self.config.player_size * 0.5;
        let (handle, _) = self.world.insert(
            RigidBodyBuilder::dynamic()
                .translation(self.player_spawn(id).position)
                .linear_damping(self.config.player_linear_damping)
                .angular_damping(self.config.player_angular_damping),
            ColliderBuilder::cuboid(half, half, half).friction(self.config.player_friction),
        );
        self.players.insert(id, handle);
    }

    /// Removes player `id` and its body; unknown ids are ignored.
    pub fn remove_player(&mut self, id: PlayerId) {
        if let Some(handle) = self.players.remove(&id) {
            self.world.remove_body(handle);
        }
    }

    /// Ids of the players in the scene, ascending.
    pub fn players(&self) -> Vec<PlayerId> {
        self.players.keys().copied().collect()
    }

    /// Advances the simulation by one tick of `1 / tick_hz` seconds.
    ///
    /// Each listed player's input acts during this tick only; players not
    /// listed get no force, unknown ids are ignored, and an id listed twice
    /// gets the union of its inputs (so the order of `inputs` never matters).
    ///
    /// After the physics step, bodies below [`CubeSceneConfig::kill_height`] go back to
    /// their spawn place, and then (with [`CubeSceneConfig::quantize`]) players are
    /// snapped to the quantization grid.
    pub fn step(&mut self, inputs: &[(PlayerId, CubeInput)]) {
        let players: Vec<(PlayerId, RigidBodyHandle)> =
            self.players.iter().map(|(&id, &h)| (id, h)).collect();
        for &(id, handle) in &players {
            let input = inputs
                .iter()
                .filter(|(who, _)| *who == id)
                .fold(CubeInput::NONE, |acc, (_, input)| acc.with(*input));
            // Support reads poses and the player's own velocity only, which
            // no other player's force or impulse changes before the physics
            // step: the order players are handled in cannot matter.
            let jump = input.contains(CubeInput::JUMP) && self.can_jump(handle);
            let Some(body) = self.world.bodies.get_mut(handle) else {
                continue;
            };
            // Rapier keeps user forces across steps; inputs must not.
            body.reset_forces(false);
            body.reset_torques(false);
            drive(body, &self.config, input, jump);
        }

        self.world.step();
        // Before snapping, so a respawned player is snapped like any other.
        self.respawn_fallen();
        if let Some(q) = self.config.quantize {
            self.snap_players(&q);
        }
        self.steps += 1;
    }

    /// The kill plane ([`CubeSceneConfig::kill_height`]): every body whose centre is below
    /// it goes back to its spawn place at rest ([`Self::cube_spawn`], [`Self::player_spawn`]):
    /// cubes asleep (their new ground contact wakes them for about half a second while
    /// they settle by < 0.1 mm, then they sleep again), players awake, as
    /// [`Self::add_player`] makes them. A function of each body's own state alone, so a
    /// sparse scene (client-side prediction) applies it to the bodies it holds exactly as
    /// the full scene does. A body already at the spawn place (pushed there) is not
    /// checked for: the solver separates the two at the next step.
    fn respawn_fallen(&mut self) {
        let kill = self.config.kill_height;
        for k in 0..self.present.len() {
            let index = self.present[k];
            let fallen = self
                .cube_body(index)
                .is_some_and(|b| b.translation().y < kill);
            if let (true, Some(spawn)) = (fallen, self.cube_spawn(index)) {
                self.set_cube_state(index, &spawn, false);
            }
        }
        let fallen: Vec<PlayerId> = self
            .players
            .iter()
            .filter(|&(_, &h)| {
                self.world
                    .bodies
                    .get(h)
                    .is_some_and(|b| b.translation().y < kill)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in fallen {
            let spawn = self.player_spawn(id);
            self.set_player_state(id, &spawn);
        }
    }

    /// Snaps every player's state to `q`'s grid (see [`CubeSceneConfig::quantize`]).
    ///
    /// Only players: writing a snapped pose into a resting cube every tick moves it off
    /// and back onto its ground contact, and rapier then never lets it sleep (all 900
    /// cubes stay awake: docs/snapshots.md, "Quantization"). Cubes are quantized
    /// on the wire only, and prediction compares them with a tolerance above the
    /// quantization error instead.
    fn snap_players(&mut self, q: &StateQuantization) {
        for &handle in self.players.values() {
            let Some(body) = self.world.bodies.get_mut(handle) else {
                continue;
            };
            let state = BodyState::of(body);
            let snapped = q.snap(&state);
            if snapped == state {
                continue;
            }
            // `false`: a strong wake would restart the body's sleep countdown every tick.
            body.set_position(snapped.pose(), false);
            body.set_linvel(snapped.linvel, false);
            body.set_angvel(snapped.angvel, false);
        }
    }

    /// Whether the player is standing on the ground, a cube or another player
    /// and is not already on its way up.
    fn can_jump(&self, handle: RigidBodyHandle) -> bool {
        let Some(body) = self.world.bodies.get(handle) else {
            return false;
        };
        if body.linvel().y > MAX_RISE_FOR_JUMP {
            return false;
        }
        let pose = body.position();
        if let Some(ground) = self.world.bodies.get(self.ground) {
            if touches_from_below(
                pose,
                &self.player_shape,
                ground.position(),
                &self.ground_shape,
            ) {
                return true;
            }
        }
        let cubes = self.cubes.iter().flatten().filter_map(|&h| {
            self.world.bodies.get(h).map(|b| Obstacle {
                pose: b.position(),
                shape: &self.cube_shape,
            })
        });
        let others = self
            .players
            .values()
            .filter(|&&h| h != handle)
            .filter_map(|&h| {
                self.world.bodies.get(h).map(|b| Obstacle {
                    pose: b.position(),
                    shape: &self.player_shape,
                })
            });
        is_supported(pose, &self.player_shape, cubes.chain(others))
    }

    /// Number of steps taken since construction.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Every player's id and state, ascending by id. Unlike [`Self::players`] followed by
    /// [`Self::player_state`], this allocates nothing and looks each body up once, which
    /// matters to code that reads the world every tick (snapshot capture).
    pub fn player_states(&self) -> impl Iterator<Item = (PlayerId, BodyState)> + '_ {
        self.players
            .iter()
            .filter_map(|(&id, &h)| self.world.bodies.get(h).map(|b| (id, BodyState::of(b))))
    }

    /// Current state of player `id`, or `None` if there is no such player.
    pub fn player_state(&self, id: PlayerId) -> Option<BodyState> {
        self.player_body(id).map(BodyState::of)
    }

    /// Teleports player `id` to `state` (pose and velocities) and wakes it.
    /// Unknown ids and non-finite states are ignored.
    pub fn set_player_state(&mut self, id: PlayerId, state: &BodyState) {
        if !state.is_finite() {
            return;
        }
        let Some(&handle) = self.players.get(&id) else {
            return;
        };
        if let Some(body) = self.world.bodies.get_mut(handle) {
            body.set_position(state.pose(), true);
            body.set_linvel(state.linvel, true);
            body.set_angvel(state.angvel, true);
            body.wake_up(true);
        }
    }

    /// Number of grid slots (`grid²`); in a full scene, the number of cubes.
    pub fn cube_count(&self) -> usize {
        self.cubes.len()
    }

    /// Whether grid slot `index` holds a cube (always, in a full scene).
    pub fn has_cube(&self, index: usize) -> bool {
        self.cubes.get(index).is_some_and(Option::is_some)
    }

    /// Indices of the slots that hold a cube, ascending.
    pub fn present_cubes(&self) -> Vec<usize> {
        (0..self.cubes.len())
            .filter(|&i| self.has_cube(i))
            .collect()
    }

    /// Puts a cube into grid slot `index` with `state` (replacing the state of one already
    /// there). `awake: false` inserts it asleep, with no velocity. Out-of-range indices and
    /// non-finite states are ignored.
    pub fn insert_cube(&mut self, index: usize, state: &BodyState, awake: bool) {
        if index >= self.cubes.len() || !state.is_finite() {
            return;
        }
        if self.has_cube(index) {
            self.set_cube_state(index, state, awake);
            return;
        }
        let half = self.config.cube_size * 0.5;
        let mut builder = RigidBodyBuilder::dynamic().pose(state.pose());
        if awake {
            builder = builder.linvel(state.linvel).angvel(state.angvel);
        } else {
            builder = builder.sleeping(true);
        }
        let (handle, _) = self.world.insert(
            builder,
            ColliderBuilder::cuboid(half, half, half).friction(self.config.cube_friction),
        );
        self.cubes[index] = Some(handle);
        if let Err(at) = self.present.binary_search(&index) {
            self.present.insert(at, index);
        }
    }

    /// Empties grid slot `index`; does nothing if it is empty.
    pub fn remove_cube(&mut self, index: usize) {
        let Some(handle) = self.cubes.get_mut(index).and_then(Option::take) else {
            return;
        };
        if let Ok(at) = self.present.binary_search(&index) {
            self.present.remove(at);
        }
        self.world.remove_body(handle);
    }

    /// State of grid cube `index`, or `None` past the end.
    pub fn cube_state(&self, index: usize) -> Option<BodyState> {
        self.cube_body(index).map(BodyState::of)
    }

    /// States of the cubes present, in slot order. In a full scene that is every cube, and
    /// the position in the vector is the slot index `row * grid + column` (row along +Z,
    /// column along +X), the same order for the scene's whole life.
    pub fn cube_states(&self) -> Vec<BodyState> {
        (0..self.cubes.len())
            .filter_map(|i| self.cube_state(i))
            .collect()
    }

    /// The cubes present, in slot order, as `(slot index, state, awake)`; `awake` is
    /// [`Self::cube_awake`]. The per-tick counterpart of [`Self::cube_states`]: it
    /// allocates nothing and reads each body once, and it pairs every state with its own
    /// slot's sleep flag in a sparse scene too.
    pub fn cubes(&self) -> impl Iterator<Item = (usize, BodyState, bool)> + '_ {
        self.present.iter().filter_map(|&i| {
            self.cube_body(i)
                .map(|b| (i, BodyState::of(b), !b.is_sleeping()))
        })
    }

    /// Whether cube `index` is awake (simulated) rather than sleeping: the
    /// "interacting" flag a snapshot carries. `false` past the end.
    pub fn cube_awake(&self, index: usize) -> bool {
        self.cube_body(index).is_some_and(|b| !b.is_sleeping())
    }

    /// Number of grid cubes currently awake.
    pub fn awake_cube_count(&self) -> usize {
        self.cubes
            .iter()
            .flatten()
            .filter(|&&h| self.world.bodies.get(h).is_some_and(|b| !b.is_sleeping()))
            .count()
    }

    /// Overwrites cube `index` with `state`.
    ///
    /// With `awake`, the cube (and whatever touches it) is woken. Without, it
    /// is put to sleep where it is placed; sleeping bodies have no velocity,
    /// so the velocities in `state` are dropped. Like any body, a sleeping
    /// cube placed into a contact it did not have before is woken by that
    /// contact at the next step (and settles back to sleep once still).
    /// Out-of-range indices and non-finite states are ignored.
    pub fn set_cube_state(&mut self, index: usize, state: &BodyState, awake: bool) {
        if !state.is_finite() {
            return;
        }
        let Some(&Some(handle)) = self.cubes.get(index) else {
            return;
        };
        let Some(body) = self.world.bodies.get_mut(handle) else {
            return;
        };
        if awake {
            body.set_position(state.pose(), true);
            body.set_linvel(state.linvel, true);
            body.set_angvel(state.angvel, true);
            body.wake_up(true);
        } else {
            body.set_position(state.pose(), false);
            if !body.is_sleeping() {
                body.sleep();
            }
        }
    }

    fn player_body(&self, id: PlayerId) -> Option<&RigidBody> {
        self.players
            .get(&id)
            .and_then(|&h| self.world.bodies.get(h))
    }

    fn cube_body(&self, index: usize) -> Option<&RigidBody> {
        self.cubes
            .get(index)
            .and_then(|h| h.and_then(|h| self.world.bodies.get(h)))
    }
}

/// The solver settings every peer uses (server, predicted worlds): one place, so they
/// cannot drift apart.
fn integration_parameters(config: &CubeSceneConfig) -> IntegrationParameters {
    IntegrationParameters {
        dt: config.dt(),
        ..IntegrationParameters::default()
    }
}

/// Inserts the fixed ground slab (top face at y = 0).
fn insert_ground(config: &CubeSceneConfig, world: &mut PhysicsWorld) -> (RigidBodyHandle, Cuboid) {
    let ground_shape = Cuboid::new(Vec3::new(
        config.ground_half_extent,
        GROUND_HALF_THICKNESS,
        config.ground_half_extent,
    ));
    let (ground, _) = world.insert(
        RigidBodyBuilder::fixed().translation(Vec3::new(0.0, -GROUND_HALF_THICKNESS, 0.0)),
        ColliderBuilder::cuboid(
            ground_shape.half_extents.x,
            ground_shape.half_extents.y,
            ground_shape.half_extents.z,
        )
        .friction(config.cube_friction),
    );
    (ground, ground_shape)
}

/// Applies one player's movement force, rolling torque and jump impulse.
fn drive(body: &mut RigidBody, config: &CubeSceneConfig, input: CubeInput, jump: bool) {
    let mut direction = Vec3::ZERO;
    if input.contains(CubeInput::FORWARD) {
        direction.z -= 1.0;
    }
    if input.contains(CubeInput::BACK) {
        direction.z += 1.0;
    }
    if input.contains(CubeInput::LEFT) {
        direction.x -= 1.0;
    }
    if input.contains(CubeInput::RIGHT) {
        direction.x += 1.0;
    }
    // Diagonals are as strong as straight moves; W+S cancels to nothing.
    let direction = direction.normalize_or_zero();
    if direction != Vec3::ZERO {
        body.add_force(direction * config.move_force, true);
        // Rolling toward `direction` spins about up × direction.
        body.add_torque(Vec3::Y.cross(direction) * config.move_torque, true);
    }
    if jump {
        // Cancel any fall first: a jump on the landing tick is then as high
        // as one from rest, and always leaves the player rising fast enough
        // that the next tick cannot jump again.
        let fall = body.linvel().y.min(0.0);
        let impulse = config.jump_impulse - body.mass() * fall;
        body.apply_impulse(Vec3::Y * impulse, true);
    }
}

impl Clone for CubeScene {
    fn clone(&self) -> Self {
        CubeScene {
            config: self.config,
            // `PhysicsWorld` is not `Clone`: its pipelines hold workspace only, so fresh
            // ones continue bit-identically, and everything else is copied.
            world: PhysicsWorld {
                gravity: self.world.gravity,
                integration_parameters: self.world.integration_parameters,
                physics_pipeline: PhysicsPipeline::new(),
                collision_pipeline: CollisionPipeline::new(),
                islands: self.world.islands.clone(),
                broad_phase: self.world.broad_phase.clone(),
                narrow_phase: self.world.narrow_phase.clone(),
                bodies: self.world.bodies.clone(),
                colliders: self.world.colliders.clone(),
                impulse_joints: self.world.impulse_joints.clone(),
                multibody_joints: self.world.multibody_joints.clone(),
                soft_bodies: self.world.soft_bodies.clone(),
                ccd_solver: self.world.ccd_solver.clone(),
            },
            ground: self.ground,
            cubes: self.cubes.clone(),
            present: self.present.clone(),
            players: self.players.clone(),
            steps: self.steps,
            ground_shape: self.ground_shape,
            cube_shape: self.cube_shape,
            player_shape: self.player_shape,
        }
    }
}

impl fmt::Debug for CubeScene {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CubeScene")
            .field("config", &self.config)
            .field("steps", &self.steps)
            .field("players", &self.players.keys().collect::<Vec<_>>())
            .field("cubes", &self.cubes.len())
            .field("awake_cubes", &self.awake_cube_count())
            .finish()
    }
}
