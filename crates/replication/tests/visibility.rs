//! Interest management through the public [`Server`]: an entity a client may not see is
//! never decoded by it, leaving its set despawns it on the client, and coming back
//! spawns it again with its current state, over a lossy link.
#![allow(clippy::unwrap_used)]

mod common;

use lagless_netem::{Duplex, profile};
use lagless_replication::*;
use std::time::Duration;

const HZ: u32 = 64;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("dot")
                .vec2("position", 100.0, 0.01)
                .int("secret", 0, 100_000),
        )
        .build()
        .unwrap()
}

/// Entity 5 is hidden from client 1 throughout.
const SECRET: u32 = 5;
/// Entity 7 leaves client 1's set at [`HIDE`] and comes back at [`SHOW`].
const ROAMER: u32 = 7;
const HIDE: Duration = Duration::from_secs(2);
const SHOW: Duration = Duration::from_secs(5);
/// The entities stop changing here, so the end state can be compared.
const STILL: Duration = Duration::from_secs(7);
const END: Duration = Duration::from_secs(9);

/// What client 1 saw of the two entities over the run.
#[derive(Default)]
struct Seen {
    secret_ever: bool,
    roamer_despawned: bool,
    roamer_respawned: bool,
    /// Steps of the hidden stretch (well after [`HIDE`]) where client 1 held the roamer.
    roamer_held_while_hidden: u32,
}

#[test]
fn hidden_entities_never_arrive_and_leaving_and_reentering_the_set_despawns_and_respawns() {
    let config = NetConfig::new(HZ);
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    for e in 0..20u32 {
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2([e as f32, 0.0]);
                w.int(1000 + e as i32);
            })
            .unwrap();
    }
    let ids: [ClientId; 2] = [1, 2];
    let mut clients: Vec<(Client<Spectator<u8>>, Duplex)> = ids
        .iter()
        .map(|&id| {
            server.connect(id).unwrap();
            let c = Client::new(schema(), Spectator::default(), &config).unwrap();
            (c, Duplex::symmetric(profile("lossy").unwrap(), id).unwrap())
        })
        .collect();
    server.set_visible(1, SECRET, false);
    assert!(!server.is_visible(1, SECRET) && server.is_visible(2, SECRET));
    let mut seen = Seen::default();
    let mut now = Duration::ZERO;
    let (mut hidden, mut shown) = (false, false);
    while now < END {
        if now >= HIDE && !hidden {
            server.set_visible(1, ROAMER, false);
            hidden = true;
        }
        if now >= SHOW && !shown {
            server.set_visible(1, ROAMER, true);
            shown = true;
        }
        for (&id, (_, link)) in ids.iter().zip(&mut clients) {
            while let Some(p) = link.up.poll(now) {
                let _ = server.receive(id, now, &p);
            }
        }
        server.update(now);
        while server.next_tick().is_some() {
            if now < STILL {
                let t = server.current_tick().0;
                for e in 0..20u32 {
                    server
                        .update_entity(e, |w| {
                            w.vec2([e as f32, (t % 500) as f32 * 0.1]);
                            w.int(1000 + e as i32 + t as i32);
                        })
                        .unwrap();
                }
            }
            server.send_snapshots(now).unwrap();
        }
        while let Some((to, p)) = server.poll_transmit() {
            if let Some(k) = ids.iter().position(|&c| c == to) {
                clients[k].1.down.send(now, p);
            }
        }
        for (k, (client, link)) in clients.iter_mut().enumerate() {
            common::step_spectator(client, link, now);
            if k != 0 {
                while client.poll_event().is_some() {}
                continue;
            }
            while let Some(event) = client.poll_event() {
                match event {
                    EntityEvent::Spawned { id, .. } if id == SECRET => seen.secret_ever = true,
                    EntityEvent::Despawned { id, .. } if id == ROAMER && hidden && !shown => {
                        seen.roamer_despawned = true
                    }
                    EntityEvent::Spawned { id, .. } if id == ROAMER && shown => {
                        seen.roamer_respawned = true
                    }
                    _ => {}
                }
            }
            seen.secret_ever |= client.replication().get(SECRET).is_some();
            let settled = HIDE + Duration::from_millis(1500);
            if now >= settled && now < SHOW && client.replication().get(ROAMER).is_some() {
                seen.roamer_held_while_hidden += 1;
            }
        }
        now += Duration::from_millis(5);
    }
    let one = clients[0].0.replication();
    let two = clients[1].0.replication();
    // The hidden entity's state never reached client 1; client 2 holds it, current.
    assert!(!seen.secret_ever, "client 1 decoded the hidden entity");
    let (_, secret) = server.replication().codes(SECRET).unwrap();
    assert_eq!(&two.get(SECRET).unwrap().codes[..], secret);
    // Leaving the set despawned the roamer on client 1, for the whole hidden stretch.
    assert!(
        seen.roamer_despawned,
        "no despawn when the roamer left the set"
    );
    assert_eq!(seen.roamer_held_while_hidden, 0);
    // Back in the set, it was spawned again and holds the server's state.
    assert!(seen.roamer_respawned, "no spawn when the roamer came back");
    let (_, roamer) = server.replication().codes(ROAMER).unwrap();
    assert_eq!(&one.get(ROAMER).unwrap().codes[..], roamer);
    // Every other entity is held by both, current.
    for e in (0..20u32).filter(|&e| e != SECRET) {
        let (_, codes) = server.replication().codes(e).unwrap();
        assert_eq!(
            &one.get(e).unwrap().codes[..],
            codes,
            "entity {e} on client 1"
        );
        assert_eq!(
            &two.get(e).unwrap().codes[..],
            codes,
            "entity {e} on client 2"
        );
    }
    // The link did lose packets.
    let lost = clients[0].1.down.stats().lost_packets;
    assert!(lost > 10, "{lost} packets lost");
}

#[test]
fn hidden_by_default_shows_only_the_room() {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    server.add_client(1);
    for e in 0..10u32 {
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2([e as f32, 0.0]);
                w.int(e as i32);
            })
            .unwrap();
    }
    server.set_visible_by_default(1, false);
    server.set_visible(1, 3, true);
    server.set_visible(1, 8, true);
    let snap = server.encode(1, Tick(1), Duration::ZERO).unwrap();
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    client.receive(Tick(1), &snap.bytes).unwrap();
    let held: Vec<u32> = client.entities().map(|(id, _)| id).collect();
    assert_eq!(held, vec![3, 8]);
    // Everything visible again, exceptions forgotten: the rest arrive.
    server.acknowledge(1, Tick(1), Duration::from_millis(20));
    server.set_visible_by_default(1, true);
    assert!((0..10).all(|e| server.is_visible(1, e)));
    let snap = server
        .encode(1, Tick(2), Duration::from_millis(20))
        .unwrap();
    client.receive(Tick(2), &snap.bytes).unwrap();
    assert_eq!(client.entities().count(), 10);
    // Unknown clients and ids beyond the limits change nothing.
    server.set_visible(99, 1, false);
    server.set_visible(1, u32::MAX, false);
    assert!(!server.is_visible(99, 1) && server.is_visible(1, u32::MAX - 1));
}

/// A character a client may not see is not sent to it by dead reckoning either: once it
/// leaves the client's set, no message for it follows, not even beside its despawn (the
/// client would refuse one as an unknown id).
#[test]
fn a_hidden_character_gets_no_dead_reckoning_messages() {
    use lagless_replication::deadreckoning::CharacterState;
    let config = NetConfig {
        dead_reckoning: Some(DrConfig::default()),
        ..NetConfig::new(HZ)
    };
    let mut server = Server::<u8>::new(schema(), &config).unwrap();
    for e in [5u32, 6] {
        server
            .spawn_with_id(e, 0, |w| {
                w.vec2([e as f32, 0.0]);
                w.int(0);
            })
            .unwrap();
    }
    let ids: [ClientId; 2] = [1, 2];
    let mut clients: Vec<(Client<Spectator<u8>>, Duplex)> = ids
        .iter()
        .map(|&id| {
            server.connect(id).unwrap();
            let mut c = Client::new(schema(), Spectator::default(), &config).unwrap();
            c.set_policy(5, Policy::DeadReckoned);
            c.set_policy(6, Policy::DeadReckoned);
            (c, Duplex::symmetric(profile("lan").unwrap(), id).unwrap())
        })
        .collect();
    let mut now = Duration::ZERO;
    let mut held_before = false;
    while now < Duration::from_secs(3) {
        if now == Duration::from_secs(1) {
            held_before = clients[0]
                .0
                .dead_reckoning()
                .unwrap()
                .shown(5, now)
                .is_some();
            server.set_visible(1, 5, false);
        }
        for (&id, (_, link)) in ids.iter().zip(&mut clients) {
            while let Some(p) = link.up.poll(now) {
                let _ = server.receive(id, now, &p);
            }
        }
        server.update(now);
        while server.next_tick().is_some() {
            let t = server.current_tick().0 as f32 / HZ as f32;
            for e in [5u32, 6] {
                // Both turn on the tick 5 leaves client 1's set: a message is due.
                let heading = if t < 1.0 { 0.0 } else { 1.5 };
                let state = CharacterState::new([e as f32, 0.0, t], heading, 1.0);
                server.update_character(e, state).unwrap();
            }
            server.send_snapshots(now).unwrap();
        }
        while let Some((to, p)) = server.poll_transmit() {
            if let Some(k) = ids.iter().position(|&c| c == to) {
                clients[k].1.down.send(now, p);
            }
        }
        for (client, link) in &mut clients {
            common::step_spectator(client, link, now);
        }
        now += Duration::from_millis(5);
    }
    let one = clients[0].0.dead_reckoning().unwrap();
    let two = clients[1].0.dead_reckoning().unwrap();
    // Client 1 showed character 5 until it left the set, then not; it refused nothing
    // (a message for 5 after its despawn would be refused as an unknown id).
    assert!(held_before);
    assert!(one.shown(6, now).is_some() && one.shown(5, now).is_none());
    assert_eq!(
        one.stats().rejected(),
        one.stats().stale,
        "{:?}",
        one.stats()
    );
    assert!(two.shown(5, now).is_some() && two.shown(6, now).is_some());
}
