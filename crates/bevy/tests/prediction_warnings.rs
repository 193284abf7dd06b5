//! What the prediction world tells a game that its simulation does not fit it: a
//! replicated entity spawned there (a system without the `Authority` gate) is despawned
//! and counted, not left to pile up; and when prediction fails most comparisons, the
//! components its systems name but it never holds are named.
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

#[derive(Component, Default)]
struct Player;
#[derive(Component, Default)]
struct Coin;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Position(Vec2);
net_component!(Position, vec2("position", 50.0, 0.01));
/// The server's alone: never replicated.
#[derive(Component, Clone, Copy)]
struct Speed(f32);

fn walk(mut players: Query<(&NetInput<u8>, &mut Position), With<Player>>) {
    for (input, mut p) in &mut players {
        p.0.x += f32::from(input.0) * 0.1;
    }
}

fn walk_at_speed(mut players: Query<(&NetInput<u8>, &Speed, &mut Position)>) {
    for (input, speed, mut p) in &mut players {
        p.0.x += f32::from(input.0) * speed.0;
    }
}

/// A coin whenever there is none: meant for the server, but not gated.
fn respawn(mut commands: Commands, coins: Query<(), With<Coin>>) {
    if coins.is_empty() {
        commands.spawn((Coin, Position(Vec2::ONE)));
    }
}

fn join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        commands.spawn((Player, Owner(j.0), Position(Vec2::ZERO), Speed(0.1)));
    }
}

/// Runs a server and one client over `mobile` for `seconds`, the client moving.
fn run(protocol: &Protocol, seconds: u64) -> App {
    run_with(protocol, seconds, |_| {})
}

/// [`run`], with `setup` applied to the client's app.
fn run_with(protocol: &Protocol, seconds: u64, setup: impl FnOnce(&mut App)) -> App {
    let net = EmulatedNetwork::new();
    let mut server = App::new();
    server
        .add_plugins(ServerPlugin::<u8>::new(
            protocol.clone(),
            net.server(protocol.server().expect("a server")),
        ))
        .add_systems(Update, join);
    let link = Duplex::symmetric(profile("mobile").expect("a profile"), 3).expect("a link");
    net.add_client(1, link);
    let mut client = App::new();
    client
        .add_plugins(ClientPlugin::<u8>::new(
            protocol.clone(),
            net.client(1, protocol.client::<u8>().expect("a client")),
        ))
        .insert_resource(LocalInput(1u8));
    setup(&mut client);
    while net.now() <= Duration::from_secs(seconds) {
        server.update();
        client.update();
        net.advance(Duration::from_millis(5));
    }
    client
}

fn kinds() -> ProtocolBuilder {
    Protocol::builder(NetConfig::new(30))
        .kind(NetKind::new::<Player>("player").with::<Position>())
        .kind(NetKind::new::<Coin>("coin").with::<Position>())
}

#[test]
fn a_spawn_in_the_prediction_world_is_despawned_and_counted() {
    let protocol = kinds()
        .simulation(|_, schedule| {
            schedule.add_systems((walk, respawn));
        })
        .build()
        .expect("a valid protocol");
    let mut client = run(&protocol, 6);
    let status = client.world().resource::<PredictionStatus>().clone();
    assert!(status.leaked_entities > 30, "{status:?}");
    let net = client.world_mut().resource_mut::<NetClient<u8>>();
    let predicted = net.client().world().world();
    let coins = predicted
        .archetypes()
        .iter()
        .filter(|a| a.contains(predicted.components().component_id::<Coin>().expect("Coin")))
        .map(|a| a.len())
        .sum::<u32>();
    assert_eq!(coins, 0, "coins left in the prediction world");
    assert!(status.stats.rollbacks < 10, "{status:?}");
    assert!(status.lacking_components.is_empty(), "{status:?}");
}

#[test]
fn a_component_the_prediction_world_lacks_is_named() {
    let protocol = kinds()
        .simulation(|_, schedule| {
            schedule.add_systems(walk_at_speed);
        })
        .build()
        .expect("a valid protocol");
    let client = run(&protocol, 6);
    let status = client.world().resource::<PredictionStatus>();
    assert!(status.stats.rollbacks > 30, "{status:?}");
    assert!(
        status
            .lacking_components
            .iter()
            .any(|c| c.ends_with("Speed")),
        "{status:?}"
    );
    assert!(
        status
            .lacking_components
            .iter()
            .all(|c| !c.ends_with("Position"))
    );
}

#[test]
fn a_simulation_that_fits_names_nothing() {
    let protocol = kinds()
        .simulation(|_, schedule| {
            schedule.add_systems((walk, respawn.run_if(resource_exists::<Authority>)));
        })
        .build()
        .expect("a valid protocol");
    let client = run(&protocol, 6);
    let status = client.world().resource::<PredictionStatus>();
    assert_eq!(status.leaked_entities, 0);
    assert!(status.lacking_components.is_empty(), "{status:?}");
}

#[test]
fn systems_added_to_a_client_apps_net_tick_are_reported() {
    let protocol = kinds()
        .simulation(|_, schedule| {
            schedule.add_systems(walk);
        })
        .build()
        .expect("a valid protocol");
    let client = run_with(&protocol, 1, |app| {
        app.add_systems(NetTick, walk);
    });
    assert_eq!(
        client
            .world()
            .resource::<PredictionStatus>()
            .ignored_systems,
        1
    );
    let client = run(&protocol, 1);
    assert_eq!(
        client
            .world()
            .resource::<PredictionStatus>()
            .ignored_systems,
        0
    );
}
