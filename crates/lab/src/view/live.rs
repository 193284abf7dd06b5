//! The run behind `lagless view`: the runner's `Sim` stepped from a real clock on a
//! thread of its own, turning knobs and taking keys between steps, and sending every
//! client frame to the pages watching.

use super::protocol::{Command, FRAME_VERSION, FrameWriter, Knob, policy_name};
use crate::config::{NetOverrides, RunConfig};
use crate::metrics::{Metric, Report};
use crate::runner::Sim;
use crate::scene::{Keys, LabScene};
use lagless_core::SmoothingConfig;
use lagless_core::interpolation::DelayPolicy;
use serde_json::json;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// Without a key for this long, the scripted driver takes over again.
pub const IDLE_AFTER: Duration = Duration::from_secs(2);
/// How often the plots get a point.
const STATS_EVERY: Duration = Duration::from_millis(250);
/// How much of the server's record of the bodies other than players the run keeps: the
/// interpolated frames look up the last half second or so; the rest would only grow
/// (900 cubes: 40 MB a minute). The players' record is kept whole for `render.*`.
const KEEP_OTHERS: Duration = Duration::from_secs(10);
/// The longest the loop sleeps between steps: packet delivery is this precise.
const STEP_SLEEP: Duration = Duration::from_millis(1);

/// What goes to one page.
#[derive(Clone)]
pub enum Outgoing {
    /// A binary frame (see [`super::protocol::FrameWriter`]).
    Frame(Arc<Vec<u8>>),
    /// A JSON text: stats, knob values, errors.
    Text(Arc<String>),
}

/// What the connections ask of the run.
pub enum Request {
    /// Send every frame and text to this page from now on (it is dropped when full or
    /// gone, so a slow page loses frames instead of growing a queue).
    Subscribe(SyncSender<Outgoing>),
    /// A command from a page, already checked.
    Command(Command),
    /// The metrics of the run so far, as `lagless run --json` writes them.
    Metrics(SyncSender<String>),
}

/// The knobs as they stand.
struct Knobs {
    profile: String,
    net: NetOverrides,
    prediction: bool,
    smoothing: bool,
    half_life: Duration,
    snapshot_hz: u32,
    interpolation: DelayPolicy,
}

impl Knobs {
    fn smoothing_config(&self, base: SmoothingConfig) -> SmoothingConfig {
        SmoothingConfig {
            half_life: if self.smoothing {
                self.half_life
            } else {
                Duration::ZERO
            },
            ..base
        }
    }
}

/// Figures since the last plot point.
#[derive(Default)]
struct Window {
    /// Newest rendered state tick already judged.
    judged: u32,
    errors: Vec<f64>,
    jerks: Vec<f64>,
    down_bytes: u64,
    underruns: u64,
    starved: u64,
    ticks: u64,
}

/// Runs scene `S` for `config` in real time until `requests` closes, sending `ready`
/// once the world is built (or why it could not be).
pub fn run<S: LabScene>(
    config: RunConfig,
    requests: Receiver<Request>,
    ready: SyncSender<Result<(), String>>,
) {
    // The sim borrows its settings for its whole life, which here is the process's.
    let config: &'static RunConfig = Box::leak(Box::new(config));
    let sim = match Sim::<S>::new(config) {
        Ok(sim) => sim,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    Live::new(config, sim).serve(&requests);
}

struct Live<S: LabScene> {
    config: &'static RunConfig,
    sim: Sim<'static, S>,
    knobs: Knobs,
    pages: Vec<SyncSender<Outgoing>>,
    start: Instant,
    /// When the page last sent keys, and the number of that change.
    keys_at: Option<Instant>,
    keys: Keys,
    key_seq: u32,
    /// Client ticks already sent as frames.
    sent_tick: u32,
    window: Window,
    next_stats: Duration,
    /// Every knob turned, with the time, for the metrics JSON.
    changes: Vec<String>,
    scratch: Vec<u8>,
    predicted: Vec<[f32; 3]>,
    dr: Vec<lagless_replication::deadreckoning::Shown>,
    characters: Vec<(u32, lagless_replication::deadreckoning::CharacterState)>,
}

impl<S: LabScene> Live<S> {
    fn new(config: &'static RunConfig, mut sim: Sim<'static, S>) -> Self {
        for c in &mut sim.clients {
            c.keep_shown = true;
        }
        Self {
            config,
            knobs: Knobs {
                profile: config.profile.clone(),
                net: config.net.clone(),
                prediction: config.prediction,
                smoothing: !config.smoothing.half_life.is_zero(),
                half_life: if config.smoothing.half_life.is_zero() {
                    SmoothingConfig::default().half_life
                } else {
                    config.smoothing.half_life
                },
                snapshot_hz: config.snapshot_hz,
                interpolation: config.interpolation,
            },
            sim,
            pages: Vec::new(),
            start: Instant::now(),
            keys_at: None,
            keys: Keys::default(),
            key_seq: 0,
            sent_tick: 0,
            window: Window::default(),
            next_stats: STATS_EVERY,
            changes: Vec::new(),
            scratch: Vec::new(),
            predicted: Vec::new(),
            dr: Vec::new(),
            characters: Vec::new(),
        }
    }

    /// Steps the run at the real clock, between requests, until every sender is gone.
    fn serve(&mut self, requests: &Receiver<Request>) {
        loop {
            match requests.recv_timeout(STEP_SLEEP) {
                Ok(r) => self.handle(r),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while let Ok(r) = requests.try_recv() {
                self.handle(r);
            }
            let now = self.start.elapsed();
            self.drive_keys();
            if let Err(e) = self.sim.step(now) {
                self.broadcast_text(json!({"type": "error", "message": e.to_string()}));
            }
            self.after_step(now);
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Subscribe(page) => {
                let hello = self.hello();
                let knobs = self.knobs_json();
                for text in [hello, knobs] {
                    let _ = page.try_send(Outgoing::Text(Arc::new(text.to_string())));
                }
                self.pages.push(page);
            }
            Request::Command(Command::Keys { keys, seq }) => {
                self.keys = keys;
                self.key_seq = seq;
                self.keys_at = Some(Instant::now());
                self.drive_keys();
            }
            Request::Command(Command::Knob(knob)) => {
                let now = self.start.elapsed();
                match self.turn(&knob) {
                    Ok(()) => {
                        self.changes
                            .push(format!("{:.1}s {knob:?}", now.as_secs_f64()));
                        self.broadcast_text(self.knobs_json());
                    }
                    Err(e) => self.broadcast_text(json!({"type": "error", "message": e})),
                }
            }
            Request::Metrics(reply) => {
                let _ = reply.try_send(self.metrics().to_json().to_string());
            }
        }
    }

    /// The held keys drive the player until [`IDLE_AFTER`] passes with none held.
    fn drive_keys(&mut self) {
        let held = self.keys != Keys::default();
        let recent = self.keys_at.is_some_and(|t| t.elapsed() < IDLE_AFTER);
        let manual = (held || recent)
            .then(|| S::input_from_keys(self.keys))
            .flatten();
        if let Some(c) = self.sim.clients.first_mut() {
            c.manual = manual;
        }
    }

    /// Applies one knob to the run.
    fn turn(&mut self, knob: &Knob) -> Result<(), String> {
        let k = &mut self.knobs;
        match knob {
            Knob::Profile(p) => {
                k.profile.clone_from(p);
                k.net = NetOverrides::default();
            }
            Knob::DelayMs(ms) => k.net.delay_ms = Some(*ms),
            Knob::JitterMs(ms) => k.net.jitter_ms = Some(*ms),
            Knob::LossPct(pct) => k.net.loss_pct = Some(*pct),
            Knob::Prediction(on) => k.prediction = *on,
            Knob::Smoothing(on) => k.smoothing = *on,
            Knob::HalfLifeMs(ms) => k.half_life = Duration::from_secs_f64(ms / 1000.0),
            Knob::SnapshotHz(hz) => k.snapshot_hz = *hz,
            Knob::Interpolation(p) => k.interpolation = *p,
        }
        match knob {
            Knob::Profile(_) | Knob::DelayMs(_) | Knob::JitterMs(_) | Knob::LossPct(_) => {
                let base = lagless_netem::profile(&k.profile)
                    .ok_or_else(|| format!("unknown profile {:?}", k.profile))?;
                let (up, down) = k.net.apply(&base);
                for c in &mut self.sim.clients {
                    c.link
                        .reconfigure(up.clone(), down.clone())
                        .map_err(|e| e.to_string())?;
                }
            }
            Knob::Prediction(_) | Knob::Smoothing(_) | Knob::HalfLifeMs(_) => {
                let smoothing = k.smoothing_config(self.config.smoothing);
                for c in &mut self.sim.clients {
                    c.set_prediction(k.prediction, smoothing);
                    c.set_smoothing(smoothing);
                }
            }
            Knob::SnapshotHz(hz) => {
                let tick_hz = self.config.server.tick_hz;
                let interval = (f64::from(tick_hz) / f64::from(*hz)).round().max(1.0) as u32;
                self.sim.set_snapshot_interval(interval);
            }
            Knob::Interpolation(p) => {
                for c in &mut self.sim.clients {
                    c.set_interpolation(self.config, *p);
                }
            }
        }
        Ok(())
    }

    /// The run's metrics so far, with the knob changes that shaped it.
    fn metrics(&mut self) -> Report {
        let wall = self.start.elapsed();
        // Rates are over the time the run has had, not the day it may last; only whole
        // seconds count in the per-second figures, so at least one.
        self.sim.seconds = wall.as_secs_f64().max(1.0);
        let (mut report, _) = self.sim.report(wall);
        report.set("view.knob_changes", Metric::Text(self.changes.join("; ")));
        report
    }

    /// What the page needs once: the scene, the players, the bounds.
    fn hello(&self) -> serde_json::Value {
        let mut boxes = Vec::new();
        self.sim.scene.obstacles(&mut boxes);
        let obstacles: Vec<[f32; 4]> = boxes
            .iter()
            .map(|(c, h)| [c[0], c[1], h[0], h[1]])
            .collect();
        json!({
            "obstacles": obstacles,
            "type": "hello",
            "scene": self.config.scene,
            "tick_hz": self.config.server.tick_hz,
            "players": self.config.clients,
            "profiles": lagless_netem::PROFILE_NAMES,
            "idle_after_ms": IDLE_AFTER.as_millis() as u64,
        })
    }

    /// The knobs as they stand, with the link they make.
    fn knobs_json(&self) -> serde_json::Value {
        let k = &self.knobs;
        let link = self
            .sim
            .clients
            .first()
            .map(|c| c.link.down.config().clone());
        let (delay, jitter, loss) = link.map_or((0.0, 0.0, 0.0), |l| {
            let jitter = match l.jitter {
                lagless_netem::Jitter::None => Duration::ZERO,
                lagless_netem::Jitter::Normal { std_dev } => std_dev,
                lagless_netem::Jitter::Uniform { max } => max,
            };
            (
                l.delay.as_secs_f64() * 1000.0,
                jitter.as_secs_f64() * 1000.0,
                l.loss.mean_loss() * 100.0,
            )
        });
        json!({
            "type": "knobs",
            "profile": k.profile,
            "delay_ms": delay,
            "jitter_ms": jitter,
            "loss_pct": loss,
            "prediction": k.prediction,
            "smoothing": k.smoothing,
            "half_life_ms": k.half_life.as_secs_f64() * 1000.0,
            "snapshot_hz": k.snapshot_hz,
            "interpolation": policy_name(&k.interpolation),
        })
    }

    fn broadcast(&mut self, out: Outgoing) {
        self.pages.retain(|p| match p.try_send(out.clone()) {
            Ok(()) | Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => false,
        });
    }

    fn broadcast_text(&mut self, value: serde_json::Value) {
        self.broadcast(Outgoing::Text(Arc::new(value.to_string())));
    }

    /// After a step: a frame for every new client tick, a plot point now and then.
    fn after_step(&mut self, now: Duration) {
        let Some(tick) = self
            .sim
            .clients
            .first()
            .map(|c| c.session().current_tick().0)
        else {
            return;
        };
        if tick != self.sent_tick {
            self.sent_tick = tick;
            self.judge();
            if !self.pages.is_empty() {
                let frame = self.frame(now);
                self.broadcast(Outgoing::Frame(Arc::new(frame)));
            }
        }
        if now >= self.next_stats {
            self.next_stats = now + STATS_EVERY;
            self.forget_old_truth();
            let stats = self.stats(now);
            self.broadcast_text(stats);
        }
    }

    /// Forgets the bodies' positions older than [`KEEP_OTHERS`].
    fn forget_old_truth(&mut self) {
        let keep = KEEP_OTHERS.as_secs() as usize * self.config.server.tick_hz as usize;
        let tick = self.sim.server.current_tick().0 as usize;
        // Once twice as much is held, so each position is moved at most once.
        for track in &mut self.sim.auth.others {
            if track.len() - track.first() > 2 * keep {
                track.forget_before(tick.saturating_sub(keep));
            }
        }
    }

    /// Measures the new rendered frames of the first client against the truth, as
    /// `render.error_cm_*` and `render.jerk_cm_*` do.
    fn judge(&mut self) {
        let Some(c) = self.sim.clients.first() else {
            return;
        };
        let Some(track) = self.sim.auth.players.first() else {
            return;
        };
        let w = &mut self.window;
        let from = w.judged;
        let mut prev: Option<(u32, [f32; 3], [f32; 3])> = None;
        for (&t, frame) in c.rendered.range(from.saturating_sub(1)..) {
            let Some(&truth) = track.get(t as usize).filter(|x| x[0].is_finite()) else {
                prev = None;
                continue;
            };
            if t > from {
                w.errors
                    .push(crate::remote_view::dist_cm(frame.position, truth));
                w.judged = t;
            }
            if let Some((pt, pp, ptruth)) = prev {
                if pt + 1 == t && t > from {
                    let shown = [0, 1, 2].map(|i| frame.position[i] - pp[i]);
                    let actual = [0, 1, 2].map(|i| truth[i] - ptruth[i]);
                    w.jerks.push(crate::remote_view::dist_cm(shown, actual));
                }
            }
            prev = Some((t, frame.position, truth));
        }
    }

    /// One plot point: the figures since the last.
    fn stats(&mut self, now: Duration) -> serde_json::Value {
        let Some(c) = self.sim.clients.first() else {
            return json!({"type": "stats"});
        };
        let w = &mut self.window;
        let secs = STATS_EVERY.as_secs_f64();
        let max = |v: &[f64]| {
            v.iter()
                .copied()
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
        };
        let underruns = c.interpolation_stats().underruns();
        let server = self.sim.server.client_stats(c.id);
        let (starved, fed) = server.map_or((0, 0), |s| (s.ticks_starved, s.ticks_with_input));
        let ticks = starved + fed;
        let starved_pct = (ticks > w.ticks)
            .then(|| 100.0 * starved.saturating_sub(w.starved) as f64 / (ticks - w.ticks) as f64);
        let value = json!({
            "type": "stats",
            "t": now.as_secs_f64(),
            "error_cm": max(&w.errors),
            "jerk_cm": max(&w.jerks),
            "down_kbps": c.down_bytes.saturating_sub(w.down_bytes) as f64 * 8.0 / 1000.0 / secs,
            "interp_delay_ms": c.interpolation_delay().map(|d| d.as_secs_f64() * 1000.0),
            "underruns": underruns.saturating_sub(w.underruns),
            "starved_pct": starved_pct,
            "manual": c.manual.is_some(),
        });
        w.errors.clear();
        w.jerks.clear();
        w.down_bytes = c.down_bytes;
        w.underruns = underruns;
        w.starved = starved;
        w.ticks = ticks;
        value
    }

    /// The newest client frame, for the three panels (layout: `page.html`, `readFrame`).
    fn frame(&mut self, now: Duration) -> Vec<u8> {
        let mut w = FrameWriter::new(std::mem::take(&mut self.scratch)).on_ground(S::GROUND_AXES);
        let sim = &mut self.sim;
        let nan = [f32::NAN; 3];
        let c = &mut sim.clients[0];
        let prediction_on = c.predicted_world().is_some();
        let flags = u8::from(prediction_on)
            | u8::from(c.manual.is_some()) << 1
            | u8::from(self.knobs.smoothing) << 2;
        w.num(FRAME_VERSION);
        w.num(sim.server.current_tick().0 as f32);
        w.num(c.session().current_tick().0 as f32);
        w.num(now.as_secs_f32());
        w.num(f32::from(flags));
        w.num(self.key_seq as f32);
        w.num(c.player as f32);
        // The server: every player, then every other entity.
        w.points(
            sim.auth
                .players
                .iter()
                .map(|t| t.last().copied().unwrap_or(nan)),
        );
        w.points(
            sim.auth
                .others
                .iter()
                .map(|t| t.last().copied().unwrap_or(nan)),
        );
        // The client as lagless shows it: the own player rendered, and before smoothing.
        let own = c.rendered.last_key_value().map_or(nan, |(_, f)| f.position);
        w.xz(own);
        let mut raw = nan;
        self.predicted.clear();
        let mut others = c.last_shown.clone();
        if let (Some(_), Some(world)) = (c.present(), c.predicted_world()) {
            if let Some(seen) = S::predicted(world) {
                raw = S::seen_pose(&seen).position;
            }
            S::predicted_positions(world, &mut self.predicted);
        }
        c.render_others(&mut others);
        w.xz(raw);
        w.points(others.iter().map(|p| p.position));
        w.points(self.predicted.iter().copied());
        // The same client with prediction and smoothing off: the newest server state of
        // the own player, everything else interpolated.
        w.xz(c.view.as_ref().map_or(nan, |v| S::seen_pose(v).position));
        w.points(c.last_shown.iter().map(|p| p.position));
        // Characters shown by dead reckoning (walkers), where they are drawn and the
        // point each is steered through; the same in both client panels.
        self.dr.clear();
        if let Some(dr) = c.dead_reckoning() {
            self.dr.extend(dr.shown_all(now).map(|(_, s)| s));
        }
        w.points(self.dr.iter().map(|s| s.position));
        w.points(self.dr.iter().map(|s| s.predicted_point));
        // Walking characters on the server (they are not among the others).
        self.characters.clear();
        sim.scene.characters(&mut self.characters);
        w.points(self.characters.iter().map(|(_, s)| s.position));
        let bytes = w.finish();
        self.scratch = Vec::with_capacity(bytes.len());
        bytes
    }
}
