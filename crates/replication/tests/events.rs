//! Spawn and despawn events through the public [`Server`] and [`Client`]: a coin picked up
//! and put back under the same id (the lowest free one) in one tick is two events on
//! every client, on every profile, whatever is lost; and it never slides from where the
//! old coin was.
#![allow(clippy::unwrap_used)]

use lagless_netem::{Duplex, profile};
use lagless_replication::harness::{Harness, Peer, Play};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 30;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("coin").vec2("position", 100.0, 0.01))
        .build()
        .unwrap()
}

/// Where the coin of generation `g` lies: far from the previous one's.
fn spot(generation: u32) -> [f32; 2] {
    if generation % 2 == 0 {
        [-20.0, 5.0]
    } else {
        [20.0, -5.0]
    }
}

/// The coin's rules: every 2 s it is despawned and a new one spawned in the same tick.
/// Each client's frames record its events and count those that drew the coin away from
/// both spots.
struct Coin {
    coin: u32,
    generations: Vec<u32>,
    seen: Vec<(Vec<EntityEvent>, usize)>,
}

impl Play<Spectator<u8>> for Coin {
    fn server_tick(&mut self, server: &mut Server<u8>, _: TickInputs<u8>) {
        if server.current_tick().0 % (2 * HZ) == 0 {
            // Picked up, and put back at once: the freed id is taken again.
            server.despawn(self.coin).unwrap();
            let g = self.generations.len() as u32 + 1;
            let again = server.spawn(0, |w| w.vec2(spot(g))).unwrap();
            assert_eq!(again, self.coin, "the lowest free id is reused");
            assert_eq!(server.generation(again), Some(g));
            self.generations.push(g);
        }
    }

    fn frame(&mut self, peer: &mut Peer<Spectator<u8>>, now: Duration) {
        let (events, slid) = &mut self.seen[peer.id as usize - 1];
        events.extend(std::iter::from_fn(|| peer.client.poll_event()));
        if let Some(p) = peer.client.render(now).pose(self.coin) {
            let near = |s: [f32; 2]| (p.position[0] - s[0]).hypot(p.position[1] - s[1]) < 0.1;
            *slid += usize::from(!near(spot(1)) && !near(spot(2)));
        }
    }
}

/// Plays 20 s on `network` with two clients; every 2 s the coin is despawned and a new one
/// spawned in the same tick. Returns, per client, the events it saw and the number of
/// frames that drew the coin away from both spots.
fn play(network: &str, seed: u64) -> (Vec<u32>, Vec<(Vec<EntityEvent>, usize)>) {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    let coin = server.spawn(0, |w| w.vec2(spot(1))).unwrap();
    // The server names the generation its clients' events will carry.
    assert_eq!(server.generation(coin), Some(1));
    let mut game = Harness::new(server);
    for k in 0..2u64 {
        let client = Client::new(schema(), Spectator::default(), &config).unwrap();
        let link = Duplex::symmetric(profile(network).unwrap(), seed * 2 + k).unwrap();
        game.connect(k + 1, client, link).unwrap();
    }
    let mut rules = Coin {
        coin,
        generations: vec![1],
        seen: vec![Default::default(); 2],
    };
    game.drive(Duration::from_secs(20), &mut rules);
    (rules.generations, rules.seen)
}

#[test]
fn a_coin_put_back_under_its_id_is_two_events_on_every_client_and_never_slides() {
    for &network in lagless_netem::PROFILE_NAMES {
        for seed in 1..=3 {
            let (generations, clients) = play(network, seed);
            assert!(generations.len() >= 10, "{network}: {generations:?}");
            for (events, slid) in clients {
                // Every incarnation: spawned, then (but the last) despawned; in order.
                let mut expected = Vec::new();
                for (i, &g) in generations.iter().enumerate() {
                    expected.push(EntityEvent::Spawned {
                        id: 0,
                        generation: g,
                        kind: 0,
                    });
                    if i + 1 < generations.len() {
                        expected.push(EntityEvent::Despawned {
                            id: 0,
                            generation: g,
                        });
                    }
                }
                // The last incarnation may not have arrived yet when the run ends.
                let n = events.len();
                assert!(n + 2 >= expected.len(), "{network} seed {seed}: {events:?}");
                assert_eq!(events[..], expected[..n], "{network} seed {seed}");
                assert_eq!(slid, 0, "{network} seed {seed}: drawn between two coins");
            }
        }
    }
}

/// Game messages through the public [`Server`] and [`Client`] over `lossy` (25% loss):
/// every reliable one arrives once and in order, both ways.
#[test]
fn reliable_messages_arrive_once_and_in_order_both_ways_over_a_lossy_link() {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    server.connect(1).unwrap();
    let mut client = Client::new(schema(), Spectator::default(), &config).unwrap();
    let mut link = Duplex::symmetric(profile("lossy").unwrap(), 5).unwrap();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    let mut now = Duration::ZERO;
    for step in 0..4000u32 {
        if step % 20 == 0 && step < 2000 {
            let n = (step / 20).to_le_bytes();
            server.send_message(1, Delivery::Reliable, &n).unwrap();
            client.send_message(Delivery::Reliable, &n).unwrap();
        }
        while let Some(p) = link.up.poll(now) {
            let _ = server.receive(1, now, &p);
        }
        server.update(now);
        while server.next_tick().is_some() {
            server.send_snapshots(now).unwrap();
        }
        while let Some((_, bytes)) = server.poll_transmit() {
            link.down.send(now, bytes);
        }
        while let Some((id, d, m)) = server.poll_message() {
            assert_eq!((id, d), (1, Delivery::Reliable));
            up.push(u32::from_le_bytes(m.try_into().unwrap()));
        }
        while let Some(p) = link.down.poll(now) {
            let _ = client.receive(now, &p);
        }
        while let Some((_, m)) = client.poll_message() {
            down.push(u32::from_le_bytes(m.try_into().unwrap()));
        }
        client.update(now);
        while let Some(t) = client.next_tick() {
            client.tick(t, 0);
        }
        while let Some(p) = client.poll_transmit(now) {
            link.up.send(now, p);
        }
        now += Duration::from_millis(5);
    }
    let all: Vec<u32> = (0..100).collect();
    assert_eq!(up, all, "client to server");
    assert_eq!(down, all, "server to client");
}
