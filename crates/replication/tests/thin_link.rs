//! A link too thin for a packet every tick (a 3G downlink) is sent fewer snapshots, so
//! they arrive fresh instead of queueing for seconds behind each other.
#![allow(clippy::unwrap_used)]

use lagless_core::Tick;
use lagless_replication::*;
use std::collections::VecDeque;
use std::time::Duration;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("body")
                .vec3("position", 500.0, 1.0 / 512.0)
                .vec3("velocity", 64.0, 1.0 / 64.0)
                .velocity_of("position"),
        )
        .build()
        .expect("schema")
}

/// A body at `t` that jumps about, so every snapshot has something to say.
fn write(w: &mut StateWriter, t: u32, salt: u32) {
    let k = (t.wrapping_mul(2_654_435_761) ^ salt) % 997;
    let x = k as f32 * 0.37;
    w.vec3([x, (k % 13) as f32, -x]);
    w.vec3([(k % 50) as f32, 3.0, -((k % 40) as f32)]);
}

/// Ages (ms) at which the snapshots sent over the run's last 20 s reach a client whose
/// downlink carries `kbps` through a first-in first-out queue (50 ms each way besides),
/// and how many were sent then.
fn ages_over_a_link(kbps: f64) -> (Vec<f64>, usize) {
    let config = ReplicationConfig {
        tick_hz: 64,
        snapshot_hz: 64.0,
        threads: 1,
        ..ReplicationConfig::default()
    };
    let overhead = config.packet_overhead_bytes as f64;
    let mut server = ReplicationServer::new(schema(), config);
    server.add_client(1);
    for id in 0..8 {
        server.spawn_with_id(id, 0, |w| write(w, 0, id)).unwrap();
    }
    let one_way = 0.05;
    // The time the link is busy until, and acknowledgements on their way: (time, tick).
    let mut busy_until = 0.0_f64;
    let mut acks: VecDeque<(f64, u32)> = VecDeque::new();
    let (mut ages, mut sent) = (Vec::new(), 0);
    let ticks = 64 * 60;
    for t in 1..=ticks {
        let now = f64::from(t) / 64.0;
        while acks.front().is_some_and(|(at, _)| *at <= now) {
            let (at, tick) = acks.pop_front().unwrap();
            server.acknowledge(1, Tick(tick), Duration::from_secs_f64(at));
        }
        for id in 0..8 {
            server.update(id, |w| write(w, t, id)).unwrap();
        }
        if !server.snapshot_due(1, Tick(t)) {
            continue;
        }
        let s = server
            .encode(1, Tick(t), Duration::from_secs_f64(now))
            .unwrap();
        let bits = (s.bytes.len() as f64 + overhead) * 8.0;
        busy_until = busy_until.max(now) + bits / (kbps * 1000.0);
        let arrives = busy_until + one_way;
        acks.push_back((arrives + one_way, t));
        if t > ticks - 64 * 20 {
            ages.push((arrives - now) * 1000.0);
            sent += 1;
        }
    }
    (ages, sent)
}

#[test]
fn a_link_thinner_than_a_packet_a_tick_is_sent_fewer_fresh_snapshots() {
    // 24 kbit/s: the packets' headers alone at 64 a second take 31.
    let (ages, sent) = ages_over_a_link(24.0);
    let worst = ages.iter().copied().fold(0.0, f64::max);
    assert!(worst < 1000.0, "snapshots queued up to {worst:.0} ms");
    // Fewer than every tick, and at least 10 a second.
    assert!(sent < 64 * 20 / 2, "{sent} snapshots in 20 s");
    assert!(sent >= 10 * 20, "{sent} snapshots in 20 s");
}

#[test]
fn a_link_that_carries_every_snapshot_gets_every_one() {
    let (ages, sent) = ages_over_a_link(400.0);
    assert_eq!(sent, 64 * 20);
    let worst = ages.iter().copied().fold(0.0, f64::max);
    assert!(worst < 200.0, "snapshots queued up to {worst:.0} ms");
}
