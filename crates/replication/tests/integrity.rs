//! The high-level `Server` and `Client` with the sessions' checksum on at both ends
//! (`NetConfig::server_session.checksum`, `client_session.checksum`): no single-bit flip
//! of a snapshot reaches the registry. Without it, some decode into a wrong registry
//! silently (issue 48: 6 of 576), which is why a transport without integrity needs it.
#![allow(clippy::unwrap_used)]

use lagless_replication::*;
use std::time::Duration;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("dot").vec2("position", 500.0, 0.001))
        .build()
        .unwrap()
}

/// A server with a few dots and a spectating client, after `ms` of play on an instant
/// link; returns them and the last snapshot packet.
fn played(checksum: bool) -> (Server<u8>, Client<Spectator<u8>>, Vec<u8>, Duration) {
    let mut config = NetConfig::new(64);
    config.server_session.checksum = checksum;
    config.client_session.checksum = checksum;
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    server.connect(1).unwrap();
    for id in 0..4 {
        server
            .spawn_with_id(id, 0, |w| w.vec2([id as f32, 0.0]))
            .unwrap();
    }
    let mut client = Client::new(schema(), Spectator::default(), &config).unwrap();
    let mut now = Duration::ZERO;
    let mut last = Vec::new();
    let mut x = 0.0;
    for _ in 0..1000 {
        while let Some(p) = client.poll_transmit(now) {
            server.receive(1, now, &p).unwrap();
        }
        server.update(now);
        while server.next_tick().is_some() {
            x += 0.05;
            for id in 0..4 {
                let at = [id as f32 + x, 1.0];
                server.update_entity(id, |w| w.vec2(at)).unwrap();
            }
            server.send_snapshots(now).unwrap();
        }
        while let Some((_, p)) = server.poll_transmit() {
            client.receive(now, &p).unwrap();
            last = p;
        }
        client.update(now);
        while let Some(t) = client.next_tick() {
            client.tick(t, 0);
        }
        now += Duration::from_millis(1);
    }
    (server, client, last, now)
}

fn positions(c: &Client<Spectator<u8>>) -> Vec<(u32, [f32; 2])> {
    c.replication()
        .entities()
        .map(|(id, _)| (id, c.replication().reader(id).unwrap().vec2()))
        .collect()
}

#[test]
fn with_the_checksum_no_single_bit_flip_of_a_snapshot_reaches_the_registry() {
    let (mut server, mut client, packet, mut now) = played(true);
    let shown = positions(&client);
    let newest = client.replication().newest();
    assert_eq!(shown.len(), 4);
    // The next snapshot, flipped bit by bit: each refused before decoding, and the
    // registry as it was.
    now += Duration::from_millis(16);
    server.update(now);
    while server.next_tick().is_some() {
        server.send_snapshots(now).unwrap();
    }
    let next = server.poll_transmit().unwrap().1;
    assert_ne!(next, packet);
    for bit in 0..next.len() * 8 {
        let mut bad = next.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(client.receive(now, &bad).is_err(), "bit {bit} taken");
    }
    assert_eq!(positions(&client), shown);
    assert_eq!(client.replication().newest(), newest);
    let refused = client.session().stats().checksum_failures;
    assert_eq!(refused, next.len() as u64 * 8);
    // The intact one is taken.
    client.receive(now, &next).unwrap();
    assert!(client.replication().newest() > newest);
}
