//! [`Proxy`]: a UDP link conditioner between real clients and a real server.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lagless_netem::{Duplex, LinkConfig, derive_seed};

use crate::TransportError;

/// How a [`Proxy`] treats traffic.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Where clients send to.
    pub listen: SocketAddr,
    /// Where the server is.
    pub forward: SocketAddr,
    /// Client to server link.
    pub up: LinkConfig,
    /// Server to client link.
    pub down: LinkConfig,
    /// Seed; each client address gets its own derived seed (by order of arrival).
    pub seed: u64,
    /// Most client addresses served at once; datagrams from more are dropped.
    pub max_sessions: usize,
    /// A client address silent this long is forgotten (its upstream socket closed).
    pub idle_timeout: Duration,
}

impl ProxyConfig {
    /// A proxy applying one of `lagless_netem`'s named profiles in both directions.
    pub fn profile(
        listen: SocketAddr,
        forward: SocketAddr,
        profile: &str,
        seed: u64,
    ) -> Result<Self, TransportError> {
        let config = lagless_netem::profile(profile)
            .ok_or_else(|| TransportError::UnknownProfile(profile.to_owned()))?;
        config.validate()?;
        Ok(Self {
            listen,
            forward,
            up: config.clone(),
            down: config,
            seed,
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(60),
        })
    }
}

/// Counters of a running proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client addresses seen.
    pub sessions: u64,
    /// Datagrams dropped because `max_sessions` was reached.
    pub sessions_refused: u64,
    /// Client to server datagrams received / forwarded.
    pub up_received: u64,
    /// Client to server datagrams forwarded after the link.
    pub up_forwarded: u64,
    /// Server to client datagrams received.
    pub down_received: u64,
    /// Server to client datagrams forwarded after the link.
    pub down_forwarded: u64,
    /// Socket errors.
    pub io_errors: u64,
}

struct Session {
    upstream: UdpSocket,
    duplex: Duplex,
    last_active: Duration,
}

/// A UDP proxy on its own thread: every datagram from a client goes through that client's
/// seeded `lagless_netem::Duplex` uplink to the server, from a socket of its own, and every
/// answer through the downlink back. Stops when [`Proxy::stop`] is called or it is dropped.
pub struct Proxy {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<ProxyStats>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on `listen` and forwards to `forward` through the named profile (see
    /// `lagless_netem::PROFILE_NAMES`), seeded.
    pub fn spawn(
        listen: SocketAddr,
        forward: SocketAddr,
        profile: &str,
        seed: u64,
    ) -> Result<Self, TransportError> {
        Self::spawn_with(ProxyConfig::profile(listen, forward, profile, seed)?)
    }

    /// Starts a proxy with a full configuration.
    pub fn spawn_with(config: ProxyConfig) -> Result<Self, TransportError> {
        config.up.validate()?;
        config.down.validate()?;
        let socket = UdpSocket::bind(config.listen)?;
        socket.set_nonblocking(true)?;
        let local_addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(ProxyStats::default()));
        let thread = {
            let stop = stop.clone();
            let stats = stats.clone();
            std::thread::Builder::new()
                .name("lagless-proxy".into())
                .spawn(move || run(socket, config, &stop, &stats))?
        };
        Ok(Self {
            local_addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// The address clients should send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A copy of the counters.
    pub fn stats(&self) -> ProxyStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(socket: UdpSocket, config: ProxyConfig, stop: &AtomicBool, shared: &Mutex<ProxyStats>) {
    let start = Instant::now();
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let mut stats = ProxyStats::default();
    let mut buf = vec![0u8; 65536];
    let mut last_publish = Duration::ZERO;
    let unspecified: SocketAddr = match config.forward {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        // Clients to their uplinks.
        for _ in 0..4096 {
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    stats.up_received += 1;
                    if !sessions.contains_key(&from) {
                        if sessions.len() >= config.max_sessions {
                            stats.sessions_refused += 1;
                            continue;
                        }
                        let seed = derive_seed(config.seed, stats.sessions);
                        let upstream = UdpSocket::bind(unspecified).and_then(|s| {
                            s.set_nonblocking(true)?;
                            Ok(s)
                        });
                        let duplex = Duplex::new(config.up.clone(), config.down.clone(), seed);
                        match (upstream, duplex) {
                            (Ok(upstream), Ok(duplex)) => {
                                stats.sessions += 1;
                                sessions.insert(
                                    from,
                                    Session {
                                        upstream,
                                        duplex,
                                        last_active: now,
                                    },
                                );
                            }
                            _ => {
                                stats.io_errors += 1;
                                continue;
                            }
                        }
                    }
                    if let Some(s) = sessions.get_mut(&from) {
                        s.last_active = now;
                        s.duplex.up.send(now, buf[..n].to_vec());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => stats.io_errors += 1,
            }
        }
        let mut next_due: Option<Duration> = None;
        for (client, s) in sessions.iter_mut() {
            // Server answers to the downlink.
            for _ in 0..4096 {
                match s.upstream.recv_from(&mut buf) {
                    Ok((n, from)) if from == config.forward => {
                        stats.down_received += 1;
                        s.duplex.down.send(now, buf[..n].to_vec());
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        stats.io_errors += 1;
                        break;
                    }
                }
            }
            while let Some(p) = s.duplex.up.poll(now) {
                match s.upstream.send_to(&p, config.forward) {
                    Ok(_) => stats.up_forwarded += 1,
                    Err(_) => stats.io_errors += 1,
                }
            }
            while let Some(p) = s.duplex.down.poll(now) {
                match socket.send_to(&p, *client) {
                    Ok(_) => stats.down_forwarded += 1,
                    Err(_) => stats.io_errors += 1,
                }
            }
            for due in [s.duplex.up.next_due(), s.duplex.down.next_due()]
                .into_iter()
                .flatten()
            {
                next_due = Some(next_due.map_or(due, |d: Duration| d.min(due)));
            }
        }
        sessions.retain(|_, s| {
            now.saturating_sub(s.last_active) < config.idle_timeout || s.duplex.down.in_flight() > 0
        });
        if now.saturating_sub(last_publish) >= Duration::from_millis(20) {
            if let Ok(mut shared) = shared.lock() {
                *shared = stats.clone();
            }
            last_publish = now;
        }
        // Sleep until the next delivery, but wake at least every millisecond for input.
        let nap = next_due.map_or(Duration::from_millis(1), |d| {
            d.saturating_sub(start.elapsed())
        });
        std::thread::sleep(nap.clamp(Duration::from_micros(100), Duration::from_millis(1)));
    }
    if let Ok(mut shared) = shared.lock() {
        *shared = stats;
    }
}
