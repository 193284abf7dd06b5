//! `lagless serve`: a scene's authoritative server in real time over UDP.
//!
//! The same pieces as the virtual-clock runner (the game's `lagless_replication::Server`,
//! the scene, [`SnapshotSender`]) hosted by the library's [`GameServer`], as a game's
//! server would be: every frame reads the socket, ticks the server as its fixed timestep
//! asks and sends what the session has. A client that connects (netcode.io slot `k`)
//! drives player `k + 1` and gets a [`Control::Welcome`] as the game's control message;
//! one that leaves or times out takes its player and its replication state with it, and
//! nobody else notices.

use super::admin::{self, AdminState, SharedState};
use super::matches::{self, Conn, Match};
use super::{Control, UdpRunError, rss_mb};
use crate::config::RunConfig;
use crate::metrics::{Metric, Report, percentile};
use crate::remote_view::Track;
use crate::replication::SnapshotSender;
use crate::runner::UDP_IP_HEADER_BYTES;
use crate::runner::client::{Truth, pos};
use crate::scene::{LabScene, PlayerId};
use lagless_core::{ClientId, ServerClientStats};
use lagless_netcode::Key;
use lagless_replication::{DepartedClient, Server};
use lagless_transport::session::{GameServer, SessionEvent, SessionStats};
use lagless_transport::{PROTOCOL_ID, ServerSettings};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

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
    /// Matches hosted: with one, every token joins it; with more, the token's user data
    /// names the match (`lagless token --match K`), and a match whose last player left
    /// starts again empty.
    pub matches: u32,
    /// Once stopped (Ctrl-C, SIGTERM), how long the matches may play out with no new
    /// clients before the server exits; a second signal exits at once. Zero: exit at once.
    pub drain: Duration,
    /// Where to answer `/healthz`, `/readyz` and `/metrics` (`net::admin`).
    pub admin: Option<SocketAddr>,
    /// How long a client whose connection timed out (or was replaced by a fresh token
    /// from a new address) keeps its player for a resume
    /// (`GameServer::set_resume_grace`); `None`: it leaves at once. With a grace, the
    /// server also echoes every reliable message a client sends (`run --switch-at`
    /// counts them).
    pub resume_grace: Option<Duration>,
}

impl ServeSettings {
    /// One match on `bind`, `max_clients` slots, no drain and no admin endpoint.
    pub fn new(bind: SocketAddr, private_key: Key, max_clients: usize) -> Self {
        Self {
            bind,
            private_key,
            max_clients,
            public_addresses: Vec::new(),
            matches: 1,
            drain: Duration::ZERO,
            admin: None,
            resume_grace: None,
        }
    }
}

/// What the server measured over its run.
#[derive(Debug, Clone, Default)]
pub struct ServerFigures {
    /// CPU time per tick (physics plus capture and encoding for every client), ms.
    pub tick_ms: Vec<f64>,
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
    /// Of those, inputs handed to the scene late ([`lagless_core::TickInputs::late`]).
    pub inputs_handed_late: u64,
    /// Session packets refused.
    pub packets_rejected: u64,
    /// Most clients connected at once.
    pub clients_max: usize,
    /// Wall time of each frame's ticks (every match's, run together), ms.
    pub tick_wall_ms: Vec<f64>,
    /// Ticks run, every match's counted (a frame that ran two matches' ticks counts 2).
    pub match_ticks: u64,
    /// Matches hosted.
    pub matches: u32,
    /// Matches that ended and started again empty.
    pub match_restarts: u64,
    /// Real seconds the server ran.
    pub seconds: f64,
    /// Share of one core the whole process used over the run, percent.
    pub cpu_pct: Option<f64>,
    /// Resident memory when the server started and when it stopped, MB.
    pub rss_mb: (Option<f64>, Option<f64>),
}

/// A scene's server over UDP: the library's [`GameServer`] hosting the game's `Server`
/// (one per match), with the scenes stepped and measured as the emulator run does.
pub struct SceneServer<S: LabScene> {
    host: GameServer<S::Input>,
    config: RunConfig,
    settings: ServeSettings,
    /// The matches, by id.
    matches: Vec<Match<S>>,
    /// Every tracked player's and cube's position per tick, for a run in one process.
    truth: Option<Arc<RwLock<Truth>>>,
    figures: ServerFigures,
    /// When the last second's line was logged, and the tick and frame counts then.
    /// The last once-a-second line: when, and how many ticks, frames and match ticks
    /// had been run by then.
    last_line: (Duration, usize, usize, u64),
    process_cpu: Option<cpu_time::ProcessTime>,
    /// Players tracked in the truth, and its rows not yet written (players, others).
    tracked_players: usize,
    pending_truth: Vec<TruthRow>,
    /// The input-delay and lead probe the clients of this process share.
    probe: Option<Arc<std::sync::Mutex<crate::input_buffer::SyncProbe>>>,
    /// Scratch for the other entities' positions.
    others: Vec<[f32; 3]>,
    /// When draining started.
    draining: Option<Duration>,
    /// What the admin endpoint answers from.
    admin: Option<SharedState>,
    /// The host's counters at the last second.
    last_stats: SessionStats,
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

/// Most ticks one [`SceneServer::step`] runs.
const MAX_TICKS_PER_STEP: usize = 4;

/// Largest grid a server runs or a client accepts (10 000 cubes).
pub use crate::scenes::MAX_GRID;

impl<S: LabScene> SceneServer<S> {
    /// Binds and builds the matches; `config` gives the scene's settings, the tick rate,
    /// snapshot rate, codec and budget. With `track_players` (one match only), every
    /// tick's positions of players `1..=n` and of every other entity are recorded in a
    /// `Truth` the clients of the same process can read.
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
        if settings.matches == 0 || (settings.matches > 1 && track_players.is_some()) {
            return Err(crate::RunError::Invalid(format!(
                "{} matches: one or more, and one to follow players",
                settings.matches
            ))
            .into());
        }
        let mut server_settings =
            ServerSettings::new(PROTOCOL_ID, settings.private_key, settings.max_clients);
        server_settings.public_addresses = settings.public_addresses.clone();
        let mut matches = Vec::new();
        let mut servers = Vec::new();
        for _ in 0..settings.matches {
            let (m, server) = Match::<S>::new(config)?;
            matches.push(m);
            servers.push(server);
        }
        let host = if settings.matches == 1 {
            let server = servers.pop().unwrap_or_else(|| unreachable!("one match"));
            GameServer::bind(settings.bind, server_settings, server)?
        } else {
            GameServer::bind_matches(settings.bind, server_settings, servers)?
        };
        let mut host = host;
        host.set_resume_grace(settings.resume_grace);
        let truth = match (track_players, matches.first()) {
            (Some(n), Some(m)) => Some(new_truth(&m.scene, n, tick_hz, host.now())),
            _ => None,
        };
        let probe = truth
            .as_ref()
            .and_then(|t| t.read().ok().and_then(|t| t.probe.clone()));
        let admin = match settings.admin {
            Some(addr) => {
                let shared: SharedState =
                    Arc::new(Mutex::new((AdminState::default(), Instant::now())));
                let bound = admin::serve_admin(addr, shared.clone())
                    .map_err(|e| crate::RunError::Invalid(format!("admin endpoint {addr}: {e}")))?;
                tracing::info!(%bound, "admin endpoint: /healthz /readyz /metrics");
                Some(shared)
            }
            None => None,
        };
        let mut server = Self {
            host,
            config: config.clone(),
            settings: settings.clone(),
            matches,
            truth,
            figures: ServerFigures {
                rss_mb: (rss_mb(), None),
                matches: settings.matches,
                ..ServerFigures::default()
            },
            last_line: (Duration::ZERO, 0, 0, 0),
            process_cpu: cpu_time::ProcessTime::try_now().ok(),
            tracked_players: track_players.unwrap_or(0),
            pending_truth: Vec::new(),
            probe,
            others: Vec::new(),
            draining: None,
            admin,
            last_stats: SessionStats::default(),
        };
        server.publish(None);
        Ok(server)
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, UdpRunError> {
        Ok(self.host.local_addr()?)
    }

    /// The recorded truth, when players are tracked.
    pub(crate) fn truth(&self) -> Option<Arc<RwLock<Truth>>> {
        self.truth.clone()
    }

    /// The session host (its counters, the transport, the netcode.io server's drops).
    pub fn host(&self) -> &GameServer<S::Input> {
        &self.host
    }

    /// Ids (from their tokens) of the connected clients, every match.
    pub fn clients(&self) -> Vec<u64> {
        self.host.clients()
    }

    /// One frame: read the socket, handle connects and leaves, run up to four of the
    /// ticks that are due (reading the socket before each; each match on a thread of its
    /// own), send what the sessions have, and once a second log a line and send each
    /// client its link report. Returns true when ticks may still be due (the server is
    /// behind real time).
    pub fn step(&mut self) -> bool {
        // One tick at a time, reading the socket before each: a server that fell behind
        // ran several ticks in a row, and 64 clients' inputs over that long overflowed
        // the kernel's receive buffer (60% of the uplink lost, in a 5-minute run). At
        // most four per frame, so the once-a-second duties and a stop are not put off
        // for as long as the server stays behind.
        let mut ran = 0;
        while ran < MAX_TICKS_PER_STEP {
            let now = self.receive();
            if !self.tick(now) {
                break;
            }
            self.host.transmit();
            ran += 1;
        }
        self.host.transmit();
        ran == MAX_TICKS_PER_STEP
    }

    /// Reads the socket through the host, which hands the game's servers what came, and
    /// handles connects, leaves and the once-a-second line; returns the time it was read
    /// at.
    fn receive(&mut self) -> Duration {
        self.host.update();
        let now = self.host.now();
        while let Some(event) = self.host.poll_event() {
            match event {
                SessionEvent::Connected {
                    client,
                    addr,
                    match_id,
                } => self.join(client, match_id, addr, now),
                SessionEvent::Disconnected {
                    client,
                    match_id,
                    reason,
                    counters,
                } => self.leave(client, match_id, &format!("{reason:?}"), &counters),
                SessionEvent::Second(second) => self.second(now, &second),
                // With a resume grace: the player stays in the scene meanwhile.
                SessionEvent::Away { client, match_id } => {
                    tracing::info!(client_id = client, match_id, "client away")
                }
                SessionEvent::Resumed {
                    client,
                    addr,
                    match_id,
                    away,
                } => tracing::info!(
                    client_id = client,
                    %addr,
                    match_id,
                    away_ms = away.as_millis() as u64,
                    "client resumed"
                ),
            }
        }
        if self.settings.resume_grace.is_some() {
            for (_, server) in self.host.matches_mut() {
                while let Some((client, delivery, m)) = server.poll_message() {
                    // An away client's echo waits in its session for its return.
                    let _ = server.send_message(client, delivery, &m);
                }
            }
        }
        now
    }

    /// Every match's tick that is due, run together; false when none was.
    fn tick(&mut self, now: Duration) -> bool {
        let started = std::time::Instant::now();
        let work: Vec<_> = self
            .host
            .matches_mut()
            .zip(self.matches.iter_mut())
            .filter_map(|((_, server), m)| {
                let step = server.next_tick()?;
                Some((m, server, step))
            })
            .collect();
        if work.is_empty() {
            return false;
        }
        let ticked = matches::tick_all(work, now);
        self.figures.match_ticks += ticked.len() as u64;
        self.figures
            .tick_wall_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
        for t in &ticked {
            self.figures.encode_ms.extend(t.cost.encode_ms);
            self.figures.physics_ms.push(t.cost.physics_ms);
            self.figures.tick_ms.push(t.cost.tick_ms);
        }
        // The probe and the truth follow the one match of a run in one process.
        if let (Some(probe), Some(t)) = (&self.probe, ticked.first()) {
            if let Ok(mut p) = probe.lock() {
                p.server_tick(now, t.tick, &t.fed);
            }
        }
        self.record_truth(now);
        true
    }

    /// The first match's positions after its tick, into the truth.
    fn record_truth(&mut self, now: Duration) {
        let (Some(truth), Some(m)) = (&self.truth, self.matches.first()) else {
            return;
        };
        let players = (1..=self.tracked_players)
            .map(|p| pos(m.scene.player_position(p as PlayerId)))
            .collect();
        self.others.clear();
        m.scene.others(&mut self.others);
        let characters = m.characters.iter().map(|(_, s)| s.position).collect();
        self.pending_truth
            .push((players, self.others.clone(), (now, characters)));
        // Never wait for the clients reading it: a client holds the truth through its
        // step, and a server blocked behind a deep rollback stalled its clock (RTT
        // 580 ms over a 200 ms link). Rows wait here until the truth is free.
        if let Ok(mut t) = truth.try_write() {
            flush_truth(&mut t, &mut self.pending_truth);
        }
    }

    /// A client the host admitted to match `match_id`: its player (the lowest number
    /// free in the match) joins the scene, and the client is welcomed with the scene's
    /// settings.
    fn join(&mut self, id: ClientId, match_id: u32, addr: SocketAddr, now: Duration) {
        let Some(m) = self.matches.get_mut(match_id as usize) else {
            return;
        };
        let player = m.free_player();
        m.scene.add_player(player);
        m.conns.insert(id, Conn { player, since: now });
        let schema = super::schema_fingerprint(&S::schema(m.sender.setup()));
        let connected = self.host.clients().len();
        self.figures.clients_max = self.figures.clients_max.max(connected);
        let welcome = Control::Welcome {
            player,
            tick_hz: self.config.server.tick_hz,
            snapshot_hz: self.config.snapshot_hz,
            grid: self.config.grid,
            scene: super::scene_code(&self.config.scene),
            schema,
            seed: self.config.seed,
        };
        if let Err(e) = self.host.send_control(id, &welcome.encode()) {
            tracing::warn!(client_id = id, "welcome not sent: {e}");
        }
        tracing::info!(
            client_id = id,
            %addr,
            match_id,
            player,
            clients = connected,
            "client connected"
        );
        self.publish(None);
    }

    /// A client the host let go (it is out of the game's server already): its player
    /// leaves the scene and its counters join the run's. With several matches, a match
    /// whose last player left ends, and starts again empty.
    fn leave(&mut self, id: ClientId, match_id: u32, reason: &str, counters: &DepartedClient) {
        let Some(m) = self.matches.get_mut(match_id as usize) else {
            return;
        };
        let Some(c) = m.conns.remove(&id) else {
            return;
        };
        m.sender.client_left(id, counters);
        m.scene.remove_player(c.player);
        let empty = m.conns.is_empty();
        self.count_session(&counters.session);
        tracing::info!(
            client_id = id,
            match_id,
            player = c.player,
            reason,
            up_loss_pct = round2(loss_pct(&counters.session)),
            clients = self.host.clients().len(),
            "client left"
        );
        if empty && self.settings.matches > 1 && self.draining.is_none() {
            self.restart(match_id);
        }
        self.publish(None);
    }

    /// Ends match `match_id` and starts it again empty: a fresh scene and server, so
    /// nothing of the old match stays.
    fn restart(&mut self, match_id: u32) {
        match Match::<S>::new(&self.config) {
            Ok((fresh, server)) => {
                if self.host.restart_match(match_id, server).is_some() {
                    if let Some(slot) = self.matches.get_mut(match_id as usize) {
                        let ticks = slot.ticks;
                        *slot = fresh;
                        self.figures.match_restarts += 1;
                        tracing::info!(match_id, ticks, "match ended; started again empty");
                    }
                }
            }
            Err(e) => tracing::warn!(match_id, "match not restarted: {e}"),
        }
    }

    /// Stops admitting clients; the matches play out for at most the drain time.
    fn start_draining(&mut self, now: Duration) {
        if self.draining.is_none() {
            self.host.set_accepting(false);
            self.draining = Some(now);
            tracing::info!(
                clients = self.host.clients().len(),
                limit_s = self.settings.drain.as_secs_f64(),
                "draining: no new clients; the matches play out"
            );
            self.publish(None);
        }
    }

    /// Adds a client's session counters to the run's totals.
    fn count_session(&mut self, s: &ServerClientStats) {
        self.figures.ticks_starved += s.ticks_starved;
        self.figures.ticks_with_input += s.ticks_with_input;
        self.figures.inputs_late += s.inputs_late;
        self.figures.inputs_handed_late += s.inputs_handed_late;
        self.figures.packets_rejected += s.packets_rejected;
    }

    /// The once-a-second line, the admin state, and every client's link report.
    fn second(&mut self, now: Duration, second: &SessionStats) {
        let (then, ticks_then, frames_then, match_ticks_then) = self.last_line;
        let recent = &self.figures.tick_ms[ticks_then.min(self.figures.tick_ms.len())..];
        let walls = &self.figures.tick_wall_ms[frames_then.min(self.figures.tick_wall_ms.len())..];
        let elapsed = now.saturating_sub(then).as_secs_f64().max(1e-9);
        // Per match: matches restarted at different moments tick out of step, so frames
        // with a tick in them are not ticks of a match.
        let matches = f64::from(self.figures.matches.max(1));
        let ticks_per_s = (self.figures.match_ticks - match_ticks_then) as f64 / elapsed / matches;
        let wall = (
            percentile(walls, 50.0).unwrap_or(0.0),
            percentile(walls, 99.0).unwrap_or(0.0),
        );
        let netcode = self.host.transport().netcode().stats();
        let cpu_pct = self
            .process_cpu
            .as_ref()
            .and_then(|t| t.try_elapsed().ok())
            .map(|d| d.as_secs_f64() * 100.0 / now.as_secs_f64().max(1e-9));
        let tick = self.host.server().current_tick().0;
        let due = (now.as_secs_f64() * f64::from(self.config.server.tick_hz)) as u64;
        // The mean match's ticks short of real time: a restarted match's clock starts
        // afresh, so its own tick says nothing of the process's.
        let behind = due.saturating_sub((self.figures.match_ticks as f64 / matches) as u64);
        tracing::info!(
            clients = second.clients,
            tick,
            behind_ticks = behind,
            ticks_per_s = round2(ticks_per_s),
            tick_ms_p99 = round2(percentile(recent, 99.0).unwrap_or(0.0)),
            tick_wall_ms_p99 = round2(wall.1),
            datagrams_in = second.datagrams_in,
            datagrams_out = second.datagrams_out,
            dropped = second.netcode_dropped(),
            drop_reasons = netcode.drops.to_string(),
            refused = second.refused.total(),
            handshakes_evicted = netcode.evicted_crowded_source + netcode.evicted_oldest,
            cpu_pct = round2(cpu_pct.unwrap_or(f64::NAN)),
            rss_mb = round2(rss_mb().unwrap_or(f64::NAN)),
            "server"
        );
        self.last_line = (
            now,
            self.figures.tick_ms.len(),
            self.figures.tick_wall_ms.len(),
            self.figures.match_ticks,
        );
        self.publish(Some((ticks_per_s, wall)));
        let mut reports: Vec<(ClientId, Control)> = Vec::new();
        for (id, m) in (0..).zip(&self.matches) {
            let Some(server) = self.host.match_server(id) else {
                continue;
            };
            for (&client, c) in &m.conns {
                let Some(s) = server.client_stats(client) else {
                    continue;
                };
                let link = Control::Link {
                    up_expected: s.packets_expected,
                    up_received: s.packets_received.saturating_sub(s.packets_rejected),
                    down_sent: s.packets_sent,
                    down_bytes: s.bytes_sent + s.packets_sent * UDP_IP_HEADER_BYTES,
                    elapsed_ms: now.saturating_sub(c.since).as_millis() as u64,
                };
                reports.push((client, link));
            }
        }
        for (id, report) in reports {
            let _ = self.host.send_control(id, &report.encode());
        }
    }

    /// Writes the admin state, if there is an admin endpoint (the tick figures of the
    /// last second, when a second has passed).
    fn publish(&mut self, second: Option<(f64, (f64, f64))>) {
        let Some(shared) = &self.admin else {
            return;
        };
        let stats = self.host.stats();
        let Ok(mut guard) = shared.lock() else {
            return;
        };
        let (state, written) = &mut *guard;
        state.accepting = self.draining.is_none();
        state.draining = self.draining.is_some();
        state.max_clients = self.settings.max_clients;
        state.clients = (0..)
            .zip(&self.matches)
            .map(|(id, m)| (id, m.conns.len()))
            .collect();
        if let Some((ticks_per_s, wall)) = second {
            state.ticks_per_s = ticks_per_s;
            state.tick_wall_ms = wall;
        }
        state.datagrams = (stats.datagrams_in, stats.datagrams_out);
        state.bytes = (stats.bytes_in, stats.bytes_out);
        state.drops = stats
            .netcode_drops
            .iter()
            .map(|(r, n)| (format!("{r:?}"), *n))
            .collect();
        state.refused = stats.refused.total();
        state.connects = stats.connects;
        state.disconnects = stats.disconnects;
        state.timeouts = stats.timeouts;
        state.match_restarts = self.figures.match_restarts;
        state.rss_mb = rss_mb();
        *written = Instant::now();
        self.last_stats = stats;
    }

    /// Runs until `seconds` have passed, or `stop` is set: then, with a drain time, it
    /// stops admitting clients and lets the matches play out until they are empty or the
    /// drain time has passed (a second `stop` ends it at once); then it disconnects
    /// everyone.
    pub fn run(mut self, seconds: Option<f64>, stop: &AtomicBool) -> ServeOutcome<S> {
        let end = seconds.map(|s| Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX));
        loop {
            let behind = self.step();
            let now = self.host.now();
            if end.is_some_and(|e| now >= e) {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                if self.draining.is_some() || self.settings.drain.is_zero() {
                    break;
                }
                // The first signal drains; a second one ends it.
                stop.store(false, Ordering::Relaxed);
                self.start_draining(now);
            }
            if let Some(since) = self.draining {
                let played_out = self.host.clients().is_empty();
                if played_out || now.saturating_sub(since) >= self.settings.drain {
                    tracing::info!(
                        clients = self.host.clients().len(),
                        drained_s = round2(now.saturating_sub(since).as_secs_f64()),
                        "drained"
                    );
                    break;
                }
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
        // Stopping, not draining, but no match is to start again.
        let now = self.host.now();
        self.draining.get_or_insert(now);
        self.host.shutdown();
        while let Some(event) = self.host.poll_event() {
            if let SessionEvent::Disconnected {
                client,
                match_id,
                counters,
                ..
            } = event
            {
                self.leave(client, match_id, "server stopped", &counters);
            }
        }
        self.figures.seconds = now.as_secs_f64();
        self.figures.cpu_pct = self
            .process_cpu
            .as_ref()
            .and_then(|t| t.try_elapsed().ok())
            .map(|d| d.as_secs_f64() * 100.0 / now.as_secs_f64().max(1e-9));
        self.figures.rss_mb.1 = rss_mb();
        let netcode = self.host.transport().netcode().stats().clone();
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
        let session = self.host.stats();
        let server = self.host.into_server();
        let first = self.matches.into_iter().next();
        let first = first.unwrap_or_else(|| unreachable!("a server has a match"));
        ServeOutcome {
            figures: self.figures,
            sender: first.sender,
            server,
            scene: first.scene,
            netcode,
            session,
        }
    }
}

/// The truth of a run in one process: players `1..=n`, every other entity and the
/// characters, from the scene's first state at `now` on the server's clock.
fn new_truth<S: LabScene>(scene: &S, n: usize, tick_hz: u32, now: Duration) -> Arc<RwLock<Truth>> {
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
        epoch: std::time::Instant::now().checked_sub(now),
        probe: Some(Arc::new(std::sync::Mutex::new(
            crate::input_buffer::SyncProbe::new(n, tick_hz, Vec::new()),
        ))),
    };
    truth
        .characters
        .push(now, characters.iter().map(|(_, s)| s.position));
    Arc::new(RwLock::new(truth))
}

/// What a server run produced (the snapshot figures are the first match's).
pub struct ServeOutcome<S: LabScene> {
    /// What it measured.
    pub figures: ServerFigures,
    /// The snapshot encoder, with its counters.
    pub sender: SnapshotSender<S>,
    /// The game's server, with its counters.
    pub server: Server<S::Input>,
    /// The scene, with what it followed (its own metrics).
    pub scene: S,
    /// The netcode.io server's counters (handshakes, drops by reason).
    pub netcode: lagless_netcode::ServerStats,
    /// The session host's counters (clients admitted to a match, leaves, timeouts).
    pub session: SessionStats,
}

impl<S: LabScene> ServeOutcome<S> {
    /// `server.*` under `docs/metrics.md`'s names, plus the process's CPU share and memory.
    pub fn fill(&self, r: &mut Report) {
        let f = &self.figures;
        r.number("server.tick_ms_p50", percentile(&f.tick_ms, 50.0));
        r.number("server.tick_ms_p99", percentile(&f.tick_ms, 99.0));
        r.number("server.physics_ms_p99", percentile(&f.physics_ms, 99.0));
        r.number("server.encode_ms_p99", percentile(&f.encode_ms, 99.0));
        let (starved, fed) = (f.ticks_starved, f.ticks_with_input);
        r.number(
            "server.input_starved_pct",
            (starved + fed > 0).then(|| starved as f64 * 100.0 / (starved + fed) as f64),
        );
        r.set("server.inputs_late", Metric::Count(f.inputs_late));
        r.set(
            "server.inputs_handed_late",
            Metric::Count(f.inputs_handed_late),
        );
        r.set("server.packets_rejected", Metric::Count(f.packets_rejected));
        r.set("server.clients_max", Metric::Count(f.clients_max as u64));
        r.set("server.connects", Metric::Count(self.session.connects));
        r.set("server.timeouts", Metric::Count(self.session.timeouts));
        r.set(
            "server.no_such_match",
            Metric::Count(self.session.no_such_match),
        );
        r.set("server.match_restarts", Metric::Count(f.match_restarts));
        r.number("server.tick_wall_ms_p50", percentile(&f.tick_wall_ms, 50.0));
        r.number("server.tick_wall_ms_p99", percentile(&f.tick_wall_ms, 99.0));
        r.number(
            "server.ticks_per_s",
            (f.seconds > 0.0)
                .then(|| f.match_ticks as f64 / f.seconds / f64::from(f.matches.max(1))),
        );
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

/// The uplink's loss as the server counts it from the packets' sequence numbers.
fn loss_pct(s: &ServerClientStats) -> f64 {
    if s.packets_expected == 0 {
        return 0.0;
    }
    let received = s.packets_received.saturating_sub(s.packets_rejected);
    s.packets_expected.saturating_sub(received) as f64 * 100.0 / s.packets_expected as f64
}
