//! Loopback tests with OS-chosen ports; every wait is bounded by a deadline.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lagless_netcode::{
    Client, ClientState, ConnectToken, DisconnectReason, PacketError, TokenParams,
};
use lagless_transport::{ConnectionEvent, Proxy, ServerSettings, UdpClient, UdpServer, keys};

const PROTOCOL_ID: u64 = 0x01a6_1e55;

fn server(key: [u8; 32], max_clients: usize) -> UdpServer {
    UdpServer::bind(
        "127.0.0.1:0".parse().expect("addr"),
        ServerSettings::new(PROTOCOL_ID, key, max_clients),
    )
    .expect("bind")
}

fn token_for(key: &[u8; 32], client_id: u64, addr: SocketAddr, timeout: i32) -> Vec<u8> {
    keys::issue_token(key, PROTOCOL_ID, client_id, vec![addr], 30, timeout)
        .expect("token")
        .write()
        .expect("write")
        .to_vec()
}

/// Runs `step` every 2 ms until it returns true; panics after `secs`.
fn until(secs: u64, what: &str, mut step: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if step() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("timed out waiting for {what}");
}

fn events(s: &mut UdpServer) -> Vec<ConnectionEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn connect_payloads_reliable_disconnect_reconnect() {
    let key = keys::generate_private_key().expect("key");
    let mut s = server(key, 4);
    let addr = s.local_addr().expect("addr");
    let mut c = UdpClient::connect(&token_for(&key, 7, addr, 5)).expect("client");
    until(5, "connect", || {
        s.update();
        c.update();
        c.is_connected()
    });
    until(5, "server sees connect", || {
        s.update();
        s.clients() == vec![7]
    });
    assert!(matches!(
        &events(&mut s)[..],
        [ConnectionEvent::Connected { client_id: 7, .. }]
    ));

    // Unreliable both ways, reliable both ways (in order).
    c.send(b"up").expect("send");
    s.send(7, b"down").expect("send");
    for i in 0..50u32 {
        c.send_reliable(&i.to_le_bytes()).expect("reliable");
        s.send_reliable(7, &(1000 + i).to_le_bytes())
            .expect("reliable");
    }
    let (mut up, mut down, mut rel_up, mut rel_down) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    until(5, "payloads", || {
        s.update();
        c.update();
        up.extend(s.recv());
        down.extend(c.recv());
        rel_up.extend(
            s.recv_reliable()
                .map(|(_, m)| u32::from_le_bytes(m.try_into().expect("4"))),
        );
        rel_down.extend(
            c.recv_reliable()
                .map(|m| u32::from_le_bytes(m.try_into().expect("4"))),
        );
        !up.is_empty() && !down.is_empty() && rel_up.len() == 50 && rel_down.len() == 50
    });
    assert_eq!(up, vec![(7, b"up".to_vec())]);
    assert_eq!(down, vec![b"down".to_vec()]);
    assert_eq!(rel_up, (0..50).collect::<Vec<_>>());
    assert_eq!(rel_down, (1000..1050).collect::<Vec<_>>());

    // Clean disconnect.
    c.disconnect();
    until(5, "server sees disconnect", || {
        s.update();
        s.clients().is_empty()
    });
    assert!(matches!(
        &events(&mut s)[..],
        [ConnectionEvent::Disconnected {
            client_id: 7,
            reason: DisconnectReason::ClientDisconnected
        }]
    ));

    // Reconnect with a new token.
    let mut c2 = UdpClient::connect(&token_for(&key, 7, addr, 5)).expect("client");
    until(5, "reconnect", || {
        s.update();
        c2.update();
        c2.is_connected() && s.clients() == vec![7]
    });

    // Server kicks the client.
    s.disconnect(7).expect("kick");
    until(5, "client sees kick", || {
        c2.update();
        c2.state() == ClientState::Disconnected
    });
}

#[test]
fn silent_client_times_out_and_others_stay() {
    let key = keys::generate_private_key().expect("key");
    let mut s = server(key, 4);
    let addr = s.local_addr().expect("addr");
    let mut a = UdpClient::connect(&token_for(&key, 1, addr, 1)).expect("a");
    let mut b = UdpClient::connect(&token_for(&key, 2, addr, 5)).expect("b");
    until(5, "both connect", || {
        s.update();
        a.update();
        b.update();
        s.clients() == vec![1, 2]
    });
    events(&mut s);
    drop(a); // vanishes without a word
    until(5, "timeout of the silent client", || {
        s.update();
        b.update();
        s.clients() == vec![2]
    });
    assert!(matches!(
        &events(&mut s)[..],
        [ConnectionEvent::Disconnected {
            client_id: 1,
            reason: DisconnectReason::TimedOut
        }]
    ));
    assert!(b.is_connected());
}

#[test]
fn foreign_expired_forged_and_replayed_refused_and_counted() {
    let key = keys::generate_private_key().expect("key");
    let mut s = server(key, 4);
    let addr = s.local_addr().expect("addr");

    // A token for another server (another port), with a 1 s timeout.
    let other: SocketAddr = "127.0.0.1:9".parse().expect("addr");
    let mut params = TokenParams::new(PROTOCOL_ID, 3, vec![other]);
    params.timeout_seconds = 1;
    let t = ConnectToken::generate(
        &params,
        &key,
        keys::unix_now(),
        &mut keys::os_rng().expect("rng"),
    )
    .expect("t");
    // ... sent to this server from a raw socket.
    let raw = UdpSocket::bind("127.0.0.1:0").expect("raw");
    let mut foreign = Client::from_token(t, Duration::ZERO);
    foreign.update(Duration::ZERO);
    let request = foreign.poll_transmit().expect("request").data;
    raw.send_to(&request, addr).expect("send");

    // An expired token (issued 100 s ago, lived 10 s).
    let mut params = TokenParams::new(PROTOCOL_ID, 4, vec![addr]);
    params.expire_seconds = Some(10);
    let t = ConnectToken::generate(
        &params,
        &key,
        keys::unix_now() - 100,
        &mut keys::os_rng().expect("rng"),
    )
    .expect("t");
    let mut expired = Client::from_token(t, Duration::ZERO);
    expired.update(Duration::ZERO);
    raw.send_to(&expired.poll_transmit().expect("request").data, addr)
        .expect("send");

    // Garbage and a forged request.
    raw.send_to(&[0x15; 40], addr).expect("send");
    let mut forged = request.clone();
    forged[100] ^= 1;
    raw.send_to(&forged, addr).expect("send");

    until(5, "drops counted", || {
        s.update();
        s.netcode().stats().drops.total() >= 4
    });
    let drops = &s.netcode().stats().drops;
    assert_eq!(drops.get(PacketError::ServerAddressNotInToken), 1);
    assert_eq!(drops.get(PacketError::TokenExpired), 1);
    assert_eq!(drops.get(PacketError::TokenDecryptFailed), 1);
    assert_eq!(drops.get(PacketError::NoKeyForAddress), 1);

    // A real client driven by hand through a raw socket, so its packets can be replayed.
    let t = ConnectToken::read(&token_for(&key, 5, addr, 5)).expect("token");
    let mut c = Client::from_token(t, Duration::ZERO);
    raw.set_read_timeout(Some(Duration::from_millis(2)))
        .expect("timeout");
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    until(5, "hand-driven connect", || {
        let now = start.elapsed();
        c.update(now);
        while let Some(t) = c.poll_transmit() {
            raw.send_to(&t.data, t.addr).expect("send");
        }
        s.update();
        while let Ok((n, from)) = raw.recv_from(&mut buf) {
            let _ = c.handle_packet(now, from, &buf[..n]);
        }
        c.is_connected()
    });
    c.send_payload(&[0, 0xAB]).expect("payload"); // tag 0: unreliable
    let packet = c.poll_transmit().expect("packet").data;
    raw.send_to(&packet, addr).expect("send");
    raw.send_to(&packet, addr).expect("replay");
    let mut got = Vec::new();
    until(5, "payload and replay drop", || {
        s.update();
        got.extend(s.recv());
        s.netcode().stats().drops.get(PacketError::Replayed) >= 1 && !got.is_empty()
    });
    assert_eq!(got, vec![(5, vec![0xAB])]);
    assert_eq!(s.netcode().stats().drops.get(PacketError::Replayed), 1);
}

#[test]
fn flood_from_one_address_is_dropped_and_bounded() {
    let key = keys::generate_private_key().expect("key");
    let mut s = server(key, 4);
    let addr = s.local_addr().expect("addr");
    let raw = UdpSocket::bind("127.0.0.1:0").expect("raw");
    let mut sent = 0u64;
    // Small bursts with a read in between, so the kernel's receive buffer never overflows.
    for round in 0..80u32 {
        for i in 0..50u32 {
            let len = ((round * 50 + i) * 7 % 1600) as usize;
            let mut p = vec![(i % 256) as u8; len];
            if let Some(b) = p.get_mut(1) {
                *b = round as u8;
            }
            if raw.send_to(&p, addr).is_ok() {
                sent += 1;
            }
        }
        s.update();
    }
    until(5, "flood drained", || {
        s.update();
        s.stats().datagrams_received >= sent * 9 / 10
    });
    let st = s.netcode().stats();
    assert_eq!(st.packets_accepted, 0);
    assert_eq!(st.drops.total(), st.packets_received);
    assert_eq!(s.netcode().pending_mappings(), 0);
    assert!(s.netcode().queued_events() == 0 && s.recv().next().is_none());
}

#[test]
fn client_through_lossy_proxy_sees_its_loss() {
    let key = keys::generate_private_key().expect("key");
    let s = server(key, 4);
    let addr = s.local_addr().expect("addr");
    let proxy =
        Proxy::spawn("127.0.0.1:0".parse().expect("addr"), addr, "lossy", 7).expect("proxy");
    // The token names the proxy's address; the server accepts it as its own public address.
    let mut settings = ServerSettings::new(PROTOCOL_ID, key, 4);
    settings.public_addresses = vec![addr, proxy.local_addr()];
    drop(s);
    let mut s = UdpServer::bind(addr, settings).expect("rebind");
    let mut c = UdpClient::connect(&token_for(&key, 9, proxy.local_addr(), 5)).expect("client");
    until(10, "connect through the proxy", || {
        s.update();
        c.update();
        c.is_connected() && s.clients() == vec![9]
    });
    let n = 400u32;
    let mut sent_at = Vec::with_capacity(n as usize);
    let mut latencies = Vec::new();
    let mut receive = |s: &mut UdpServer, sent_at: &[Instant]| {
        for (_, p) in s.recv() {
            let i = u32::from_le_bytes(p.try_into().expect("4 bytes")) as usize;
            latencies.push(sent_at[i].elapsed());
        }
    };
    for i in 0..n {
        sent_at.push(Instant::now());
        c.send(&i.to_le_bytes()).expect("send");
        s.update();
        c.update();
        receive(&mut s, &sent_at);
        std::thread::sleep(Duration::from_millis(2));
    }
    let settle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < settle {
        s.update();
        c.update();
        receive(&mut s, &sent_at);
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = latencies.len() as u32;
    let loss = 1.0 - f64::from(got) / f64::from(n);
    // `lossy` drops 25 % uniformly; 400 packets: sigma ~2.2 %.
    assert!((0.17..=0.33).contains(&loss), "loss {loss}");
    // ... and delays each packet by 75 ms (plus our polling).
    latencies.sort_unstable();
    assert!(
        latencies[0] >= Duration::from_millis(74),
        "min {:?}",
        latencies[0]
    );
    assert!(
        latencies[latencies.len() / 2] < Duration::from_millis(250),
        "median {:?}",
        latencies[latencies.len() / 2]
    );
    let stats = proxy.stats();
    assert!(stats.up_received >= u64::from(n));
    proxy.stop();
}

#[test]
fn ipv6_loopback_connects_when_available() {
    let key = keys::generate_private_key().expect("key");
    let Ok(mut s) = UdpServer::bind(
        "[::1]:0".parse().expect("addr"),
        ServerSettings::new(PROTOCOL_ID, key, 2),
    ) else {
        eprintln!("no IPv6 loopback here; skipped");
        return;
    };
    let addr = s.local_addr().expect("addr");
    let mut c = UdpClient::connect(&token_for(&key, 1, addr, 5)).expect("client");
    until(5, "IPv6 connect", || {
        s.update();
        c.update();
        c.is_connected() && s.clients() == vec![1]
    });
}

#[test]
fn key_files_and_profiles() {
    let dir = std::env::temp_dir().join(format!("lagless-transport-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("server.key");
    let key = keys::generate_private_key().expect("key");
    keys::write_key_file(&path, &key).expect("write");
    assert_eq!(keys::read_key_file(&path).expect("read"), key);
    std::fs::write(&path, [0u8; 31]).expect("write short");
    assert!(matches!(
        keys::read_key_file(&path),
        Err(lagless_transport::TransportError::KeyFile { .. })
    ));
    let token = keys::issue_token(
        &key,
        PROTOCOL_ID,
        1,
        vec!["127.0.0.1:1".parse().expect("addr")],
        30,
        5,
    )
    .expect("token");
    let token_path = dir.join("client.token");
    keys::write_token_file(&token_path, &token).expect("write token");
    let bytes = keys::read_token_file(&token_path).expect("read token");
    assert_eq!(ConnectToken::read(&bytes).expect("token"), token);
    assert!(
        keys::read_token_file(&path).is_err(),
        "a key file is not a token"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    assert!(matches!(
        Proxy::spawn(any, any, "no-such-profile", 1),
        Err(lagless_transport::TransportError::UnknownProfile(_))
    ));
}

#[test]
fn sixteen_clients_one_vanishes_the_others_play_on() {
    let key = keys::generate_private_key().expect("key");
    let mut s = server(key, 16);
    let addr = s.local_addr().expect("addr");
    let mut clients: Vec<UdpClient> = (0..16)
        .map(|i| UdpClient::connect(&token_for(&key, 100 + i, addr, 1)).expect("client"))
        .collect();
    until(10, "16 connects", || {
        s.update();
        clients.iter_mut().for_each(UdpClient::update);
        s.clients().len() == 16 && clients.iter().all(UdpClient::is_connected)
    });
    drop(clients.remove(3)); // client 103 vanishes
    let mut heard = std::collections::BTreeSet::new();
    until(10, "timeout of one, traffic from the rest", || {
        s.update();
        for c in &mut clients {
            c.update();
            c.send(b"alive").expect("send");
        }
        heard.extend(s.recv().map(|(id, _)| id));
        !s.clients().contains(&103) && heard.len() == 15
    });
    assert_eq!(s.clients().len(), 15);
    assert!(!heard.contains(&103));
}

#[test]
fn a_handshake_that_times_out_is_tried_again_while_the_token_is_valid() {
    let key = keys::generate_private_key().expect("key");
    // The server's port, bound by nobody yet: the first attempt hears nothing.
    let addr = UdpSocket::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let mut c = UdpClient::connect(&token_for(&key, 3, addr, 1)).expect("client");
    until(5, "a second attempt", || {
        c.update();
        c.attempts() >= 2
    });
    assert!(c.gave_up().is_none());
    assert_eq!(c.state(), ClientState::SendingConnectionRequest);
    // The server comes up: the attempt under way connects, from the same address.
    let mut s = UdpServer::bind(addr, ServerSettings::new(PROTOCOL_ID, key, 4)).expect("bind");
    until(10, "the retry to connect", || {
        s.update();
        c.update();
        c.is_connected()
    });
    assert!(c.attempts() >= 2);
    assert_eq!(s.clients(), vec![3]);
}

#[test]
fn a_client_says_why_it_gave_up() {
    let key = keys::generate_private_key().expect("key");
    let addr = UdpSocket::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    // Valid for 2 s with a 1 s timeout: after the first attempt no other fits.
    let token = keys::issue_token(&key, PROTOCOL_ID, 4, vec![addr], 2, 1)
        .expect("token")
        .write()
        .expect("write");
    let mut c = UdpClient::connect(&token).expect("client");
    until(5, "the client to give up", || {
        c.update();
        c.gave_up().is_some()
    });
    let g = c.gave_up().expect("gave up");
    assert_eq!(g.last, ClientState::ConnectionRequestTimedOut);
    assert_eq!(c.state(), ClientState::ConnectionRequestTimedOut);
    assert_eq!(g.why, lagless_transport::GaveUpWhy::NoTimeLeft);
    assert_eq!(g.attempts, c.attempts());
    let text = g.to_string();
    assert!(
        text.contains("gave up after 1 handshake attempt:"),
        "{text}"
    );
    assert!(text.contains("the token expires"), "{text}");
}
