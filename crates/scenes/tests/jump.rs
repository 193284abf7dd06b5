//! Jumping: only from support, once per landing.

mod common;

use common::player;
use glam::Vec3;
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig};

fn scene_with_player() -> CubeScene {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    scene
}

/// Highest centre height over `ticks`, with `input(tick)`.
fn peak(scene: &mut CubeScene, ticks: u64, input: impl Fn(u64) -> CubeInput) -> f32 {
    let mut peak = f32::MIN;
    for tick in 0..ticks {
        scene.step(&[(0, input(tick))]);
        peak = peak.max(player(scene, 0).position.y);
    }
    peak
}

#[test]
fn a_jump_from_rest_clears_half_a_metre() {
    let mut scene = scene_with_player();
    let rest = player(&scene, 0).position.y;
    let top = peak(&mut scene, 64, |t| {
        if t == 0 {
            CubeInput::JUMP
        } else {
            CubeInput::NONE
        }
    });
    assert!(top - rest > 0.5, "rose only {}", top - rest);
    assert!(top - rest < 2.0, "rose {}", top - rest);
}

#[test]
fn holding_jump_gives_no_extra_lift() {
    // The apex comes after ~0.5 s and the landing after ~1 s: 48 ticks
    // covers the first flight only.
    let mut tap = scene_with_player();
    let tap_peak = peak(&mut tap, 48, |t| {
        if t == 0 {
            CubeInput::JUMP
        } else {
            CubeInput::NONE
        }
    });
    let mut hold = scene_with_player();
    let hold_peak = peak(&mut hold, 48, |_| CubeInput::JUMP);
    assert!(
        (hold_peak - tap_peak).abs() < 0.02,
        "tap {tap_peak} hold {hold_peak}"
    );
}

#[test]
fn held_jump_repeats_once_per_landing_at_the_same_height() {
    let mut scene = scene_with_player();
    let rest = player(&scene, 0).position.y;
    let mut heights = Vec::new();
    for _ in 0..4 * 64 {
        scene.step(&[(0, CubeInput::JUMP)]);
        heights.push(player(&scene, 0).position.y - rest);
    }
    // Local maxima above 0.3 m are separate flights.
    let apexes: Vec<f32> = heights
        .windows(3)
        .filter(|w| w[1] > w[0] && w[1] >= w[2] && w[1] > 0.3)
        .map(|w| w[1])
        .collect();
    assert!(apexes.len() >= 2, "{apexes:?}");
    for apex in &apexes {
        assert!((apex - apexes[0]).abs() < 0.1, "{apexes:?}");
    }
}

#[test]
fn jump_in_mid_air_does_nothing() {
    let mut scene = scene_with_player();
    let mut state = player(&scene, 0);
    state.position.y = 6.0;
    scene.set_player_state(0, &state);
    for _ in 0..10 {
        let before = player(&scene, 0).linvel.y;
        scene.step(&[(0, CubeInput::JUMP)]);
        let after = player(&scene, 0).linvel.y;
        assert!(
            after <= before,
            "gained lift in the air: {before} -> {after}"
        );
    }
}

#[test]
fn can_jump_off_a_cube() {
    let mut scene = scene_with_player();
    // Put the player on top of the middle of the grid.
    let below = scene.cube_state(15 * 30 + 15).expect("cube exists");
    let start = BodyState {
        position: below.position + Vec3::new(0.0, 0.5 + 1.0 + 0.01, 0.0),
        ..BodyState::default()
    };
    scene.set_player_state(0, &start);
    for _ in 0..32 {
        scene.step(&[]);
    }
    let resting = player(&scene, 0).position.y;
    assert!(
        resting > 1.3,
        "player should rest on the cubes, at {resting}"
    );
    let top = peak(&mut scene, 40, |t| {
        if t == 0 {
            CubeInput::JUMP
        } else {
            CubeInput::NONE
        }
    });
    assert!(top - resting > 0.5, "rose only {}", top - resting);
}
