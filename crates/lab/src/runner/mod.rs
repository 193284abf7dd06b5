//! Runs a scene's server and clients in one process over the emulated network on a
//! virtual clock, and measures the run.
//!
//! [`run`] checks the settings, builds the world, and steps it on the virtual clock; each
//! step moves packets up, ticks the server, moves packets down and runs every client
//! (`client.rs`); at the end the measurements become a [`Report`] (`report.rs`).

pub(crate) mod client;
pub(crate) mod game;
pub(crate) mod link_report;
pub(crate) mod report;

use crate::config::RunConfig;
use crate::cpu::CpuTimer;
use crate::input_buffer::SyncProbe;
use crate::metrics::Report;
use crate::playback::{PolicyFigures, PolicyShadows};
use crate::remote_view::Track;
use crate::replication::SnapshotSender;
use crate::scene::{LabScene, PlayerId, RawEntity};
use client::{ClientSim, Truth, pos};
use lagless_core::{ClientId, ClientStats, ServerClientStats, Tick, TickInputs};
use lagless_netem::{ConfigError, Duplex, LinkConfig, PROFILE_NAMES, derive_seed, profile};
use lagless_replication::Server;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Per-packet UDP/IP header bytes counted in bandwidth figures (`docs/metrics.md`).
pub const UDP_IP_HEADER_BYTES: u64 = 28;

/// Why a run could not start.
#[derive(Debug, Error)]
pub enum RunError {
    /// The scene name is not known.
    #[error("unknown scene {0:?} (known: {known})", known = crate::scenes::SCENES.join(", "))]
    UnknownScene(String),
    /// The profile name is not known.
    #[error("unknown network profile {0:?} (known: {known})", known = PROFILE_NAMES.join(", "))]
    UnknownProfile(String),
    /// The script name is not known (the message lists the scene's).
    #[error("unknown script {0}")]
    UnknownScript(String),
    /// The network settings are invalid.
    #[error("invalid network settings: {0}")]
    Net(#[from] ConfigError),
    /// Some other setting is out of range.
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// What a run produced: the report plus final states, for tests and tools.
pub struct RunOutcome {
    /// The metrics.
    pub report: Report,
    /// Every entity's final authoritative state on the server, in full precision.
    pub server_state: Vec<RawEntity>,
    /// The server's counters per client.
    pub server_stats: Vec<(ClientId, ServerClientStats)>,
    /// Each client's counters.
    pub client_stats: Vec<ClientStats>,
    /// The server tick reached.
    pub final_tick: Tick,
    /// Real time the run took.
    pub wall: Duration,
    /// Per policy in [`RunConfig::interpolation_shadows`], its figures on the same
    /// arrivals and frames as the real interpolation buffer (empty with one client).
    pub interpolation_shadows: Vec<PolicyFigures>,
    /// The first client's run over time, for `--plot`.
    pub timeline: crate::timeline::Timeline,
}

/// Runs `config` (its scene by name, [`crate::scenes`]), calling `progress` with the
/// simulated seconds elapsed now and then.
pub fn run(config: &RunConfig, progress: &mut dyn FnMut(f64)) -> Result<RunOutcome, RunError> {
    crate::scenes::run_named(config, progress)
}

/// Runs `config` on scene `S`, calling `progress` with the simulated seconds elapsed now
/// and then.
pub fn run_scene<S: LabScene>(
    config: &RunConfig,
    progress: &mut dyn FnMut(f64),
) -> Result<RunOutcome, RunError> {
    let mut sim = Sim::<S>::new(config)?;
    let wall_start = Instant::now();
    let end = Duration::from_secs_f64(config.seconds);
    let mut now = Duration::ZERO;
    let mut next_progress = Duration::ZERO;
    let mut changes = config.link_changes.iter().peekable();
    while now <= end {
        while let Some(change) = changes.next_if(|c| c.at <= now) {
            for c in &mut sim.clients {
                change.apply_to(&mut c.link)?;
            }
        }
        sim.step(now)?;
        if now >= next_progress {
            progress(now.as_secs_f64());
            next_progress += Duration::from_millis(100);
        }
        now += config.clock_step;
    }
    progress(config.seconds);
    let wall = wall_start.elapsed();
    let (report, shadows) = sim.report(wall);
    Ok(sim.outcome(report, wall, shadows))
}

/// What one server tick cost, CPU ms (every thread's, when the server encodes on more
/// than one), and wall ms.
pub(crate) struct TickCost {
    /// All of it: the step, the characters' senders, capture and encoding.
    pub(crate) tick_ms: f64,
    /// The same in wall time.
    pub(crate) wall_ms: f64,
    /// The scene's step.
    pub(crate) physics_ms: f64,
    /// Capture and encoding, on a snapshot tick.
    pub(crate) encode_ms: Option<f64>,
}

/// What a server step is given: each client's session id and player, the tick's inputs,
/// and the time.
pub(crate) type StepOf<'a, I> = (&'a [(ClientId, PlayerId)], &'a TickInputs<I>, Duration);

/// One tick of a scene's server as a game runs it, for the emulator run and `lagless
/// serve` alike: each client's input to its player (`clients`: session id and player),
/// the latency the server measured handed to the scene (lag compensation trusts nothing
/// a client claims), the step, the characters' senders, and on a snapshot tick the
/// snapshots (the peer's stream counted outside the server's time). `characters` is
/// left holding the characters after the step.
pub(crate) fn server_step<S: LabScene>(
    scene: &mut S,
    server: &mut Server<S::Input>,
    sender: &mut SnapshotSender<S>,
    (clients, step, now): StepOf<'_, S::Input>,
    characters: &mut Vec<(u32, lagless_replication::deadreckoning::CharacterState)>,
) -> (TickCost, Result<(), crate::replication::SendError>) {
    let threads = server.replication().config().threads;
    let started = CpuTimer::start_for(threads);
    let player_of = |id: &ClientId| clients.iter().find(|(c, _)| c == id).map(|(_, p)| *p);
    let inputs: Vec<(PlayerId, S::Input)> = step
        .inputs
        .iter()
        .filter_map(|(id, input)| Some((player_of(id)?, (*input)?)))
        .collect();
    for &(id, player) in clients {
        if let Some(latency) = server.latency(id) {
            scene.server_latency(player, latency);
        }
    }
    let late: Vec<(PlayerId, Tick, S::Input)> = step
        .late
        .iter()
        .filter_map(|&(id, tick, input)| Some((player_of(&id)?, tick, input)))
        .collect();
    if !late.is_empty() {
        scene.late_inputs(&late);
    }
    scene.step_at(step.tick, &inputs);
    let physics_ms = started.ms();
    // The characters' senders are the server's work: timed with the tick.
    characters.clear();
    scene.characters(characters);
    sender.update_characters(server, characters);
    let mut encode_ms = None;
    let mut sent = Ok(());
    let mut peer_ms = 0.0;
    if server.snapshot_due() {
        // The peers' streams (the model, and replicon with `--features replicon`) are the
        // lab's measurement, not the server's work: left out of its time.
        let peer = CpuTimer::start();
        sender.count_peer(scene, clients.len());
        peer_ms = peer.ms();
        let encoding = CpuTimer::start_for(threads);
        sent = sender.send(scene, server, clients, now);
        encode_ms = Some(encoding.ms());
    }
    let cost = TickCost {
        tick_ms: started.ms() - peer_ms,
        wall_ms: started.wall_ms() - peer_ms,
        physics_ms,
        encode_ms,
    };
    (cost, sent)
}

/// Per client of `step`, whether its input was there (`None` before it started sending),
/// for the input-delay probe.
pub(crate) fn fed<I: lagless_core::Input>(
    server: &Server<I>,
    step: &TickInputs<I>,
) -> Vec<Option<bool>> {
    step.inputs
        .iter()
        .map(|(id, _)| {
            // A guessed input is not the client's: its own arrived too late or never.
            let fed = step.is_fed(*id);
            let started = server.client_stats(*id)?.ticks_with_input > 0;
            (started || fed).then_some(fed)
        })
        .collect()
}

/// The probe measuring recovery after every link change and every outage's end, told
/// when each trace outage's link is back in earnest.
fn recovery_probe(config: &RunConfig, tick_hz: u32) -> SyncProbe {
    let trace_ends: Vec<Duration> = trace_outages(config)
        .into_iter()
        .map(|(_, end)| end)
        .collect();
    let events = config
        .link_changes
        .iter()
        .map(|c| c.at)
        .chain(config.outages.iter().map(|o| o.outage.end()))
        .chain(trace_ends.iter().copied())
        .collect();
    let mut probe = SyncProbe::new(config.clients as usize, tick_hz, events);
    let run = Duration::from_secs_f64(config.seconds.clamp(0.0, 1e6));
    for end in trace_ends {
        probe.link_back(end, link_back(config, end, run));
    }
    probe
}

/// Longest hole a link that is back may still have: at 64 Hz, 19 ticks of inputs wait
/// behind it, more than a mobile lead holds.
const LINK_BACK_GAP: Duration = Duration::from_millis(300);

/// How long the link must then hold: the second play is given to resume, and the half
/// second of clean play that shows it has (`QUIET` in the probe). A link that fails
/// again sooner was never back for play to resume on.
const LINK_BACK_SPAN: Duration = Duration::from_millis(1500);

/// When, from `from`, both directions' traces have gone [`LINK_BACK_SPAN`] with no hole
/// longer than [`LINK_BACK_GAP`]: the link is back in earnest. `None` if not before
/// `until`.
fn link_back(config: &RunConfig, from: Duration, until: Duration) -> Option<Duration> {
    let traces: Vec<_> = [&config.net.trace, &config.net.trace_up]
        .into_iter()
        .flatten()
        .collect();
    let mut at = from;
    // Each direction's steady time is at or after `at`; repeat until both agree.
    loop {
        let mut latest = at;
        for t in &traces {
            latest = latest.max(t.steady_from(at, (LINK_BACK_GAP, LINK_BACK_SPAN), until)?);
        }
        if latest == at {
            return Some(at);
        }
        at = latest;
    }
}

/// A trace's gap this long counts as an outage (`net.trace_outages`): the cellular
/// traces' coverage holes, from one second to several.
const TRACE_OUTAGE: Duration = Duration::from_secs(1);

/// The outages of the run's trace files within the run, both directions, in time order;
/// overlapping ones (the two directions out at once) merged into one. A trace that
/// starts late has no outage there: the client is connecting, not resuming.
pub(crate) fn trace_outages(config: &RunConfig) -> Vec<(Duration, Duration)> {
    let run = Duration::from_secs_f64(config.seconds.clamp(0.0, 1e6));
    let mut all: Vec<_> = [&config.net.trace, &config.net.trace_up]
        .into_iter()
        .flatten()
        .flat_map(|t| t.outages(TRACE_OUTAGE, run))
        .filter(|(start, _)| !start.is_zero())
        .collect();
    all.sort();
    let mut merged: Vec<(Duration, Duration)> = Vec::new();
    for (start, end) in all {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Checks the settings, and finds the network profile.
fn check(config: &RunConfig) -> Result<LinkConfig, RunError> {
    let base =
        profile(&config.profile).ok_or_else(|| RunError::UnknownProfile(config.profile.clone()))?;
    if !(config.seconds > 0.0 && config.seconds <= 24.0 * 3600.0) {
        return Err(RunError::Invalid(format!(
            "seconds must be in (0, 86400], got {}",
            config.seconds
        )));
    }
    crate::config::check_link_changes(&config.link_changes, config.seconds)
        .map_err(RunError::Invalid)?;
    if config.clients == 0 || config.clients > 256 {
        return Err(RunError::Invalid(format!(
            "clients must be 1..=256, got {}",
            config.clients
        )));
    }
    let tick_hz = config.server.tick_hz;
    if config.client.tick_hz != tick_hz {
        return Err(RunError::Invalid(
            "client and server tick rates differ".into(),
        ));
    }
    if config.snapshot_hz == 0 || config.snapshot_hz > tick_hz {
        return Err(RunError::Invalid(format!(
            "snapshot rate must be 1..={tick_hz} Hz, got {}",
            config.snapshot_hz
        )));
    }
    Ok(base)
}

/// Everything a run simulates, and what it measured on the server side.
///
/// `lagless view` (`crate::view`) drives it too, one [`Sim::step`] at a time from a real
/// clock, which is why it and the fields the view reads are visible to the crate.
pub(crate) struct Sim<'a, S: LabScene> {
    pub(crate) config: &'a RunConfig,
    pub(crate) scene: S,
    /// The game's server, as a game runs it.
    pub(crate) server: Server<S::Input>,
    pub(crate) sender: SnapshotSender<S>,
    pub(crate) clients: Vec<ClientSim<S>>,
    /// Each client with the player it drives.
    client_players: Vec<(ClientId, PlayerId)>,
    player_index: BTreeMap<ClientId, usize>,
    /// Authoritative positions of every player and entity, indexed by state tick.
    pub(crate) auth: Truth,
    /// Scratch for the other entities' positions.
    others: Vec<[f32; 3]>,
    /// Server CPU per tick: all of it, the physics step, and capture plus encoding.
    tick_ms: Vec<f64>,
    /// Wall time per tick.
    tick_wall_ms: Vec<f64>,
    physics_ms: Vec<f64>,
    encode_ms: Vec<f64>,
    /// Lead, input delay and recovery (`sync.*`, `input.*`).
    probe: SyncProbe,
    /// Scratch for the walking characters' states.
    characters: Vec<(u32, lagless_replication::deadreckoning::CharacterState)>,
    /// Simulated seconds the report covers: the configured length, or as far as
    /// `lagless view`, which runs until stopped, has got.
    pub(crate) seconds: f64,
}

impl<'a, S: LabScene> Sim<'a, S> {
    /// Builds the scene, the server and one client (with its link) per player.
    pub(crate) fn new(config: &'a RunConfig) -> Result<Self, RunError> {
        let base = check(config)?;
        let (up_cfg, down_cfg) = config.net.apply(&base);
        let tick_hz = config.server.tick_hz;
        let (mut scene, setup) = S::build(config)?;
        let (sender, mut server) = SnapshotSender::<S>::new(setup.clone(), config)?;
        let mut clients = Vec::new();
        for k in 0..config.clients {
            let id = ClientId::from(k) + 1;
            let player = k + 1;
            server
                .connect(id)
                .map_err(|e| RunError::Invalid(e.to_string()))?;
            scene.add_player(player);
            let script_seed = derive_seed(config.seed, 1000 + u64::from(k));
            let script = S::script(config, &setup, script_seed)?;
            let mut link = Duplex::new(
                up_cfg.clone(),
                down_cfg.clone(),
                derive_seed(config.seed, u64::from(k)),
            )?;
            for o in &config.outages {
                link.add_outage(o.outage, o.direction);
            }
            clients.push(ClientSim::new(config, (id, player), link, script, &setup)?);
        }
        let mut characters = Vec::new();
        scene.characters(&mut characters);
        if !characters.is_empty() {
            let ids: Vec<u32> = characters.iter().map(|(id, _)| *id).collect();
            let slot = S::character_slot(&setup, config.clients);
            for c in &mut clients {
                c.watch_characters(ids.clone(), slot);
            }
        }
        let client_players = clients.iter().map(|c| (c.id, c.player)).collect();
        let player_index = clients.iter().enumerate().map(|(i, c)| (c.id, i)).collect();
        let mut others = Vec::new();
        scene.others(&mut others);
        let auth = Truth {
            players: clients
                .iter()
                .map(|c| Track::from(vec![pos(scene.player_position(c.player))]))
                .collect(),
            others: others.into_iter().map(|p| Track::from(vec![p])).collect(),
            characters: Default::default(),
            character_ids: characters.iter().map(|(id, _)| *id).collect(),
            epoch: None,
            probe: None,
        };
        let mut auth = auth;
        auth.characters
            .push(Duration::ZERO, characters.iter().map(|(_, s)| s.position));
        Ok(Self {
            config,
            scene,
            server,
            sender,
            clients,
            client_players,
            player_index,
            auth,
            others: Vec::new(),
            tick_ms: Vec::new(),
            tick_wall_ms: Vec::new(),
            physics_ms: Vec::new(),
            encode_ms: Vec::new(),
            probe: recovery_probe(config, tick_hz),
            characters,
            seconds: config.seconds,
        })
    }

    /// One step of the virtual clock: inputs up, server ticks, snapshots down, clients.
    pub(crate) fn step(&mut self, now: Duration) -> Result<(), RunError> {
        for c in &mut self.clients {
            while let Some(p) = c.link.up.poll(now) {
                // Rejected packets are counted by the session; nothing else to do.
                let _ = self.server.receive(c.id, now, &p);
            }
        }
        self.server.update(now);
        while let Some(step) = self.server.next_tick() {
            let (cost, sent) = server_step(
                &mut self.scene,
                &mut self.server,
                &mut self.sender,
                (&self.client_players, &step, now),
                &mut self.characters,
            );
            sent.map_err(|e| RunError::Invalid(format!("snapshot: {e}")))?;
            self.probe
                .server_tick(now, step.tick, &fed(&self.server, &step));
            let wrong: Vec<bool> = self
                .clients
                .iter()
                .map(|c| {
                    let applied = step.inputs.iter().find(|(id, _)| *id == c.id);
                    let own = c.session().input(step.tick);
                    // Another input than the player's own for this tick (a guess that
                    // differed, or none while it was acting).
                    matches!((applied, own), (Some((_, a)), Some(o)) if *a != Some(o))
                })
                .collect();
            self.probe.server_wrong(now, &wrong);
            self.encode_ms.extend(cost.encode_ms);
            self.physics_ms.push(cost.physics_ms);
            self.tick_ms.push(cost.tick_ms);
            self.tick_wall_ms.push(cost.wall_ms);
            // Measured outside the server's time: the lab looks at both ends.
            if self.server.snapshot_due() {
                let tick = self.server.current_tick().0;
                for c in &self.clients {
                    self.sender.measure_staleness(
                        self.server.replication(),
                        c.id,
                        c.registry(),
                        tick,
                    );
                }
            }
            for (i, c) in self.clients.iter().enumerate() {
                self.auth.players[i].push(pos(self.scene.player_position(c.player)));
            }
            let mut others = std::mem::take(&mut self.others);
            others.clear();
            self.scene.others(&mut others);
            for (track, p) in self.auth.others.iter_mut().zip(&others) {
                track.push(*p);
            }
            if !self.characters.is_empty() {
                let positions = self.characters.iter().map(|(_, s)| s.position);
                self.auth.characters.push(now, positions);
            }
            self.others = others;
            self.scene.observe();
        }
        while let Some((id, bytes)) = self.server.poll_transmit() {
            if let Some(&i) = self.player_index.get(&id) {
                self.clients[i].send_down(now, bytes);
            }
        }
        for (i, c) in self.clients.iter_mut().enumerate() {
            let before = c.session().current_tick();
            c.step(now, self.config, &self.auth);
            self.probe
                .client_stepped(i, (now, now), before, c.session());
        }
        Ok(())
    }

    /// The report of the run so far, `wall` of real time into it, with the shadow
    /// policies' figures it holds.
    pub(crate) fn report(&self, wall: Duration) -> (Report, Vec<PolicyFigures>) {
        let shadows = self.shadow_figures();
        let mut report = report::build(self, wall, &shadows);
        self.probe.fill(&mut report);
        link_report::fold_resume(&mut report);
        report::feel(&mut report, &self.clients);
        report.set(
            "sync.lead_policy",
            crate::metrics::Metric::Text(crate::input_buffer::lead_label(
                &self.config.client.sync.lead,
            )),
        );
        (report, shadows)
    }

    /// Sends a snapshot every `interval` server ticks from now on (`lagless view`'s
    /// snapshot-rate knob); clients learn the new rate from the ticks that arrive.
    pub(crate) fn set_snapshot_interval(&mut self, interval: u32) {
        self.server.set_snapshot_interval(interval);
    }

    /// Each shadow policy's figures, averaged over clients.
    fn shadow_figures(&self) -> Vec<PolicyFigures> {
        let sets: Vec<&PolicyShadows> = self.clients.iter().map(|c| &c.shadows).collect();
        PolicyShadows::mean_figures(&sets)
    }

    /// The run's result: the report and the final states.
    fn outcome(self, report: Report, wall: Duration, shadows: Vec<PolicyFigures>) -> RunOutcome {
        let mut server_state = Vec::new();
        self.scene.raw(&mut server_state);
        RunOutcome {
            report,
            server_state,
            server_stats: self
                .clients
                .iter()
                .filter_map(|c| self.server.client_stats(c.id).map(|s| (c.id, s.clone())))
                .collect(),
            client_stats: self.clients.iter().map(|c| c.session().stats()).collect(),
            final_tick: self.server.current_tick(),
            wall,
            interpolation_shadows: shadows,
            timeline: self.timeline(),
        }
    }

    /// The first client's run over time.
    fn timeline(&self) -> crate::timeline::Timeline {
        let (Some(c), Some(track)) = (self.clients.first(), self.auth.players.first()) else {
            return Default::default();
        };
        let hz = f64::from(self.config.server.tick_hz);
        let render_error_cm = c
            .render_error_series(track)
            .into_iter()
            .map(|(tick, cm)| (f64::from(tick) / hz, cm))
            .collect();
        // Whole seconds only: the last, cut short by the run's end, would read as a drop.
        let whole = self.config.seconds.floor() as usize;
        let down_kbps = c
            .down_per_second
            .iter()
            .take(whole)
            .enumerate()
            .map(|(s, &bytes)| (s as f64 + 0.5, bytes as f64 * 8.0 / 1000.0))
            .collect();
        crate::timeline::Timeline {
            render_error_cm,
            interpolation_delay_ms: c.interpolation_delays.clone(),
            input_delay_ms: self.probe.input_delays(0).to_vec(),
            down_kbps,
            budget_kbps: self.sender.stats.budget_series.clone(),
        }
    }
}
