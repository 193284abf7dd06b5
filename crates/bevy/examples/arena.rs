//! A two-player arena in Bevy on lagless: players move, a server-owned coin is picked up,
//! despawned and respawned, scores count. Headless, over the emulated `mobile` link: a
//! server and two clients, or a host playing in the server's app and two remote clients.
//! `cargo run --release -p lagless-bevy --example arena`
use bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use lagless_replication::{Kind, NetConfig, StateReader, StateWriter};
use std::{collections::BTreeMap, time::Duration};

pub(crate) const HZ: u32 = 30;
/// Where coins appear in turn: near the origin, which every bot passes every 4 s.
pub(crate) const COINS: [[f32; 2]; 4] = [[0.0, 0.5], [0.5, 0.0], [0.0, -0.5], [-0.5, 0.0]];

#[derive(Component, Default)]
pub(crate) struct Player;
#[derive(Component, Default)]
pub(crate) struct Coin;
#[derive(Component, Clone, Copy, Debug)]
pub(crate) struct Position(pub Vec2);
#[derive(Component, Clone, Copy, Default, Debug)]
pub(crate) struct Score(pub i32);

impl NetComponent for Position {
    fn declare(kind: Kind) -> Kind {
        kind.vec2("position", 50.0, 0.01)
    }
    fn write(&self, w: &mut StateWriter) {
        w.vec2(self.0.into());
    }
    fn read(r: &mut StateReader) -> Self {
        Self(r.vec2().into())
    }
}
impl NetComponent for Score {
    fn declare(kind: Kind) -> Kind {
        kind.int("score", 0, 10_000)
    }
    fn write(&self, w: &mut StateWriter) {
        w.int(self.0);
    }
    fn read(r: &mut StateReader) -> Self {
        Self(r.int())
    }
}

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
            let server_rules = (pick_up, respawn)
                .chain()
                .run_if(resource_exists::<Authority>);
            schedule.add_systems((walk, server_rules).chain());
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

fn drive_client(net: Res<NetClient<u8>>, me: Res<Me>, mut input: ResMut<LocalInput<u8>>) {
    input.0 = bot(net.now(), me.0);
}

fn drive_host(net: Res<NetServer<u8>>, me: Res<Me>, mut input: ResMut<LocalInput<u8>>) {
    input.0 = bot(net.now(), me.0);
}

/// The server's app; with `host`, a local player with that client id plays in it.
pub(crate) fn server_app(net: &EmulatedNetwork, protocol: &Protocol, host: Option<u64>) -> App {
    let server = net.server::<u8>(protocol.server().expect("a server"));
    let mut plugin = ServerPlugin::new(protocol.clone(), server);
    let mut app = App::new();
    if let Some(id) = host {
        plugin = plugin.with_host_client(id);
        app.insert_resource(Me(id)).add_systems(Update, drive_host);
    }
    app.add_plugins(plugin).add_systems(Update, join);
    app
}

/// Client `id`'s app, over `link`.
pub(crate) fn client_app(net: &EmulatedNetwork, protocol: &Protocol, id: u64, link: Duplex) -> App {
    net.add_client(id, link);
    let client = net.client(id, protocol.client::<u8>().expect("a client"));
    let mut app = App::new();
    app.add_plugins(ClientPlugin::new(protocol.clone(), client))
        .insert_resource(Me(id))
        .add_systems(Update, drive_client);
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
        let mut scores = BTreeMap::new();
        play("mobile", 0, 20, host, |server, clients| {
            let mut q = server.world_mut().query::<(&Owner, &Score)>();
            scores.extend(q.iter(server.world()).map(|(o, s)| (o.0, s.0)));
            for (k, c) in clients.iter().enumerate() {
                let p = c.world().resource::<PredictionStatus>();
                let owned = p
                    .owned
                    .first()
                    .and_then(|id| c.world().resource::<NetClient<u8>>().entity(*id));
                let shown = owned
                    .and_then(|e| c.world().get::<Transform>(e))
                    .map(|t| t.translation);
                if c.world()
                    .resource::<NetworkStatus>()
                    .session
                    .snapshots_received
                    % 300
                    == 1
                {
                    println!(
                        "client {}: rollbacks {}, shown {shown:?}",
                        k + 1,
                        p.stats.rollbacks
                    );
                }
            }
        });
        println!("host {host}: scores {scores:?}");
    }
}
