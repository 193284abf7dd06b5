//! The high-level [`Server`] and [`Client`]: a tick rate mismatch is refused with a clear
//! error on both ends, and an entity switching between interpolated and predicted moves
//! on screen without a pop.
#![allow(clippy::unwrap_used)]

use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

/// A dot that drifts along x at 3 m/s whatever the input: the server and the predicted
/// world move it alike. Its velocity is declared, so an interpolation underrun carries it
/// along instead of holding it.
const SPEED: f32 = 3.0;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("dot")
                .vec2("position", 500.0, 0.001)
                .vec2("velocity", 10.0, 0.01)
                .velocity_of("position"),
        )
        .build()
        .unwrap()
}

struct Drift {
    hz: u32,
    at: Option<[f32; 2]>,
}

impl Rollback for Drift {
    type Input = u8;
    type Saved = Option<[f32; 2]>;
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, _: u8) {
        if let Some(p) = &mut self.at {
            p[0] += SPEED / self.hz as f32;
        }
    }
    fn save(&self) -> Option<[f32; 2]> {
        self.at
    }
    fn diverged(&self, saved: &Option<[f32; 2]>, server: &ReplicationClient) -> bool {
        let now = server.reader(0).map(|mut r| r.vec2());
        match (saved, now) {
            (Some(a), Some(b)) => (a[0] - b[0]).abs() > 0.01,
            (a, b) => a.is_some() != b.is_some(),
        }
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&Option<[f32; 2]>>) {
        self.at = server.reader(0).map(|mut r| r.vec2());
    }
}

impl PredictedWorld for Drift {
    fn pose(&self, _: u32) -> Option<Pose> {
        self.at.map(|p| Pose::planar(p, 0.0))
    }
}

/// One server and one client over `broadband`, the server's dot drifting.
struct Game {
    server: Server<u8>,
    client: Client<Drift>,
    link: Duplex,
    dot: [f32; 2],
    now: Duration,
    server_errors: Vec<NetError>,
    client_errors: Vec<NetError>,
}

impl Game {
    fn new(server_hz: u32, client_hz: u32) -> Self {
        let mut server = Server::<u8>::new(schema(), &NetConfig::new(server_hz)).unwrap();
        server.connect(1).unwrap();
        let write = |w: &mut StateWriter| {
            w.vec2([0.0; 2]);
            w.vec2([SPEED, 0.0]);
        };
        server.spawn_with_id(0, 0, write).unwrap();
        let world = Drift {
            hz: client_hz,
            at: None,
        };
        let client = Client::new(schema(), world, &NetConfig::new(client_hz)).unwrap();
        Self {
            server,
            client,
            link: Duplex::symmetric(profile("broadband").unwrap(), 5).unwrap(),
            dot: [0.0; 2],
            now: Duration::ZERO,
            server_errors: Vec::new(),
            client_errors: Vec::new(),
        }
    }

    /// Plays until `until`, rendering every 5 ms; returns the rendered poses of the dot.
    fn play(&mut self, until: Duration) -> Vec<[f32; 2]> {
        let mut shown = Vec::new();
        let hz = self.server.session().config().tick_hz as f32;
        while self.now < until {
            let now = self.now;
            while let Some(p) = self.link.up.poll(now) {
                if let Err(e) = self.server.receive(1, now, &p) {
                    self.server_errors.push(e);
                }
            }
            self.server.update(now);
            while self.server.next_tick().is_some() {
                self.dot[0] += SPEED / hz;
                let dot = self.dot;
                let write = |w: &mut StateWriter| {
                    w.vec2(dot);
                    w.vec2([SPEED, 0.0]);
                };
                self.server.update_entity(0, write).unwrap();
                self.server.send_snapshots(now).unwrap();
            }
            while let Some((_, p)) = self.server.poll_transmit() {
                self.link.down.send(now, p);
            }
            while let Some(p) = self.link.down.poll(now) {
                if let Err(e) = self.client.receive(now, &p) {
                    self.client_errors.push(e);
                }
            }
            self.client.update(now);
            while let Some(t) = self.client.next_tick() {
                self.client.tick(t, 0);
            }
            while let Some(p) = self.client.poll_transmit(now) {
                self.link.up.send(now, p);
            }
            if let Some(p) = self.client.render(now).pose(0) {
                shown.push(p.planar_position());
            }
            self.now += Duration::from_millis(5);
        }
        shown
    }
}

#[test]
fn a_client_at_another_tick_rate_is_refused_with_a_clear_error() {
    let mut game = Game::new(30, 60);
    game.play(Duration::from_secs(2));
    let mismatch = |ours, theirs| {
        NetError::Protocol(lagless_core::ProtocolError::TickRateMismatch { ours, theirs })
    };
    assert!(!game.server_errors.is_empty());
    assert!(game.server_errors.iter().all(|e| *e == mismatch(30, 60)));
    assert!(!game.client_errors.is_empty());
    assert!(game.client_errors.iter().all(|e| *e == mismatch(60, 30)));
    assert!(game.client.replication().is_empty(), "nothing got through");
    let message = mismatch(60, 30).to_string();
    assert!(
        message.contains("60 Hz") && message.contains("30 Hz"),
        "{message}"
    );

    let mut same = Game::new(30, 30);
    let shown = same.play(Duration::from_secs(2));
    assert!(same.server_errors.is_empty() && same.client_errors.is_empty());
    assert!(!shown.is_empty());
}

/// Largest distance between consecutive rendered positions, beyond the motion itself.
fn worst_step(shown: &[[f32; 2]]) -> f32 {
    let motion = SPEED * 0.005;
    shown
        .windows(2)
        .map(|w| ((w[1][0] - w[0][0]).abs() - motion).abs())
        .fold(0.0, f32::max)
}

#[test]
fn switching_between_interpolated_and_predicted_blends_without_a_pop() {
    let mut game = Game::new(60, 60);
    let interpolated = game.play(Duration::from_secs(3));
    assert!(worst_step(&interpolated[100..]) < 0.01);
    let before = *interpolated.last().unwrap();

    // Predicted, the dot is shown where it is now, not where it was: tens of cm ahead.
    let gap = game.client.world().at.unwrap()[0] - before[0];
    assert!(gap > 0.1, "predicted ahead by {gap} m");
    game.client.set_policy(0, Policy::Predicted);
    let predicted = game.play(Duration::from_secs(5));
    // The first frame goes on from where the dot was shown (a pop would cover the gap);
    // within seconds the blend is over and the shown dot is the predicted one.
    let jump = predicted[0][0] - before[0];
    assert!(jump.abs() < gap / 4.0, "jumped {jump} m of a {gap} m gap");
    let end = *predicted.last().unwrap();
    let world = game.client.world().at.unwrap();
    assert!((end[0] - world[0]).abs() < 0.005, "{end:?} vs {world:?}");

    // And back: interpolated again, from where it was shown, then smooth.
    game.client.set_policy(0, Policy::Interpolated);
    let back = game.play(Duration::from_secs(10));
    let jump = back[0][0] - end[0];
    assert!(jump.abs() < gap / 4.0, "jumped {jump} m back");
    assert!(worst_step(&back[back.len() - 100..]) < 0.01);
}
