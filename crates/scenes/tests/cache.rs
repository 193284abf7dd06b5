//! The incremental capture and conversion give exactly what the whole-world paths give:
//! on a real scene tick by tick, after teleports the sleep flags do not reveal, out of
//! order, across cube counts, player sets and grids, and on arbitrary inputs.
#![allow(clippy::unwrap_used)]

mod common;

use common::state_bits;
use glam::{Quat, Vec3};
use lagless_scenes::cubes::cache::{CaptureCache, DecodeCache};
use lagless_scenes::cubes::delta::{CubeCodes, QuantizedSnapshot};
use lagless_scenes::cubes::quantize::StateQuantization;
use lagless_scenes::cubes::snapshot::{CubePose, CubeSnapshot};
use lagless_scenes::cubes::{BodyState, CubeInput, CubeScene, CubeSceneConfig};
use proptest::prelude::*;

/// Every float of a snapshot as bits, with ids and sleep flags: `==` on floats would let
/// `-0.0` pass for `0.0`.
fn snapshot_bits(s: &CubeSnapshot) -> Vec<u32> {
    let mut bits = vec![s.players.len() as u32];
    for (id, b) in &s.players {
        bits.push(*id);
        bits.extend(state_bits(b));
    }
    for c in &s.cubes {
        bits.push(u32::from(c.awake));
        bits.extend(state_bits(&c.body_state()));
    }
    bits
}

/// Captures through `cache` and checks it against the reference; returns the snapshot.
fn capture_checked(
    cache: &mut CaptureCache,
    scene: &CubeScene,
    q: &StateQuantization,
) -> QuantizedSnapshot {
    let snapshot = cache.capture(scene, q);
    assert_eq!(snapshot, QuantizedSnapshot::capture(scene, q));
    snapshot
}

/// Converts through `cache` and checks it bit for bit against the reference.
fn convert_checked(cache: &mut DecodeCache, snapshot: &QuantizedSnapshot, q: &StateQuantization) {
    let floats = cache.to_snapshot(snapshot, q);
    assert_eq!(
        snapshot_bits(&floats),
        snapshot_bits(&snapshot.to_snapshot(q))
    );
}

#[test]
fn a_pushing_run_matches_the_reference_every_tick() {
    let q = StateQuantization::default();
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let (mut capture, mut decode) = (CaptureCache::new(), DecodeCache::new());
    let mut snapshots = Vec::new();
    let mut most_requantized = 0;
    for t in 0..300u32 {
        let input = if t % 40 < 30 {
            CubeInput::FORWARD
        } else {
            CubeInput::FORWARD.with(CubeInput::LEFT)
        };
        scene.step(&[(0, input)]);
        let snapshot = capture_checked(&mut capture, &scene, &q);
        if t > 0 {
            most_requantized = most_requantized.max(capture.requantized());
        }
        convert_checked(&mut decode, &snapshot, &q);
        snapshots.push(snapshot);
    }
    let last = snapshots.last().unwrap();
    assert!(
        last.cubes.iter().any(|c| c.awake),
        "the player reached the grid"
    );
    // The point of the caches: most of the world is reused every tick.
    assert!(
        most_requantized < 300,
        "{most_requantized} bodies re-quantized"
    );
    assert!(decode.converted() < 300, "{} converted", decode.converted());

    // Out of order, as snapshots arrive and baselines are decoded: far jumps back and
    // forth, repeats, and the first snapshot again.
    for i in [299usize, 150, 151, 149, 299, 0, 0, 298, 10, 200] {
        convert_checked(&mut decode, &snapshots[i], &q);
    }
}

#[test]
fn a_sleeping_cube_teleported_is_noticed() {
    let q = StateQuantization::default();
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let (mut capture, mut decode) = (CaptureCache::new(), DecodeCache::new());
    let before = capture_checked(&mut capture, &scene, &q);
    convert_checked(&mut decode, &before, &q);

    let index = 17;
    assert!(!scene.cube_awake(index));
    // On the grid, so the nudge below cannot round across a step.
    let state = BodyState {
        position: Vec3::new(2.0, 4.0, -3.0),
        rotation: Quat::from_rotation_y(0.4),
        ..BodyState::default()
    };
    // Put down asleep: rapier's sleep flag says nothing happened.
    scene.set_cube_state(index, &state, false);
    assert!(!scene.cube_awake(index));

    let after = capture_checked(&mut capture, &scene, &q);
    assert_ne!(after.cubes[index], before.cubes[index]);
    assert_eq!(capture.requantized(), 1, "only the teleported cube");
    convert_checked(&mut decode, &after, &q);
    assert_eq!(decode.converted(), 1);

    // A nudge below the grid's resolution changes the raw state but not the codes.
    let mut nudged = state;
    nudged.position.x += 1e-5;
    scene.set_cube_state(index, &nudged, false);
    let same = capture_checked(&mut capture, &scene, &q);
    assert_eq!(same.cubes[index], after.cubes[index]);
    assert_eq!(capture.requantized(), 1);

    // And it wakes at the next step once a contact appears; still exact while it falls.
    for _ in 0..60 {
        scene.step(&[]);
        let s = capture_checked(&mut capture, &scene, &q);
        convert_checked(&mut decode, &s, &q);
    }
}

#[test]
fn player_sets_cube_counts_and_grids_may_change() {
    let q = StateQuantization::default();
    let (mut capture, mut decode) = (CaptureCache::new(), DecodeCache::new());
    let mut big = CubeScene::new(CubeSceneConfig::default());
    big.add_player(0);
    let mut small = CubeScene::new(CubeSceneConfig {
        grid: 4,
        ..CubeSceneConfig::default()
    });
    small.add_player(3);
    let mut sparse = CubeScene::new_sparse(CubeSceneConfig::default());
    sparse.add_player(0);
    for (i, slot) in [5usize, 40, 41, 899].into_iter().enumerate() {
        let state = BodyState {
            position: Vec3::new(i as f32 * 3.0, 0.5, 1.0),
            ..BodyState::default()
        };
        sparse.insert_cube(slot, &state, i % 2 == 0);
    }

    // One cache for all three scenes, interleaved: every switch changes the cube count.
    let mut step_all = |mut scenes: [&mut CubeScene; 3], n: usize| {
        for _ in 0..n {
            for scene in scenes.iter_mut() {
                scene.step(&[(0, CubeInput::FORWARD), (3, CubeInput::BACK)]);
                let s = capture_checked(&mut capture, scene, &q);
                convert_checked(&mut decode, &s, &q);
            }
        }
    };
    step_all([&mut big, &mut small, &mut sparse], 3);

    // Players join and leave, cubes come and go in the sparse scene.
    big.add_player(1);
    big.add_player(7);
    small.remove_player(3);
    sparse.remove_cube(40);
    sparse.insert_cube(2, &BodyState::default(), true);
    step_all([&mut big, &mut small, &mut sparse], 3);
    big.remove_player(0);
    step_all([&mut big, &mut small, &mut sparse], 2);

    // A conversion of a snapshot with fewer cubes, then the whole world again.
    let world = capture_checked(&mut capture, &big, &q);
    let mut fewer = world.clone();
    fewer.cubes.truncate(100);
    convert_checked(&mut decode, &fewer, &q);
    convert_checked(&mut decode, &world, &q);
    assert_eq!(decode.converted(), world.cubes.len() - 100);
    // An essential part: players only.
    convert_checked(&mut decode, &world.players_only(), &q);
}

#[test]
fn another_quantization_starts_afresh() {
    let fine = StateQuantization::default();
    let coarse = StateQuantization {
        position_shift: 4,
        rotation_bits: 7,
        ..fine
    };
    let mut scene = CubeScene::new(CubeSceneConfig {
        grid: 6,
        ..CubeSceneConfig::default()
    });
    scene.add_player(0);
    let (mut capture, mut decode) = (CaptureCache::new(), DecodeCache::new());
    for t in 0..20 {
        let q = if t % 3 == 0 { coarse } else { fine };
        scene.step(&[(0, CubeInput::FORWARD)]);
        let s = capture_checked(&mut capture, &scene, &q);
        convert_checked(&mut decode, &s, &q);
    }
}

/// A few values per component, so states repeat and the caches hit, with the float
/// special cases a bitwise key must tell apart: signed zeros, NaN and infinities.
fn arb_f32() -> impl Strategy<Value = f32> {
    prop::sample::select(vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        0.001,
        1e7,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ])
}

fn arb_vec3() -> impl Strategy<Value = Vec3> {
    prop::array::uniform3(arb_f32()).prop_map(Vec3::from)
}

fn arb_state() -> impl Strategy<Value = BodyState> {
    (
        arb_vec3(),
        prop::sample::select(vec![
            Quat::IDENTITY,
            Quat::from_xyzw(0.0, 0.0, 0.0, -1.0),
            Quat::from_rotation_y(2.0),
            Quat::from_xyzw(-0.0, 0.0, 0.0, 1.0),
            Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0),
        ]),
        arb_vec3(),
        arb_vec3(),
    )
        .prop_map(|(position, rotation, linvel, angvel)| BodyState {
            position,
            rotation,
            linvel,
            angvel,
        })
}

fn arb_plain() -> impl Strategy<Value = CubeSnapshot> {
    (
        prop::collection::btree_map(0u32..4, arb_state(), 0..3),
        prop::collection::vec((arb_state(), any::<bool>()), 0..6),
    )
        .prop_map(|(players, cubes)| CubeSnapshot {
            players: players.into_iter().collect(),
            cubes: cubes
                .into_iter()
                .map(|(s, awake)| CubePose {
                    position: s.position,
                    rotation: s.rotation,
                    awake,
                    linvel: s.linvel,
                    angvel: s.angvel,
                })
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_sequence_of_captures_matches(seq in prop::collection::vec(arb_plain(), 1..12)) {
        let q = StateQuantization::default();
        let mut cache = CaptureCache::new();
        for plain in &seq {
            prop_assert_eq!(
                cache.quantize(plain, &q),
                QuantizedSnapshot::from_snapshot(plain, &q)
            );
        }
    }

    #[test]
    fn any_sequence_of_conversions_matches(seq in prop::collection::vec(arb_plain(), 1..12)) {
        let q = StateQuantization::default();
        let mut cache = DecodeCache::new();
        for plain in &seq {
            let codes = QuantizedSnapshot::from_snapshot(plain, &q);
            prop_assert_eq!(
                snapshot_bits(&cache.to_snapshot(&codes, &q)),
                snapshot_bits(&codes.to_snapshot(&q))
            );
        }
    }

    #[test]
    fn invalid_rotation_codes_convert_alike(
        patterns in prop::collection::vec(prop::sample::select(vec![0u64, 1, 3, u64::MAX, 1 << 40]), 1..8)
    ) {
        // Codes off the network are checked before conversion, but the cache must not
        // depend on that: whatever `to_snapshot` makes of a code, it makes too.
        let q = StateQuantization::default();
        let mut cache = DecodeCache::new();
        for p in patterns {
            let mut cube = CubeCodes::default();
            cube.body.rotation = p;
            let codes = QuantizedSnapshot { players: Vec::new(), cubes: vec![cube; 3] };
            prop_assert_eq!(
                snapshot_bits(&cache.to_snapshot(&codes, &q)),
                snapshot_bits(&codes.to_snapshot(&q))
            );
        }
    }
}
