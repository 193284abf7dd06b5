//! Client-side prediction for the cube scene: the [`Rollback`] the core's
//! [`Predictor`](lagless_core::Predictor) drives.
//!
//! The client predicts a *predicted set*, not the world: its own player plus the cubes it
//! may touch soon. Those are the cubes within `radius` of the segment the player sweeps
//! over `lookahead` at its current velocity (the Unity ball article and the Pixonic mobile
//! shooter article: predict what you interact with, show the rest from snapshots). They
//! live in a sparse [`CubeScene`] stepped by exactly the server's code, so a player that
//! touches nothing predicts bit for bit. Rolling back means loading the player and the set
//! from a snapshot and replaying a few cheap steps, rather than restoring 900 bodies.
//!
//! [`PredictMode::FullWorld`] is the naive baseline: the whole world is loaded from the
//! snapshot and replayed.

use super::snapshot::CubeSnapshot;
use super::{BodyState, CubeInput, CubeScene, CubeSceneConfig, PlayerId};
use glam::Vec3;
use lagless_core::{Rollback, Tick};

/// Which world prediction simulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PredictMode {
    /// The local player and the cubes near its path (default).
    #[default]
    PredictedSet,
    /// Every body (the naive baseline: correct, and far too slow to replay each frame).
    FullWorld,
}

/// How far a prediction may be from the server's state before it counts as wrong.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Squared position error of the player, m² (1e-7 in the Unity physics prediction
    /// article).
    pub player_position_sq: f32,
    /// `1 - |dot(q1, q2)|` of the player's rotation (1e-5 in the Unity physics prediction
    /// article).
    pub player_rotation: f32,
    /// Linear velocity error of the player, m/s; `None` ignores velocity (as the Unity physics
    /// prediction article does).
    pub player_linvel: Option<f32>,
    /// Squared position error of a predicted cube, m². Looser than the player's: cubes
    /// settle by fractions of a millimetre, which should not cost a rollback.
    pub cube_position_sq: f32,
    /// `1 - |dot|` rotation error of a predicted cube.
    pub cube_rotation: f32,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self {
            player_position_sq: 1e-7,
            player_rotation: 1e-5,
            player_linvel: None,
            cube_position_sq: 1e-4,
            cube_rotation: 1e-3,
        }
    }
}

/// Prediction settings for the cube scene.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictConfig {
    /// World to simulate.
    pub mode: PredictMode,
    /// Cubes whose centres lie within this distance (m) of the player's swept path are
    /// predicted.
    pub radius: f32,
    /// How far ahead (s) the path is swept at the player's velocity: about the deepest
    /// replay, so the cubes the player reaches before the next load are already in.
    pub lookahead: f32,
    /// At most this many cubes are predicted, the nearest to the path first. Each awake
    /// cube costs about as much per replayed tick as the player, so this bounds what a
    /// reconciliation can cost, however many cubes the player has scattered around it.
    pub max_cubes: usize,
    /// Mismatch tolerances.
    pub tolerances: Tolerances,
}

impl Default for PredictConfig {
    fn default() -> Self {
        Self {
            mode: PredictMode::PredictedSet,
            radius: 2.5,
            lookahead: 0.3,
            max_cubes: 8,
            tolerances: Tolerances::default(),
        }
    }
}

/// What the predictor remembers per tick.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictedState {
    /// The local player.
    pub player: BodyState,
    /// Predicted cubes: (grid index, state). Empty in full-world mode, where only the
    /// player is compared (as in the Pixonic mobile shooter article).
    pub cubes: Vec<(u32, BodyState)>,
}

/// The client's predicted world for the cube scene.
pub struct CubeRollback {
    player: PlayerId,
    config: PredictConfig,
    world: CubeScene,
}

impl CubeRollback {
    /// A predictor for `player` in a scene built from `scene` (which must equal the
    /// server's configuration).
    pub fn new(player: PlayerId, scene: CubeSceneConfig, config: PredictConfig) -> Self {
        let mut world = match config.mode {
            PredictMode::PredictedSet => CubeScene::new_sparse(scene),
            PredictMode::FullWorld => CubeScene::new(scene),
        };
        world.add_player(player);
        // A world that has never stepped keeps a little less collision state than one that
        // has, and its first step after a load differs from the server's in the last bits.
        // One step at the spawn pose (where the server's player starts too) removes that.
        world.step(&[]);
        Self {
            player,
            config,
            world,
        }
    }

    /// The predicted world (for rendering the player and the predicted cubes).
    pub fn world(&self) -> &CubeScene {
        &self.world
    }

    /// The predicted player's state now.
    pub fn player_state(&self) -> Option<BodyState> {
        self.world.player_state(self.player)
    }

    /// Number of cubes currently predicted.
    pub fn predicted_cubes(&self) -> usize {
        match self.config.mode {
            PredictMode::PredictedSet => self.world.present_cubes().len(),
            PredictMode::FullWorld => self.world.cube_count(),
        }
    }

    /// Squared distance from `position` to the path the player sweeps over the lookahead.
    fn path_distance_sq(&self, player: &BodyState, position: Vec3) -> f32 {
        let start = player.position;
        let sweep = player.linvel * self.config.lookahead;
        let len_sq = sweep.length_squared();
        let t = if len_sq > 0.0 {
            ((position - start).dot(sweep) / len_sq).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (start + sweep * t).distance_squared(position)
    }

    /// Whether a cube at `position` is close enough to the player's path to predict.
    fn wanted(&self, player: &BodyState, position: Vec3) -> bool {
        self.path_distance_sq(player, position) <= self.config.radius * self.config.radius
    }

    /// Room for another predicted cube.
    fn has_room(&self) -> bool {
        self.world.present_cubes().len() < self.config.max_cubes
    }

    fn player_diverged(&self, p: &BodyState, s: &BodyState) -> bool {
        let tol = &self.config.tolerances;
        p.position.distance_squared(s.position) > tol.player_position_sq
            || 1.0 - p.rotation.dot(s.rotation).abs() > tol.player_rotation
            || tol
                .player_linvel
                .is_some_and(|v| p.linvel.distance(s.linvel) > v)
    }
}

impl Rollback for CubeRollback {
    type Input = CubeInput;
    type Saved = PredictedState;
    type Confirmed = CubeSnapshot;

    fn advance(&mut self, _tick: Tick, input: CubeInput) {
        self.world.step(&[(self.player, input)]);
    }

    fn save(&self) -> PredictedState {
        let player = self.world.player_state(self.player).unwrap_or_default();
        let cubes = match self.config.mode {
            PredictMode::PredictedSet => self
                .world
                .present_cubes()
                .iter()
                .filter_map(|&i| self.world.cube_state(i).map(|s| (i as u32, s)))
                .collect(),
            PredictMode::FullWorld => Vec::new(),
        };
        PredictedState { player, cubes }
    }

    fn diverged(&self, predicted: &PredictedState, snapshot: &CubeSnapshot) -> bool {
        let Some(server) = snapshot.player(self.player) else {
            return false; // not spawned yet on the server: nothing to correct
        };
        if self.player_diverged(&predicted.player, server) {
            return true;
        }
        if !snapshot.has_world() {
            return false; // players only: nothing to say about the cubes
        }
        let tol = &self.config.tolerances;
        let cube_wrong = predicted.cubes.iter().any(|(i, p)| {
            snapshot.cubes.get(*i as usize).is_none_or(|s| {
                p.position.distance_squared(s.position) > tol.cube_position_sq
                    || 1.0 - p.rotation.dot(s.rotation).abs() > tol.cube_rotation
            })
        });
        if cube_wrong {
            return true;
        }
        // A moving cube that reached the player's path must be simulated from the right
        // tick: that needs a reload and replay. Sleeping ones are adopted in `confirmed`.
        self.config.mode == PredictMode::PredictedSet
            && self.has_room()
            && snapshot
                .cubes
                .iter()
                .enumerate()
                .any(|(i, c)| c.awake && !self.world.has_cube(i) && self.wanted(server, c.position))
    }

    fn load(&mut self, snapshot: &CubeSnapshot, predicted: Option<&PredictedState>) {
        let Some(server) = snapshot.player(self.player).copied() else {
            return;
        };
        self.world.set_player_state(self.player, &server);
        if !snapshot.has_world() {
            // Players only: the cubes go back to what we predicted for that tick, so the
            // replay starts from one consistent moment; the next full snapshot corrects them.
            if let Some(p) = predicted {
                for (i, s) in &p.cubes {
                    self.world.set_cube_state(*i as usize, s, true);
                }
            }
            return;
        }
        match self.config.mode {
            PredictMode::FullWorld => {
                // A cube the client has not received yet (NaN) keeps its predicted state.
                for (i, c) in snapshot.cubes.iter().enumerate() {
                    if c.body_state().is_finite() {
                        self.world.set_cube_state(i, &c.body_state(), c.awake);
                    }
                }
            }
            PredictMode::PredictedSet => {
                let radius_sq = self.config.radius * self.config.radius;
                let mut near: Vec<(f32, usize)> = snapshot
                    .cubes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (self.path_distance_sq(&server, c.position), i))
                    .filter(|(d, _)| *d <= radius_sq)
                    .collect();
                near.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                near.truncate(self.config.max_cubes);
                let keep: std::collections::BTreeSet<usize> =
                    near.iter().map(|&(_, i)| i).collect();
                for i in self.world.present_cubes().to_vec() {
                    if !keep.contains(&i) {
                        self.world.remove_cube(i);
                    }
                }
                for &i in &keep {
                    // Inserted awake even when the server's cube sleeps: a body inserted
                    // asleep is woken by its first contact and sinks a little, while an
                    // awake one at rest settles by < 0.1 mm.
                    self.world
                        .insert_cube(i, &snapshot.cubes[i].body_state(), true);
                }
            }
        }
    }

    fn confirmed(&mut self, snapshot: &CubeSnapshot) {
        if self.config.mode != PredictMode::PredictedSet {
            return;
        }
        let Some(player) = self.world.player_state(self.player) else {
            return;
        };
        // Sleeping cubes do not move until touched, so their snapshot pose is their pose
        // now: add those the player is heading for without a rollback.
        for (i, c) in snapshot.cubes.iter().enumerate() {
            if !c.awake
                && !self.world.has_cube(i)
                && self.wanted(&player, c.position)
                && self.has_room()
            {
                self.world.insert_cube(i, &c.body_state(), true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::{PredictionConfig, Predictor, Reconciled};

    #[test]
    fn predicted_set_follows_the_player() {
        let scene = CubeSceneConfig::default();
        let mut server = CubeScene::new(scene);
        server.add_player(0);
        for _ in 0..40 {
            server.step(&[(0, CubeInput::FORWARD)]);
        }
        let mut game = CubeRollback::new(0, scene, PredictConfig::default());
        let mut p = Predictor::<CubeRollback>::new(PredictionConfig::default());
        let snap = CubeSnapshot::capture(&server);
        assert_eq!(
            p.reconcile(&mut game, Tick(0), &snap, &|_| None),
            Reconciled::LoadedAhead
        );
        // Player 0 drove into the grid from the +Z edge: a few cubes are near it, not 900.
        let n = game.predicted_cubes();
        assert!((1..60).contains(&n), "{n}");
        let full = CubeRollback::new(
            0,
            scene,
            PredictConfig {
                mode: PredictMode::FullWorld,
                ..PredictConfig::default()
            },
        );
        assert_eq!(full.predicted_cubes(), 900);
    }
}
