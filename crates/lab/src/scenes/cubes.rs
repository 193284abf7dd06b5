//! The cube scene (`lagless_scenes::cubes`) in the lab: 900 cubes on a grid, players that
//! push them around, a predicted set around the own player.

use crate::config::{RunConfig, ScriptChoice};
use crate::metrics::{Metric, Report};
use crate::runner::RunError;
use crate::scene::{Keys, LabScene, PlayerId, RawEntity, Script};
use lagless_core::Tick;
use lagless_core::interpolation::Pose;
use lagless_replication::{ReplicationClient, ReplicationError, ReplicationServer, Schema};
use lagless_scenes::cubes::predict::{CubeRollback, PredictConfig, PredictMode};
use lagless_scenes::cubes::replicate::{self, player_entity};
use lagless_scenes::cubes::script::{InputScript, SCRIPT_NAMES, script_by_name};
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig};

/// The cube scene, with what the lab follows of it: where the cubes started and the most
/// that were awake at once.
pub struct Cubes {
    /// The scene itself.
    pub scene: CubeScene,
    start: Vec<BodyState>,
    awake_max: usize,
}

impl Cubes {
    /// The lab's view of `scene`, and what both ends know of it.
    pub fn from_scene(scene: CubeScene) -> (Self, CubeSetup) {
        let setup = CubeSetup::new(*scene.config(), scene.cube_count());
        let start = scene.cube_states();
        let cubes = Self {
            scene,
            start,
            awake_max: 0,
        };
        (cubes, setup)
    }
}

/// The grid both ends build, and its size.
#[derive(Debug, Clone, Copy)]
pub struct CubeSetup {
    config: CubeSceneConfig,
    cubes: usize,
}

impl CubeSetup {
    /// A scene built from `config`, of `cubes` cubes.
    pub fn new(config: CubeSceneConfig, cubes: usize) -> Self {
        Self { config, cubes }
    }
}

/// A cube-scene input script as the lab's [`Script`].
pub struct Scripted(pub Box<dyn InputScript + Send>);

impl Script<Cubes> for Scripted {
    fn input(&mut self, tick: u64, seen: Option<&BodyState>) -> CubeInput {
        self.0.input(tick, seen)
    }
}

/// The cube-scene input of the keys held: W/A/S/D push, space jumps (the walkers take the
/// same input).
pub(crate) fn keys_input(keys: Keys) -> CubeInput {
    let held = [
        (keys.forward, CubeInput::FORWARD),
        (keys.back, CubeInput::BACK),
        (keys.left, CubeInput::LEFT),
        (keys.right, CubeInput::RIGHT),
        (keys.jump, CubeInput::JUMP),
    ];
    held.into_iter()
        .filter(|(down, _)| *down)
        .fold(CubeInput::NONE, |input, (_, key)| input.with(key))
}

/// Largest grid a run builds (10 000 cubes).
pub const MAX_GRID: u32 = 100;

/// The scene's settings for `config` (its tick rate and grid).
fn scene_config(config: &RunConfig) -> Result<CubeSceneConfig, RunError> {
    if !(1..=MAX_GRID).contains(&config.grid) {
        return Err(RunError::Invalid(format!(
            "grid must be 1..={MAX_GRID} cubes a side, got {}",
            config.grid
        )));
    }
    Ok(CubeSceneConfig {
        tick_hz: config.server.tick_hz,
        grid: config.grid,
        ..CubeSceneConfig::default()
    })
}

fn pose(b: &BodyState) -> Pose {
    Pose::new(b.position.to_array(), b.rotation.to_array())
        .with_velocity(b.linvel.to_array(), b.angvel.to_array())
}

fn floats(s: &BodyState) -> Vec<f32> {
    [
        s.position.to_array().as_slice(),
        &s.rotation.to_array(),
        &s.linvel.to_array(),
        &s.angvel.to_array(),
    ]
    .concat()
}

impl LabScene for Cubes {
    type Input = CubeInput;
    type Known = CubeSnapshot;
    type World = CubeRollback;
    type Setup = CubeSetup;
    type Seen = BodyState;

    fn build(config: &RunConfig) -> Result<(Self, CubeSetup), RunError> {
        let scene_config = scene_config(config)?;
        let scene = CubeScene::new(scene_config);
        let setup = CubeSetup {
            config: scene_config,
            cubes: scene.cube_count(),
        };
        let start = scene.cube_states();
        Ok((
            Self {
                scene,
                start,
                awake_max: 0,
            },
            setup,
        ))
    }

    fn client_setup(config: &RunConfig) -> Result<CubeSetup, RunError> {
        // A full scene has a cube in every slot; the sparse one counts the slots without
        // building them (64 bots building 900 cubes each starved the server of CPU).
        let scene_config = scene_config(config)?;
        let cubes = CubeScene::new_sparse(scene_config).cube_count();
        Ok(CubeSetup::new(scene_config, cubes))
    }

    fn add_player(&mut self, player: PlayerId) {
        self.scene.add_player(player);
    }

    fn remove_player(&mut self, player: PlayerId) {
        self.scene.remove_player(player);
    }

    fn step(&mut self, inputs: &[(PlayerId, CubeInput)]) {
        self.scene.step(inputs);
    }

    fn schema(setup: &CubeSetup) -> Schema {
        replicate::schema(&setup.config.quantize.unwrap_or_default())
    }

    fn capture(&self, server: &mut ReplicationServer) -> Result<(), ReplicationError> {
        replicate::capture(&self.scene, server)
    }

    fn player_entity(setup: &CubeSetup, player: PlayerId) -> Option<u32> {
        player_entity(setup.cubes, player)
    }

    fn player_position(&self, player: PlayerId) -> Option<[f32; 3]> {
        self.scene
            .player_state(player)
            .map(|s| s.position.to_array())
    }

    fn others(&self, out: &mut Vec<[f32; 3]>) {
        out.extend(self.scene.cubes().map(|(_, s, _)| s.position.to_array()));
    }

    fn raw(&self, out: &mut Vec<RawEntity>) {
        let n = self.scene.cube_count();
        for (i, s, awake) in self.scene.cubes() {
            out.push(RawEntity {
                id: i as u32,
                floats: floats(&s),
                flags: vec![awake],
            });
        }
        for (p, s) in self.scene.player_states() {
            if let Some(id) = player_entity(n, p) {
                out.push(RawEntity {
                    id,
                    floats: floats(&s),
                    flags: Vec::new(),
                });
            }
        }
    }

    fn plain(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let whole = CubeSnapshot::capture(&self.scene).to_bytes();
        let players = CubeSnapshot::capture_players(&self.scene).to_bytes();
        Some((whole, players))
    }

    fn known(setup: &CubeSetup, client: &ReplicationClient, tick: Tick) -> CubeSnapshot {
        replicate::snapshot(client, setup.cubes, tick)
    }

    fn is_whole(known: &CubeSnapshot) -> bool {
        known.has_world()
    }

    fn shown_ids(setup: &CubeSetup, own: PlayerId, players: PlayerId) -> Vec<u32> {
        (1..=players)
            .filter(|&p| p != own)
            .map(|p| player_entity(setup.cubes, p).unwrap_or(u32::MAX))
            .chain(0..setup.cubes as u32)
            .collect()
    }

    fn shown(_: &CubeSetup, known: &CubeSnapshot, own: PlayerId, players: PlayerId) -> Vec<Pose> {
        let missing = Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]);
        (1..=players)
            .filter(|&p| p != own)
            .map(|p| known.player(p).map_or(missing, pose))
            .chain(known.cubes.iter().map(|c| pose(&c.body_state())))
            .collect()
    }

    fn seen_in(known: &CubeSnapshot, player: PlayerId) -> Option<BodyState> {
        known.player(player).copied()
    }

    fn seen_pose(seen: &BodyState) -> Pose {
        pose(seen)
    }

    fn world(
        setup: &CubeSetup,
        player: PlayerId,
        config: &RunConfig,
        naive: bool,
    ) -> Option<CubeRollback> {
        if naive && config.predict.mode != PredictMode::PredictedSet {
            return None;
        }
        let predict = if naive {
            PredictConfig {
                mode: PredictMode::FullWorld,
                ..config.predict
            }
        } else {
            config.predict
        };
        Some(CubeRollback::new(player, setup.config, predict))
    }

    fn predicted(world: &CubeRollback) -> Option<BodyState> {
        world.player_state()
    }

    fn predicted_entities(world: &CubeRollback) -> usize {
        world.predicted_cubes()
    }

    fn script(
        config: &RunConfig,
        setup: &CubeSetup,
        seed: u64,
    ) -> Result<Box<dyn Script<Self>>, RunError> {
        let script = match &config.script {
            ScriptChoice::Named(name) => {
                script_by_name(name, seed, &setup.config).ok_or_else(|| {
                    RunError::UnknownScript(format!("{name} (known: {})", SCRIPT_NAMES.join(", ")))
                })?
            }
            ScriptChoice::Custom(f) => f(seed),
        };
        Ok(Box::new(Scripted(script)))
    }

    fn moves(input: &CubeInput) -> bool {
        input.moves()
    }

    fn input_from_keys(keys: Keys) -> Option<CubeInput> {
        Some(keys_input(keys))
    }

    fn predicted_positions(world: &CubeRollback, out: &mut Vec<[f32; 3]>) {
        let scene = world.world();
        out.extend(
            scene
                .present_cubes()
                .into_iter()
                .filter_map(|i| scene.cube_state(i))
                .map(|s| s.position.to_array()),
        );
    }

    fn observe(&mut self) {
        self.awake_max = self.awake_max.max(self.scene.awake_cube_count());
    }

    fn report(&self, r: &mut Report) {
        let moved = self
            .scene
            .cube_states()
            .iter()
            .zip(&self.start)
            .filter(|(now, start)| now.position.distance(start.position) > 0.5)
            .count();
        r.set("cubes.moved", Metric::Count(moved as u64));
        r.set("cubes.awake_max", Metric::Count(self.awake_max as u64));
    }
}
