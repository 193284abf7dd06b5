//! Walking characters (for dead reckoning): an open level with box obstacles, one character per
//! player and any number of scripted walkers that roam, stop, turn, run and idle the way
//! players do, all moved by rapier's kinematic character controller.
//!
//! The walkers are the server's own characters (NPC-like): the server simulates them, so
//! the state it sends is the truth with no lag at the source, and they can be shown to
//! clients either by dead reckoning ([`character`] gives their
//! `CharacterState`) or through
//! ordinary snapshots ([`replicate`]). Players are predicted by their own client
//! ([`WalkerRollback`]) and reach the others through snapshots.
//!
//! Players pass through walkers and through each other; only the obstacles stop them.
//! That keeps a client's prediction of its own player exact (it never needs the other
//! characters' positions, which it only knows late), which is what the lab measures
//! here: how the *remote* characters look.
//!
//! ```
//! use lagless_scenes::walkers::{WalkerConfig, WalkerScene};
//! use lagless_scenes::cubes::CubeInput;
//!
//! let mut scene = WalkerScene::new(WalkerConfig { walkers: 20, ..WalkerConfig::default() });
//! scene.add_player(1);
//! for _ in 0..64 {
//!     scene.step(&[(1, CubeInput::FORWARD)]);
//! }
//! assert!(scene.player(1).unwrap().position[2] < -1.0, "W walks toward -Z");
//! assert_eq!(scene.walkers().count(), 20);
//! ```

mod level;
pub mod replicate;
mod script;

pub use level::{CENTRE_HEIGHT, Level, Obstacle, RADIUS};
pub use script::PlayerScript;

use crate::cubes::CubeInput;
use lagless_core::{Rollback, Tick};
use lagless_replication::deadreckoning::CharacterState;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::f32::consts::{PI, TAU};
use std::sync::Arc;

pub use crate::PlayerId;

/// A walker's walking speed, m/s.
pub const WALK_SPEED: f32 = 1.4;
/// A walker's running speed, m/s.
pub const RUN_SPEED: f32 = 4.5;
/// A player's top speed, m/s.
pub const PLAYER_SPEED: f32 = 4.0;
/// How fast speeds change, m/s² (characters accelerate, they do not jump to speed).
pub const ACCELERATION: f32 = 8.0;
/// A player's acceleration, m/s² (snappier than a walker's, as player controls are).
pub const PLAYER_ACCELERATION: f32 = 20.0;
/// How fast a walker turns, rad/s.
pub const TURN_RATE: f32 = 3.0;

/// How the scene is built. Both ends build the same level from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WalkerConfig {
    /// Simulation rate, Hz.
    pub tick_hz: u32,
    /// Scripted walkers.
    pub walkers: u32,
    /// Box obstacles on the level.
    pub obstacles: u32,
    /// Half the side of the square level, m.
    pub half_size: f32,
    /// Seeds the level and the walkers' behaviour.
    pub seed: u64,
}

impl Default for WalkerConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            walkers: 200,
            obstacles: 120,
            half_size: 100.0,
            seed: 1,
        }
    }
}

/// A player's state: what prediction keeps and snapshots carry.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlayerState {
    /// Centre, m.
    pub position: [f32; 3],
    /// Horizontal velocity (x, z), m/s.
    pub velocity: [f32; 2],
}

/// What a walker is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mood {
    Idle,
    Walk,
    Run,
}

/// One scripted walker: its true motion and its plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Walker {
    /// Centre, m.
    pub position: [f32; 3],
    /// Yaw (0 is +Z, π/2 is +X, as [`DrMessage`](lagless_replication::deadreckoning::DrMessage) has it).
    pub heading: f32,
    /// Speed actually made good over the last tick, m/s.
    pub speed: f32,
    /// The heading of the motion actually made over the last tick (sliding along a
    /// wall moves it away from `heading`).
    pub motion_heading: f32,
    wanted_speed: f32,
    wanted_heading: f32,
    mood: Mood,
    /// Seconds until the next decision.
    timer: f32,
    /// The last tick made less than half the way it tried to (an obstacle).
    blocked: bool,
}

impl Walker {
    /// The walker as dead reckoning sends it: where it is, which way it moves and how
    /// fast, with no source lag (the server simulates it).
    pub fn character(&self) -> CharacterState {
        let heading = if self.speed > 0.05 {
            self.motion_heading
        } else {
            self.heading
        };
        CharacterState::new(self.position, heading.rem_euclid(TAU), self.speed)
    }
}

/// Character `w`'s dead-reckoning state.
pub fn character(w: &Walker) -> CharacterState {
    w.character()
}

/// The turn from `from` to `to`, in `(-π, π]`.
fn turn(from: f32, to: f32) -> f32 {
    let d = (to - from).rem_euclid(TAU);
    if d > PI { d - TAU } else { d }
}

fn approach(value: f32, target: f32, step: f32) -> f32 {
    value + (target - value).clamp(-step, step)
}

/// The server's world: level, players, walkers.
pub struct WalkerScene {
    config: WalkerConfig,
    level: Arc<Level>,
    walkers: Vec<Walker>,
    players: BTreeMap<PlayerId, PlayerState>,
    rng: ChaCha8Rng,
}

impl WalkerScene {
    /// Builds the level and places the walkers (idle, on free ground).
    pub fn new(config: WalkerConfig) -> Self {
        let level = Arc::new(Level::new(config.half_size, config.obstacles, config.seed));
        Self::with_level(config, level)
    }

    /// The scene on a level already built from `config` (both ends share it).
    pub fn with_level(config: WalkerConfig, level: Arc<Level>) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x3a1c3e5);
        let edge = config.half_size * 0.9;
        let mut walkers = Vec::with_capacity(config.walkers as usize);
        while walkers.len() < config.walkers as usize {
            let (x, z) = (rng.random_range(-edge..edge), rng.random_range(-edge..edge));
            if level.blocked(x, z) {
                continue;
            }
            let heading = rng.random_range(0.0..TAU);
            walkers.push(Walker {
                position: [x, CENTRE_HEIGHT, z],
                heading,
                speed: 0.0,
                motion_heading: heading,
                wanted_speed: 0.0,
                wanted_heading: heading,
                mood: Mood::Idle,
                timer: rng.random_range(0.0..3.0),
                blocked: false,
            });
        }
        Self {
            config,
            level,
            walkers,
            players: BTreeMap::new(),
            rng,
        }
    }

    /// The settings.
    pub fn config(&self) -> &WalkerConfig {
        &self.config
    }

    /// The level (shared with clients' predicted worlds).
    pub fn level(&self) -> &Arc<Level> {
        &self.level
    }

    /// Adds player `player` at its spawn point near the centre.
    pub fn add_player(&mut self, player: PlayerId) {
        self.players.insert(
            player,
            PlayerState {
                position: spawn_point(player),
                velocity: [0.0; 2],
            },
        );
    }

    /// Player `player`'s state.
    pub fn player(&self, player: PlayerId) -> Option<PlayerState> {
        self.players.get(&player).copied()
    }

    /// Every player, ascending id.
    pub fn players(&self) -> impl Iterator<Item = (PlayerId, PlayerState)> + '_ {
        self.players.iter().map(|(&p, &s)| (p, s))
    }

    /// Every walker, in id order (walker `i` is entity `i`).
    pub fn walkers(&self) -> impl Iterator<Item = &Walker> + '_ {
        self.walkers.iter()
    }

    /// One tick: players move by their inputs, walkers by their scripts.
    pub fn step(&mut self, inputs: &[(PlayerId, CubeInput)]) {
        let dt = 1.0 / self.config.tick_hz.max(1) as f32;
        for (id, state) in &mut self.players {
            let input = inputs
                .iter()
                .filter(|(who, _)| who == id)
                .fold(CubeInput::NONE, |acc, (_, i)| acc.with(*i));
            *state = move_player(&self.level, *state, input, dt);
        }
        for w in &mut self.walkers {
            think(w, &mut self.rng, dt, self.config.half_size);
            walk(w, &self.level, dt);
        }
    }
}

/// Player `player`'s spawn point: on a ring of 3 m around the centre, clear of obstacles.
pub fn spawn_point(player: PlayerId) -> [f32; 3] {
    let a = player as f32 * 2.399_963; // the golden angle spreads them out
    [3.0 * a.sin(), CENTRE_HEIGHT, 3.0 * a.cos()]
}

/// A player's tick: WASD sets the wanted velocity (W toward -Z, D toward +X, as in the
/// cube scene), the velocity approaches it at [`PLAYER_ACCELERATION`], and the character
/// controller moves it. The velocity kept is the motion actually made, so walls stop it.
pub fn move_player(level: &Level, s: PlayerState, input: CubeInput, dt: f32) -> PlayerState {
    let mut dir = [0.0f32; 2];
    if input.contains(CubeInput::FORWARD) {
        dir[1] -= 1.0;
    }
    if input.contains(CubeInput::BACK) {
        dir[1] += 1.0;
    }
    if input.contains(CubeInput::LEFT) {
        dir[0] -= 1.0;
    }
    if input.contains(CubeInput::RIGHT) {
        dir[0] += 1.0;
    }
    let len = dir[0].hypot(dir[1]);
    let target = if len > 0.0 {
        [dir[0] / len * PLAYER_SPEED, dir[1] / len * PLAYER_SPEED]
    } else {
        [0.0; 2]
    };
    let step = PLAYER_ACCELERATION * dt;
    let v = [0, 1].map(|i| approach(s.velocity[i], target[i], step));
    let position = level.move_character(s.position, [v[0] * dt, v[1] * dt], dt);
    let made = [
        (position[0] - s.position[0]) / dt,
        (position[2] - s.position[2]) / dt,
    ];
    PlayerState {
        position,
        velocity: made,
    }
}

/// A walker's decisions: idle a while, walk somewhere, break into a run, turn now and
/// then, turn away from walls it is stuck on and from the level's edge.
fn think(w: &mut Walker, rng: &mut ChaCha8Rng, dt: f32, half_size: f32) {
    w.timer -= dt;
    if w.timer <= 0.0 {
        let r: f32 = rng.random();
        (w.mood, w.timer) = match r {
            _ if r < 0.3 => (Mood::Idle, rng.random_range(1.0..4.0)),
            _ if r < 0.75 => (Mood::Walk, rng.random_range(2.0..6.0)),
            _ => (Mood::Run, rng.random_range(1.0..4.0)),
        };
        w.wanted_heading += rng.random_range(-1.6..1.6);
    } else if w.mood != Mood::Idle && rng.random::<f32>() < 0.3 * dt {
        w.wanted_heading += rng.random_range(-1.0..1.0);
    }
    w.wanted_speed = match w.mood {
        Mood::Idle => 0.0,
        Mood::Walk => WALK_SPEED,
        Mood::Run => RUN_SPEED,
    };
    let [x, _, z] = w.position;
    if x.abs().max(z.abs()) > half_size * 0.9 {
        w.wanted_heading = (-x).atan2(-z); // back towards the middle
    } else if w.blocked && (w.wanted_heading - w.heading).abs() < 0.1 {
        // Stopped or slowed by an obstacle (and not already turning): turn away from it.
        w.wanted_heading += if rng.random::<bool>() { 1.2 } else { -1.2 };
    }
    w.wanted_heading = w.wanted_heading.rem_euclid(TAU);
}

/// A walker's motion: speed and heading approach what it wants, then the character
/// controller moves it.
fn walk(w: &mut Walker, level: &Level, dt: f32) {
    let d = turn(w.heading, w.wanted_heading);
    w.heading = (w.heading + d.clamp(-TURN_RATE * dt, TURN_RATE * dt)).rem_euclid(TAU);
    let speed = approach(w.speed.max(0.0), w.wanted_speed, ACCELERATION * dt);
    if speed <= 0.0 {
        w.speed = 0.0;
        w.motion_heading = w.heading;
        w.blocked = false;
        return;
    }
    let (s, c) = w.heading.sin_cos();
    let before = w.position;
    w.position = level.move_character(before, [s * speed * dt, c * speed * dt], dt);
    let (dx, dz) = (w.position[0] - before[0], w.position[2] - before[2]);
    let made = dx.hypot(dz) / dt;
    w.blocked = made < 0.5 * speed;
    // Blocked head-on the controller makes (almost) no progress: the walker stands.
    w.speed = if made < 0.02 { 0.0 } else { made.min(speed) };
    w.motion_heading = if made < 0.02 {
        w.heading
    } else {
        dx.atan2(dz).rem_euclid(TAU)
    };
}

/// What a client knows of the server's world at one tick, decoded from a snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WalkersKnown {
    /// Every player it has.
    pub players: Vec<(PlayerId, PlayerState)>,
    /// Every walker's position and heading, in id order; NaN position when it has none
    /// (not received yet, or sent by dead reckoning instead).
    pub walkers: Vec<([f32; 3], f32)>,
}

impl WalkersKnown {
    /// Player `player`.
    pub fn player(&self, player: PlayerId) -> Option<&PlayerState> {
        self.players
            .iter()
            .find(|(p, _)| *p == player)
            .map(|(_, s)| s)
    }
}

/// A client's predicted world: its own player on the level, moved exactly as the server
/// moves it (the same controller on the same level), so prediction only ever corrects
/// for quantization and for inputs the server did not get in time.
pub struct WalkerRollback {
    level: Arc<Level>,
    player: PlayerId,
    state: Option<PlayerState>,
    dt: f32,
    /// Largest distance between predicted and confirmed positions that is not a
    /// misprediction, m: above the snapshot grid's rounding.
    pub tolerance: f32,
}

impl WalkerRollback {
    /// The predicted world of `player` on `level`, at `tick_hz`.
    pub fn new(level: Arc<Level>, player: PlayerId, tick_hz: u32) -> Self {
        Self {
            level,
            player,
            state: None,
            dt: 1.0 / tick_hz.max(1) as f32,
            tolerance: 0.01,
        }
    }

    /// The predicted player (`None` before the first server state).
    pub fn player_state(&self) -> Option<PlayerState> {
        self.state
    }
}

impl Rollback for WalkerRollback {
    type Input = CubeInput;
    type Saved = Option<PlayerState>;
    type Confirmed = WalkersKnown;

    fn advance(&mut self, _tick: Tick, input: CubeInput) {
        if let Some(s) = self.state {
            self.state = Some(move_player(&self.level, s, input, self.dt));
        }
    }

    fn save(&self) -> Option<PlayerState> {
        self.state
    }

    fn diverged(&self, predicted: &Option<PlayerState>, confirmed: &WalkersKnown) -> bool {
        let Some(c) = confirmed.player(self.player) else {
            return false;
        };
        let Some(p) = predicted else {
            return true;
        };
        let d = (0..3)
            .map(|i| (p.position[i] - c.position[i]).powi(2))
            .sum::<f32>()
            .sqrt();
        d > self.tolerance
    }

    fn load(&mut self, confirmed: &WalkersKnown, predicted: Option<&Option<PlayerState>>) {
        self.state = confirmed
            .player(self.player)
            .copied()
            .or(predicted.copied().flatten());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walkers_roam_stop_and_run_and_stay_out_of_obstacles() {
        let mut scene = WalkerScene::new(WalkerConfig {
            walkers: 50,
            ..WalkerConfig::default()
        });
        let (mut idle, mut run, mut moved) = (0, 0, 0);
        let start: Vec<[f32; 3]> = scene.walkers().map(|w| w.position).collect();
        for _ in 0..64 * 20 {
            scene.step(&[]);
            for w in scene.walkers() {
                idle += usize::from(w.speed == 0.0);
                run += usize::from(w.speed > 3.0);
                assert!(w.position.iter().all(|v| v.is_finite()));
                assert!(w.speed <= RUN_SPEED + 1e-3);
            }
        }
        for (w, s) in scene.walkers().zip(&start) {
            moved += usize::from((w.position[0] - s[0]).hypot(w.position[2] - s[2]) > 5.0);
            // The controller keeps a small gap; allow a centimetre of slack.
            let slack = scene.level().obstacles().iter().any(|o| {
                (w.position[0] - o.centre[0]).abs() < o.half[0] + RADIUS - 0.05
                    && (w.position[2] - o.centre[1]).abs() < o.half[1] + RADIUS - 0.05
            });
            assert!(!slack, "a walker went into an obstacle at {:?}", w.position);
        }
        assert!(idle > 0 && run > 0, "idle {idle} run {run}");
        assert!(moved > 25, "only {moved} of 50 walkers went anywhere");
    }

    #[test]
    fn prediction_moves_the_player_exactly_as_the_server_does() {
        let config = WalkerConfig {
            walkers: 0,
            ..WalkerConfig::default()
        };
        let mut scene = WalkerScene::new(config);
        scene.add_player(1);
        let mut world = WalkerRollback::new(Arc::clone(scene.level()), 1, config.tick_hz);
        let known = WalkersKnown {
            players: vec![(1, scene.player(1).unwrap())],
            walkers: Vec::new(),
        };
        world.load(&known, None);
        let keys = [CubeInput::FORWARD, CubeInput::RIGHT, CubeInput::NONE];
        for t in 0..64 * 30 {
            let input = keys[(t / 200) % 3];
            scene.step(&[(1, input)]);
            world.advance(Tick(t as u32), input);
        }
        assert_eq!(world.player_state(), scene.player(1));
    }
}
