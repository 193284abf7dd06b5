//! The player shoves cubes around.

mod common;

use common::displacements;
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

#[test]
fn driving_into_the_grid_wakes_and_moves_cubes() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    let before = scene.cube_states();
    assert_eq!(scene.awake_cube_count(), 0, "the grid starts asleep");
    scene.add_player(0);
    for _ in 0..2 * 64 {
        scene.step(&[(0, CubeInput::FORWARD)]);
    }
    assert!(scene.awake_cube_count() > 0);
    let moved = displacements(&before, &scene);
    let far = moved.iter().filter(|&&d| d > 0.5).count();
    assert!(far > 0, "no cube moved more than 0.5 m");
    eprintln!(
        "after 2 s of W: {} cubes awake, {far} displaced > 0.5 m",
        scene.awake_cube_count()
    );
}

#[test]
fn the_grid_rests_without_players() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    let before = scene.cube_states();
    for _ in 0..32 {
        scene.step(&[]);
    }
    assert_eq!(scene.awake_cube_count(), 0);
    assert_eq!(before, scene.cube_states());
}
