//! Predicted spawns: a client's projectile handed over to the server's.

use lagless_replication::spawns::*;
use lagless_replication::{Kind, Schema};
use lagless_replication::{Limits, Pose, ReplicationConfig, ReplicationServer, Tick};
use lagless_wire::{BitReader, BitWriter};

const ROCKET: u16 = 1;

/// A rocket flying along +x at 20 m/s from the origin, spawned at `tick`.
fn rocket_at(spawned: Tick, now: f64) -> Pose {
    let x = 20.0 * (now - f64::from(spawned.0)) / 30.0;
    Pose::planar([x as f32, 0.0], 0.0)
}

#[test]
fn a_predicted_rocket_is_handed_over_to_the_servers_without_a_jump() {
    let space = IdSpace::from_limits(&Limits::default(), 64).unwrap();
    let mut client = SpawnRegistry::<Components>::new(SpawnConfig::default(), space, 5).unwrap();
    let mut guard = SpawnGuard::new(SpawnGuardConfig {
        space,
        ..SpawnGuardConfig::default()
    });
    let codec = SpawnClaimCodec {
        space,
        ..SpawnClaimCodec::default()
    };

    // Client tick 200: fire. The rocket exists at once, with a component.
    let mut parts = Components::new();
    parts.insert(ROCKET);
    let claim = client
        .spawn(Tick(200), ROCKET, rocket_at(Tick(200), 200.0), parts)
        .unwrap();
    let mut w = BitWriter::new();
    codec.write(&mut w, 5, &[claim]).unwrap();
    let bytes = w.into_bytes();

    // The server, 4 ticks behind, accepts the claim and spawns its rocket 31 at the
    // claim's tick, owner 5.
    let claims = codec
        .read(&mut BitReader::new(&bytes), 5, Tick(196))
        .unwrap();
    assert_eq!(guard.check(5, Tick(196), &claims[0]), Ok(true));

    // The client flies its rocket; a component comes and goes meanwhile.
    for t in 201..=212 {
        client.set_pose(claim.id, rocket_at(Tick(200), f64::from(t)));
        let p = client.get_mut(claim.id).unwrap();
        if t == 205 {
            p.payload.insert("smoke");
        }
        if t == 208 {
            assert_eq!(p.payload.remove::<&str>(), Some("smoke"));
        }
    }
    // At client tick 212 the server's rocket arrives: the server applied the input a
    // tick late (tick 201). The owner shows it where it is now, extrapolated to the
    // client's present from its state (not interpolated 150 ms back, which would put
    // it 5 m behind the one the player saw leave), so the offset is the prediction's
    // error only: one tick of flight, 0.67 m.
    let server = ServerSpawn {
        id: 31,
        owner: 5,
        tick: Tick(201),
        kind: ROCKET,
        seq: None,
        pose: rocket_at(Tick(201), 212.0),
    };
    let h = client.match_server(&server).unwrap();
    assert_eq!(
        (h.predicted_id, h.server_id, h.tick_error),
        (claim.id, 31, 1)
    );
    assert!((h.offset[0] - 20.0 / 30.0).abs() < 1e-4, "{:?}", h.offset);
    assert_eq!((h.offset[1], h.offset[2]), (0.0, 0.0));
    assert_eq!(h.payload.get::<u16>(), Some(&ROCKET));
    assert!(!h.payload.contains::<&str>());

    // The hand-over through the core's smoother: the first frame of the server's
    // rocket is drawn exactly where the predicted one was.
    let mut smoother = lagless_core::ErrorSmoother::new(lagless_core::SmoothingConfig::default());
    let (p, q) = (h.predicted_pose, h.server_pose);
    smoother.correct(p.position, p.rotation, q.position, q.rotation);
    let (drawn, _) = smoother.apply(q.position, q.rotation);
    assert!((drawn[0] - p.position[0]).abs() < 1e-5);
    assert_eq!(client.stats().matched, 1);
}

#[test]
fn an_unconfirmed_rocket_expires_and_is_counted() {
    let mut client =
        SpawnRegistry::<()>::new(SpawnConfig::default(), IdSpace::default(), 0).unwrap();
    let lost = client.spawn(Tick(10), ROCKET, Pose::default(), ()).unwrap();
    let kept = client.spawn(Tick(25), ROCKET, Pose::default(), ()).unwrap();
    assert!(client.expire(Tick(39)).is_empty());
    let gone = client.expire(Tick(40));
    assert_eq!(
        gone.iter().map(|p| p.claim.id).collect::<Vec<_>>(),
        [lost.id]
    );
    assert!(client.get(kept.id).is_some());
    let s = client.stats();
    assert_eq!((s.predicted, s.orphaned, s.matched), (2, 1, 0));
    assert_eq!(s.matched_pct(), 0.0);
}

#[test]
fn a_spoofed_spawn_id_is_refused() {
    let space = IdSpace::default();
    let mut guard = SpawnGuard::new(SpawnGuardConfig::default());
    let mut other = SpawnRegistry::<()>::new(SpawnConfig::default(), space, 9).unwrap();
    let theirs = other.spawn(Tick(100), ROCKET, Pose::default(), ()).unwrap();
    // Client 3 claims client 9's id, then a server id.
    assert_eq!(
        guard.check(3, Tick(100), &theirs),
        Err(SpawnError::IdOutOfRange(theirs.id))
    );
    let server_id = SpawnClaim { id: 12, ..theirs };
    assert_eq!(
        guard.check(3, Tick(100), &server_id),
        Err(SpawnError::IdOutOfRange(12))
    );
    assert_eq!(guard.stats().refused_id, 2);
    assert_eq!(guard.stats().accepted, 0);
}

#[test]
fn the_replication_server_can_never_allocate_a_predicted_id() {
    let schema = || {
        Schema::new()
            .kind(Kind::new("rocket").int("x", 0, 9))
            .build()
            .unwrap()
    };
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    let space = IdSpace::from_limits(&server.config().limits, 16).unwrap();
    let first_client_id = *space.range(0).unwrap().start();
    assert!(
        server
            .spawn_with_id(first_client_id, 0, |w| {
                w.int(1);
            })
            .is_err()
    );
    let id = server.spawn(0, |w| {
        w.int(1);
    });
    assert!(space.is_server(id.unwrap()));
}
