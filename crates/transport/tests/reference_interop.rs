//! Live interoperability with the reference netcode.io C programs, when they are built:
//! set `LAGLESS_NETCODE_REF` to a folder holding the reference `client` and `server`
//! binaries (see `crates/netcode/tests/data/README.md`); without it these tests pass
//! without doing anything. Uses port 40000 on 127.0.0.1 and ::1 (the reference's
//! hard-coded defaults), so run them alone: `cargo test -p lagless-transport --test
//! reference_interop -- --test-threads 1`.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lagless_netcode::{Client, ConnectToken, Server, ServerConfig, ServerEvent, TokenParams};
use lagless_transport::keys;

const REFERENCE_KEY: [u8; 32] = [
    0x60, 0x6a, 0xbe, 0x6e, 0xc9, 0x19, 0x10, 0xea, 0x9a, 0x65, 0x62, 0xf6, 0x6f, 0x2b, 0x30, 0xe4,
    0x43, 0x71, 0xd6, 0x2c, 0xd1, 0x99, 0x27, 0x26, 0x6b, 0x3c, 0x60, 0xf4, 0xb7, 0x15, 0xab, 0xa1,
];
const PROTOCOL_ID: u64 = 0x1122_3344_5566_7788;

fn reference(program: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("LAGLESS_NETCODE_REF")?;
    let path = PathBuf::from(dir).join(program);
    path.exists().then_some(path)
}

fn pattern() -> Vec<u8> {
    (0..1200).map(|i| i as u8).collect()
}

/// Kills the child it holds (only that process) when dropped.
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Our server on `bind` for `secs`, with the reference client connecting to it.
fn our_server_their_client(bind: &str) {
    let Some(client) = reference("client") else {
        return;
    };
    let bind: SocketAddr = bind.parse().expect("addr");
    let socket = UdpSocket::bind(bind).expect("bind (is port 40000 free?)");
    socket.set_nonblocking(true).expect("nonblocking");
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: REFERENCE_KEY,
        max_clients: 8,
        public_addresses: vec![bind],
    };
    let mut server = Server::new(
        config,
        keys::random_key().expect("key"),
        Duration::ZERO,
        keys::unix_now(),
    )
    .expect("server");
    let _child = Reaper(
        Command::new(client)
            .arg(bind.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let start = Instant::now();
    let (mut intact, mut corrupt) = (0, 0);
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_secs(3) && intact < 30 {
        let now = start.elapsed();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = server.handle_packet(now, from, &buf[..n]);
        }
        server.update(now);
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Payload { payload, .. } = e {
                if payload == pattern() {
                    intact += 1
                } else {
                    corrupt += 1
                }
            }
        }
        let clients: Vec<usize> = server.connected_clients().collect();
        for c in clients {
            let _ = server.send_payload(c, &pattern());
        }
        while let Some(t) = server.poll_transmit() {
            let _ = socket.send_to(&t.data, t.addr);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(corrupt, 0);
    assert!(
        intact >= 30,
        "only {intact} payloads from the reference client"
    );
    assert_eq!(
        server.stats().drops.total(),
        0,
        "{:?}",
        server.stats().drops
    );
}

/// The reference server (127.0.0.1:40000 and [::1]:40000), our client connecting to `addr`.
fn their_server_our_client(addr: &str) {
    let Some(program) = reference("server") else {
        return;
    };
    let addr: SocketAddr = addr.parse().expect("addr");
    let _child = Reaper(
        Command::new(program)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let bind: SocketAddr = if addr.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()
    .expect("addr");
    let socket = UdpSocket::bind(bind).expect("bind");
    socket.set_nonblocking(true).expect("nonblocking");
    let params = TokenParams::new(PROTOCOL_ID, 0x1a61e55, vec![addr]);
    let token = ConnectToken::generate(
        &params,
        &REFERENCE_KEY,
        keys::unix_now(),
        &mut keys::os_rng().expect("rng"),
    )
    .expect("token");
    let mut client = Client::from_token(token, Duration::ZERO);
    let start = Instant::now();
    let (mut intact, mut corrupt) = (0, 0);
    let mut buf = [0u8; 2048];
    while start.elapsed() < Duration::from_secs(3) && intact < 30 {
        let now = start.elapsed();
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = client.handle_packet(now, from, &buf[..n]);
        }
        client.update(now);
        if client.is_connected() {
            let _ = client.send_payload(&pattern());
        }
        while let Some(p) = client.recv() {
            if p == pattern() {
                intact += 1
            } else {
                corrupt += 1
            }
        }
        while let Some(t) = client.poll_transmit() {
            let _ = socket.send_to(&t.data, t.addr);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(corrupt, 0);
    assert!(
        intact >= 30,
        "only {intact} payloads from the reference server, state {:?}",
        client.state()
    );
    assert_eq!(
        client.stats().drops.total(),
        0,
        "{:?}",
        client.stats().drops
    );
}

#[test]
fn reference_interop_all_four_ways() {
    // One test, so the four runs never share port 40000 at the same time.
    our_server_their_client("127.0.0.1:40000");
    our_server_their_client("[::1]:40000");
    their_server_our_client("127.0.0.1:40000");
    their_server_our_client("[::1]:40000");
}
