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

pub use arena::{Arena, BODY_RADIUS, Block};

use lagless_core::{Input, Reader, Rollback, Tick, TickRate, WireError, Writer};
use lagless_replication::Pose;
use lagless_replication::hits::{HitConfig, HitReport, HitReportCodec, HitTracker};
use lagless_replication::lagcomp::{LagCompConfig, LagCompensator, Shape, Shot, ViewClaim};
use lagless_replication::spawns::{
    IdSpace, ServerSpawn, SpawnClaim, SpawnConfig, SpawnGuard, SpawnGuardConfig, SpawnRegistry,
};
use lagless_wire::{BitReader, BitWriter};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use systems::{Body, FireEvent, Life, Owner, Projectile};

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
    /// Its kind number (the [`SpawnGuard`]'s and [`SpawnClaim`]'s).
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
}

impl Default for ShooterConfig {
    fn default() -> Self {
        Self {
            tick_hz: 30,
            lag_compensation: true,
            window: Duration::from_millis(250),
            relative_window: true,
            slots: 256,
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

/// A player's input for one tick.
///
/// The aim travels as the raw bits of two floats, so what arrives is what was sent:
/// a NaN or infinite aim reaches the server's checks (refused and counted there) rather
/// than being made harmless by the encoding alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShooterInput {
    /// Movement keys: bit 0 +x, bit 1 -x, bit 2 +y, bit 3 -y.
    pub keys: u8,
    /// Aim direction as `f32` bits (any length; the server normalizes it).
    pub aim: [u32; 2],
    /// 0: no shot, 1: rifle, 2: launcher.
    pub fire: u8,
    /// The rifle shot's number (the hit reports name it).
    pub shot: u16,
    /// The launcher projectile's predicted id (in the client's range).
    pub spawn_id: u32,
    /// The view the client was showing (lag compensation).
    pub view: ViewClaim,
}

impl ShooterInput {
    /// Moving along `(x, y)` (signs only), aiming along +x.
    pub fn moving(x: f32, y: f32) -> Self {
        let mut keys = 0;
        keys |= u8::from(x > 0.0);
        keys |= u8::from(x < 0.0) << 1;
        keys |= u8::from(y > 0.0) << 2;
        keys |= u8::from(y < 0.0) << 3;
        Self {
            keys,
            aim: [1.0f32.to_bits(), 0.0f32.to_bits()],
            ..Self::default()
        }
    }

    /// Sets the aim direction.
    pub fn with_aim(mut self, aim: [f32; 2]) -> Self {
        self.aim = [aim[0].to_bits(), aim[1].to_bits()];
        self
    }

    /// The aim as floats, as sent.
    pub fn aim(&self) -> [f32; 2] {
        [f32::from_bits(self.aim[0]), f32::from_bits(self.aim[1])]
    }

    /// The aim as a unit vector, `None` for a NaN, infinite or zero one.
    pub fn aim_dir(&self) -> Option<[f32; 2]> {
        let a = self.aim();
        let len = a[0].hypot(a[1]);
        (len.is_finite() && len > 1e-6).then(|| [a[0] / len, a[1] / len])
    }

    /// The weapon fired, if any.
    pub fn weapon(&self) -> Option<Weapon> {
        match self.fire {
            1 => Some(Weapon::Rifle),
            2 => Some(Weapon::Launcher),
            _ => None,
        }
    }

    /// The wanted velocity direction (not normalized: diagonals are).
    pub fn direction(&self) -> [f32; 2] {
        let x = f32::from(self.keys & 1) - f32::from((self.keys >> 1) & 1);
        let y = f32::from((self.keys >> 2) & 1) - f32::from((self.keys >> 3) & 1);
        let len = x.hypot(y);
        if len > 0.0 {
            [x / len, y / len]
        } else {
            [0.0, 0.0]
        }
    }
}

impl Input for ShooterInput {
    fn encode(&self, w: &mut Writer) {
        w.write_u8(self.keys | (self.fire << 4));
        w.write_u32(self.aim[0]);
        w.write_u32(self.aim[1]);
        match self.fire {
            1 => w.write_u16(self.shot),
            2 => w.write_varint_u32(self.spawn_id),
            _ => {}
        }
        self.view.write(w);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let b = r.read_u8()?;
        let (keys, fire) = (b & 0x0f, b >> 4);
        if fire > 2 {
            return Err(WireError::Invalid {
                what: "shooter fire",
            });
        }
        let aim = [r.read_u32()?, r.read_u32()?];
        let (shot, spawn_id) = match fire {
            1 => (r.read_u16()?, 0),
            2 => (0, r.read_varint_u32()?),
            _ => (0, 0),
        };
        let view = ViewClaim::read(r)?;
        Ok(Self {
            keys,
            aim,
            fire,
            shot,
            spawn_id,
            view,
        })
    }
}

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

/// The client slot of player `p` (its [`IdSpace`] range).
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
}

/// What the server made of one rifle shot: why it was a hit or a miss, so a hit the
/// shooter's client showed and the server rejected can be told apart by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShotOutcome {
    /// It hit this player.
    Hit(PlayerId),
    /// The rewound world had a target on the line that is dead on the server now (a
    /// kill trade: someone else killed it first).
    TargetDead,
    /// The shooter was dead on the server when the shot arrived (it did not know yet).
    ShooterDead,
    /// Nothing on the line in the rewound world; `clamped` when the claimed view was
    /// moved into the trusted range (then the rewound world was not the one shown).
    Miss {
        /// The claim was clamped.
        clamped: bool,
    },
}

/// The server's world: every player and projectile in one hecs world, the lag
/// compensator's history, the spawn guard, and the hit reports owed to clients.
pub struct ShooterScene {
    config: ShooterConfig,
    arena: Arc<Arena>,
    world: hecs::World,
    players: BTreeMap<PlayerId, hecs::Entity>,
    lagcomp: LagCompensator,
    guard: SpawnGuard,
    next_id: u32,
    tick: Tick,
    /// Hit reports by the tick they were made, per player: sent with every snapshot
    /// for [`REPORT_REPEAT_TICKS`] (the tracker ignores repeats), so one lost packet
    /// does not lose them.
    reports: Vec<(u32, PlayerId, HitReport)>,
    /// Per-player counters.
    pub counters: BTreeMap<PlayerId, PlayerCounters>,
    /// Per player, the latency the server measured for it ([`Self::set_allowance`]).
    allowances: BTreeMap<PlayerId, Duration>,
    /// What became of each rifle shot, by player and shot number: for the lab's
    /// breakdown of rejected hits. Bounded: shot numbers are 16 bits, so at most 65536
    /// entries per player (a number reused overwrites).
    outcomes: BTreeMap<(PlayerId, u16), ShotOutcome>,
    /// Refusals and totals.
    pub stats: ServerCounters,
}

/// How many ticks a hit report is repeated in snapshots.
pub const REPORT_REPEAT_TICKS: u32 = 8;
/// The first server id of a projectile (players have ids 1..=256).
const FIRST_PROJECTILE_ID: u32 = 1024;

impl ShooterScene {
    /// An empty arena.
    pub fn new(config: ShooterConfig) -> Self {
        let mut guard = SpawnGuard::new(SpawnGuardConfig {
            space: config.id_space(),
            ..SpawnGuardConfig::default()
        });
        for w in [Weapon::Rifle, Weapon::Launcher] {
            guard.set_min_interval(w.kind(), w.interval_ticks(config.tick_hz));
        }
        Self {
            config,
            arena: Arc::new(Arena::new()),
            world: hecs::World::new(),
            players: BTreeMap::new(),
            lagcomp: LagCompensator::new(LagCompConfig {
                tick_rate: TickRate::new(config.tick_hz.max(1)),
                window: config.window,
                ..LagCompConfig::default()
            }),
            guard,
            next_id: FIRST_PROJECTILE_ID,
            tick: Tick(0),
            reports: Vec::new(),
            counters: BTreeMap::new(),
            allowances: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            stats: ServerCounters::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ShooterConfig {
        &self.config
    }

    /// The state tick the world is at (the next step is from it).
    pub fn tick(&self) -> Tick {
        self.tick
    }

    /// The arena (shared with clients).
    pub fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }

    /// The lag compensator (its stats: rewinds, clamps, refusals).
    pub fn lagcomp(&self) -> &LagCompensator {
        &self.lagcomp
    }

    /// Sets the latency the server attributes to player `p`'s view: what it measured
    /// itself (round trip, how early inputs arrive, the interpolation the snapshot rate
    /// implies), never what the client says. With
    /// [`ShooterConfig::relative_window`], rifle shots are trusted back to this plus the
    /// window; the compensator caps it at its `max_allowance` (1 s).
    pub fn set_allowance(&mut self, p: PlayerId, allowance: Duration) {
        self.allowances.insert(p, allowance);
    }

    /// The allowance player `p` gets now (zero with the absolute window or before any
    /// measurement).
    pub fn allowance(&self, p: PlayerId) -> Duration {
        if self.config.relative_window {
            self.allowances.get(&p).copied().unwrap_or_default()
        } else {
            Duration::ZERO
        }
    }

    /// What the server made of player `p`'s rifle shot number `shot` (the latest shot
    /// with that number).
    pub fn shot_outcome(&self, p: PlayerId, shot: u16) -> Option<ShotOutcome> {
        self.outcomes.get(&(p, shot)).copied()
    }

    /// The spawn guard (its stats: refused ids, rates, ticks).
    pub fn guard(&self) -> &SpawnGuard {
        &self.guard
    }

    /// Adds player `p` at its spawn point.
    pub fn add_player(&mut self, p: PlayerId) {
        if self.players.contains_key(&p) {
            return;
        }
        let e = self.world.spawn(systems::player_bundle(
            p,
            self.arena.spawn_point(p, 0),
            self.tick,
        ));
        self.players.insert(p, e);
        self.counters.entry(p).or_default();
    }

    /// Player `p` as replicated.
    pub fn player(&self, p: PlayerId) -> Option<PlayerState> {
        systems::player_state(&self.world, *self.players.get(&p)?)
    }

    /// Every player, by id.
    pub fn players(&self) -> impl Iterator<Item = (PlayerId, PlayerState)> + '_ {
        self.players
            .iter()
            .filter_map(|(&p, &e)| Some((p, systems::player_state(&self.world, e)?)))
    }

    /// Every projectile.
    pub fn projectiles(&self) -> Vec<ProjectileState> {
        let mut out: Vec<ProjectileState> = self
            .world
            .query::<(&Projectile, &Owner)>()
            .iter()
            .map(|(p, o)| ProjectileState {
                id: p.id,
                owner: o.slot,
                spawn_tick: p.spawn_tick,
                position: p.position,
                velocity: p.velocity,
            })
            .collect();
        out.sort_by_key(|p| p.id);
        out
    }

    /// One step from state `tick` with each player's input: shots (rifle shots
    /// tested in the rewound world), movement, projectiles, damage, respawns; then the
    /// players' hit circles are recorded for lag compensation at `tick + 1`.
    pub fn step(&mut self, tick: Tick, inputs: &[(PlayerId, ShooterInput)]) {
        self.tick = tick;
        if self.lagcomp.is_empty() {
            self.record(tick);
        }
        let dt = self.config.dt();
        let clean = self.sanitize_inputs(inputs);
        self.answer_dead_shooters(tick, &clean);
        let fired = self.fire_checked(tick, &clean);
        let mut damage = self.resolve_fired(tick, fired);
        systems::movement(&mut self.world, &self.arena, &clean, dt);
        for impact in systems::projectiles(&mut self.world, &self.arena, tick, dt) {
            if let Some(t) = impact.target {
                damage.push((t, PROJECTILE_DAMAGE));
                if let Some(o) = self.players_by_slot(impact.owner) {
                    self.counters.entry(o).or_default().projectile_hits += 1;
                }
            }
        }
        self.apply_damage(tick, damage);
        self.respawn_and_record(tick);
    }

    /// The inputs of players the scene has, their aim sanitized; the rest counted.
    fn sanitize_inputs(
        &mut self,
        inputs: &[(PlayerId, ShooterInput)],
    ) -> Vec<(PlayerId, ShooterInput)> {
        let mut clean = Vec::with_capacity(inputs.len());
        for &(p, input) in inputs {
            if !self.players.contains_key(&p) {
                // A client acts through its own player only: the runner gives each
                // input its sender's player; one the scene lacks does nothing.
                self.stats.unknown_player += 1;
                continue;
            }
            let (input, refused) = systems::sanitize(input);
            self.stats.refused_aim += u64::from(refused);
            clean.push((p, input));
        }
        clean
    }

    /// A rifle shot from a player that is dead here (its client does not know yet)
    /// is answered with a miss at once, so the client undoes its effect without
    /// waiting for the deadline.
    fn answer_dead_shooters(&mut self, tick: Tick, clean: &[(PlayerId, ShooterInput)]) {
        for &(p, input) in clean {
            let dead = self.player(p).is_some_and(|s| !s.alive);
            self.stats.dead_shooter_shots += u64::from(dead && input.weapon().is_some());
            if dead && input.weapon() == Some(Weapon::Rifle) {
                self.outcomes
                    .insert((p, input.shot), ShotOutcome::ShooterDead);
                self.reports.push((
                    tick.0,
                    p,
                    HitReport {
                        shot: input.shot,
                        target: None,
                    },
                ));
            }
        }
    }

    /// Fires the weapons the inputs ask for, each shot passed through the spawn guard;
    /// launcher projectiles get their server ids here.
    fn fire_checked(&mut self, tick: Tick, clean: &[(PlayerId, ShooterInput)]) -> Vec<FireEvent> {
        let tick_hz = self.config.tick_hz;
        let space = self.config.id_space();
        let guard = &mut self.guard;
        let stats = &mut self.stats;
        let mut next_id = self.next_id;
        let server_max = space.server_max();
        let fired = systems::fire(&mut self.world, tick, clean, tick_hz, |p, input, w| {
            // The server's own checks on top of the shared cooldown: the guard counts
            // the rate, the claim's id range and its tick.
            let slot = slot_of(p);
            let checked = match w {
                Weapon::Rifle => guard.check_fire(slot, tick, w.kind(), tick),
                Weapon::Launcher => {
                    let claim = SpawnClaim {
                        id: input.spawn_id,
                        kind: w.kind(),
                        tick,
                        seq: 0,
                    };
                    guard.check(slot, tick, &claim)
                }
            };
            match checked {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    use lagless_replication::spawns::SpawnError;
                    match e {
                        SpawnError::IdOutOfRange(_) => stats.refused_spawn_id += 1,
                        SpawnError::TooFast => stats.refused_rate += 1,
                        _ => stats.refused_tick += 1,
                    }
                    return None;
                }
            }
            Some(match w {
                Weapon::Rifle => 0,
                Weapon::Launcher => {
                    let id = next_id;
                    next_id = if next_id >= server_max {
                        FIRST_PROJECTILE_ID
                    } else {
                        next_id + 1
                    };
                    id
                }
            })
        });
        self.next_id = next_id;
        fired
    }

    /// Counts and resolves what was fired; the damage rifle hits do, by target.
    fn resolve_fired(&mut self, tick: Tick, fired: Vec<FireEvent>) -> Vec<(PlayerId, i32)> {
        let mut damage: Vec<(PlayerId, i32)> = Vec::new();
        for ev in fired {
            match ev {
                FireEvent::TooFast { .. } => self.stats.refused_rate += 1,
                FireEvent::Rifle {
                    player,
                    origin,
                    direction,
                    shot,
                    view,
                } => {
                    if let Some(t) = self.rifle_shot(tick, player, origin, direction, shot, view) {
                        damage.push((t, RIFLE_DAMAGE));
                    }
                }
                FireEvent::Launcher { player, .. } => {
                    self.counters.entry(player).or_default().projectiles += 1;
                }
            }
        }
        damage
    }

    /// Tests one rifle shot in the world rewound to the view it claims, records its
    /// outcome and its hit report; the player it hit, if any.
    fn rifle_shot(
        &mut self,
        tick: Tick,
        player: PlayerId,
        origin: [f32; 2],
        direction: [f32; 2],
        shot: u16,
        view: ViewClaim,
    ) -> Option<PlayerId> {
        let tick_hz = self.config.tick_hz;
        let c = self.counters.entry(player).or_default();
        c.rifle_shots += 1;
        let claimed_view = if self.config.lag_compensation {
            view.view(tick)
        } else {
            f64::from(tick.0)
        };
        let wall = self
            .arena
            .cast(origin, direction, RIFLE_RANGE)
            .unwrap_or(RIFLE_RANGE);
        let q = Shot {
            claimed_view,
            origin: [origin[0], origin[1], 0.0],
            direction: [direction[0], direction[1], 0.0],
            max_distance: wall,
            shooter: Some(player),
        };
        let allowance = if self.config.lag_compensation && self.config.relative_window {
            self.allowances.get(&player).copied().unwrap_or_default()
        } else {
            Duration::ZERO
        };
        let players = &self.players;
        let world = &self.world;
        let (target, outcome) =
            match self
                .lagcomp
                .rewind_query_allowing(tick, &q, allowance, |_| true)
            {
                Ok(r) => {
                    c.rewind_ms.push(r.rewind.rewind_ms);
                    c.excess_ms.push(r.rewind.excess_ms);
                    c.allowance_ms.push(r.rewind.allowance_ms);
                    let ms = 1000.0 / f64::from(tick_hz.max(1));
                    c.claimed_ms
                        .push((f64::from(tick.0) - r.rewind.claimed_view) * ms);
                    c.clamped += u64::from(r.rewind.clamped());
                    // A target that died since the view the shot was aimed at
                    // takes no more damage: a miss, counted apart.
                    let dead_now = |p: u32| {
                        players
                            .get(&p)
                            .and_then(|&e| systems::player_state(world, e))
                            .is_some_and(|s| !s.alive)
                    };
                    match r.hit.map(|h| h.entity) {
                        Some(t) if dead_now(t) => {
                            self.stats.dead_target_shots += 1;
                            (None, ShotOutcome::TargetDead)
                        }
                        Some(t) => (Some(t), ShotOutcome::Hit(t)),
                        None => (
                            None,
                            ShotOutcome::Miss {
                                clamped: r.rewind.clamped(),
                            },
                        ),
                    }
                }
                Err(_) => (None, ShotOutcome::Miss { clamped: false }),
            };
        self.outcomes.insert((player, shot), outcome);
        if target.is_some() {
            c.rifle_hits += 1;
        }
        self.reports
            .push((tick.0, player, HitReport { shot, target }));
        target
    }

    /// Applies the step's damage in the order it was done; kills are counted.
    fn apply_damage(&mut self, tick: Tick, damage: Vec<(PlayerId, i32)>) {
        let respawn = self.config.ticks(RESPAWN_SECS);
        for (t, amount) in damage {
            let Some(&e) = self.players.get(&t) else {
                continue;
            };
            if systems::damage(&mut self.world, e, amount, tick.0 + respawn) {
                self.stats.kills += 1;
                self.counters.entry(t).or_default().deaths += 1;
                // Its history stays until the respawn: a shot at the world before the
                // death still finds it there, and is refused as a shot at the dead.
            }
        }
    }

    /// Brings back the players whose respawn time came, records the hit circles for
    /// `tick + 1`, moves on to it, and drops the hit reports repeated long enough.
    fn respawn_and_record(&mut self, tick: Tick) {
        let arena = Arc::clone(&self.arena);
        let back = systems::respawn(&mut self.world, tick.0 + 1, |p, d| arena.spawn_point(p, d));
        for p in back {
            // No rewind across the teleport (as Source does not): the history starts
            // again at the spawn point.
            self.lagcomp.remove(p);
        }
        let next = tick.next();
        self.record(next);
        self.tick = next;
        let keep = REPORT_REPEAT_TICKS;
        self.reports
            .retain(|(t, _, _)| next.0.saturating_sub(*t) <= keep);
    }

    fn players_by_slot(&self, slot: u32) -> Option<PlayerId> {
        let p = slot + 1;
        self.players.contains_key(&p).then_some(p)
    }

    /// Records every live player's hit circle at `tick`.
    fn record(&mut self, tick: Tick) {
        for (&p, &e) in &self.players {
            if let Some(s) = systems::player_state(&self.world, e) {
                if s.alive {
                    let _ = self.lagcomp.record(
                        tick,
                        p,
                        Pose::planar(s.position, s.aim),
                        Shape::Circle { radius: HIT_RADIUS },
                    );
                }
            }
        }
    }

    /// The hit reports owed to player `p` (the latest [`REPORT_REPEAT_TICKS`] ticks'),
    /// encoded for the snapshot's side channel.
    pub fn reports_for(&self, p: PlayerId) -> Vec<u8> {
        let mine: Vec<HitReport> = self
            .reports
            .iter()
            .filter(|(_, q, _)| *q == p)
            .map(|(_, _, r)| *r)
            .collect();
        let mut w = BitWriter::new();
        // Within the codec's batch limit by construction (a few shots a tick at most);
        // a failure sends an empty batch rather than a broken one.
        let codec = HitReportCodec::default();
        let n = mine.len().min(codec.max_batch);
        if codec.write(&mut w, &mine[mine.len() - n..]).is_err() {
            let mut empty = BitWriter::new();
            let _ = codec.write(&mut empty, &[]);
            return empty.into_bytes();
        }
        w.into_bytes()
    }
}

/// Counters a client's predicted world keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientCounters {
    /// Rifle shots this client fired (first prediction of each).
    pub rifle_shots: u64,
    /// Projectiles spawned by prediction.
    pub launched: u64,
    /// Handover offsets, cm: the server's projectile against the predicted one at the
    /// same tick.
    pub handover_cm: Vec<f64>,
    /// Hit-report batches that did not decode.
    pub bad_reports: u64,
    /// Predicted projectiles withdrawn at once when the server's state showed the
    /// player dead at their launch tick (the server spawned nothing for them).
    pub withdrawn: u64,
    /// The numbers of the shown hits the server rejected, in order: the lab looks up
    /// why ([`ShooterScene::shot_outcome`]). One entry per rejection, as many as
    /// `hits.rejected`.
    pub rejected_shots: Vec<u16>,
}

/// The client's predicted world: its own player and its own projectiles, nothing
/// else (the article's partial simulation).
pub struct ShooterRollback {
    config: ShooterConfig,
    arena: Arc<Arena>,
    player: PlayerId,
    world: hecs::World,
    me: Option<hecs::Entity>,
    /// The newest tick predicted: replays of older ticks move the player but fire
    /// nothing (shots and spawns happen once, at their first prediction).
    newest: Option<Tick>,
    /// The other players as this client shows them now, by id.
    shown: Vec<(PlayerId, [f32; 2])>,
    spawns: SpawnRegistry<hecs::Entity>,
    /// Predicted projectiles the server's took over: server id → own entity, which
    /// flies on until the server's is gone (or ends on a wall first; its entry stays
    /// until the server's is gone).
    handed: BTreeMap<u32, (hecs::Entity, u32)>,
    /// The server's projectiles of this client that matched no prediction.
    unmatched: std::collections::BTreeSet<(u32, u32)>,
    hits: HitTracker,
    /// Ticks of lag this client adds to its claimed view (0 unless it lies).
    lie_ticks: f64,
    /// Counters.
    pub counters: ClientCounters,
}

impl ShooterRollback {
    /// Player `player`'s predicted world in `arena`; `None` for a player beyond the
    /// id space's slots (it would have no id range to spawn in).
    pub fn new(config: ShooterConfig, arena: Arc<Arena>, player: PlayerId) -> Option<Self> {
        let rate = TickRate::new(config.tick_hz.max(1));
        let spawns = SpawnRegistry::new(
            SpawnConfig {
                tick_rate: rate,
                ..SpawnConfig::default()
            },
            config.id_space(),
            slot_of(player),
        )
        .ok()?;
        Some(Self {
            config,
            arena,
            player,
            world: hecs::World::new(),
            me: None,
            newest: None,
            shown: Vec::new(),
            spawns,
            handed: BTreeMap::new(),
            unmatched: Default::default(),
            hits: HitTracker::new(HitConfig {
                tick_rate: rate,
                ..HitConfig::default()
            }),
            lie_ticks: 0.0,
            counters: ClientCounters::default(),
        })
    }

    /// The player this world predicts.
    pub fn player(&self) -> PlayerId {
        self.player
    }

    /// The own player as predicted.
    pub fn player_state(&self) -> Option<PlayerState> {
        systems::player_state(&self.world, self.me?)
    }

    /// The predicted projectiles (own ones, predicted or handed over): id and position.
    pub fn projectiles(&self) -> Vec<(u32, [f32; 2])> {
        self.world
            .query::<&Projectile>()
            .iter()
            .map(|p| (p.id, p.position))
            .collect()
    }

    /// Entities simulated besides the own player.
    pub fn predicted_entities(&self) -> usize {
        self.world.len() as usize - usize::from(self.me.is_some())
    }

    /// The spawn registry (its stats).
    pub fn spawns(&self) -> &SpawnRegistry<hecs::Entity> {
        &self.spawns
    }

    /// The hit tracker (its stats).
    pub fn hits(&self) -> &HitTracker {
        &self.hits
    }

    /// What this client shows of the other players now, in id order (`None`: not
    /// shown, not hittable on screen).
    pub fn show(&mut self, others: impl IntoIterator<Item = (PlayerId, Option<[f32; 2]>)>) {
        self.shown.clear();
        self.shown
            .extend(others.into_iter().filter_map(|(p, x)| Some((p, x?))));
    }

    /// Makes client 1's lie: it claims a view `ticks` older than it shows (the faked-ping
    /// attack the trusted window bounds).
    pub fn set_lie(&mut self, ticks: f64) {
        self.lie_ticks = ticks.max(0.0);
    }

    /// Completes the input of `tick` before it is sent and predicted: the view the
    /// client shows (`render_tick`, the fractional server tick; `None` before anything
    /// is shown: no lag claimed) and, for a launch, the id the predicted projectile
    /// will have.
    pub fn complete_input(&self, tick: Tick, render_tick: Option<f64>, input: &mut ShooterInput) {
        let view = render_tick.map_or(f64::from(tick.0), |r| r - self.lie_ticks);
        input.view = ViewClaim::new(tick, view);
        if input.weapon() == Some(Weapon::Launcher) {
            input.spawn_id = self.spawns.next_id().unwrap_or(0);
        }
    }

    /// Takes the tracker's events: nothing to draw here, but a rejected hit's number is
    /// kept so the lab can tell why the server rejected it.
    fn drain_hit_events(&mut self) {
        use lagless_replication::hits::{HitEvent, MissReason};
        while let Some(ev) = self.hits.poll_event() {
            if let HitEvent::ShowMiss {
                shot,
                reason: MissReason::Rejected,
                ..
            } = ev
            {
                self.counters.rejected_shots.push(shot);
            }
        }
    }

    /// Takes the server's hit reports (the snapshot's side channel).
    pub fn receive_reports(&mut self, bytes: &[u8]) {
        match HitReportCodec::default().read(&mut BitReader::new(bytes)) {
            Ok(reports) => {
                for r in &reports {
                    self.hits.report(r);
                }
            }
            Err(_) => self.counters.bad_reports += 1,
        }
        self.drain_hit_events();
    }

    /// Matches the server's projectiles with the predicted ones, and drops the handed
    /// over ones the server no longer has.
    fn adopt(&mut self, known: &ShooterKnown) {
        // A shot's word comes back as late as this client runs ahead of the newest
        // server state it holds: its lead (half the round trip plus the server's input
        // buffer) and the snapshot's way down. That, not the bare round trip, is the
        // hit tracker's wait before a shown hit is given up.
        if let Some(newest) = self.newest {
            let ahead = newest.0.saturating_sub(known.tick) + 1;
            self.hits.set_rtt(Duration::from_secs_f64(
                f64::from(ahead) * f64::from(self.config.dt()),
            ));
        }
        let slot = slot_of(self.player);
        for p in &known.projectiles {
            self.spawns.check_server_id(p.id);
            if p.owner != slot
                || self.handed.contains_key(&p.id)
                || self.unmatched.contains(&(p.id, p.spawn_tick))
            {
                continue;
            }
            // Where the predicted projectile was at the server state's tick, so the
            // offset compares the same instant.
            for (id, pred) in self
                .spawns
                .iter()
                .map(|(id, p)| (id, p.payload))
                .collect::<Vec<_>>()
            {
                if let Ok(proj) = self.world.get::<&Projectile>(pred) {
                    let at = proj.position_at(known.tick, self.config.dt());
                    self.spawns.set_pose(id, Pose::planar(at, 0.0));
                }
            }
            let server = ServerSpawn {
                id: p.id,
                owner: slot,
                tick: Tick(p.spawn_tick),
                kind: Weapon::Launcher.kind(),
                seq: None,
                pose: Pose::planar(p.position, 0.0),
            };
            if let Some(h) = self.spawns.match_server(&server) {
                let o = h.offset;
                self.counters
                    .handover_cm
                    .push(f64::from((o[0] * o[0] + o[1] * o[1]).sqrt()) * 100.0);
                if let Ok(mut proj) = self.world.get::<&mut Projectile>(h.payload) {
                    proj.id = p.id;
                }
                let handed = systems::HandedOver {
                    server_id: p.id,
                    offset: [-o[0], -o[1]],
                };
                // A component added to a predicted entity; it may have hit a wall
                // already here (then there is nothing to add it to).
                let _ = self.world.insert_one(h.payload, handed);
                self.handed.insert(p.id, (h.payload, p.spawn_tick));
            } else {
                // Counted once by the registry; not offered again.
                self.unmatched.insert((p.id, p.spawn_tick));
            }
        }
        let alive: std::collections::BTreeSet<u32> =
            known.projectiles.iter().map(|p| p.id).collect();
        // A handed-over projectile missing from the server's state is gone from view:
        // its local copy goes. The id is remembered until well past the projectile's
        // life, since a state that merely lacked it (held back, too old to carry
        // forward) must not offer it for matching a second time.
        let life = self.config.ticks(PROJECTILE_LIFE) + self.config.ticks(1.0);
        for (id, (e, _)) in &self.handed {
            if !alive.contains(id) {
                let _ = self.world.despawn(*e);
            }
        }
        self.handed
            .retain(|_, (_, spawn)| known.tick.saturating_sub(*spawn) <= life);
        self.unmatched
            .retain(|(_, spawn)| known.tick.saturating_sub(*spawn) <= life);
    }

    /// Removes the predicted projectiles launched while the server had this player
    /// dead: it fires before it takes damage in a step, so from the step after the
    /// fatal one (`respawn_at` minus the respawn time) until the respawn, nothing it
    /// launched exists on the server. Removing them now rather than at the orphan
    /// timeout shows the truth as soon as the client knows it; they are counted apart
    /// (`withdrawn`), as the registry's `despawned`.
    fn withdraw_dead_launches(&mut self, s: &PlayerState) {
        let died = s.respawn_at.saturating_sub(self.config.ticks(RESPAWN_SECS));
        let dead: Vec<u32> = self
            .spawns
            .iter()
            .filter(|(_, p)| p.claim.tick.0 > died && p.claim.tick.0 < s.respawn_at)
            .map(|(id, _)| id)
            .collect();
        for id in dead {
            if let Some(e) = self.spawns.despawn(id) {
                let _ = self.world.despawn(e);
                self.counters.withdrawn += 1;
            }
        }
    }

    /// The server's respawn system over the own player (the step from `tick` makes
    /// state `tick + 1`).
    fn respawn(&mut self, tick: Tick) {
        let arena = &self.arena;
        systems::respawn(&mut self.world, tick.0 + 1, |p, d| arena.spawn_point(p, d));
    }

    fn set_player(&mut self, s: &PlayerState, cooldowns: Option<systems::Arms>) {
        match self.me {
            Some(e) if self.world.contains(e) => {
                if let Ok(mut b) = self.world.get::<&mut Body>(e) {
                    b.position = s.position;
                    b.velocity = s.velocity;
                    b.aim = s.aim;
                }
                if let Ok(mut l) = self.world.get::<&mut Life>(e) {
                    l.health = s.health;
                    l.alive = s.alive;
                    l.respawn_at = s.respawn_at;
                    l.deaths = s.deaths;
                }
                if let (Some(c), Ok(mut a)) = (cooldowns, self.world.get::<&mut systems::Arms>(e)) {
                    *a = c;
                }
            }
            _ => {
                let mut bundle = systems::player_bundle(self.player, s.position, Tick(0));
                bundle.1.velocity = s.velocity;
                bundle.1.aim = s.aim;
                bundle.2 = Life {
                    health: s.health,
                    alive: s.alive,
                    respawn_at: s.respawn_at,
                    deaths: s.deaths,
                };
                if let Some(c) = cooldowns {
                    bundle.3 = c;
                }
                self.me = Some(self.world.spawn(bundle));
            }
        }
    }
}

/// What the predicted world keeps per tick: the own player and its cooldowns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Saved {
    /// The player.
    pub state: PlayerState,
    /// Its weapons' cooldowns (not replicated: the owner's own business).
    pub arms: systems::Arms,
}

impl Rollback for ShooterRollback {
    type Input = ShooterInput;
    type Saved = Option<Saved>;
    type Confirmed = ShooterKnown;

    fn advance(&mut self, tick: Tick, input: ShooterInput) {
        let Some(me) = self.me else {
            return;
        };
        let first = self.newest.is_none_or(|n| tick > n);
        let (input, _) = systems::sanitize(input);
        let inputs = [(self.player, input)];
        let dt = self.config.dt();
        // The same systems as the server's, over this world only.
        let fired = systems::fire(
            &mut self.world,
            tick,
            &inputs,
            self.config.tick_hz,
            |_, input, w| match w {
                Weapon::Rifle => Some(0),
                Weapon::Launcher => Some(input.spawn_id),
            },
        );
        if first {
            self.newest = Some(tick);
            for ev in fired {
                match ev {
                    FireEvent::Rifle {
                        origin,
                        direction,
                        shot,
                        ..
                    } => {
                        self.counters.rifle_shots += 1;
                        // Cosmetic first: the hit this client shows at once, against
                        // the others where it shows them and the walls.
                        let wall = self
                            .arena
                            .cast(origin, direction, RIFLE_RANGE)
                            .unwrap_or(RIFLE_RANGE);
                        if let Some(t) = systems::ray_circles(
                            origin,
                            direction,
                            wall,
                            self.shown.iter().copied(),
                            HIT_RADIUS,
                        ) {
                            self.hits.shown(shot, t, tick);
                        }
                    }
                    FireEvent::Launcher { entity, .. } => {
                        let pose = self
                            .world
                            .get::<&Projectile>(entity)
                            .map(|p| Pose::planar(p.position, 0.0))
                            .unwrap_or_else(|_| Pose::planar([0.0; 2], 0.0));
                        match self
                            .spawns
                            .spawn(tick, Weapon::Launcher.kind(), pose, entity)
                        {
                            Ok(claim) => {
                                self.counters.launched += 1;
                                if let Ok(mut p) = self.world.get::<&mut Projectile>(entity) {
                                    p.id = claim.id;
                                }
                            }
                            Err(_) => {
                                let _ = self.world.despawn(entity);
                            }
                        }
                    }
                    FireEvent::TooFast { .. } => {}
                }
            }
            systems::movement(&mut self.world, &self.arena, &inputs, dt);
            self.respawn(tick);
            // Own projectiles fly once per tick, never replayed (not reconciled). One
            // that ends here stays in `handed` until the server's is gone too, so the
            // server's is not offered for matching again.
            let _ = systems::projectiles(&mut self.world, &self.arena, tick, dt);
            for orphan in self.spawns.expire(tick) {
                let _ = self.world.despawn(orphan.payload);
            }
            self.hits.update(tick);
            self.drain_hit_events();
        } else {
            // A replay: projectiles spawned by it would be duplicates.
            for ev in fired {
                if let FireEvent::Launcher { entity, .. } = ev {
                    let _ = self.world.despawn(entity);
                }
            }
            systems::movement(&mut self.world, &self.arena, &inputs, dt);
            self.respawn(tick);
        }
        let _ = me;
    }

    fn save(&self) -> Option<Saved> {
        let me = self.me?;
        Some(Saved {
            state: systems::player_state(&self.world, me)?,
            arms: *self.world.get::<&systems::Arms>(me).ok()?,
        })
    }

    fn diverged(&self, predicted: &Option<Saved>, confirmed: &ShooterKnown) -> bool {
        let Some(c) = confirmed.player(self.player) else {
            return false;
        };
        let Some(p) = predicted else {
            return true;
        };
        // The own player's replicated data only, with the article's tolerance. Health
        // is not predicted (the server decides damage): it is taken without a replay.
        let d = (p.state.position[0] - c.position[0]).hypot(p.state.position[1] - c.position[1]);
        d > TOLERANCE || p.state.alive != c.alive
    }

    fn load(&mut self, confirmed: &ShooterKnown, predicted: Option<&Option<Saved>>) {
        let arms = predicted.copied().flatten().map(|s| s.arms);
        match confirmed.player(self.player) {
            Some(s) => {
                let s = *s;
                self.set_player(&s, arms);
                if !s.alive {
                    self.withdraw_dead_launches(&s);
                }
            }
            None => {
                if let Some(Some(p)) = predicted {
                    let p = *p;
                    self.set_player(&p.state, Some(p.arms));
                }
            }
        }
        self.adopt(confirmed);
    }

    fn confirmed(&mut self, confirmed: &ShooterKnown) {
        if let (Some(c), Some(me)) = (confirmed.player(self.player), self.me) {
            if let Ok(mut l) = self.world.get::<&mut Life>(me) {
                l.health = c.health;
            }
        }
        self.adopt(confirmed);
    }
}

#[cfg(test)]
mod tests;
