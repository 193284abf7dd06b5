//! `lagless connect`: one client of a scene in real time over UDP.
//!
//! After netcode.io accepts the token and the server's [`Control::Welcome`] names the
//! player, the client plays the same scripted input as in a lab run. By default it is the
//! lab's client (`ClientSim`: the public `Client`, and the lab's buffer of the others), whose
//! link is a pass-through `netem::Duplex` that the socket fills and drains, so nothing of
//! the client changes between the emulator and a real link. A *bot* is the same public
//! `Client` over a [`Spectator`] world: it decodes (and so acknowledges) snapshots, predicts
//! and draws nothing, and plays the script: many of them load a server as players would,
//! at a fraction of the CPU.

use super::{Control, SeqCounter, UdpRunError};
use crate::config::RunConfig;
use crate::cpu::CpuTimer;
use crate::metrics::Histogram;
use crate::replication::net_config;
use crate::runner::UDP_IP_HEADER_BYTES;
use crate::runner::client::{ClientSim, Truth, count_per_second};
use crate::scene::{LabScene, PlayerId, Script};
use lagless_core::{ClientSession, ClientStats, RttEstimator};
use lagless_netem::{Duplex, LinkConfig, derive_seed};
use lagless_replication::{Client, Spectator};
use lagless_transport::UdpClient;
use lagless_transport::session::Control as HostControl;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// What `lagless connect` needs beside the run settings (script, seed, prediction and
/// interpolation settings come from a [`RunConfig`]; tick and snapshot rates from the
/// server).
#[derive(Clone, Debug)]
pub struct ConnectSettings {
    /// The 2048-byte connect token.
    pub token: Vec<u8>,
    /// Seconds to play once welcomed.
    pub seconds: f64,
    /// Run a light bot instead of the lab's full client.
    pub bot: bool,
    /// A bot whose script is shown nothing: it decodes and acknowledges snapshots (a delta
    /// needs its baseline), so the server works as for a real client, but converts nothing
    /// for the script (use a script that needs nothing,
    /// such as `pattern`). To load a server with many players from one small machine.
    pub ack_only: bool,
    /// How long to wait for the connection and the welcome.
    pub connect_timeout: Duration,
    /// A change of network to make while playing (`run --transport udp --switch-at`).
    pub switch: Option<SwitchPlan>,
}

/// A change of network scripted into a client's run: at `at` seconds of play the
/// client's socket is replaced by a new one (a new local port: a new address, as a
/// phone moving from Wi-Fi to mobile data has) and the client connects again with a
/// fresh token, its game client kept as it was, as `GameClient::resume` does; the
/// server, with a resume grace, gives it its place back.
#[derive(Clone)]
pub struct SwitchPlan {
    /// Seconds into play.
    pub at: f64,
    /// A fresh connect token for the client's id (the runner issues it from its key).
    pub token: Arc<dyn Fn() -> Option<Vec<u8>> + Send + Sync>,
}

impl std::fmt::Debug for SwitchPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchPlan").field("at", &self.at).finish()
    }
}

/// What a client's network switch cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct SwitchFigures {
    /// From the new socket's first packet (its connection request) to the first server
    /// tick applied after it, ms; `None` if none came.
    pub back_ms: Option<f64>,
    /// The client's player entity is the same after the switch (id and generation) and
    /// the client did not start over.
    pub player_kept: bool,
}

/// Reliable messages the client numbered and the server echoed, both ways on the
/// session's message channel, checked for loss, duplicates and order (with a switch).
#[derive(Debug, Clone, Default)]
pub struct EchoFigures {
    /// Messages sent.
    pub sent: u64,
    /// Echoes back, in order.
    pub received: u64,
    /// Numbers skipped, or sent over 2 s before the end and never echoed.
    pub lost: u64,
    /// Echoes of a number already echoed, or out of order.
    pub duplicated: u64,
}

/// How often the client sends a numbered reliable message for the echo.
const ECHO_EVERY: Duration = Duration::from_millis(250);

/// An echo not back within this long of the end counts as lost, not in flight.
const ECHO_IN_FLIGHT: Duration = Duration::from_secs(2);

/// The server's latest [`Control::Link`] report.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkFigures {
    /// Session packets the client sent, as the server counts them by sequence number.
    pub up_expected: u64,
    /// Of those, received.
    pub up_received: u64,
    /// Session packets the server sent.
    pub down_sent: u64,
    /// Their bytes, with headers.
    pub down_bytes: u64,
    /// Since the client connected, s.
    pub seconds: f64,
}

/// A light client: the public client over a world that predicts nothing, and the script.
pub struct Bot<S: LabScene> {
    /// The client (it acknowledges what it decodes).
    pub client: Client<Spectator<S::Input>>,
    setup: S::Setup,
    script: Box<dyn Script<S>>,
    player: PlayerId,
    view: Option<S::Seen>,
    /// Whether the script is shown nothing (the own player is not converted from each
    /// snapshot).
    ack_only: bool,
    /// Packets the client refused.
    pub packet_errors: u64,
    /// CPU time to take in a packet that completed a snapshot, µs.
    pub decode_us: Histogram,
    /// Bytes sent, headers counted.
    pub up_bytes: u64,
    /// Bytes received, headers counted.
    pub delivered_bytes: u64,
    /// Bytes received in each second.
    pub down_per_second: Vec<u64>,
}

/// The client that played: the lab's full client or a bot.
pub(crate) enum Player<S: LabScene> {
    /// The lab's client.
    Full(Box<ClientSim<S>>),
    /// A bot.
    Bot(Box<Bot<S>>),
}

impl<S: LabScene> Player<S> {
    /// The session.
    pub fn session(&self) -> &ClientSession<S::Input> {
        match self {
            Player::Full(c) => c.session(),
            Player::Bot(b) => b.client.session(),
        }
    }

    /// Round-trip estimate.
    pub fn rtt(&self) -> &RttEstimator {
        self.session().rtt()
    }

    /// The session's counters.
    pub fn stats(&self) -> ClientStats {
        self.session().stats()
    }

    /// Bytes sent and received (headers counted), and received per second.
    pub fn bytes(&self) -> (u64, u64, &[u64]) {
        match self {
            Player::Full(c) => (c.up_bytes, c.delivered_bytes, &c.down_per_second),
            Player::Bot(b) => (b.up_bytes, b.delivered_bytes, &b.down_per_second),
        }
    }

    /// A packet from the server, at `now`.
    fn deliver(&mut self, now: Duration, bytes: Vec<u8>) {
        match self {
            Player::Full(c) => c.send_down(now, bytes),
            Player::Bot(b) => {
                let size = bytes.len() as u64 + UDP_IP_HEADER_BYTES;
                b.delivered_bytes += size;
                count_per_second(&mut b.down_per_second, now, size);
                let newest = b.client.replication().newest();
                let timer = CpuTimer::start();
                if b.client.receive(now, &bytes).is_err() {
                    b.packet_errors += 1;
                }
                let newest = b
                    .client
                    .replication()
                    .newest()
                    .filter(|t| Some(*t) != newest);
                if let Some(tick) = newest {
                    b.decode_us.record(timer.ms() * 1000.0);
                    if !b.ack_only {
                        let known = S::known(&b.setup, b.client.replication(), tick);
                        if let Some(p) = S::seen_in(&known, b.player) {
                            b.view = Some(p);
                        }
                    }
                }
            }
        }
    }

    /// Runs what is due at `now` and returns the packets to send.
    fn step(&mut self, now: Duration, config: &RunConfig, truth: &Truth) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Player::Full(c) => {
                c.step(now, config, truth);
                while let Some(p) = c.link.up.poll(now) {
                    out.push(p);
                }
            }
            Player::Bot(b) => {
                b.client.update(now);
                while let Some(tick) = b.client.next_tick() {
                    let input = b.script.input(u64::from(tick.0), b.view.as_ref());
                    b.client.tick(tick, input);
                }
                while let Some(p) = b.client.poll_transmit(now) {
                    b.up_bytes += p.len() as u64 + UDP_IP_HEADER_BYTES;
                    out.push(p);
                }
            }
        }
        out
    }
}

/// What one client's run produced.
pub struct ClientRun<S: LabScene> {
    /// The player it drove.
    pub player: PlayerId,
    /// The client, with everything it measured.
    pub(crate) client: Player<S>,
    /// The server's packets, counted by sequence number.
    pub down: SeqCounter,
    /// The server's last link report.
    pub link: Option<LinkFigures>,
    /// Seconds played.
    pub seconds: f64,
    /// Why it stopped: `"done"`, `"stopped"` or the connection state it fell into.
    pub ended: String,
    /// The settings it ran with (rates from the server's welcome).
    pub config: RunConfig,
    /// What its network switch cost, if it made one.
    pub switch: Option<SwitchFigures>,
    /// Its echoed reliable messages (with a switch, and the lab's full client).
    pub echo: Option<EchoFigures>,
}

/// Connects with `settings.token` as a client of scene `S` (the server must run the
/// same scene: its welcome says which), plays for `settings.seconds` (or until `stop`),
/// and leaves.
pub fn connect<S: LabScene>(
    settings: &ConnectSettings,
    config: &RunConfig,
    stop: &AtomicBool,
) -> Result<ClientRun<S>, UdpRunError> {
    connect_with_truth(settings, config, None, stop)
}

/// [`connect`], with the `truth` a server in the same process records, so the client
/// can measure its errors against the server's positions.
pub(crate) fn connect_with_truth<S: LabScene>(
    settings: &ConnectSettings,
    config: &RunConfig,
    truth: Option<Arc<RwLock<Truth>>>,
    stop: &AtomicBool,
) -> Result<ClientRun<S>, UdpRunError> {
    let mut udp = UdpClient::connect(&settings.token)?;
    let run = play(&mut udp, settings, config, truth, stop);
    // Every way out, giving up on the welcome included, sends the redundant disconnect
    // packets (while connected or connecting), so the server frees the slot at once instead
    // of after its timeout.
    udp.disconnect();
    run
}

/// The lab's [`Control`] message in a reliable message of the server's session host
/// (`lagless_transport::session::Control::Game`); `None` for the host's own messages
/// (its hello, which the welcome's rates supersede) and anything malformed.
fn game_control(message: &[u8]) -> Option<Control> {
    match HostControl::decode(message) {
        Ok(HostControl::Game(bytes)) => Control::decode(&bytes).ok(),
        _ => None,
    }
}

/// Waits for the server's welcome on the reliable channel (session packets before it
/// have nobody to go to).
fn wait_for_welcome(
    udp: &mut UdpClient,
    settings: &ConnectSettings,
    stop: &AtomicBool,
) -> Result<Control, UdpRunError> {
    let started = Instant::now();
    let deadline = started + settings.connect_timeout;
    let mut logged = false;
    loop {
        udp.update();
        if udp.is_connected() && !logged {
            logged = true;
            tracing::info!(
                connect_ms = started.elapsed().as_millis() as u64,
                attempts = udp.attempts(),
                "netcode.io connected"
            );
        }
        if udp.state().is_error() {
            return Err(UdpRunError::Connect(match udp.gave_up() {
                Some(g) => g.to_string(),
                None => format!("{:?}", udp.state()),
            }));
        }
        let welcome = udp
            .recv_reliable()
            .filter_map(|m| game_control(&m))
            .find(|c| matches!(c, Control::Welcome { .. }));
        if let Some(w) = welcome {
            return Ok(w);
        }
        // Session packets before the welcome have nobody to go to.
        udp.recv().for_each(drop);
        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
            return Err(UdpRunError::Connect(format!(
                "no welcome within {:?} (state {:?}, {} handshake attempt(s))",
                settings.connect_timeout,
                udp.state(),
                udp.attempts()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The run a welcome asks for: the server's rates, scene, grid and seed over `config`,
/// checked against this client's scene (its name and its declaration's fingerprint); the
/// scene's setup and the player to drive.
fn welcomed<S: LabScene>(
    welcome: Control,
    config: &RunConfig,
) -> Result<(RunConfig, S::Setup, PlayerId), UdpRunError> {
    let Control::Welcome {
        player,
        tick_hz,
        snapshot_hz,
        grid,
        scene,
        schema,
        seed,
    } = welcome
    else {
        return Err(UdpRunError::Connect("no welcome".into()));
    };
    if !(1..=1000).contains(&tick_hz) || snapshot_hz == 0 || snapshot_hz > tick_hz || player == 0 {
        return Err(UdpRunError::Connect(format!(
            "the server's settings make no sense: player {player}, {tick_hz} Hz, {snapshot_hz} snapshots/s"
        )));
    }
    let mut config = config.clone();
    // Timing the naive full-world replay takes milliseconds to a tenth of a second of
    // real time, which a real-time client cannot spare: no naive baseline over UDP.
    config.naive_sample = 0;
    config.server.tick_hz = tick_hz;
    config.client.tick_hz = tick_hz;
    config.snapshot_hz = snapshot_hz;
    if super::scene_name(scene) != Some(config.scene.as_str()) {
        return Err(UdpRunError::Connect(format!(
            "the server runs scene {}, this client {}",
            super::scene_name(scene).unwrap_or("(unknown)"),
            config.scene
        )));
    }
    if !(1..=super::serve::MAX_GRID).contains(&grid) {
        return Err(UdpRunError::Connect(format!(
            "the server's grid of {grid} cubes a side is out of range"
        )));
    }
    config.grid = grid;
    config.seed = seed;
    let setup = S::client_setup(&config)?;
    if super::schema_fingerprint(&S::schema(&setup)) != schema {
        return Err(UdpRunError::Connect(format!(
            "the server's {} scene declares other snapshots than this client's: run both \
             with the same scene settings",
            config.scene
        )));
    }
    Ok((config, setup, player))
}

/// The client that drives `player`: the lab's full client, or a bot.
fn new_player<S: LabScene>(
    config: &RunConfig,
    setup: &S::Setup,
    player: PlayerId,
    settings: &ConnectSettings,
) -> Result<Player<S>, UdpRunError> {
    // The runner's client k drives player k + 1 with script seed 1000 + k.
    let script_seed = derive_seed(config.seed, 1000 + u64::from(player - 1));
    let script = S::script(config, setup, script_seed)?;
    Ok(if settings.bot || settings.ack_only {
        let net = net_config::<S>(setup, config);
        let client = Client::new(S::schema(setup), Spectator::default(), &net)
            .map_err(|e| crate::RunError::Invalid(e.to_string()))?;
        Player::Bot(Box::new(Bot {
            client,
            setup: setup.clone(),
            script,
            player,
            view: None,
            ack_only: settings.ack_only,
            packet_errors: 0,
            decode_us: Histogram::default(),
            up_bytes: 0,
            delivered_bytes: 0,
            down_per_second: Vec::new(),
        }))
    } else {
        // A perfect link: what the socket delivers goes straight through.
        let link = Duplex::new(LinkConfig::default(), LinkConfig::default(), 0)
            .map_err(crate::RunError::from)?;
        Player::Full(Box::new(ClientSim::new(
            config,
            (u64::from(player), player),
            link,
            script,
            setup,
        )?))
    })
}

/// The part of [`connect_with_truth`] that runs once the socket exists: waits for the
/// welcome, then plays. The caller disconnects, however this ends.
fn play<S: LabScene>(
    udp: &mut UdpClient,
    settings: &ConnectSettings,
    config: &RunConfig,
    truth: Option<Arc<RwLock<Truth>>>,
    stop: &AtomicBool,
) -> Result<ClientRun<S>, UdpRunError> {
    let welcome = wait_for_welcome(udp, settings, stop)?;
    let (mut config, setup, player) = welcomed::<S>(welcome, config)?;
    let mut client = new_player::<S>(&config, &setup, player, settings)?;
    // Building the client took a while, and the server's packets queued meanwhile: handed
    // over at once they would look to the clock like a link that delivers late, so they
    // go, as packets lost before the start.
    udp.update();
    udp.recv().for_each(drop);
    let no_truth = Truth::default();
    let mut down = SeqCounter::default();
    let mut link = None;
    let start = Instant::now();
    if let (Player::Full(c), Some(truth)) = (&mut client, &truth) {
        // Characters are measured against the server's record of them, at the same
        // instant: this client's clock starts now, the server's record at its epoch.
        if let Ok(t) = truth.read() {
            c.truth_offset = t
                .epoch
                .map_or(Duration::ZERO, |e| start.saturating_duration_since(e));
            if !t.character_ids.is_empty() {
                let slot = S::character_slot(&setup, config.clients);
                c.watch_characters(t.character_ids.clone(), slot);
            }
        }
    }
    // A NaN or negative time plays nothing; one too long for a Duration, for ever.
    let end = Duration::try_from_secs_f64(settings.seconds.max(0.0)).unwrap_or(Duration::MAX);
    let mut switch = Switch::new(settings.switch.clone());
    let mut echo =
        (settings.switch.is_some() && matches!(&client, Player::Full(_))).then(Echo::default);
    let ended = loop {
        let now = start.elapsed();
        switch.at(now, udp, &client, &setup, player)?;
        udp.update();
        // Connecting again after a switch is not an end.
        let switching = switch.connecting() && udp.state().is_connecting();
        if !(udp.is_connected() || switching) {
            break format!("{:?}", udp.state());
        }
        let arrived: Vec<Vec<u8>> = udp.recv().collect();
        for p in arrived {
            down.observe(&p);
            client.deliver(now, p);
        }
        for m in udp.recv_reliable() {
            if let Some(Control::Link {
                up_expected,
                up_received,
                down_sent,
                down_bytes,
                elapsed_ms,
            }) = game_control(&m)
            {
                link = Some(LinkFigures {
                    up_expected,
                    up_received,
                    down_sent,
                    down_bytes,
                    seconds: elapsed_ms as f64 / 1000.0,
                });
            }
        }
        let before = client.session().current_tick();
        let out = match &truth {
            Some(t) => match t.read() {
                Ok(guard) => {
                    let out = client.step(now, &config, &guard);
                    if let (Some(probe), Player::Full(c)) = (&guard.probe, &client) {
                        // On the server's clock, as the runner probes on its one clock.
                        if let Ok(mut p) = probe.lock() {
                            let i = player as usize - 1;
                            let at = (now + c.truth_offset, now);
                            p.client_stepped(i, at, before, c.session());
                        }
                    }
                    out
                }
                Err(_) => client.step(now, &config, &no_truth),
            },
            None => client.step(now, &config, &no_truth),
        };
        for p in out {
            // Not connected any more (or not yet again, after a switch): dropped.
            let _ = udp.send(&p);
        }
        switch.after_step(&client, &setup, player);
        if let (Some(e), Player::Full(c)) = (&mut echo, &mut client) {
            e.step(now, udp.is_connected(), &mut c.game.client);
        }
        if now >= end {
            break "done".into();
        }
        if stop.load(Ordering::Relaxed) {
            break "stopped".into();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let seconds = start.elapsed().as_secs_f64();
    config.seconds = seconds;
    Ok(ClientRun {
        player,
        client,
        down,
        link,
        seconds,
        ended,
        config,
        switch: switch.figures,
        echo: echo.map(|e| e.finish(start.elapsed())),
    })
}

/// A scripted network switch as it goes: waiting for its time, connecting again, back.
struct Switch {
    plan: Option<SwitchPlan>,
    /// Since when the new socket connects, the newest tick applied before it, the
    /// player entity's generation then, and the client's restarts then.
    began: Option<(Instant, Option<lagless_core::Tick>, Option<u32>, u64)>,
    figures: Option<SwitchFigures>,
}

impl Switch {
    fn new(plan: Option<SwitchPlan>) -> Self {
        Self {
            plan,
            began: None,
            figures: None,
        }
    }

    /// True from the switch until the client is back in play.
    fn connecting(&self) -> bool {
        self.began.is_some()
    }

    /// At the switch's time: a new socket and a fresh token, the client kept.
    fn at<S: LabScene>(
        &mut self,
        now: Duration,
        udp: &mut UdpClient,
        client: &Player<S>,
        setup: &S::Setup,
        player: PlayerId,
    ) -> Result<(), UdpRunError> {
        let Some(plan) = self.plan.as_ref().filter(|p| now.as_secs_f64() >= p.at) else {
            return Ok(());
        };
        let Player::Full(c) = client else {
            self.plan = None;
            return Ok(());
        };
        // The backend has no token yet: try again next frame.
        let Some(token) = (plan.token)() else {
            return Ok(());
        };
        let generation = S::player_entity(setup, player)
            .and_then(|id| c.registry().get(id))
            .map(|e| e.generation);
        let restarts = c.game.client.stats().restarts;
        // The old socket goes without a goodbye: a disconnect would make the server let
        // the player go.
        *udp = UdpClient::connect(&token)?;
        self.began = Some((Instant::now(), c.registry().newest(), generation, restarts));
        self.plan = None;
        tracing::info!(
            addr = ?udp.local_addr().ok(),
            "switched networks: a new socket, a fresh token"
        );
        Ok(())
    }

    /// After a step: back in play once a tick newer than the switch's is applied.
    fn after_step<S: LabScene>(&mut self, client: &Player<S>, setup: &S::Setup, player: PlayerId) {
        let (Some((began, before, generation, restarts)), Player::Full(c)) = (self.began, client)
        else {
            return;
        };
        let newest = c.registry().newest();
        if newest.is_none() || newest <= before {
            return;
        }
        let now_generation = S::player_entity(setup, player)
            .and_then(|id| c.registry().get(id))
            .map(|e| e.generation);
        let now_restarts = c.game.client.stats().restarts;
        let back_ms = began.elapsed().as_secs_f64() * 1000.0;
        self.figures = Some(SwitchFigures {
            back_ms: Some(back_ms),
            player_kept: generation.is_some()
                && generation == now_generation
                && restarts == now_restarts,
        });
        self.began = None;
        tracing::info!(back_ms, "back in play after the switch");
    }
}

/// The client's side of the echo: numbered reliable messages out, the echoes checked.
#[derive(Default)]
struct Echo {
    next: u32,
    expected: u32,
    last_sent: Option<Duration>,
    /// When each number was sent.
    sent_at: Vec<Duration>,
    figures: EchoFigures,
}

impl Echo {
    fn step<W: lagless_replication::PredictedWorld>(
        &mut self,
        now: Duration,
        connected: bool,
        client: &mut lagless_replication::Client<W>,
    ) {
        while let Some((_, m)) = client.poll_message() {
            let Ok(bytes) = <[u8; 4]>::try_from(m.as_slice()) else {
                continue;
            };
            let n = u32::from_le_bytes(bytes);
            if n < self.expected {
                self.figures.duplicated += 1;
                continue;
            }
            self.figures.lost += u64::from(n - self.expected);
            self.figures.received += 1;
            self.expected = n + 1;
        }
        if connected && self.last_sent.is_none_or(|t| now >= t + ECHO_EVERY) {
            let queued = client
                .send_message(
                    lagless_replication::Delivery::Reliable,
                    &self.next.to_le_bytes(),
                )
                .is_ok();
            if queued {
                self.last_sent = Some(now);
                self.sent_at.push(now);
                self.next += 1;
                self.figures.sent += 1;
            }
        }
    }

    /// The figures at the end, `now` into play: numbers sent long enough ago and never
    /// echoed count as lost.
    fn finish(mut self, now: Duration) -> EchoFigures {
        let overdue = self
            .sent_at
            .iter()
            .enumerate()
            .filter(|&(n, &at)| n as u32 >= self.expected && at + ECHO_IN_FLIGHT <= now)
            .count();
        self.figures.lost += overdue as u64;
        self.figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_netcode::DisconnectReason;
    use lagless_transport::{ConnectionEvent, PROTOCOL_ID, ServerSettings, UdpServer, keys};

    /// A server whose netcode accepts the client but which never welcomes it: the client
    /// gives up after its connect timeout, and the server hears it leave at once instead
    /// of after the token's 30 s timeout.
    #[test]
    fn giving_up_on_the_welcome_frees_the_slot_at_once() {
        let key = [3u8; 32];
        let bind = "127.0.0.1:0".parse().expect("addr");
        let mut server =
            UdpServer::bind(bind, ServerSettings::new(PROTOCOL_ID, key, 2)).expect("bind");
        let addr = server.local_addr().expect("addr");
        let token = keys::issue_token(&key, PROTOCOL_ID, 1, vec![addr], 60, 30)
            .and_then(|t| Ok(t.write()?))
            .expect("token");
        let settings = ConnectSettings {
            token: token.to_vec(),
            seconds: 1.0,
            bot: true,
            ack_only: false,
            connect_timeout: Duration::from_millis(500),
            switch: None,
        };
        let client = std::thread::spawn(move || {
            let stop = AtomicBool::new(false);
            connect::<crate::scenes::Cubes>(&settings, &RunConfig::default(), &stop).err()
        });
        let start = Instant::now();
        let mut events = Vec::new();
        while start.elapsed() < Duration::from_secs(10) {
            server.update();
            events.extend(std::iter::from_fn(|| server.poll_event()));
            if events
                .iter()
                .any(|e| matches!(e, ConnectionEvent::Disconnected { .. }))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = client.join().expect("client thread");
        assert!(
            matches!(&err, Some(UdpRunError::Connect(m)) if m.contains("no welcome")),
            "{:?}",
            err.map(|e| e.to_string())
        );
        assert!(
            matches!(
                &events[..],
                [
                    ConnectionEvent::Connected { client_id: 1, .. },
                    ConnectionEvent::Disconnected {
                        client_id: 1,
                        reason: DisconnectReason::ClientDisconnected
                    }
                ]
            ),
            "{events:?}"
        );
    }
}
