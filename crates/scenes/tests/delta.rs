//! The compressed cube snapshot: exact round trips against real baselines, sizes that
//! follow what changed, strict decoding, and property tests on arbitrary states and bytes.
#![allow(clippy::unwrap_used)]

use lagless_core::{BaselineHistory, Tick};
use lagless_scenes::cubes::delta::{CubeCodes, QuantizedSnapshot, SnapshotCodec, SnapshotError};
use lagless_scenes::cubes::quantize::{BodyCodes, StateQuantization};
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};
use proptest::prelude::*;

fn codec() -> SnapshotCodec {
    SnapshotCodec::new(StateQuantization::default())
}

fn history(entries: &[(Tick, &QuantizedSnapshot)]) -> BaselineHistory<QuantizedSnapshot> {
    let mut h = BaselineHistory::new(64);
    for (t, s) in entries {
        assert!(h.insert(*t, (*s).clone()));
    }
    h
}

/// A player drives into the grid: snapshots of ticks 0..n, cubes being knocked about.
fn pushing_run(n: u32) -> (CubeScene, Vec<QuantizedSnapshot>) {
    let mut scene = CubeScene::new(CubeSceneConfig::default());
    scene.add_player(0);
    let q = StateQuantization::default();
    let mut snaps = vec![QuantizedSnapshot::capture(&scene, &q)];
    for _ in 1..n {
        scene.step(&[(0, CubeInput::FORWARD)]);
        snaps.push(QuantizedSnapshot::capture(&scene, &q));
    }
    (scene, snaps)
}

#[test]
fn deltas_against_real_baselines_are_exact_and_small() {
    let codec = codec();
    let (scene, snaps) = pushing_run(200);
    let last = snaps.len() - 1;
    let moving = snaps[last].cubes.iter().filter(|c| c.awake).count();
    assert!(moving > 0, "the player reached the grid");

    let full = codec.encode(&snaps[last], Tick(last as u32), None);
    assert_eq!(full.baseline, None);
    let decoded = codec
        .decode(&full.bytes, Tick(last as u32), &history(&[]))
        .unwrap();
    assert_eq!(decoded, snaps[last]);

    for age in [1usize, 4, 16, 60] {
        let (bt, ct) = (Tick((last - age) as u32), Tick(last as u32));
        let h = history(&[(bt, &snaps[last - age])]);
        let enc = codec.encode(&snaps[last], ct, Some((bt, &snaps[last - age])));
        assert_eq!(enc.baseline, Some(bt));
        let back = codec.decode(&enc.bytes, ct, &h).unwrap();
        assert_eq!(back, snaps[last], "age {age}");
        // Byte identity: decoding and re-encoding changes nothing.
        assert_eq!(
            codec
                .encode(&back, ct, Some((bt, &snaps[last - age])))
                .bytes,
            enc.bytes
        );
        assert!(
            enc.bytes.len() * 4 < full.bytes.len(),
            "age {age}: delta {} B vs full {} B",
            enc.bytes.len(),
            full.bytes.len()
        );
    }

    // What the client gets is the server's state within the quantization error.
    let plain = decoded.to_snapshot(&codec.quantization);
    let err = codec.quantization.position_max_error() + 1e-6;
    for (i, truth) in scene.cube_states().iter().enumerate() {
        assert!(
            (plain.cubes[i].position - truth.position)
                .abs()
                .max_element()
                <= err
        );
    }
    // Players are snapped on the server itself: exact.
    assert_eq!(plain.player(0), scene.player_state(0).as_ref());
}

#[test]
fn an_unchanged_world_costs_almost_nothing() {
    let codec = codec();
    let scene = {
        let mut s = CubeScene::new(CubeSceneConfig::default());
        s.add_player(0);
        s
    };
    let q = QuantizedSnapshot::capture(&scene, &codec.quantization);
    let enc = codec.encode(&q, Tick(10), Some((Tick(9), &q)));
    assert_eq!(enc.changed_cubes, 0);
    // Flags, counts and the player's unchanged state: a few bytes for 900 cubes.
    assert!(enc.bytes.len() <= 8, "{} bytes", enc.bytes.len());
    let back = codec
        .decode(&enc.bytes, Tick(10), &history(&[(Tick(9), &q)]))
        .unwrap();
    assert_eq!(back, q);
}

#[test]
fn a_missing_baseline_is_rejected() {
    let codec = codec();
    let (_, snaps) = pushing_run(30);
    let enc = codec.encode(&snaps[29], Tick(29), Some((Tick(25), &snaps[25])));
    let other = history(&[(Tick(24), &snaps[24]), (Tick(26), &snaps[26])]);
    assert_eq!(
        codec.decode(&enc.bytes, Tick(29), &other),
        Err(SnapshotError::MissingBaseline(Tick(25)))
    );
    // A baseline that would lie before tick 0 is malformed.
    assert!(matches!(
        codec.decode(&enc.bytes, Tick(2), &other),
        Err(SnapshotError::Wire(_))
    ));
}

#[test]
fn unusable_baselines_fall_back_to_full() {
    let codec = codec();
    let (_, snaps) = pushing_run(5);
    // Not older than the snapshot.
    assert_eq!(
        codec
            .encode(&snaps[4], Tick(4), Some((Tick(4), &snaps[3])))
            .baseline,
        None
    );
    // Another scene's cube count.
    let mut small = snaps[3].clone();
    small.cubes.truncate(10);
    let enc = codec.encode(&snaps[4], Tick(4), Some((Tick(3), &small)));
    assert_eq!(enc.baseline, None);
    // And a decoder refuses a delta against a baseline of another size.
    let mut forged = snaps[4].clone();
    forged.cubes.truncate(10);
    let enc = codec.encode(&forged, Tick(4), Some((Tick(3), &small)));
    assert!(enc.baseline.is_some());
    assert!(
        codec
            .decode(&enc.bytes, Tick(4), &history(&[(Tick(3), &snaps[3])]))
            .is_err()
    );
}

#[test]
fn truncated_or_padded_payloads_are_rejected() {
    let codec = codec();
    let (_, snaps) = pushing_run(120);
    let h = history(&[(Tick(110), &snaps[110])]);
    let enc = codec.encode(&snaps[119], Tick(119), Some((Tick(110), &snaps[110])));
    for n in 0..enc.bytes.len() {
        assert!(
            codec.decode(&enc.bytes[..n], Tick(119), &h).is_err(),
            "prefix {n}"
        );
    }
    let mut padded = enc.bytes.clone();
    padded.push(0);
    assert!(codec.decode(&padded, Tick(119), &h).is_err());
    let tight = SnapshotCodec {
        limits: lagless_scenes::cubes::snapshot::SnapshotLimits {
            max_players: 8,
            max_cubes: 100,
        },
        ..codec
    };
    let full = codec.encode(&snaps[119], Tick(119), None);
    assert!(tight.decode(&full.bytes, Tick(119), &h).is_err());
}

fn arb_body(q: StateQuantization) -> impl Strategy<Value = BodyCodes> {
    let p = q.position_code_limit();
    let v = q.linvel_code_limit();
    let w = q.angvel_code_limit();
    (
        prop::array::uniform3(-p..=p),
        prop::array::uniform4(-1.0f32..1.0),
        prop::array::uniform3(-v..=v),
        prop::array::uniform3(-w..=w),
    )
        .prop_map(move |(position, r, linvel, angvel)| BodyCodes {
            position,
            rotation: q.rotation_codec().pack(r),
            linvel,
            angvel,
        })
}

fn arb_cube(q: StateQuantization) -> impl Strategy<Value = CubeCodes> {
    (arb_body(q), any::<bool>()).prop_map(|(mut body, awake)| {
        if !awake {
            body.linvel = [0; 3];
            body.angvel = [0; 3];
        }
        CubeCodes { body, awake }
    })
}

fn arb_snapshot(cubes: usize) -> impl Strategy<Value = QuantizedSnapshot> {
    let q = StateQuantization::default();
    (
        prop::collection::btree_map(0u32..40, arb_body(q), 0..4),
        prop::collection::vec(arb_cube(q), cubes),
    )
        .prop_map(|(players, cubes)| QuantizedSnapshot {
            players: players.into_iter().collect(),
            cubes,
        })
}

/// A baseline and a snapshot that differs from it in a few places.
fn arb_pair() -> impl Strategy<Value = (QuantizedSnapshot, QuantizedSnapshot)> {
    let q = StateQuantization::default();
    (
        arb_snapshot(24),
        arb_snapshot(24),
        prop::collection::vec(any::<bool>(), 24),
    )
        .prop_map(move |(base, other, keep)| {
            let mut cur = base.clone();
            for (i, k) in keep.iter().enumerate() {
                if !k {
                    cur.cubes[i] = other.cubes[i];
                }
            }
            // Players: some kept, some moved, some new.
            cur.players = other.players.clone();
            if let Some((id, b)) = base.players.first() {
                if cur.player(*id).is_none() {
                    cur.players.push((*id, *b));
                    cur.players.sort_by_key(|(p, _)| *p);
                }
            }
            let _ = q;
            (base, cur)
        })
}

/// A cube sliding or falling at constant acceleration sends its new velocity and an
/// empty position difference: the decoder predicts the position from the velocities.
#[test]
fn positions_are_sent_against_where_velocities_took_them() {
    let q = StateQuantization::default();
    let (_, snaps) = pushing_run(2);
    let mut base = snaps[1].clone();
    let steps_per_mps = 1 << q.linvel_shift; // velocity codes per m/s
    let mut now = base.clone();
    let age = 8u32; // ticks at 64 Hz: 0.125 s
    for (i, c) in base.cubes.iter_mut().enumerate().take(50) {
        let i = i as i32;
        c.awake = true;
        // 1.5 m/s sideways, falling from 0 to -2 m/s: x += 0.1875 m, y -= 0.125 m.
        c.body.linvel = [3 * steps_per_mps / 2, 0, 0];
        let mut n = *c;
        n.body.linvel = [3 * steps_per_mps / 2, -2 * steps_per_mps, 0];
        n.body.position[0] += 96; // 0.1875 m at 1/512 m
        n.body.position[1] -= 64;
        // And a knock the velocities do not explain, in some of them.
        n.body.position[2] += i % 5;
        now.cubes[i as usize] = n;
    }
    let (bt, t) = (Tick(100), Tick(100 + age));
    let h = history(&[(bt, &base)]);
    let predicting = codec();
    let plain = codec().with_tick_hz(0);
    let with = predicting.encode(&now, t, Some((bt, &base)));
    let without = plain.encode(&now, t, Some((bt, &base)));
    assert_eq!(predicting.decode(&with.bytes, t, &h).unwrap(), now);
    assert_eq!(plain.decode(&without.bytes, t, &h).unwrap(), now);
    assert_eq!((with.changed_cubes, without.changed_cubes), (50, 50));
    // Without prediction each position costs 5 + 3 * 8 bits (a 96-step move); with it,
    // 5 bits, plus 3 * 4 for the unexplained knock of up to 4 steps.
    assert!(
        with.bits + 50 * 12 < without.bits,
        "with {} bits, without {}",
        with.bits,
        without.bits
    );
    // Decoding with another tick rate than the encoder's gives another state, never a
    // panic: both ends must agree on the codec.
    let wrong = codec().with_tick_hz(30).decode(&with.bytes, t, &h);
    assert_ne!(wrong.ok(), Some(now));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip_is_exact_and_byte_identical(
        (base, cur) in arb_pair(),
        age in prop_oneof![1u32..100, Just(999)],
        tick_hz in prop_oneof![Just(0u32), Just(60), Just(64), 1u32..=1000],
    ) {
        // Any tick rate, including none and ones that mispredict wildly, must round-trip.
        let codec = codec().with_tick_hz(tick_hz);
        let tick = Tick(1000);
        let bt = Tick(1000 - age);
        let h = history(&[(bt, &base)]);
        for baseline in [None, Some((bt, &base))] {
            let enc = codec.encode(&cur, tick, baseline);
            let back = codec.decode(&enc.bytes, tick, &h).unwrap();
            prop_assert_eq!(&back, &cur);
            prop_assert_eq!(codec.encode(&back, tick, baseline).bytes, enc.bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_ones_are_canonical(
        base in arb_snapshot(24),
        bytes in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let codec = codec();
        let tick = Tick(500);
        let bt = Tick(499);
        let h = history(&[(bt, &base)]);
        if let Ok(decoded) = codec.decode(&bytes, tick, &h) {
            let baseline = (bytes[0] & 1 == 1).then_some((bt, &base));
            prop_assert_eq!(codec.encode(&decoded, tick, baseline).bytes, bytes);
        }
    }

    #[test]
    fn mutated_payloads_never_panic((base, cur) in arb_pair(), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4)) {
        let codec = codec();
        let tick = Tick(1000);
        let bt = Tick(999);
        let h = history(&[(bt, &base)]);
        let mut bytes = codec.encode(&cur, tick, Some((bt, &base))).bytes;
        for (i, bit) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if let Ok(decoded) = codec.decode(&bytes, tick, &h) {
            let baseline = (bytes[0] & 1 == 1).then_some((bt, &base));
            prop_assert_eq!(codec.encode(&decoded, tick, baseline).bytes, bytes);
        }
    }
}

/// The widest quantization `is_valid` accepts for positions over velocities: 2^-16 m steps
/// and velocities up to 2^24 - 1 m/s. With a baseline millions of ticks old, the predicted
/// position's intermediate product passes `i64`'s range.
fn extreme_quantization() -> StateQuantization {
    StateQuantization {
        position_shift: 16,
        position_limit: 255,
        linvel_shift: 0,
        linvel_limit: (1 << 24) - 1,
        ..StateQuantization::default()
    }
}

/// The reviewer's reproduction: decoding used to panic ("attempt to negate with overflow")
/// on a baseline whose velocity times its age overflows `i64`. Nothing may panic, and
/// encoder and decoder must still agree on every state, however old the baseline.
#[test]
fn old_baselines_with_extreme_quantization_never_overflow() {
    let q = extreme_quantization();
    assert!(q.is_valid());
    let codec = SnapshotCodec::new(q);
    let limit = q.linvel_code_limit();
    let zero = BodyCodes {
        rotation: q.identity_rotation(),
        ..BodyCodes::default()
    };
    let base = QuantizedSnapshot {
        players: vec![(
            0,
            BodyCodes {
                linvel: [-limit, 0, 0],
                ..zero
            },
        )],
        cubes: Vec::new(),
    };
    let h = history(&[(Tick(0), &base)]);
    let tick = Tick(1 << 23);
    let bytes = [0x7f, 0x74, 0x7f, 0x3f, 0x80, 0x00, 0x00, 0x00];
    // Accepted or refused, but never a panic.
    if let Ok(decoded) = codec.decode(&bytes, tick, &h) {
        assert_eq!(
            codec.encode(&decoded, tick, Some((Tick(0), &base))).bytes,
            bytes
        );
    }

    let p = q.position_code_limit();
    for (linvel, position) in [
        ([-limit, limit, 0], [-p, p, 0]),
        ([-limit, -limit, -limit], [0, 1, -1]),
        ([limit, limit, limit], [p, -p, 12345]),
    ] {
        for age in [1u32, 1 << 20, 1 << 23, u32::MAX] {
            let cur = QuantizedSnapshot {
                players: vec![(
                    0,
                    BodyCodes {
                        linvel,
                        position,
                        ..zero
                    },
                )],
                cubes: Vec::new(),
            };
            let tick = Tick(age);
            let enc = codec.encode(&cur, tick, Some((Tick(0), &base)));
            assert_eq!(enc.baseline, Some(Tick(0)));
            let back = codec.decode(&enc.bytes, tick, &h).unwrap();
            assert_eq!(back, cur, "age {age}");
            assert_eq!(
                codec.encode(&back, tick, Some((Tick(0), &base))).bytes,
                enc.bytes
            );
        }
    }
}

/// Player ids cover all of `u32`: the largest one round-trips too (its encoder used to
/// overflow, and its decoder to refuse it).
#[test]
fn the_largest_player_id_round_trips() {
    let codec = codec();
    let q = codec.quantization;
    let body = q.encode(&lagless_scenes::cubes::BodyState {
        position: glam::Vec3::new(1.0, 2.0, 3.0),
        ..Default::default()
    });
    for ids in [
        vec![u32::MAX],
        vec![0, u32::MAX],
        vec![u32::MAX - 1, u32::MAX],
    ] {
        let snap = QuantizedSnapshot {
            players: ids.iter().map(|&id| (id, body)).collect(),
            cubes: Vec::new(),
        };
        let h = history(&[(Tick(9), &snap)]);
        for baseline in [None, Some((Tick(9), &snap))] {
            let enc = codec.encode(&snap, Tick(10), baseline);
            assert_eq!(enc.players, ids.len());
            let back = codec.decode(&enc.bytes, Tick(10), &h).unwrap();
            assert_eq!(back, snap, "{ids:?}");
        }
    }
}
