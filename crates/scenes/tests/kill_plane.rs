//! The kill plane: a body that falls off the ground comes back to where it started, at
//! rest, before its fall outruns what a snapshot can say.
#![allow(clippy::unwrap_used)]

mod common;

use common::{player, state_bits};
use glam::{Quat, Vec3};
use lagless_scenes::cubes::quantize::{BodyCodes, StateQuantization};
use lagless_scenes::cubes::{BodyState, CubeScene, CubeSceneConfig};

/// Ticks allowed for the fall: 10 s, more than twice what reaching the default kill
/// height from the ground takes, and long enough that a body falling for that long would
/// pass the codec's 64 m/s.
const FALL_TICKS: usize = 10 * 64;

/// A body a little above the ground, just past its edge, moving outward.
fn off_the_edge(config: &CubeSceneConfig, y: f32) -> BodyState {
    BodyState {
        position: Vec3::new(config.ground_half_extent + 3.0, y, 10.0),
        rotation: Quat::from_rotation_y(0.4) * Quat::from_rotation_x(0.2),
        linvel: Vec3::new(4.0, 0.0, -1.0),
        angvel: Vec3::new(0.5, 1.0, 0.0),
    }
}

/// Whether any velocity code sits at the codec's limit, so was (possibly) clamped.
fn clamped(codes: &BodyCodes, q: &StateQuantization) -> bool {
    let (v, w) = (q.linvel_code_limit(), q.angvel_code_limit());
    codes.linvel.iter().any(|c| c.abs() >= v) || codes.angvel.iter().any(|c| c.abs() >= w)
}

/// Steps `scene` until cube `index` is back at `spawn`, checking on every tick that what a
/// snapshot says of it is not clamped; returns the ticks the fall took.
fn fall_and_respawn(scene: &mut CubeScene, index: usize, spawn: &BodyState) -> usize {
    let q = StateQuantization::default();
    for tick in 1..=FALL_TICKS {
        scene.step(&[]);
        let state = scene.cube_state(index).unwrap();
        // A sleeping cube is sent at rest, so only an awake one can be clamped.
        let codes = q.encode(&state);
        let codes = if scene.cube_awake(index) {
            codes
        } else {
            BodyCodes {
                linvel: [0; 3],
                angvel: [0; 3],
                ..codes
            }
        };
        assert!(!clamped(&codes, &q), "tick {tick}: {state:?}");
        assert!(state.position.y > -(q.position_limit as f32));
        if state.position.distance(spawn.position) < 0.01 {
            return tick;
        }
    }
    panic!(
        "cube {index} never came back: {:?}",
        scene.cube_state(index)
    );
}

#[test]
fn a_cube_pushed_off_the_edge_comes_back_to_its_spawn() {
    let config = CubeSceneConfig::default();
    assert!(config.kill_height < -10.0);
    let mut scene = CubeScene::new(config);
    let index = 7;
    let spawn = scene.cube_spawn(index).unwrap();
    let start = scene.cube_state(index).unwrap();
    assert!(start.position.distance(spawn.position) < 1e-3, "{start:?}");

    scene.set_cube_state(index, &off_the_edge(&config, 2.0), true);
    let ticks = fall_and_respawn(&mut scene, index, &spawn);
    // Free fall from 2 m to the kill height: sqrt(2 * 22 / 9.81) s, 2.1 s.
    assert!((120..160).contains(&ticks), "{ticks}");
    // Put back exactly where it started, at rest.
    assert_eq!(
        state_bits(&scene.cube_state(index).unwrap()),
        state_bits(&spawn)
    );
    assert!(!scene.cube_awake(index), "respawned asleep");
    // And it stays there: nothing moves it, it does not sink, it does not wake anything.
    for _ in 0..3 * 64 {
        scene.step(&[]);
    }
    let rest = scene.cube_state(index).unwrap();
    assert!(rest.position.distance(spawn.position) < 1e-3, "{rest:?}");
    assert_eq!(scene.awake_cube_count(), 0);
}

#[test]
fn a_player_off_the_edge_comes_back_to_its_spawn_point() {
    let config = CubeSceneConfig::default();
    let q = config.quantize.unwrap();
    let mut scene = CubeScene::new(config);
    scene.add_player(3);
    let spawn = scene.player_spawn(3);
    assert_eq!(player(&scene, 3), spawn);

    scene.set_player_state(3, &off_the_edge(&config, 1.5));
    let mut back = None;
    for tick in 1..=FALL_TICKS {
        scene.step(&[]);
        let state = player(&scene, 3);
        let codes = q.encode(&state);
        assert!(
            codes.linvel.iter().all(|c| c.abs() < q.linvel_code_limit()),
            "tick {tick}: {state:?}"
        );
        if state.position.distance(spawn.position) < 0.01 {
            back = Some(state);
            break;
        }
    }
    // At rest on the spawn point, snapped to the grid like every player after a step.
    assert_eq!(
        back.map(|s| state_bits(&s)),
        Some(state_bits(&q.snap(&spawn)))
    );
    assert_eq!(spawn.linvel, Vec3::ZERO);
    assert_eq!(spawn.rotation, Quat::IDENTITY);
}

/// Client-side prediction's sparse scene holds only the bodies it predicts, and runs the
/// same rule: the same fall ends on the same tick in the same state.
#[test]
fn a_sparse_scene_respawns_the_same_way() {
    let config = CubeSceneConfig::default();
    let mut full = CubeScene::new(config);
    let mut sparse = CubeScene::new_sparse(config);
    let index = 123;
    let fall = off_the_edge(&config, 2.0);
    full.set_cube_state(index, &fall, true);
    sparse.insert_cube(index, &fall, true);
    let spawn = full.cube_spawn(index).unwrap();
    assert_eq!(sparse.cube_spawn(index), Some(spawn));
    let a = fall_and_respawn(&mut full, index, &spawn);
    let b = fall_and_respawn(&mut sparse, index, &spawn);
    assert_eq!(a, b);
    assert_eq!(
        state_bits(&full.cube_state(index).unwrap()),
        state_bits(&sparse.cube_state(index).unwrap())
    );
    assert_eq!(full.cube_awake(index), sparse.cube_awake(index));
}

/// The rule can be turned off; then a falling body is left alone (and soon outruns the
/// codec, which is what the kill plane prevents).
#[test]
fn without_a_kill_plane_a_fall_never_ends() {
    let config = CubeSceneConfig {
        kill_height: f32::NEG_INFINITY,
        ..CubeSceneConfig::default()
    };
    let mut scene = CubeScene::new_sparse(config);
    scene.insert_cube(0, &off_the_edge(&config, 2.0), true);
    for _ in 0..FALL_TICKS {
        scene.step(&[]);
    }
    let state = scene.cube_state(0).unwrap();
    assert!(
        state.position.y < -400.0 && state.linvel.y < -64.0,
        "{state:?}"
    );
}
