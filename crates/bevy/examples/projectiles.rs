//! Three players and their shots in Bevy on lagless: every player fires a shot at the
//! nearest other player each second; a shot is despawned on a hit (its shooter scores) or
//! after 3 s. Shots are the server's, interpolated on every client; ids are reused at once,
//! so a new shot often takes the id of one just gone. Headless, over the emulated `mobile`
//! link. `cargo run --release -p lagless-bevy --example projectiles`
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

pub(crate) const HZ: u32 = 30;
/// Seconds in which shots are fired; the match runs 4 s longer, so every shot is over.
pub(crate) const FIRING: u32 = 16;

#[derive(Component, Default)]
pub(crate) struct Player;
/// A visual needs a `Transform` from its first frame: the adapter spawns it with one.
#[derive(Component, Default)]
#[require(Transform)]
pub(crate) struct Shot;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
pub(crate) struct Position(pub Vec2);
#[derive(Component, Clone, Copy, Default, Debug, PartialEq)]
pub(crate) struct Score(pub i32);
/// Which shot this is, counted from 1 by the server: what a test tells generations by.
#[derive(Component, Clone, Copy, Default, Debug, PartialEq)]
pub(crate) struct Serial(pub i32);
/// A shot's flight, the server's alone: velocity, shooter, the tick it ends.
#[derive(Component)]
struct Flight(Vec2, Entity, u32);

net_component!(Position, vec2("position", 50.0, 0.01));
net_component!(Score, int("score", 0, 10_000));
net_component!(Serial, int("serial", 0, 1_000_000));

/// The input is a bit set: right, left, up, down.
fn walk(mut players: Query<(&NetInput<u8>, &mut Position)>) {
    for (input, mut p) in &mut players {
        let on = |bit: u8| f32::from(u8::from(input.0 & bit != 0));
        let v = Vec2::new(on(1) - on(2), on(4) - on(8)) * 4.0 / HZ as f32;
        p.0 = (p.0 + v).clamp(Vec2::splat(-10.0), Vec2::splat(10.0));
    }
}

/// Shots fired so far (server only).
#[derive(Resource, Default)]
struct Fired(i32);

/// Each player fires at the nearest other one every second (staggered by player).
fn fire(
    mut commands: Commands,
    players: Query<(Entity, &Position, &NetId), With<Player>>,
    (tick, mut fired): (Res<SimTick>, ResMut<Fired>),
) {
    for (e, p, id) in &players {
        if tick.0 % HZ != id.0 * 7 % HZ || tick.0 > FIRING * HZ {
            continue;
        }
        let others = players.iter().filter(|o| o.0 != e);
        let Some((_, target, _)) =
            others.min_by(|a, b| (a.1.0.distance(p.0)).total_cmp(&b.1.0.distance(p.0)))
        else {
            continue;
        };
        fired.0 += 1;
        let v = (target.0 - p.0).normalize_or(Vec2::X) * 6.0 / HZ as f32; // 6 m/s
        let flight = Flight(v, e, tick.0 + 3 * HZ);
        commands.spawn((Shot, Position(p.0 + v * 5.0), Serial(fired.0), flight));
    }
}

fn fly(
    mut commands: Commands,
    mut shots: Query<(Entity, &mut Position, &Flight), Without<Player>>, // shots fly
    mut players: Query<(Entity, &Position, &mut Score), With<Player>>,
    (tick, scoring): (Res<SimTick>, Res<Scoring>),
) {
    for (shot, mut at, flight) in &mut shots {
        at.0 += flight.0;
        let hit = players
            .iter()
            .find(|(e, p, _)| *e != flight.1 && p.0.distance(at.0) < 0.6);
        if hit.is_some() {
            if let (true, Ok((.., mut score))) = (scoring.0, players.get_mut(flight.1)) {
                score.0 += 1;
            }
            commands.entity(shot).despawn();
        } else if tick.0 >= flight.2 {
            commands.entity(shot).despawn();
        }
    }
}

/// Whether a hit scores (a test compares prediction with and without server-only scores).
#[derive(Resource)]
pub(crate) struct Scoring(pub bool);

pub(crate) fn protocol(scoring: bool) -> Protocol {
    let player = NetKind::new::<Player>("player")
        .with::<Position>()
        .with::<Score>();
    let shot = NetKind::new::<Shot>("shot")
        .with::<Position>()
        .with::<Serial>();
    Protocol::builder(NetConfig::new(HZ))
        .kind(player)
        .kind(shot)
        .simulation(move |world, schedule| {
            world.init_resource::<Fired>();
            world.insert_resource(Scoring(scoring));
            let server_only = resource_exists::<Authority>; // shots are the server's
            schedule.add_systems((walk, (fly, fire).chain().run_if(server_only)).chain());
        })
        .build()
        .expect("a valid protocol")
}

fn join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        let at = Vec2::new(j.0 as f32 * 2.0 - 4.0, 0.0);
        commands.spawn((Player, Owner(j.0), Position(at), Score(0)));
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

/// Runs a server and `clients` clients over `network` for `seconds`, frames of 5 ms;
/// `each` sees every frame.
pub(crate) fn play(
    network: &str,
    seed: u64,
    (clients, seconds, scoring): (u64, u64, bool),
    mut each: impl FnMut(&mut App, &mut [App]),
) {
    let (net, protocol) = (EmulatedNetwork::new(), protocol(scoring));
    let server = net.server::<u8>(protocol.server().expect("a server"));
    let mut server_app = App::new();
    server_app
        .add_plugins(ServerPlugin::new(protocol.clone(), server))
        .add_systems(Update, join);
    let mut apps: Vec<App> = (1..=clients)
        .map(|id| {
            let link = Duplex::symmetric(profile(network).expect("a profile"), seed * 8 + id);
            net.add_client(id, link.expect("a link"));
            let client = net.client(id, protocol.client::<u8>().expect("a client"));
            let plugin = ClientPlugin::new(protocol.clone(), client)
                .with_transform_sync(TransformSync::Planar);
            let mut app = App::new();
            app.add_plugins(plugin)
                .insert_resource(Me(id))
                .add_systems(Update, drive);
            app
        })
        .collect();
    while net.now() <= Duration::from_secs(seconds) {
        server_app.update();
        apps.iter_mut().for_each(App::update);
        each(&mut server_app, &mut apps);
        net.advance(Duration::from_millis(5));
    }
}

/// Every player's score by id, as `app` shows it.
pub(crate) fn scores(app: &mut App) -> Vec<(u32, i32)> {
    let w = app.world_mut();
    let mut q = w.query_filtered::<(&NetId, &Score), With<Player>>();
    let mut out: Vec<(u32, i32)> = q.iter(w).map(|(i, s)| (i.0, s.0)).collect();
    out.sort_unstable();
    out
}

fn main() {
    let (mut server_scores, mut shown) = (Vec::new(), Vec::new());
    play(
        "mobile",
        1,
        (3, u64::from(FIRING) + 4, true),
        |server, clients| {
            server_scores = scores(server);
            shown = clients.iter_mut().map(scores).collect();
        },
    );
    println!("final scores: server {server_scores:?}, clients {shown:?}");
}
