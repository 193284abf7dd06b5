//! The fault schedule (issue 48, item 5; `docs/sessions.md`, "The fault schedule"): 16
//! `GameClient`s through an in-process `Proxy` with the `mobile` profile; in every slot
//! one client's network changes, one freezes for 5 s and wakes, one stops ticking and is
//! dropped as idle (then joins again as a new player); once, the server is stopped without
//! a word and started again on the same port (a new instance); 200 garbage datagrams a
//! second reach the server's socket throughout. Every wait is bounded; the run stops by
//! itself.
//!
//! `five_minutes_of_faults` is the full run (ignored by default: 5 minutes; `cargo test
//! -p lagless-transport --test faults -- --ignored --nocapture`); `half_a_minute_of_faults`
//! runs each fault at least once with bounds loose enough for a loaded machine.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless_core::Tick;
use lagless_replication::{
    Client, Delivery, EntityEvent, Kind, NetConfig, Schema, Server, Spectator,
};
use lagless_transport::session::{GameClient, GameServer, LeaveReason, SessionError, SessionEvent};
use lagless_transport::{Proxy, ServerSettings, keys};

const PROTOCOL_ID: u64 = 0xfa17_5000;
const CLIENTS: u64 = 16;
const HZ: u32 = 30;
/// The tokens' connection timeout: below the 5 s freeze, so a frozen client wakes to
/// a connection the server has timed out (and kept its place for).
const TIMEOUT_S: i32 = 4;
const FREEZE: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(10);
/// Longer than the connection timeout, as the server's default is: a frozen client
/// sends nothing, keep-alives included, and must be timed out (and kept) before it
/// would be taken for idle.
const IDLE_AFTER: Duration = Duration::from_secs(6);
/// How long the server is down when it restarts.
const DOWN: Duration = Duration::from_secs(1);
const GARBAGE_PER_S: u64 = 200;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("dot").vec2("position", 100.0, 0.01))
        .build()
        .expect("schema")
}

fn token(key: &[u8; 32], id: u64, addr: SocketAddr) -> Vec<u8> {
    let token = keys::issue_token(key, PROTOCOL_ID, id, vec![addr], 60, TIMEOUT_S);
    token.expect("token").write().expect("write").to_vec()
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The shape of a run.
struct Plan {
    /// Before the first slot, for everyone to connect.
    warmup: Duration,
    /// One slot: a switch, a freeze and an idle client at its start (or the restart).
    slot: Duration,
    slots: u32,
    /// The slot in which the server restarts (and nothing else happens).
    restart_slot: u32,
    /// After the last slot, for the last faults to end.
    tail: Duration,
    /// A client out of no fault whose registry has not moved for this long is pinned.
    pinned_after: Duration,
    /// Resident memory sampled at these times.
    rss_at: (Duration, Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum FaultKind {
    Switch,
    Freeze,
    Idle,
    Restart,
}

/// One fault of one client: when it began, when its cause ended (the switch signalled,
/// the app woken, the idle client joining again, the new server bound), and when the
/// registry next moved.
#[derive(Debug, Clone)]
struct Fault {
    kind: FaultKind,
    start: Instant,
    end: Option<Instant>,
    back: Option<Instant>,
    /// The client's own measure: from the resume's first packet to the first tick.
    resume_to_play: Option<Duration>,
    /// The player entity (id, generation) when the fault began, for faults that keep it.
    player: Option<(u32, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Playing,
    Frozen(Instant),
    Idle,
}

struct Player {
    id: u64,
    c: GameClient<Spectator<u8>>,
    mode: Mode,
    newest: Option<Tick>,
    last_advance: Instant,
    /// The player entity the server named for this place, and its generation once seen.
    entity: Option<u32>,
    despawned: Vec<(u32, u32)>,
    restarts: u64,
    down_next: u32,
    up_next: u32,
    last_up: Instant,
    faults: Vec<Fault>,
    violations: Vec<String>,
    pinned_reported: bool,
}

impl Player {
    fn open_fault(&mut self) -> Option<&mut Fault> {
        self.faults.iter_mut().rev().find(|f| f.back.is_none())
    }

    fn player_entity(&self) -> Option<(u32, u32)> {
        let id = self.entity?;
        let e = self.c.client().replication().get(id)?;
        Some((id, e.generation))
    }

    fn begin(&mut self, kind: FaultKind, now: Instant) {
        let player = self.player_entity();
        self.despawned.clear();
        self.faults.push(Fault {
            kind,
            start: now,
            end: None,
            back: None,
            resume_to_play: None,
            player,
        });
    }

    /// One frame of this client, by its mode.
    fn frame(&mut self, key: &[u8; 32], proxy: SocketAddr, now: Instant) {
        match self.mode {
            Mode::Frozen(until) if now < until => return,
            Mode::Frozen(_) => {
                self.mode = Mode::Playing;
                if let Some(f) = self.open_fault() {
                    f.end = Some(now);
                }
            }
            Mode::Idle => {
                match self.c.update() {
                    Ok(()) => {}
                    Err(SessionError::Idle(_)) => {
                        // Dropped: it joins again as a new player.
                        self.c
                            .reconnect(&token(key, self.id, proxy))
                            .expect("reconnect");
                        self.mode = Mode::Playing;
                        if let Some(f) = self.open_fault() {
                            f.end = Some(now);
                        }
                    }
                    Err(e) => self.violations.push(format!("idle client ended: {e}")),
                }
                self.observe(now);
                return;
            }
            Mode::Playing => {}
        }
        if let Err(e) = self.c.step(|_| 0) {
            self.violations.push(format!("session ended: {e}"));
            // Not meant to end: join again so the run goes on, the violation kept.
            let _ = self.c.reconnect(&token(key, self.id, proxy));
        }
        // What the step brought first: a new place restarts the numbering before the
        // next message is numbered.
        self.observe(now);
        if self.c.is_ready() && now.duration_since(self.last_up) >= Duration::from_secs(1) {
            self.last_up = now;
            let n = self.up_next;
            if self
                .c
                .client_mut()
                .send_message(Delivery::Reliable, &n.to_le_bytes())
                .is_ok()
            {
                self.up_next += 1;
            }
        }
    }

    /// Reads what the client shows: the registry's newest tick, its entity events and
    /// the server's messages, and whether it started over.
    fn observe(&mut self, now: Instant) {
        let restarts = self.c.client().stats().restarts;
        if restarts != self.restarts {
            // A new place (a restarted server, a reconnection): new streams, a new player.
            self.restarts = restarts;
            self.down_next = 0;
            self.up_next = 0;
            self.entity = None;
        }
        while let Some(m) = self.c.poll_control() {
            if let Ok(b) = <[u8; 4]>::try_from(m.as_slice()) {
                self.entity = Some(u32::from_le_bytes(b));
            }
        }
        while let Some(e) = self.c.client_mut().poll_event() {
            if let EntityEvent::Despawned { id, generation } = e {
                self.despawned.push((id, generation));
            }
        }
        while let Some((_, m)) = self.c.client_mut().poll_message() {
            let n = u32::from_le_bytes(m.as_slice().try_into().unwrap_or([0xff; 4]));
            if n != self.down_next {
                self.violations
                    .push(format!("down message {n}, expected {}", self.down_next));
            }
            self.down_next = n.max(self.down_next) + 1;
        }
        let newest = self.c.client().replication().newest();
        if newest.is_some() && newest != self.newest {
            self.newest = newest;
            self.last_advance = now;
            self.pinned_reported = false;
            let resume = self.c.stats().last_back_in_play;
            let mut kept = None;
            if let Some(f) = self.faults.last_mut().filter(|f| f.back.is_none()) {
                if f.end.is_some_and(|end| now >= end) {
                    f.back = Some(now);
                    if f.kind != FaultKind::Idle {
                        f.resume_to_play = resume;
                    }
                    if matches!(f.kind, FaultKind::Switch | FaultKind::Freeze) {
                        kept = f.player;
                    }
                }
            }
            if let Some(before) = kept {
                if self.player_entity() != Some(before) || self.despawned.contains(&before) {
                    self.violations.push(format!(
                        "player {before:?} not kept: now {:?}",
                        self.player_entity()
                    ));
                }
            }
        }
    }
}

/// What the server thread saw.
#[derive(Default)]
struct ServerLog {
    violations: Vec<String>,
    leaves: Vec<(u64, LeaveReason)>,
    resumes: u64,
    connects: u64,
    garbage_dropped: u64,
    /// When the new server was bound after the restart.
    restarted: Option<Instant>,
}

/// The game server: a dot per client that moves, its id sent to the client; a reliable
/// counter to every client (away ones too) each second; the clients' counters checked.
fn run_server(
    bind: SocketAddr,
    settings: ServerSettings,
    stop: Arc<AtomicBool>,
    restart: Arc<AtomicBool>,
    log: Arc<Mutex<ServerLog>>,
) {
    let start = |bind: SocketAddr| {
        let server: Server<u8> = Server::new(schema(), &NetConfig::new(HZ)).expect("server");
        let mut host = GameServer::bind(bind, settings.clone(), server).expect("bind");
        host.set_resume_grace(Some(GRACE));
        host.set_idle_timeout(Some(IDLE_AFTER));
        host
    };
    let mut host = start(bind);
    let bind = host.local_addr().expect("addr");
    let mut dots: BTreeMap<u64, u32> = BTreeMap::new();
    let mut down_next: BTreeMap<u64, u32> = BTreeMap::new();
    let mut up_next: BTreeMap<u64, u32> = BTreeMap::new();
    let mut last_second = Instant::now();
    let mut tick = 0u32;
    while !stop.load(Ordering::Relaxed) {
        if restart.swap(false, Ordering::Relaxed) {
            // Stopped without a word, as a killed process is; back on the same port.
            let s = host.stats();
            {
                let mut l = log.lock().expect("log");
                l.garbage_dropped += s.netcode_dropped();
            }
            drop(host);
            dots.clear();
            down_next.clear();
            up_next.clear();
            std::thread::sleep(DOWN);
            host = start(bind);
            log.lock().expect("log").restarted = Some(Instant::now());
        }
        host.update();
        let mut l = log.lock().expect("log");
        while let Some(event) = host.poll_event() {
            match event {
                SessionEvent::Connected { client, .. } => {
                    l.connects += 1;
                    let dot = host
                        .server_mut()
                        .spawn(0, |w| w.vec2([0.0, 0.0]))
                        .expect("spawn");
                    dots.insert(client, dot);
                    down_next.insert(client, 0);
                    up_next.insert(client, 0);
                    let _ = host.send_control(client, &dot.to_le_bytes());
                }
                SessionEvent::Disconnected { client, reason, .. } => {
                    l.leaves.push((client, reason));
                    if let Some(dot) = dots.remove(&client) {
                        let _ = host.server_mut().despawn(dot);
                    }
                    down_next.remove(&client);
                    up_next.remove(&client);
                }
                SessionEvent::Resumed { .. } => l.resumes += 1,
                SessionEvent::Away { .. } | SessionEvent::Second(_) => {}
            }
        }
        while let Some((client, _, m)) = host.server_mut().poll_message() {
            let n = u32::from_le_bytes(m.as_slice().try_into().unwrap_or([0xff; 4]));
            let next = up_next.entry(client).or_insert(0);
            if n != *next {
                l.violations
                    .push(format!("client {client}: up message {n}, expected {next}"));
            }
            *next = n.max(*next) + 1;
        }
        if last_second.elapsed() >= Duration::from_secs(1) {
            last_second = Instant::now();
            for client in host.clients() {
                let next = down_next.entry(client).or_insert(0);
                if host
                    .server_mut()
                    .send_message(client, Delivery::Reliable, &next.to_le_bytes())
                    .is_ok()
                {
                    *next += 1;
                }
            }
        }
        drop(l);
        let now = host.now();
        while host.server_mut().next_tick().is_some() {
            tick += 1;
            for (k, &dot) in dots.values().enumerate() {
                let x = ((tick as f32 + k as f32 * 7.0) * 0.05).sin() * 10.0;
                let _ = host
                    .server_mut()
                    .update_entity(dot, |w| w.vec2([x, k as f32]));
            }
            host.server_mut().send_snapshots(now).expect("snapshots");
        }
        host.transmit();
        host.wait();
    }
    let s = host.stats();
    log.lock().expect("log").garbage_dropped += s.netcode_dropped();
}

/// Unauthenticated datagrams of every length at `to`, `GARBAGE_PER_S` a second.
fn spray(to: SocketAddr, stop: Arc<AtomicBool>) -> u64 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u8
    };
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = start.elapsed().as_millis() as u64 * GARBAGE_PER_S / 1000;
        while sent < due {
            let len = (usize::from(next()) * 5 + sent as usize) % 1300;
            let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
            // Half start like netcode.io packets (type bytes 0 to 7).
            if let Some(b) = bytes.first_mut().filter(|_| sent % 2 == 0) {
                *b %= 8;
            }
            let _ = socket.send_to(&bytes, to);
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    sent
}

/// What a run measured.
struct Figures {
    players: Vec<Player>,
    log: ServerLog,
    rss: (u64, u64),
    garbage_sent: u64,
}

fn run(plan: &Plan) -> Figures {
    let key = keys::generate_private_key().expect("key");
    // The proxy's port goes in the tokens, so it is chosen first.
    let proxy_addr = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("probe");
    let mut settings = ServerSettings::new(PROTOCOL_ID, key, CLIENTS as usize + 4);
    settings.public_addresses = vec![proxy_addr];
    // Bound once to learn a port, then the server thread binds it (and again after
    // the restart).
    let server_addr = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("probe");
    let stop = Arc::new(AtomicBool::new(false));
    let restart = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(ServerLog::default()));
    let server = {
        let (stop, restart, log) = (stop.clone(), restart.clone(), log.clone());
        std::thread::spawn(move || run_server(server_addr, settings, stop, restart, log))
    };
    let proxy = Proxy::spawn(proxy_addr, server_addr, "mobile", 48).expect("proxy");
    let garbage = {
        let stop = stop.clone();
        std::thread::spawn(move || spray(server_addr, stop))
    };

    let begun = Instant::now();
    let mut players: Vec<Player> = (1..=CLIENTS)
        .map(|id| {
            let config = NetConfig::new(HZ);
            let client = Client::new(schema(), Spectator::default(), &config).expect("client");
            let mut c = GameClient::connect(&token(&key, id, proxy_addr), client, &config)
                .expect("connect");
            c.set_token_source(move || Some(token(&key, id, proxy_addr)));
            Player {
                id,
                c,
                mode: Mode::Playing,
                newest: None,
                last_advance: begun,
                entity: None,
                despawned: Vec::new(),
                restarts: 0,
                down_next: 0,
                up_next: 0,
                last_up: begun,
                faults: Vec::new(),
                violations: Vec::new(),
                pinned_reported: false,
            }
        })
        .collect();

    let end = plan.warmup + plan.slot * plan.slots + plan.tail;
    let mut slot_done = None;
    let mut rss_first = None;
    let mut rss_last = None;
    let mut last_check = begun;
    while begun.elapsed() < end {
        let now = Instant::now();
        let t = now.duration_since(begun);
        if t >= plan.warmup {
            let slot = ((t - plan.warmup).as_millis() / plan.slot.as_millis()) as u32;
            if slot < plan.slots && slot_done != Some(slot) {
                slot_done = Some(slot);
                if slot == plan.restart_slot {
                    restart.store(true, Ordering::Relaxed);
                    for p in &mut players {
                        p.begin(FaultKind::Restart, now);
                    }
                } else {
                    let base = u64::from(slot) * 3;
                    let pick = |i: u64| ((base + i) % CLIENTS) as usize;
                    let p = &mut players[pick(0)];
                    p.begin(FaultKind::Switch, now);
                    p.c.network_changed();
                    if let Some(f) = p.open_fault() {
                        f.end = Some(now);
                    }
                    let p = &mut players[pick(1)];
                    p.begin(FaultKind::Freeze, now);
                    p.mode = Mode::Frozen(now + FREEZE);
                    let p = &mut players[pick(2)];
                    p.begin(FaultKind::Idle, now);
                    p.mode = Mode::Idle;
                }
            }
        }
        if let Some(bound) = log.lock().expect("log").restarted {
            for p in &mut players {
                if let Some(f) = p.open_fault().filter(|f| f.kind == FaultKind::Restart) {
                    f.end.get_or_insert(bound);
                }
            }
        }
        for p in &mut players {
            p.frame(&key, proxy_addr, now);
        }
        if now.duration_since(last_check) >= Duration::from_millis(250) {
            last_check = now;
            for p in &mut players {
                let in_fault = p.faults.last().is_some_and(|f| f.back.is_none());
                if p.mode == Mode::Playing
                    && !in_fault
                    && p.newest.is_some()
                    && now.duration_since(p.last_advance) > plan.pinned_after
                    && !p.pinned_reported
                {
                    p.pinned_reported = true;
                    p.violations.push(format!(
                        "pinned at {:?} for {:?}, at {:?} into the run",
                        p.newest,
                        now.duration_since(p.last_advance),
                        t
                    ));
                }
            }
        }
        if t >= plan.rss_at.0 && rss_first.is_none() {
            rss_first = Some(rss());
        }
        if t >= plan.rss_at.1 && rss_last.is_none() {
            rss_last = Some(rss());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    server.join().expect("the server thread did not panic");
    let garbage_sent = garbage.join().expect("the garbage thread did not panic");
    proxy.stop();
    for p in &mut players {
        p.c.disconnect();
    }
    let log = std::mem::take(&mut *log.lock().expect("log"));
    Figures {
        players,
        log,
        rss: (rss_first.unwrap_or(0), rss_last.unwrap_or_else(rss)),
        garbage_sent,
    }
}

/// Seconds, per fault of a kind: out of play, beyond its cause, from the resume.
type Costs = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Prints what each fault cost and returns, per kind, the seconds out of play (from the
/// fault's start to the registry's next move) and beyond its cause (from its end).
fn report(f: &Figures) -> BTreeMap<FaultKind, Costs> {
    let mut by_kind: BTreeMap<FaultKind, Costs> = BTreeMap::new();
    for p in &f.players {
        for fault in &p.faults {
            let e = by_kind.entry(fault.kind).or_default();
            if let (Some(back), Some(end)) = (fault.back, fault.end) {
                e.0.push(back.duration_since(fault.start).as_secs_f64());
                e.1.push(back.saturating_duration_since(end).as_secs_f64());
            }
            if let Some(r) = fault.resume_to_play {
                e.2.push(r.as_secs_f64());
            }
        }
    }
    let stat = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let max = v.iter().copied().fold(0.0, f64::max);
        format!("mean {mean:.2} s, max {max:.2} s")
    };
    println!(
        "fault     n   out of play (start -> moving)   after its cause (end -> moving)   resume -> first tick"
    );
    for (kind, (out, after, resume)) in &by_kind {
        println!(
            "{kind:?}  {:>3}   {}   {}   {}",
            out.len(),
            stat(out),
            stat(after),
            stat(resume)
        );
    }
    println!(
        "server: {} connects, {} resumes, leaves {:?}; garbage sent {}, netcode drops {}; rss {:.1} MB -> {:.1} MB",
        f.log.connects,
        f.log.resumes,
        f.log.leaves.iter().map(|(_, r)| *r).collect::<Vec<_>>(),
        f.garbage_sent,
        f.log.garbage_dropped,
        f.rss.0 as f64 / 1e6,
        f.rss.1 as f64 / 1e6
    );
    by_kind
}

/// The assertions every run makes; `back_within` bounds each fault's time from its end
/// to the registry moving again.
fn check(f: &Figures, back_within: Duration) {
    let mut violations: Vec<String> = f.log.violations.clone();
    for p in &f.players {
        violations.extend(p.violations.iter().map(|v| format!("client {}: {v}", p.id)));
        for fault in &p.faults {
            let Some(back) = fault.back else {
                violations.push(format!("client {}: {fault:?} never back in play", p.id));
                continue;
            };
            let end = fault.end.unwrap_or(fault.start);
            let after = back.saturating_duration_since(end);
            if after > back_within {
                violations.push(format!(
                    "client {}: {:?} back {after:?} after its end",
                    p.id, fault.kind
                ));
            }
            if fault.kind == FaultKind::Switch && back.duration_since(fault.start) > GRACE {
                violations.push(format!("client {}: switch not back within the grace", p.id));
            }
        }
    }
    // The only planned leaves are the idle ones: a switch or a freeze keeps the place.
    for (client, reason) in &f.log.leaves {
        if !matches!(reason, LeaveReason::Idle(_)) {
            violations.push(format!("client {client} left: {reason:?}"));
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(f.garbage_sent > 0 && f.log.garbage_dropped > 0);
}

#[test]
fn half_a_minute_of_faults() {
    let plan = Plan {
        warmup: Duration::from_secs(3),
        slot: Duration::from_secs(8),
        slots: 3,
        restart_slot: 1,
        tail: Duration::from_secs(3),
        // Loose for a loaded machine: the pacing of 16 clients and a server on two cores.
        pinned_after: Duration::from_secs(3),
        rss_at: (Duration::from_secs(5), Duration::from_secs(25)),
    };
    let figures = run(&plan);
    report(&figures);
    // The restart's end is the new server bound; a client notices it after
    // `DEFAULT_SWITCH_AFTER` of silence (2 s), from the last packet of the old one.
    check(&figures, Duration::from_secs(4));
    let kinds: Vec<FaultKind> = figures
        .players
        .iter()
        .flat_map(|p| p.faults.iter().map(|f| f.kind))
        .collect();
    for kind in [FaultKind::Switch, FaultKind::Freeze, FaultKind::Idle] {
        assert_eq!(kinds.iter().filter(|&&k| k == kind).count(), 2, "{kind:?}");
    }
    assert_eq!(
        kinds.iter().filter(|&&k| k == FaultKind::Restart).count(),
        CLIENTS as usize
    );
}

#[test]
#[ignore = "five minutes; run with --ignored"]
fn five_minutes_of_faults() {
    let plan = Plan {
        warmup: Duration::from_secs(5),
        slot: Duration::from_secs(10),
        slots: 29,
        restart_slot: 14,
        tail: Duration::from_secs(5),
        pinned_after: Duration::from_secs(2),
        rss_at: (Duration::from_secs(60), Duration::from_secs(299)),
    };
    let figures = run(&plan);
    let by_kind = report(&figures);
    check(&figures, Duration::from_secs(4));
    let (first, last) = figures.rss;
    assert!(first > 0);
    assert!(
        (last as f64) <= first as f64 * 1.10 && (last as f64) >= first as f64 * 0.90,
        "resident memory {first} bytes at minute 1, {last} at minute 5"
    );
    // Every slot but the restart's had its three faults.
    for kind in [FaultKind::Switch, FaultKind::Freeze, FaultKind::Idle] {
        assert_eq!(by_kind.get(&kind).map(|k| k.0.len()), Some(28), "{kind:?}");
    }
}
