//! `lagless`: the lab command line. With no arguments it runs the default demo (the cube
//! scene over the `mobile` profile for 30 simulated seconds).

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lagless_core::LeadPolicy;
use lagless_core::interpolation::{DelayPolicy, MAX_STRETCH, MIN_OVERDUE_QUANTILE};
use lagless_lab::config::named_profile;
use lagless_lab::{LinkChange, NetOverrides, RunConfig};
use lagless_netem::{PROFILE_NAMES, Trace, profile};
use std::path::PathBuf;
use std::process::ExitCode;

mod net_commands;
mod run_cmd;

use run_cmd::run_command;

#[derive(Parser)]
#[command(
    name = "lagless",
    version,
    about = "Measure how a networked game feels under bad networks"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scene over the emulated network and report the metrics.
    Run(Box<RunArgs>),
    /// List the network profiles.
    Profiles,
    /// Benchmark reconciliation cost against rollback depth and predicted-set size,
    /// with the naive full-world restore and replay as the baseline.
    BenchReconcile {
        /// Repetitions per configuration (medians are reported).
        #[arg(long, default_value_t = 50)]
        reps: usize,
    },
    /// Benchmark encoding and decoding one 900-cube snapshot for one client (delta and
    /// full), with the plain uncompressed codec as the baseline.
    BenchSnapshot {
        /// Passes over 64 recorded snapshots (medians are reported).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Instead: the server side of a run with this many clients (physics, capture and
        /// every client's encode under the default budget, per tick; no clients).
        #[arg(long)]
        clients: Option<usize>,
        /// With `--clients`: ticks measured.
        #[arg(long, default_value_t = 256)]
        ticks: u32,
        /// With `--clients`: start each client's encode with the caches cold, as in a
        /// run, where the clients' simulations run between two encodes (one thread
        /// only: the encodes run one after the other).
        #[arg(long)]
        cold: bool,
        /// With `--clients`: threads the encodes are spread over (default: every core).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        threads: Option<u16>,
        /// With `--clients`: run the server with spatial cells of this size (m) as well,
        /// and compare it with no cells, measured in the same process (entities visited
        /// and encode time per client per tick).
        #[arg(long, value_name = "SIZE")]
        cells: Option<f32>,
        /// With `--cells`: each client's interest, the cells within this distance (m) of
        /// its player (default: the cell size).
        #[arg(long, value_name = "M")]
        interest_m: Option<f32>,
    },
    /// Benchmark the interpolation buffer's cost per snapshot arrival and per frame, for
    /// each delay policy, on a recorded link, with the fixed classic buffer as the
    /// baseline.
    BenchPlayback(Box<BenchPlaybackArgs>),
    /// Compare interpolation policies over a long stretch of one emulated link: tick-stamped
    /// packets through the profile's downlink into one value-less buffer per policy, with
    /// no game, so rare underruns (a strict target) have time to show.
    SweepPlayback(Box<SweepArgs>),
    /// Compare lead policies (the client's input buffer at the server) over a long
    /// stretch of one emulated link, with no game: fixed buffers of 1-10 ticks, the
    /// adaptive policy at several targets, and the peers' rules (lightyear, Unity), side
    /// by side (starvation, lead beyond RTT/2, input delay), per phase when the link
    /// changes.
    SweepInput(Box<SweepInputArgs>),
    /// Write a new private key (32 random bytes) for `serve` and `token`.
    Keygen {
        /// The key file to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Issue a connect token, as a game's matchmaker would.
    Token(net_commands::TokenArgs),
    /// Run the scene's authoritative server over UDP in real time, headless.
    Serve(Box<net_commands::ServeArgs>),
    /// Join a `serve` with a connect token, play the scripted input and report the metrics.
    Connect(Box<net_commands::ConnectArgs>),
    /// A UDP proxy applying a network profile between real clients and a real server.
    Proxy(Box<net_commands::ProxyArgs>),
    /// Flood a server on this machine with valid connection requests that never answer
    /// their challenge, from many loopback addresses (to measure the server under it).
    Flood(Box<net_commands::FloodArgs>),
    /// Run a scene's server and a client in real time over the emulated network and
    /// show them in a browser page: drive the player with W/A/S/D and space, and turn
    /// the network, prediction, smoothing and interpolation knobs live.
    View(ViewArgs),
}

#[derive(Args)]
struct ViewArgs {
    /// Scene to show: `cubes`, `rocket`, `walkers` or `shooter`.
    #[arg(long, default_value = "cubes")]
    scene: String,
    /// Network profile to start with (see `lagless profiles`).
    #[arg(long, default_value = "mobile")]
    profile: String,
    /// Port of the page (0: any free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to listen on. Anything but loopback lets other machines drive the run.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// Seed for every random choice (network fates, scripts).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Clients: the first is yours, the others play their script and are the remote
    /// players your client shows.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    clients: u32,
}

/// `lagless view`: serves the page until the process is stopped.
fn view_command(args: ViewArgs) -> Result<(), String> {
    if !args.bind.is_loopback() {
        eprintln!(
            "warning: listening on {}: anyone who can reach it can drive the run and read its metrics",
            args.bind
        );
    }
    let defaults = RunConfig::for_scene(&args.scene);
    let config = RunConfig {
        scene: args.scene,
        profile: args.profile,
        seed: args.seed,
        clients: args.clients,
        // Timing the naive full-world rollback is a benchmark; in real time it only
        // costs frames.
        naive_sample: 0,
        // The longest run the lab allows; the view runs until it is stopped.
        seconds: 24.0 * 3600.0,
        ..defaults
    };
    let viewer = lagless_lab::view::Viewer::start(config, (args.bind, args.port).into())?;
    let addr = viewer.local_addr().map_err(|e| e.to_string())?;
    println!("lagless view: http://{addr}/");
    viewer.serve();
    Ok(())
}

#[derive(Args)]
struct SweepInputArgs {
    /// Network profile (see `lagless profiles`).
    #[arg(long, default_value = "mobile")]
    profile: String,
    #[command(flatten)]
    net: NetArgs,
    /// Outages: `START:SECS[:up|down|both][:hold|drop]`. Repeatable.
    #[arg(long = "outage", value_name = "START:SECS[:DIR][:MODE]", value_parser = lagless_lab::input_buffer::OutageSpec::parse)]
    outages: Vec<lagless_lab::input_buffer::OutageSpec>,
    /// Simulation ticks per second (a snapshot every tick).
    #[arg(long, default_value_t = 64)]
    tick_hz: u32,
    /// Simulated seconds per policy.
    #[arg(long, default_value_t = 600.0)]
    seconds: f64,
    /// Seconds at the start left out (the clock synchronising).
    #[arg(long, default_value_t = 5.0)]
    warmup: f64,
    /// Snapshot payload bytes.
    #[arg(long, default_value_t = 200)]
    snapshot_bytes: usize,
    /// Seed for the link's random fates.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Policies, comma-separated (`fixed:3,adaptive:0.5%,lightyear,unity`); the default
    /// is fixed:1..10, adaptive at 0.25/0.5/1/2%, lightyear and unity.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
}

#[derive(Args)]
struct SweepArgs {
    /// Network profile (see `lagless profiles`).
    #[arg(long, default_value = "snapshot-demo")]
    profile: String,
    #[command(flatten)]
    net: NetArgs,
    /// Server ticks per second.
    #[arg(long, default_value_t = 60)]
    tick_hz: u32,
    /// Snapshots per second.
    #[arg(long, default_value_t = 60)]
    snapshot_hz: u32,
    /// Rendered frames per second.
    #[arg(long, default_value_t = 60.0)]
    frame_hz: f64,
    /// Simulated seconds per link.
    #[arg(long, default_value_t = 3600.0)]
    seconds: f64,
    /// Independent links, averaged.
    #[arg(long, default_value_t = 1)]
    links: u32,
    /// Bytes per snapshot packet.
    #[arg(long, default_value_t = 200)]
    packet_bytes: usize,
    /// Seed for the link's random fates.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Policies to compare, comma-separated (`fixed:3,adaptive:0.1%`); the default is the
    /// same set as `run --interpolation-sweep`.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    #[command(flatten)]
    playback: PlaybackArgs,
    /// Hide the progress bar.
    #[arg(long)]
    no_progress: bool,
}

#[derive(Args)]
struct BenchPlaybackArgs {
    /// Network profile (see `lagless profiles`).
    #[arg(long, default_value = "snapshot-demo")]
    profile: String,
    /// Snapshots per second (ticks and frames run at 60 Hz).
    #[arg(long, default_value_t = 60)]
    snapshot_hz: u32,
    /// Simulated seconds timed, after a minute of warm-up.
    #[arg(long, default_value_t = 300.0)]
    seconds: f64,
    /// Seed for the link's random fates.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Policies to time, comma-separated; `fixed:3` is always timed first, as the
    /// baseline.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "adaptive:1%,adaptive:0.04%"
    )]
    policies: Vec<String>,
    #[command(flatten)]
    playback: PlaybackArgs,
}

/// Playback options shared by every command that runs interpolation buffers. Each left
/// out keeps the command's default: the core's, or the scene's for `run` (the shooter
/// stretches; `RunConfig::for_scene`).
#[derive(Args)]
struct PlaybackArgs {
    /// How much adaptive buffers slow playback down while a snapshot is overdue
    /// (0.5: to half speed; 0: never) [default: 0; the shooter 0.5].
    #[arg(long, value_parser = parse_slowdown)]
    max_stretch: Option<f32>,
    /// When the next snapshot counts as overdue, so that adaptive buffers may stretch:
    /// once it is later than this share of arrivals, plus a send interval (0.9: nine in
    /// ten; 1: the slowest). Earlier buys less delay for more frames in slow motion
    /// [default: 0.9].
    #[arg(long, value_parser = parse_overdue)]
    overdue_quantile: Option<f32>,
    /// Arrivals the buffers' clock and delay statistics look back over. Longer windows
    /// give adaptive buffers steadier delays on bursty links and cost more per arrival;
    /// drift is followed more slowly, clear changes of link as fast (`--shift-window`)
    /// [default: 512; the shooter 2048].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    history: Option<usize>,
    /// Recent arrivals adaptive buffers watch for a change of link: when they needed far
    /// more lag, came far later or lost far more than the window's earlier ones, the
    /// delay follows the arrivals since the change at once; when they came far faster
    /// (or far fewer were lost lately), the window forgets the old link. 0 turns the
    /// watch off [default: 32].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=4096))]
    shift_window: Option<usize>,
    /// How far adaptive buffers may slow playback down to reach the longer delay a link
    /// that got worse needs, once they have seen it (0.5: to half speed; 0: no further
    /// than any change of delay) [default: 0.5].
    #[arg(long, value_parser = parse_slowdown)]
    shift_slowdown: Option<f32>,
}

impl PlaybackArgs {
    /// The core's defaults with the options given laid over them.
    fn settings(&self) -> lagless_lab::playback::PlaybackSettings {
        self.settings_over(lagless_lab::playback::PlaybackSettings::default())
    }

    /// `base` with the options given laid over it.
    fn settings_over(
        &self,
        base: lagless_lab::playback::PlaybackSettings,
    ) -> lagless_lab::playback::PlaybackSettings {
        lagless_lab::playback::PlaybackSettings {
            max_stretch: self.max_stretch.unwrap_or(base.max_stretch),
            overdue_quantile: self.overdue_quantile.unwrap_or(base.overdue_quantile),
            history: self.history.unwrap_or(base.history),
            shift_window: self.shift_window.unwrap_or(base.shift_window),
            shift_slowdown: self.shift_slowdown.unwrap_or(base.shift_slowdown),
        }
    }
}

/// Network options on top of a profile, shared by every command that emulates a link.
#[derive(Args)]
struct NetArgs {
    /// Override: one-way delay in ms.
    #[arg(long)]
    delay_ms: Option<f64>,
    /// Override: jitter in ms (std dev, or half-range for uniform profiles).
    #[arg(long)]
    jitter_ms: Option<f64>,
    /// Override: loss in percent (bursty profiles keep their burst length).
    #[arg(long)]
    loss_pct: Option<f64>,
    /// Override: duplication in percent.
    #[arg(long)]
    dup_pct: Option<f64>,
    /// Override: reordering in percent.
    #[arg(long)]
    reorder_pct: Option<f64>,
    /// Override: bandwidth cap in kbit/s.
    #[arg(long)]
    bandwidth_kbps: Option<u32>,
    /// Queue size in bytes for the bandwidth cap.
    #[arg(long)]
    queue_bytes: Option<usize>,
    /// Mahimahi delivery trace for the server -> client direction.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Mahimahi delivery trace for the client -> server direction.
    #[arg(long)]
    trace_up: Option<PathBuf>,
    /// Queue limit in packets while waiting for trace opportunities.
    #[arg(long)]
    trace_queue: Option<usize>,
    /// Switch the link to a named profile part-way through, e.g. `60:mobile` (repeat in
    /// time order; the overrides above shape only the starting link). A change may
    /// override its profile's `delay-ms`, `jitter-ms`, `loss-pct`, `dup-pct` and
    /// `reorder-pct`: `120:snapshot-demo,loss-pct=0` is the same link without its losses.
    /// `@up` or `@down` at the end changes one direction only (`60:mobile@down`).
    #[arg(long = "link-change", value_name = "SECONDS:PROFILE[,KEY=VALUE]", value_parser = LinkChange::parse)]
    link_changes: Vec<LinkChange>,
}

impl NetArgs {
    /// The overrides, with the trace file read.
    fn overrides(&self) -> Result<NetOverrides, String> {
        let trace = match &self.trace {
            Some(p) => {
                Some(Trace::from_file(p).map_err(|e| format!("trace {}: {e}", p.display()))?)
            }
            None => None,
        };
        let trace_up = match &self.trace_up {
            Some(p) => {
                Some(Trace::from_file(p).map_err(|e| format!("trace {}: {e}", p.display()))?)
            }
            None => None,
        };
        Ok(NetOverrides {
            delay_ms: self.delay_ms,
            jitter_ms: self.jitter_ms,
            loss_pct: self.loss_pct,
            duplicate_pct: self.dup_pct,
            reorder_pct: self.reorder_pct,
            bandwidth_kbps: self.bandwidth_kbps,
            queue_bytes: self.queue_bytes,
            trace,
            trace_up,
            trace_queue_packets: self.trace_queue,
        })
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum MissingInputArg {
    /// Apply no input (the player waits).
    Hold,
    /// Repeat the last input, however long it is missing.
    Repeat,
    /// The game's guess from the last input (repeated a few ticks, then let go), told to
    /// the client so its replay matches.
    Guess,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    /// The seeded emulator on a virtual clock.
    Emulator,
    /// Real UDP sockets on loopback, in real time (through a proxy applying the profile,
    /// unless the profile is `loopback`).
    Udp,
}

#[derive(Args)]
struct RunArgs {
    /// Scene to run: `cubes` (900 cubes pushed around) or `rocket` (cars and a server-owned
    /// ball in an arena; see `--ball`, `--remote-cars`; its metrics `ball.*` are in
    /// docs/metrics.md).
    #[arg(long, default_value = "cubes")]
    scene: String,
    /// Network profile (see `lagless profiles`; with `--transport udp` also `loopback`).
    #[arg(long, default_value = "mobile")]
    profile: String,
    /// What carries the packets.
    #[arg(long, value_enum, default_value = "emulator")]
    transport: TransportArg,
    /// With `--transport udp`: at this many seconds of play every client changes
    /// networks (a new socket and port, a fresh token) and resumes its place; reports
    /// `switch.*` (docs/metrics.md).
    #[arg(long, value_name = "SECS")]
    switch_at: Option<f64>,
    /// Simulated seconds.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Seed for every random choice (network fates, scripts).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of clients.
    #[arg(long, default_value_t = 1)]
    clients: u32,
    /// Threads the server encodes the clients' snapshots on (default: every core; 1:
    /// one after the other). The same bytes whatever the count.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// Write the metrics as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the first client's run over time (own-player error, interpolation delay,
    /// input delay, downlink) as an SVG image to this file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Write the first client's run over time (the `--plot` series, and the snapshot
    /// budget) as JSON to this file, for analysis.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Print every metric (by default: a short report of how the game felt, bandwidth
    /// and server cost).
    #[arg(long)]
    all: bool,
    /// Input script driving the players (cubes: roam, pattern; rocket: chase, which
    /// `roam` also selects).
    #[arg(long, default_value = "roam")]
    script: String,
    /// Snapshots per second (at most the tick rate; default the tick rate).
    #[arg(long)]
    snapshot_hz: Option<u32>,
    /// Simulation ticks per second (default 64; the shooter's 30, the Pixonic shooter
    /// article's rate).
    #[arg(long)]
    tick_hz: Option<u32>,
    /// How far ahead of the server the client runs (its input buffer at the server):
    /// `felt` (the lead of least felt cost: a tick of lead against a late input's
    /// misprediction, as the client measures them; 0.1-10% of ticks starved), `felt:MAX%`,
    /// `adaptive` (the least lead that keeps `server.input_starved_pct` at 0.5%),
    /// `adaptive:P%`, `fixed:N` (N ticks beyond RTT/2), or the peers' rules `lightyear`
    /// (RTT/2 + 4 jitter + 1 tick, from pings) and `unity` (command age fed back).
    /// Default: `felt`; the shooter's `felt:20%` (a late shot still fires there).
    #[arg(long, value_parser = lagless_lab::input_buffer::parse_lead_policy)]
    input_buffer: Option<LeadPolicy>,
    /// The older fixed form: N ticks of input buffered at the server beyond the one-way
    /// delay, plus one RTT deviation (overrides `--input-buffer`).
    #[arg(long)]
    input_buffer_ticks: Option<f64>,
    /// An outage of every client's link: `START:SECS[:up|down|both][:hold|drop]` (both
    /// directions, packets held until the link returns, unless named). Repeatable.
    #[arg(long = "outage", value_name = "START:SECS[:DIR][:MODE]", value_parser = lagless_lab::input_buffer::OutageSpec::parse)]
    outages: Vec<lagless_lab::input_buffer::OutageSpec>,
    /// What the server does when a client's input is missing.
    #[arg(long, value_enum, default_value = "guess")]
    missing_input: MissingInputArg,
    #[command(flatten)]
    net: NetArgs,
    /// Most snapshot payload per client, kbit/s (the budget adapts below it to the link,
    /// backing off when it queues or loses); 0: no budget.
    #[arg(long, default_value_t = 256.0)]
    budget_kbps: f64,
    /// Distance (m) at which an entity's priority for a client halves, measured from the
    /// client's player: the nearer, the sooner it is sent when the budget is short.
    #[arg(long, default_value_t = lagless_replication::ReplicationConfig::default().relevance_distance)]
    relevance_m: f32,
    /// How many times faster entities within the near distance (6 m) of the client's
    /// player gain priority when the budget is short; 1 turns the near field off.
    #[arg(long, default_value_t = lagless_replication::ReplicationConfig::default().near_boost)]
    near_boost: f32,
    /// Turn client-side prediction off (show the newest server state).
    #[arg(long)]
    no_prediction: bool,
    /// What the client predicts: the player and nearby cubes, or the whole world (the
    /// naive baseline).
    #[arg(long, value_enum, default_value = "set")]
    prediction_mode: PredictionModeArg,
    /// Predicted-set radius around the player's path, metres.
    #[arg(long)]
    predict_radius: Option<f32>,
    /// Most cubes predicted at once (bounds the cost of a reconciliation).
    #[arg(long)]
    predict_max_cubes: Option<usize>,
    /// Turn correction smoothing off (corrections show at once).
    #[arg(long)]
    no_smoothing: bool,
    /// Half-life of the correction smoothing, ms.
    #[arg(long, default_value_t = 110.0)]
    smoothing_half_life_ms: f64,
    /// How long into a link interruption the client still predicts the player's own
    /// inputs, ms, or `off` to predict on blind (default: the library's, 250).
    #[arg(long, value_name = "MS|off")]
    prediction_horizon: Option<String>,
    /// Silence from the server that counts as an interrupted link, ms (default: the
    /// library's, 500).
    #[arg(long, value_name = "MS")]
    interrupted_after_ms: Option<u64>,
    /// Every Nth rollback, also time a naive full-world restore and replay (0: never).
    #[arg(long, default_value_t = 8)]
    naive_sample: u32,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Delay policy for showing the other players (with two or more clients): `adaptive`
    /// (1% underrun target), `adaptive:P%`, `felt` (the underrun target of least felt
    /// cost, a tick of delay against the others' jump when an underrun ends, as the
    /// client measures them; at most 8%), `felt:MAX%`, or `fixed:N` send intervals
    /// [default: adaptive; the shooter adaptive:2.75%, stretching].
    #[arg(long, value_parser = lagless_lab::playback::parse_policy)]
    interpolation: Option<DelayPolicy>,
    #[command(flatten)]
    playback: PlaybackArgs,
    /// Also replay the other players' snapshot arrivals through a range of fixed and
    /// adaptive delay policies and print their delay and underruns side by side (needs
    /// two or more clients).
    #[arg(long)]
    interpolation_sweep: bool,
    /// Scene rocket: how each client shows the ball. `predicted`: simulated forward with
    /// its own car, so the car hits the future ball (the Unity "predict the ball"
    /// article); `interpolated`: shown in the past from snapshots, what the car collides
    /// with on the client (the failure that article starts from).
    #[arg(long, value_enum, default_value = "predicted")]
    ball: EntityPolicyArg,
    /// Scene rocket: how each client shows the other cars. `predicted`: from the keys the
    /// server last saw them drive with, fading to neutral over 150 ms (Rocket League);
    /// `interpolated`: shown in the past from snapshots.
    #[arg(long, value_enum, default_value = "predicted")]
    remote_cars: EntityPolicyArg,
    /// Scene rocket, with `--remote-cars predicted`: over how many ms another car's last
    /// known keys fade to neutral (0: it coasts on its velocity alone; `inf`: its keys
    /// are held).
    #[arg(long, default_value_t = 150.0)]
    remote_input_decay_ms: f64,
    /// Walker scene: scripted walkers the server simulates.
    #[arg(long, default_value_t = 200)]
    walkers: u32,
    /// Walker scene: how the walkers reach clients (dead reckoning, or snapshots shown
    /// through the interpolation buffer).
    #[arg(long, value_enum, default_value = "deadreckoning")]
    walker_sync: WalkerSyncArg,
    /// Walker scene: how dead-reckoned walkers are steered onto each message (the
    /// character-sync article's arrive, or projective velocity blending).
    #[arg(long, value_enum, default_value = "arrive")]
    steering: SteeringArg,
    /// Walker scene: the most of each client's snapshot budget the dead-reckoning
    /// messages may take, 0 to 1 (they wait by their own priority within it), or `off`
    /// (the default): sent beside the budget, uncounted.
    #[arg(long, default_value = "off")]
    dr_budget_share: String,
    /// Walker scene: arrive's steering time for moving messages, ms (default: each
    /// message's own sync interval, as the character-sync article steers).
    #[arg(long)]
    steer_ms: Option<u64>,
    /// Shooter scene: test rifle shots in the server's present instead of the world the
    /// shooter saw (the baseline without lag compensation).
    #[arg(long)]
    no_lag_compensation: bool,
    /// Shooter scene: client 1 claims a view this many ms older than it shows (the
    /// faked-ping attack; the server clamps it to its measured latency plus the window,
    /// or to the bare window with `--lagcomp-window absolute`, and counts it).
    #[arg(long, default_value_t = 0.0)]
    lie_rewind_ms: f64,
    /// Shooter scene: the trusted window of lag compensation, ms (Overwatch's 250 by
    /// default; Source's `sv_maxunlag` is 1000).
    #[arg(long, default_value_t = 250.0)]
    lagcomp_window_ms: f64,
    /// Shooter scene: whether the window is measured from the server's present
    /// (`absolute`) or from the latency the server measured for the shooter
    /// (`relative`: round trip, input lead, two snapshot intervals, capped at 1 s).
    #[arg(long, value_enum, default_value_t = LagcompWindowArg::Relative)]
    lagcomp_window: LagcompWindowArg,
    /// Shooter scene: the arena is N × N standard 32 m arenas (room for a large match).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    arena_tiles: u32,
    /// Spatial cells of this size, m: each client is sent only what lies in the cells
    /// within `--interest-m` of its player (default: no cells, everything).
    #[arg(long, value_name = "M")]
    cells_m: Option<f32>,
    /// With `--cells-m`: how far around its player a client's interest reaches, m
    /// (default 24: the shooter bots' firing range).
    #[arg(long, value_name = "M", default_value_t = 24.0)]
    interest_m: f32,
}

/// `--lagcomp-window`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LagcompWindowArg {
    /// `[now - window, now]`: every claim older than the window is clamped.
    Absolute,
    /// `[now - allowance - window, now]`, the allowance measured by the server.
    Relative,
}

#[derive(Clone, Copy, ValueEnum)]
enum WalkerSyncArg {
    /// Dead reckoning (momentum changes, sync clock, predicted point).
    Deadreckoning,
    /// Ordinary snapshots and the interpolation buffer.
    Interpolation,
}

#[derive(Clone, Copy, ValueEnum)]
enum SteeringArg {
    /// Arrive at the predicted point as the interval ends (the article's).
    Arrive,
    /// Projective velocity blending.
    Pvb,
}

#[derive(Clone, Copy, ValueEnum)]
enum EntityPolicyArg {
    /// Simulated ahead with the own player.
    Predicted,
    /// Shown in the past, from snapshots.
    Interpolated,
}

impl EntityPolicyArg {
    fn policy(self) -> lagless_scenes::rocket::predict::Policy {
        match self {
            EntityPolicyArg::Predicted => lagless_scenes::rocket::predict::Policy::Predicted,
            EntityPolicyArg::Interpolated => lagless_scenes::rocket::predict::Policy::Interpolated,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum PredictionModeArg {
    /// The player and the cubes near its path.
    Set,
    /// Every body in the world.
    Full,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Profiles) => {
            print_profiles();
            Ok(())
        }
        Some(Command::Run(args)) => run_command(*args),
        Some(Command::BenchReconcile { reps }) => {
            let bar = ProgressBar::new(12);
            let rows = lagless_lab::bench::bench_reconcile(reps.max(1), &mut |k, _| {
                bar.set_position(k as u64)
            });
            bar.finish_and_clear();
            print!("{}", lagless_lab::bench::format_rows(&rows));
            Ok(())
        }
        Some(Command::BenchSnapshot {
            clients: Some(clients),
            ticks,
            cold,
            threads,
            cells,
            interest_m,
            ..
        }) => {
            let threads = threads.map_or_else(lagless_replication::available_threads, usize::from);
            let bench = |cells| {
                lagless_lab::bench_snapshot::bench_encode_clients(
                    clients.max(1),
                    ticks.max(1),
                    cold,
                    threads,
                    cells,
                )
            };
            let b = bench(None);
            print!("{}", lagless_lab::bench_snapshot::format_many_clients(&b));
            if let Some(size) = cells {
                let cells = lagless_replication::CellConfig {
                    size,
                    radius: interest_m.unwrap_or(size),
                };
                let on = bench(Some(cells));
                println!();
                print!("{}", lagless_lab::bench_snapshot::format_many_clients(&on));
                println!();
                print!("{}", lagless_lab::bench_snapshot::format_cells(&b, &on));
            }
            Ok(())
        }
        Some(Command::BenchSnapshot { reps, .. }) => {
            let bar = ProgressBar::new(8);
            let rows = lagless_lab::bench_snapshot::bench_snapshot(reps.max(1), &mut |k, n| {
                bar.set_length(n as u64);
                bar.set_position(k as u64)
            });
            bar.finish_and_clear();
            print!(
                "{}",
                lagless_lab::bench_snapshot::format_snapshot_rows(&rows)
            );
            Ok(())
        }
        Some(Command::BenchPlayback(args)) => bench_playback_command(*args),
        Some(Command::SweepPlayback(args)) => sweep_command(*args),
        Some(Command::SweepInput(args)) => sweep_input_command(*args),
        Some(Command::Keygen { out }) => net_commands::keygen(&out),
        Some(Command::Token(args)) => net_commands::token(&args),
        Some(Command::Serve(args)) => net_commands::serve(&args),
        Some(Command::Connect(args)) => net_commands::connect(&args),
        Some(Command::Proxy(args)) => net_commands::proxy(&args),
        Some(Command::Flood(args)) => net_commands::flood(&args),
        Some(Command::View(args)) => view_command(args),
        None => run_command(RunArgs::parse_from(["run"])),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--max-stretch` and `--shift-slowdown`: a fraction of real time from 0 to the core's
/// [`MAX_STRETCH`].
fn parse_slowdown(text: &str) -> Result<f32, String> {
    parse_within(text, 0.0..=MAX_STRETCH, || {
        format!(
            "a slow-down is the fraction of real time taken off, from 0 (none) to {MAX_STRETCH}"
        )
    })
}

/// `--overdue-quantile`: a share of arrivals from the core's [`MIN_OVERDUE_QUANTILE`] to 1.
fn parse_overdue(text: &str) -> Result<f32, String> {
    parse_within(text, MIN_OVERDUE_QUANTILE..=1.0, || {
        format!("the overdue moment is a share of arrivals from {MIN_OVERDUE_QUANTILE} to 1")
    })
}

/// A number within `range`, or an error quoting `text` and saying what the range `means`.
fn parse_within(
    text: &str,
    range: std::ops::RangeInclusive<f32>,
    means: impl Fn() -> String,
) -> Result<f32, String> {
    let v: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(format!("{text:?}: {}", means()))
    }
}

/// A progress bar over `len` steps of simulated time, drawn unless `hidden`.
fn simulation_bar(len: u64, hidden: bool) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if hidden {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn sweep_command(a: SweepArgs) -> Result<(), String> {
    use lagless_lab::link_replay::{ReplayConfig, replay};
    use lagless_lab::playback::{format_sweep, parse_policy, sweep_policies};
    let base = named_profile(&a.profile)?;
    let (_, link) = a.net.overrides()?.apply(&base);
    let mut policies = a
        .policies
        .iter()
        .map(|p| parse_policy(p))
        .collect::<Result<Vec<_>, _>>()?;
    if policies.is_empty() {
        policies = sweep_policies();
    }
    if !policies.contains(&DelayPolicy::CLASSIC) {
        // The table's cuts are against the classic buffer.
        policies.insert(0, DelayPolicy::CLASSIC);
    }
    let config = ReplayConfig {
        link,
        link_changes: a.net.link_changes.clone(),
        tick_hz: a.tick_hz,
        snapshot_hz: a.snapshot_hz,
        frame_hz: a.frame_hz,
        seconds: a.seconds,
        links: a.links,
        seed: a.seed,
        packet_bytes: a.packet_bytes,
        playback: a.playback.settings(),
        ..ReplayConfig::default()
    };
    let total = a.seconds * f64::from(a.links);
    let bar = simulation_bar(total.ceil().max(0.0) as u64, a.no_progress);
    eprintln!(
        "lagless: {} policies over {} x {} s of {} at {} snapshots/s, seed {}",
        policies.len(),
        a.links,
        a.seconds,
        a.profile,
        a.snapshot_hz,
        a.seed
    );
    let figures = replay(&config, &policies, &mut |t| {
        bar.set_position(t as u64);
        bar.set_message(format!("{t:.0} / {total:.0} s simulated"));
    })
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    if figures.phases.is_empty() {
        print!("{}", format_sweep(&figures.overall));
        return Ok(());
    }
    for phase in &figures.phases {
        let profile = phase.change.as_ref().map_or(&a.profile, |c| &c.profile);
        println!(
            "{} s to {} s: {profile}",
            phase.from.as_secs_f64(),
            phase.to.as_secs_f64()
        );
        println!("{}", format_sweep(&phase.figures));
    }
    println!("whole replay");
    print!("{}", format_sweep(&figures.overall));
    Ok(())
}

fn sweep_input_command(a: SweepInputArgs) -> Result<(), String> {
    use lagless_lab::input_buffer::parse_lead_policy;
    use lagless_lab::sweep_input::{
        InputSweepConfig, default_policies, format_comparison, format_input_sweep, sweep,
    };
    let base = named_profile(&a.profile)?;
    let (link, _) = a.net.overrides()?.apply(&base);
    let mut policies = a
        .policies
        .iter()
        .map(|p| parse_lead_policy(p))
        .collect::<Result<Vec<_>, _>>()?;
    if policies.is_empty() {
        policies = default_policies();
    }
    let config = InputSweepConfig {
        link,
        link_changes: a.net.link_changes.clone(),
        outages: a.outages,
        tick_hz: a.tick_hz,
        seconds: a.seconds,
        seed: a.seed,
        snapshot_bytes: a.snapshot_bytes,
        warmup: a.warmup,
    };
    eprintln!(
        "lagless: {} lead policies over {} s of {}, seed {}",
        policies.len(),
        a.seconds,
        a.profile,
        a.seed
    );
    let s = sweep(&config, &policies).map_err(|e| e.to_string())?;
    if s.phases.len() > 1 {
        for (k, (from, figs)) in s.phases.iter().enumerate() {
            let profile = k
                .checked_sub(1)
                .and_then(|i| a.net.link_changes.get(i))
                .map_or(a.profile.as_str(), |c| c.profile.as_str());
            println!("from {} s: {profile}", from.as_secs_f64());
            println!("{}", format_input_sweep(figs));
        }
        println!("whole replay");
    }
    print!("{}", format_input_sweep(&s.overall));
    println!();
    print!("{}", format_comparison(&s.overall));
    Ok(())
}

fn bench_playback_command(a: BenchPlaybackArgs) -> Result<(), String> {
    use lagless_lab::bench_playback::{PlaybackBenchConfig, bench_playback, format_playback_rows};
    use lagless_lab::link_replay::ReplayConfig;
    use lagless_lab::playback::parse_policy;
    let link = named_profile(&a.profile)?;
    let mut policies = vec![DelayPolicy::CLASSIC];
    for p in &a.policies {
        let p = parse_policy(p)?;
        if !policies.contains(&p) {
            policies.push(p);
        }
    }
    const WARM_UP_SECS: f64 = 60.0;
    let config = PlaybackBenchConfig {
        replay: ReplayConfig {
            link,
            snapshot_hz: a.snapshot_hz,
            seconds: WARM_UP_SECS + a.seconds,
            seed: a.seed,
            playback: a.playback.settings(),
            ..ReplayConfig::default()
        },
        warm_up_secs: WARM_UP_SECS,
        policies,
    };
    let bar = ProgressBar::new(config.policies.len() as u64);
    let rows = bench_playback(&config, &mut |k, _| bar.set_position(k as u64))
        .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    println!(
        "interpolation buffer, {} at {} snapshots/s, {} s timed, seed {}",
        a.profile, a.snapshot_hz, a.seconds, a.seed
    );
    print!("{}", format_playback_rows(&rows));
    Ok(())
}

impl RunArgs {
    fn parse_from<I: IntoIterator<Item = &'static str>>(args: I) -> RunArgs {
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            run: RunArgs,
        }
        Wrapper::parse_from(args).run
    }
}

fn print_profiles() {
    println!(
        "{:<14} {:>9} {:>24} {:>36}",
        "profile", "delay", "jitter", "loss"
    );
    for name in PROFILE_NAMES {
        if let Some(c) = profile(name) {
            println!(
                "{:<14} {:>7}ms {:>24} {:>36}",
                name,
                c.delay.as_millis(),
                format!("{:?}", c.jitter),
                format!("{:.1}% {}", c.loss.mean_loss() * 100.0, loss_kind(&c.loss))
            );
        }
    }
}

fn loss_kind(l: &lagless_netem::Loss) -> &'static str {
    match l {
        lagless_netem::Loss::None => "",
        lagless_netem::Loss::Uniform { .. } => "uniform",
        lagless_netem::Loss::GilbertElliott(_) => "bursty",
    }
}
