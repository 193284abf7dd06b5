//! Unit tests of the server that need its private state.

use super::*;
use crate::schema::Kind;

/// Under random loss, delay and long silences, the view the server takes for each
/// acknowledged snapshot is the one the client holds: a client decoding every delivered
/// snapshot (out of order, against older baselines, full ones) never finds a snapshot's
/// checksum at odds with the view it leaves, and ends holding the server's states.
#[test]
fn acknowledged_views_are_the_ones_the_client_holds() {
    let schema = Schema::new()
        .kind(Kind::new("dot").vec2("at", 100.0, 0.1).int("team", 0, 3))
        .build()
        .expect("schema");
    let config = ReplicationConfig {
        budget: BudgetConfig {
            max_kbps: 24.0,
            ..BudgetConfig::default()
        },
        max_in_flight: 12,
        ..ReplicationConfig::default()
    };
    let mut server = ReplicationServer::new(schema.clone(), config);
    server.add_client(1);
    let mut client = crate::ReplicationClient::new(schema, crate::ClientConfig::default());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut acked, mut from_older, mut full) = (Tick(0), 0, 0);
    // (arrival, tick, its baseline, bytes) of snapshots on their way to the client.
    let mut coming: Vec<(u32, Tick, Option<Tick>, Vec<u8>)> = Vec::new();
    for t in 1..3000u32 {
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        for _ in 0..4 {
            let id = (rng() % 120) as u32;
            let (x, team) = ((rng() % 1000) as f32 / 10.0, (rng() % 4) as i32);
            match rng() % 10 {
                0 => {
                    let _ = server.despawn(id);
                }
                _ => {
                    let _ = server.put(id, 0, |w| {
                        w.vec2([x, -x]);
                        w.int(team);
                    });
                }
            }
        }
        let snap = server.encode(1, Tick(t), now).expect("encode");
        // Lost one time in four, else acknowledged 2 to 9 ticks later; and a silence
        // now and then longer than the server remembers.
        let silent = t % 700 > 680;
        if rng() % 4 != 0 && !silent {
            coming.push((
                t + 2 + (rng() % 8) as u32,
                Tick(t),
                snap.baseline,
                snap.bytes,
            ));
        }
        coming.sort_by_key(|c| c.0);
        while coming.first().is_some_and(|c| c.0 <= t) {
            let (_, tick, base, bytes) = coming.remove(0);
            match client.receive(tick, &bytes) {
                Ok(Some(_)) => {}
                // Older than one decoded: nothing to acknowledge.
                Ok(None) => continue,
                // After a long silence the baseline may be older than the client keeps.
                Err(ReplicationError::MissingBaseline(_)) => continue,
                Err(e) => panic!("snapshot of {tick:?}: {e}"),
            }
            if tick > acked {
                match base {
                    Some(b) if b < acked => from_older += 1,
                    None => full += 1,
                    _ => {}
                }
                acked = tick;
            }
            server.acknowledge(1, tick, now);
        }
    }
    assert_eq!(client.stats().view_mismatches, 0);
    // Quiet: the last snapshots arrive and are acknowledged, and the client holds
    // every live entity as the server has it.
    for t in 3000..3040u32 {
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let snap = server.encode(1, Tick(t), now).expect("encode");
        client.receive(Tick(t), &snap.bytes).expect("decode");
        server.acknowledge(1, Tick(t), now);
    }
    for id in 0..120u32 {
        let held = client.get(id).map(|e| e.codes.to_vec());
        let truth = server.codes(id).map(|(_, c)| c.to_vec());
        assert_eq!(held, truth, "entity {id}");
    }
    // Both kinds of baseline an acknowledgement can stand on were seen, many times.
    assert!(
        from_older > 100,
        "{from_older} acknowledged against an older baseline"
    );
    assert!(full > 2, "{full} full snapshots acknowledged");
}
