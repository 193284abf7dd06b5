//! Interoperability driver for the reference netcode.io implementation's `client` and
//! `server` programs (mas-bandwidth/netcode): the same private key, protocol id and
//! traffic (1200-byte payloads `0, 1, 2, ...` every 1/60 s, checked on receipt).
//!
//! ```sh
//! # our server, their client (IPv4, then IPv6)
//! cargo run -p lagless-transport --example netcode_interop -- server 127.0.0.1:40000 10
//! /tmp/netcode-ref/client 127.0.0.1:40000
//! cargo run -p lagless-transport --example netcode_interop -- server [::1]:40000 10
//! /tmp/netcode-ref/client [::1]:40000
//! # their server, our client
//! /tmp/netcode-ref/server                 # 127.0.0.1:40000 and [::1]:40000
//! cargo run -p lagless-transport --example netcode_interop -- client 127.0.0.1:40000 5
//! cargo run -p lagless-transport --example netcode_interop -- client [::1]:40000 5
//! ```
//!
//! Exits with status 0 when at least one client connected and payloads went both ways
//! intact, 1 otherwise.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lagless_netcode::{Client, MAX_PAYLOAD_BYTES, Server, ServerConfig, ServerEvent, TokenParams};
use lagless_transport::keys;

/// The private key hard-coded in the reference `client.c` and `server.c`.
const REFERENCE_KEY: [u8; 32] = [
    0x60, 0x6a, 0xbe, 0x6e, 0xc9, 0x19, 0x10, 0xea, 0x9a, 0x65, 0x62, 0xf6, 0x6f, 0x2b, 0x30, 0xe4,
    0x43, 0x71, 0xd6, 0x2c, 0xd1, 0x99, 0x27, 0x26, 0x6b, 0x3c, 0x60, 0xf4, 0xb7, 0x15, 0xab, 0xa1,
];
const PROTOCOL_ID: u64 = 0x1122_3344_5566_7788;
const FRAME: Duration = Duration::from_micros(16_667);

fn pattern() -> Vec<u8> {
    (0..MAX_PAYLOAD_BYTES).map(|i| i as u8).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: netcode_interop (server BIND | client SERVER) [SECONDS]";
    let (Some(mode), Some(addr)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        eprintln!("bad address {addr}; {usage}");
        std::process::exit(2);
    };
    let seconds = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10u64);
    let ok = match mode.as_str() {
        "server" => server(addr, seconds),
        "client" => client(addr, seconds),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    std::process::exit(if ok { 0 } else { 1 });
}

fn server(bind: SocketAddr, seconds: u64) -> bool {
    let socket = UdpSocket::bind(bind).expect("bind");
    socket.set_nonblocking(true).expect("nonblocking");
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: REFERENCE_KEY,
        max_clients: 256,
        public_addresses: vec![bind],
    };
    let start = Instant::now();
    let mut server = Server::new(
        config,
        keys::random_key().expect("random"),
        Duration::ZERO,
        keys::unix_now(),
    )
    .expect("server");
    let data = pattern();
    let (mut connects, mut good, mut bad, mut sent) = (0u32, 0u64, 0u64, 0u64);
    let mut buf = [0u8; 2048];
    println!("[lagless server] listening on {bind}");
    while start.elapsed() < Duration::from_secs(seconds) {
        let now = start.elapsed();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = server.handle_packet(now, from, &buf[..n]);
        }
        server.update(now);
        while let Some(event) = server.poll_event() {
            match event {
                ServerEvent::Connected {
                    client_index,
                    client_id,
                    addr,
                    ..
                } => {
                    connects += 1;
                    println!(
                        "[lagless server] client {client_id:016x} connected from {addr} in slot {client_index}"
                    );
                }
                ServerEvent::Disconnected {
                    client_index,
                    reason,
                    ..
                } => {
                    println!("[lagless server] slot {client_index} disconnected: {reason:?}");
                }
                ServerEvent::Payload { payload, .. } => {
                    if payload == data {
                        good += 1;
                    } else {
                        bad += 1;
                    }
                }
            }
        }
        let clients: Vec<usize> = server.connected_clients().collect();
        for c in clients {
            if server.send_payload(c, &data).is_ok() {
                sent += 1;
            }
        }
        while let Some(t) = server.poll_transmit() {
            let _ = socket.send_to(&t.data, t.addr);
        }
        std::thread::sleep(FRAME);
    }
    server.disconnect_all();
    while let Some(t) = server.poll_transmit() {
        let _ = socket.send_to(&t.data, t.addr);
    }
    let drops: Vec<String> = server
        .stats()
        .drops
        .iter()
        .map(|(r, n)| format!("{r:?}={n}"))
        .collect();
    println!(
        "[lagless server] connects {connects}, payloads received intact {good}, corrupt {bad}, sent {sent}, drops [{}]",
        drops.join(" ")
    );
    connects > 0 && good > 0 && bad == 0
}

fn client(server_addr: SocketAddr, seconds: u64) -> bool {
    let bind: SocketAddr = if server_addr.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()
    .expect("addr");
    let socket = UdpSocket::bind(bind).expect("bind");
    socket.set_nonblocking(true).expect("nonblocking");
    let client_id = u64::from_le_bytes(
        keys::random_key().expect("random")[..8]
            .try_into()
            .expect("8"),
    );
    let params = TokenParams::new(PROTOCOL_ID, client_id, vec![server_addr]);
    let token = lagless_netcode::ConnectToken::generate(
        &params,
        &REFERENCE_KEY,
        keys::unix_now(),
        &mut keys::os_rng().expect("rng"),
    )
    .expect("token");
    let start = Instant::now();
    let mut client = Client::from_token(token, Duration::ZERO);
    let data = pattern();
    let (mut good, mut bad, mut sent, mut was_connected) = (0u64, 0u64, 0u64, false);
    let mut buf = [0u8; 2048];
    println!("[lagless client] {client_id:016x} connecting to {server_addr}");
    while start.elapsed() < Duration::from_secs(seconds) {
        let now = start.elapsed();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = client.handle_packet(now, from, &buf[..n]);
        }
        client.update(now);
        if client.is_connected() {
            if !was_connected {
                println!(
                    "[lagless client] connected: slot {} of {}",
                    client.client_index(),
                    client.max_clients()
                );
                was_connected = true;
            }
            if client.send_payload(&data).is_ok() {
                sent += 1;
            }
        } else if client.state().is_error() || (was_connected && !client.is_connected()) {
            println!("[lagless client] state {:?}", client.state());
            break;
        }
        while let Some(p) = client.recv() {
            if p == data {
                good += 1;
            } else {
                bad += 1;
            }
        }
        while let Some(t) = client.poll_transmit() {
            let _ = socket.send_to(&t.data, t.addr);
        }
        std::thread::sleep(FRAME);
    }
    client.disconnect();
    while let Some(t) = client.poll_transmit() {
        let _ = socket.send_to(&t.data, t.addr);
    }
    let drops: Vec<String> = client
        .stats()
        .drops
        .iter()
        .map(|(r, n)| format!("{r:?}={n}"))
        .collect();
    println!(
        "[lagless client] connected {was_connected}, payloads received intact {good}, corrupt {bad}, sent {sent}, drops [{}]",
        drops.join(" ")
    );
    was_connected && good > 0 && bad == 0
}
