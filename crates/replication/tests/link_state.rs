//! The public [`Client`]'s link state through an outage of both directions: it reports
//! the interruption and the way back as events and stats, and past its prediction
//! horizon it stops moving the player, so client and server still agree when the link
//! returns (a client predicting on blind walks the player away from the server).
#![allow(clippy::unwrap_used)]

use lagless_core::PredictionConfig;
use lagless_netem::{Direction, Duplex, Outage, OutageMode, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 60;
/// Metres a second the player walks while its key is down.
const SPEED: f32 = 3.0;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("player").vec2("position", 500.0, 0.001))
        .build()
        .unwrap()
}

/// The client's prediction of its player: walks along x while input 1 is held.
#[derive(Default)]
struct Walker {
    x: Option<f32>,
}

impl Rollback for Walker {
    type Input = u8;
    type Saved = Option<f32>;
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, input: u8) {
        if let Some(x) = &mut self.x {
            *x += f32::from(input) * SPEED / HZ as f32;
        }
    }
    fn save(&self) -> Option<f32> {
        self.x
    }
    fn diverged(&self, saved: &Option<f32>, server: &ReplicationClient) -> bool {
        let now = server.reader(0).map(|mut r| r.vec2()[0]);
        match (saved, now) {
            (Some(a), Some(b)) => (a - b).abs() > 0.005,
            (a, b) => a.is_some() != b.is_some(),
        }
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&Option<f32>>) {
        self.x = server.reader(0).map(|mut r| r.vec2()[0]);
    }
}

impl PredictedWorld for Walker {
    fn pose(&self, _: u32) -> Option<Pose> {
        self.x.map(|x| Pose::planar([x, 0.0], 0.0))
    }
}

/// What one run showed.
struct Run {
    events: Vec<LinkEvent>,
    stats: ConnectionStats,
    /// Reconciliations that reloaded the world.
    resyncs: u64,
    /// (seconds, shown x minus the server's x) per 10 ms.
    errors: Vec<(f64, f32)>,
}

/// 12 s of a player holding its key over `broadband`, both directions out from 4 s for
/// 3 s (held packets arrive when it ends), with `link` on the client.
fn run(link: ConnectionConfig) -> Run {
    run_with(link, PredictionConfig::default())
}

/// [`run`] with `prediction`'s history and replay bounds.
fn run_with(link: ConnectionConfig, prediction: PredictionConfig) -> Run {
    let mut config = NetConfig::new(HZ);
    config.link = link;
    config.prediction = prediction;
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    server.connect(1).unwrap();
    server.spawn_with_id(0, 0, |w| w.vec2([0.0; 2])).unwrap();
    server.set_owned(1, &[0]);
    let mut client = Client::new(schema(), Walker::default(), &config).unwrap();
    client.set_policy(0, Policy::Predicted);
    let mut net = Duplex::symmetric(profile("broadband").unwrap(), 3).unwrap();
    let outage = Outage {
        start: Duration::from_secs(4),
        duration: Duration::from_secs(3),
        mode: OutageMode::Hold,
    };
    net.add_outage(outage, Direction::Both);
    let mut x = 0.0f32;
    let mut out = Run {
        events: Vec::new(),
        stats: ConnectionStats::default(),
        resyncs: 0,
        errors: Vec::new(),
    };
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(12) {
        while let Some(p) = net.up.poll(now) {
            let _ = server.receive(1, now, &p);
        }
        server.update(now);
        while let Some(tick) = server.next_tick() {
            for (_, input) in &tick.inputs {
                x += f32::from(input.unwrap_or(0)) * SPEED / HZ as f32;
            }
            server.update_entity(0, |w| w.vec2([x, 0.0])).unwrap();
            server.send_snapshots(now).unwrap();
        }
        while let Some((_, p)) = server.poll_transmit() {
            net.down.send(now, p);
        }
        while let Some(p) = net.down.poll(now) {
            let _ = client.receive(now, &p);
        }
        client.update(now);
        while let Some(t) = client.next_tick() {
            client.tick(t, 1);
        }
        while let Some(p) = client.poll_transmit(now) {
            net.up.send(now, p);
        }
        while let Some(e) = client.poll_link_event() {
            out.events.push(e);
        }
        if let Some(p) = client.render(now).pose(0) {
            out.errors
                .push((now.as_secs_f64(), p.planar_position()[0] - x));
        }
        now += Duration::from_millis(10);
    }
    out.stats = client.stats().link;
    out.resyncs = client.prediction_stats().resyncs;
    out
}

fn worst_error(r: &Run, from: f64, to: f64) -> f32 {
    r.errors
        .iter()
        .filter(|(t, _)| (from..to).contains(t))
        .map(|(_, e)| e.abs())
        .fold(0.0, f32::max)
}

#[test]
fn an_outage_is_reported_and_the_horizon_keeps_both_ends_together() {
    let r = run(ConnectionConfig::default());
    let states: Vec<LinkState> = r.events.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        [
            LinkState::Interrupted,
            LinkState::Recovering,
            LinkState::Live
        ],
        "{:?}",
        r.events
    );
    let secs = |d: Duration| d.as_secs_f64();
    let (interrupted, recovering, live) = (r.events[0].at, r.events[1].at, r.events[2].at);
    // Called interrupted half a second into the silence, back when the link is.
    assert!((4.4..4.7).contains(&secs(interrupted)), "{interrupted:?}");
    assert!((7.0..7.2).contains(&secs(recovering)), "{recovering:?}");
    // Live once a snapshot sent after the return is applied, within a round trip or so.
    assert!(secs(live) - secs(recovering) < 0.5, "{live:?}");
    assert_eq!(r.stats.interruptions, 1);
    assert!(
        (2.9..3.2).contains(&secs(r.stats.interrupted)),
        "{:?}",
        r.stats
    );
    assert!(r.stats.inputs_withheld > 100, "{:?}", r.stats);
    // The client shows its player ahead of the server by its lead: that gap before the
    // outage is the yardstick. Both ends stood still past the horizon: no more than about
    // one horizon of walk beyond it at any moment, and back to it a second after the
    // return.
    let steady = worst_error(&r, 2.0, 4.0);
    let during = worst_error(&r, 4.0, 8.0);
    assert!(
        during < steady + 1.5,
        "{during} m during the outage ({steady})"
    );
    let after = worst_error(&r, 8.0, 12.0);
    assert!(
        after < steady + 0.05,
        "{after} m a second after the return ({steady})"
    );

    // Predicting on blind: the player walks 3 s ahead of a server that heard nothing.
    let blind = run(ConnectionConfig {
        prediction_horizon: None,
        ..ConnectionConfig::default()
    });
    assert_eq!(blind.stats.inputs_withheld, 0);
    let off = worst_error(&blind, 4.0, 8.0);
    assert!(
        off > 5.0,
        "{off} m: predicting on blind walks away from the server"
    );
}

#[test]
fn what_the_link_held_through_an_outage_drains_without_reloading_the_world_from_each() {
    // A short history (the mobile shooter article's 32 ticks at 30 Hz is a second): every
    // state the link held through the 3 s outage is older than it when it arrives.
    let short = PredictionConfig {
        history_ticks: 32,
        ..PredictionConfig::default()
    };
    let r = run_with(ConnectionConfig::default(), short);
    assert!(r.resyncs <= 1, "{} resyncs for one outage", r.resyncs);
    let steady = worst_error(&r, 2.0, 4.0);
    let after = worst_error(&r, 8.0, 12.0);
    assert!(
        after < steady + 0.05,
        "{after} m a second after the return ({steady})"
    );
}
