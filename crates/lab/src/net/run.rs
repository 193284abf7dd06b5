//! `lagless run --transport udp`: a server and N clients in one process over loopback
//! sockets, in real time, and the same report as a run over the emulator.
//!
//! The server loop ([`super::serve`]) runs on one thread, each client
//! ([`super::connect`]) on its own; between them, unless the profile is `loopback`, sits
//! the transport's [`lagless_transport::Proxy`] applying the profile and overrides, seeded
//! per client as the emulator run seeds client `k`'s link. The server records the truth
//! (every player and other entity per tick) for the clients to measure their errors against, as
//! the virtual-clock runner does.

use super::UdpRunError;
use super::connect::{ClientRun, ConnectSettings, SwitchPlan, connect_with_truth};
use super::proxy::ProxySettings;
use super::serve::{SceneServer, ServeOutcome, ServeSettings};
use crate::config::RunConfig;
use crate::metrics::{Metric, Report};
use crate::runner::client::Truth;
use crate::scene::LabScene;
use lagless_transport::{PROTOCOL_ID, keys};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, mpsc};
use std::time::{Duration, Instant};

/// The profile name that puts no proxy between clients and server.
pub const LOOPBACK_PROFILE: &str = "loopback";

/// How long the server keeps a switching client's place in a run with
/// [`UdpOptions::switch_at`]: far longer than a switch takes, so a slow one is measured
/// rather than lost.
pub const SWITCH_GRACE: Duration = Duration::from_secs(10);

/// What a run over UDP does beside what a [`RunConfig`] says.
#[derive(Debug, Clone, Default)]
pub struct UdpOptions {
    /// Seconds into play at which every client changes networks (`--switch-at`): a new
    /// socket (a new port, so a new address at the proxy and the server) and a fresh
    /// token from the runner's key; the server keeps its place ([`SWITCH_GRACE`]) and
    /// echoes the numbered reliable messages the clients send, so loss and duplicates
    /// across the switch are counted (`switch.*` in `docs/metrics.md`).
    pub switch_at: Option<f64>,
}

/// Runs `config` (its scene by name) over real UDP on loopback and reports it.
pub fn run(config: &RunConfig) -> Result<Report, UdpRunError> {
    run_with(config, &UdpOptions::default())
}

/// [`run`], with the options only a run over UDP has.
pub fn run_with(config: &RunConfig, options: &UdpOptions) -> Result<Report, UdpRunError> {
    if let Some(at) = options.switch_at {
        if !(at.is_finite() && at > 0.0 && at < config.seconds) {
            return Err(crate::RunError::Invalid(format!(
                "--switch-at must lie within the run's (0, {}) s, got {at}",
                config.seconds
            ))
            .into());
        }
    }
    crate::with_scene!(config.scene.as_str(), S => run_scene::<S>(config, options),
        else Err(crate::RunError::UnknownScene(config.scene.clone()).into()))
}

/// The server's thread, its address, and the truth it records for the clients.
type Spawned<S> = (
    std::thread::JoinHandle<Option<ServeOutcome<S>>>,
    SocketAddr,
    Option<Arc<RwLock<Truth>>>,
);

/// Binds the server on its own thread and waits for it to be ready.
fn spawn_server<S: LabScene>(
    settings: ServeSettings,
    config: &RunConfig,
    stop: &Arc<AtomicBool>,
) -> Result<Spawned<S>, UdpRunError> {
    // The server, built on its thread, hands back its address and the truth.
    type Ready = Result<(SocketAddr, Option<Arc<RwLock<Truth>>>), String>;
    let (tx, rx) = mpsc::channel::<Ready>();
    let clients = settings.max_clients;
    let config = config.clone();
    let stop = stop.clone();
    let server = std::thread::Builder::new()
        .name("lagless-serve".into())
        .spawn(move || -> Option<ServeOutcome<S>> {
            match SceneServer::<S>::bind(&settings, &config, Some(clients)) {
                Ok(s) => {
                    let ready = s.local_addr().map(|a| (a, s.truth()));
                    let _ = tx.send(ready.map_err(|e| e.to_string()));
                    Some(s.run(None, &stop))
                }
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    None
                }
            }
        })
        .map_err(|e| UdpRunError::Thread(e.to_string()))?;
    let (server_addr, truth) = rx
        .recv()
        .map_err(|e| UdpRunError::Thread(e.to_string()))?
        .map_err(UdpRunError::Connect)?;
    Ok((server, server_addr, truth))
}

/// [`run`] on scene `S`.
fn run_scene<S: LabScene>(config: &RunConfig, options: &UdpOptions) -> Result<Report, UdpRunError> {
    if !(config.seconds > 0.0 && config.seconds <= 24.0 * 3600.0) {
        return Err(crate::RunError::Invalid(format!(
            "seconds must be in (0, 86400], got {}",
            config.seconds
        ))
        .into());
    }
    if config.clients == 0 || config.clients > 256 {
        return Err(crate::RunError::Invalid(format!(
            "clients must be 1..=256, got {}",
            config.clients
        ))
        .into());
    }
    if !config.link_changes.is_empty() || !config.outages.is_empty() {
        return Err(crate::RunError::Invalid(
            "--transport udp does not change links or cut them (--link-change, --outage)".into(),
        )
        .into());
    }
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let key = keys::generate_private_key()?;
    let clients = config.clients as usize;
    let stop = Arc::new(AtomicBool::new(false));

    // The proxy's address goes in the tokens and the server must answer for it, so it is
    // chosen first: a port the OS hands out and takes back at once (loopback; a race with
    // another process taking it in between fails the run, it does not mislead it).
    let proxy_listen = if config.profile == LOOPBACK_PROFILE {
        None
    } else {
        let probe =
            std::net::UdpSocket::bind(loopback).map_err(lagless_transport::TransportError::from)?;
        Some(
            probe
                .local_addr()
                .map_err(lagless_transport::TransportError::from)?,
        )
    };
    let settings = ServeSettings {
        public_addresses: proxy_listen.into_iter().collect(),
        resume_grace: options.switch_at.map(|_| SWITCH_GRACE),
        ..ServeSettings::new(loopback, key, clients)
    };
    let (server, server_addr, truth) = spawn_server::<S>(settings, config, &stop)?;
    let proxy = if let Some(listen) = proxy_listen {
        let settings = ProxySettings {
            listen,
            forward: server_addr,
            profile: config.profile.clone(),
            net: config.net.clone(),
            seed: config.seed,
        };
        match settings.spawn() {
            Ok(p) => Some(p),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                let _ = server.join();
                return Err(e);
            }
        }
    } else {
        None
    };
    let target = proxy.as_ref().map_or(server_addr, |p| p.local_addr());

    let mut threads = Vec::new();
    for k in 0..clients {
        let issue = move || {
            keys::issue_token(&key, PROTOCOL_ID, k as u64 + 1, vec![target], 60, 5)
                .and_then(|t| Ok(t.write()?))
        };
        let token = issue()?;
        let switch = options.switch_at.map(|at| SwitchPlan {
            at,
            token: std::sync::Arc::new(move || issue().ok().map(|t| t.to_vec())),
        });
        let settings = ConnectSettings {
            token: token.to_vec(),
            seconds: config.seconds,
            bot: false,
            ack_only: false,
            connect_timeout: Duration::from_secs(10),
            switch,
        };
        let config = config.clone();
        let truth = truth.clone();
        let stop = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("lagless-client-{k}"))
                .spawn(move || connect_with_truth::<S>(&settings, &config, truth, &stop))
                .map_err(|e| UdpRunError::Thread(e.to_string()))?,
        );
        // One at a time, so client k takes slot k and drives player k + 1, as in the lab.
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut runs: Vec<ClientRun<S>> = Vec::new();
    let mut failure = None;
    for t in threads {
        match t.join() {
            Ok(Ok(run)) => runs.push(run),
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some(UdpRunError::Thread("a client panicked".into())),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let outcome = server
        .join()
        .map_err(|_| UdpRunError::Thread("the server panicked".into()))?;
    let proxy_stats = proxy.map(|p| {
        let s = p.stats();
        p.stop();
        s
    });
    if let Some(e) = failure {
        return Err(e);
    }
    runs.sort_by_key(|r| r.player);
    let guard = truth.as_ref().and_then(|t| t.read().ok());
    let mut report =
        super::report::build_with(runs, outcome.as_ref(), guard.as_deref(), &config.profile);
    report.set("network", Metric::Text(format!("{:?}", config.net)));
    if let Some(s) = proxy_stats {
        let dropped =
            (s.up_received + s.down_received).saturating_sub(s.up_forwarded + s.down_forwarded);
        report.number(
            "net.proxy_loss_pct",
            (s.up_received + s.down_received > 0)
                .then(|| dropped as f64 * 100.0 / (s.up_received + s.down_received) as f64),
        );
    }
    Ok(report)
}
