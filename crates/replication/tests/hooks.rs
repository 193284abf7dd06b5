//! What the public [`Server`]/[`Client`] offer a game beyond entities: events framed
//! with snapshots, the essential part a client corrects its own player with when a
//! fragmented snapshot is lost, the input completed from what the player was shown,
//! what was shown handed to the predicted world, and the server's measure of a
//! client's latency.
#![allow(clippy::unwrap_used)]

use lagless_replication::*;
use std::collections::VecDeque;
use std::time::Duration;

const HZ: u32 = 30;
const OWN: u32 = 0;
const OTHER: u32 = 1;

fn schema() -> Schema {
    let dot = Kind::new("dot").vec2("position", 1000.0, 0.01);
    Schema::new().kind(dot).build().unwrap()
}

fn step(p: [f32; 2], input: u8) -> [f32; 2] {
    [p[0] + f32::from(input) * 0.1, p[1]]
}

/// The client's predicted own dot, and what the hooks told it.
#[derive(Default)]
struct World {
    at: [f32; 2],
    events: Vec<(Tick, Vec<u8>)>,
    /// The render tick each input was completed with.
    completed: Vec<Option<f64>>,
    /// The other dot as last shown, and the render tick it was shown at.
    shown: Option<(Pose, Option<f64>)>,
    /// How many entities the last registry reloaded from held.
    loaded_entities: usize,
}

impl Rollback for World {
    type Input = u8;
    type Saved = [f32; 2];
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, input: u8) {
        self.at = step(self.at, input);
    }
    fn save(&self) -> [f32; 2] {
        self.at
    }
    fn diverged(&self, saved: &[f32; 2], server: &ReplicationClient) -> bool {
        let p = server.reader(OWN).map(|mut r| r.vec2());
        p.is_some_and(|p| (p[0] - saved[0]).hypot(p[1] - saved[1]) > 0.02)
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&[f32; 2]>) {
        self.loaded_entities = server.len();
        if let Some(mut r) = server.reader(OWN) {
            self.at = r.vec2();
        }
    }
}

impl PredictedWorld for World {
    fn pose(&self, _: u32) -> Option<Pose> {
        Some(Pose::planar(self.at, 0.0))
    }
    fn show(&mut self, shown: &Render) {
        if let Some(p) = shown.pose(OTHER) {
            self.shown = Some((p, shown.render_tick));
        }
    }
    fn complete_input(&mut self, _: Tick, render_tick: Option<f64>, _: &mut u8) {
        self.completed.push(render_tick);
    }
    fn snapshot_events(&mut self, tick: Tick, bytes: &[u8], _: Option<Duration>) {
        self.events.push((tick, bytes.to_vec()));
    }
}

/// A server and one client joined by queues with a fixed one-way delay; the server's
/// own dot moves by the input, the other dot drifts, and `noise` more dots jitter
/// every tick (to make snapshots span several packets).
struct Game {
    server: Server<u8>,
    client: Client<World>,
    own: [f32; 2],
    noise: u32,
    now: Duration,
    delay: Duration,
    up: VecDeque<(Duration, Vec<u8>)>,
    down: VecDeque<(Duration, Vec<u8>)>,
}

impl Game {
    fn new(config: &NetConfig, noise: u32, delay: Duration) -> Self {
        let mut server = Server::<u8>::new(schema(), config).unwrap();
        server.connect(1).unwrap();
        for id in 0..2 + noise {
            server
                .spawn_with_id(id, 0, |w| w.vec2([id as f32, 0.0]))
                .unwrap();
        }
        server.set_owned(1, &[OWN]);
        let mut client = Client::new(schema(), World::default(), config).unwrap();
        client.set_policy(OWN, Policy::Predicted);
        Self {
            server,
            client,
            own: [0.0; 2],
            noise,
            now: Duration::ZERO,
            delay,
            up: VecDeque::new(),
            down: VecDeque::new(),
        }
    }

    /// The server's side of one clock step; returns the packets it sent.
    fn serve(&mut self) -> Vec<Vec<u8>> {
        let now = self.now;
        while self.up.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = self.up.pop_front().unwrap();
            let _ = self.server.receive(1, now, &p);
        }
        self.server.update(now);
        while let Some(step_inputs) = self.server.next_tick() {
            let input = step_inputs
                .inputs
                .first()
                .and_then(|(_, i)| *i)
                .unwrap_or(0);
            self.own = step(self.own, input);
            // The state this step made, which the snapshot carries.
            let (own, tick) = (self.own, self.server.current_tick().0 as f32);
            self.server.update_entity(OWN, |w| w.vec2(own)).unwrap();
            self.server
                .update_entity(OTHER, |w| w.vec2([1.0 + tick * 0.05, 0.0]))
                .unwrap();
            for id in 2..2 + self.noise {
                let x = ((tick * 7.3 + id as f32 * 1.7).sin() * 400.0).round() / 10.0;
                self.server
                    .update_entity(id, |w| w.vec2([x, id as f32]))
                    .unwrap();
            }
            let _ = self
                .server
                .set_snapshot_events(1, tick.to_le_bytes().to_vec());
            self.server.send_snapshots(now).unwrap();
        }
        let mut out = Vec::new();
        while let Some((_, p)) = self.server.poll_transmit() {
            out.push(p);
        }
        out
    }

    /// The client's side of one clock step, after `packets` were put on the downlink.
    fn play_client(&mut self, packets: Vec<Vec<u8>>) {
        let now = self.now;
        for p in packets {
            self.down.push_back((now + self.delay, p));
        }
        while self.down.front().is_some_and(|(t, _)| *t <= now) {
            let (_, p) = self.down.pop_front().unwrap();
            let _ = self.client.receive(now, &p);
        }
        self.client.render(now);
        self.client.update(now);
        while let Some(t) = self.client.next_tick() {
            self.client.tick(t, 1);
        }
        while let Some(p) = self.client.poll_transmit(now) {
            self.up.push_back((now + self.delay, p));
        }
        self.now += Duration::from_millis(5);
    }

    fn play(&mut self, until: Duration) {
        while self.now < until {
            let packets = self.serve();
            self.play_client(packets);
        }
    }
}

fn config() -> NetConfig {
    let mut c = NetConfig::new(HZ);
    c.snapshot_events = true;
    c.budget.max_kbps = 0.0;
    c
}

#[test]
fn events_ride_with_their_snapshot_and_are_refused_when_not_configured() {
    let mut game = Game::new(&config(), 0, Duration::from_millis(30));
    game.play(Duration::from_secs(3));
    let events = &game.client.world().events;
    assert!(events.len() > 60, "{} events", events.len());
    for (tick, bytes) in events {
        // Each snapshot's events were set on the tick the snapshot carries.
        assert_eq!(bytes[..], (tick.0 as f32).to_le_bytes(), "tick {tick:?}");
    }

    let mut plain = Server::<u8>::new(schema(), &NetConfig::new(HZ)).unwrap();
    plain.connect(1).unwrap();
    assert!(plain.set_snapshot_events(1, vec![1]).is_err());
    let mut on = Server::<u8>::new(schema(), &config()).unwrap();
    assert!(
        on.set_snapshot_events(7, vec![1]).is_err(),
        "unknown client"
    );
    on.connect(7).unwrap();
    let too_big = vec![0; MAX_SNAPSHOT_EVENT_BYTES + 1];
    assert!(on.set_snapshot_events(7, too_big).is_err());
}

#[test]
fn a_lost_fragment_still_corrects_the_own_player_from_the_essential_part() {
    let mut game = Game::new(&config(), 400, Duration::ZERO);
    game.play(Duration::from_secs(2));
    assert_eq!(
        game.client.stats().essential_used,
        0,
        "nothing was lost yet"
    );
    let before = game.client.world().at;
    assert!(
        (before[0] - game.own[0]).abs() < 1.0,
        "{before:?} {:?}",
        game.own
    );

    // The server moves the own dot where no prediction goes, and a fragment of the next
    // snapshot is lost: the full snapshot cannot complete.
    game.own = [500.0, 500.0];
    let mut packets = Vec::new();
    for _ in 0..100 {
        packets = game.serve();
        if packets.len() >= 2 {
            break;
        }
        game.play_client(packets.clone());
    }
    assert!(packets.len() >= 2, "the snapshot spans several packets");
    packets.pop();
    game.play_client(packets);
    // The essential part is taken at the client's next tick (within a few 5 ms frames:
    // the clock may be running slow while it gives back lead).
    for _ in 0..20 {
        if game.client.stats().essential_used > 0 {
            break;
        }
        game.play_client(Vec::new());
    }
    let after = game.client.world().at;
    assert_eq!(game.client.stats().essential_used, 1);
    assert!(
        (after[0] - 500.0).abs() < 2.0 && (after[1] - 500.0).abs() < 0.1,
        "the own dot is at {after:?}, not corrected"
    );
    // The world reloaded from everything the client knows, not from the own dot alone:
    // a world that reads the others when it reloads (a car and the ball) finds them.
    let held = game.client.replication().len();
    assert!(held > 2);
    assert_eq!(game.client.world().loaded_entities, held);
}

#[test]
fn inputs_are_completed_with_what_the_player_was_shown() {
    let mut game = Game::new(&config(), 0, Duration::from_millis(40));
    game.play(Duration::from_secs(3));
    let world = game.client.world();
    let (pose, shown_at) = world.shown.unwrap();
    // The world was shown the other dot where the server had it at the render tick, and
    // inputs were stamped with the render tick the player saw, climbing with time.
    let expected = 1.0 + shown_at.unwrap() as f32 * 0.05;
    assert!(
        (pose.position[0] - expected).abs() < 0.05,
        "{pose:?} {expected}"
    );
    // The newest input was completed at most a tick's worth of frames before the end.
    let last = world.completed.last().unwrap().unwrap();
    assert!(last <= shown_at.unwrap() && last > shown_at.unwrap() - 1.0);
    let claimed: Vec<f64> = world.completed.iter().filter_map(|r| *r).collect();
    assert!(claimed.len() > 50);
    assert!(claimed.windows(2).all(|w| w[1] >= w[0] - 1.0));
    assert!(claimed.last().unwrap() > &60.0);
}

#[test]
fn the_server_measures_each_clients_latency() {
    let mut game = Game::new(&config(), 0, Duration::from_millis(50));
    assert!(game.server.latency(9).is_none());
    let early = game.server.latency(1).unwrap();
    assert_eq!(early.rtt, None);
    game.play(Duration::from_secs(4));
    let l = game.server.latency(1).unwrap();
    let rtt = l.rtt.unwrap();
    // 100 ms on the wire, plus up to a clock step each way and the wait for the next
    // input packet to carry the acknowledgement.
    assert!(
        rtt >= Duration::from_millis(100) && rtt <= Duration::from_millis(160),
        "{rtt:?}"
    );
    assert!(l.input_slack.is_some());
    assert_eq!(l.tick, Duration::from_secs(1) / HZ);
    assert_eq!(l.snapshot_interval, l.tick);
}
