//! The shooter scene (`lagless_scenes::shooter`) in the lab: each client
//! predicts its own player and projectiles only, shows the others interpolated, and a
//! bot per client shoots at what that client shows. Hit reports ride in front of each
//! snapshot ([`LabScene::EVENTS_DOWN`]); each input carries the client's view
//! ([`LabScene::complete_input`]) and the ids of the projectiles it spawns.
//!
//! Client 1 is the one `--lie-rewind-ms` makes lie.
//!
//! # The allowance (`--lagcomp-window relative`, the default)
//!
//! Before each tick the server gives every player an allowance: how old that client's
//! view is when its input is applied, from what the server itself measures
//! ([`ServerLatency`]), and trusts claims back to the allowance plus the window. An
//! input applied at tick `T` was made when the client's newest state was about a
//! one-way trip old and it showed that state an interpolation delay later; it then took
//! the way up and waited in the server's buffer. So:
//!
//! * the snapshot round trip (sent to acknowledged: both ways, plus the client's wait
//!   until its next input packet carries the acknowledgement);
//! * the input slack (how early the input arrived before its tick: the wait in the
//!   buffer, i.e. the input lead beyond the way up), less one tick: the slack runs to
//!   the step of tick `N`, while the rewind counts from state `N`, made a tick earlier;
//! * [`INTERPOLATION_SNAPSHOTS`] snapshot intervals for interpolation: the least any
//!   interpolating client needs (a pair to interpolate between, and one interval for
//!   arrival jitter). A client's adaptive buffer may hold more on a jittery link; the
//!   server cannot verify that, so the rest falls under the window.
//!
//! What a client could do to inflate it: acknowledge snapshots late (which also costs
//! it bandwidth: deltas then start from older baselines) or send inputs early (which
//! is real latency: it commits to them earlier). The compensator caps the allowance at
//! its `max_allowance` (1 s, Source's `sv_maxunlag`) whatever happens, and a lie beyond
//! what was measured gains at most the window (`lagcomp.excess_ms_*`).

use crate::config::{RunConfig, ScriptChoice};
use crate::metrics::{Metric, Report, percentile};
use crate::runner::RunError;
use crate::scene::{LabScene, PlayerId, RawEntity, Script, ServerLatency};
use lagless_core::interpolation::Pose;
use lagless_core::{Tick, TickRate};
use lagless_replication::hits::HitStats;
use lagless_replication::spawns::SpawnStats;
use lagless_replication::{ReplicationClient, ReplicationError, ReplicationServer, Schema};
use lagless_scenes::shooter::bot::Bot;
use lagless_scenes::shooter::replicate;
use lagless_scenes::shooter::{
    Arena, PlayerState, ShooterConfig, ShooterInput, ShooterKnown, ShooterRollback, ShooterScene,
    ShotOutcome,
};
use std::sync::Arc;
use std::time::Duration;

/// Snapshot intervals of interpolation delay the allowance includes: see the module
/// documentation.
pub const INTERPOLATION_SNAPSHOTS: u32 = 2;

/// The allowance for a client whose latency the server measured as `l`: round trip,
/// input slack and [`INTERPOLATION_SNAPSHOTS`] snapshot intervals, less one tick (the
/// slack runs to the step of the input's tick, the rewind from the state that step
/// starts from, stamped a tick earlier). Zero before any round trip is measured (the
/// absolute window until then).
pub fn allowance(l: &ServerLatency) -> Duration {
    let Some(rtt) = l.rtt else {
        return Duration::ZERO;
    };
    rtt.saturating_add(l.input_slack.unwrap_or_default())
        .saturating_add(l.snapshot_interval.saturating_mul(INTERPOLATION_SNAPSHOTS))
        .saturating_sub(l.tick)
}

/// The shooter scene.
pub struct Shooter {
    /// The server's world.
    pub scene: ShooterScene,
}

/// What both ends know before the run: the arena and the settings, and client 1's lie.
#[derive(Clone)]
pub struct ShooterSetup {
    config: ShooterConfig,
    arena: Arc<Arena>,
    lie: Duration,
}

/// The bot as the lab's [`Script`].
pub struct ShooterBot(pub Bot);

/// The id of entry `j` of [`LabScene::shown`]'s list for `own`: the players in id
/// order, skipping `own`.
fn shown_id(own: PlayerId, j: usize) -> PlayerId {
    let p = j as PlayerId + 1;
    if p < own { p } else { p + 1 }
}

fn shown_positions(
    own: PlayerId,
    shown: &[Pose],
) -> impl Iterator<Item = (PlayerId, Option<[f32; 2]>)> + '_ {
    shown.iter().enumerate().map(move |(j, p)| {
        let x = p.planar_position();
        (
            shown_id(own, j),
            x.iter().all(|v| v.is_finite()).then_some(x),
        )
    })
}

impl Script<Shooter> for ShooterBot {
    fn input(&mut self, tick: u64, seen: Option<&PlayerState>) -> ShooterInput {
        self.0.input(tick, seen)
    }

    fn view(&mut self, own: PlayerId, _render_tick: f64, shown: &[Pose]) {
        self.0.observe(shown_positions(own, shown));
    }
}

fn player_pose(s: &PlayerState) -> Pose {
    Pose::planar(s.position, s.aim).with_velocity([s.velocity[0], s.velocity[1], 0.0], [0.0; 3])
}

impl LabScene for Shooter {
    type Input = ShooterInput;
    type Known = ShooterKnown;
    type World = ShooterRollback;
    type Setup = ShooterSetup;
    type Seen = PlayerState;

    fn build(config: &RunConfig) -> Result<(Self, ShooterSetup), RunError> {
        let s = config.shooter;
        if s.window.is_zero() {
            return Err(RunError::Invalid(
                "the lag compensation window must be positive".into(),
            ));
        }
        let scene_config = ShooterConfig {
            tick_hz: config.server.tick_hz,
            lag_compensation: s.lag_compensation,
            window: s.window,
            relative_window: s.relative_window,
            arena_tiles: s.arena_tiles,
            ..ShooterConfig::default()
        };
        let scene = ShooterScene::new(scene_config);
        let setup = ShooterSetup {
            config: scene_config,
            arena: Arc::clone(scene.arena()),
            lie: s.lie_rewind,
        };
        Ok((Self { scene }, setup))
    }

    fn add_player(&mut self, player: PlayerId) {
        self.scene.add_player(player);
    }

    fn server_latency(&mut self, player: PlayerId, latency: ServerLatency) {
        self.scene.set_allowance(player, allowance(&latency));
    }

    fn step(&mut self, inputs: &[(PlayerId, ShooterInput)]) {
        // Without a tick the scene goes on from its own count.
        let now = self.scene.tick();
        self.scene.step(now, inputs);
    }

    fn step_at(&mut self, tick: Tick, inputs: &[(PlayerId, ShooterInput)]) {
        self.scene.step(tick, inputs);
    }

    fn late_inputs(&mut self, late: &[(PlayerId, Tick, ShooterInput)]) {
        self.scene.late_inputs(late);
    }

    fn schema(setup: &ShooterSetup) -> Schema {
        replicate::schema_for(setup.arena.half_size())
    }

    fn capture(&self, server: &mut ReplicationServer) -> Result<(), ReplicationError> {
        replicate::capture(&self.scene, server)
    }

    fn player_entity(_: &ShooterSetup, player: PlayerId) -> Option<u32> {
        Some(player)
    }

    fn player_position(&self, player: PlayerId) -> Option<[f32; 3]> {
        self.scene
            .player(player)
            .map(|s| [s.position[0], s.position[1], 0.0])
    }

    fn others(&self, _out: &mut Vec<[f32; 3]>) {
        // Projectiles come and go: they are not in the interpolated frame's fixed
        // list, which holds the other players only.
    }

    fn raw(&self, out: &mut Vec<RawEntity>) {
        for (p, s) in self.scene.players() {
            out.push(RawEntity {
                id: p,
                floats: vec![
                    s.position[0],
                    s.position[1],
                    s.velocity[0],
                    s.velocity[1],
                    s.aim,
                    s.health as f32,
                ],
                flags: vec![s.alive],
            });
        }
        for p in self.scene.projectiles() {
            out.push(RawEntity {
                id: p.id,
                floats: vec![
                    p.position[0],
                    p.position[1],
                    p.velocity[0],
                    p.velocity[1],
                    p.owner as f32,
                    p.spawn_tick as f32,
                ],
                flags: Vec::new(),
            });
        }
    }

    fn known(setup: &ShooterSetup, client: &ReplicationClient, tick: Tick) -> ShooterKnown {
        replicate::known(client, tick, setup.config.tick_hz)
    }

    fn is_whole(_: &ShooterKnown) -> bool {
        true
    }

    fn shown_ids(_: &ShooterSetup, own: PlayerId, players: PlayerId) -> Vec<u32> {
        (1..=players).filter(|&p| p != own).collect()
    }

    fn shown_in(
        _: &ShooterSetup,
        frame: &lagless_replication::Frame,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<Pose> {
        // As `shown`: a dead player is not drawn. The frame's fields in declaration
        // order: position, velocity, aim, health, alive.
        let missing = Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]);
        (1..=players)
            .filter(|&p| p != own)
            .map(|p| {
                let Some(mut r) = frame.reader(p) else {
                    return missing;
                };
                let (position, velocity, aim) = (r.vec2(), r.vec2(), r.angle());
                let (_health, alive) = (r.int(), r.bool());
                if alive {
                    Pose::planar(position, aim)
                        .with_velocity([velocity[0], velocity[1], 0.0], [0.0; 3])
                } else {
                    missing
                }
            })
            .collect()
    }

    fn shown(
        _: &ShooterSetup,
        known: &ShooterKnown,
        own: PlayerId,
        players: PlayerId,
    ) -> Vec<Pose> {
        // A dead player is not drawn (NaN), so nobody aims at or hits it on screen.
        let missing = Pose::new([f32::NAN; 3], [0.0, 0.0, 0.0, 1.0]);
        (1..=players)
            .filter(|&p| p != own)
            .map(|p| {
                known
                    .player(p)
                    .filter(|s| s.alive)
                    .map_or(missing, player_pose)
            })
            .collect()
    }

    fn seen_in(known: &ShooterKnown, player: PlayerId) -> Option<PlayerState> {
        known.player(player).copied()
    }

    fn seen_pose(seen: &PlayerState) -> Pose {
        player_pose(seen)
    }

    fn world(
        setup: &ShooterSetup,
        player: PlayerId,
        _config: &RunConfig,
        naive: bool,
    ) -> Option<ShooterRollback> {
        // Partial simulation: the own player and its projectiles; there is no bigger
        // naive world to time against.
        if naive {
            return None;
        }
        let mut w = ShooterRollback::new(setup.config, Arc::clone(&setup.arena), player)?;
        if player == 1 && !setup.lie.is_zero() {
            let rate = TickRate::new(setup.config.tick_hz.max(1));
            w.set_lie(rate.ticks_in(setup.lie));
        }
        Some(w)
    }

    fn predicted(world: &ShooterRollback) -> Option<PlayerState> {
        world.player_state()
    }

    fn predicted_entities(world: &ShooterRollback) -> usize {
        world.predicted_entities()
    }

    fn script(
        config: &RunConfig,
        setup: &ShooterSetup,
        seed: u64,
    ) -> Result<Box<dyn Script<Self>>, RunError> {
        match &config.script {
            ScriptChoice::Named(name) if name == "roam" || name == "duel" => {}
            ScriptChoice::Named(name) => {
                return Err(RunError::UnknownScript(format!("{name} (known: duel)")));
            }
            ScriptChoice::Custom(_) => {
                return Err(RunError::UnknownScript(
                    "custom scripts drive cubes; the shooter has duel".into(),
                ));
            }
        }
        Ok(Box::new(ShooterBot(Bot::new(
            Arc::clone(&setup.arena),
            seed,
            setup.config.tick_hz,
        ))))
    }

    const GROUND_AXES: [usize; 2] = [0, 1];

    fn obstacles(&self, out: &mut Vec<([f32; 2], [f32; 2])>) {
        out.extend(
            self.scene
                .arena()
                .blocks()
                .iter()
                .map(|b| (b.centre, b.half)),
        );
    }

    /// W/A/S/D move (W toward -y, up on `lagless view`'s page), aiming where the player
    /// moves. Firing stays the bot's: the page has no mouse to aim with yet.
    fn input_from_keys(keys: crate::scene::Keys) -> Option<ShooterInput> {
        let x = f32::from(u8::from(keys.right)) - f32::from(u8::from(keys.left));
        let y = f32::from(u8::from(keys.back)) - f32::from(u8::from(keys.forward));
        let input = ShooterInput::moving(x, y);
        Some(if x != 0.0 || y != 0.0 {
            input.with_aim([x, y])
        } else {
            input
        })
    }

    fn moves(input: &ShooterInput) -> bool {
        input.keys != 0
    }

    fn show(world: &mut ShooterRollback, _tick: Tick, shown: &[Pose]) {
        let own = world.player();
        world.show(shown_positions(own, shown));
    }

    fn complete_input(
        world: &mut ShooterRollback,
        tick: Tick,
        render_tick: Option<f64>,
        input: &mut ShooterInput,
    ) {
        world.complete_input(tick, render_tick, input);
    }

    const EVENTS_DOWN: bool = true;

    fn events_down(&self, player: PlayerId) -> Vec<u8> {
        self.scene.reports_for(player)
    }

    fn events_received(world: &mut ShooterRollback, bytes: &[u8], _rtt: Option<Duration>) {
        // The tracker's deadline follows the client's own lead over the server state
        // (set as states arrive), which the bare round trip underestimates.
        world.receive_reports(bytes);
    }

    fn report_worlds(worlds: &[&ShooterRollback], r: &mut Report) {
        let mut hits = HitStats::default();
        let mut spawns = SpawnStats::default();
        let mut handover = Vec::new();
        let mut withdrawn = 0;
        for w in worlds {
            let h = w.hits().stats();
            let s = w.spawns().stats();
            add_hits(&mut hits, h);
            add_spawns(&mut spawns, s);
            handover.extend_from_slice(&w.counters.handover_cm);
            withdrawn += w.counters.withdrawn;
            let k = format!("hits.client{}", w.player());
            r.set(&format!("{k}.shown"), Metric::Count(h.shown));
            r.number(
                &format!("{k}.confirmed_pct"),
                resolved(h).then(|| h.confirmed_pct()),
            );
        }
        r.set("hits.shown", Metric::Count(hits.shown));
        r.number(
            "hits.confirmed_pct",
            resolved(&hits).then(|| hits.confirmed_pct()),
        );
        r.number(
            "hits.server_only_pct",
            (hits.confirmed + hits.server_only > 0).then(|| hits.server_only_pct()),
        );
        r.set("hits.rejected", Metric::Count(hits.rejected));
        r.set("hits.expired", Metric::Count(hits.expired));
        r.set("hits.late", Metric::Count(hits.late));
        r.set("spawns.predicted", Metric::Count(spawns.predicted));
        r.number(
            "spawns.matched_pct",
            (spawns.matched + spawns.orphaned > 0).then(|| spawns.matched_pct()),
        );
        r.set("spawns.orphaned", Metric::Count(spawns.orphaned));
        r.set("spawns.id_collisions", Metric::Count(spawns.id_collisions));
        r.number("spawns.handover_cm_p99", percentile(&handover, 99.0));
        r.set("spawns.withdrawn", Metric::Count(withdrawn));
        r.set(
            "spawns.unmatched_server",
            Metric::Count(spawns.unmatched_server),
        );
    }

    fn report_joint(&self, worlds: &[&ShooterRollback], r: &mut Report) {
        let why = Rejections::of(&self.scene, worlds);
        r.set("hits.rejected_target_dead", Metric::Count(why.target_dead));
        r.set(
            "hits.rejected_shooter_dead",
            Metric::Count(why.shooter_dead),
        );
        r.set("hits.rejected_miss", Metric::Count(why.miss));
        r.set(
            "hits.rejected_miss_clamped",
            Metric::Count(why.miss_clamped),
        );
        r.set(
            "hits.rejected_other_target",
            Metric::Count(why.other_target),
        );
        r.set("hits.rejected_unknown", Metric::Count(why.unknown));
        // Confirmed among the shown hits whose shooter and target were both alive on
        // the server (kill trades set aside): what lag compensation itself decides.
        let mut hits = HitStats::default();
        for w in worlds {
            add_hits(&mut hits, w.hits().stats());
        }
        let trades = why.target_dead + why.shooter_dead;
        let judged = (hits.confirmed + hits.rejected + hits.expired).saturating_sub(trades);
        r.number(
            "hits.confirmed_alive_pct",
            (judged > 0).then(|| 100.0 * hits.confirmed as f64 / judged as f64),
        );
    }

    fn report(&self, r: &mut Report) {
        let lc = self.scene.lagcomp().stats();
        let mut rewinds = Vec::new();
        let mut claimed = Vec::new();
        let mut excess = Vec::new();
        let mut allowances = Vec::new();
        let mut late = Vec::new();
        for (p, c) in &self.scene.counters {
            late.extend_from_slice(&c.late_ms);
            rewinds.extend_from_slice(&c.rewind_ms);
            claimed.extend_from_slice(&c.claimed_ms);
            excess.extend_from_slice(&c.excess_ms);
            allowances.extend_from_slice(&c.allowance_ms);
            let k = format!("hits.client{p}");
            r.set(&format!("{k}.rifle_shots"), Metric::Count(c.rifle_shots));
            r.number(
                &format!("{k}.hit_rate_pct"),
                (c.rifle_shots > 0).then(|| 100.0 * c.rifle_hits as f64 / c.rifle_shots as f64),
            );
            let k = format!("lagcomp.client{p}");
            r.set(&format!("{k}.clamped"), Metric::Count(c.clamped));
            r.number(
                &format!("{k}.rewind_ms_p99"),
                percentile(&c.rewind_ms, 99.0),
            );
            r.number(
                &format!("{k}.rewind_ms_p50"),
                percentile(&c.rewind_ms, 50.0),
            );
            r.number(
                &format!("{k}.excess_ms_p99"),
                percentile(&c.excess_ms, 99.0),
            );
            r.number(
                &format!("{k}.allowance_ms_p50"),
                percentile(&c.allowance_ms, 50.0),
            );
        }
        r.number("lagcomp.excess_ms_p99", percentile(&excess, 99.0));
        r.number("lagcomp.excess_ms_p50", percentile(&excess, 50.0));
        r.number("lagcomp.allowance_ms_p50", percentile(&allowances, 50.0));
        r.number("lagcomp.allowance_ms_p99", percentile(&allowances, 99.0));
        r.set(
            "lagcomp.allowance_capped",
            Metric::Count(lc.allowance_capped),
        );
        r.set(
            "lagcomp.window_mode",
            Metric::Text(
                if self.scene.config().relative_window {
                    "relative"
                } else {
                    "absolute"
                }
                .into(),
            ),
        );
        r.number("lagcomp.rewind_ms_p99", percentile(&rewinds, 99.0));
        r.number("lagcomp.rewind_ms_p50", percentile(&rewinds, 50.0));
        r.number("lagcomp.claimed_ms_p50", percentile(&claimed, 50.0));
        r.number("lagcomp.claimed_ms_p99", percentile(&claimed, 99.0));
        r.set("lagcomp.clamped", Metric::Count(lc.clamped()));
        r.set("lagcomp.refused", Metric::Count(lc.refused));
        r.set("lagcomp.rewinds", Metric::Count(lc.rewinds));
        r.set(
            "lagcomp.enabled",
            Metric::Text(
                if self.scene.config().lag_compensation {
                    "on"
                } else {
                    "off"
                }
                .into(),
            ),
        );
        let g = self.scene.guard().stats();
        r.set(
            "spawns.refused",
            Metric::Count(g.refused_id + g.refused_rate + g.refused_tick),
        );
        let s = &self.scene.stats;
        r.set("shooter.refused_aim", Metric::Count(s.refused_aim));
        r.set("shooter.refused_rate", Metric::Count(s.refused_rate));
        r.set(
            "shooter.refused_spawn_id",
            Metric::Count(s.refused_spawn_id),
        );
        r.set("shooter.refused_tick", Metric::Count(s.refused_tick));
        r.set("shooter.kills", Metric::Count(s.kills));
        r.set("hits.dead_target_shots", Metric::Count(s.dead_target_shots));
        r.set(
            "hits.dead_shooter_shots",
            Metric::Count(s.dead_shooter_shots),
        );
        r.set("hits.late_shots", Metric::Count(s.late_shots));
        r.number("hits.late_shot_ms_p99", percentile(&late, 99.0));
        let (shots, hits): (u64, u64) = self
            .scene
            .counters
            .values()
            .fold((0, 0), |(a, b), c| (a + c.rifle_shots, b + c.rifle_hits));
        r.set("shooter.rifle_shots", Metric::Count(shots));
        r.number(
            "shooter.rifle_hit_rate_pct",
            (shots > 0).then(|| 100.0 * hits as f64 / shots as f64),
        );
        let (fired, landed): (u64, u64) = self.scene.counters.values().fold((0, 0), |(a, b), c| {
            (a + c.projectiles, b + c.projectile_hits)
        });
        r.set("shooter.projectiles", Metric::Count(fired));
        r.set("shooter.projectile_hits", Metric::Count(landed));
    }
}

/// Why the server rejected the hits clients showed, from each client's rejected shot
/// numbers and the server's outcome of each shot.
#[derive(Debug, Default)]
struct Rejections {
    target_dead: u64,
    shooter_dead: u64,
    miss: u64,
    miss_clamped: u64,
    other_target: u64,
    unknown: u64,
}

impl Rejections {
    fn of(scene: &ShooterScene, worlds: &[&ShooterRollback]) -> Self {
        let mut r = Self::default();
        for w in worlds {
            for &shot in &w.counters.rejected_shots {
                match scene.shot_outcome(w.player(), shot) {
                    Some(ShotOutcome::TargetDead) => r.target_dead += 1,
                    Some(ShotOutcome::ShooterDead) => r.shooter_dead += 1,
                    Some(ShotOutcome::Miss { clamped }) => {
                        r.miss += 1;
                        r.miss_clamped += u64::from(clamped);
                    }
                    // The server hit someone else than the client showed.
                    Some(ShotOutcome::Hit(_)) => r.other_target += 1,
                    None => r.unknown += 1,
                }
            }
        }
        r
    }
}

fn resolved(h: &HitStats) -> bool {
    h.confirmed + h.rejected + h.expired > 0
}

fn add_hits(a: &mut HitStats, b: &HitStats) {
    a.shown += b.shown;
    a.confirmed += b.confirmed;
    a.rejected += b.rejected;
    a.expired += b.expired;
    a.server_only += b.server_only;
    a.late += b.late;
    a.duplicates += b.duplicates;
}

fn add_spawns(a: &mut SpawnStats, b: &SpawnStats) {
    a.predicted += b.predicted;
    a.matched += b.matched;
    a.orphaned += b.orphaned;
    a.despawned += b.despawned;
    a.unmatched_server += b.unmatched_server;
    a.id_collisions += b.id_collisions;
    a.refused += b.refused;
}
