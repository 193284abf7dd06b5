//! Bytes from the network: every malformed snapshot is a typed error, never a panic, and a
//! refused snapshot leaves the client as it was.

use lagless_core::Tick;
use lagless_replication::*;
use proptest::prelude::*;
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
        .kind(
            Kind::new("unit")
                .angle("heading", 10)
                .int("hp", 0, 100)
                .bool("b"),
        )
        .build()
        .expect("schema")
}

/// A client that decoded two snapshots, and the bytes of a third.
fn primed() -> (ReplicationClient, Vec<u8>) {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    for i in 0..5 {
        server
            .spawn(0, |w| {
                w.vec3([i as f32, 0.0, 0.0]);
                w.rotation([0.0, 0.0, 0.0, 1.0]);
                w.vec3([1.0, 0.0, 0.0]);
            })
            .expect("spawn");
    }
    server
        .spawn(1, |w| {
            w.angle(1.0);
            w.int(50);
            w.bool(true);
        })
        .expect("spawn");
    server.add_client(1);
    for t in 1..3 {
        let s = server.encode(1, Tick(t), Duration::ZERO).expect("encode");
        client.receive(Tick(t), &s.bytes).expect("decode");
        server.acknowledge(1, Tick(t), Duration::ZERO);
        server
            .update(2, |w| {
                w.vec3([t as f32, 1.0, 0.0]);
                w.rotation([0.0, 0.6, 0.0, 0.8]);
                w.vec3([0.0, 2.0, 0.0]);
            })
            .expect("update");
    }
    server.despawn(4).expect("despawn");
    let third = server.encode(1, Tick(3), Duration::ZERO).expect("encode");
    (client, third.bytes)
}

#[test]
fn typed_errors() {
    let (mut client, bytes) = primed();
    let before: Vec<(u32, ClientEntity)> = client.entities().map(|(i, e)| (i, e.clone())).collect();
    // Truncated.
    for cut in 0..bytes.len() {
        assert!(client.receive(Tick(3), &bytes[..cut]).is_err());
    }
    // A baseline the client never had.
    assert!(matches!(
        client.receive(Tick(90), &bytes),
        Err(ReplicationError::MissingBaseline(Tick(89)))
    ));
    let after: Vec<(u32, ClientEntity)> = client.entities().map(|(i, e)| (i, e.clone())).collect();
    assert_eq!(before, after, "refused snapshots change nothing");
    assert!(client.stats().malformed > 0 && client.stats().missing_baseline == 1);
    client
        .receive(Tick(3), &bytes)
        .expect("the real one still decodes");
    assert!(client.get(4).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Any bytes: an error or a snapshot, never a panic; and a snapshot that decodes
    /// leaves every entity with codes its kind allows.
    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64), tick in 1u32..6) {
        let (mut client, _) = primed();
        if let Ok(Some(_)) = client.receive(Tick(tick), &bytes) {
            for (_, e) in client.entities() {
                let kind = client.kind(e.kind).expect("declared kind");
                prop_assert!(codes_valid(kind, &e.codes));
            }
        }
    }

    /// Flipping bits of a real snapshot: never a panic.
    #[test]
    fn mutated_snapshots(flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..6)) {
        let (mut client, mut bytes) = primed();
        for (i, b) in flips {
            if !bytes.is_empty() {
                let n = bytes.len();
                bytes[i % n] ^= 1 << b;
            }
        }
        let _ = client.receive(Tick(3), &bytes);
    }
}

#[test]
fn acknowledgements_cannot_grow_memory() {
    let mut server = ReplicationServer::new(
        schema(),
        ReplicationConfig {
            max_in_flight: 16,
            ..ReplicationConfig::default()
        },
    );
    server.add_client(1);
    for t in 1..500u32 {
        // Lies: ticks never sent, far ahead, repeated.
        server.acknowledge(1, Tick(t.wrapping_mul(7919)), Duration::ZERO);
        server.acknowledge(1, Tick(u32::MAX - t), Duration::ZERO);
        server.encode(1, Tick(t), Duration::ZERO).expect("encode");
    }
    let s = server.client_stats(1).expect("client");
    assert!(s.stale_acks > 900);
    // Never more than 16 snapshots remembered: it started over every 16.
    assert!(s.resyncs >= 30, "{}", s.resyncs);
}
