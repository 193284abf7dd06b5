//! Several players: separate spawn points, add and remove.

mod common;

use common::{player, scene_bits};
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

#[test]
fn four_players_spawn_apart_outside_the_grid() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    for id in [3, 0, 2, 1] {
        scene.add_player(id);
    }
    assert_eq!(scene.players(), vec![0, 1, 2, 3]);
    let size = scene.config().player_size;
    let half = scene.config().grid_half_extent();
    let spawns: Vec<_> = (0..4).map(|id| player(&scene, id)).collect();
    for (i, a) in spawns.iter().enumerate() {
        // Outside the grid, resting on the ground.
        assert!(a.position.x.abs().max(a.position.z.abs()) >= half + size * 0.5);
        assert!((a.position.y - size * 0.5).abs() < 1e-6);
        for b in &spawns[i + 1..] {
            let gap = (a.position - b.position).abs();
            assert!(gap.x.max(gap.z) > size, "{a:?} overlaps {b:?}");
        }
    }
    // Non-overlapping spawns mean nobody gets shoved.
    for _ in 0..32 {
        scene.step(&[]);
    }
    for (id, spawn) in (0..4).zip(&spawns) {
        assert!(player(&scene, id).position.distance(spawn.position) < 1e-3);
    }
}

#[test]
fn each_player_answers_to_its_own_input() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    scene.add_player(1);
    let start = [player(&scene, 0).position, player(&scene, 1).position];
    for _ in 0..64 {
        scene.step(&[(0, CubeInput::RIGHT), (1, CubeInput::LEFT)]);
    }
    assert!(player(&scene, 0).position.x - start[0].x > 2.0);
    assert!(player(&scene, 1).position.x - start[1].x < -2.0);
}

#[test]
fn add_is_idempotent_and_remove_works() {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(5);
    for _ in 0..16 {
        scene.step(&[(5, CubeInput::RIGHT)]);
    }
    let before = scene_bits(&scene);
    scene.add_player(5);
    assert_eq!(scene_bits(&scene), before, "re-adding must not respawn");

    scene.add_player(9);
    assert_eq!(scene.players(), vec![5, 9]);
    scene.remove_player(5);
    assert_eq!(scene.players(), vec![9]);
    assert!(scene.player_state(5).is_none());
    scene.remove_player(5);
    scene.remove_player(1234);
    assert_eq!(scene.players(), vec![9]);

    // Inputs for a removed id are ignored; the scene keeps stepping.
    scene.step(&[(5, CubeInput::FORWARD), (9, CubeInput::NONE)]);
    assert_eq!(scene.steps(), 17);

    // A player can come back; it respawns at its spawn point.
    scene.add_player(5);
    let again = player(&scene, 5);
    let fresh = {
        let mut s = CubeScene::new(CubeSceneConfig::default());
        s.add_player(5);
        player(&s, 5)
    };
    assert_eq!(again.position, fresh.position);
}
