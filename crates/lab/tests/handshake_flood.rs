//! Genuine clients 150 ms each way from the server (through the transport's proxy, as
//! `lagless proxy` runs it) connect while `lagless flood`'s flood of valid connection
//! requests, from 128 loopback addresses x 12 ports, goes on; no flooding token gets a
//! slot. Loopback only; the flood stops by itself after at most 30 s (or when the test
//! ends), the clients after 10 s each. The rate is far below the lab's measurements
//! (`docs/udp.md`) so that an unoptimised build keeps up; what the test holds is the
//! behaviour, not the timing.
#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lagless_lab::net::flood::{FloodSettings, run};
use lagless_netcode::PacketError;
use lagless_transport::{
    ConnectionEvent, PROTOCOL_ID, Proxy, ProxyConfig, ServerSettings, UdpClient, UdpServer, keys,
};

/// A loopback port free a moment ago, for the proxy: the server must know the proxy's
/// address (the tokens name it) before the proxy knows the server's.
fn free_port() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

#[test]
fn genuine_clients_150_ms_away_connect_through_a_spread_handshake_flood() {
    let key = keys::generate_private_key().unwrap();
    let proxy_addr = free_port();
    let mut settings = ServerSettings::new(PROTOCOL_ID, key, 8);
    settings.public_addresses = vec![proxy_addr];
    let mut server = UdpServer::bind("127.0.0.1:0".parse().unwrap(), settings).unwrap();
    let server_addr = server.local_addr().unwrap();
    let mut proxy = ProxyConfig::profile(proxy_addr, server_addr, "lan", 1).unwrap();
    proxy.up.delay = Duration::from_millis(150);
    proxy.down.delay = Duration::from_millis(150);
    let proxy = Proxy::spawn_with(proxy).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        let settings = FloodSettings {
            target: server_addr,
            key,
            rate: 4000,
            sources: 128,
            ports: 12,
            duration: Duration::from_secs(30),
            first_client_id: 1_000_000,
        };
        std::thread::spawn(move || run(&settings, &stop))
    };

    // A second of flood first, so the server is busy when the clients start.
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        server.update();
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut connected_ids = Vec::new();
    let tries = 5;
    for k in 0..tries {
        let id = 1 + k;
        let token = keys::issue_token(&key, PROTOCOL_ID, id, vec![proxy_addr], 30, 5)
            .unwrap()
            .write()
            .unwrap();
        let mut client = UdpClient::connect(&token).unwrap();
        let start = Instant::now();
        while !client.is_connected() && start.elapsed() < Duration::from_secs(10) {
            server.update();
            client.update();
            while let Some(e) = server.poll_event() {
                if let ConnectionEvent::Connected { client_id, .. } = e {
                    connected_ids.push(client_id);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            client.is_connected(),
            "try {k}: {:?}, {:?}",
            client.state(),
            client.gave_up()
        );
        assert_eq!(client.attempts(), 1, "try {k}: on the first handshake");
        client.disconnect();
    }
    let stats = server.netcode().stats().clone();
    stop.store(true, Ordering::Relaxed);
    let report = flood.join().unwrap().unwrap();
    // Whatever the server did with the flood afterwards: one more drain of events.
    let end = Instant::now();
    while end.elapsed() < Duration::from_millis(200) {
        server.update();
        while let Some(e) = server.poll_event() {
            if let ConnectionEvent::Connected { client_id, .. } = e {
                connected_ids.push(client_id);
            }
        }
    }
    proxy.stop();

    assert_eq!(
        connected_ids,
        (1..=tries).collect::<Vec<_>>(),
        "no flooding token got a slot"
    );
    assert!(report.sent > 4000, "the flood ran: {report:?}");
    assert!(
        stats.drops.get(PacketError::SourceOverShare) > 0,
        "the server was busy and refused some before decrypting: {stats:?}"
    );
    assert!(stats.requests_decrypted > 0);
}
