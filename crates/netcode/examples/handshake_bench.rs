//! What one core's [`Server`] does with a flood of valid connection requests, without
//! sockets (the syscalls come on top: measure those with `lagless flood` against
//! `lagless serve`). Run it optimized:
//!
//! ```sh
//! cargo run --release -p lagless-netcode --example handshake_bench
//! ```
//!
//! It prints, as the median of 5 runs:
//! - `refused_per_s`: requests refused before decryption (a busy server, sources over
//!   their share), per second of one core;
//! - `challenged_per_s`: requests decrypted and challenged (sources under their share);
//! - for a flood of 20 000 and 40 000 requests a second from 128 addresses x 12 ports,
//!   driven on a virtual clock, the share of one core the server spends on it.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use lagless_netcode::{Client, ConnectToken, Server, ServerConfig, TokenParams};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const PROTOCOL_ID: u64 = 0xABCD;
const KEY: [u8; 32] = [7; 32];
const UNIX: u64 = 1_800_000_000;

fn server_addr() -> SocketAddr {
    "127.0.0.1:40000".parse().expect("addr")
}

fn server() -> Server {
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: KEY,
        max_clients: 64,
        public_addresses: vec![server_addr()],
    };
    Server::new(config, [9; 32], Duration::ZERO, UNIX).expect("server")
}

/// A valid request for client `id`, with a token valid for an hour.
fn request(id: u64) -> Vec<u8> {
    let mut rng = ChaCha20Rng::seed_from_u64(id);
    let mut params = TokenParams::new(PROTOCOL_ID, id, vec![server_addr()]);
    params.expire_seconds = Some(3600);
    let token = ConnectToken::generate(&params, &KEY, UNIX, &mut rng).expect("token");
    let mut c = Client::from_token(token, Duration::ZERO);
    c.update(Duration::ZERO);
    c.poll_transmit().expect("request").data
}

/// 128 addresses x 12 ports, each with its own token.
fn flood() -> Vec<(SocketAddr, Vec<u8>)> {
    let mut v = Vec::new();
    for a in 0..128u16 {
        for p in 0..12u16 {
            let ip = Ipv4Addr::new(127, 1, 0, a as u8 + 1);
            v.push((
                SocketAddr::new(ip.into(), 20_000 + p),
                request(v.len() as u64 + 1000),
            ));
        }
    }
    v
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Requests refused before decryption per second: the server is made busy, then every
/// source is over its share for the rest of the window (the clock does not move).
fn refused_per_s(flood: &[(SocketAddr, Vec<u8>)]) -> f64 {
    let mut s = server();
    let now = Duration::from_secs(1);
    for (a, r) in flood.iter().cycle().take(2000) {
        let _ = s.handle_packet(now, *a, r);
    }
    while s.poll_transmit().is_some() {}
    let n = 200_000;
    let before = s.stats().requests_decrypted;
    let t = Instant::now();
    for (a, r) in flood.iter().cycle().take(n) {
        let _ = s.handle_packet(now, *a, r);
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(s.stats().requests_decrypted, before, "all refused");
    n as f64 / secs
}

/// Requests decrypted and challenged per second: every request from a source of its
/// own, a virtual millisecond apart, so the server is never busy and none is refused.
fn challenged_per_s(requests: &[Vec<u8>]) -> f64 {
    let mut s = server();
    let mut now = Duration::from_secs(1);
    let t = Instant::now();
    for (i, r) in requests.iter().enumerate() {
        now += Duration::from_millis(1);
        let ip = Ipv4Addr::from(0x0A00_0000 + i as u32);
        let _ = s.handle_packet(now, SocketAddr::new(ip.into(), 5000), r);
        while s.poll_transmit().is_some() {}
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(s.stats().requests_decrypted, requests.len() as u64);
    requests.len() as f64 / secs
}

/// The share of one core spent on `rate` requests a second of `flood`, over 5 s of
/// virtual time in 1 ms steps (the server's `update` each step, as a game loop would).
fn core_share(flood: &[(SocketAddr, Vec<u8>)], rate: u64) -> (f64, u64, u64) {
    let mut s = server();
    let mut now = Duration::ZERO;
    let mut next = 0;
    let steps = 5000;
    let t = Instant::now();
    for _ in 0..steps {
        now += Duration::from_millis(1);
        for _ in 0..rate / 1000 {
            let (a, r) = &flood[next];
            let _ = s.handle_packet(now, *a, r);
            next = (next + 1) % flood.len();
        }
        s.update(now);
        while s.poll_transmit().is_some() {}
    }
    let share = t.elapsed().as_secs_f64() / (steps as f64 / 1000.0);
    let refused = s
        .stats()
        .drops
        .get(lagless_netcode::PacketError::SourceOverShare);
    (share, s.stats().requests_decrypted, refused)
}

fn main() {
    let flood = flood();
    let fresh: Vec<Vec<u8>> = (0..20_000).map(|i| request(1_000_000 + i)).collect();
    let refused = median((0..5).map(|_| refused_per_s(&flood)).collect());
    let challenged = median((0..5).map(|_| challenged_per_s(&fresh)).collect());
    println!("refused_per_s {refused:.0}");
    println!("challenged_per_s {challenged:.0}");
    for rate in [20_000, 40_000] {
        let runs: Vec<(f64, u64, u64)> = (0..5).map(|_| core_share(&flood, rate)).collect();
        let share = median(runs.iter().map(|r| r.0).collect());
        let (_, decrypted, refused) = runs[0];
        println!(
            "flood {rate}/s from 128 x 12: {:.1}% of one core; per 5 s: {decrypted} decrypted, {refused} refused before decryption",
            share * 100.0
        );
    }
}
