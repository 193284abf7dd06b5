//! Encoding on many threads gives the bytes one thread gives: the same world, the same
//! acknowledgements, losses and resyncs, encoded for many clients with 1 and with 4
//! threads ([`ReplicationConfig::threads`]), snapshot for snapshot.

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
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a run of `ticks` ticks sent: per tick, per client, the snapshot's bytes.
type Sent = Vec<Vec<Vec<u8>>>;

/// Runs `clients` clients against a world of a few hundred bodies for `ticks` ticks
/// with `threads` encoding threads (`game_relevance`: the game's rule instead of the
/// default nearness), everything else seeded alike; returns what was sent and how many
/// changed entities the budget held back, summed.
fn run(threads: usize, clients: u64, ticks: u32, game_relevance: bool) -> (Sent, usize) {
    let config = ReplicationConfig {
        threads,
        budget: BudgetConfig {
            max_kbps: 96.0,
            ..BudgetConfig::default()
        },
        max_in_flight: 24,
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), config);
    if game_relevance {
        // Teams: a marker of another team is hidden; bodies fade with distance from
        // the origin, differently per client.
        server.set_relevance(Box::new(|client, id, kind, codes| {
            if kind == 1 {
                f32::from(u8::from(codes[2] as u64 == client % 4))
            } else {
                1.0 / (1.0 + ((id as u64 + client) % 7) as f32)
            }
        }));
    }
    let ids: Vec<ClientId> = (1..=clients).collect();
    for &id in &ids {
        server.add_client(id);
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut coming: Vec<(u32, ClientId, Tick)> = Vec::new();
    let (mut sent, mut deferred) = (Vec::new(), 0);
    for t in 1..=ticks {
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let time = t as f32 / 64.0;
        for i in 0..300u32 {
            // Most bodies move every tick; some rest, some die and come back.
            if rng.below(500) == 0 {
                let _ = server.despawn(i);
                continue;
            }
            if i % 5 == 0 && t % 8 != 0 {
                continue;
            }
            let _ = server.put(i, 0, |w| {
                let x = i as f32 * 0.7 + (time + i as f32).sin() * 3.0;
                w.vec3([x, 1.0, (i % 17) as f32 + time]);
                let a = time * 0.3 + i as f32;
                w.rotation([0.0, (a / 2.0).sin(), 0.0, (a / 2.0).cos()]);
                w.vec3([(time + i as f32).cos() * 3.0, 0.0, 1.0]);
                w.bool(i % 3 != 0);
            });
        }
        for i in 300..340u32 {
            let team = rng.below(4) as i32;
            let _ = server.put(i, 1, |w| {
                w.vec2([(i - 300) as f32, time % 50.0]);
                w.int(team);
            });
        }
        for (k, &id) in ids.iter().enumerate() {
            let k = k as f32;
            server.set_focus(id, Some([k * 5.0, 1.0, time]));
            server.set_owned(id, &[id as u32 * 3]);
            if rng.below(300) == 0 {
                server.resync(id);
            }
        }
        let snapshots = server.encode_many(&ids, Tick(t), now);
        let mut bytes = Vec::new();
        for (&id, s) in ids.iter().zip(snapshots) {
            let s = s.expect("every client is known");
            deferred += s.deferred;
            bytes.push(s.bytes);
            // Lost one time in five, else acknowledged 2 to 9 ticks later.
            if rng.below(5) != 0 {
                coming.push((t + 2 + rng.below(8) as u32, id, Tick(t)));
            }
        }
        sent.push(bytes);
        coming.sort_by_key(|c| (c.0, c.1));
        while coming.first().is_some_and(|c| c.0 <= t) {
            let (_, id, tick) = coming.remove(0);
            server.acknowledge(id, tick, now);
        }
    }
    (sent, deferred)
}

fn assert_same(one: &Sent, many: &Sent) {
    assert_eq!(one.len(), many.len());
    for (t, (a, b)) in one.iter().zip(many).enumerate() {
        for (c, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(x == y, "tick {} client {}: snapshots differ", t + 1, c + 1);
        }
    }
}

#[test]
fn four_threads_send_the_bytes_one_thread_sends() {
    let (one, deferred) = run(1, 24, 400, false);
    let (four, _) = run(4, 24, 400, false);
    // The budget was in use (selection mattered) and snapshots carried entities.
    assert!(deferred > 10_000, "{deferred} deferred");
    let total: usize = one.iter().flatten().map(Vec::len).sum();
    assert!(total > 24 * 400 * 40, "{total} bytes");
    assert_same(&one, &four);
}

#[test]
fn four_threads_match_one_with_a_game_relevance_rule() {
    let (one, _) = run(1, 16, 300, true);
    let (four, _) = run(4, 16, 300, true);
    assert_same(&one, &four);
}

#[test]
fn encode_many_lists_results_in_the_order_asked_and_refuses_unknown_clients() {
    let config = ReplicationConfig {
        threads: 3,
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema(), config);
    for id in [5, 1, 9] {
        server.add_client(id);
    }
    for i in 0..10u32 {
        server
            .spawn_with_id(i, 1, |w| {
                w.vec2([i as f32, 0.0]);
                w.int(0);
            })
            .expect("spawn");
    }
    let asked = [9, 7, 1, 5];
    let out = server.encode_many(&asked, Tick(1), Duration::ZERO);
    assert_eq!(out.len(), 4);
    assert_eq!(out[1], Err(ReplicationError::UnknownClient(7)));
    for k in [0, 2, 3] {
        let s = out[k].as_ref().expect("known client");
        assert_eq!(s.entries, 10, "client {} got every spawn", asked[k]);
    }
    // Each client's stats counted exactly one snapshot.
    for id in [1, 5, 9] {
        assert_eq!(server.client_stats(id).expect("stats").snapshots, 1);
    }
    // A client listed twice is encoded twice, in order, as two calls would.
    let twice = server.encode_many(&[1, 1], Tick(2), Duration::ZERO);
    assert_eq!(twice.len(), 2);
    assert_eq!(server.client_stats(1).expect("stats").snapshots, 3);
}
