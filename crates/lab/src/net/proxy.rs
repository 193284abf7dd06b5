//! `lagless proxy`: the transport's link-conditioner [`Proxy`] with a profile and the
//! network overrides of `run`, logging its counters once a second.

use super::UdpRunError;
use crate::config::NetOverrides;
use lagless_netem::LinkConfig;
use lagless_transport::{Proxy, ProxyConfig, ProxyStats, TransportError};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What `lagless proxy` needs.
#[derive(Clone, Debug)]
pub struct ProxySettings {
    /// Where clients send to (port 0: the OS picks one).
    pub listen: SocketAddr,
    /// The server.
    pub forward: SocketAddr,
    /// The profile's name (see `lagless profiles`).
    pub profile: String,
    /// Overrides on top of it.
    pub net: NetOverrides,
    /// Seed: client address `k` (by order of arrival) gets `derive_seed(seed, k)`, as
    /// client `k` of a lab run does.
    pub seed: u64,
}

impl ProxySettings {
    /// The uplink and downlink the proxy applies.
    pub fn links(&self) -> Result<(LinkConfig, LinkConfig), UdpRunError> {
        let base = lagless_netem::profile(&self.profile)
            .ok_or_else(|| TransportError::UnknownProfile(self.profile.clone()))?;
        Ok(self.net.apply(&base))
    }

    /// Starts the proxy on its own thread.
    pub fn spawn(&self) -> Result<Proxy, UdpRunError> {
        let (up, down) = self.links()?;
        let mut config = ProxyConfig::profile(self.listen, self.forward, &self.profile, self.seed)?;
        config.up = up;
        config.down = down;
        Ok(Proxy::spawn_with(config)?)
    }
}

/// Runs a proxy until `stop` is set or `seconds` have passed, logging its counters every
/// second; returns them.
pub fn run(
    settings: &ProxySettings,
    seconds: Option<f64>,
    stop: &AtomicBool,
) -> Result<ProxyStats, UdpRunError> {
    let proxy = settings.spawn()?;
    tracing::info!(
        listen = %proxy.local_addr(),
        forward = %settings.forward,
        profile = settings.profile,
        seed = settings.seed,
        "proxy started"
    );
    let start = Instant::now();
    let end = seconds.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX));
    let mut last = start;
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| start.elapsed() < e) {
        std::thread::sleep(Duration::from_millis(20));
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            log(&proxy.stats(), "proxy");
        }
    }
    let stats = proxy.stats();
    proxy.stop();
    log(&stats, "proxy stopped");
    Ok(stats)
}

fn log(s: &ProxyStats, message: &str) {
    let pct = |forwarded: u64, received: u64| {
        if received == 0 {
            0.0
        } else {
            100.0 - forwarded as f64 * 100.0 / received as f64
        }
    };
    tracing::info!(
        sessions = s.sessions,
        up_received = s.up_received,
        up_forwarded = s.up_forwarded,
        up_dropped_pct = pct(s.up_forwarded, s.up_received),
        down_received = s.down_received,
        down_forwarded = s.down_forwarded,
        down_dropped_pct = pct(s.down_forwarded, s.down_received),
        "{message}"
    );
}
