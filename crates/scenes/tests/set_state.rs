//! Writing body state back: teleports are exact, sleep flags are honoured.

mod common;

use common::{player, state_bits};
use glam::{Quat, Vec3};
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig};

fn tilted_state() -> BodyState {
    BodyState {
        position: Vec3::new(3.25, 4.5, -40.125),
        rotation: Quat::from_rotation_y(0.7) * Quat::from_rotation_x(0.3),
        linvel: Vec3::new(1.5, -0.25, 2.0),
        angvel: Vec3::new(0.1, 0.2, -0.3),
    }
}

#[test]
fn set_player_state_teleports_exactly() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let target = tilted_state();
    scene.set_player_state(0, &target);
    assert_eq!(state_bits(&player(&scene, 0)), state_bits(&target));
    scene.step(&[]);
    let after = player(&scene, 0);
    assert!(after.position.y < target.position.y, "it falls from there");
    assert!((after.position.x - target.position.x - target.linvel.x / 64.0).abs() < 0.01);
}

#[test]
fn set_player_state_wakes_a_sleeping_player() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    // Long enough for the idle player to fall asleep.
    for _ in 0..3 * 64 {
        scene.step(&[]);
    }
    let mut moving = player(&scene, 0);
    moving.linvel = Vec3::new(4.0, 0.0, 0.0);
    scene.set_player_state(0, &moving);
    scene.step(&[]);
    assert!(player(&scene, 0).position.x > moving.position.x + 0.03);
}

#[test]
fn bad_states_and_ids_are_ignored() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let before = player(&scene, 0);
    let mut bad = tilted_state();
    bad.position.x = f32::NAN;
    scene.set_player_state(0, &bad);
    assert_eq!(player(&scene, 0), before);
    scene.set_player_state(7, &tilted_state());
    assert!(scene.player_state(7).is_none());
    let cube = scene.cube_state(0);
    scene.set_cube_state(0, &bad, true);
    assert_eq!(scene.cube_state(0), cube);
    scene.set_cube_state(scene.cube_count(), &tilted_state(), true);
    assert!(scene.cube_state(scene.cube_count()).is_none());
    assert!(!scene.cube_awake(scene.cube_count()));
}

#[test]
fn set_cube_state_awake_is_exact_and_simulated() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    let target = tilted_state();
    scene.set_cube_state(7, &target, true);
    assert!(scene.cube_awake(7));
    assert_eq!(scene.awake_cube_count(), 1);
    assert_eq!(
        state_bits(&scene.cube_state(7).expect("cube 7")),
        state_bits(&target)
    );
    scene.step(&[]);
    assert!(scene.cube_state(7).expect("cube 7").position.y < target.position.y);
}

#[test]
fn set_cube_state_asleep_stays_put() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    // Wake some cubes first.
    for _ in 0..96 {
        scene.step(&[(0, CubeInput::FORWARD)]);
    }
    let awake: Vec<usize> = (0..scene.cube_count())
        .filter(|&i| scene.cube_awake(i))
        .collect();
    assert!(!awake.is_empty());

    // An awake cube put to sleep elsewhere stays (nearly) where it was put.
    // Its new ground contact may wake it briefly, as rapier wakes any body
    // on a new contact, but it settles back to sleep in place.
    let index = awake[0];
    let parked = BodyState {
        position: Vec3::new(-60.0, 0.5, -60.0),
        rotation: Quat::IDENTITY,
        linvel: Vec3::new(5.0, 0.0, 0.0),
        angvel: Vec3::ZERO,
    };
    scene.set_cube_state(index, &parked, false);
    assert!(!scene.cube_awake(index));
    let now = scene.cube_state(index).expect("cube");
    assert_eq!(now.position, parked.position);
    assert_eq!(now.linvel, Vec3::ZERO, "sleeping bodies have no velocity");
    for _ in 0..64 {
        scene.step(&[]);
    }
    assert!(!scene.cube_awake(index));
    let settled = scene.cube_state(index).expect("cube").position;
    assert!(settled.distance(parked.position) < 1e-3, "{settled}");

    // A sleeping cube moved while asleep stays asleep too.
    let sleeper = (0..scene.cube_count())
        .find(|&i| !scene.cube_awake(i) && i != index)
        .expect("some cube sleeps");
    let mut moved = parked;
    moved.position.z = -55.0;
    scene.set_cube_state(sleeper, &moved, false);
    assert!(!scene.cube_awake(sleeper));
    assert_eq!(
        scene.cube_state(sleeper).expect("cube").position,
        moved.position
    );
    for _ in 0..64 {
        scene.step(&[]);
    }
    assert!(!scene.cube_awake(sleeper));
    let settled = scene.cube_state(sleeper).expect("cube").position;
    assert!(settled.distance(moved.position) < 1e-3, "{settled}");
}
