//! `lagless serve`: a scene's authoritative server in real time over UDP.
//!
//! The same pieces as the virtual-clock runner (the game's `lagless_replication::Server`,
//! the scene, [`SnapshotSender`]) driven by [`lagless_transport::UdpServer`]: every frame reads the
//! socket, ticks the server as its fixed timestep asks and sends what the session has. A
//! client that connects (netcode.io slot `k`) gets a fresh lagless `ClientId` and player
//! `k + 1`, and a [`Control::Welcome`]; one that leaves or times out takes its player and
//! its replication state with it, and nobody else notices.

use super::{Control, SeqCounter, UdpRunError, rss_mb};
use crate::config::{RunConfig, SnapshotCodecChoice};
use crate::metrics::{Metric, Report, percentile};
use crate::remote_view::Track;
use crate::replication::SnapshotSender;
use crate::runner::UDP_IP_HEADER_BYTES;
use crate::runner::client::{Truth, pos};
use crate::runner::{fed, server_step};
use crate::scene::{LabScene, PlayerId};
use lagless_core::ClientId;
use lagless_netcode::Key;
use lagless_replication::Server;
use lagless_transport::{ConnectionEvent, PROTOCOL_ID, ServerSettings, UdpServer};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// What `lagless serve` needs beside the run settings (scene, tick rate, snapshot rate,
/// codec, budget, the cube grid come from a [`RunConfig`]).
#[derive(Clone, Debug)]
pub struct ServeSettings {
    /// Address to bind (port 0: the OS picks one).
    pub bind: SocketAddr,
    /// The private key tokens are issued with.
    pub private_key: Key,
    /// Client slots.
    pub max_clients: usize,
    /// Addresses tokens may name beside the bound one (a proxy in front of the server).
    pub public_addresses: Vec<SocketAddr>,
}

/// A connected client.
struct Conn {
    id: ClientId,
    player: PlayerId,
    up: SeqCounter,
    down_sent: u64,
    down_bytes: u64,
    since: Duration,
}

/// What the server measured over its run.
#[derive(Debug, Clone, Default)]
pub struct ServerFigures {
    /// CPU time per tick (physics plus capture and encoding for every client), ms.
    pub tick_ms: Vec<f64>,
    /// Wall time per tick, ms.
    pub tick_wall_ms: Vec<f64>,
    /// The physics step, ms.
    pub physics_ms: Vec<f64>,
    /// Capture and encoding on snapshot ticks, ms.
    pub encode_ms: Vec<f64>,
    /// Ticks simulated without a client's input after it had started sending, summed
    /// over clients (including those that left).
    pub ticks_starved: u64,
    /// Ticks simulated with a client's input, summed likewise.
    pub ticks_with_input: u64,
    /// Inputs that arrived too late.
    pub inputs_late: u64,
    /// Session packets refused.
    pub packets_rejected: u64,
    /// Most clients connected at once.
    pub clients_max: usize,
    /// Real seconds the server ran.
    pub seconds: f64,
    /// Share of one core the whole process used over the run, percent.
    pub cpu_pct: Option<f64>,
    /// Resident memory when the server started and when it stopped, MB.
    pub rss_mb: (Option<f64>, Option<f64>),
}

/// A scene's server on a UDP socket.
pub struct GameServer<S: LabScene> {
    udp: UdpServer,
    config: RunConfig,
    scene: S,
    session: Server<S::Input>,
    sender: SnapshotSender<S>,
    /// By netcode.io client id (the id in the token).
    conns: BTreeMap<u64, Conn>,
    /// Session client id to netcode.io client id.
    by_session: HashMap<ClientId, u64>,
    next_id: ClientId,
    /// Every tracked player's and cube's position per tick, for a run in one process.
    truth: Option<Arc<RwLock<Truth>>>,
    figures: ServerFigures,
    /// When the last second's line was logged, and the tick count then.
    last_line: (Duration, usize),
    process_cpu: Option<cpu_time::ProcessTime>,
    /// Players tracked in the truth, and its rows not yet written (players, others).
    tracked_players: usize,
    pending_truth: Vec<TruthRow>,
    /// The input-delay and lead probe the clients of this process share.
    probe: Option<Arc<std::sync::Mutex<crate::input_buffer::SyncProbe>>>,
    /// Scratch for the other entities' positions and the characters' states.
    others: Vec<[f32; 3]>,
    characters: Vec<(u32, lagless_replication::deadreckoning::CharacterState)>,
}

/// One tick of the truth: the players, the other entities, and the characters with
/// the time they were recorded at.
type TruthRow = (Vec<[f32; 3]>, Vec<[f32; 3]>, (Duration, Vec<[f32; 3]>));

/// Appends `rows` to the truth, one position per track per row.
fn flush_truth(t: &mut Truth, rows: &mut Vec<TruthRow>) {
    for (players, others, (at, characters)) in rows.drain(..) {
        for (track, p) in t.players.iter_mut().zip(players) {
            track.push(p);
        }
        for (track, c) in t.others.iter_mut().zip(others) {
            track.push(c);
        }
        if !characters.is_empty() {
            t.characters.push(at, characters.into_iter());
        }
    }
}

/// Most ticks one [`GameServer::step`] runs.
const MAX_TICKS_PER_STEP: usize = 4;

/// Largest grid a server runs or a client accepts (10 000 cubes).
pub use crate::scenes::MAX_GRID;

impl<S: LabScene> GameServer<S> {
    /// Binds and builds the scene; `config` gives the scene's settings, the tick rate,
    /// snapshot rate, codec and budget. With `track_players`, every tick's positions of
    /// players `1..=n` and of every other entity are recorded in a `Truth` the clients
    /// of the same process can read.
    pub fn bind(
        settings: &ServeSettings,
        config: &RunConfig,
        track_players: Option<usize>,
    ) -> Result<Self, UdpRunError> {
        let tick_hz = config.server.tick_hz;
        if config.snapshot_hz == 0 || config.snapshot_hz > tick_hz {
            return Err(crate::RunError::Invalid(format!(
                "snapshot rate must be 1..={tick_hz} Hz, got {}",
                config.snapshot_hz
            ))
            .into());
        }
        let mut server_settings =
            ServerSettings::new(PROTOCOL_ID, settings.private_key, settings.max_clients);
        server_settings.public_addresses = settings.public_addresses.clone();
        let (scene, setup) = S::build(config)?;
        let udp = UdpServer::bind(settings.bind, server_settings)?;
        let (sender, session) = SnapshotSender::<S>::new(config.snapshot_codec, setup, config)?;
        let truth = track_players.map(|n| {
            let players: Vec<Track> = (1..=n)
                .map(|p| Track::from(vec![pos(scene.player_position(p as PlayerId))]))
                .collect();
            let mut others = Vec::new();
            scene.others(&mut others);
            let others = others.into_iter().map(|p| Track::from(vec![p])).collect();
            let mut characters = Vec::new();
            scene.characters(&mut characters);
            let mut truth = Truth {
                players,
                others,
                characters: Default::default(),
                character_ids: characters.iter().map(|(id, _)| *id).collect(),
                epoch: std::time::Instant::now().checked_sub(udp.now()),
                probe: Some(Arc::new(std::sync::Mutex::new(
                    crate::input_buffer::SyncProbe::new(n, config.server.tick_hz, Vec::new()),
                ))),
            };
            truth
                .characters
                .push(udp.now(), characters.iter().map(|(_, s)| s.position));
            Arc::new(RwLock::new(truth))
        });
        let probe = truth
            .as_ref()
            .and_then(|t| t.read().ok().and_then(|t| t.probe.clone()));
        Ok(Self {
            udp,
            config: config.clone(),
            scene,
            session,
            sender,
            conns: BTreeMap::new(),
            by_session: HashMap::new(),
            next_id: 1,
            truth,
            figures: ServerFigures {
                rss_mb: (rss_mb(), None),
                ..ServerFigures::default()
            },
            last_line: (Duration::ZERO, 0),
            process_cpu: cpu_time::ProcessTime::try_now().ok(),
            tracked_players: track_players.unwrap_or(0),
            pending_truth: Vec::new(),
            probe,
            others: Vec::new(),
            characters: Vec::new(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, UdpRunError> {
        Ok(self.udp.local_addr()?)
    }

    /// The recorded truth, when players are tracked.
    pub(crate) fn truth(&self) -> Option<Arc<RwLock<Truth>>> {
        self.truth.clone()
    }

    /// The transport (its counters, the netcode.io server's drops).
    pub fn transport(&self) -> &UdpServer {
        &self.udp
    }

    /// Ids (from their tokens) of the connected clients.
    pub fn clients(&self) -> Vec<u64> {
        self.conns.keys().copied().collect()
    }

    /// One frame: read the socket, handle connects and leaves, run up to four of the
    /// ticks that are due (reading the socket before each), send what the session has,
    /// and once a second log a line and send each client its link report. Returns true
    /// when ticks may still be due (the server is behind real time).
    pub fn step(&mut self) -> bool {
        // One tick at a time, reading the socket before each: a server that fell behind
        // ran several ticks in a row, and 64 clients' inputs over that long overflowed
        // the kernel's receive buffer (60% of the uplink lost, in a 5-minute run). At
        // most four per frame, so the once-a-second duties and a stop are not put off
        // for as long as the server stays behind.
        let mut ran = 0;
        while ran < MAX_TICKS_PER_STEP {
            let now = self.receive();
            self.session.update(now);
            let Some(step) = self.session.next_tick() else {
                break;
            };
            self.tick(step, now);
            self.transmit();
            ran += 1;
        }
        self.transmit();
        let now = self.udp.now();
        if now.saturating_sub(self.last_line.0) >= Duration::from_secs(1) {
            self.second(now);
        }
        ran == MAX_TICKS_PER_STEP
    }

    /// Reads the socket, handles connects and leaves, and hands the session what came;
    /// returns the time it was read at.
    fn receive(&mut self) -> Duration {
        self.udp.update();
        let now = self.udp.now();
        while let Some(event) = self.udp.poll_event() {
            match event {
                ConnectionEvent::Connected { client_id, addr } => self.join(client_id, addr, now),
                ConnectionEvent::Disconnected { client_id, reason } => {
                    self.leave(client_id, &format!("{reason:?}"))
                }
            }
        }
        let received: Vec<(u64, Vec<u8>)> = self.udp.recv().collect();
        for (nid, bytes) in received {
            if let Some(c) = self.conns.get_mut(&nid) {
                c.up.observe(&bytes);
                // Refused packets are counted by the session.
                let _ = self.session.receive(c.id, now, &bytes);
            }
        }
        // Clients send nothing on the reliable channel; drop whatever comes.
        self.udp.recv_reliable().for_each(drop);
        now
    }

    /// Sends what the session has.
    fn transmit(&mut self) {
        while let Some((id, bytes)) = self.session.poll_transmit() {
            let Some(&nid) = self.by_session.get(&id) else {
                continue;
            };
            if let Some(c) = self.conns.get_mut(&nid) {
                c.down_sent += 1;
                c.down_bytes += bytes.len() as u64 + UDP_IP_HEADER_BYTES;
            }
            // A client that left meanwhile: nothing to do.
            let _ = self.udp.send(nid, &bytes);
        }
    }

    /// One server tick, as the runner does it.
    fn tick(&mut self, step: lagless_core::TickInputs<S::Input>, now: Duration) {
        let client_players: Vec<(ClientId, PlayerId)> =
            self.conns.values().map(|c| (c.id, c.player)).collect();
        let (cost, sent) = server_step(
            &mut self.scene,
            &mut self.session,
            &mut self.sender,
            (&client_players, &step, now),
            &mut self.characters,
        );
        if let Err(e) = sent {
            tracing::warn!("snapshot not sent: {e}");
        }
        if let Some(probe) = &self.probe {
            let fed = fed(&self.session, &step);
            if let Ok(mut p) = probe.lock() {
                p.server_tick(now, step.tick, &fed);
            }
        }
        self.figures.encode_ms.extend(cost.encode_ms);
        self.figures.physics_ms.push(cost.physics_ms);
        self.figures.tick_ms.push(cost.tick_ms);
        self.figures.tick_wall_ms.push(cost.wall_ms);
        self.scene.observe();
        if let Some(truth) = &self.truth {
            let players = (1..=self.tracked_players)
                .map(|p| pos(self.scene.player_position(p as PlayerId)))
                .collect();
            self.others.clear();
            self.scene.others(&mut self.others);
            let characters = self.characters.iter().map(|(_, s)| s.position).collect();
            self.pending_truth
                .push((players, self.others.clone(), (now, characters)));
            // Never wait for the clients reading it: a client holds the truth through its
            // step, and a server blocked behind a deep rollback stalled its clock (RTT
            // 580 ms over a 200 ms link). Rows wait here until the truth is free.
            if let Ok(mut t) = truth.try_write() {
                flush_truth(&mut t, &mut self.pending_truth);
            }
        }
    }

    fn join(&mut self, nid: u64, addr: SocketAddr, now: Duration) {
        let Some(slot) = self.udp.client_index(nid) else {
            return;
        };
        let player = slot as PlayerId + 1;
        let id = self.next_id;
        self.next_id += 1;
        if let Err(e) = self.session.connect(id) {
            tracing::warn!(client_id = nid, "refused by the session: {e}");
            let _ = self.udp.disconnect(nid);
            return;
        }
        self.scene.add_player(player);
        self.by_session.insert(id, nid);
        self.conns.insert(
            nid,
            Conn {
                id,
                player,
                up: SeqCounter::default(),
                down_sent: 0,
                down_bytes: 0,
                since: now,
            },
        );
        self.figures.clients_max = self.figures.clients_max.max(self.conns.len());
        let welcome = Control::Welcome {
            player,
            tick_hz: self.config.server.tick_hz,
            snapshot_hz: self.config.snapshot_hz,
            grid: self.config.grid,
            codec: match self.config.snapshot_codec {
                SnapshotCodecChoice::Delta => 0,
                SnapshotCodecChoice::Plain => 1,
            },
            scene: super::scene_code(&self.config.scene),
            schema: super::schema_fingerprint(&S::schema(self.sender.setup())),
            seed: self.config.seed,
        };
        if let Err(e) = self.udp.send_reliable(nid, &welcome.encode()) {
            tracing::warn!(client_id = nid, "welcome not sent: {e}");
        }
        tracing::info!(
            client_id = nid,
            %addr,
            slot,
            player,
            clients = self.conns.len(),
            "client connected"
        );
    }

    fn leave(&mut self, nid: u64, reason: &str) {
        let Some(c) = self.conns.remove(&nid) else {
            return;
        };
        self.count_session(c.id);
        self.sender.remove_client(&mut self.session, c.id);
        self.by_session.remove(&c.id);
        self.scene.remove_player(c.player);
        tracing::info!(
            client_id = nid,
            player = c.player,
            reason,
            up_loss_pct = round2(loss_pct(&c.up)),
            clients = self.conns.len(),
            "client left"
        );
    }

    /// Adds a client's session counters to the run's totals.
    fn count_session(&mut self, id: ClientId) {
        if let Some(s) = self.session.client_stats(id) {
            self.figures.ticks_starved += s.ticks_starved;
            self.figures.ticks_with_input += s.ticks_with_input;
            self.figures.inputs_late += s.inputs_late;
            self.figures.packets_rejected += s.packets_rejected;
        }
    }

    /// The once-a-second line, and every client's link report.
    fn second(&mut self, now: Duration) {
        let (then, ticks_then) = self.last_line;
        let recent = &self.figures.tick_ms[ticks_then.min(self.figures.tick_ms.len())..];
        let elapsed = now.saturating_sub(then).as_secs_f64().max(1e-9);
        let stats = self.udp.stats().clone();
        let netcode = self.udp.netcode().stats().clone();
        let cpu_pct = self
            .process_cpu
            .as_ref()
            .and_then(|t| t.try_elapsed().ok())
            .map(|d| d.as_secs_f64() * 100.0 / now.as_secs_f64().max(1e-9));
        let due = (now.as_secs_f64() * f64::from(self.config.server.tick_hz)) as u64;
        tracing::info!(
            clients = self.conns.len(),
            tick = self.session.current_tick().0,
            behind_ticks = due.saturating_sub(u64::from(self.session.current_tick().0)),
            ticks = recent.len(),
            ticks_per_s = round2(recent.len() as f64 / elapsed),
            tick_ms_p99 = round2(percentile(recent, 99.0).unwrap_or(0.0)),
            datagrams_in = stats.datagrams_received,
            datagrams_out = stats.datagrams_sent,
            dropped = netcode.drops.total(),
            drop_reasons = netcode.drops.to_string(),
            handshakes_evicted = netcode.evicted_crowded_source + netcode.evicted_oldest,
            cpu_pct = round2(cpu_pct.unwrap_or(f64::NAN)),
            rss_mb = round2(rss_mb().unwrap_or(f64::NAN)),
            "server"
        );
        self.last_line = (now, self.figures.tick_ms.len());
        let reports: Vec<(u64, Control)> = self
            .conns
            .iter()
            .map(|(&nid, c)| {
                (
                    nid,
                    Control::Link {
                        up_expected: c.up.expected(),
                        up_received: c.up.received(),
                        down_sent: c.down_sent,
                        down_bytes: c.down_bytes,
                        elapsed_ms: now.saturating_sub(c.since).as_millis() as u64,
                    },
                )
            })
            .collect();
        for (nid, report) in reports {
            let _ = self.udp.send_reliable(nid, &report.encode());
        }
    }

    /// Runs until `stop` is set or `seconds` have passed, then disconnects everyone.
    pub fn run(mut self, seconds: Option<f64>, stop: &AtomicBool) -> ServeOutcome<S> {
        let end = seconds.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX));
        loop {
            let behind = self.step();
            let now = self.udp.now();
            if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
                break;
            }
            // The session's clock is the socket's: a millisecond's sleep costs a packet at
            // most that much hold time, which the echo subtracts.
            if !behind {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.finish()
    }

    /// Disconnects everyone and hands over what was measured.
    pub fn finish(mut self) -> ServeOutcome<S> {
        if let Some(truth) = &self.truth {
            if let Ok(mut t) = truth.write() {
                flush_truth(&mut t, &mut self.pending_truth);
            }
        }
        let ids: Vec<ClientId> = self.conns.values().map(|c| c.id).collect();
        for id in ids {
            self.count_session(id);
        }
        self.udp.shutdown();
        let now = self.udp.now();
        self.figures.seconds = now.as_secs_f64();
        self.figures.cpu_pct = self
            .process_cpu
            .as_ref()
            .and_then(|t| t.try_elapsed().ok())
            .map(|d| d.as_secs_f64() * 100.0 / now.as_secs_f64().max(1e-9));
        self.figures.rss_mb.1 = rss_mb();
        let netcode = self.udp.netcode().stats();
        tracing::info!(
            seconds = self.figures.seconds,
            connects = netcode.connects,
            disconnects = netcode.disconnects,
            timeouts = netcode.timeouts,
            dropped = netcode.drops.total(),
            drop_reasons = netcode.drops.to_string(),
            handshakes_evicted = netcode.evicted_crowded_source + netcode.evicted_oldest,
            "server stopped"
        );
        ServeOutcome {
            figures: self.figures,
            sender: self.sender,
            server: self.session,
            scene: self.scene,
            netcode: netcode.clone(),
        }
    }
}

/// What a server run produced.
pub struct ServeOutcome<S: LabScene> {
    /// What it measured.
    pub figures: ServerFigures,
    /// The snapshot encoder, with its counters.
    pub sender: SnapshotSender<S>,
    /// The game's server, with its counters.
    pub server: Server<S::Input>,
    /// The scene, with what it followed (its own metrics).
    pub scene: S,
    /// The netcode.io server's counters (connects, timeouts, drops by reason).
    pub netcode: lagless_netcode::ServerStats,
}

impl<S: LabScene> ServeOutcome<S> {
    /// `server.*` under `docs/metrics.md`'s names, plus the process's CPU share and memory.
    pub fn fill(&self, r: &mut Report) {
        let f = &self.figures;
        r.number("server.tick_ms_p50", percentile(&f.tick_ms, 50.0));
        r.number("server.tick_ms_p99", percentile(&f.tick_ms, 99.0));
        r.number("server.tick_wall_ms_p50", percentile(&f.tick_wall_ms, 50.0));
        r.number("server.tick_wall_ms_p99", percentile(&f.tick_wall_ms, 99.0));
        r.number(
            "server.ticks_per_s",
            (f.seconds > 0.0).then(|| f.tick_ms.len() as f64 / f.seconds),
        );
        r.number("server.physics_ms_p99", percentile(&f.physics_ms, 99.0));
        r.number("server.encode_ms_p99", percentile(&f.encode_ms, 99.0));
        let (starved, fed) = (f.ticks_starved, f.ticks_with_input);
        r.number(
            "server.input_starved_pct",
            (starved + fed > 0).then(|| starved as f64 * 100.0 / (starved + fed) as f64),
        );
        r.set("server.inputs_late", Metric::Count(f.inputs_late));
        r.set("server.packets_rejected", Metric::Count(f.packets_rejected));
        r.set("server.clients_max", Metric::Count(f.clients_max as u64));
        r.set("server.connects", Metric::Count(self.netcode.connects));
        r.set("server.timeouts", Metric::Count(self.netcode.timeouts));
        r.set(
            "server.netcode_dropped",
            Metric::Count(self.netcode.drops.total()),
        );
        r.number("server.cpu_pct", f.cpu_pct);
        r.number("server.rss_mb_start", f.rss_mb.0);
        r.number("server.rss_mb_end", f.rss_mb.1);
        r.number("server.seconds", Some(f.seconds));
    }
}

/// Two decimals, for the log.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn loss_pct(c: &SeqCounter) -> f64 {
    if c.expected() == 0 {
        return 0.0;
    }
    c.lost() as f64 * 100.0 / c.expected() as f64
}
