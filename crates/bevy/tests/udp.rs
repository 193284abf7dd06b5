//! The arena's server and a client as Bevy apps over real UDP on loopback
//! (`lagless_transport::{GameServer, GameClient}` behind the plugins): the client is
//! admitted with a netcode.io token, sees its player spawn, predicts it moving, and sees
//! the coin the server owns; its `LocalClient` is the id its token was issued for.
#[allow(dead_code)]
#[path = "../examples/arena.rs"]
mod arena;

use arena::{Coin, Position};
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::{
    ClientPlugin, LocalInput, NetClient, NetworkStatus, PredictionStatus, ServerPlugin,
};
use lagless_transport::{GameClient, GameServer, PROTOCOL_ID, ServerSettings, keys};
use std::time::{Duration, Instant};

#[test]
fn arena_over_udp_on_loopback() {
    let protocol = arena::protocol();
    let key = keys::generate_private_key().expect("a key");
    let settings = ServerSettings::new(PROTOCOL_ID, key, 2);
    let server = protocol.server::<u8>().expect("a server");
    let host = GameServer::bind(([127, 0, 0, 1], 0).into(), settings, server).expect("binds");
    let addr = host.local_addr().expect("an address");
    let mut server_app = App::new();
    server_app
        .add_plugins(ServerPlugin::new(protocol.clone(), host))
        .add_systems(Update, arena::join);

    let token = keys::issue_token(&key, PROTOCOL_ID, 7, vec![addr], 30, 5).expect("a token");
    let token = token.write().expect("token bytes");
    let client = protocol.client::<u8>().expect("a client");
    let udp = GameClient::connect(&token, client, protocol.config()).expect("connects");
    let mut client_app = App::new();
    client_app.add_plugins(ClientPlugin::new(protocol, udp));

    let start = Instant::now();
    let mut first_x = None;
    let (mut moved, mut saw_coin) = (false, false);
    while start.elapsed() < Duration::from_secs(8) && !(moved && saw_coin) {
        // Hold "right" from the start.
        client_app.world_mut().resource_mut::<LocalInput<u8>>().0 = 1;
        server_app.update();
        client_app.update();
        let world = client_app.world_mut();
        let owned = world.resource::<PredictionStatus>().owned.clone();
        let own = owned
            .first()
            .and_then(|id| world.resource::<NetClient<u8>>().entity(*id));
        if let Some(x) = own.and_then(|e| world.get::<Position>(e)).map(|p| p.0.x) {
            let x0 = *first_x.get_or_insert(x);
            moved |= x > x0 + 0.5;
        }
        let mut coins = world.query_filtered::<(), With<Coin>>();
        saw_coin |= coins.iter(world).count() > 0;
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = client_app.world().resource::<NetworkStatus>();
    assert!(status.ready && status.error.is_none(), "{status:?}");
    assert!(status.rtt.is_some(), "a round trip was measured");
    // The token was issued for client 7: the server's hello says so.
    let local = client_app
        .world()
        .get_resource::<lagless_bevy::LocalClient>();
    assert_eq!(local, Some(&lagless_bevy::LocalClient(7)));
    assert!(first_x.is_some(), "the client was told it owns its player");
    assert!(moved, "the predicted player moved right");
    assert!(saw_coin, "the server's coin was replicated");
}
