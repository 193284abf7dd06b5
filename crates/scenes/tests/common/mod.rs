//! Helpers shared by the integration tests.
#![allow(dead_code)]

use lagless_scenes::cubes::{BodyState, CubeScene, PlayerId};

/// Every float of a body state as raw bits, so comparisons are exact.
pub fn state_bits(s: &BodyState) -> Vec<u32> {
    let mut bits = Vec::with_capacity(13);
    bits.extend(s.position.to_array().map(f32::to_bits));
    bits.extend(s.rotation.to_array().map(f32::to_bits));
    bits.extend(s.linvel.to_array().map(f32::to_bits));
    bits.extend(s.angvel.to_array().map(f32::to_bits));
    bits
}

/// The whole observable scene (players, cubes, sleep flags) as raw bits.
pub fn scene_bits(scene: &CubeScene) -> Vec<u32> {
    let mut bits = vec![scene.steps() as u32];
    for id in scene.players() {
        bits.push(id);
        bits.extend(state_bits(&player(scene, id)));
    }
    for i in 0..scene.cube_count() {
        bits.extend(state_bits(
            &scene.cube_state(i).expect("cube index in range"),
        ));
        bits.push(u32::from(scene.cube_awake(i)));
    }
    bits
}

pub fn player(scene: &CubeScene, id: PlayerId) -> BodyState {
    scene.player_state(id).expect("player exists")
}

/// Largest horizontal distance any cube has moved from its starting spot.
pub fn displacements(before: &[BodyState], scene: &CubeScene) -> Vec<f32> {
    before
        .iter()
        .zip(scene.cube_states())
        .map(|(a, b)| a.position.distance(b.position))
        .collect()
}
