//! Same start, same inputs: bit-identical states.

mod common;

use common::scene_bits;
use lagless_scenes::cubes::script::{InputScript, PatternScript};
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

/// Player 0 drives into the grid from +Z and player 1 from -Z, then both
/// follow seeded patterns, so cubes pile up, wake and fall asleep again.
fn inputs(tick: u64, patterns: &mut [PatternScript; 2]) -> Vec<(u32, CubeInput)> {
    let a = patterns[0].input(tick, None);
    let b = patterns[1].input(tick, None);
    if tick < 160 {
        vec![(0, CubeInput::FORWARD), (1, CubeInput::BACK)]
    } else {
        vec![(0, a), (1, b)]
    }
}

#[test]
fn two_scenes_fed_the_same_inputs_stay_bit_identical() {
    let mut scenes = [
        CubeScene::new(CubeSceneConfig::default()),
        CubeScene::new(CubeSceneConfig::default()),
    ];
    for scene in &mut scenes {
        scene.add_player(0);
        scene.add_player(1);
    }
    let mut patterns = [
        [PatternScript::new(11), PatternScript::new(12)],
        [PatternScript::new(11), PatternScript::new(12)],
    ];
    let mut max_awake = 0;
    for tick in 0..600 {
        for (scene, pattern) in scenes.iter_mut().zip(&mut patterns) {
            let inputs = inputs(tick, pattern);
            scene.step(&inputs);
        }
        max_awake = max_awake.max(scenes[0].awake_cube_count());
        if (tick + 1) % 60 == 0 {
            assert_eq!(
                scene_bits(&scenes[0]),
                scene_bits(&scenes[1]),
                "diverged by step {}",
                tick + 1
            );
        }
    }
    assert!(
        max_awake > 20,
        "the run should disturb the grid, got {max_awake}"
    );
}

#[test]
fn a_clone_steps_exactly_like_its_original() {
    let mut original = CubeScene::new(CubeSceneConfig::default());
    original.add_player(0);
    let mut pattern = PatternScript::new(5);
    for tick in 0..200 {
        let input = pattern.input(tick, None).with(CubeInput::FORWARD);
        original.step(&[(0, input)]);
    }
    assert!(original.awake_cube_count() > 0);
    let mut copy = original.clone();
    for tick in 200..400 {
        let input = pattern.input(tick, None);
        original.step(&[(0, input)]);
        copy.step(&[(0, input)]);
    }
    assert_eq!(scene_bits(&original), scene_bits(&copy));
}

#[test]
fn input_order_and_duplicates_do_not_matter() {
    let mut a = CubeScene::new(CubeSceneConfig::default());
    let mut b = CubeScene::new(CubeSceneConfig::default());
    for scene in [&mut a, &mut b] {
        scene.add_player(0);
        scene.add_player(1);
    }
    for _ in 0..64 {
        a.step(&[
            (0, CubeInput::FORWARD.with(CubeInput::JUMP)),
            (1, CubeInput::LEFT),
        ]);
        b.step(&[
            (1, CubeInput::LEFT),
            (7, CubeInput::RIGHT),
            (0, CubeInput::JUMP),
            (0, CubeInput::FORWARD),
        ]);
    }
    assert_eq!(scene_bits(&a), scene_bits(&b));
}
