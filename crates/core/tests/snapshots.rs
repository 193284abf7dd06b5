//! Snapshots larger than a packet are fragmented and reassembled; lost fragments cost
//! that snapshot only; snapshots never go backwards in time at the client.

mod common;

use common::Harness;
use lagless_core::{ClientConfig, ServerConfig};
use lagless_netem::{LinkConfig, Loss, profile};
use std::time::Duration;

#[test]
fn large_snapshots_survive_loss_and_reordering() {
    let link = LinkConfig {
        reorder_rate: 0.01,
        duplicate_rate: 0.02,
        loss: Loss::Uniform { rate: 0.02 },
        ..profile("broadband").unwrap()
    };
    let mut h = Harness::new(ServerConfig::default(), ClientConfig::default(), link, 1, 4);
    h.payload_bytes = 10_000; // 9 fragments
    h.run_until(Duration::from_secs(10), &mut |_, _| 1);
    let c = &h.clients[0];
    let st = c.session.stats();
    // A snapshot needs all 9 fragments: 2.5% loss costs ~20% of them, and a fragment held
    // back 30 ms by reordering usually finds a newer snapshot complete (which supersedes
    // its own) — by design, the newest state wins. Everything else must arrive whole.
    let sent = 10 * 64;
    assert!(st.snapshots_received as f64 > sent as f64 * 0.65, "{st:?}");
    assert_eq!(c.errors, 0, "no packet was malformed");
    // Delivered snapshots strictly increase in tick.
    assert!(c.snapshot_ticks.windows(2).all(|w| w[1] > w[0]));
    // The payload is intact: the shown position equals the server's at that tick.
    let (tick, shown) = c.shown.unwrap();
    let applied: i64 = h.applied[&1]
        .range(..tick)
        .map(|(_, &i)| i64::from(i))
        .sum();
    assert_eq!(shown, applied);
}

#[test]
fn snapshot_interval_is_respected() {
    let server = ServerConfig {
        snapshot_interval: 4,
        ..ServerConfig::default()
    };
    let mut h = Harness::new(
        server,
        ClientConfig::default(),
        profile("lan").unwrap(),
        1,
        2,
    );
    h.run_until(Duration::from_secs(4), &mut |_, _| 0);
    let st = h.clients[0].session.stats();
    assert!((60..=66).contains(&st.snapshots_received), "{st:?}");
    assert!(h.clients[0].snapshot_ticks.iter().all(|t| t.0 % 4 == 0));
}

#[test]
fn essential_parts_arrive_on_their_own() {
    use lagless_core::{ClientSession, ProtocolError, ServerSession, Tick};
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    server.add_client(1).unwrap();
    server.update(Duration::ZERO);
    server.update(Duration::from_millis(20));
    while server.next_tick().is_some() {}
    let now = Duration::from_millis(20);
    let essential = vec![7u8; 100];
    let full = vec![9u8; 5000]; // 5 fragments
    server
        .send_snapshot_with_essential(1, now, &essential, &full)
        .unwrap();
    let packets: Vec<Vec<u8>> =
        std::iter::from_fn(|| server.poll_transmit().map(|(_, p)| p)).collect();
    assert_eq!(packets.len(), 6);
    // Every fragment of the full snapshot but one is lost: the essential part still arrives.
    for p in &packets[..packets.len() - 1] {
        client.handle_packet(now, p).unwrap();
    }
    let got = client.poll_snapshot().unwrap();
    assert!(got.essential);
    assert_eq!(got.payload, essential);
    assert_eq!(client.poll_snapshot(), None);
    // The last fragment completes the full snapshot of the same tick, delivered too.
    client.handle_packet(now, &packets[5]).unwrap();
    let full_got = client.poll_snapshot().unwrap();
    assert!(!full_got.essential && full_got.tick == got.tick && full_got.payload == full);
    // An essential part older than a delivered full snapshot is stale.
    client.handle_packet(now, &packets[0]).unwrap();
    assert_eq!(client.poll_snapshot(), None);
    // It must fit one packet; a refused snapshot queues nothing, not even its essential part.
    assert!(matches!(
        server.send_snapshot_with_essential(1, now, &[0; 2000], &full),
        Err(ProtocolError::SnapshotTooLarge { .. })
    ));
    assert!(matches!(
        server.send_snapshot_with_essential(1, now, &essential, &vec![0; 1 << 20]),
        Err(ProtocolError::SnapshotTooLarge { .. })
    ));
    assert_eq!(server.poll_transmit(), None);
    assert!(got.tick > Tick(0));
}
