//! Unit tests of the server that need its private state.

use super::*;
use crate::schema::Kind;

/// Under random loss, delay and long silences, the view the server takes for each
/// acknowledged snapshot is the one the client holds: a client decoding every delivered
/// snapshot (out of order, against older baselines, full ones) never finds a snapshot's
/// checksum at odds with the view it leaves, and ends holding the server's states.
#[test]
fn acknowledged_views_are_the_ones_the_client_holds() {
    run_lossy(false);
}

/// The same with acknowledgements as the session sends them: every packet up names the
/// newest snapshot and which of the 32 ticks before it arrived, and packets up are lost
/// and reordered too. Far fewer changes go again than with the newest acknowledgement
/// alone, which takes every snapshot between two acknowledged ones as lost.
#[test]
fn views_rebuilt_from_acknowledged_snapshots_are_the_ones_the_client_holds() {
    let with_bits = run_lossy(true);
    let newest_only = run_lossy(false);
    assert!(
        with_bits * 10 < newest_only * 9,
        "{with_bits} resent with per-snapshot acknowledgements, {newest_only} without"
    );
}

/// Runs the lossy exchange, acknowledgements in packets that are lost and reordered;
/// `bits`: they name every snapshot that arrived, else the newest alone. Returns the
/// entries sent.
fn run_lossy(bits: bool) -> u64 {
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
    // The client's acknowledgements as its session keeps them (newest, the 32 before),
    // and packets carrying them on their way up (arrival, newest, bits).
    let mut acks: Option<(Tick, u32)> = None;
    let mut up: Vec<(u32, Tick, u32)> = Vec::new();
    let mut entries = 0u64;
    for t in 1..3000u32 {
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        up.sort_by_key(|u| u.0);
        while up.first().is_some_and(|u| u.0 <= t) {
            let (_, newest, older) = up.remove(0);
            // Without bits, the newest alone, as the session sent before.
            server.acknowledge_many(1, newest, if bits { older } else { 0 }, now);
        }
        if let Some((newest, older)) = acks {
            if rng() % 4 != 0 {
                up.push((t + 1 + (rng() % 6) as u32, newest, older));
            }
        }
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
        entries += snap.resent as u64;
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
            {
                acks = Some(match acks {
                    None => (tick, 0),
                    Some((n, b)) if tick > n => {
                        let d = u64::from(tick.0 - n.0);
                        let moved = (u64::from(b) << d.min(63)) | (1 << (d - 1).min(63));
                        (tick, moved as u32)
                    }
                    Some((n, b)) if n.0 - tick.0 <= 32 => (n, b | 1 << (n.0 - tick.0 - 1)),
                    Some(a) => a,
                });
            }
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
    entries
}

/// Acknowledgements a client never sent (ticks never encoded, far in the future or the
/// past, repeated, every bit set) change nothing the server relies on: it neither
/// panics nor takes a view the client does not hold, and the snapshots still decode.
#[test]
fn forged_acknowledgements_are_harmless() {
    let schema = Schema::new()
        .kind(Kind::new("dot").vec2("at", 100.0, 0.1).int("team", 0, 3))
        .build()
        .expect("schema");
    let mut server = ReplicationServer::new(schema.clone(), ReplicationConfig::default());
    server.add_client(1);
    let mut client = crate::ReplicationClient::new(schema, crate::ClientConfig::default());
    for id in 0..20u32 {
        server
            .put(id, 0, |w| {
                w.vec2([id as f32, 1.0]);
                w.int(1);
            })
            .expect("put");
    }
    let forged = [
        (Tick(0), u32::MAX),
        (Tick(u32::MAX), u32::MAX),
        (Tick(5), u32::MAX),
        (Tick(1_000_000), 0),
        (Tick(31), 0xdead_beef),
    ];
    for t in 1..200u32 {
        let now = Duration::from_millis(u64::from(t) * 16);
        let id = t % 20;
        server
            .put(id, 0, |w| {
                w.vec2([(t % 97) as f32, 2.0]);
                w.int((t % 4) as i32);
            })
            .expect("put");
        let (newest, older) = forged[t as usize % forged.len()];
        server.acknowledge_many(1, newest, older, now);
        server.acknowledge_many(1, Tick(t.saturating_sub(1)), u32::MAX, now);
        let snap = server.encode(1, Tick(t), now).expect("encode");
        // Every other snapshot reaches the client; the acknowledgements above claimed
        // all of them (lies about the odd ones).
        if t % 2 == 0 {
            match client.receive(Tick(t), &snap.bytes) {
                Ok(_) | Err(ReplicationError::MissingBaseline(_)) => {}
                Err(e) => panic!("snapshot {t}: {e}"),
            }
        }
    }
    // A client lied to that way may refuse snapshots (it never held what it claimed),
    // but the server stayed whole: an honest acknowledgement takes it back in step.
    client.forget_baselines();
    server.resync(1);
    for t in 200..210u32 {
        let now = Duration::from_millis(u64::from(t) * 16);
        let snap = server.encode(1, Tick(t), now).expect("encode");
        client.receive(Tick(t), &snap.bytes).expect("decode");
        server.acknowledge_many(1, Tick(t), 0, now);
    }
    for id in 0..20u32 {
        let held = client.get(id).map(|e| e.codes.to_vec());
        assert_eq!(
            held,
            server.codes(id).map(|(_, c)| c.to_vec()),
            "entity {id}"
        );
    }
    assert!(server.client_stats(1).expect("client").stale_acks > 0);
}
