//! A server and clients over a lossy, reordering hand-off: whatever is lost, the client's
//! registry ends up holding exactly the server's entities and codes.

use lagless_core::Tick;
use lagless_replication::*;
use std::time::Duration;

fn schema() -> Schema {
    Schema::new()
        .kind(
            Kind::new("body")
                .vec3("position", 500.0, 1.0 / 512.0)
                .rotation("rotation", 11)
                .vec3("velocity", 64.0, 1.0 / 64.0)
                .velocity_of("position")
                .bool("awake"),
        )
        .kind(Kind::new("marker").vec2("at", 100.0, 0.1).int("team", 0, 3))
        .build()
        .expect("schema")
}

/// A seeded xorshift, so failures replay.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn chance(&mut self, p: f32) -> bool {
        self.unit() < p
    }
}

fn write_body(w: &mut StateWriter, t: f32, i: u32) {
    let x = i as f32 + t.sin();
    w.vec3([x, 1.0, t * 0.5]);
    let a = t * 0.3 + i as f32;
    w.rotation([0.0, (a / 2.0).sin(), 0.0, (a / 2.0).cos()]);
    w.vec3([t.cos(), 0.0, 0.5]);
    w.bool(i % 3 != 0);
}

fn assert_converged(server: &ReplicationServer, client: &ReplicationClient) {
    let ids: Vec<u32> = server.ids().collect();
    let known: Vec<u32> = client.entities().map(|(id, _)| id).collect();
    assert_eq!(known, ids, "the client holds exactly the server's entities");
    for id in ids {
        let (kind, codes) = server.codes(id).expect("live");
        let e = client.get(id).expect("known");
        assert_eq!(e.kind, kind);
        assert_eq!(&e.codes[..], codes, "entity {id}");
    }
}

/// A server under a budget of `budget_kbps` (0: none) and an empty client.
/// Hands the server the acknowledgements in `up` (arrival tick, snapshot tick) that
/// arrived by tick `t`; the rest stay on the way.
fn acknowledge_arrived(
    server: &mut ReplicationServer,
    up: &mut Vec<(u32, Tick)>,
    t: u32,
    now: Duration,
) {
    for (at, tick) in std::mem::take(up) {
        if at <= t {
            server.acknowledge(1, tick, now);
        } else {
            up.push((at, tick));
        }
    }
}

fn ends(budget_kbps: f64) -> (ReplicationServer, ReplicationClient) {
    let config = ReplicationConfig {
        budget: BudgetConfig {
            max_kbps: budget_kbps,
            ..BudgetConfig::default()
        },
        ..ReplicationConfig::default()
    };
    (
        ReplicationServer::new(schema(), config),
        ReplicationClient::new(schema(), ClientConfig::default()),
    )
}

/// Runs `ticks` ticks: the world changes (moves, spawns, despawns, replaces) while
/// `changing`, snapshots and acknowledgements are lost and delayed at random.
fn run(budget_kbps: f64, loss: f32, seed: u64) -> (ReplicationServer, ReplicationClient) {
    let (mut server, mut client) = ends(budget_kbps);
    let mut rng = Rng(seed);
    for i in 0..60 {
        server.spawn(0, |w| write_body(w, 0.0, i)).expect("spawn");
    }
    server.add_client(1);
    server.set_focus(1, Some([0.0; 3]));
    // Snapshots and acks in flight: (arrives at tick, snapshot tick, bytes).
    let mut down: Vec<(u32, Tick, Vec<u8>)> = Vec::new();
    let mut up: Vec<(u32, Tick)> = Vec::new();
    for t in 1..2000u32 {
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let changing = t < 1500;
        if changing {
            let secs = t as f32 / 64.0;
            let ids: Vec<u32> = server.ids().collect();
            for id in ids {
                if id % 2 == 0 || rng.chance(0.1) {
                    let kind = server.codes(id).expect("live").0;
                    if kind == 0 {
                        server
                            .update(id, |w| write_body(w, secs, id))
                            .expect("update");
                    }
                }
            }
            if rng.chance(0.05) {
                let _ = server.spawn(1, |w| {
                    w.vec2([secs, -secs]);
                    w.int((t % 4) as i32);
                });
            }
            if rng.chance(0.04) {
                let id = (rng.next() % 80) as u32;
                let _ = server.despawn(id);
            }
        }
        acknowledge_arrived(&mut server, &mut up, t, now);
        let snap = server.encode(1, Tick(t), now).expect("encode");
        if !rng.chance(loss) {
            down.push((t + 2 + (rng.next() % 4) as u32, Tick(t), snap.bytes));
        }
        let mut arrived: Vec<(u32, Tick, Vec<u8>)> = Vec::new();
        down.retain(|d| {
            if d.0 <= t {
                arrived.push(d.clone());
                false
            } else {
                true
            }
        });
        arrived.sort_by_key(|d| d.0);
        for (_, tick, bytes) in arrived {
            if let Ok(Some(applied)) = client.receive(tick, &bytes) {
                if !rng.chance(loss) {
                    up.push((t + 2, applied.tick));
                }
            }
        }
    }
    (server, client)
}

#[test]
fn a_lossy_link_without_budget_converges() {
    let (server, client) = run(0.0, 0.2, 7);
    assert_converged(&server, &client);
    assert_eq!(client.stats().malformed, 0);
    assert_eq!(client.stats().unknown_entity, 0);
    assert_eq!(client.stats().missing_baseline, 0);
}

#[test]
fn a_tight_budget_defers_but_converges() {
    let (server, client) = run(24.0, 0.1, 11);
    assert_converged(&server, &client);
    let s = server.client_stats(1).expect("client");
    assert!(s.deferred > 0, "the budget held updates back");
    // Within the budget: 24 kbit/s at 64 snapshots/s is 375 bits each.
    assert!(
        s.bits / s.snapshots <= 375,
        "{} bits per snapshot",
        s.bits / s.snapshots
    );
}

#[test]
fn a_client_that_lost_its_baselines_is_resynced() {
    let config = ReplicationConfig {
        max_in_flight: 32,
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), config);
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    for i in 0..10 {
        server.spawn(0, |w| write_body(w, 0.0, i)).expect("spawn");
    }
    server.add_client(1);
    let step = |server: &mut ReplicationServer, client: &mut ReplicationClient, t: u32| {
        let now = Duration::from_millis(u64::from(t) * 16);
        if t % 2 == 0 {
            server
                .update(0, |w| write_body(w, t as f32, 0))
                .expect("update");
        }
        let snap = server.encode(1, Tick(t), now).expect("encode");
        if let Ok(Some(a)) = client.receive(Tick(t), &snap.bytes) {
            server.acknowledge(1, a.tick, now);
        }
    };
    for t in 1..50 {
        step(&mut server, &mut client, t);
    }
    client.forget_baselines();
    // Meanwhile entity 5 goes: the resync must remove it.
    server.despawn(5).expect("despawn");
    // Without baselines every delta fails, until the server gives up on them.
    let mut t = 50;
    while client.stats().missing_baseline == 0 || server.client_stats(1).expect("c").resyncs == 0 {
        step(&mut server, &mut client, t);
        t += 1;
        assert!(t < 200, "no resync");
    }
    for _ in 0..10 {
        step(&mut server, &mut client, t);
        t += 1;
    }
    assert_converged(&server, &client);
    assert!(client.stats().missing_baseline <= 33);
}

#[test]
fn relevance_zero_keeps_an_entity_away() {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    let near = server
        .spawn(1, |w| {
            w.vec2([1.0, 1.0]);
            w.int(0);
        })
        .expect("spawn");
    let far = server
        .spawn(1, |w| {
            w.vec2([90.0, 90.0]);
            w.int(1);
        })
        .expect("spawn");
    server.add_client(1);
    server.set_relevance(Box::new(
        |_, _, _, codes: &[i32]| {
            if codes[0] > 500 { 0.0 } else { 1.0 }
        },
    ));
    for t in 1..5 {
        let snap = server.encode(1, Tick(t), Duration::ZERO).expect("encode");
        client.receive(Tick(t), &snap.bytes).expect("decode");
        server.acknowledge(1, Tick(t), Duration::ZERO);
    }
    assert!(client.get(near).is_some());
    assert!(client.get(far).is_none());
    // The near one walks away: the client is told it is gone.
    server
        .update(near, |w| {
            w.vec2([80.0, 0.0]);
            w.int(0);
        })
        .expect("update");
    let snap = server.encode(1, Tick(5), Duration::ZERO).expect("encode");
    client.receive(Tick(5), &snap.bytes).expect("decode");
    assert!(client.get(near).is_none());
    let events: Vec<(u32, bool)> = std::iter::from_fn(|| client.poll_event())
        .map(|e| (e.id(), matches!(e, EntityEvent::Spawned { .. })))
        .collect();
    assert_eq!(events, [(near, true), (near, false)]);
}

#[test]
fn unchanged_entities_cost_nothing_and_deltas_are_shared() {
    let unlimited = ReplicationConfig {
        budget: BudgetConfig {
            max_kbps: 0.0,
            ..BudgetConfig::default()
        },
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), unlimited);
    for i in 0..200 {
        server.spawn(0, |w| write_body(w, 0.0, i)).expect("spawn");
    }
    server.add_client(1);
    server.add_client(2);
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    let first = server.encode(1, Tick(1), Duration::ZERO).expect("encode");
    let _ = server.encode(2, Tick(1), Duration::ZERO).expect("encode");
    client.receive(Tick(1), &first.bytes).expect("decode");
    server.acknowledge(1, Tick(1), Duration::ZERO);
    server.acknowledge(2, Tick(1), Duration::ZERO);
    server.update(3, |w| write_body(w, 1.0, 3)).expect("update");
    let a = server.encode(1, Tick(2), Duration::ZERO).expect("encode");
    let b = server.encode(2, Tick(2), Duration::ZERO).expect("encode");
    assert_eq!(a.entries, 1);
    // The entry and the header, with the 16-bit view checksum.
    assert!(a.bits < 136, "one changed entity of 200: {} bits", a.bits);
    assert_eq!(a.bytes, b.bytes, "same baseline, same snapshot");
    client.receive(Tick(2), &a.bytes).expect("decode");
    assert_eq!(client.get(3).expect("known").tick, Tick(2));
}

/// A server with one body and a client that decoded and acknowledged tick 1.
fn one_body_in_step() -> (ReplicationServer, ReplicationClient, u32) {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    let id = server.spawn(0, |w| write_body(w, 0.0, 0)).expect("spawn");
    server.add_client(1);
    let s = server.encode(1, Tick(1), Duration::ZERO).expect("encode");
    client.receive(Tick(1), &s.bytes).expect("decode");
    server.acknowledge(1, Tick(1), Duration::ZERO);
    (server, client, id)
}

#[test]
fn a_state_that_changes_and_changes_back_is_not_sent() {
    let (mut server, mut client, id) = one_body_in_step();
    server
        .update(id, |w| write_body(w, 1.0, 0))
        .expect("update");
    server
        .update(id, |w| write_body(w, 0.0, 0))
        .expect("update");
    let s = server.encode(1, Tick(2), Duration::ZERO).expect("encode");
    assert_eq!(s.entries, 0);
    client
        .receive(Tick(2), &s.bytes)
        .expect("an empty snapshot decodes");
}

/// An update goes once: the snapshots after it leave it out while it is in flight, and
/// the client shows it from the snapshot that carried it. Only when the acknowledgements
/// show that snapshot lost does it go again.
#[test]
fn an_update_goes_once_unless_lost() {
    let (mut server, mut client, id) = one_body_in_step();
    server
        .update(id, |w| write_body(w, 1.0, 0))
        .expect("update");
    let sent = server.encode(1, Tick(2), Duration::ZERO).expect("encode");
    assert_eq!(sent.entries, 1);
    let next = server.encode(1, Tick(3), Duration::ZERO).expect("encode");
    assert_eq!(next.entries, 0, "in flight: taken to arrive");
    // Snapshot 2 is lost; 3 arrives, and its acknowledgement says 2 did not.
    client.receive(Tick(3), &next.bytes).expect("decode");
    server.acknowledge_many(1, Tick(3), 0, Duration::ZERO);
    let again = server.encode(1, Tick(4), Duration::ZERO).expect("encode");
    assert_eq!((again.entries, again.resent), (1, 1), "lost: sent again");
    client.receive(Tick(4), &again.bytes).expect("decode");
    assert_converged(&server, &client);
    server.acknowledge_many(1, Tick(4), 0b1, Duration::ZERO);
    let quiet = server.encode(1, Tick(5), Duration::ZERO).expect("encode");
    assert_eq!(quiet.entries, 0, "acknowledged: nothing to send");
    client.receive(Tick(5), &quiet.bytes).expect("decode");
    assert_converged(&server, &client);
}

/// Every snapshot arrives and the acknowledgements say so, each naming the ones before
/// it: an update is sent once and merged into the next snapshots' baseline, and a second
/// change of the same entity is a delta against the first.
#[test]
fn acknowledged_snapshots_are_merged_not_resent() {
    let (mut server, mut client, id) = one_body_in_step();
    let mut sent = 0;
    for t in 2..40u32 {
        let now = Duration::from_millis(u64::from(t) * 16);
        if t % 5 == 0 {
            server
                .update(id, |w| write_body(w, t as f32, 0))
                .expect("update");
        }
        let s = server.encode(1, Tick(t), now).expect("encode");
        sent += s.entries;
        assert_eq!(s.resent, 0);
        client.receive(Tick(t), &s.bytes).expect("decode");
        assert_converged(&server, &client);
        // Acknowledged three ticks late, naming the two before.
        if t >= 5 {
            server.acknowledge_many(1, Tick(t - 3), 0b11, now);
        }
    }
    assert_eq!(sent, 7, "one entry per change");
    assert_eq!(client.stats().view_mismatches, 0);
}

/// `client_holds` says a spawn reached the client only once a snapshot carrying it is
/// acknowledged: what a game sending the entity's motion some other way waits for.
#[test]
fn client_holds_an_entity_once_its_spawn_is_acknowledged() {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    server.add_client(1);
    server
        .spawn_with_id(4, 1, |w| {
            w.vec2([1.0, 2.0]);
            w.int(1);
        })
        .expect("spawn");
    assert!(!server.client_holds(1, 4), "not sent yet");
    server.encode(1, Tick(1), Duration::ZERO).expect("encode");
    assert!(!server.client_holds(1, 4), "sent, not acknowledged");
    server.acknowledge(1, Tick(1), Duration::from_millis(50));
    assert!(server.client_holds(1, 4));
    assert!(!server.client_holds(1, 5), "never spawned");
    assert!(!server.client_holds(2, 4), "unknown client");
}

/// Projectiles: short-lived entities under ids reused as soon as they are free, changing
/// every tick they live, over a lossy, reordering link with a budget. After the world
/// goes quiet, the client holds exactly what the server does; and all along, no entity
/// stays on the client long after the server removed it (the longest such stay, in
/// ticks, is returned).
fn short_lived(
    seed: u64,
    budget_kbps: f64,
    loss: f32,
) -> (ReplicationServer, ReplicationClient, u32) {
    let (mut server, mut client) = ends(budget_kbps);
    let mut rng = Rng(seed);
    server.add_client(1);
    server.set_focus(1, Some([0.0; 3]));
    // Live projectiles: id -> tick it ends.
    let mut live: std::collections::BTreeMap<u32, u32> = Default::default();
    // Ids the server removed, and when; the longest the client held one since.
    let mut ended: std::collections::BTreeMap<u32, u32> = Default::default();
    let mut longest = 0;
    let mut down: Vec<(u32, Tick, Vec<u8>)> = Vec::new();
    let mut up: Vec<(u32, Tick)> = Vec::new();
    for t in 1..1500u32 {
        let now = Duration::from_millis(u64::from(t) * 1000 / 30);
        if t < 1200 {
            live.retain(|&id, end| {
                if *end <= t {
                    server.despawn(id).expect("live");
                    ended.insert(id, t);
                    false
                } else {
                    true
                }
            });
            if rng.chance(0.3) {
                if let Some(id) = (1024..1040).find(|id| !live.contains_key(id)) {
                    live.insert(id, t + 5 + (rng.next() % 40) as u32);
                    ended.remove(&id);
                }
            }
            for &id in live.keys() {
                server
                    .put(id, 0, |w| write_body(w, t as f32 / 30.0, id))
                    .expect("put");
            }
        }
        acknowledge_arrived(&mut server, &mut up, t, now);
        let snap = server.encode(1, Tick(t), now).expect("encode");
        if !rng.chance(loss) {
            down.push((t + 3 + (rng.next() % 5) as u32, Tick(t), snap.bytes));
        }
        down.sort_by_key(|d| d.0);
        while down.first().is_some_and(|d| d.0 <= t) {
            let (_, tick, bytes) = down.remove(0);
            if let Ok(Some(applied)) = client.receive(tick, &bytes) {
                if !rng.chance(loss) {
                    up.push((t + 3 + (rng.next() % 3) as u32, applied.tick));
                }
            }
        }
        for (id, _) in client.entities() {
            if let Some(&at) = ended.get(&id) {
                longest = longest.max(t - at);
            }
        }
    }
    (server, client, longest)
}

#[test]
fn short_lived_entities_under_reused_ids_converge() {
    for seed in 1..=8 {
        for budget in [24.0, 0.0] {
            let (server, client, longest) = short_lived(seed, budget, 0.15);
            assert_converged(&server, &client);
            // Snapshots take 3 to 7 ticks down and acknowledgements 3 to 5 up: a despawn
            // lost on the way is sent again within a round trip or two.
            assert!(
                longest <= 30,
                "seed {seed}: held {longest} ticks after its end"
            );
        }
    }
}

/// A despawn lost on the way, while the client shows the entity from a snapshot newer
/// than the baseline of the next one it decodes (it keeps showing it: that newer state
/// arrived, as far as it knows): the client ends up without it.
#[test]
fn a_lost_despawn_is_sent_again_until_acknowledged() {
    let mut server = ReplicationServer::new(schema(), ReplicationConfig::default());
    let mut client = ReplicationClient::new(schema(), ClientConfig::default());
    server.add_client(1);
    let now = |t: u32| Duration::from_millis(u64::from(t) * 16);
    let other = server.spawn(0, |w| write_body(w, 0.0, 0)).expect("spawn");
    let one = server.encode(1, Tick(1), now(1)).expect("encode");
    client.receive(Tick(1), &one.bytes).expect("decodes");
    server.acknowledge(1, Tick(1), now(1));
    // Snapshot 2 spawns X; the client gets it.
    let x = server.spawn(0, |w| write_body(w, 0.0, 1)).expect("spawn");
    let two = server.encode(1, Tick(2), now(2)).expect("encode");
    client.receive(Tick(2), &two.bytes).expect("decodes");
    assert!(client.get(x).is_some());
    // Snapshot 3 carries X's despawn and is lost; snapshot 4 (against tick 1 still)
    // arrives.
    server.despawn(x).expect("live");
    let _lost = server.encode(1, Tick(3), now(3)).expect("encode");
    let four = server.encode(1, Tick(4), now(4)).expect("encode");
    client.receive(Tick(4), &four.bytes).expect("decodes");
    server.acknowledge(1, Tick(2), now(5));
    server.acknowledge(1, Tick(4), now(6));
    for t in 5..40 {
        server
            .update(other, |w| write_body(w, t as f32, 0))
            .expect("update");
        let s = server.encode(1, Tick(t), now(t)).expect("encode");
        if let Ok(Some(a)) = client.receive(Tick(t), &s.bytes) {
            server.acknowledge(1, a.tick, now(t));
        }
    }
    assert_converged(&server, &client);
}

/// A view that differs from the server's is caught by the snapshot's checksum, never
/// shown: the client refuses the snapshot, counts it, and asks for one against nothing;
/// the server's answer brings it back to the server's view.
#[test]
fn a_view_that_differs_is_refused_counted_and_repaired() {
    let (mut server, mut client) = ends(0.0);
    for i in 0..8 {
        server.spawn(0, |w| write_body(w, 0.0, i)).expect("spawn");
    }
    // Client 2 is kept from entity 5, so its views lack it; the decoder under test is
    // client 1's, and it holds entity 5.
    server.add_client(1);
    server.add_client(2);
    server.set_relevance(Box::new(
        |client, id, _, _| {
            if client == 2 && id == 5 { 0.0 } else { 1.0 }
        },
    ));
    for id in [1, 2] {
        let s = server.encode(id, Tick(1), Duration::ZERO).expect("encode");
        if id == 1 {
            client.receive(Tick(1), &s.bytes).expect("decode");
        }
        server.acknowledge(id, Tick(1), Duration::ZERO);
    }
    server.update(3, |w| write_body(w, 1.0, 3)).expect("update");
    let wrong = server.encode(2, Tick(2), Duration::ZERO).expect("encode");
    // Client 2's snapshot decodes against client 1's view of tick 1 (it holds one), but
    // leaves a view the server never meant: refused, counted, registry untouched.
    let err = client
        .receive(Tick(2), &wrong.bytes)
        .expect_err("a view mismatch");
    assert!(
        matches!(err, ReplicationError::ViewMismatch { .. }),
        "{err}"
    );
    assert_eq!(client.stats().view_mismatches, 1);
    assert!(client.needs_resync());
    assert_eq!(client.newest(), Some(Tick(1)));
    // What the session reports: the server starts over for that client, once.
    server.resync(1);
    let full = server.encode(1, Tick(3), Duration::ZERO).expect("encode");
    assert_eq!(full.baseline, None);
    // The client asks in every packet until the answer arrives: asked again before it
    // is acknowledged, the server does not start over again.
    server.resync(1);
    assert_eq!(server.client_stats(1).expect("client").resyncs, 1);
    client.receive(Tick(3), &full.bytes).expect("decode");
    assert!(!client.needs_resync());
    server.acknowledge(1, Tick(3), Duration::ZERO);
    assert_converged(&server, &client);
    let next = server.encode(1, Tick(4), Duration::ZERO).expect("encode");
    assert_eq!(next.baseline, Some(Tick(3)), "deltas again");
}
