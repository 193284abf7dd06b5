//! What is replicated (players, projectiles), what a client knows, and the counters.

use super::PlayerId;

/// A player as replicated (and as the client predicts its own).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlayerState {
    /// Position, m.
    pub position: [f32; 2],
    /// Velocity, m/s.
    pub velocity: [f32; 2],
    /// Aim, radians.
    pub aim: f32,
    /// Health.
    pub health: i32,
    /// Alive (dead players wait for their respawn).
    pub alive: bool,
    /// The tick it comes back at, if dead (the last one, if alive).
    pub respawn_at: u32,
    /// Deaths so far, modulo 256 (where it comes back depends on it).
    pub deaths: u32,
}

/// A projectile as replicated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProjectileState {
    /// Its server id.
    pub id: u32,
    /// The shooter's client slot.
    pub owner: u32,
    /// The tick of the input that fired it.
    pub spawn_tick: u32,
    /// Position, m.
    pub position: [f32; 2],
    /// Velocity, m/s.
    pub velocity: [f32; 2],
}

/// What a client knows of the server's world at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShooterKnown {
    /// The tick.
    pub tick: u32,
    /// Players by id.
    pub players: Vec<(PlayerId, PlayerState)>,
    /// Projectiles.
    pub projectiles: Vec<ProjectileState>,
}

impl ShooterKnown {
    /// Player `p`, if known.
    pub fn player(&self, p: PlayerId) -> Option<&PlayerState> {
        self.players.iter().find(|(q, _)| *q == p).map(|(_, s)| s)
    }
}

/// The client slot of player `p` (its [`IdSpace`](lagless_replication::spawns::IdSpace) range).
pub fn slot_of(p: PlayerId) -> u32 {
    p.saturating_sub(1)
}

/// Counters of one player's shooting, kept by the server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlayerCounters {
    /// Rifle shots fired (accepted).
    pub rifle_shots: u64,
    /// Rifle hits the server counted.
    pub rifle_hits: u64,
    /// Rifle shots whose claimed view was moved into the window.
    pub clamped: u64,
    /// How far back each rifle shot was tested, ms.
    pub rewind_ms: Vec<f64>,
    /// How far back each rifle shot's claimed view lay, ms, before clamping.
    pub claimed_ms: Vec<f64>,
    /// Each rifle shot's rewind beyond the player's allowance, ms (the part the server's
    /// measurements do not explain; at most the window).
    pub excess_ms: Vec<f64>,
    /// The allowance each rifle shot was given, ms (0 with the absolute window).
    pub allowance_ms: Vec<f64>,
    /// How late each late rifle shot was fired after its own tick, ms
    /// ([`super::ShooterScene::late_inputs`]).
    pub late_ms: Vec<f64>,
    /// Projectiles fired (accepted).
    pub projectiles: u64,
    /// Projectile hits.
    pub projectile_hits: u64,
    /// Deaths.
    pub deaths: u32,
}

/// What the server refused from inputs, and other server counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCounters {
    /// Inputs whose aim was NaN, infinite or zero (the aim kept, the shot dropped).
    pub refused_aim: u64,
    /// Shots faster than the weapon's rate.
    pub refused_rate: u64,
    /// Launcher claims with an id outside the client's range.
    pub refused_spawn_id: u64,
    /// Claims whose tick lay outside the guard's window.
    pub refused_tick: u64,
    /// Inputs from a player the scene does not have.
    pub unknown_player: u64,
    /// Kills.
    pub kills: u64,
    /// Rifle shots that met a target in the rewound world which had died since
    /// (misses: the dead take no damage).
    pub dead_target_shots: u64,
    /// Shots from players dead on the server whose clients did not know it yet
    /// (answered with a miss; a launch from the dead spawns nothing and its predicted
    /// projectile is orphaned).
    pub dead_shooter_shots: u64,
    /// Rifle shots fired after their tick, their input having come late
    /// ([`super::ShooterScene::late_inputs`]).
    pub late_shots: u64,
}
