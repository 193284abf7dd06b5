//! Unit tests of the shooter's systems, input and prediction.

use super::systems::Body;
use super::*;
use lagless_core::{Input, Reader, Rollback, Tick, Writer};
use lagless_replication::lagcomp::ViewClaim;
use std::sync::Arc;

fn aim_at(from: [f32; 2], to: [f32; 2]) -> [f32; 2] {
    [to[0] - from[0], to[1] - from[1]]
}

#[test]
fn input_round_trips_and_refuses_unknown_fire() {
    let mut i = ShooterInput::moving(1.0, -1.0).with_aim([0.3, -0.7]);
    i.fire = 2;
    i.spawn_id = 123_456_789;
    i.view = ViewClaim::from_units(200);
    let mut w = Writer::new();
    i.encode(&mut w);
    let bytes = w.into_bytes();
    assert_eq!(ShooterInput::decode(&mut Reader::new(&bytes)), Ok(i));
    let mut bad = bytes.clone();
    bad[0] |= 0x30;
    assert!(ShooterInput::decode(&mut Reader::new(&bad)).is_err());
    for n in 0..bytes.len() {
        assert!(ShooterInput::decode(&mut Reader::new(&bytes[..n])).is_err());
    }
}

#[test]
fn rifle_hits_a_target_in_the_open_and_kills_it() {
    let mut s = ShooterScene::new(ShooterConfig::default());
    s.add_player(1);
    s.add_player(2);
    // Put both in the open, 5 m apart.
    let e1 = s.players[&1];
    let e2 = s.players[&2];
    s.world.get::<&mut Body>(e1).unwrap().position = [-5.0, 3.0];
    s.world.get::<&mut Body>(e2).unwrap().position = [0.0, 3.0];
    let mut t = 0;
    let needed = (MAX_HEALTH + RIFLE_DAMAGE - 1) / RIFLE_DAMAGE;
    for shot in 0..needed as u16 {
        let mut i = ShooterInput::default().with_aim(aim_at([-5.0, 3.0], [0.0, 3.0]));
        i.fire = 1;
        i.shot = shot;
        s.step(Tick(t), &[(1, i)]);
        t += 1;
        for _ in 0..6 {
            s.step(Tick(t), &[]);
            t += 1;
        }
    }
    assert_eq!(s.counters[&1].rifle_hits, needed as u64);
    assert!(!s.player(2).unwrap().alive);
    assert_eq!(s.stats.kills, 1);
    // Two seconds later it is back with full health.
    for _ in 0..70 {
        s.step(Tick(t), &[]);
        t += 1;
    }
    let p2 = s.player(2).unwrap();
    assert!(p2.alive && p2.health == MAX_HEALTH);
}

#[test]
fn nan_aim_and_fast_fire_and_foreign_ids_are_refused() {
    let mut s = ShooterScene::new(ShooterConfig::default());
    s.add_player(1);
    let mut nan = ShooterInput::default().with_aim([f32::NAN, 1.0]);
    nan.fire = 1;
    s.step(Tick(0), &[(1, nan)]);
    let mut inf = ShooterInput::default().with_aim([f32::INFINITY, 0.0]);
    inf.fire = 2;
    s.step(Tick(1), &[(1, inf)]);
    assert_eq!(s.stats.refused_aim, 2);
    assert!(s.player(1).unwrap().position.iter().all(|v| v.is_finite()));
    // Rifle every tick: one shot in each 6 accepted.
    for t in 2..14 {
        let mut i = ShooterInput::default().with_aim([1.0, 0.0]);
        i.fire = 1;
        s.step(Tick(t), &[(1, i)]);
    }
    assert_eq!(s.counters[&1].rifle_shots, 2);
    assert_eq!(s.stats.refused_rate, 10);
    // A projectile claimed with a server id, or player 2's range: refused.
    let space = s.config.id_space();
    let foreign = *space.range(1).unwrap().start();
    for (k, id) in [5, foreign].into_iter().enumerate() {
        let mut i = ShooterInput::default().with_aim([1.0, 0.0]);
        i.fire = 2;
        i.spawn_id = id;
        s.step(Tick(20 + 40 * k as u32), &[(1, i)]);
    }
    assert_eq!(s.stats.refused_spawn_id, 2);
    assert!(s.projectiles().is_empty());
    // An input for a player the scene lacks does nothing.
    s.step(Tick(100), &[(9, ShooterInput::moving(1.0, 0.0))]);
    assert_eq!(s.stats.unknown_player, 1);
}

#[test]
fn prediction_of_own_player_and_projectile_matches_the_server() {
    let config = ShooterConfig::default();
    let mut s = ShooterScene::new(config);
    s.add_player(1);
    let mut c = ShooterRollback::new(config, Arc::clone(s.arena()), 1).unwrap();
    let start = s.player(1).unwrap();
    c.load(
        &ShooterKnown {
            tick: 0,
            players: vec![(1, start)],
            projectiles: vec![],
        },
        None,
    );
    let id = *config.id_space().range(0).unwrap().start();
    let mut handed: Vec<systems::HandedOver> = Vec::new();
    for t in 0..40u32 {
        let mut i = ShooterInput::moving(1.0, 1.0).with_aim([1.0, 0.2]);
        if t == 3 {
            i.fire = 2;
            i.spawn_id = id;
        }
        c.advance(Tick(t), i);
        s.step(Tick(t), &[(1, i)]);
        let saved = c.save();
        let known = ShooterKnown {
            tick: t + 1,
            players: s.players().collect(),
            projectiles: s.projectiles(),
        };
        assert!(!c.diverged(&saved, &known), "tick {t}");
        c.confirmed(&known);
        handed.extend(c.world.query::<&systems::HandedOver>().iter().copied());
    }
    let st = c.spawns().stats();
    assert_eq!((st.predicted, st.matched, st.id_collisions), (1, 1, 0));
    // The handed-over projectile carried the server's id in a component added to it
    // (until it hit a wall and was removed).
    assert!(!handed.is_empty());
    assert!(handed.iter().all(|h| h.server_id == handed[0].server_id));
    assert!(config.id_space().is_server(handed[0].server_id));
    assert!(c.projectiles().is_empty(), "gone with the server's");
    assert!(
        c.counters.handover_cm[0] < 0.5,
        "{:?}",
        c.counters.handover_cm
    );
}

#[test]
fn the_client_predicts_its_own_respawn() {
    let config = ShooterConfig::default();
    let mut s = ShooterScene::new(config);
    s.add_player(1);
    s.add_player(2);
    let e1 = s.players[&1];
    let e2 = s.players[&2];
    s.world.get::<&mut Body>(e1).unwrap().position = [0.0, 3.0];
    s.world.get::<&mut Body>(e2).unwrap().position = [-5.0, 3.0];
    let mut c = ShooterRollback::new(config, Arc::clone(s.arena()), 1).unwrap();
    let mut t = 0;
    // Player 2 shoots player 1 dead.
    while s.player(1).unwrap().alive {
        let mut i = ShooterInput::default().with_aim([1.0, 0.0]);
        i.fire = 1;
        s.step(Tick(t), &[(2, i)]);
        t += 1;
        assert!(t < 1000);
    }
    // The client learns of it, and predicts on from there with the same systems.
    let known = ShooterKnown {
        tick: t,
        players: s.players().collect(),
        projectiles: vec![],
    };
    c.load(&known, None);
    assert!(!c.player_state().unwrap().alive);
    for _ in 0..90 {
        let i = ShooterInput::moving(1.0, 0.0);
        c.advance(Tick(t), i);
        s.step(Tick(t), &[(1, i)]);
        t += 1;
        let known = ShooterKnown {
            tick: t,
            players: s.players().collect(),
            projectiles: vec![],
        };
        assert!(!c.diverged(&c.save(), &known), "tick {t}");
    }
    assert!(c.player_state().unwrap().alive);
}

#[test]
fn a_late_rifle_shot_is_fired_as_of_its_own_tick() {
    let mut s = ShooterScene::new(ShooterConfig::default());
    s.add_player(1);
    s.add_player(2);
    let (e1, e2) = (s.players[&1], s.players[&2]);
    s.world.get::<&mut Body>(e1).unwrap().position = [-5.0, 3.0];
    s.world.get::<&mut Body>(e2).unwrap().position = [0.0, 3.0];
    for t in 0..5 {
        s.step(Tick(t), &[]);
    }
    // Tick 5's input, a shot at player 2, is late: the server runs ticks 5-12 on its
    // guess (walking away along +y), so the shooter is metres from where it fired.
    let mut shot = ShooterInput::default().with_aim(aim_at([-5.0, 3.0], [0.0, 3.0]));
    shot.fire = 1;
    shot.shot = 7;
    for t in 5..13 {
        s.step(Tick(t), &[(1, ShooterInput::moving(0.0, 1.0))]);
    }
    let moved = s.player(1).unwrap().position[1] - 3.0;
    assert!(moved > 2.0 * HIT_RADIUS, "moved {moved}");
    s.late_inputs(&[(1, Tick(5), shot)]);
    s.step(Tick(13), &[]);
    assert_eq!(s.stats.late_shots, 1);
    assert_eq!(s.shot_outcome(1, 7), Some(ShotOutcome::Hit(2)));
    assert_eq!(s.counters[&1].rifle_hits, 1);
    assert!(s.player(2).unwrap().health < MAX_HEALTH);
    // Its cooldown runs from tick 5: a late shot for tick 6 is too fast, one on time
    // at tick 14 (past 5 + the interval) is not.
    let interval = Weapon::Rifle.interval_ticks(ShooterConfig::default().tick_hz);
    assert!(5 + interval <= 14);
    let mut again = shot;
    again.shot = 8;
    s.late_inputs(&[(1, Tick(6), again)]);
    s.step(Tick(14), &[]);
    assert_eq!(s.stats.refused_rate, 1);
    assert_eq!(s.shot_outcome(1, 8), None);
    let mut on_time = ShooterInput::default().with_aim([1.0, 0.0]);
    on_time.fire = 1;
    on_time.shot = 9;
    s.step(Tick(15), &[(1, on_time)]);
    assert!(s.shot_outcome(1, 9).is_some());
    // A late shot from a player dead now is answered at once.
    s.world.get::<&mut systems::Life>(e1).unwrap().alive = false;
    let mut dead = shot;
    dead.shot = 10;
    s.late_inputs(&[(1, Tick(14), dead)]);
    s.step(Tick(16), &[]);
    assert_eq!(s.shot_outcome(1, 10), Some(ShotOutcome::ShooterDead));
}
