//! The walker scene (`lagless_scenes::walkers`) in the lab: one predicted
//! character per client and `--walkers N` scripted walkers the server simulates, shown
//! to clients by dead reckoning or, for the comparison, through ordinary snapshots and
//! the interpolation buffer (`--walker-sync`).
//!
//! The walkers are the server's own characters, NPC-like: the server is their
//! dead-reckoning sender, with no lag at the source (`CharacterState::new`). The players
//! are predicted by their owners as in every scene and reach the other clients through
//! snapshots in both modes, so the two modes differ in the walkers alone.

use crate::config::{RunConfig, ScriptChoice, WalkerSync};
use crate::metrics::{Metric, Report};
use crate::runner::RunError;
use crate::scene::{LabScene, PlayerId, RawEntity, Script};
use lagless_core::Tick;
use lagless_core::interpolation::Pose;
use lagless_replication::deadreckoning::{CharacterState, DrConfig, ReceiverConfig};
use lagless_replication::{ReplicationClient, ReplicationError, ReplicationServer, Schema};
use lagless_scenes::cubes::CubeInput;
use lagless_scenes::walkers::replicate::{self, player_entity};
use lagless_scenes::walkers::{
    Level, PlayerScript, PlayerState, WalkerConfig, WalkerRollback, WalkerScene, WalkersKnown,
};
use std::sync::Arc;

/// Most walkers a run may have (`--walkers`).
pub const MAX_WALKERS: u32 = 10_000;

/// The walker scene, and how its walkers reach clients.
pub struct Walkers {
    /// The scene itself.
    pub scene: WalkerScene,
    sync: WalkerSync,
}

/// What both ends know before the run: the level (shared, static), its settings, and how
/// walkers travel.
#[derive(Clone)]
pub struct WalkerSetup {
    config: WalkerConfig,
    level: Arc<Level>,
    dead_reckoning: Option<DrConfig>,
}

/// The scripted player as the lab's [`Script`].
pub struct WalkerScripted(pub PlayerScript);

impl Script<Walkers> for WalkerScripted {
    fn input(&mut self, tick: u64, seen: Option<&PlayerState>) -> CubeInput {
        self.0.input(tick, seen)
    }
}

fn yaw(heading: f32) -> [f32; 4] {
    let (s, c) = (heading * 0.5).sin_cos();
    [0.0, s, 0.0, c]
}

fn player_pose(s: &PlayerState) -> Pose {
    Pose::new(s.position, [0.0, 0.0, 0.0, 1.0])
        .with_velocity([s.velocity[0], 0.0, s.velocity[1]], [0.0; 3])
}

impl LabScene for Walkers {
    type Input = CubeInput;
    type Known = WalkersKnown;
    type World = WalkerRollback;
    type Setup = WalkerSetup;
    type Seen = PlayerState;

    fn build(config: &RunConfig) -> Result<(Self, WalkerSetup), RunError> {
        let settings = config.walkers;
        if settings.count > MAX_WALKERS {
            return Err(RunError::Invalid(format!(
                "walkers must be 0..={MAX_WALKERS}, got {}",
                settings.count
            )));
        }
        let scene_config = WalkerConfig {
            tick_hz: config.server.tick_hz,
            walkers: settings.count,
            seed: config.seed,
            ..WalkerConfig::default()
        };
        let scene = WalkerScene::new(scene_config);
        let dead_reckoning = (settings.sync == WalkerSync::DeadReckoning).then(|| DrConfig {
            receiver: ReceiverConfig {
                steering: settings.steering,
                steer_time: settings.steer_time,
                ..ReceiverConfig::default()
            },
            budget_share: settings.budget_share,
            ..DrConfig::default()
        });
        let setup = WalkerSetup {
            config: scene_config,
            level: Arc::clone(scene.level()),
            dead_reckoning,
        };
        Ok((
            Self {
                scene,
                sync: settings.sync,
            },
            setup,
        ))
    }

    fn add_player(&mut self, player: PlayerId) {
        self.scene.add_player(player);
    }

    fn step(&mut self, inputs: &[(PlayerId, CubeInput)]) {
        self.scene.step(inputs);
    }

    fn schema(_: &WalkerSetup) -> Schema {
        replicate::schema()
    }

    fn capture(&self, server: &mut ReplicationServer) -> Result<(), ReplicationError> {
        replicate::capture(&self.scene, server, self.sync == WalkerSync::Interpolation)
    }

    fn player_entity(setup: &WalkerSetup, player: PlayerId) -> Option<u32> {
        player_entity(setup.config.walkers, player)
    }

    fn player_position(&self, player: PlayerId) -> Option<[f32; 3]> {
        self.scene.player(player).map(|s| s.position)
    }

    fn others(&self, out: &mut Vec<[f32; 3]>) {
        // Interpolated walkers are the interpolation buffer's like any entity; dead-
        // reckoned ones are not in it, and are measured by `deadreckoning.*` alone.
        if self.sync == WalkerSync::Interpolation {
            out.extend(self.scene.walkers().map(|w| w.position));
        }
    }

    fn raw(&self, out: &mut Vec<RawEntity>) {
        for (i, w) in self.scene.walkers().enumerate() {
            let mut floats = w.position.to_vec();
            floats.extend([w.heading, w.speed]);
            out.push(RawEntity {
                id: i as u32,
                floats,
                flags: Vec::new(),
            });
        }
        let n = self.scene.config().walkers;
        for (p, s) in self.scene.players() {
            if let Some(id) = player_entity(n, p) {
                let mut floats = s.position.to_vec();
                floats.extend(s.velocity);
                out.push(RawEntity {
                    id,
                    floats,
                    flags: Vec::new(),
                });
            }
        }
    }

    fn known(setup: &WalkerSetup, client: &ReplicationClient, tick: Tick) -> WalkersKnown {
        replicate::known(client, setup.config.walkers, tick)
    }

    fn is_whole(_: &WalkersKnown) -> bool {
        true
    }

    fn shown_ids(setup: &WalkerSetup, own: PlayerId, players: PlayerId) -> Vec<u32> {
        let walkers = setup.config.walkers;
        let others = (1..=players)
            .filter(|&p| p != own)
            .map(|p| player_entity(walkers, p).unwrap_or(u32::MAX));
        if setup.dead_reckoning.is_some() {
            return others.collect();
        }
        others.chain(0..walkers).collect()
    }

    fn shown(
        setup: &WalkerSetup,
        known: &WalkersKnown,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<Pose> {
        let missing = Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]);
        let players = (1..=players)
            .filter(|&p| p != own)
            .map(|p| known.player(p).map_or(missing, player_pose));
        if setup.dead_reckoning.is_some() {
            return players.collect();
        }
        players
            .chain(
                known
                    .walkers
                    .iter()
                    .map(|(p, heading)| Pose::new(*p, yaw(*heading))),
            )
            .collect()
    }

    fn seen_in(known: &WalkersKnown, player: PlayerId) -> Option<PlayerState> {
        known.player(player).copied()
    }

    fn seen_pose(seen: &PlayerState) -> Pose {
        player_pose(seen)
    }

    fn world(
        setup: &WalkerSetup,
        player: PlayerId,
        config: &RunConfig,
        naive: bool,
    ) -> Option<WalkerRollback> {
        // The predicted world is the own player alone: there is no bigger naive one.
        (!naive)
            .then(|| WalkerRollback::new(Arc::clone(&setup.level), player, config.server.tick_hz))
    }

    fn predicted(world: &WalkerRollback) -> Option<PlayerState> {
        world.player_state()
    }

    fn predicted_entities(_: &WalkerRollback) -> usize {
        0
    }

    fn script(
        config: &RunConfig,
        setup: &WalkerSetup,
        seed: u64,
    ) -> Result<Box<dyn Script<Self>>, RunError> {
        match &config.script {
            ScriptChoice::Named(name) if name == "roam" => {}
            ScriptChoice::Named(name) => {
                return Err(RunError::UnknownScript(format!("{name} (known: roam)")));
            }
            ScriptChoice::Custom(_) => {
                return Err(RunError::UnknownScript(
                    "custom scripts drive cubes; the walker scene has roam".into(),
                ));
            }
        }
        let range = setup.config.half_size * 0.5;
        Ok(Box::new(WalkerScripted(PlayerScript::new(
            seed,
            setup.config.tick_hz,
            range,
        ))))
    }

    fn moves(input: &CubeInput) -> bool {
        input.moves()
    }

    fn obstacles(&self, out: &mut Vec<([f32; 2], [f32; 2])>) {
        out.extend(
            self.scene
                .level()
                .obstacles()
                .iter()
                .map(|o| (o.centre, o.half)),
        );
    }

    fn input_from_keys(keys: crate::scene::Keys) -> Option<CubeInput> {
        Some(super::cubes::keys_input(keys))
    }

    fn report(&self, r: &mut Report) {
        r.set(
            "walkers.count",
            Metric::Count(self.scene.walkers().count() as u64),
        );
        r.set(
            "walkers.sync",
            Metric::Text(
                match self.sync {
                    WalkerSync::DeadReckoning => "deadreckoning",
                    WalkerSync::Interpolation => "interpolation",
                }
                .into(),
            ),
        );
    }

    fn characters(&self, out: &mut Vec<(u32, CharacterState)>) {
        out.extend(
            self.scene
                .walkers()
                .enumerate()
                .map(|(i, w)| (i as u32, w.character())),
        );
    }

    fn dead_reckoning(setup: &WalkerSetup) -> Option<DrConfig> {
        setup.dead_reckoning
    }

    fn character_slot(setup: &WalkerSetup, players: PlayerId) -> Option<usize> {
        // Interpolated: after the other players in `shown`.
        setup
            .dead_reckoning
            .is_none()
            .then(|| players.saturating_sub(1) as usize)
    }
}
