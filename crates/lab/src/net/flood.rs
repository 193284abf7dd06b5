//! `lagless flood`: a handshake flood to measure a server under it. Valid connection
//! requests, each token from its own address and never answering its challenge, spread
//! over many loopback addresses (127.1.0.0/16), at a set rate, for a set time.
//!
//! It only ever sends to a loopback address: it is a lab instrument for a server on the
//! same machine, not a load generator for networks.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lagless_netcode::{Client, Key};
use lagless_transport::{PROTOCOL_ID, TransportError, keys};

use super::UdpRunError;

/// What a flood sends, and from where.
#[derive(Clone, Debug)]
pub struct FloodSettings {
    /// The server (or proxy) to flood: a loopback address.
    pub target: SocketAddr,
    /// The private key the tokens are issued with (the server's).
    pub key: Key,
    /// Requests a second, all addresses together.
    pub rate: u64,
    /// Source addresses, 127.1.0.1 onwards (at most 65 000).
    pub sources: u16,
    /// Sockets (ports) per source address; each sends its own token.
    pub ports: u16,
    /// How long to flood.
    pub duration: Duration,
    /// Client id of the first token; the others follow. Keep them clear of genuine ids.
    pub first_client_id: u64,
}

/// What a flood did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloodReport {
    /// Requests sent.
    pub sent: u64,
    /// Sends the OS refused (a full socket buffer, say).
    pub send_errors: u64,
    /// Datagrams the server sent back (challenges, mostly): the requests it decrypted.
    pub answers: u64,
    /// Seconds it ran.
    pub seconds: f64,
}

impl FloodReport {
    /// Requests sent a second.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.sent as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// The `i`-th source address of a flood: 127.1.0.1 onwards, never 127.0.0.1 (where
/// genuine lab clients send from).
pub fn source_addr(i: u16) -> IpAddr {
    let n = u32::from(i) + 1;
    IpAddr::V4(Ipv4Addr::new(127, 1, (n >> 8) as u8, n as u8))
}

/// Floods until `settings.duration` passes or `stop` is set; then reports.
pub fn run(settings: &FloodSettings, stop: &AtomicBool) -> Result<FloodReport, UdpRunError> {
    if !settings.target.ip().is_loopback() {
        return Err(UdpRunError::Connect(format!(
            "a flood only targets loopback addresses, not {}",
            settings.target
        )));
    }
    if settings.sources == 0 || settings.ports == 0 || settings.rate == 0 {
        return Err(UdpRunError::Connect(
            "a flood needs sources, ports and a rate above 0".into(),
        ));
    }
    let n = usize::from(settings.sources) * usize::from(settings.ports);
    let mut sockets = Vec::with_capacity(n);
    let mut requests = Vec::with_capacity(n);
    for s in 0..settings.sources {
        for _ in 0..settings.ports {
            let socket = UdpSocket::bind(SocketAddr::new(source_addr(s), 0))
                .map_err(TransportError::from)?;
            socket.set_nonblocking(true).map_err(TransportError::from)?;
            let id = settings.first_client_id + sockets.len() as u64;
            // Valid as long as the flood may run, and then some.
            let expire = settings.duration.as_secs() + 60;
            let token = keys::issue_token(
                &settings.key,
                PROTOCOL_ID,
                id,
                vec![settings.target],
                expire,
                5,
            )?;
            let mut client = Client::from_token(token, Duration::ZERO);
            client.update(Duration::ZERO);
            let request = client
                .poll_transmit()
                .ok_or_else(|| UdpRunError::Connect("a token made no request".into()))?;
            sockets.push(socket);
            requests.push(request.data);
        }
    }
    let mut report = FloodReport::default();
    let start = Instant::now();
    let mut next = 0usize;
    let mut buf = [0u8; 2048];
    let mut last_drain = Duration::ZERO;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= settings.duration || stop.load(Ordering::Relaxed) {
            break;
        }
        // Paced by the clock: as many as are due by now, in bursts of at most 1 ms worth.
        let due = (elapsed.as_secs_f64() * settings.rate as f64) as u64;
        let burst = due
            .saturating_sub(report.sent)
            .min(settings.rate / 1000 + 1);
        for _ in 0..burst {
            match sockets[next].send_to(&requests[next], settings.target) {
                Ok(_) => report.sent += 1,
                Err(_) => {
                    report.send_errors += 1;
                    report.sent += 1;
                }
            }
            next = (next + 1) % n;
        }
        // Answers are read, and counted, ten times a second.
        if elapsed >= last_drain + Duration::from_millis(100) {
            last_drain = elapsed;
            for socket in &sockets {
                while socket.recv_from(&mut buf).is_ok() {
                    report.answers += 1;
                }
            }
        }
        if burst == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}
