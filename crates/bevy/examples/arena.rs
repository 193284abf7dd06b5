//! A two-player arena in Bevy on lagless: players move, a server-owned coin is picked up,
//! despawned and respawned, scores count. Headless, over the emulated `mobile` link: a
//! server and two clients, or a host playing in the server's app and two remote clients.
//! `cargo run --release -p lagless-bevy --example arena`
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::{collections::BTreeMap, time::Duration};

pub(crate) const HZ: u32 = 30;
/// Where coins appear in turn: near the origin, which every bot passes every 4 s.
pub(crate) const COINS: [[f32; 2]; 4] = [[0.0, 0.5], [0.5, 0.0], [0.0, -0.5], [-0.5, 0.0]];

#[derive(Component, Default)]
pub(crate) struct Player;
#[derive(Component, Default)]
pub(crate) struct Coin;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub(crate) struct Position(pub Vec2);
#[derive(Component, Clone, Copy, Default, Debug, PartialEq)]
pub(crate) struct Score(pub i32);

net_component!(Position, vec2("position", 50.0, 0.01)); // ±50 m at 1 cm
net_component!(Score, int("score", 0, 10_000));

/// The game's rule, the same on both ends. The input is a bit set: right, left, up, down.
pub(crate) fn step(p: Vec2, input: u8) -> Vec2 {
    let on = |bit: u8| f32::from(u8::from(input & bit != 0));
    let v = Vec2::new(on(1) - on(2), on(4) - on(8)) * 4.0 / HZ as f32; // 4 m/s
    (p + v).clamp(Vec2::splat(-10.0), Vec2::splat(10.0))
}

fn walk(mut players: Query<(&NetInput<u8>, &mut Position)>) {
    for (input, mut p) in &mut players {
        p.0 = step(p.0, input.0);
    }
}

/// When the next coin appears (server only), and how many have.
#[derive(Resource, Default)]
struct CoinSpawner(u32, usize);

fn pick_up(
    mut commands: Commands,
    coins: Query<(Entity, &Position), With<Coin>>,
    mut players: Query<(&Position, &mut Score), With<Player>>,
    (mut spawner, tick): (ResMut<CoinSpawner>, Res<SimTick>),
) {
    for (coin, c) in &coins {
        if let Some((_, mut score)) = players.iter_mut().find(|(p, _)| p.0.distance(c.0) < 1.0) {
            score.0 += 1;
            commands.entity(coin).despawn();
            spawner.0 = tick.0 + HZ; // a new coin a second later
        }
    }
}

fn respawn(
    mut commands: Commands,
    coins: Query<(), With<Coin>>,
    mut spawner: ResMut<CoinSpawner>,
    tick: Res<SimTick>,
) {
    if coins.is_empty() && tick.0 >= spawner.0 {
        spawner.1 += 1;
        commands.spawn((Coin, Position(COINS[spawner.1 % COINS.len()].into())));
    }
}

pub(crate) fn protocol() -> Protocol {
    Protocol::builder(NetConfig::new(HZ))
        .kind(
            NetKind::new::<Player>("player")
                .with::<Position>()
                .with::<Score>(),
        )
        .kind(NetKind::new::<Coin>("coin").with::<Position>())
        .simulation(|world, schedule| {
            world.init_resource::<CoinSpawner>();
            let server_only = resource_exists::<Authority>; // the coin is the server's
            schedule.add_systems((walk, (pick_up, respawn).chain().run_if(server_only)).chain());
        })
        .build()
        .expect("a valid protocol")
}

pub(crate) fn join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        commands.spawn((Player, Owner(j.0), Position(Vec2::ZERO), Score(0)));
    }
}

/// The scripted player `k`: a 4 m square, one side a second, starting on side `k`.
pub(crate) fn bot(now: Duration, k: u64) -> u8 {
    [1, 4, 2, 8][(now.as_secs() + k) as usize % 4]
}

#[derive(Resource)]
struct Me(u64);

fn drive(clock: Res<NetClock>, me: Res<Me>, mut input: ResMut<LocalInput<u8>>) {
    input.0 = bot(clock.0, me.0);
}

/// The server's app; with `host`, a local player with that client id plays in it.
pub(crate) fn server_app(net: &EmulatedNetwork, protocol: &Protocol, host: Option<u64>) -> App {
    let server = net.server::<u8>(protocol.server().expect("a server"));
    let mut plugin =
        ServerPlugin::new(protocol.clone(), server).with_transform_sync(TransformSync::Planar);
    let mut app = App::new();
    if let Some(id) = host {
        plugin = plugin.with_host_client(id);
        app.insert_resource(Me(id)).add_systems(Update, drive);
    }
    app.add_plugins(plugin).add_systems(Update, join);
    app
}

/// Client `id`'s app, over `link`.
pub(crate) fn client_app(net: &EmulatedNetwork, protocol: &Protocol, id: u64, link: Duplex) -> App {
    net.add_client(id, link);
    let client = net.client(id, protocol.client::<u8>().expect("a client"));
    let mut app = App::new();
    let plugin =
        ClientPlugin::new(protocol.clone(), client).with_transform_sync(TransformSync::Planar);
    app.add_plugins(plugin)
        .insert_resource(Me(id))
        .add_systems(Update, drive);
    app
}

/// Runs a server (with a host player 0, if `host`) and clients 1 and 2 over `network`
/// for `seconds`, frames of 5 ms; `each` sees every frame.
pub(crate) fn play(
    network: &str,
    seed: u64,
    seconds: u64,
    host: bool,
    mut each: impl FnMut(&mut App, &mut [App]),
) {
    let (net, protocol) = (EmulatedNetwork::new(), protocol());
    let mut server = server_app(&net, &protocol, host.then_some(0));
    let mut clients: Vec<App> = (1..=2u64)
        .map(|k| {
            let link = Duplex::symmetric(profile(network).expect("a profile"), seed * 2 + k);
            client_app(&net, &protocol, k, link.expect("a link"))
        })
        .collect();
    while net.now() <= Duration::from_secs(seconds) {
        server.update();
        clients.iter_mut().for_each(App::update);
        each(&mut server, &mut clients);
        net.advance(Duration::from_millis(5));
    }
}

fn main() {
    for host in [false, true] {
        let (mut truth, mut shown, mut rollbacks) = (BTreeMap::new(), Vec::new(), [0; 2]);
        play("mobile", 0, 20, host, |server, clients| {
            let (tick, world) = (
                server.world().resource::<ServerStatus>().tick,
                server.world_mut(),
            );
            let mut q = world.query::<(&NetId, &Position)>();
            truth.extend(q.iter(world).map(|(i, p)| ((tick, i.0), p.0)));
            for (k, c) in clients.iter().enumerate() {
                let (p, net) = (
                    c.world().resource::<PredictionStatus>(),
                    c.world().resource::<NetClient<u8>>(),
                );
                rollbacks[k] = p.stats.rollbacks;
                let own = p
                    .owned
                    .first()
                    .and_then(|i| Some((*i, c.world().get::<Transform>(net.entity(*i)?)?)));
                shown.extend(
                    p.predicted_tick
                        .zip(own)
                        .map(|(t, (i, at))| (k, (t, i), at.translation.truncate())),
                );
            }
        });
        for (k, rollbacks) in rollbacks.iter().enumerate() {
            // The own player as shown against the server's at the same tick, cm, after 2 s.
            let own = shown.iter().filter(|s| s.0 == k && s.1.0 > 2 * HZ);
            let mut e: Vec<f32> = own
                .filter_map(|(_, t, at)| Some(truth.get(t)?.distance(*at) * 100.0))
                .collect();
            e.sort_by(f32::total_cmp);
            let (p50, p99) = (e[e.len() / 2], e[e.len() * 99 / 100]);
            println!(
                "host {host}, client {}: rollbacks {}, own-player error p50 {p50:.1} cm, p99 {p99:.1} cm",
                k + 1,
                rollbacks
            );
        }
    }
}
