//! The server's world ([`ShooterScene`]): damage, death, respawn, lag compensation.

use super::systems::{self, Arms, FireEvent, Life, Owner, Projectile};
use super::{
    Arena, HIT_RADIUS, PROJECTILE_DAMAGE, PlayerCounters, PlayerId, PlayerState, ProjectileState,
    RESPAWN_SECS, RIFLE_DAMAGE, RIFLE_RANGE, ServerCounters, ShooterConfig, ShooterInput, Weapon,
    slot_of,
};
use lagless_core::{Tick, TickRate};
use lagless_replication::Pose;
use lagless_replication::hits::{HitReport, HitReportCodec};
use lagless_replication::lagcomp::{LagCompConfig, LagCompensator, Shape, Shot, ViewClaim};
use lagless_replication::spawns::{SpawnClaim, SpawnGuard, SpawnGuardConfig};
use lagless_wire::BitWriter;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    pub(super) config: ShooterConfig,
    arena: Arc<Arena>,
    pub(super) world: hecs::World,
    pub(super) players: BTreeMap<PlayerId, hecs::Entity>,
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
    /// Rifle shots whose input came after its tick was simulated, for the next step
    /// ([`Self::late_inputs`]).
    late: Vec<(PlayerId, Tick, ShooterInput)>,
    /// Refusals and totals.
    pub stats: ServerCounters,
}

/// Counts a shot the spawn guard refused, by why.
fn count_refusal(stats: &mut ServerCounters, e: &lagless_replication::spawns::SpawnError) {
    use lagless_replication::spawns::SpawnError;
    match e {
        SpawnError::IdOutOfRange(_) => stats.refused_spawn_id += 1,
        SpawnError::TooFast => stats.refused_rate += 1,
        _ => stats.refused_tick += 1,
    }
}

/// One rifle shot to test: who fired, from where, which way, its number and the view it
/// claims.
#[derive(Debug, Clone, Copy)]
struct RifleShot {
    player: PlayerId,
    origin: [f32; 2],
    direction: [f32; 2],
    shot: u16,
    view: ViewClaim,
}

/// A rifle shot fired after its tick ([`ShooterScene::late_inputs`]).
#[derive(Debug, Clone, Copy)]
struct LateShot {
    /// The tick the input was for (its view claim is relative to it).
    input_tick: Tick,
    /// How much later than that it is fired: added to the trusted range.
    lateness: Duration,
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
            arena: Arc::new(Arena::tiled(config.arena_tiles)),
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
            late: Vec::new(),
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

    /// Inputs that reached the server after their tick was simulated without them
    /// (`(player, the input's tick, input)`: [`lagless_core::TickInputs::late`]). Their
    /// rifle shots are fired in the next [`step`](Self::step), as of their own tick:
    /// from where the shooter was then, with its cooldown counted from then, judged in
    /// the view they claim (the trusted range widened by how late they came, which the
    /// server measured). A shot the player saw hit is then not lost to a late packet
    /// (Source runs every user command it receives). Movement is not replayed: the
    /// server's guess for those ticks stands, and the client corrects itself from it.
    /// Launcher shots are dropped (the predicted projectile is withdrawn as before).
    pub fn late_inputs(&mut self, late: &[(PlayerId, Tick, ShooterInput)]) {
        self.late.extend(
            late.iter().filter(|(p, _, i)| {
                i.weapon() == Some(Weapon::Rifle) && self.players.contains_key(p)
            }),
        );
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
        // Late shots were fired before this tick's: their damage comes first.
        let mut damage = self.fire_late(tick);
        let fired = self.fire_checked(tick, &clean);
        damage.extend(self.resolve_fired(tick, fired));
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
                self.answer_dead_shot(tick, p, input.shot);
            }
        }
    }

    /// Rifle shot `shot` of player `p`, dead here: a miss, reported at once.
    fn answer_dead_shot(&mut self, tick: Tick, p: PlayerId, shot: u16) {
        self.outcomes.insert((p, shot), ShotOutcome::ShooterDead);
        self.reports
            .push((tick.0, p, HitReport { shot, target: None }));
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
                    count_refusal(stats, &e);
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

    /// Fires the late rifle shots ([`Self::late_inputs`]) at `tick`; the damage they do,
    /// by target.
    fn fire_late(&mut self, tick: Tick) -> Vec<(PlayerId, i32)> {
        let mut damage = Vec::new();
        let interval = Weapon::Rifle.interval_ticks(self.config.tick_hz);
        for (p, at, input) in std::mem::take(&mut self.late) {
            let (input, refused) = systems::sanitize(input);
            self.stats.refused_aim += u64::from(refused);
            let (Some(direction), Some(&e)) = (input.aim_dir(), self.players.get(&p)) else {
                continue;
            };
            let Ok((life, arms)) = self.world.query_one_mut::<(&Life, &mut Arms)>(e) else {
                continue;
            };
            if !life.alive {
                self.stats.dead_shooter_shots += 1;
                self.answer_dead_shot(tick, p, input.shot);
                continue;
            }
            // Ready at its own tick, and nothing fired since (a shot at or after `at`
            // moved the cooldown past it): the rate is what it would have been on time.
            if at.0 < arms.rifle_ready {
                self.stats.refused_rate += 1;
                continue;
            }
            match self
                .guard
                .check_fire(slot_of(p), tick, Weapon::Rifle.kind(), at)
            {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    count_refusal(&mut self.stats, &e);
                    continue;
                }
            }
            arms.rifle_ready = at.0 + interval;
            self.stats.late_shots += 1;
            let late_ms = f64::from(tick.0 - at.0) * 1000.0 / f64::from(self.config.tick_hz);
            self.counters.entry(p).or_default().late_ms.push(late_ms);
            // From where the shooter was at its tick, as recorded for lag compensation.
            let origin = self
                .lagcomp
                .pose_at(p, f64::from(at.0))
                .map(|(pose, _)| [pose.position[0], pose.position[1]])
                .or_else(|| self.player(p).map(|s| s.position));
            let Some(origin) = origin else { continue };
            let late =
                Duration::from_secs_f64(f64::from(tick.0 - at.0) * f64::from(self.config.dt()));
            let shot = LateShot {
                input_tick: at,
                lateness: late,
            };
            let rifle = RifleShot {
                player: p,
                origin,
                direction,
                shot: input.shot,
                view: input.view,
            };
            if let Some(t) = self.rifle_shot(tick, rifle, Some(shot)) {
                damage.push((t, RIFLE_DAMAGE));
            }
        }
        damage
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
                    if let Some(t) = self.rifle_shot(
                        tick,
                        RifleShot {
                            player,
                            origin,
                            direction,
                            shot,
                            view,
                        },
                        None,
                    ) {
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
        rifle: RifleShot,
        late: Option<LateShot>,
    ) -> Option<PlayerId> {
        let RifleShot {
            player,
            origin,
            direction,
            shot,
            view,
        } = rifle;
        let tick_hz = self.config.tick_hz;
        let c = self.counters.entry(player).or_default();
        c.rifle_shots += 1;
        // The claim is relative to the input's own tick.
        let input_tick = late.map_or(tick, |l| l.input_tick);
        let claimed_view = if self.config.lag_compensation {
            view.view(input_tick)
        } else {
            f64::from(input_tick.0)
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
        } + late.map_or(Duration::ZERO, |l| l.lateness);
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
