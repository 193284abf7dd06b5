//! A client's life in the app: ready only once the server has heard it, connected and
//! disconnected events, its own id and markers, entities gone when the link closes, and
//! a disconnect the server hears at once (not after its timeout).
#[allow(dead_code)]
#[path = "../examples/arena.rs"]
mod arena;

use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

fn link(seed: u64) -> Duplex {
    Duplex::symmetric(profile("mobile").expect("a profile"), seed).expect("a link")
}

fn count<M: Message>(app: &mut App) -> usize {
    let mut reader = app.world().resource::<Messages<M>>().get_cursor();
    reader.read(app.world().resource::<Messages<M>>()).count()
}

fn replicated(app: &mut App) -> usize {
    let w = app.world_mut();
    w.query_filtered::<(), With<NetId>>().iter(w).count()
}

/// Steps the server and clients one 5 ms frame.
fn step(net: &EmulatedNetwork, server: &mut App, clients: &mut [&mut App]) {
    server.update();
    clients.iter_mut().for_each(|c| c.update());
    net.advance(Duration::from_millis(5));
}

#[test]
fn ready_events_markers_link_loss_and_disconnect() {
    let (net, protocol) = (EmulatedNetwork::new(), arena::protocol());
    let mut server = arena::server_app(&net, &protocol, None);
    let mut a = arena::client_app(&net, &protocol, 1, link(1));
    let mut b = arena::client_app(&net, &protocol, 2, link(2));
    // The client's app runs before the server's has: nothing has heard it yet.
    for _ in 0..20 {
        a.update();
        net.advance(Duration::from_millis(5));
    }
    assert!(
        !a.world().resource::<NetworkStatus>().ready,
        "ready, unheard"
    );
    let (mut connected, mut server_heard) = (0, false);
    for _ in 0..400 {
        step(&net, &mut server, &mut [&mut a, &mut b]);
        server_heard |= server.world().resource::<ServerStatus>().clients == 2;
        connected += count::<ConnectedToServer>(&mut a);
        if a.world().resource::<NetworkStatus>().ready {
            assert!(server_heard, "ready before the server heard the client");
        }
    }
    assert!(a.world().resource::<NetworkStatus>().ready);
    // Messages live two frames: counted in each, so at most twice, at least once.
    assert!(
        (1..=2).contains(&connected),
        "ConnectedToServer seen {connected} times"
    );
    assert_eq!(
        a.world().get_resource::<LocalClient>(),
        Some(&LocalClient(1))
    );
    // Markers: the own player predicted and controlled, the other interpolated.
    let w = a.world_mut();
    let mut q = w.query_filtered::<(Has<Predicted>, Has<Controlled>, Has<Interpolated>), With<arena::Player>>();
    let mut marks: Vec<_> = q.iter(w).collect();
    marks.sort_unstable();
    assert_eq!(marks, vec![(false, false, true), (true, true, false)]);
    assert_eq!(replicated(&mut a), 3); // two players and a coin

    // Client 1 leaves: the server hears it at its next frame, and its player goes.
    a.world_mut().resource_mut::<NetClient<u8>>().disconnect();
    step(&net, &mut server, &mut [&mut a, &mut b]);
    step(&net, &mut server, &mut [&mut a, &mut b]);
    assert_eq!(count::<ClientDisconnected>(&mut server), 1);
    assert_eq!(server.world().resource::<ServerStatus>().clients, 1);
    assert_eq!(replicated(&mut a), 0, "entities left after disconnect()");
    assert!(count::<DisconnectedFromServer>(&mut a) >= 1);
    assert!(!a.world().resource::<NetworkStatus>().ready);

    // Client 2's link closes under it: its entities go, with an event.
    assert!(replicated(&mut b) > 0);
    net.remove_client(2);
    step(&net, &mut server, &mut [&mut b]);
    assert_eq!(
        replicated(&mut b),
        0,
        "stale entities after the link closed"
    );
    assert!(count::<DisconnectedFromServer>(&mut b) >= 1);
}
