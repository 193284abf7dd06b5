//! A hostile (or broken) server behind the public [`Client`]: every snapshot's
//! dead-reckoning batch carries a forged message beside the honest one (an id nobody
//! spawned, a speed, interval or lag beyond the limits, a tick far ahead, an old tick, in
//! turn). Each is refused and counted by reason; the honest character is still shown.
#![allow(clippy::unwrap_used)]

use lagless_core::{ServerConfig as SessionConfig, ServerSession};
use lagless_replication::deadreckoning::{DrLimits, DrMessage, Motion};
use lagless_replication::*;
use lagless_wire::BitWriter;
use std::time::Duration;

const HZ: u32 = 32;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("walker").vec3("position", 500.0, 0.01))
        .build()
        .unwrap()
}

fn moving(speed: f32, interval_ms: u64, lag_ms: u64) -> Motion {
    Motion::Moving {
        speed,
        interval: Duration::from_millis(interval_ms),
        lag: Duration::from_millis(lag_ms),
    }
}

/// The `n`th forgery, of six kinds in turn, made from the honest message `real`.
fn forge(n: u64, real: DrMessage) -> DrMessage {
    match n % 6 {
        0 => DrMessage {
            id: 1 << 30,
            ..real
        },
        // The codec carries up to 32 m/s; the limit is 20.
        1 => DrMessage {
            motion: moving(31.0, 2000, 0),
            ..real
        },
        2 => DrMessage {
            motion: moving(1.0, 10_200, 0),
            ..real
        },
        3 => DrMessage {
            motion: moving(1.0, 2000, 1_020),
            ..real
        },
        // 5000 ticks ahead: the 16-bit wire tick carries it; the receiver refuses it.
        4 => DrMessage {
            tick: Tick(real.tick.0.wrapping_add(5000)),
            ..real
        },
        _ => DrMessage {
            tick: Tick(real.tick.0.saturating_sub(200)),
            ..real
        },
    }
}

#[test]
fn forged_dead_reckoning_messages_are_refused_by_reason_and_the_honest_one_shown() {
    let config = NetConfig {
        dead_reckoning: Some(DrConfig::default()),
        ..NetConfig::new(HZ)
    };
    let dr = config.dead_reckoning.unwrap();
    // The forger's codec writes what an honest one refuses to: the same bits, wider
    // limits.
    let mut forger = dr.codec;
    forger.limits = DrLimits {
        max_speed: 32.0,
        max_interval: Duration::from_secs(11),
        max_lag: Duration::from_secs(2),
        ..forger.limits
    };
    let mut session = ServerSession::<u8>::new(SessionConfig {
        tick_hz: HZ,
        snapshot_interval: 1,
        ..SessionConfig::default()
    });
    let mut replication = ReplicationServer::new(
        schema(),
        lagless_replication::ReplicationConfig {
            tick_hz: HZ,
            snapshot_hz: f64::from(HZ),
            ..Default::default()
        },
    );
    session.add_client(1).unwrap();
    replication.add_client(1);
    replication
        .spawn_with_id(0, 0, |w| w.vec3([0.0; 3]))
        .unwrap();
    let mut client = Client::new(schema(), Spectator::default(), &config).unwrap();
    client.set_policy(0, Policy::DeadReckoned);

    let (mut now, mut forged, mut late_pose) = (Duration::ZERO, 0u64, None);
    let step = Duration::from_millis(10);
    while now < Duration::from_secs(12) {
        while let Some(p) = client.poll_transmit(now) {
            let _ = session.handle_packet(1, now, &p);
        }
        if let Some(t) = session.snapshot_ack(1) {
            replication.acknowledge(1, t, now);
        }
        session.update(now);
        while session.next_tick().is_some() {
            let tick = session.current_tick();
            let z = tick.0 as f32 / HZ as f32;
            let honest = DrMessage {
                id: 0,
                tick,
                position: [0.0, 0.0, z],
                heading: 0.0,
                motion: moving(1.0, 1000, 0),
            };
            let mut bits = BitWriter::new();
            let batch = [honest, forge(forged, honest)];
            forged += 1;
            forger.write_batch(&mut bits, &batch).unwrap();
            let snapshot = replication.encode(1, tick, now).unwrap();
            bits.write_bytes_aligned(&snapshot.bytes);
            session.send_snapshot(1, now, bits.as_bytes()).unwrap();
        }
        while let Some((_, p)) = session.poll_transmit() {
            // Refusals are counted; the connection goes on.
            let _ = client.receive(now, &p);
        }
        client.update(now);
        while let Some(t) = client.next_tick() {
            client.tick(t, 0);
        }
        let render = client.render(now);
        if now > Duration::from_secs(11) {
            late_pose = render.pose(0).or(late_pose);
        }
        now += step;
    }

    let s = client.dead_reckoning().unwrap().stats();
    let per_kind = forged / 6;
    // The forged ids nobody spawned, and honest messages before the spawn decoded.
    assert!(s.unknown_id >= per_kind, "{s:?}");
    for (what, n) in [
        ("speed", s.bad_speed),
        ("interval", s.bad_interval),
        ("lag", s.bad_lag),
        ("tick far off", s.tick_far_off),
        ("stale", s.stale),
    ] {
        assert!(
            n + 2 >= per_kind,
            "{what}: {n} of {per_kind} refused: {s:?}"
        );
    }
    assert!(s.accepted >= forged / 4, "{s:?}");
    // The honest character is still where it truly is (1 m/s along z).
    let pose = late_pose.expect("the honest character is shown");
    let truth = now.as_secs_f32();
    assert!(
        (pose.position[2] - truth).abs() < 0.5,
        "{pose:?} at {truth}"
    );
}
