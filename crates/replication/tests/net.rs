//! The high-level [`Server`] and [`Client`]: a tick rate mismatch is refused with a clear
//! error on both ends, and an entity switching between interpolated and predicted moves
//! on screen without a pop.
#![allow(clippy::unwrap_used)]

use lagless_netem::{Duplex, profile};
use lagless_replication::harness::{Harness, Peer, Play};
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

/// The server's dot drifting, and the client's frames: the rendered poses of the dot.
struct Rules {
    dot: [f32; 2],
    hz: f32,
    shown: Vec<[f32; 2]>,
}

impl Play<Drift> for Rules {
    fn server_tick(&mut self, server: &mut Server<u8>, _: TickInputs<u8>) {
        self.dot[0] += SPEED / self.hz;
        let dot = self.dot;
        let write = |w: &mut StateWriter| {
            w.vec2(dot);
            w.vec2([SPEED, 0.0]);
        };
        server.update_entity(0, write).unwrap();
    }

    fn frame(&mut self, peer: &mut Peer<Drift>, now: Duration) {
        if let Some(p) = peer.client.render(now).pose(0) {
            self.shown.push(p.planar_position());
        }
    }
}

/// One server and one client over `broadband`, the server's dot drifting.
struct Game {
    game: Harness<Drift>,
    rules: Rules,
}

impl Game {
    fn new(server_hz: u32, client_hz: u32) -> Self {
        let server = Server::<u8>::new(schema(), &NetConfig::new(server_hz)).unwrap();
        let mut game = Harness::new(server);
        let write = |w: &mut StateWriter| {
            w.vec2([0.0; 2]);
            w.vec2([SPEED, 0.0]);
        };
        game.server.spawn_with_id(0, 0, write).unwrap();
        let world = Drift {
            hz: client_hz,
            at: None,
        };
        let client = Client::new(schema(), world, &NetConfig::new(client_hz)).unwrap();
        let link = Duplex::symmetric(profile("broadband").unwrap(), 5).unwrap();
        game.connect(1, client, link).unwrap();
        let rules = Rules {
            dot: [0.0; 2],
            hz: server_hz as f32,
            shown: Vec::new(),
        };
        Self { game, rules }
    }

    /// The client.
    fn client(&mut self) -> &mut Client<Drift> {
        &mut self.game.peers[0].client
    }

    /// Plays until `until`, rendering every 5 ms; returns the rendered poses of the dot.
    fn play(&mut self, until: Duration) -> Vec<[f32; 2]> {
        self.game.drive(until, &mut self.rules);
        std::mem::take(&mut self.rules.shown)
    }

    /// What the server refused, and what the client did.
    fn errors(&self) -> (Vec<NetError>, &[NetError]) {
        let server = self.game.server_errors.iter().map(|(_, e)| e.clone());
        (server.collect(), &self.game.peers[0].errors)
    }
}

#[test]
fn a_client_at_another_tick_rate_is_refused_with_a_clear_error() {
    let mut game = Game::new(30, 60);
    game.play(Duration::from_secs(2));
    let mismatch = |ours, theirs| {
        NetError::Protocol(lagless_core::ProtocolError::TickRateMismatch { ours, theirs })
    };
    let (server, client) = game.errors();
    assert!(!server.is_empty());
    assert!(server.iter().all(|e| *e == mismatch(30, 60)));
    assert!(!client.is_empty());
    assert!(client.iter().all(|e| *e == mismatch(60, 30)));
    assert!(
        game.client().replication().is_empty(),
        "nothing got through"
    );
    let message = mismatch(60, 30).to_string();
    assert!(
        message.contains("60 Hz") && message.contains("30 Hz"),
        "{message}"
    );

    let mut same = Game::new(30, 30);
    let shown = same.play(Duration::from_secs(2));
    let (server, client) = same.errors();
    assert!(server.is_empty() && client.is_empty());
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
    let gap = game.client().world().at.unwrap()[0] - before[0];
    assert!(gap > 0.1, "predicted ahead by {gap} m");
    game.client().set_policy(0, Policy::Predicted);
    let predicted = game.play(Duration::from_secs(5));
    // The first frame goes on from where the dot was shown (a pop would cover the gap);
    // within seconds the blend is over and the shown dot is the predicted one.
    let jump = predicted[0][0] - before[0];
    assert!(jump.abs() < gap / 4.0, "jumped {jump} m of a {gap} m gap");
    let end = *predicted.last().unwrap();
    let world = game.client().world().at.unwrap();
    assert!((end[0] - world[0]).abs() < 0.005, "{end:?} vs {world:?}");

    // And back: interpolated again, from where it was shown, then smooth.
    game.client().set_policy(0, Policy::Interpolated);
    let back = game.play(Duration::from_secs(10));
    let jump = back[0][0] - end[0];
    assert!(jump.abs() < gap / 4.0, "jumped {jump} m back");
    assert!(worst_step(&back[back.len() - 100..]) < 0.01);
}
