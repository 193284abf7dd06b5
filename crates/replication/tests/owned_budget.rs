//! A client's own (predicted) entity may not starve the rest of the world at the
//! smallest budget: snapshots carry the least a snapshot may hold on top of it.

use lagless_core::Tick;
use lagless_replication::*;
use std::time::Duration;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("body")
                .vec3("position", 500.0, 1.0 / 512.0)
                .rotation("rotation", 11)
                .vec3("velocity", 64.0, 1.0 / 64.0)
                .velocity_of("position"),
        )
        .build()
        .expect("schema")
}

/// A body at `t` that jumps about, so no motion prediction makes its delta cheap.
fn write(w: &mut StateWriter, t: u32, salt: u32) {
    let k = (t.wrapping_mul(2_654_435_761) ^ salt) % 997;
    let x = k as f32 * 0.37;
    w.vec3([x, (k % 13) as f32, -x]);
    w.rotation([0.0, (k as f32 * 0.01).sin(), 0.0, (k as f32 * 0.01).cos()]);
    w.vec3([(k % 50) as f32, 3.0, -((k % 40) as f32)]);
}

#[test]
fn the_own_entity_does_not_starve_the_others_at_the_least_budget() {
    let config = ReplicationConfig {
        tick_hz: 64,
        snapshot_hz: 64.0,
        budget: BudgetConfig {
            max_kbps: 16.0,
            min_kbps: 16.0,
            adaptive: false,
            ..BudgetConfig::default()
        },
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), config);
    server.add_client(1);
    server.set_owned(1, &[0]);
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    server.spawn_with_id(0, 0, |w| write(w, 0, 1)).unwrap();
    server.spawn_with_id(1, 0, |w| write(w, 0, 2)).unwrap();
    let mut other_updates = 0;
    let mut own_updates = 0;
    for t in 1..=128u32 {
        server.update(0, |w| write(w, t, 1)).unwrap();
        server.update(1, |w| write(w, t, 2)).unwrap();
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let s = server.encode(1, Tick(t), now).unwrap();
        if let Ok(Some(applied)) = client.receive(Tick(t), &s.bytes) {
            own_updates += usize::from(applied.updated.contains(&0));
            other_updates += usize::from(applied.updated.contains(&1));
        }
        server.acknowledge(1, Tick(t), now);
    }
    // The own entity goes every time; the other one gets the room left at least every
    // other snapshot (it does not fit beside the own entity in 256 bits at all).
    assert_eq!(own_updates, 128);
    assert!(
        other_updates >= 40,
        "the other entity updated {other_updates} times"
    );
}
