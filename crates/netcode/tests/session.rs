//! Server and client driven against each other in memory, with a virtual clock.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use lagless_netcode::{
    Client, ClientState, ConnectToken, DisconnectReason, MAX_ENCRYPTION_MAPPINGS,
    PENDING_SHARE_PER_SOURCE, PacketError, Server, ServerConfig, ServerEvent, TokenParams,
};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const PROTOCOL_ID: u64 = 0xABCD;
const KEY: [u8; 32] = [7; 32];
const UNIX: u64 = 1_800_000_000;

fn server_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().expect("addr")
}
fn client_addr(i: u16) -> SocketAddr {
    format!("127.0.0.1:{}", 50000 + i).parse().expect("addr")
}

fn server(max_clients: usize) -> Server {
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: KEY,
        max_clients,
        public_addresses: vec![server_addr()],
    };
    Server::new(config, [9; 32], Duration::ZERO, UNIX).expect("server")
}

fn token(client_id: u64, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let params = TokenParams::new(PROTOCOL_ID, client_id, vec![server_addr()]);
    ConnectToken::generate(&params, &KEY, UNIX, &mut rng)
        .expect("token")
        .write()
        .expect("write")
        .to_vec()
}

/// Moves every queued packet both ways once; returns the client's packets (for replays).
fn pump(
    now: Duration,
    server: &mut Server,
    clients: &mut [(SocketAddr, &mut Client)],
) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut sent = Vec::new();
    for (addr, c) in clients.iter_mut() {
        c.update(now);
        while let Some(t) = c.poll_transmit() {
            let _ = server.handle_packet(now, *addr, &t.data);
            sent.push((*addr, t.data));
        }
    }
    server.update(now);
    while let Some(t) = server.poll_transmit() {
        for (addr, c) in clients.iter_mut() {
            if *addr == t.addr {
                let _ = c.handle_packet(now, server_addr(), &t.data);
            }
        }
    }
    sent
}

fn connect(server: &mut Server, client: &mut Client, addr: SocketAddr, now: &mut Duration) {
    for _ in 0..50 {
        *now += Duration::from_millis(50);
        pump(*now, server, &mut [(addr, client)]);
        if client.is_connected() {
            return;
        }
    }
    panic!("client stuck in {:?}", client.state());
}

fn events(server: &mut Server) -> Vec<ServerEvent> {
    std::iter::from_fn(|| server.poll_event()).collect()
}

#[test]
fn connect_payloads_disconnect_reconnect() {
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    connect(&mut s, &mut c, client_addr(1), &mut now);
    assert_eq!(s.num_connected(), 1);
    assert_eq!(c.max_clients(), 4);
    let ev = events(&mut s);
    assert!(
        matches!(
            ev[0],
            ServerEvent::Connected {
                client_id: 1,
                client_index: 0,
                ..
            }
        ),
        "{ev:?}"
    );

    c.send_payload(b"up").expect("send");
    s.send_payload(0, b"down").expect("send");
    pump(now, &mut s, &mut [(client_addr(1), &mut c)]);
    assert_eq!(c.recv().as_deref(), Some(&b"down"[..]));
    assert!(
        matches!(&events(&mut s)[..], [ServerEvent::Payload { payload, .. }] if payload == b"up")
    );

    // Client leaves cleanly: the server frees the slot at once.
    c.disconnect();
    pump(now, &mut s, &mut [(client_addr(1), &mut c)]);
    assert_eq!(s.num_connected(), 0);
    assert!(matches!(
        &events(&mut s)[..],
        [ServerEvent::Disconnected {
            reason: DisconnectReason::ClientDisconnected,
            ..
        }]
    ));

    // Reconnect with a new token from the same address.
    let mut c2 = Client::new(&token(1, 2), now);
    connect(&mut s, &mut c2, client_addr(1), &mut now);
    assert_eq!(s.num_connected(), 1);

    // Server kicks it: the client sees disconnect packets.
    s.disconnect(0).expect("disconnect");
    pump(now, &mut s, &mut [(client_addr(1), &mut c2)]);
    assert_eq!(c2.state(), ClientState::Disconnected);
}

/// Moves the client's queued packets to the server at `now`; returns how many.
fn deliver_client(
    now: Duration,
    server: &mut Server,
    client: &mut Client,
    from: SocketAddr,
) -> usize {
    let mut n = 0;
    while let Some(t) = client.poll_transmit() {
        assert_eq!(t.addr, server_addr());
        let _ = server.handle_packet(now, from, &t.data);
        n += 1;
    }
    n
}

#[test]
fn disconnect_while_connecting_frees_the_slot_the_server_already_gave() {
    let mut s = server(4);
    let addr = client_addr(1);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;

    // Request -> challenge: the client answers with its challenge response.
    c.update(now);
    assert_eq!(deliver_client(now, &mut s, &mut c, addr), 1);
    let challenge = s.poll_transmit().expect("challenge");
    c.handle_packet(now, server_addr(), &challenge.data)
        .expect("challenge accepted");
    assert_eq!(c.state(), ClientState::SendingConnectionResponse);

    // The server takes a slot on the response (the request sent again just ahead of it
    // is challenged again); the keep-alive telling the client is lost.
    now += Duration::from_millis(150);
    c.update(now);
    assert_eq!(deliver_client(now, &mut s, &mut c, addr), 2);
    assert_eq!(s.num_connected(), 1);
    assert!(matches!(
        &events(&mut s)[..],
        [ServerEvent::Connected { client_id: 1, .. }]
    ));
    while s.poll_transmit().is_some() {}
    assert_eq!(c.state(), ClientState::SendingConnectionResponse);

    // The client gives up: its disconnect packets free the slot at once, not at the
    // token's timeout.
    c.disconnect();
    assert_eq!(c.state(), ClientState::Disconnected);
    assert_eq!(
        deliver_client(now, &mut s, &mut c, addr),
        lagless_netcode::NUM_DISCONNECT_PACKETS
    );
    assert_eq!(s.num_connected(), 0);
    assert!(!s.is_connected(0));
    assert!(matches!(
        &events(&mut s)[..],
        [ServerEvent::Disconnected {
            client_id: 1,
            reason: DisconnectReason::ClientDisconnected,
            ..
        }]
    ));

    // A client still sending requests sends them too (the reference does for every state
    // above DISCONNECTED); a server with no slot for its address just drops them.
    let other = client_addr(2);
    let mut d = Client::new(&token(2, 2), now);
    d.update(now);
    assert_eq!(deliver_client(now, &mut s, &mut d, other), 1);
    while s.poll_transmit().is_some() {}
    assert_eq!(d.state(), ClientState::SendingConnectionRequest);
    let dropped = s.stats().drops.get(PacketError::UnexpectedInState);
    d.disconnect();
    assert_eq!(
        deliver_client(now, &mut s, &mut d, other),
        lagless_netcode::NUM_DISCONNECT_PACKETS
    );
    assert_eq!(
        s.stats().drops.get(PacketError::UnexpectedInState) - dropped,
        lagless_netcode::NUM_DISCONNECT_PACKETS as u64
    );
    assert!(s.poll_event().is_none() && s.poll_transmit().is_none());
    assert_eq!(s.num_connected(), 0);
}

#[test]
fn timeouts_both_sides() {
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    connect(&mut s, &mut c, client_addr(1), &mut now);
    events(&mut s);
    // Silence for longer than the 5 s timeout.
    now += Duration::from_secs(6);
    s.update(now);
    c.update(now);
    assert_eq!(c.state(), ClientState::ConnectionTimedOut);
    assert_eq!(s.num_connected(), 0);
    assert!(matches!(
        &events(&mut s)[..],
        [ServerEvent::Disconnected {
            reason: DisconnectReason::TimedOut,
            ..
        }]
    ));
    assert_eq!(s.stats().timeouts, 1);

    // A client whose requests go nowhere times out in the request state.
    let mut lonely = Client::new(&token(2, 3), now);
    for _ in 0..70 {
        now += Duration::from_millis(100);
        lonely.update(now);
        while lonely.poll_transmit().is_some() {}
    }
    assert_eq!(lonely.state(), ClientState::ConnectionRequestTimedOut);
}

#[test]
fn invalid_and_expired_tokens() {
    assert_eq!(
        Client::new(&[0u8; 2048], Duration::ZERO).state(),
        ClientState::InvalidConnectToken
    );
    assert_eq!(
        Client::new(&[0u8; 10], Duration::ZERO).state(),
        ClientState::InvalidConnectToken
    );

    // A token whose 3 s lifetime passes while connecting (timeouts disabled).
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let mut params = TokenParams::new(PROTOCOL_ID, 1, vec![server_addr()]);
    params.expire_seconds = Some(3);
    params.timeout_seconds = -1;
    let t = ConnectToken::generate(&params, &KEY, UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(4) {
        now += Duration::from_millis(100);
        c.update(now);
        while c.poll_transmit().is_some() {}
    }
    assert_eq!(c.state(), ClientState::ConnectTokenExpired);

    // The server refuses an expired token.
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    c.update(Duration::ZERO);
    let request = c.poll_transmit().expect("request").data;
    let later = Duration::from_secs(31);
    assert_eq!(
        s.handle_packet(later, client_addr(1), &request),
        Err(PacketError::TokenExpired)
    );
    assert!(s.poll_transmit().is_none());
}

#[test]
fn forged_foreign_and_reused_tokens_refused() {
    let mut s = server(4);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    // A token for another server address.
    let other: SocketAddr = "127.0.0.1:40001".parse().expect("addr");
    let params = TokenParams::new(PROTOCOL_ID, 3, vec![other]);
    let t = ConnectToken::generate(&params, &KEY, UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    c.update(Duration::ZERO);
    let req = c.poll_transmit().expect("request").data;
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(3), &req),
        Err(PacketError::ServerAddressNotInToken)
    );

    // A token under another private key (forged).
    let params = TokenParams::new(PROTOCOL_ID, 4, vec![server_addr()]);
    let t = ConnectToken::generate(&params, &[8; 32], UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    c.update(Duration::ZERO);
    let req = c.poll_transmit().expect("request").data;
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(4), &req),
        Err(PacketError::TokenDecryptFailed)
    );
    // Another protocol id.
    let params = TokenParams::new(PROTOCOL_ID + 1, 4, vec![server_addr()]);
    let t = ConnectToken::generate(&params, &KEY, UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    c.update(Duration::ZERO);
    let req = c.poll_transmit().expect("request").data;
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(4), &req),
        Err(PacketError::WrongProtocolId)
    );
    assert!(s.poll_transmit().is_none(), "no answer to refused requests");

    // The same token from two addresses: the second is refused.
    let bytes = token(5, 6);
    let mut c = Client::new(&bytes, Duration::ZERO);
    c.update(Duration::ZERO);
    let req = c.poll_transmit().expect("request").data;
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(5), &req),
        Ok(())
    );
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(5), &req),
        Ok(()),
        "same address may retry"
    );
    assert_eq!(
        s.handle_packet(Duration::ZERO, client_addr(6), &req),
        Err(PacketError::TokenReused)
    );
    assert_eq!(s.stats().drops.get(PacketError::TokenReused), 1);
}

#[test]
fn token_reuse_is_refused_after_many_tokens_on_a_small_server() {
    // A 4-slot server once remembered 8 tokens per slot (32): a holder of 33 tokens
    // could push the first out and use it again from another address.
    let mut s = server(4);
    let now = Duration::ZERO;
    let first = request(1, 1);
    assert_eq!(s.handle_packet(now, client_addr(1), &first), Ok(()));
    for i in 0..100u64 {
        assert_eq!(
            s.handle_packet(now, spread_addr(i), &request(100 + i, 100 + i)),
            Ok(())
        );
    }
    while s.poll_transmit().is_some() {}
    assert_eq!(
        s.handle_packet(now, client_addr(2), &first),
        Err(PacketError::TokenReused)
    );
    assert_eq!(s.stats().drops.get(PacketError::TokenReused), 1);
    assert_eq!(
        s.handle_packet(now, client_addr(1), &first),
        Ok(()),
        "its first address may still retry"
    );
    assert_eq!(s.remembered_tokens(), 101);
}

#[test]
fn forged_and_replayed_packets_refused() {
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    connect(&mut s, &mut c, client_addr(1), &mut now);
    events(&mut s);
    c.send_payload(b"once").expect("send");
    let p = c.poll_transmit().expect("payload").data;
    assert_eq!(s.handle_packet(now, client_addr(1), &p), Ok(()));
    assert_eq!(
        s.handle_packet(now, client_addr(1), &p),
        Err(PacketError::Replayed)
    );
    assert_eq!(s.stats().drops.get(PacketError::Replayed), 1);
    // The same packet from another address has no key there.
    assert_eq!(
        s.handle_packet(now, client_addr(2), &p),
        Err(PacketError::NoKeyForAddress)
    );
    // A bit flipped anywhere after the prefix: refused (fresh sequence so it is not a replay).
    c.send_payload(b"twice").expect("send");
    let mut forged = c.poll_transmit().expect("payload").data;
    let n = forged.len();
    forged[n - 3] ^= 0x40;
    assert_eq!(
        s.handle_packet(now, client_addr(1), &forged),
        Err(PacketError::DecryptFailed)
    );
    // A changed packet type in the prefix byte is caught by the associated data.
    forged[n - 3] ^= 0x40;
    forged[0] = (forged[0] & 0xF0) | 4;
    assert_eq!(
        s.handle_packet(now, client_addr(1), &forged),
        Err(PacketError::DecryptFailed)
    );
    let payloads = events(&mut s).len();
    assert_eq!(
        payloads, 1,
        "only the genuine payload reached the application"
    );

    // Client side: a replayed server payload is dropped too.
    s.send_payload(0, b"down").expect("send");
    s.update(now);
    let mut last = None;
    while let Some(t) = s.poll_transmit() {
        let _ = c.handle_packet(now, server_addr(), &t.data);
        last = Some(t.data);
    }
    let last = last.expect("sent");
    assert_eq!(
        c.handle_packet(now, server_addr(), &last),
        Err(PacketError::Replayed)
    );
    assert_eq!(
        c.handle_packet(now, client_addr(9), &last),
        Err(PacketError::UnknownAddress)
    );
}

#[test]
fn full_server_denies_and_client_reports_it() {
    let mut s = server(1);
    let mut a = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    connect(&mut s, &mut a, client_addr(1), &mut now);
    let mut b = Client::new(&token(2, 2), now);
    for _ in 0..10 {
        now += Duration::from_millis(50);
        pump(
            now,
            &mut s,
            &mut [(client_addr(1), &mut a), (client_addr(2), &mut b)],
        );
    }
    assert_eq!(b.state(), ClientState::ConnectionDenied);
    assert!(s.stats().denied >= 1);
    assert!(a.is_connected());
    // Disconnecting a client in an error state does nothing (as in the reference): the
    // reason stays, and nothing is sent.
    b.disconnect();
    assert_eq!(b.state(), ClientState::ConnectionDenied);
    assert!(b.poll_transmit().is_none());

    // A client that disconnects with a denied packet received but not yet acted on (the
    // next update would) stays disconnected.
    let mut d = Client::new(&token(3, 3), now);
    d.update(now);
    let request = d.poll_transmit().expect("request");
    s.handle_packet(now, client_addr(3), &request.data)
        .expect("request");
    let denied = s.poll_transmit().expect("denied");
    d.handle_packet(now, server_addr(), &denied.data)
        .expect("denied accepted");
    d.disconnect();
    assert_eq!(d.state(), ClientState::Disconnected);
    now += Duration::from_millis(50);
    d.update(now);
    assert_eq!(d.state(), ClientState::Disconnected);
}

#[test]
fn many_clients() {
    let mut s = server(64);
    let mut now = Duration::ZERO;
    let mut clients: Vec<Client> = (0..64)
        .map(|i| Client::new(&token(100 + i, i), now))
        .collect();
    for _ in 0..20 {
        now += Duration::from_millis(50);
        let mut refs: Vec<(SocketAddr, &mut Client)> = clients
            .iter_mut()
            .enumerate()
            .map(|(i, c)| (client_addr(i as u16), c))
            .collect();
        pump(now, &mut s, &mut refs);
    }
    assert_eq!(s.num_connected(), 64);
    assert!(clients.iter().all(Client::is_connected));
    let mut indices: Vec<u32> = clients.iter().map(Client::client_index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..64).collect::<Vec<_>>());
}

#[test]
fn every_prefix_byte_and_length_is_dropped_without_panic() {
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    connect(&mut s, &mut c, client_addr(1), &mut now);
    events(&mut s);
    let mut buf = vec![0u8; 1600];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 31 + 7) as u8;
    }
    for prefix in 0..=255u8 {
        for len in 0..=1600usize {
            let mut p = buf[..len].to_vec();
            if let Some(first) = p.first_mut() {
                *first = prefix;
            }
            // From the connected client's address, from a stranger, and to the client.
            assert!(s.handle_packet(now, client_addr(1), &p).is_err());
            assert!(s.handle_packet(now, client_addr(7), &p).is_err());
            assert!(c.handle_packet(now, server_addr(), &p).is_err());
        }
    }
    let drops = s.stats().drops.total();
    assert_eq!(drops, 2 * 256 * 1601);
    assert!(s.poll_transmit().is_none(), "garbage is never answered");
    assert!(s.poll_event().is_none(), "garbage never reaches the game");
    assert!(c.is_connected() && s.num_connected() == 1);
}

#[test]
fn flood_of_valid_requests_from_many_addresses_stays_bounded() {
    let mut s = server(2);
    let mut now = Duration::ZERO;
    let mut answered = 0;
    for i in 0..2000u16 {
        // A millisecond apart, under the rate at which the server counts as busy: this is
        // about the table, not the refusals under load.
        now += Duration::from_millis(1);
        let mut c = Client::new(&token(1000 + u64::from(i), u64::from(i)), now);
        c.update(now);
        let req = c.poll_transmit().expect("request").data;
        assert_eq!(req.len(), 1078);
        let _ = s.handle_packet(now, client_addr(i), &req);
        while let Some(t) = s.poll_transmit() {
            assert!(t.data.len() < req.len(), "anti-amplification");
            answered += 1;
        }
    }
    // Every valid request is challenged (one smaller packet each), but the table stays at
    // its fixed size: all 2000 come from one IP, so that IP's own oldest make room.
    assert_eq!(answered, 2000);
    assert_eq!(s.pending_mappings(), MAX_ENCRYPTION_MAPPINGS);
    assert_eq!(
        s.stats().evicted_crowded_source,
        2000 - MAX_ENCRYPTION_MAPPINGS as u64
    );
    assert_eq!(s.stats().evicted_oldest, 0);
    assert_eq!(s.stats().drops.get(PacketError::MappingTableFull), 0);
}

/// The first packet a client with a fresh token (`client_id`, `seed`) sends: a valid
/// connection request.
fn request(client_id: u64, seed: u64) -> Vec<u8> {
    let mut c = Client::new(&token(client_id, seed), Duration::ZERO);
    c.update(Duration::ZERO);
    c.poll_transmit().expect("request").data
}

/// Sends a valid request for a fresh token from `from` and ignores the challenge, as a
/// holder of tokens who means to fill the handshake table does.
fn silent_request(s: &mut Server, now: Duration, from: SocketAddr, next_id: &mut u64) {
    *next_id += 1;
    let _ = s.handle_packet(now, from, &request(*next_id, *next_id));
    while s.poll_transmit().is_some() {}
}

/// One IPv4 address per `i`, none of them a genuine client's.
fn spread_addr(i: u64) -> SocketAddr {
    format!("10.{}.{}.1:6000", i / 256 % 256, i % 256)
        .parse()
        .expect("addr")
}

/// Port `port` of the one flooding host.
fn crowded_addr(port: u16) -> SocketAddr {
    SocketAddr::new([203, 0, 113, 7].into(), port)
}

#[test]
fn silent_token_flood_does_not_lock_out_real_clients() {
    let max_clients = 4;
    let mut s = server(max_clients);
    let mut now = Duration::ZERO;
    let mut next_id = 10_000;
    // 1500 valid tokens whose holders never answer the challenge: 1100 from as many IPs,
    // then 400 from one host on different ports. Far more than the 4 x max_clients (16)
    // entries the table used to have, and more than its fixed size now.
    // A millisecond apart, under the rate at which the server counts as busy: this is
    // about the table, not the refusals under load.
    let spread = 1100;
    let crowded = 400;
    for i in 0..spread {
        now += Duration::from_millis(1);
        silent_request(&mut s, now, spread_addr(i), &mut next_id);
    }
    for port in 0..crowded {
        now += Duration::from_millis(1);
        silent_request(&mut s, now, crowded_addr(10_000 + port), &mut next_id);
    }
    assert_eq!(s.pending_mappings(), MAX_ENCRYPTION_MAPPINGS);
    assert_eq!(s.num_connected(), 0, "slots are free");
    // By the book: the spread flood pushed out its own oldest; then the flooding host got
    // its share, and beyond that only evicted its own entries.
    let share = PENDING_SHARE_PER_SOURCE as u64;
    let table = MAX_ENCRYPTION_MAPPINGS as u64;
    assert_eq!(s.stats().evicted_oldest, spread - table + share);
    assert_eq!(s.stats().evicted_crowded_source, u64::from(crowded) - share);

    // Two genuine clients, one from a fresh IP and one from the flooding host itself,
    // connect while the flood goes on: each 50 ms, 10 new silent requests from new IPs
    // and 5 from the flooding host.
    let a_addr: SocketAddr = "192.0.2.1:50000".parse().expect("addr");
    let b_addr = crowded_addr(60_000);
    let mut a = Client::new(&token(1, 1), now);
    let mut b = Client::new(&token(2, 2), now);
    let mut spread_next = spread;
    let mut crowded_next = crowded;
    for _ in 0..50 {
        now += Duration::from_millis(50);
        for _ in 0..10 {
            silent_request(&mut s, now, spread_addr(spread_next), &mut next_id);
            spread_next += 1;
        }
        for _ in 0..5 {
            silent_request(
                &mut s,
                now,
                crowded_addr(10_000 + crowded_next),
                &mut next_id,
            );
            crowded_next += 1;
        }
        pump(now, &mut s, &mut [(a_addr, &mut a), (b_addr, &mut b)]);
        if a.is_connected() && b.is_connected() {
            break;
        }
    }
    assert!(a.is_connected(), "fresh IP: {:?}", a.state());
    assert!(b.is_connected(), "flooding host's IP: {:?}", b.state());
    assert_eq!(s.num_connected(), 2);
    assert!(s.pending_mappings() <= MAX_ENCRYPTION_MAPPINGS);
    assert_eq!(s.stats().drops.get(PacketError::MappingTableFull), 0);
}

#[test]
fn client_falls_back_to_the_next_server_address() {
    let mut s = server(4);
    let dead: SocketAddr = "127.0.0.1:40009".parse().expect("addr");
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut params = TokenParams::new(PROTOCOL_ID, 1, vec![dead, server_addr()]);
    params.timeout_seconds = 1;
    let t = ConnectToken::generate(&params, &KEY, UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    assert_eq!(c.server_addr(), Some(dead));
    let mut now = Duration::ZERO;
    for _ in 0..100 {
        now += Duration::from_millis(50);
        c.update(now);
        while let Some(t) = c.poll_transmit() {
            if t.addr == server_addr() {
                let _ = s.handle_packet(now, client_addr(1), &t.data);
            }
        }
        s.update(now);
        while let Some(t) = s.poll_transmit() {
            let _ = c.handle_packet(now, server_addr(), &t.data);
        }
        if c.is_connected() {
            break;
        }
    }
    assert!(c.is_connected(), "{:?}", c.state());
    assert_eq!(c.server_addr(), Some(server_addr()));
    assert!(
        now > Duration::from_secs(1),
        "first address given its timeout"
    );
}

#[test]
fn ipv6_tokens_round_trip_and_connect() {
    let v6: SocketAddr = "[2001:db8::1]:40000".parse().expect("addr");
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: KEY,
        max_clients: 2,
        public_addresses: vec![v6],
    };
    let mut s = Server::new(config, [9; 32], Duration::ZERO, UNIX).expect("server");
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let t = ConnectToken::generate(
        &TokenParams::new(PROTOCOL_ID, 1, vec![v6]),
        &KEY,
        UNIX,
        &mut rng,
    )
    .expect("token");
    let bytes = t.write().expect("write");
    assert_eq!(ConnectToken::read(&bytes).expect("read"), t);
    let mut c = Client::new(&bytes, Duration::ZERO);
    let from: SocketAddr = "[2001:db8::2]:50000".parse().expect("addr");
    let mut now = Duration::ZERO;
    for _ in 0..20 {
        now += Duration::from_millis(50);
        c.update(now);
        while let Some(t) = c.poll_transmit() {
            let _ = s.handle_packet(now, from, &t.data);
        }
        s.update(now);
        while let Some(t) = s.poll_transmit() {
            let _ = c.handle_packet(now, v6, &t.data);
        }
    }
    assert!(c.is_connected());
}

#[test]
fn floods_from_one_address_are_bounded() {
    let mut s = server(4);
    let mut c = Client::new(&token(1, 1), Duration::ZERO);
    let mut now = Duration::ZERO;
    c.update(now);
    let request = c.poll_transmit().expect("request").data;
    // The same valid request 10 000 times from one address: one mapping, every answer
    // smaller than the request, nothing queued for the game.
    for _ in 0..10_000 {
        let _ = s.handle_packet(now, client_addr(1), &request);
        while let Some(t) = s.poll_transmit() {
            assert!(t.data.len() < request.len());
        }
    }
    assert_eq!(s.pending_mappings(), 1);
    assert_eq!(s.queued_events(), 0);
    // Connect, then replay one payload 10 000 times: one delivery, the rest counted.
    connect(&mut s, &mut c, client_addr(1), &mut now);
    events(&mut s);
    c.send_payload(b"x").expect("send");
    let p = c.poll_transmit().expect("payload").data;
    for _ in 0..10_000 {
        let _ = s.handle_packet(now, client_addr(1), &p);
    }
    assert_eq!(s.stats().drops.get(PacketError::Replayed), 9_999);
    assert_eq!(events(&mut s).len(), 1);
    // A client that floods real payloads without the game reading them: the queue stops
    // at 256 and the rest is counted.
    for i in 0..1000u32 {
        c.send_payload(&i.to_le_bytes()).expect("send");
        let p = c.poll_transmit().expect("payload").data;
        let _ = s.handle_packet(now, client_addr(1), &p);
    }
    assert_eq!(s.queued_events(), lagless_netcode::PACKET_QUEUE_SIZE);
    assert_eq!(s.stats().drops.get(PacketError::QueueFull), 1000 - 256);
}

/// A datagram on its way, due at `at`.
struct InFlight {
    at: Duration,
    data: Vec<u8>,
}

/// `sources` x `ports` flooding addresses in 127.0.0.0/8, none of them the genuine
/// client's (127.0.0.1).
fn flood_addrs(sources: u16, ports: u16) -> Vec<SocketAddr> {
    let mut v = Vec::new();
    for a in 0..sources {
        for p in 0..ports {
            let ip = std::net::Ipv4Addr::new(127, 1, (a / 256) as u8, (a % 256) as u8);
            v.push(SocketAddr::new(ip.into(), 20_000 + p));
        }
    }
    v
}

/// Genuine clients 300 ms away (150 ms each way) connect one after another while a
/// spread flood of valid requests that never answer goes on at `rate` requests a second
/// from `sources` addresses x `ports` ports; returns the virtual time each took to
/// connect, and checks that no flooding token got a slot. `answer_with_request: false`
/// holds back the request the client sends again with its response, as the reference
/// client does not send it.
fn genuine_clients_under_spread_flood(
    rate: u64,
    (sources, ports): (u16, u16),
    tries: u64,
    answer_with_request: bool,
) -> Vec<Duration> {
    let mut s = server(64);
    let addrs = flood_addrs(sources, ports);
    let flood: Vec<Vec<u8>> = (0..addrs.len() as u64)
        .map(|i| request(100_000 + i, 100_000 + i))
        .collect();
    let one_way = Duration::from_millis(150);
    let step = Duration::from_millis(1);
    let per_step = rate / 1000;
    let mut now = Duration::ZERO;
    let mut next = 0usize;
    let mut took = Vec::new();
    let genuine_addr = client_addr(1);
    // A second of flood first, so the table is churning when the clients start.
    let mut flood_for = |s: &mut Server, now: Duration| {
        for _ in 0..per_step {
            let _ = s.handle_packet(now, addrs[next], &flood[next]);
            next = (next + 1) % addrs.len();
        }
        while s.poll_transmit().is_some_and(|t| t.addr != genuine_addr) {}
    };
    while now < Duration::from_secs(1) {
        now += step;
        flood_for(&mut s, now);
    }
    for k in 0..tries {
        let id = 1 + k;
        let mut c = Client::new(&token(id, id), now);
        let start = now;
        let mut up: VecDeque<InFlight> = VecDeque::new();
        let mut down: VecDeque<InFlight> = VecDeque::new();
        // Given up on after 1.5 s, long before the token's timeout: a client that got
        // in took well under a second, and the test is kept short.
        while !c.is_connected() && now < start + Duration::from_millis(1500) {
            now += step;
            c.update(now);
            while let Some(t) = c.poll_transmit() {
                // A client that does not send its request again with its response, as
                // the reference's does not.
                let is_request = t.data.first() == Some(&0);
                if !answer_with_request
                    && is_request
                    && c.state() == ClientState::SendingConnectionResponse
                {
                    continue;
                }
                up.push_back(InFlight {
                    at: now + one_way,
                    data: t.data,
                });
            }
            flood_for(&mut s, now);
            while up.front().is_some_and(|p| p.at <= now) {
                let p = up.pop_front().expect("front");
                let _ = s.handle_packet(now, genuine_addr, &p.data);
            }
            s.update(now);
            while let Some(t) = s.poll_transmit() {
                if t.addr == genuine_addr {
                    down.push_back(InFlight {
                        at: now + one_way,
                        data: t.data,
                    });
                }
            }
            while down.front().is_some_and(|p| p.at <= now) {
                let p = down.pop_front().expect("front");
                let _ = c.handle_packet(now, server_addr(), &p.data);
            }
        }
        if c.is_connected() {
            took.push(now - start);
        }
        // Leave, so the next client starts with the flood as it was.
        c.disconnect();
        while let Some(t) = c.poll_transmit() {
            let _ = s.handle_packet(now, genuine_addr, &t.data);
        }
    }
    for e in events(&mut s) {
        if let ServerEvent::Connected { client_id, .. } = e {
            assert!(
                client_id <= tries,
                "a flooding token got a slot: {client_id}"
            );
        }
    }
    took
}

#[test]
fn genuine_clients_300_ms_away_connect_through_a_spread_flood() {
    for rate in [20_000, 40_000] {
        let took = genuine_clients_under_spread_flood(rate, (128, 12), 10, true);
        assert_eq!(
            took.len(),
            10,
            "at {rate}/s only {} of 10 connected",
            took.len()
        );
        // A round trip for the challenge, one for the response and its keep-alive, and
        // the 100 ms send interval: under a second every time.
        for t in &took {
            assert!(
                *t < Duration::from_secs(1),
                "at {rate}/s one took {t:?}: {took:?}"
            );
        }
    }
}

#[test]
fn a_busy_server_refuses_a_crowded_source_before_decrypting_but_not_a_new_one() {
    let mut s = server(8);
    let now = Duration::from_millis(10);
    let crowded = crowded_addr(7000);
    let others = flood_addrs(128, 1);
    // 256 requests from 128 sources make the server busy for this window.
    let mut id = 1000;
    for a in others.iter().chain(others.iter()) {
        silent_request(&mut s, now, *a, &mut id);
    }
    assert_eq!(s.stats().requests_decrypted, 256);
    // The crowded source gets its share decrypted, then nothing more this window.
    for port in 0..10 {
        silent_request(&mut s, now, crowded_addr(7000 + port), &mut id);
    }
    assert_eq!(
        s.stats().requests_decrypted,
        256 + u64::from(lagless_netcode::REQUESTS_PER_SOURCE_WHEN_BUSY)
    );
    assert_eq!(
        s.stats().drops.get(PacketError::SourceOverShare),
        10 - u64::from(lagless_netcode::REQUESTS_PER_SOURCE_WHEN_BUSY)
    );
    let _ = crowded;
    // A genuine client from a source not seen in this window is still challenged ...
    let mut c = Client::new(&token(1, 1), now);
    c.update(now);
    assert_eq!(deliver_client(now, &mut s, &mut c, client_addr(1)), 1);
    let challenge = s.poll_transmit().expect("challenged");
    assert!(c.handle_packet(now, server_addr(), &challenge.data).is_ok());
    // ... and in the next window the crowded source is decrypted again.
    let later = now + lagless_netcode::REQUEST_WINDOW;
    let before = s.stats().requests_decrypted;
    silent_request(&mut s, later, crowded_addr(7100), &mut id);
    assert_eq!(s.stats().requests_decrypted, before + 1);
}

#[test]
fn the_request_sent_with_the_response_is_what_outlasts_a_flood_from_many_sources() {
    // 1536 sources, each under its share while the server is busy: every request is
    // decrypted (16 000 a second), and a pending entry lives about 64 ms: less than the
    // 300 ms round trip, and less than the 100 ms from the last request the client sends
    // before the challenge reaches it to the response.
    let rate = 16_000;
    let held_back = genuine_clients_under_spread_flood(rate, (1536, 1), 2, false);
    assert!(
        held_back.is_empty(),
        "without the request ahead of the response: {held_back:?}"
    );
    let took = genuine_clients_under_spread_flood(rate, (1536, 1), 2, true);
    assert_eq!(took.len(), 2, "with it: {took:?}");
    for t in &took {
        assert!(*t < Duration::from_secs(1), "{took:?}");
    }
}

#[test]
fn a_fresh_token_from_a_new_address_replaces_a_connection_only_when_allowed() {
    for replace in [false, true] {
        // One slot: a replacement takes the slot it frees.
        let mut s = server(1);
        s.set_replace_connected(replace);
        let mut now = Duration::ZERO;
        let mut old = Client::new(&token(3, 1), now);
        connect(&mut s, &mut old, client_addr(1), &mut now);
        events(&mut s);
        // The same player from another network, with a fresh token.
        let mut new = Client::new(&token(3, 2), now);
        for _ in 0..20 {
            now += Duration::from_millis(50);
            pump(
                now,
                &mut s,
                &mut [(client_addr(2), &mut new), (client_addr(1), &mut old)],
            );
        }
        let ev = events(&mut s);
        if replace {
            assert!(new.is_connected(), "{:?}", new.state());
            assert_eq!(old.state(), ClientState::Disconnected);
            assert!(
                matches!(
                    &ev[..],
                    [
                        ServerEvent::Disconnected {
                            client_id: 3,
                            reason: DisconnectReason::Replaced,
                            addr: a,
                            ..
                        },
                        ServerEvent::Connected {
                            client_id: 3,
                            addr: b,
                            ..
                        },
                        ..
                    ] if *a == client_addr(1) && *b == client_addr(2)
                ),
                "{ev:?}"
            );
        } else {
            assert!(!new.is_connected());
            assert!(old.is_connected());
            assert!(ev.is_empty(), "{ev:?}");
            assert!(
                s.stats()
                    .drops
                    .iter()
                    .any(|(r, n)| r == PacketError::ClientIdAlreadyConnected && n > 0)
            );
        }
        assert_eq!(s.num_connected(), 1);
    }
}
