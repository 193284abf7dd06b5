//! A top-down 2D shooter on rapier2d and an ECS (hecs), after the Pixonic shooter
//! article: the same systems run on the client and the server, the client predicts its
//! own player and what it spawned (partial simulation), the server decides damage,
//! death and respawn.
//!
//! * [`Arena`]: walls and cover, a static rapier2d world both ends query.
//! * [`systems`]: the ECS systems, the same functions on both ends: [`systems::fire`]
//!   (weapon cooldowns, shots and spawned projectiles), [`systems::movement`] (rapier's
//!   kinematic character controller), [`systems::projectiles`] (flight against walls
//!   and players). The server adds damage, death and respawn ([`ShooterScene`]).
//! * Two weapons: a hitscan [`Weapon::Rifle`], lag compensated on the server
//!   ([`lagless_replication::lagcomp::LagCompensator`]: the input carries the view the
//!   client showed, clamped to a trusted window), and a [`Weapon::Launcher`] whose
//!   projectiles the client spawns by prediction in its own id range
//!   ([`lagless_replication::spawns`]) and hands over to the server's.
//! * [`ShooterRollback`]: the client's predicted world, its own player and its own
//!   projectiles only; reconciliation compares the own player's replicated position
//!   with the article's tolerance (0.01 m). It also shows rifle hits at once and keeps
//!   them until the server's word ([`lagless_replication::hits::HitTracker`]).
//!
//! Players pass through each other (only walls stop them), so a client's prediction of
//! its own player needs nobody else's position, which it only knows late.
//!
//! ```
//! use lagless_scenes::shooter::{ShooterConfig, ShooterInput, ShooterScene};
//! use lagless_core::Tick;
//!
//! let mut scene = ShooterScene::new(ShooterConfig::default());
//! scene.add_player(1);
//! let start = scene.player(1).unwrap().position;
//! for t in 0..30 {
//!     scene.step(Tick(t), &[(1, ShooterInput::moving(1.0, 0.0))]);
//! }
//! assert!(scene.player(1).unwrap().position[0] > start[0] + 1.0);
//! ```

mod arena;
pub mod bot;
pub mod replicate;
pub mod systems;

mod input;
mod rollback;
mod scene;
mod state;

pub use arena::{Arena, BODY_RADIUS, Block};
pub use input::ShooterInput;
pub use rollback::{ClientCounters, Saved, ShooterRollback};
pub use scene::{REPORT_REPEAT_TICKS, ShooterScene, ShotOutcome};
pub use state::{
    PlayerCounters, PlayerState, ProjectileState, ServerCounters, ShooterKnown, slot_of,
};

use lagless_replication::spawns::IdSpace;
use std::time::Duration;

// In this scene a player's id is also its entity id on the wire.
pub use crate::PlayerId;

/// Player speed, m/s.
pub const PLAYER_SPEED: f32 = 4.5;
/// Radius of a player's hit circle, m (a little larger than its body, as hitboxes are).
pub const HIT_RADIUS: f32 = 0.45;
/// Full health.
pub const MAX_HEALTH: i32 = 100;
/// Rifle damage per hit.
pub const RIFLE_DAMAGE: i32 = 10;
/// Rifle range, m.
pub const RIFLE_RANGE: f32 = 40.0;
/// Projectile damage per hit.
pub const PROJECTILE_DAMAGE: i32 = 30;
/// Projectile speed, m/s.
pub const PROJECTILE_SPEED: f32 = 14.0;
/// Projectile radius, m.
pub const PROJECTILE_RADIUS: f32 = 0.15;
/// Projectile life, s.
pub const PROJECTILE_LIFE: f32 = 2.0;
/// Time from death to respawn, s.
pub const RESPAWN_SECS: f32 = 2.0;
/// The article's reconciliation tolerance, m.
pub const TOLERANCE: f32 = 0.01;

/// The two weapons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Weapon {
    /// Hitscan, lag compensated.
    Rifle,
    /// Slow projectile, spawned by prediction.
    Launcher,
}

impl Weapon {
    /// Its kind number (the [`SpawnGuard`](lagless_replication::spawns::SpawnGuard)'s and
    /// [`SpawnClaim`](lagless_replication::spawns::SpawnClaim)'s).
    pub fn kind(self) -> u16 {
        match self {
            Weapon::Rifle => 0,
            Weapon::Launcher => 1,
        }
    }

    /// Seconds between two shots.
    pub fn interval_secs(self) -> f32 {
        match self {
            Weapon::Rifle => 0.2,
            Weapon::Launcher => 1.0,
        }
    }

    /// Ticks between two shots at `tick_hz`.
    pub fn interval_ticks(self, tick_hz: u32) -> u32 {
        (self.interval_secs() * tick_hz as f32).round().max(1.0) as u32
    }
}

/// How the scene is built and run. Both ends build the same arena.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShooterConfig {
    /// Simulation rate, Hz (the article's 30 by default).
    pub tick_hz: u32,
    /// Test rifle shots in the world the shooter saw (off: in the present, the
    /// baseline).
    pub lag_compensation: bool,
    /// The trusted window of lag compensation.
    pub window: Duration,
    /// Widen the trusted range by each player's allowance, the latency the server
    /// measured for it ([`ShooterScene::set_allowance`]): `[now - allowance - window,
    /// now]`. Off: the absolute `[now - window, now]`, which clamps every shot of an
    /// honest client whose view is older than the window (mobile: about 550 ms).
    pub relative_window: bool,
    /// Client slots, for the [`IdSpace`] of predicted projectiles.
    pub slots: u32,
    /// The arena is this many standard arenas on a side ([`Arena::tiled`]): 1, the
    /// standard 32 m square, unless a large match needs the room.
    pub arena_tiles: u32,
}

impl Default for ShooterConfig {
    fn default() -> Self {
        Self {
            tick_hz: 30,
            lag_compensation: true,
            window: Duration::from_millis(250),
            relative_window: true,
            slots: 256,
            arena_tiles: 1,
        }
    }
}

impl ShooterConfig {
    /// The id layout: server ids below the replication decoder's limit, one client-only
    /// range per slot above.
    pub fn id_space(&self) -> IdSpace {
        IdSpace::new(IdSpace::default().server_max(), self.slots).unwrap_or_default()
    }

    /// Seconds per tick.
    pub fn dt(&self) -> f32 {
        1.0 / self.tick_hz.max(1) as f32
    }

    fn ticks(&self, secs: f32) -> u32 {
        (secs * self.tick_hz as f32).round().max(1.0) as u32
    }
}

#[cfg(test)]
mod tests;
