//! The shooter mechanisms' decoders: view claims (with the rewound shot test behind
//! them), hit reports (with the client's hit tracker) and spawn claims (with the
//! server's guard).

use lagless_core::interpolation::Pose;
use lagless_core::{Reader, Tick, Writer};
use lagless_replication::hits::{HitReport, HitReportCodec, HitTracker};
use lagless_replication::lagcomp::{LagCompConfig, LagCompensator, Shape, Shot, ViewClaim};
use lagless_replication::spawns::{
    IdSpace, SpawnClaim, SpawnClaimCodec, SpawnGuard, SpawnGuardConfig,
};
use lagless_wire::{BitReader, BitWriter};

/// The server's tick the targets decode against.
const NOW: Tick = Tick(70_000);

/// A `ViewClaim` in both framings (a decoded claim re-encodes to a claim that decodes
/// the same), then the rest of the bytes as a shot (raw f32s: NaN, infinities, huge
/// values) tested against a small recorded world: a bad shot is an error, a good one
/// hits at a finite point within range, and a rewind never exceeds the window.
pub fn view_claim(data: &[u8]) {
    let mut r = Reader::new(data);
    let claim = ViewClaim::read(&mut r);
    if let Ok(c) = claim {
        let mut w = Writer::new();
        c.write(&mut w);
        let again = w.into_bytes();
        assert_eq!(ViewClaim::read(&mut Reader::new(&again)), Ok(c));
    }
    if let Ok(c) = ViewClaim::read_bits(&mut BitReader::new(data)) {
        let mut w = BitWriter::new();
        c.write_bits(&mut w);
        let again = w.into_bytes();
        assert_eq!(ViewClaim::read_bits(&mut BitReader::new(&again)), Ok(c));
    }
    let rest = r.read_rest();
    let f = |i: usize| {
        rest.get(i * 4..i * 4 + 4)
            .map_or(1.0, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut lc = LagCompensator::new(LagCompConfig::default());
    for t in NOW.0 - 12..=NOW.0 {
        let y = (t + 12 - NOW.0) as f32 * 0.2 - 1.0;
        let shapes = [
            Shape::Circle { radius: 0.5 },
            Shape::Capsule3 {
                half_height: 0.8,
                radius: 0.3,
            },
            Shape::Cuboid {
                half_extents: [0.4, 0.9, 0.2],
            },
        ];
        for (id, shape) in (1u32..).zip(shapes) {
            let pose = Pose::planar([5.0 * id as f32, y], y);
            lc.record(Tick(t), id, pose, shape).expect("a valid record");
        }
    }
    let view = claim.map_or(f64::from(f(6)), |c| c.view(NOW));
    let shot = Shot {
        claimed_view: view,
        origin: [f(0), f(1), f(2)],
        direction: [f(3), f(4), f(5)],
        max_distance: f(7),
        shooter: Some(1),
    };
    if let Ok(result) = lc.rewind_query(NOW, &shot) {
        assert!(result.rewind.rewind_ms <= 250.0 + 1e-9, "{result:?}");
        assert!(result.rewind.rewind_ms >= 0.0, "{result:?}");
        if let Some(hit) = result.hit {
            assert!(hit.point.iter().all(|v| v.is_finite()), "{hit:?}");
            assert!(
                hit.distance >= 0.0 && hit.distance <= shot.max_distance,
                "{hit:?}"
            );
            assert_ne!(hit.entity, 1, "the shooter hit itself");
        }
    }
}

/// A batch of `HitReport`s: what decodes re-encodes to the same bytes' value, and
/// feeding it to a tracker with shown hits keeps its counters consistent.
pub fn hit_reports(data: &[u8]) {
    let codec = HitReportCodec::default();
    let Ok(reports) = codec.read(&mut BitReader::new(data)) else {
        return;
    };
    let mut w = BitWriter::new();
    codec
        .write(&mut w, &reports)
        .expect("decoded reports re-encode");
    let again = w.into_bytes();
    assert_eq!(
        codec.read(&mut BitReader::new(&again)).as_ref(),
        Ok(&reports)
    );
    let mut tracker = HitTracker::new(Default::default());
    for shot in 0..32u16 {
        tracker.shown(shot, u32::from(shot % 4), Tick(u32::from(shot)));
    }
    for r in &reports {
        tracker.report(r);
        tracker.report(r);
    }
    tracker.update(Tick(1000));
    while tracker.poll_event().is_some() {}
    let s = tracker.stats();
    assert_eq!(s.confirmed + s.rejected + s.expired, s.shown, "{s:?}");
    assert_eq!(tracker.pending(), 0);
}

/// A batch of `SpawnClaim`s from a few slots: what decodes lies in the slot's range and
/// re-encodes to a batch that decodes the same; the guard then checks every claim
/// without panicking, accepting only ids of the slot.
pub fn spawn_claims(data: &[u8]) {
    let codec = SpawnClaimCodec {
        space: IdSpace::new((1 << 20) - 1, 64).expect("a valid layout"),
        ..SpawnClaimCodec::default()
    };
    let mut guard = SpawnGuard::new(SpawnGuardConfig {
        space: codec.space,
        ..SpawnGuardConfig::default()
    });
    guard.set_min_interval(1, 3);
    for slot in [0, 17, 63, 64] {
        let Ok(claims) = codec.read(&mut BitReader::new(data), slot, NOW) else {
            continue;
        };
        assert!(
            claims
                .iter()
                .all(|c| codec.space.slot_of(c.id) == Some(slot))
        );
        let mut w = BitWriter::new();
        codec
            .write(&mut w, slot, &claims)
            .expect("decoded claims re-encode");
        let again = w.into_bytes();
        assert_eq!(
            codec.read(&mut BitReader::new(&again), slot, NOW).as_ref(),
            Ok(&claims)
        );
        for c in &claims {
            let _ = guard.check(slot, NOW, c);
            // The same claim from another slot is always refused.
            assert!(guard.check((slot + 1) % 64, NOW, c).is_err());
        }
    }
}

/// `lagless_scenes::shooter::ShooterInput::decode` (what decodes re-encodes to the
/// bytes it consumed), then the decoded inputs (up to 32, one per tick, alternating
/// between two players) stepped through a `ShooterScene`: NaN or infinite aims, any
/// claimed view, any spawn id must be refused or clamped, never panic, and leave
/// every player at a finite position.
pub fn shooter_input(data: &[u8]) {
    use lagless_core::Input;
    use lagless_scenes::shooter::{ShooterConfig, ShooterInput, ShooterScene};
    let mut r = Reader::new(data);
    let mut inputs = Vec::new();
    while inputs.len() < 32 {
        let start = r.position();
        let Ok(i) = ShooterInput::decode(&mut r) else {
            break;
        };
        let mut w = Writer::new();
        i.encode(&mut w);
        assert_eq!(w.as_bytes(), &data[start..r.position()]);
        inputs.push(i);
    }
    let mut scene = ShooterScene::new(ShooterConfig::default());
    scene.add_player(1);
    scene.add_player(2);
    for (t, i) in inputs.iter().enumerate() {
        let player = 1 + (t as u32 % 2);
        scene.step(Tick(1000 + t as u32), &[(player, *i)]);
    }
    for (_, p) in scene.players() {
        assert!(p.position.iter().all(|v| v.is_finite()));
    }
}

/// Valid inputs for the three targets.
pub(crate) fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "shooter_input" => {
            use lagless_core::Input;
            use lagless_scenes::shooter::ShooterInput;
            let mut rifle = ShooterInput::moving(1.0, 0.0).with_aim([0.0, 1.0]);
            rifle.fire = 1;
            rifle.shot = 7;
            rifle.view = ViewClaim::from_units(200);
            let mut launch = ShooterInput::moving(-1.0, 1.0).with_aim([1.0, 1.0]);
            launch.fire = 2;
            launch.spawn_id = 1 << 20;
            [
                vec![rifle, launch],
                vec![ShooterInput::default(); 3],
                vec![launch],
            ]
            .into_iter()
            .map(|batch| {
                let mut w = Writer::new();
                for i in batch {
                    i.encode(&mut w);
                }
                w.into_bytes()
            })
            .collect()
        }
        "view_claim" => [0u16, 144, 960, u16::MAX]
            .into_iter()
            .map(|units| {
                let mut w = Writer::new();
                ViewClaim::from_units(units).write(&mut w);
                for v in [0.0f32, 0.0, 0.0, 1.0, 0.1, 0.0, 0.0, 60.0] {
                    w.write_f32(v);
                }
                w.into_bytes()
            })
            .collect(),
        "hit_reports" => {
            let codec = HitReportCodec::default();
            let batches: [&[HitReport]; 3] = [
                &[],
                &[HitReport {
                    shot: 3,
                    target: Some(2),
                }],
                &[
                    HitReport {
                        shot: 0,
                        target: None,
                    },
                    HitReport {
                        shot: 65_535,
                        target: Some((1 << 20) - 1),
                    },
                    HitReport {
                        shot: 7,
                        target: Some(3),
                    },
                ],
            ];
            batches
                .iter()
                .map(|b| {
                    let mut w = BitWriter::new();
                    codec.write(&mut w, b).expect("valid reports");
                    w.into_bytes()
                })
                .collect()
        }
        "spawn_claims" => {
            let codec = SpawnClaimCodec {
                space: IdSpace::new((1 << 20) - 1, 64).expect("a valid layout"),
                ..SpawnClaimCodec::default()
            };
            [0u32, 17, 63]
                .into_iter()
                .map(|slot| {
                    let start = *codec.space.range(slot).expect("a slot").start();
                    let claims: Vec<SpawnClaim> = (0..3)
                        .map(|i| SpawnClaim {
                            id: start + i * 1000,
                            kind: (i % 2) as u16,
                            tick: Tick(NOW.0 + i * 2),
                            seq: i as u8,
                        })
                        .collect();
                    let mut w = BitWriter::new();
                    codec.write(&mut w, slot, &claims).expect("valid claims");
                    w.into_bytes()
                })
                .collect()
        }
        _ => Vec::new(),
    }
}
