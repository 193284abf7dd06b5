//! The client's predicted world ([`ShooterRollback`]): its own player and projectiles.

use super::systems::{self, Body, FireEvent, Life, Projectile};
use super::{
    Arena, HIT_RADIUS, PROJECTILE_LIFE, PlayerId, PlayerState, RESPAWN_SECS, RIFLE_RANGE,
    ShooterConfig, ShooterInput, ShooterKnown, TOLERANCE, Weapon, slot_of,
};
use lagless_core::{Rollback, Tick, TickRate};
use lagless_replication::Pose;
use lagless_replication::hits::{HitConfig, HitReportCodec, HitTracker};
use lagless_replication::lagcomp::ViewClaim;
use lagless_replication::spawns::{ServerSpawn, SpawnConfig, SpawnRegistry};
use lagless_wire::BitReader;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// why ([`ShooterScene::shot_outcome`](super::ShooterScene::shot_outcome)). One
    /// entry per rejection, as many as `hits.rejected`.
    pub rejected_shots: Vec<u16>,
}

/// The client's predicted world: its own player and its own projectiles, nothing
/// else (the article's partial simulation).
pub struct ShooterRollback {
    config: ShooterConfig,
    arena: Arc<Arena>,
    player: PlayerId,
    pub(super) world: hecs::World,
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
