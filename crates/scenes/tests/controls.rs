//! W/A/S/D push the player the documented way.

mod common;

use common::player;
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

fn scene_with_player() -> CubeScene {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    scene
}

fn hold(scene: &mut CubeScene, input: CubeInput, ticks: u32) {
    for _ in 0..ticks {
        scene.step(&[(0, input)]);
    }
}

#[test]
fn forward_moves_toward_minus_z() {
    let mut scene = scene_with_player();
    let start = player(&scene, 0).position;
    hold(&mut scene, CubeInput::FORWARD, 64);
    let moved = player(&scene, 0).position - start;
    assert!(moved.z < -2.0, "moved {moved}");
    assert!(moved.x.abs() < 0.5 * moved.z.abs(), "moved {moved}");
}

#[test]
fn back_moves_toward_plus_z() {
    let mut scene = scene_with_player();
    let start = player(&scene, 0).position;
    hold(&mut scene, CubeInput::BACK, 64);
    let moved = player(&scene, 0).position - start;
    assert!(moved.z > 2.0, "moved {moved}");
}

#[test]
fn right_moves_toward_plus_x_and_left_toward_minus_x() {
    for (input, sign) in [(CubeInput::RIGHT, 1.0), (CubeInput::LEFT, -1.0)] {
        let mut scene = scene_with_player();
        let start = player(&scene, 0).position;
        hold(&mut scene, input, 64);
        let moved = player(&scene, 0).position - start;
        assert!(moved.x * sign > 2.0, "{input:?} moved {moved}");
        assert!(
            moved.z.abs() < 0.5 * moved.x.abs(),
            "{input:?} moved {moved}"
        );
    }
}

#[test]
fn acceleration_is_brisk() {
    let mut scene = scene_with_player();
    hold(&mut scene, CubeInput::RIGHT, 32);
    let speed = player(&scene, 0).linvel.x;
    assert!(speed > 3.0, "only {speed} m/s after 0.5 s");
}

#[test]
fn no_input_leaves_a_resting_player_still() {
    let mut scene = scene_with_player();
    let start = player(&scene, 0);
    hold(&mut scene, CubeInput::NONE, 64);
    let end = player(&scene, 0);
    assert!(
        end.position.distance(start.position) < 1e-3,
        "{start:?} -> {end:?}"
    );
    assert!(end.linvel.length() < 1e-2);
    // Releasing the keys lets a moving player come to a stop.
    hold(&mut scene, CubeInput::RIGHT, 32);
    hold(&mut scene, CubeInput::NONE, 4 * 64);
    assert!(player(&scene, 0).linvel.length() < 0.5);
}

#[test]
fn unlisted_players_get_no_force() {
    let mut scene = scene_with_player();
    scene.add_player(1);
    let start = player(&scene, 1).position;
    hold(&mut scene, CubeInput::RIGHT, 64);
    assert!(player(&scene, 1).position.distance(start) < 1e-3);
    // A force from one tick must not linger into the next.
    let mut scene = scene_with_player();
    scene.step(&[(0, CubeInput::RIGHT)]);
    let after_push = player(&scene, 0).linvel.x;
    hold(&mut scene, CubeInput::NONE, 8);
    assert!(player(&scene, 0).linvel.x <= after_push + 1e-4);
}
