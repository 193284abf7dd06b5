//! The networked commands of the `lagless` binary: `keygen`, `token`, `serve`, `connect`
//! and `proxy` (`run --transport udp` is in `main.rs`'s `run`). The loops themselves are
//! in the library's `net` module; this file parses, logs and writes files.

use super::NetArgs;
use clap::Args;
use lagless_core::LeadPolicy;
use lagless_core::interpolation::DelayPolicy;
use lagless_lab::metrics::Report;
use lagless_lab::net::connect::{ConnectSettings, connect as connect_one};
use lagless_lab::net::proxy::ProxySettings;
use lagless_lab::net::serve::{SceneServer, ServeSettings};
use lagless_lab::{RunConfig, ScriptChoice};
use lagless_transport::{PROTOCOL_ID, keys};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Args)]
pub(crate) struct TokenArgs {
    /// The private key file (from `lagless keygen`).
    #[arg(long)]
    pub(crate) key_file: PathBuf,
    /// The client's id (unique among the clients connected at once).
    #[arg(long)]
    pub(crate) client_id: u64,
    /// The address the client should reach (the server's, or a proxy's in front of it);
    /// repeat for fallbacks, tried in order.
    #[arg(long = "server", required = true)]
    pub(crate) servers: Vec<std::net::SocketAddr>,
    /// The token file to write (2048 bytes).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Seconds the token may be used to connect.
    #[arg(long, default_value_t = 60)]
    pub(crate) expire_s: u64,
    /// Seconds of silence after which either side drops the connection.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i32).range(1..=3600))]
    pub(crate) timeout_s: i32,
    /// The match the client is to join on a `serve --matches N` (0-based; in the token's
    /// user data, which only the server reads).
    #[arg(long = "match", default_value_t = 0)]
    pub(crate) match_id: u32,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Scene to serve.
    #[arg(long, default_value = "cubes")]
    pub(crate) scene: String,
    /// Address to bind (`127.0.0.1:0` lets the OS pick a port; the log says which).
    #[arg(long)]
    pub(crate) bind: std::net::SocketAddr,
    /// The private key file tokens are issued with.
    #[arg(long)]
    pub(crate) key_file: PathBuf,
    /// Client slots.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) max_clients: u32,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub(crate) seconds: Option<f64>,
    /// An address tokens may name besides the bound one (a `lagless proxy` in front).
    #[arg(long = "public-addr")]
    pub(crate) public_addrs: Vec<std::net::SocketAddr>,
    /// Simulation ticks per second.
    #[arg(long, default_value_t = 64)]
    pub(crate) tick_hz: u32,
    /// Snapshots per second (at most the tick rate).
    #[arg(long, default_value_t = 64)]
    pub(crate) snapshot_hz: u32,
    /// Cubes per side of the scene's grid (30: 900 cubes; smaller for quick tests).
    #[arg(long, default_value_t = 30)]
    pub(crate) grid: u32,
    /// Most snapshot payload per client, kbit/s; 0: no budget.
    #[arg(long, default_value_t = 256.0)]
    pub(crate) budget_kbps: f64,
    /// Threads the server encodes the clients' snapshots on (default: every core; 1: one
    /// after the other). The same bytes whatever the count.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) threads: Option<u16>,
    /// Write the server's metrics as JSON to this file when it stops.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Matches to host: a client joins the one its token names (`lagless token
    /// --match K`); a match whose last player left starts again empty. The matches tick
    /// on threads of their own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) matches: u32,
    /// Spatial cells of this size, m: each client is sent only what lies in the cells
    /// within `--interest-m` of its player (default: no cells, everything).
    #[arg(long, value_name = "M")]
    pub(crate) cells_m: Option<f32>,
    /// With `--cells-m`: how far around its player a client's interest reaches, m.
    #[arg(long, value_name = "M", default_value_t = 24.0)]
    pub(crate) interest_m: f32,
    /// On Ctrl-C or SIGTERM, stop admitting clients and let the matches play out for at
    /// most this many seconds before exiting (a second signal exits at once); 0: exit
    /// at once.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) drain_s: f64,
    /// Answer `/healthz`, `/readyz` and `/metrics` (Prometheus) on this address.
    #[arg(long)]
    pub(crate) admin: Option<std::net::SocketAddr>,
}

#[derive(Args)]
pub(crate) struct ConnectArgs {
    /// A connect token file (from `lagless token`); repeat to run several clients in this
    /// process, reported together.
    #[arg(long = "token", required = true)]
    pub(crate) tokens: Vec<PathBuf>,
    /// The scene the server runs (its welcome says which; another is refused by name).
    /// The scene's own settings (walkers, shooter) must match the server's.
    #[arg(long, default_value = "cubes")]
    pub(crate) scene: String,
    /// Seconds to play once connected.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) seconds: f64,
    /// Write the metrics as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Input script driving the player (roam, pattern).
    #[arg(long, default_value = "roam")]
    pub(crate) script: String,
    /// Seed of the scripts (the player's own seed derives from it as in `run`).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Light clients: the public client over a world that predicts nothing (snapshot
    /// decoding and the script only), to load a server with many players.
    #[arg(long)]
    pub(crate) bot: bool,
    /// Bots whose script is shown nothing (snapshots are decoded and acknowledged, so the
    /// server's work is the same, but nothing is converted for the script: use `--script
    /// pattern`): the lightest load.
    #[arg(long)]
    pub(crate) ack_only: bool,
    /// Turn client-side prediction off.
    #[arg(long)]
    pub(crate) no_prediction: bool,
    /// Delay policy for showing the other players and the cubes (as for `run`; default:
    /// the scene's, `RunConfig::for_scene`).
    #[arg(long, value_parser = lagless_lab::playback::parse_policy)]
    pub(crate) interpolation: Option<DelayPolicy>,
    /// How far ahead of the server the client runs (as for `run`; default: `felt`).
    #[arg(long, value_parser = lagless_lab::input_buffer::parse_lead_policy)]
    pub(crate) input_buffer: Option<LeadPolicy>,
    /// The link's name in the report (e.g. the proxy's profile).
    #[arg(long, default_value = "udp")]
    pub(crate) label: String,
    /// Seconds to wait for the server to accept the client.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) connect_timeout_s: f64,
}

#[derive(Args)]
pub(crate) struct FloodArgs {
    /// The server (or proxy) to flood; only loopback addresses are accepted.
    #[arg(long)]
    pub(crate) server: std::net::SocketAddr,
    /// The server's private key file: the requests carry valid tokens.
    #[arg(long)]
    pub(crate) key_file: PathBuf,
    /// Requests a second, all sources together.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) rate: u64,
    /// Source addresses (127.1.0.1 onwards).
    #[arg(long, default_value_t = 128)]
    pub(crate) sources: u16,
    /// Ports (sockets, each with its own token) per source address.
    #[arg(long, default_value_t = 12)]
    pub(crate) ports: u16,
    /// How long to flood.
    #[arg(long, default_value_t = 20.0)]
    pub(crate) seconds: f64,
    /// Client id of the first flooding token (the others follow).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) first_client_id: u64,
}

#[derive(Args)]
pub(crate) struct ProxyArgs {
    /// Where clients send to.
    #[arg(long)]
    pub(crate) listen: std::net::SocketAddr,
    /// The server.
    #[arg(long)]
    pub(crate) forward: std::net::SocketAddr,
    /// Network profile (see `lagless profiles`).
    #[arg(long)]
    pub(crate) profile: String,
    /// Seed; each client address gets its own derived seed, by order of arrival.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[command(flatten)]
    pub(crate) net: NetArgs,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub(crate) seconds: Option<f64>,
}

/// Logs to stderr, for the long-running commands.
fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .with_target(false)
        .try_init();
}

/// A flag Ctrl-C, SIGTERM or SIGHUP sets, so the loops stop cleanly (`serve` drains on the
/// first and stops on the second).
fn ctrl_c_flag() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .map_err(|e| format!("cannot catch Ctrl-C: {e}"))?;
    Ok(stop)
}

fn check_seconds(seconds: Option<f64>) -> Result<(), String> {
    match seconds {
        Some(s) if !(s > 0.0 && s <= 7.0 * 24.0 * 3600.0) => {
            Err(format!("--seconds must be in (0, 604800], got {s}"))
        }
        _ => Ok(()),
    }
}

/// Writes `report` as JSON to `path`, if given.
pub(crate) fn write_json(path: Option<&Path>, report: &Report) -> Result<(), String> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(&report.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        eprintln!("metrics written to {}", path.display());
    }
    Ok(())
}

/// `lagless keygen`.
pub(crate) fn keygen(out: &Path) -> Result<(), String> {
    let key = keys::generate_private_key().map_err(|e| e.to_string())?;
    keys::write_key_file(out, &key).map_err(|e| e.to_string())?;
    eprintln!("private key written to {}", out.display());
    Ok(())
}

/// `lagless token`.
pub(crate) fn token(a: &TokenArgs) -> Result<(), String> {
    let key = keys::read_key_file(&a.key_file).map_err(|e| e.to_string())?;
    let token = keys::issue_token_with(
        &key,
        PROTOCOL_ID,
        a.client_id,
        a.servers.clone(),
        (a.expire_s, a.timeout_s),
        lagless_transport::session::match_user_data(a.match_id),
    )
    .map_err(|e| e.to_string())?;
    keys::write_token_file(&a.out, &token).map_err(|e| e.to_string())?;
    eprintln!(
        "token for client {} (match {}) to {:?}, valid {} s, written to {}",
        a.client_id,
        a.match_id,
        a.servers,
        a.expire_s,
        a.out.display()
    );
    Ok(())
}

/// `lagless serve`.
pub(crate) fn serve(a: &ServeArgs) -> Result<(), String> {
    init_logging();
    check_seconds(a.seconds)?;
    if !(1..=1000).contains(&a.tick_hz) {
        return Err("--tick-hz must be in 1..=1000".into());
    }
    if !(a.budget_kbps.is_finite() && a.budget_kbps >= 0.0) {
        return Err("--budget-kbps must be a non-negative number (0: no budget)".into());
    }
    let key = keys::read_key_file(&a.key_file).map_err(|e| e.to_string())?;
    let mut config = RunConfig {
        scene: a.scene.clone(),
        grid: a.grid,
        threads: a
            .threads
            .map_or_else(lagless_replication::available_threads, usize::from),
        snapshot_hz: a.snapshot_hz,
        budget_kbps: a.budget_kbps,
        ..RunConfig::default()
    };
    config.server.tick_hz = a.tick_hz;
    config.client.tick_hz = a.tick_hz;
    config.cells = lagless_lab::config::cells(a.cells_m, a.interest_m)?;
    if !(a.drain_s.is_finite() && (0.0..=86_400.0).contains(&a.drain_s)) {
        return Err("--drain-s must be in [0, 86400]".into());
    }
    let settings = ServeSettings {
        public_addresses: a.public_addrs.clone(),
        matches: a.matches,
        drain: Duration::from_secs_f64(a.drain_s),
        admin: a.admin,
        ..ServeSettings::new(a.bind, key, a.max_clients as usize)
    };
    let stop = ctrl_c_flag()?;
    lagless_lab::with_scene!(config.scene.as_str(), S => serve_scene::<S>(a, &settings, &config, &stop),
        else Err(lagless_lab::RunError::UnknownScene(config.scene.clone()).to_string()))
}

/// `lagless serve` of scene `S`.
fn serve_scene<S: lagless_lab::scene::LabScene>(
    a: &ServeArgs,
    settings: &ServeSettings,
    config: &RunConfig,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), String> {
    let server = SceneServer::<S>::bind(settings, config, None).map_err(|e| e.to_string())?;
    tracing::info!(
        addr = %server.local_addr().map_err(|e| e.to_string())?,
        scene = config.scene,
        tick_hz = a.tick_hz,
        snapshot_hz = a.snapshot_hz,
        max_clients = a.max_clients,
        "serving"
    );
    let outcome = server.run(a.seconds, stop);
    let mut report = Report::default();
    report.set("scene", lagless_lab::Metric::Text(config.scene.clone()));
    report.set(
        "tick_hz",
        lagless_lab::Metric::Count(u64::from(config.server.tick_hz)),
    );
    outcome.fill(&mut report);
    print!("{}", report.to_table());
    write_json(a.json.as_deref(), &report)
}

/// `lagless connect`: one thread per token, one report.
pub(crate) fn connect(a: &ConnectArgs) -> Result<(), String> {
    init_logging();
    check_seconds(Some(a.seconds))?;
    if !(a.connect_timeout_s.is_finite() && a.connect_timeout_s > 0.0) {
        return Err("--connect-timeout-s must be a positive number".into());
    }
    // How the scene shows the others and leads the server, as `run` does; its rates
    // come from the server.
    let scene = RunConfig::for_scene(&a.scene);
    let mut config = RunConfig {
        scene: a.scene.clone(),
        seed: a.seed,
        seconds: a.seconds,
        script: ScriptChoice::Named(a.script.clone()),
        prediction: !a.no_prediction,
        interpolation: a.interpolation.unwrap_or(scene.interpolation),
        playback: scene.playback,
        clients: a.tokens.len() as u32,
        ..RunConfig::default()
    };
    config.client.sync.lead = a.input_buffer.unwrap_or(scene.client.sync.lead);
    let mut tokens = Vec::new();
    for path in &a.tokens {
        tokens.push(keys::read_token_file(path).map_err(|e| e.to_string())?);
    }
    let stop = ctrl_c_flag()?;
    lagless_lab::with_scene!(config.scene.as_str(), S => connect_scene::<S>(a, &config, tokens, &stop),
        else Err(lagless_lab::RunError::UnknownScene(config.scene.clone()).to_string()))
}

/// `lagless connect` as clients of scene `S`.
fn connect_scene<S: lagless_lab::scene::LabScene>(
    a: &ConnectArgs,
    config: &RunConfig,
    tokens: Vec<Vec<u8>>,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    let mut threads = Vec::new();
    for token in tokens {
        let settings = ConnectSettings {
            token,
            seconds: a.seconds,
            bot: a.bot,
            ack_only: a.ack_only,
            connect_timeout: Duration::try_from_secs_f64(a.connect_timeout_s)
                .unwrap_or(Duration::MAX),
            switch: None,
        };
        let config = config.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let run = connect_one::<S>(&settings, &config, &stop);
            match &run {
                Ok(r) => tracing::info!(player = r.player, ended = r.ended, "client done"),
                Err(e) => tracing::warn!("client failed: {e}"),
            }
            run
        }));
    }
    let mut runs = Vec::new();
    let mut failed = 0;
    for t in threads {
        match t.join() {
            Ok(Ok(run)) => runs.push(run),
            _ => failed += 1,
        }
    }
    if runs.is_empty() {
        return Err("no client could connect".into());
    }
    runs.sort_by_key(|r| r.player);
    let mut report = lagless_lab::net::report::build(runs, &a.label);
    report.set("client.failed", lagless_lab::Metric::Count(failed as u64));
    print!("{}", report.to_table());
    write_json(a.json.as_deref(), &report)
}

/// `lagless proxy`.
/// `lagless flood`.
pub(crate) fn flood(a: &FloodArgs) -> Result<(), String> {
    check_seconds(Some(a.seconds))?;
    let key = keys::read_key_file(&a.key_file).map_err(|e| e.to_string())?;
    let settings = lagless_lab::net::flood::FloodSettings {
        target: a.server,
        key,
        rate: a.rate,
        sources: a.sources,
        ports: a.ports,
        duration: Duration::try_from_secs_f64(a.seconds).map_err(|e| e.to_string())?,
        first_client_id: a.first_client_id,
    };
    let stop = ctrl_c_flag()?;
    let r = lagless_lab::net::flood::run(&settings, &stop).map_err(|e| e.to_string())?;
    println!(
        "flood: {} requests in {:.1} s ({:.0}/s) from {} x {} addresses; {} send errors; {} answers",
        r.sent,
        r.seconds,
        r.rate(),
        a.sources,
        a.ports,
        r.send_errors,
        r.answers
    );
    Ok(())
}

pub(crate) fn proxy(a: &ProxyArgs) -> Result<(), String> {
    init_logging();
    check_seconds(a.seconds)?;
    if !a.net.link_changes.is_empty() {
        return Err("the proxy does not change its link part-way (--link-change)".into());
    }
    let settings = ProxySettings {
        listen: a.listen,
        forward: a.forward,
        profile: a.profile.clone(),
        net: a.net.overrides()?,
        seed: a.seed,
    };
    let stop = ctrl_c_flag()?;
    lagless_lab::net::proxy::run(&settings, a.seconds, &stop).map_err(|e| e.to_string())?;
    Ok(())
}
