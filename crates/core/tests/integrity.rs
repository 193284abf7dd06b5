//! The optional checksum: with it on at both ends, the sessions play as without, and
//! every single-bit flip of a packet in either direction is refused before decoding;
//! without it (the default, for transports that guarantee integrity) some flips decode.
#![allow(clippy::unwrap_used)]

use lagless_core::{
    CHECKSUM_BYTES, ClientConfig, ClientSession, Delivery, ProtocolError, ServerConfig,
    ServerSession,
};
use std::time::Duration;

fn pair(checksum: bool) -> (ServerSession<u8>, ClientSession<u8>) {
    let mut server = ServerSession::new(ServerConfig {
        checksum,
        ..ServerConfig::default()
    });
    server.add_client(1).unwrap();
    let client = ClientSession::new(ClientConfig {
        checksum,
        ..ClientConfig::default()
    });
    (server, client)
}

/// Plays `ms` on a lossless instant link; returns the last packet each way.
fn play(
    server: &mut ServerSession<u8>,
    client: &mut ClientSession<u8>,
    now: &mut Duration,
    ms: u64,
) -> (Vec<u8>, Vec<u8>) {
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for _ in 0..ms {
        while let Some(p) = client.poll_transmit(*now) {
            server.handle_packet(1, *now, &p).unwrap();
            up = p;
        }
        server.update(*now);
        while server.next_tick().is_some() {
            server.send_snapshot(1, *now, &[7; 40]).unwrap();
        }
        while let Some((_, p)) = server.poll_transmit() {
            client.handle_packet(*now, &p).unwrap();
            down = p;
        }
        while let Some(s) = client.poll_snapshot() {
            client.acknowledge_snapshot(s.tick);
        }
        client.update(*now);
        while let Some(t) = client.next_tick() {
            client.set_input(t, 3);
        }
        *now += Duration::from_millis(1);
    }
    (up, down)
}

/// How many of the single-bit flips of `packet` `take` accepts.
fn flips_accepted(packet: &[u8], mut take: impl FnMut(&[u8]) -> bool) -> usize {
    (0..packet.len() * 8)
        .filter(|bit| {
            let mut bad = packet.to_vec();
            bad[bit / 8] ^= 1 << (bit % 8);
            take(&bad)
        })
        .count()
}

#[test]
fn with_the_checksum_every_single_bit_flip_is_refused_both_ways() {
    let (mut server, mut client) = pair(true);
    let mut now = Duration::ZERO;
    // Messages too, so the packets carry a section as well.
    client.send_message(Delivery::Reliable, b"up").unwrap();
    server.send_message(1, Delivery::Reliable, b"down").unwrap();
    let (up, down) = play(&mut server, &mut client, &mut now, 500);
    assert!(client.is_synced() && client.acked_through().is_some());
    assert_eq!(client.poll_message().unwrap().1, b"down");
    assert_eq!(server.poll_message().unwrap().2, b"up");
    assert!(!up.is_empty() && !down.is_empty());

    let (before_client, before_server) = (client.stats(), server.client_stats(1).unwrap().clone());
    let accepted = flips_accepted(&down, |p| {
        let r = client.handle_packet(now, p);
        assert_eq!(r, Err(ProtocolError::BadChecksum));
        r.is_ok()
    });
    assert_eq!(accepted, 0);
    let accepted = flips_accepted(&up, |p| {
        let r = server.handle_packet(1, now, p);
        assert_eq!(r, Err(ProtocolError::BadChecksum));
        r.is_ok()
    });
    assert_eq!(accepted, 0);
    let flips = |p: &[u8]| (p.len() * 8) as u64;
    assert_eq!(
        client.stats().checksum_failures - before_client.checksum_failures,
        flips(&down)
    );
    let after = server.client_stats(1).unwrap();
    assert_eq!(
        after.checksum_failures - before_server.checksum_failures,
        flips(&up)
    );
    // Refused before decoding: nothing the flips carried was taken.
    assert_eq!(
        client.stats().snapshots_received,
        before_client.snapshots_received
    );
    assert!(client.poll_message().is_none() && server.poll_message().is_none());
    // The intact packets still go through, and play goes on.
    client.handle_packet(now, &down).unwrap();
    server.handle_packet(1, now, &up).unwrap();
    play(&mut server, &mut client, &mut now, 100);
}

#[test]
fn without_the_checksum_some_flips_decode_and_one_side_with_it_refuses_the_other() {
    let (mut server, mut client) = pair(false);
    let mut now = Duration::ZERO;
    let (up, down) = play(&mut server, &mut client, &mut now, 500);
    // What the checksum is for: trusted bytes are taken as sent.
    assert!(flips_accepted(&down, |p| client.handle_packet(now, p).is_ok()) > 0);
    assert!(flips_accepted(&up, |p| server.handle_packet(1, now, p).is_ok()) > 0);

    // The checksum is configured on both ends; a client with it refuses a server without.
    let (_, mut checked) = pair(true);
    assert_eq!(
        checked.handle_packet(now, &down),
        Err(ProtocolError::BadChecksum)
    );
    let mut sealed = down.clone();
    sealed.extend_from_slice(&lagless_wire_crc(&down).to_le_bytes());
    assert_eq!(sealed.len(), down.len() + CHECKSUM_BYTES);
    assert!(checked.handle_packet(now, &sealed).is_ok());
}

/// The checksum the sessions append (CRC-32, IEEE), computed here independently.
fn lagless_wire_crc(bytes: &[u8]) -> u32 {
    let mut c = u32::MAX;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}
