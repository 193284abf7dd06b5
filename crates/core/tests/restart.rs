//! A client kept across a server restart: the new server names another instance with its
//! tick rate, until the client holds one of its snapshots, and the client starts over at
//! once, its epoch telling the game that every server tick it kept is another timeline's.
#![allow(clippy::unwrap_used)]

use lagless_core::message::SnapshotFragment;
use lagless_core::{ClientConfig, ClientSession, ServerConfig, ServerSession, Tick};
use std::time::Duration;

fn server(instance: u32) -> ServerSession<u8> {
    let mut s = ServerSession::new(ServerConfig {
        instance,
        ..ServerConfig::default()
    });
    s.add_client(1).unwrap();
    s
}

/// Runs server and client on a lossless instant link for `ms`, from `*now`; returns the
/// server's packets, decoded.
fn run(
    server: &mut ServerSession<u8>,
    client: &mut ClientSession<u8>,
    now: &mut Duration,
    ms: u64,
) -> Vec<SnapshotFragment> {
    let mut sent = Vec::new();
    for _ in 0..ms {
        while let Some(p) = client.poll_transmit(*now) {
            let _ = server.handle_packet(1, *now, &p);
        }
        server.update(*now);
        while server.next_tick().is_some() {
            let _ = server.send_snapshot(1, *now, &[1, 2, 3]);
        }
        while let Some((_, p)) = server.poll_transmit() {
            sent.push(SnapshotFragment::decode(&p).unwrap());
            let _ = client.handle_packet(*now, &p);
        }
        while let Some(s) = client.poll_snapshot() {
            client.acknowledge_snapshot(s.tick);
        }
        client.update(*now);
        while let Some(t) = client.next_tick() {
            client.set_input(t, 0);
        }
        *now += Duration::from_millis(1);
    }
    sent
}

#[test]
fn a_new_server_instance_makes_a_kept_client_start_over_at_once() {
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    let mut now = Duration::ZERO;
    let mut first = server(0xA);
    let sent = run(&mut first, &mut client, &mut now, 3000);
    // The hello (tick rate and instance) rides only the first packets, until the client
    // holds a snapshot.
    let hellos = sent.iter().filter(|f| f.tick_hz.is_some()).count();
    assert!(hellos > 0 && hellos < 10, "{hellos} of {}", sent.len());
    assert!(
        sent.iter()
            .all(|f| f.tick_hz.is_none() || f.server_instance == 0xA)
    );
    assert_eq!(client.server_instance(), Some(0xA));
    let epoch = client.epoch();
    let old = client.newest_server_tick().unwrap();
    assert!(old > Tick(150));

    // A second run of the server from tick 0, within the client's trust window: the
    // client's acknowledgements name ticks it never sent, so it says who it is again.
    let mut second = server(0xB);
    let sent = run(&mut second, &mut client, &mut now, 100);
    assert!(sent[0].tick_hz.is_some() && sent[0].server_instance == 0xB);
    assert_eq!(client.stats().server_restarts, 1);
    assert_eq!(client.stats().tick_resyncs, 0);
    assert_eq!(client.epoch(), epoch + 1);
    assert_eq!(client.server_instance(), Some(0xB));
    let newest = client.newest_server_tick().unwrap();
    assert!(
        newest < Tick(10),
        "{newest:?} (the old server was at {old:?})"
    );
    assert!(client.is_synced());
    // Once the client holds one of its snapshots, the new server stops saying it.
    assert!(sent.last().unwrap().tick_hz.is_none());

    // The same instance again (a reconnect to the same server, say) is no restart.
    let mut same = server(0xB);
    run(&mut same, &mut client, &mut now, 100);
    assert_eq!(client.stats().server_restarts, 1);
}
