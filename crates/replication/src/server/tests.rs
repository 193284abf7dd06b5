//! Unit tests of the server that need its private state.

use super::*;
use crate::schema::Kind;

/// Under random loss, delay and resyncs, the view the server builds for each
/// acknowledged snapshot from the present one and its log is the one a copy per
/// snapshot gives (`acknowledge` checks every one against [`InFlight::shadow`]).
#[test]
fn acknowledged_views_match_a_copy_per_snapshot() {
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
    let mut server = ReplicationServer::new(schema, config);
    server.add_client(1);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut acked, mut from_older, mut full) = (Tick(0), 0, 0);
    // (tick, its baseline) of snapshots whose acknowledgement is on its way.
    let mut coming: Vec<(u32, Tick, Option<Tick>)> = Vec::new();
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
            coming.push((t + 2 + (rng() % 8) as u32, Tick(t), snap.baseline));
        }
        coming.sort_by_key(|c| c.0);
        while coming.first().is_some_and(|c| c.0 <= t) {
            let (_, tick, base) = coming.remove(0);
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
    // Both paths that take the view back were taken, many times.
    assert!(
        from_older > 100,
        "{from_older} acknowledged against an older baseline"
    );
    assert!(full > 2, "{full} full snapshots acknowledged");
}
