//! The default script roams the grid, rests now and then, and kicks cubes.

mod common;

use common::{displacements, player, scene_bits};
use lagless_scenes::cubes::script::{InputScript, RoamScript};
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};

const SECONDS: u64 = 30;

struct Run {
    inputs: Vec<CubeInput>,
    /// Largest of |x| and |z| the player reached after first entering the grid.
    max_reach: f32,
    entered: bool,
    moved_cubes: usize,
    bits: Vec<u32>,
}

fn roam(seed: u64) -> Run {
    let config = CubeSceneConfig::default();
    let half = config.grid_half_extent();
    let mut scene = CubeScene::new(config);
    let before = scene.cube_states();
    scene.add_player(0);
    let mut script = RoamScript::new(seed, scene.config());
    let mut inputs = Vec::new();
    let mut max_reach: f32 = 0.0;
    let mut entered = false;
    for tick in 0..SECONDS * u64::from(config.tick_hz) {
        let seen = scene.player_state(0);
        let input = script.input(tick, seen.as_ref());
        inputs.push(input);
        scene.step(&[(0, input)]);
        let p = player(&scene, 0).position;
        let reach = p.x.abs().max(p.z.abs());
        entered |= reach < half;
        if entered {
            max_reach = max_reach.max(reach);
        }
    }
    let moved_cubes = displacements(&before, &scene)
        .iter()
        .filter(|&&d| d > 0.5)
        .count();
    Run {
        inputs,
        max_reach,
        entered,
        moved_cubes,
        bits: scene_bits(&scene),
    }
}

/// Lengths, in ticks, of the stretches with no key held.
fn idle_stretches(inputs: &[CubeInput]) -> Vec<usize> {
    inputs
        .split(|i| !i.is_none())
        .map(<[CubeInput]>::len)
        .filter(|&len| len > 0)
        .collect()
}

#[test]
fn roam_stays_in_the_grid_rests_and_disturbs_many_cubes() {
    let config = CubeSceneConfig::default();
    let run = roam(1);
    let half = config.grid_half_extent();
    assert!(run.entered, "the player never entered the grid");
    assert!(
        run.max_reach < half + 6.0,
        "wandered to {} (grid half extent {half})",
        run.max_reach
    );

    // Rests of at least 0.3 s, excluding the first tick before anything is seen.
    let rests: Vec<usize> = idle_stretches(&run.inputs)
        .into_iter()
        .filter(|&len| len >= 19)
        .collect();
    assert!(rests.len() >= 3, "rests: {rests:?}");

    let jumps = run
        .inputs
        .windows(2)
        .filter(|w| !w[0].contains(CubeInput::JUMP) && w[1].contains(CubeInput::JUMP))
        .count();
    assert!(jumps >= 3, "only {jumps} jumps");
    assert!(run.inputs.iter().filter(|i| i.moves()).count() > run.inputs.len() / 2);

    assert!(
        run.moved_cubes > 100,
        "only {} cubes moved",
        run.moved_cubes
    );
    eprintln!(
        "roam seed 1, {SECONDS} s: {} cubes moved > 0.5 m, {} rests ({rests:?} ticks), {jumps} jumps, max reach {:.1} m",
        run.moved_cubes,
        rests.len(),
        run.max_reach
    );
}

#[test]
fn roam_is_reproducible_for_a_seed() {
    let a = roam(2);
    let b = roam(2);
    assert_eq!(a.inputs, b.inputs);
    assert_eq!(a.bits, b.bits);
}
