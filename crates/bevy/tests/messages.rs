//! Game messages both ways over the emulated `mobile`, `lossy` and `awful` links, seeds 1-3:
//! typed, registered once, reliable ones delivered once and in order, unreliable ones at most
//! once; a game message is never read as the adapter's own (one whose bytes start like
//! the ownership message does not touch prediction).
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;
use lagless_netem::{Duplex, profile};
use std::time::Duration;

#[derive(Component, Default)]
struct Player;
#[derive(Component, Clone, Copy, Debug, PartialEq)]
struct Position(Vec2);
net_component!(Position, vec2("position", 50.0, 0.01));

/// A numbered message, sent reliably.
#[derive(Debug, Clone, PartialEq)]
struct Numbered(u32);

impl NetMessage for Numbered {
    fn encode(&self, w: &mut Writer) {
        w.write_varint_u32(self.0);
    }
    fn decode(r: &mut Reader) -> Result<Self, WireError> {
        Ok(Self(r.read_varint_u32()?))
    }
}

/// Raw bytes, sent unreliably: the game's bytes start `0xB0 0x00`, as the adapter's
/// ownership message of no entities does.
#[derive(Debug, Clone, PartialEq)]
struct Raw(Vec<u8>);

impl NetMessage for Raw {
    fn encode(&self, w: &mut Writer) {
        w.write_bytes(&self.0);
    }
    fn decode(r: &mut Reader) -> Result<Self, WireError> {
        Ok(Self(r.read_bytes(r.remaining())?.to_vec()))
    }
}

fn protocol() -> Protocol {
    Protocol::builder(NetConfig::new(30))
        .kind(NetKind::new::<Player>("player").with::<Position>())
        .message::<Numbered>()
        .message::<Raw>()
        .build()
        .expect("a valid protocol")
}

/// How many of each are sent each way.
const N: u32 = 200;

#[derive(Resource, Default)]
struct Got {
    numbered: Vec<(u64, u32)>,
    raw: Vec<(u64, Vec<u8>)>,
    frame: u32,
}

fn server_join(mut commands: Commands, mut joined: MessageReader<ClientConnected>) {
    for j in joined.read() {
        commands.spawn((Player, Owner(j.0), Position(Vec2::ZERO)));
    }
}

fn server_talk(
    mut got: ResMut<Got>,
    mut numbered: MessageReader<FromClient<Numbered>>,
    mut raw: MessageReader<FromClient<Raw>>,
    mut send: MessageWriter<ToClients<Numbered>>,
    mut send_raw: MessageWriter<ToClients<Raw>>,
    status: Res<ServerStatus>,
) {
    got.numbered
        .extend(numbered.read().map(|m| (m.client, m.message.0)));
    got.raw
        .extend(raw.read().map(|m| (m.client, m.message.0.clone())));
    // Once both clients are in, one of each per frame.
    if status.clients == 2 && got.frame < N {
        let delivery = Delivery::Reliable;
        send.write(ToClients {
            target: Target::All,
            delivery,
            message: Numbered(got.frame),
        });
        let message = Raw(vec![0xB0, 0x00, got.frame as u8]);
        let delivery = Delivery::Unreliable;
        send_raw.write(ToClients {
            target: Target::All,
            delivery,
            message,
        });
        got.frame += 1;
    }
}

fn client_talk(
    mut got: ResMut<Got>,
    mut numbered: MessageReader<FromServer<Numbered>>,
    mut raw: MessageReader<FromServer<Raw>>,
    mut send: MessageWriter<ToServer<Numbered>>,
    mut send_raw: MessageWriter<ToServer<Raw>>,
    status: Res<NetworkStatus>,
) {
    got.numbered.extend(numbered.read().map(|m| (0, m.0.0)));
    got.raw.extend(raw.read().map(|m| (0, m.0.0.clone())));
    if status.ready && got.frame < N {
        send.write(ToServer {
            delivery: Delivery::Reliable,
            message: Numbered(got.frame),
        });
        let message = Raw(vec![0xB0, 0x00, got.frame as u8]);
        send_raw.write(ToServer {
            delivery: Delivery::Unreliable,
            message,
        });
        got.frame += 1;
    }
}

#[test]
fn messages_both_ways_reliable_once_in_order_unreliable_at_most_once() {
    for (network, seed) in ["mobile", "lossy", "awful"]
        .into_iter()
        .flat_map(|n| (1..=3u64).map(move |s| (n, s)))
    {
        let (net, protocol) = (EmulatedNetwork::new(), protocol());
        let mut server = App::new();
        server
            .add_plugins(ServerPlugin::<u8>::new(
                protocol.clone(),
                net.server(protocol.server().expect("a server")),
            ))
            .init_resource::<Got>()
            .add_systems(Update, (server_join, server_talk));
        let mut clients: Vec<App> = (1..=2u64)
            .map(|id| {
                let link = Duplex::symmetric(profile(network).expect("a profile"), seed * 8 + id);
                net.add_client(id, link.expect("a link"));
                let host = net.client(id, protocol.client::<u8>().expect("a client"));
                let mut app = App::new();
                app.add_plugins(ClientPlugin::new(protocol.clone(), host))
                    .init_resource::<Got>()
                    .add_systems(Update, client_talk);
                app
            })
            .collect();
        while net.now() <= Duration::from_secs(30) {
            server.update();
            clients.iter_mut().for_each(App::update);
            net.advance(Duration::from_millis(5));
        }
        let all: Vec<u32> = (0..N).collect();
        let got = server.world().resource::<Got>();
        for c in 1..=2u64 {
            let from: Vec<u32> = got
                .numbered
                .iter()
                .filter(|m| m.0 == c)
                .map(|m| m.1)
                .collect();
            assert_eq!(from, all, "{network} seed {seed}: reliable from client {c}");
            let raw: Vec<&Vec<u8>> = got.raw.iter().filter(|m| m.0 == c).map(|m| &m.1).collect();
            let mut seen: Vec<u8> = raw.iter().map(|b| b[2]).collect();
            seen.dedup();
            assert_eq!(
                seen.len(),
                raw.len(),
                "{network}: an unreliable message twice"
            );
            assert!(raw.iter().all(|b| b[..2] == [0xB0, 0x00]));
            println!(
                "{network} seed {seed}: client {c} -> server: {N} of {N} reliable in order, {} of {N} unreliable",
                raw.len()
            );
        }
        assert_eq!(
            server.world().resource::<ServerStatus>().malformed_messages,
            0
        );
        for (k, c) in clients.iter().enumerate() {
            let got = c.world().resource::<Got>();
            let from: Vec<u32> = got.numbered.iter().map(|m| m.1).collect();
            assert_eq!(
                from,
                all,
                "{network} seed {seed}: reliable to client {}",
                k + 1
            );
            assert!(!got.raw.is_empty() && got.raw.iter().all(|(_, b)| b[..2] == [0xB0, 0x00]));
            println!(
                "{network} seed {seed}: server -> client {}: {N} of {N} reliable in order, {} of {N} unreliable",
                k + 1,
                got.raw.len()
            );
            let status = c.world().resource::<NetworkStatus>();
            assert_eq!(status.malformed_messages, 0, "{network}");
            // The game's `0xB0 0x00` messages did not clear the owned set.
            let owned = &c.world().resource::<PredictionStatus>().owned;
            assert_eq!(owned.len(), 1, "{network}: client {} owns {owned:?}", k + 1);
        }
    }
}

#[derive(Resource, Default)]
struct Events(Vec<(u32, Vec<u8>)>);

fn server_events(mut net: ResMut<NetServer<u8>>, status: Res<ServerStatus>) {
    if status.clients == 1 {
        // What rides in front of the next snapshot: the tick it was set at.
        let bytes = status.tick.to_le_bytes().to_vec();
        let _ = net.server_mut().set_snapshot_events(1, bytes);
    }
}

fn client_events(mut got: ResMut<Events>, mut events: MessageReader<SnapshotEvents>) {
    got.0
        .extend(events.read().map(|e| (e.tick, e.bytes.clone())));
}

#[test]
fn snapshot_events_reach_the_client_app() {
    let mut config = NetConfig::new(30);
    config.snapshot_events = true;
    let protocol = Protocol::builder(config)
        .kind(NetKind::new::<Player>("player").with::<Position>())
        .build()
        .expect("a valid protocol");
    let net = EmulatedNetwork::new();
    let mut server = App::new();
    server
        .add_plugins(ServerPlugin::<u8>::new(
            protocol.clone(),
            net.server(protocol.server().expect("a server")),
        ))
        .add_systems(Update, (server_join, server_events));
    let link = Duplex::symmetric(profile("mobile").expect("a profile"), 4).expect("a link");
    net.add_client(1, link);
    let mut client = App::new();
    client
        .add_plugins(ClientPlugin::<u8>::new(
            protocol.clone(),
            net.client(1, protocol.client::<u8>().expect("a client")),
        ))
        .init_resource::<Events>()
        .add_systems(Update, client_events);
    while net.now() <= Duration::from_secs(3) {
        server.update();
        client.update();
        net.advance(Duration::from_millis(5));
    }
    let got = &client.world().resource::<Events>().0;
    // About 30 snapshots a second for the last two seconds or so, less the lost ones.
    assert!(got.len() > 30, "{} snapshot events", got.len());
    for (tick, bytes) in got {
        let set = u32::from_le_bytes(bytes[..].try_into().expect("4 bytes"));
        // Set in the frame before the snapshot of `tick` was sent.
        assert!(
            set <= *tick && *tick <= set + 2,
            "set at {set}, came with {tick}"
        );
    }
}
