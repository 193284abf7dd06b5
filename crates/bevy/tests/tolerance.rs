//! A one-step change of an integer on a predicted entity, made by the server alone, is a
//! misprediction: the client rolls back and shows it. (With one code of tolerance on
//! every field, a score one point off was never corrected.)
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

#[derive(Component, Default)]
struct Player;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Position(Vec2);
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Score(i32);
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Ready(bool);
net_component!(Position, vec2("position", 50.0, 0.01));
net_component!(Score, int("score", 0, 100));
net_component!(Ready, bool("ready"));

/// The server alone scores a point and flips a flag at tick 90 (3 s).
fn award(mut players: Query<(&mut Score, &mut Ready)>, tick: Res<SimTick>) {
    if tick.0 == 90 {
        for (mut score, mut ready) in &mut players {
            score.0 += 1;
            ready.0 = true;
        }
    }
}

fn join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        commands.spawn((
            Player,
            Owner(j.0),
            Position(Vec2::ONE),
            Score(0),
            Ready(false),
        ));
    }
}

#[test]
fn a_server_only_one_point_change_is_corrected_on_the_owner() {
    let protocol = Protocol::builder(NetConfig::new(30))
        .kind(
            NetKind::new::<Player>("player")
                .with::<Position>()
                .with::<Score>()
                .with::<Ready>(),
        )
        .simulation(|_, schedule| {
            schedule.add_systems(award.run_if(resource_exists::<Authority>));
        })
        .build()
        .expect("a valid protocol");
    let net = EmulatedNetwork::new();
    let mut server = App::new();
    server
        .add_plugins(ServerPlugin::<u8>::new(
            protocol.clone(),
            net.server(protocol.server().expect("a server")),
        ))
        .add_systems(Update, join);
    let link = Duplex::symmetric(profile("mobile").expect("a profile"), 5).expect("a link");
    net.add_client(1, link);
    let mut client = App::new();
    client.add_plugins(ClientPlugin::<u8>::new(
        protocol.clone(),
        net.client(1, protocol.client::<u8>().expect("a client")),
    ));
    while net.now() <= Duration::from_secs(6) {
        server.update();
        client.update();
        net.advance(Duration::from_millis(5));
    }
    let w = client.world_mut();
    let mut q = w.query_filtered::<(&Score, &Ready), With<Predicted>>();
    let shown: Vec<_> = q.iter(w).map(|(s, r)| (s.0, r.0)).collect();
    assert_eq!(
        shown,
        vec![(1, true)],
        "the owner's predicted score and flag"
    );
    assert!(
        client
            .world()
            .resource::<PredictionStatus>()
            .stats
            .rollbacks
            >= 1
    );
}
