//! A client kept across a server restart, and one fed a snapshot whose tick was corrupted
//! on the way, plays on from the server it has: nothing keyed on the old ticks (the
//! registry's newest tick, interpolation, predicted history) pins it.
#![allow(clippy::unwrap_used)]

use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 64;
const SPEED: f32 = 3.0;
const STEP: Duration = Duration::from_millis(5);

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

/// The predicted dot (id 1): it drifts along x whatever the input, as on the server.
#[derive(Default)]
struct Drift {
    at: Option<[f32; 2]>,
}

impl Rollback for Drift {
    type Input = u8;
    type Saved = Option<[f32; 2]>;
    type Confirmed = ReplicationClient;
    fn advance(&mut self, _: Tick, _: u8) {
        if let Some(p) = &mut self.at {
            p[0] += SPEED / HZ as f32;
        }
    }
    fn save(&self) -> Option<[f32; 2]> {
        self.at
    }
    fn diverged(&self, saved: &Option<[f32; 2]>, server: &ReplicationClient) -> bool {
        let now = server.reader(1).map(|mut r| r.vec2());
        match (saved, now) {
            (Some(a), Some(b)) => (a[0] - b[0]).abs() > 0.01,
            (a, b) => a.is_some() != b.is_some(),
        }
    }
    fn load(&mut self, server: &ReplicationClient, _: Option<&Option<[f32; 2]>>) {
        self.at = server.reader(1).map(|mut r| r.vec2());
    }
}

impl PredictedWorld for Drift {
    fn pose(&self, id: u32) -> Option<Pose> {
        (id == 1).then_some(self.at?).map(|p| Pose::planar(p, 0.0))
    }
}

/// A server running two drifting dots from `x` (id 0 interpolated on the client, id 1
/// predicted), as one start of a server process.
struct Match {
    server: Server<u8>,
    x: f32,
}

impl Match {
    fn start(instance: u32, x: f32) -> Self {
        let mut config = NetConfig::new(HZ);
        config.server_session.instance = instance;
        let mut server = Server::<u8>::new(schema(), &config).unwrap();
        server.connect(1).unwrap();
        for id in 0..2 {
            server
                .spawn_with_id(id, 0, |w| {
                    w.vec2([x, id as f32]);
                    w.vec2([SPEED, 0.0]);
                })
                .unwrap();
        }
        Self { server, x }
    }
}

/// What happens to a server packet on its way down.
type Mangle = Box<dyn FnMut(&mut Vec<u8>)>;

/// One client kept for the whole run, and the server of the moment.
struct Run {
    client: Client<Drift>,
    link: Duplex,
    now: Duration,
    /// Rewrites a server packet on its way down (the corruption under test).
    mangle: Mangle,
}

impl Run {
    fn new(profile_name: &str, seed: u64) -> Self {
        let mut client = Client::new(schema(), Drift::default(), &NetConfig::new(HZ)).unwrap();
        client.set_policy(1, Policy::Predicted);
        Self {
            client,
            link: Duplex::symmetric(profile(profile_name).unwrap(), seed).unwrap(),
            now: Duration::ZERO,
            mangle: Box::new(|_| {}),
        }
    }

    /// Plays `secs` seconds against `server` (none: the server is down, and what the
    /// client sends is lost). Returns the time of the first snapshot `server` sent.
    fn play(&mut self, mut game: Option<&mut Match>, secs: f64) -> Option<Duration> {
        let until = self.now + Duration::from_secs_f64(secs);
        let mut first_sent = None;
        while self.now < until {
            let now = self.now;
            while let Some(p) = self.link.up.poll(now) {
                if let Some(g) = game.as_deref_mut() {
                    let _ = g.server.receive(1, now, &p);
                }
            }
            if let Some(g) = game.as_deref_mut() {
                g.server.update(now);
                while g.server.next_tick().is_some() {
                    g.x += SPEED / HZ as f32;
                    for id in 0..2 {
                        let at = [g.x, id as f32];
                        g.server
                            .update_entity(id, |w| {
                                w.vec2(at);
                                w.vec2([SPEED, 0.0]);
                            })
                            .unwrap();
                    }
                    g.server.send_snapshots(now).unwrap();
                }
                while let Some((_, mut p)) = g.server.poll_transmit() {
                    first_sent.get_or_insert(now);
                    (self.mangle)(&mut p);
                    self.link.down.send(now, p);
                }
            }
            while let Some(p) = self.link.down.poll(now) {
                let _ = self.client.receive(now, &p);
            }
            self.client.update(now);
            while let Some(t) = self.client.next_tick() {
                self.client.tick(t, 0);
            }
            while let Some(p) = self.client.poll_transmit(now) {
                self.link.up.send(now, p);
            }
            self.client.render(now);
            self.now += STEP;
        }
        first_sent
    }

    /// Plays on against `game` until the client shows its state (both dots within 1 m of
    /// where the server has them, in the registry, interpolated and predicted), at most
    /// `secs`; returns how long that took.
    fn until_in_play(&mut self, game: &mut Match, secs: f64) -> Option<Duration> {
        let start = self.now;
        while self.now < start + Duration::from_secs_f64(secs) {
            self.play(Some(game), 0.005);
            let near = |x: Option<f32>| x.is_some_and(|x| (x - game.x).abs() < 1.0);
            let registry = near(self.client.replication().reader(0).map(|mut r| r.vec2()[0]));
            let render = self.client.render(self.now);
            let interpolated = near(render.pose(0).map(|p| p.position[0]));
            let predicted = near(self.client.world().at.map(|p| p[0]));
            if registry && interpolated && predicted {
                return Some(self.now - start);
            }
        }
        None
    }
}

/// Seconds from the new server's first snapshot until the kept client shows its state,
/// after the old one (instance `old`, running `old_secs`) went down for half a second
/// and a new one (instance `new`) started from tick 0, its dots 200 m away.
fn restart(link: &str, old: u32, old_secs: f64, new: u32, seed: u64) -> (Option<f64>, Run) {
    let mut run = Run::new(link, seed);
    let mut first = Match::start(old, 0.0);
    run.play(Some(&mut first), old_secs);
    assert!(
        (run.client.replication().reader(0).unwrap().vec2()[0] - first.x).abs() < 1.0,
        "in play before the restart"
    );
    run.play(None, 0.5);
    let mut second = Match::start(new, -200.0);
    // The new server's first snapshot leaves with its first tick (the client keeps
    // sending, so it is connected at once).
    let sent = (0..200)
        .find_map(|_| run.play(Some(&mut second), 0.005))
        .expect("the new server sends");
    let took = run
        .until_in_play(&mut second, 30.0)
        .map(|_| (run.now - sent).as_secs_f64());
    (took, run)
}

#[test]
fn a_kept_client_plays_on_within_a_second_of_a_restarted_servers_first_snapshot() {
    for (link, seed) in ["mobile", "lossy"]
        .into_iter()
        .flat_map(|l| (1..=3).map(move |s| (l, s)))
    {
        // A long first run: the new server's ticks contradict the client's clock too.
        let (took, run) = restart(link, 0x1111, 20.0, 0x2222, seed);
        let took = took.expect("back in play");
        println!(
            "{link} seed {seed}: back in play {took:.3} s after the new server's first snapshot"
        );
        assert!(took < 1.0, "{link} seed {seed}: {took} s");
        let session = run.client.session().stats();
        assert_eq!(session.server_restarts, 1);
        assert_eq!(run.client.stats().restarts, 1);
        // The old entities went, and the new server's came, as events.
        let mut client = run.client;
        let events: Vec<EntityEvent> = std::iter::from_fn(|| client.poll_event()).collect();
        let despawned = events
            .iter()
            .filter(|e| matches!(e, EntityEvent::Despawned { .. }))
            .count();
        assert_eq!(despawned, 2, "{events:?}");
    }
}

#[test]
fn a_restart_after_a_short_run_is_recognised_by_the_server_instance() {
    // Two seconds of ticks lie well within the client's trust window: only the instance
    // tells the new server's ticks from the old one's.
    let (took, run) = restart("mobile", 7, 2.0, 8, 1);
    let took = took.expect("back in play");
    assert!(took < 1.0, "{took} s");
    assert_eq!(run.client.session().stats().server_restarts, 1);
    assert_eq!(run.client.session().stats().tick_resyncs, 0);
}

#[test]
fn one_snapshot_with_a_corrupted_tick_does_not_pin_the_registry() {
    let mut run = Run::new("broadband", 1);
    // The first packet's tick (bytes 3..7, little-endian, after the kind and the
    // sequence number) turned into 536870913 on the way, as a flipped bit does.
    let mut first = true;
    run.mangle = Box::new(move |p: &mut Vec<u8>| {
        if std::mem::take(&mut first) {
            p[3..7].copy_from_slice(&536_870_913u32.to_le_bytes());
        }
    });
    let mut game = Match::start(0, 0.0);
    // Long enough for the dots to move 9 m: a pinned registry would show them where the
    // corrupted snapshot had them.
    let mut unpinned = None;
    while run.now < Duration::from_secs(3) {
        run.play(Some(&mut game), 0.005);
        if unpinned.is_none() && run.client.replication().newest() < Some(Tick(1000)) {
            unpinned = run.client.replication().newest().map(|_| run.now);
        }
    }
    let unpinned = unpinned.expect("the registry follows the server again");
    println!("registry back on the server's ticks at {unpinned:?}");
    assert!(unpinned < Duration::from_secs(1), "{unpinned:?}");
    let took = run.until_in_play(&mut game, 0.1).expect("in play");
    assert!(took < Duration::from_millis(10), "{took:?}");
    let newest = run.client.replication().newest().unwrap();
    assert!(newest.0 < 1000, "registry at tick {newest:?}");
    assert_eq!(run.client.session().stats().tick_resyncs, 1);
}
