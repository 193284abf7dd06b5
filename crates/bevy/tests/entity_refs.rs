//! A replicated component that references another replicated entity ([`NetRef`]) is
//! mapped to the local entity showing it on each client (the own, predicted player's and
//! the other, interpolated one's).
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

#[derive(Component, Default)]
struct Player;
#[derive(Component, Default)]
struct Marker;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Position(Vec2);
net_component!(Position, vec2("position", 50.0, 0.01));

/// Which player a marker follows.
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Follows(NetRef);

impl NetComponent for Follows {
    fn declare(kind: Kind) -> Kind {
        NetRef::declare(kind, "follows")
    }
    fn write(&self, w: &mut StateWriter) {
        self.0.write(w);
    }
    fn read(r: &mut StateReader) -> Self {
        Self(NetRef::read(r))
    }
    fn map_entities(&mut self, entity_of: &dyn Fn(u32) -> Option<Entity>) {
        self.0.map(entity_of);
    }
}

fn join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        commands.spawn((Player, Owner(j.0), Position(Vec2::new(j.0 as f32, 0.0))));
    }
}

/// One marker per replicated player, following it by id.
fn mark(mut commands: Commands, players: Query<&NetId, With<Player>>, markers: Query<&Follows>) {
    for id in &players {
        if !markers.iter().any(|f| f.0.id == Some(id.0)) {
            commands.spawn((Marker, Position(Vec2::ZERO), Follows(NetRef::to(id.0))));
        }
    }
}

#[test]
fn references_map_to_the_local_entities() {
    let protocol = Protocol::builder(NetConfig::new(30))
        .kind(NetKind::new::<Player>("player").with::<Position>())
        .kind(
            NetKind::new::<Marker>("marker")
                .with::<Position>()
                .with::<Follows>(),
        )
        .build()
        .expect("a valid protocol");
    let net = EmulatedNetwork::new();
    let mut server = App::new();
    server
        .add_plugins(ServerPlugin::<u8>::new(
            protocol.clone(),
            net.server(protocol.server().expect("a server")),
        ))
        .add_systems(Update, (join, mark));
    let mut clients: Vec<App> = (1..=2u64)
        .map(|id| {
            let link = Duplex::symmetric(profile("mobile").expect("a profile"), id);
            net.add_client(id, link.expect("a link"));
            let mut app = App::new();
            app.add_plugins(ClientPlugin::<u8>::new(
                protocol.clone(),
                net.client(id, protocol.client::<u8>().expect("a client")),
            ));
            app
        })
        .collect();
    while net.now() <= Duration::from_secs(3) {
        server.update();
        clients.iter_mut().for_each(App::update);
        net.advance(Duration::from_millis(5));
    }
    for c in &mut clients {
        let w = c.world_mut();
        let mut q = w.query::<&Follows>();
        let follows: Vec<NetRef> = q.iter(w).map(|f| f.0).collect();
        assert_eq!(follows.len(), 2, "{follows:?}");
        let net = w.resource::<NetClient<u8>>();
        for f in follows {
            let id = f.id.expect("an id");
            assert!(f.entity.is_some(), "{f:?}");
            assert_eq!(f.entity, net.entity(id), "{f:?}");
            assert!(w.get::<Player>(f.entity.expect("mapped")).is_some());
        }
    }
}
