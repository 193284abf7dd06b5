//! Runs `examples/projectiles.rs` over the emulated `mobile` link with three clients and
//! measures what issue 49 asks of spawns and despawns: no frame draws a shot with another
//! generation's state, interpolated shots are shown from their spawn tick to their
//! despawn tick as the render tick reaches them, every replicated entity has its
//! `Transform` from its first frame, components change only when their value does, and
//! the final scores agree with the server's.
#[allow(dead_code)]
#[path = "../examples/projectiles.rs"]
mod projectiles;

use lagless_bevy::bevy::prelude::*;
use lagless_bevy::{
    Interpolated, InterpolationStatus, NetGeneration, NetId, NetSystems, PredictionStatus, SimTick,
};
use projectiles::{FIRING, Player, Score, Serial, Shot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The server's shots: serial to (the first tick whose state holds it, the first whose
/// state does not).
#[derive(Resource, Clone, Default)]
struct Lives(Arc<Mutex<LifeMap>>);

/// Serial to (spawn tick, despawn tick).
type LifeMap = BTreeMap<i32, (u32, Option<u32>)>;

/// A client's view, frame by frame.
#[derive(Default)]
struct Seen {
    /// (render tick, serials of the interpolated shots shown).
    frames: Vec<(f64, BTreeSet<i32>)>,
    /// Per Bevy entity, the serial and generation it first showed.
    first: BTreeMap<Entity, (i32, u32)>,
    /// Shot frames whose entity showed another shot's serial or generation.
    other_generation: u64,
    /// Shot frames.
    shot_frames: u64,
    /// Frames in which a replicated entity had no `Transform`.
    lacking_transform: u64,
    /// `Changed<Score>` seen with the value as it was (not a real change).
    changed_unchanged: u64,
    /// Real score changes seen.
    score_changes: u64,
    last_score: BTreeMap<Entity, i32>,
}

#[derive(Resource, Clone, Default)]
struct Shared(Arc<Mutex<Seen>>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn watch(
    shared: Res<Shared>,
    status: Res<InterpolationStatus>,
    shots: Query<(Entity, &Serial, &NetGeneration, Has<Interpolated>), With<Shot>>,
    replicated: Query<Has<Transform>, With<NetId>>,
    scores: Query<(Entity, Ref<Score>), With<Player>>,
) {
    let mut seen = lock(&shared.0);
    let seen = &mut *seen;
    if replicated.iter().any(|has| !has) {
        seen.lacking_transform += 1;
    }
    let mut shown = BTreeSet::new();
    for (e, serial, generation, interpolated) in &shots {
        seen.shot_frames += 1;
        let first = *seen.first.entry(e).or_insert((serial.0, generation.0));
        if first != (serial.0, generation.0) {
            seen.other_generation += 1;
        }
        if interpolated {
            shown.insert(serial.0);
        }
    }
    if let Some(rt) = status.render_tick {
        seen.frames.push((rt, shown));
    }
    for (e, score) in &scores {
        match seen.last_score.insert(e, score.0) {
            Some(v) if v != score.0 => seen.score_changes += 1,
            Some(_) if score.is_changed() => seen.changed_unchanged += 1,
            _ => {}
        }
    }
}

struct Run {
    seen: Vec<Shared>,
    rollbacks: Vec<u64>,
    lives: LifeMap,
    server_scores: Vec<(u32, i32)>,
    client_scores: Vec<Vec<(u32, i32)>>,
}

fn run(seed: u64) -> Run {
    let lives = Lives::default();
    let (mut seen, mut rollbacks) = (Vec::new(), Vec::new());
    let (mut server_scores, mut client_scores) = (Vec::new(), Vec::new());
    projectiles::play(
        "mobile",
        seed,
        (3, u64::from(FIRING) + 4, true),
        |server, clients| {
            if seen.is_empty() {
                server.insert_resource(lives.clone());
                server.add_observer(
                    |add: On<Add, Serial>, q: Query<&Serial>, tick: Res<SimTick>, l: Res<Lives>| {
                        if let Ok(s) = q.get(add.entity) {
                            lock(&l.0).insert(s.0, (tick.0, None));
                        }
                    },
                );
                server.add_observer(
                    |rm: On<Remove, Serial>,
                     q: Query<&Serial>,
                     tick: Res<SimTick>,
                     l: Res<Lives>| {
                        if let Ok(s) = q.get(rm.entity)
                            && let Some(life) = lock(&l.0).get_mut(&s.0)
                        {
                            life.1 = Some(tick.0);
                        }
                    },
                );
                for c in clients.iter_mut() {
                    let shared = Shared::default();
                    seen.push(shared.clone());
                    c.insert_resource(shared)
                        .add_systems(PostUpdate, watch.after(NetSystems::SyncTransform));
                }
            }
            server_scores = projectiles::scores(server);
            client_scores = clients.iter_mut().map(projectiles::scores).collect();
            rollbacks = clients
                .iter()
                .map(|c| c.world().resource::<PredictionStatus>().stats.rollbacks)
                .collect();
        },
    );
    let lives = lock(&lives.0).clone();
    Run {
        seen,
        rollbacks,
        lives,
        server_scores,
        client_scores,
    }
}

/// Interpolated shot frames against the server's lives: `early` counts the frames that
/// showed a shot before its spawn tick or had dropped it before its despawn tick (what
/// the target bounds); `late` those that showed it late or kept it past its
/// despawn tick (a snapshot not yet arrived: the client cannot know sooner); `total` the
/// frames in which a shot was alive or shown.
fn timing(seen: &Seen, lives: &LifeMap) -> [u64; 3] {
    let [mut early, mut late, mut total] = [0; 3];
    let mut appeared = BTreeSet::new();
    for (rt, shown) in &seen.frames {
        for (serial, (spawn, despawn)) in lives {
            let started = *rt >= f64::from(*spawn);
            let alive = started && despawn.is_none_or(|d| *rt < f64::from(d));
            let drawn = shown.contains(serial);
            if drawn {
                appeared.insert(*serial);
            }
            if alive || drawn {
                total += 1;
                let gone_early = alive && !drawn && appeared.contains(serial);
                if (drawn && !started) || gone_early {
                    early += 1;
                } else if alive != drawn {
                    late += 1;
                }
            }
        }
    }
    [early, late, total]
}

#[test]
fn shots_spawn_and_despawn_on_time_with_their_generation() {
    for seed in 1..=3 {
        let r = run(seed);
        assert!(r.lives.len() > 40, "shots fired: {}", r.lives.len());
        let reused = r.lives.values().filter(|l| l.1.is_some()).count();
        for (k, shared) in r.seen.iter().enumerate() {
            let seen = lock(&shared.0);
            let [early, late, total] = timing(&seen, &r.lives);
            let pct = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
            println!(
                "seed {seed} client {}: shot frames {}, other generation {}, before spawn or gone before despawn {early}/{total} ({:.2}%), late {late} ({:.2}%), lacking Transform {}, Changed<Score> without a change {} (changes {}, rollbacks {}), scores {:?} vs server {:?} ({} shots, {reused} despawned)",
                k + 1,
                seen.shot_frames,
                seen.other_generation,
                pct(early),
                pct(late),
                seen.lacking_transform,
                seen.changed_unchanged,
                seen.score_changes,
                r.rollbacks[k],
                r.client_scores[k],
                r.server_scores,
                r.lives.len(),
            );
            assert!(seen.shot_frames > 1000);
            assert_eq!(
                seen.other_generation, 0,
                "frames drawn from another generation"
            );
            assert!(pct(early) <= 0.5, "shot frames early: {:.2}%", pct(early));
            assert_eq!(seen.lacking_transform, 0, "frames lacking a Transform");
            assert!(seen.score_changes > 0);
            assert!(
                seen.changed_unchanged <= r.rollbacks[k],
                "Changed<Score> without a change: {}",
                seen.changed_unchanged
            );
            assert_eq!(r.client_scores[k], r.server_scores, "final scores");
        }
    }
}

/// The own player's error, cm, p99 per client after a 2 s warm-up: where it is shown
/// (`NetPose`, corrections smoothed) at the predicted tick against the server's at that
/// tick.
fn own_error_p99(seed: u64, scoring: bool) -> Vec<f32> {
    use lagless_bevy::{Controlled, NetPose, ServerStatus};
    let mut truth: BTreeMap<(u32, u32), Vec2> = BTreeMap::new();
    let mut shown: Vec<Vec<((u32, u32), Vec2)>> = vec![Vec::new(); 3];
    let setup = (3, u64::from(FIRING) + 4, scoring);
    projectiles::play("mobile", seed, setup, |server, clients| {
        let tick = server.world().resource::<ServerStatus>().tick;
        let w = server.world_mut();
        let mut q = w.query_filtered::<(&NetId, &projectiles::Position), With<Player>>();
        truth.extend(q.iter(w).map(|(id, p)| ((tick, id.0), p.0)));
        for (c, out) in clients.iter_mut().zip(&mut shown) {
            let Some(t) = c.world().resource::<PredictionStatus>().predicted_tick else {
                continue;
            };
            let w = c.world_mut();
            let mut q = w.query_filtered::<(&NetId, &NetPose), With<Controlled>>();
            out.extend(
                q.iter(w)
                    .map(|(id, p)| ((t, id.0), p.translation.truncate())),
            );
        }
    });
    shown
        .iter()
        .map(|s| {
            let mut e: Vec<f32> = s
                .iter()
                .filter(|((t, _), _)| *t > 2 * projectiles::HZ)
                .filter_map(|(k, p)| Some(truth.get(k)?.distance(*p) * 100.0))
                .collect();
            e.sort_by(f32::total_cmp);
            e.get(e.len().saturating_sub(1) * 99 / 100)
                .copied()
                .unwrap_or(f32::NAN)
        })
        .collect()
}

/// The last target: own-player error p99 with server-only score changes within
/// 10% of the same game without them. Each point is a rollback (the score is compared
/// exactly); it used to cost the own player up to 37 cm at p99 (seed 3; 0.47 without
/// scores): the rollback reloaded the server's rounded position, the client priced that
/// centimetre as prediction error and cut its lead, and starved inputs were then guessed
/// wrong (docs/bevy.md).
#[test]
fn server_only_scores_cost_the_own_player_nothing() {
    for seed in 1..=3 {
        let (with, without) = (own_error_p99(seed, true), own_error_p99(seed, false));
        println!(
            "seed {seed}: own-player p99 cm with server-only scores {with:?}, without {without:?}"
        );
        for (a, b) in with.iter().zip(&without) {
            assert!(a.is_finite() && b.is_finite());
            assert!((a - b).abs() <= 0.1 * b, "{a} vs {b}");
        }
    }
}
