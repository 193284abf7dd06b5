//! `lagless bench-snapshot`: what capturing, encoding and decoding one 900-cube snapshot
//! costs on the replication layer, per client, with the plain uncompressed codec measured
//! in the same process as the baseline (timings on shared machines are noisy; ratios are
//! not).
//!
//! A player drives into the grid for 2 s; then, for 64 ticks with cubes being knocked
//! about, the layer captures the scene, encodes a snapshot for a client that acknowledged
//! the one of four ticks before (as on `broadband`), and a client decodes it. With no
//! budget, so the encode does all the work a run's may.

use crate::bench::{busy_input, median};
use crate::cpu::CpuTimer;
use lagless_core::Tick;
use lagless_replication::{
    BudgetConfig, CellConfig, ClientConfig, ReplicationClient, ReplicationConfig, ReplicationServer,
};
use lagless_scenes::cubes::replicate;
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_scenes::cubes::{CubeScene, CubeSceneConfig};
use std::time::Duration;

/// One measured operation.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotBenchRow {
    /// What was timed.
    pub operation: String,
    /// Median µs per snapshot (CPU time).
    pub median_us: f64,
    /// Median payload bytes (for decodes: entities the client knows after it).
    pub bytes: usize,
}

/// Ticks of snapshots measured after the player has reached the grid.
const RECORDED: u32 = 64;

/// Ticks the player drives before measuring starts: 2 s, enough to reach the grid.
const WARM_UP: u32 = 128;

/// Age of the baseline the client acknowledged, ticks.
const ACK_AGE: u32 = 4;

/// Measures every operation `reps` times over the recorded ticks; `progress` is told
/// `(done, total)` reps.
pub fn bench_snapshot(
    reps: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Vec<SnapshotBenchRow> {
    let mut samples: [(Vec<f64>, Vec<usize>); 5] = Default::default();
    for rep in 0..reps {
        progress(rep, reps);
        let config = CubeSceneConfig::default();
        let q = config.quantize.unwrap_or_default();
        let mut scene = CubeScene::new(config);
        scene.add_player(0);
        let mut server = ReplicationServer::new(
            replicate::schema(&q),
            ReplicationConfig {
                budget: BudgetConfig {
                    max_kbps: 0.0,
                    ..BudgetConfig::default()
                },
                ..ReplicationConfig::default()
            },
        );
        server.add_client(1);
        let mut client = ReplicationClient::new(replicate::schema(&q), ClientConfig::default());
        let cubes = scene.cube_count();
        for t in 0..WARM_UP + RECORDED {
            scene.step(&[(0, busy_input(t))]);
            let tick = Tick(t + 1);
            let now = Duration::from_millis(u64::from(t) * 1000 / 64);
            let measured = t >= WARM_UP;
            let mut timed = |row: usize, op: &mut dyn FnMut() -> usize| {
                let timer = CpuTimer::start();
                let n = op();
                if measured {
                    samples[row].0.push(timer.ms() * 1000.0);
                    samples[row].1.push(n);
                }
            };
            let mut plain = Vec::new();
            timed(0, &mut || {
                plain = CubeSnapshot::capture(&scene).to_bytes();
                plain.len()
            });
            timed(1, &mut || {
                CubeSnapshot::decode(&plain, SnapshotLimits::default()).map_or(0, |s| s.cubes.len())
            });
            timed(2, &mut || {
                replicate::capture(&scene, &mut server).map_or(0, |_| server.len())
            });
            if let Some(acked) = tick.0.checked_sub(ACK_AGE).filter(|a| *a > 0) {
                server.acknowledge(1, Tick(acked), now);
            }
            let mut bytes = Vec::new();
            timed(3, &mut || {
                bytes = server.encode(1, tick, now).map_or(Vec::new(), |e| e.bytes);
                bytes.len()
            });
            timed(4, &mut || {
                let _ = client.receive(tick, &bytes);
                replicate::snapshot(&client, cubes, tick).cubes.len()
            });
        }
    }
    progress(reps, reps);
    let names = [
        "plain encode (capture + floats)",
        "plain decode",
        "layer capture (quantize, find changes)",
        "layer encode, baseline 4 ticks old",
        "layer decode + registry + floats",
    ];
    names
        .iter()
        .zip(samples)
        .map(|(name, (us, bytes))| SnapshotBenchRow {
            operation: (*name).to_owned(),
            median_us: median(us),
            bytes: median_count(bytes),
        })
        .collect()
}

/// What encoding for many clients costs against the physics step it follows, measured in
/// the same process ([`bench_encode_clients`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ManyClientsBench {
    /// Clients (and players).
    pub clients: usize,
    /// Threads the encodes were spread over.
    pub threads: usize,
    /// Median and 99th percentile CPU ms of one physics step (one thread).
    pub physics_ms: (f64, f64),
    /// Median and 99th percentile wall ms of one physics step.
    pub physics_wall_ms: (f64, f64),
    /// Median and 99th percentile wall ms of a tick's replication: the clients'
    /// acknowledgements, capture and every client's encode, the server's part apart
    /// from the game's own simulation.
    pub replication_wall_ms: (f64, f64),
    /// Median and 99th percentile CPU ms of a tick's acknowledgements, every client's
    /// (one thread).
    pub ack_ms: (f64, f64),
    /// Median and 99th percentile ms of one tick's capture.
    pub capture_ms: (f64, f64),
    /// Median and 99th percentile ms of one tick's encodes, every client's: CPU time of
    /// every thread.
    pub encode_ms: (f64, f64),
    /// Median and 99th percentile ms of the four together (physics, acknowledgements,
    /// capture, encodes), per tick: the server's tick in a process that runs only the
    /// server (CPU, every thread).
    pub tick_ms: (f64, f64),
    /// Median CPU µs of one client's encode (a tick's encodes over the clients).
    pub encode_us_per_client: f64,
    /// Median and 99th percentile wall ms of one tick's encodes.
    pub encode_wall_ms: (f64, f64),
    /// Median and 99th percentile wall ms of a tick (physics, capture, encodes):
    /// `server.tick_wall_ms_p50` and `_p99`.
    pub tick_wall_ms: (f64, f64),
    /// Ticks a second the server could run at, back to back: 1000 over the mean tick
    /// wall ms (`server.ticks_per_s` of a server never waiting for its clock).
    pub ticks_per_s: f64,
    /// Mean changed entities per client a snapshot had to weigh.
    pub candidates_mean: f64,
    /// Mean entries sent again ([`lagless_replication::EncodedSnapshot::resent`]): after
    /// a lost snapshot, or the own player's while its newest send is in flight.
    pub resent_mean: f64,
    /// Mean entries per snapshot.
    pub entries_mean: f64,
    /// Payload bits over entries sent (`snapshot.bits_per_changed_entity`).
    pub bits_per_changed_entity: f64,
    /// Mean snapshot bytes.
    pub bytes_mean: f64,
    /// Mean entities an encode looked at per client
    /// ([`lagless_replication::EncodedSnapshot::visited`]).
    pub visited_mean: f64,
    /// The spatial cells the server ran with, if any.
    pub cells: Option<CellConfig>,
}

/// Bytes written between two clients' encodes with `cold` (more than this machine's
/// caches hold).
pub const EVICT_BYTES: usize = 8 << 20;

/// Ticks the players drive before measuring: 4 s, so the grid is well stirred.
const MANY_WARM_UP: u32 = 256;

/// How old the snapshot each client acknowledges every tick is: a 94 ms round trip at
/// 64 ticks/s, so six snapshots are in flight and each acknowledged one was encoded
/// against a view older than the one acknowledged before it, as on a real link. (A
/// pattern whose acknowledgements never overtook a baseline hid, for two stops, that
/// the server's old undo log cost 20 ms a tick here.)
const ACK_AGE_TICKS: u32 = 6;

/// `clients` players drive into the grid (each on its own phase of the benchmark's
/// driver); every tick the layer captures the scene and encodes a snapshot for each
/// client under the default budget (256 kbit/s), focused on its player, against an
/// acknowledgement 3 to 5 ticks old (as on `broadband`, staggered so clients do not all
/// share one baseline). `ticks` ticks are measured. The server side of
/// `lagless run --clients N` without the clients, so it takes seconds, not minutes.
/// `cold` writes over [`EVICT_BYTES`] before each client's encode, so it starts with
/// the caches cold, as in a run, where the clients' simulations run in between (the
/// encodes then run one after the other). Otherwise the encodes are spread over
/// `threads` threads ([`ReplicationServer::encode_many`]); with more than one, CPU
/// figures are the process's, every thread's. With `cells`, the server runs spatial
/// cells (each client's interest around its player).
pub fn bench_encode_clients(
    clients: usize,
    ticks: u32,
    cold: bool,
    threads: usize,
    cells: Option<CellConfig>,
) -> ManyClientsBench {
    let threads = if cold { 1 } else { threads.max(1) };
    let config = CubeSceneConfig::default();
    let q = config.quantize.unwrap_or_default();
    let mut scene = CubeScene::new(config);
    let players: Vec<u32> = (1..=clients as u32).collect();
    for &p in &players {
        scene.add_player(p);
    }
    let mut server = ReplicationServer::new(
        replicate::schema(&q),
        ReplicationConfig {
            threads,
            ..ReplicationConfig::default()
        },
    );
    server.set_cells(cells);
    let ids: Vec<u64> = players.iter().map(|&p| u64::from(p)).collect();
    for &p in &players {
        server.add_client(u64::from(p));
    }
    let mut evict = vec![0u8; if cold { EVICT_BYTES } else { 0 }];
    let cubes = scene.cube_count();
    let (mut physics, mut capture, mut encode) = (Vec::new(), Vec::new(), Vec::new());
    let (mut physics_walls, mut replication_walls, mut acks) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_tick = Vec::new();
    let (mut encode_wall, mut tick_wall, mut per_client) = (Vec::new(), Vec::new(), Vec::new());
    let (mut candidates, mut entries, mut bytes, mut snapshots) = (0usize, 0usize, 0usize, 0usize);
    let (mut resent, mut visited, mut bits) = (0usize, 0usize, 0usize);
    for t in 0..MANY_WARM_UP + ticks {
        let inputs: Vec<_> = players
            .iter()
            .map(|&p| (p, busy_input(t + p * 7)))
            .collect();
        let timer = CpuTimer::start();
        scene.step(&inputs);
        let physics_ms = timer.ms();
        let physics_wall = timer.wall_ms();
        let tick = Tick(t + 1);
        let now = Duration::from_millis(u64::from(t) * 1000 / 64);
        let timer = CpuTimer::start();
        let _ = replicate::capture(&scene, &mut server);
        let capture_ms = timer.ms();
        let capture_wall = timer.wall_ms();
        let mut encode_ms = 0.0;
        let mut wall_ms = 0.0;
        let mut encoded = Vec::new();
        // What the clients acknowledged since the last tick: the server's work too,
        // wherever its loop does it.
        let timer = CpuTimer::start();
        for &p in &players {
            if let Some(acked) = tick.0.checked_sub(ACK_AGE_TICKS).filter(|a| *a > 0) {
                server.acknowledge(u64::from(p), Tick(acked), now);
            }
        }
        let ack_ms = timer.ms();
        let ack_wall = timer.wall_ms();
        for &p in &players {
            let id = u64::from(p);
            let position = scene.player_state(p).map(|s| s.position.to_array());
            server.set_focus(id, position);
            if let Some(own) = replicate::player_entity(cubes, p) {
                server.set_owned(id, &[own]);
            }
            if cold {
                // What a run's client simulations do between two encodes.
                evict
                    .iter_mut()
                    .step_by(64)
                    .for_each(|b| *b = b.wrapping_add(1));
            }
            if cold {
                let timer = CpuTimer::start();
                encoded.push(server.encode(id, tick, now));
                encode_ms += timer.ms();
                wall_ms += timer.wall_ms();
            }
        }
        if !cold {
            let timer = CpuTimer::start_for(threads);
            encoded = server.encode_many(&ids, tick, now);
            encode_ms = timer.ms();
            wall_ms = timer.wall_ms();
        }
        if t >= MANY_WARM_UP {
            for e in encoded.into_iter().flatten() {
                candidates += e.candidates;
                resent += e.resent;
                visited += e.visited;
                entries += e.entries;
                bits += e.bits;
                bytes += e.bytes.len();
                snapshots += 1;
            }
            physics.push(physics_ms);
            physics_walls.push(physics_wall);
            acks.push(ack_ms);
            replication_walls.push(ack_wall + capture_wall + wall_ms);
            capture.push(capture_ms);
            encode.push(encode_ms);
            per_tick.push(physics_ms + ack_ms + capture_ms + encode_ms);
            per_client.push(encode_ms * 1000.0 / clients.max(1) as f64);
            encode_wall.push(wall_ms);
            tick_wall.push(physics_wall + ack_wall + capture_wall + wall_ms);
        }
    }
    let spread = |v: Vec<f64>| {
        let p99 = crate::metrics::percentile(&v, 99.0).unwrap_or(f64::NAN);
        (median(v), p99)
    };
    let per = |n: usize| n as f64 / snapshots.max(1) as f64;
    let mean_wall = tick_wall.iter().sum::<f64>() / tick_wall.len().max(1) as f64;
    ManyClientsBench {
        clients,
        threads,
        encode_us_per_client: median(per_client),
        encode_wall_ms: spread(encode_wall),
        ticks_per_s: 1000.0 / mean_wall.max(1e-9),
        tick_wall_ms: spread(tick_wall),
        physics_ms: spread(physics),
        physics_wall_ms: spread(physics_walls),
        replication_wall_ms: spread(replication_walls),
        ack_ms: spread(acks),
        capture_ms: spread(capture),
        encode_ms: spread(encode),
        tick_ms: spread(per_tick),
        candidates_mean: per(candidates),
        resent_mean: per(resent),
        entries_mean: per(entries),
        bits_per_changed_entity: bits as f64 / entries.max(1) as f64,
        bytes_mean: per(bytes),
        visited_mean: per(visited),
        cells,
    }
}

/// [`bench_encode_clients`]' figures as a table, encode against physics.
pub fn format_many_clients(b: &ManyClientsBench) -> String {
    let row = |name: &str, (m, p): (f64, f64)| {
        format!(
            "{name:<34} {m:>9.3} {p:>9.3} {:>9.2}x\n",
            m / b.physics_ms.0
        )
    };
    let mut out = format!(
        "{:<34} {:>9} {:>9} {:>10}\n",
        format!("server tick, {} clients, 900 cubes", b.clients),
        "p50 ms",
        "p99 ms",
        "vs physics"
    );
    out.push_str(&row("physics step CPU (one thread)", b.physics_ms));
    out.push_str(&row("physics step wall", b.physics_wall_ms));
    out.push_str(&row("acknowledgements (every client)", b.ack_ms));
    out.push_str(&row("capture", b.capture_ms));
    out.push_str(&row(
        &format!("encode CPU (every client, {}t)", b.threads),
        b.encode_ms,
    ));
    out.push_str(&row("tick CPU (the four)", b.tick_ms));
    out.push_str(&row("encode wall", b.encode_wall_ms));
    out.push_str(&row(
        "replication wall (acks to encodes)",
        b.replication_wall_ms,
    ));
    out.push_str(&row("tick wall (server.tick_wall_ms)", b.tick_wall_ms));
    out.push_str(&format!(
        "server.encode_us_per_client_p50 (encode CPU per client per tick): {:.1} µs; \
         server.ticks_per_s (back to back): {:.0}\n",
        b.encode_us_per_client, b.ticks_per_s
    ));
    out.push_str(&format!(
        "per snapshot: {:.0} entities visited, {:.0} changed entities weighed, {:.1} sent \
         ({:.1} of them again: lost, or the own player's in flight), {:.0} bytes; \
         snapshot.bits_per_changed_entity {:.1}\n",
        b.visited_mean,
        b.candidates_mean,
        b.entries_mean,
        b.resent_mean,
        b.bytes_mean,
        b.bits_per_changed_entity
    ));
    out
}

/// The same server without cells (`off`) and with them (`on`), measured in one process:
/// per client and tick, what an encode visits and costs, and the ratio of the two.
pub fn format_cells(off: &ManyClientsBench, on: &ManyClientsBench) -> String {
    let cells = on.cells.map_or(String::from("none"), |c| {
        format!(
            "{} m cells, interest {} m around the player",
            c.size, c.radius
        )
    });
    let mut out = format!(
        "{} clients, 900 cubes; cells: {cells}\n{:<40} {:>10} {:>10} {:>8}\n",
        on.clients, "per client per tick (medians)", "no cells", "cells", "ratio"
    );
    let mut row = |name: &str, a: f64, b: f64| {
        out.push_str(&format!("{name:<40} {a:>10.2} {b:>10.2} {:>8.3}\n", b / a));
    };
    row("entities visited (mean)", off.visited_mean, on.visited_mean);
    row(
        "changed entities weighed (mean)",
        off.candidates_mean,
        on.candidates_mean,
    );
    row(
        &format!("encode CPU µs ({}t)", on.threads),
        off.encode_us_per_client,
        on.encode_us_per_client,
    );
    let per = |ms: f64, b: &ManyClientsBench| ms * 1000.0 / b.clients.max(1) as f64;
    row(
        "encode wall µs (tick's encodes / clients)",
        per(off.encode_wall_ms.0, off),
        per(on.encode_wall_ms.0, on),
    );
    row("snapshot bytes (mean)", off.bytes_mean, on.bytes_mean);
    row("tick wall ms p50", off.tick_wall_ms.0, on.tick_wall_ms.0);
    row("tick wall ms p99", off.tick_wall_ms.1, on.tick_wall_ms.1);
    out
}

/// The median of byte (or entity) counts; 0 for none.
fn median_count(mut counts: Vec<usize>) -> usize {
    counts.sort_unstable();
    counts.get(counts.len() / 2).copied().unwrap_or(0)
}

/// The rows as a table, with each operation's cost relative to the plain encode.
pub fn format_snapshot_rows(rows: &[SnapshotBenchRow]) -> String {
    let plain = rows
        .iter()
        .find(|r| r.operation.starts_with("plain encode"))
        .map_or(f64::NAN, |r| r.median_us);
    let mut out = format!(
        "{:<44} {:>10} {:>9} {:>12}\n",
        "operation (900 cubes, 1 player)", "median µs", "bytes", "vs plain enc"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<44} {:>10.1} {:>9} {:>11.2}x\n",
            r.operation,
            r.median_us,
            r.bytes,
            r.median_us / plain,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_measured_on_real_data() {
        let rows = bench_snapshot(1, &mut |_, _| {});
        assert_eq!(rows.len(), 5);
        let get = |prefix: &str| {
            rows.iter()
                .find(|r| r.operation.starts_with(prefix))
                .map(|r| r.bytes)
                .unwrap_or(0)
        };
        // Decodes produced all 900 cubes (a failed decode would count 0).
        assert_eq!(get("layer decode"), 900);
        assert_eq!(get("plain decode"), 900);
        assert_eq!(get("layer capture"), 901);
        // A delta is far smaller than plain floats.
        assert!(get("layer encode") * 20 < get("plain encode"));
        assert!(format_snapshot_rows(&rows).contains("layer encode"));
    }

    #[test]
    fn many_clients_share_the_budget_and_weigh_the_stirred_grid() {
        let b = bench_encode_clients(4, 8, false, 2, None);
        // Every client got a snapshot every tick, within the default budget's bytes
        // (256 kbit/s at 64 snapshots/s is 500 bytes, less the packet overhead).
        assert!(b.bytes_mean > 0.0 && b.bytes_mean <= 500.0, "{b:?}");
        // The players stirred the grid, and what changed was weighed and sent.
        assert!(b.entries_mean > 4.0, "{b:?}");
        // Entries are chosen among the candidates, plus states sent again until an
        // acknowledgement says an earlier send arrived.
        assert!(b.candidates_mean + b.resent_mean >= b.entries_mean, "{b:?}");
        assert!(b.encode_ms.0 > 0.0 && b.physics_ms.0 > 0.0);
        assert!(b.tick_wall_ms.0 > 0.0 && b.encode_us_per_client > 0.0 && b.ticks_per_s > 0.0);
        assert!(format_many_clients(&b).contains("vs physics"));
    }

    #[test]
    fn cells_cut_what_each_client_visits() {
        let cells = CellConfig {
            size: 4.0,
            radius: 4.0,
        };
        let off = bench_encode_clients(8, 8, false, 1, None);
        let on = bench_encode_clients(8, 8, false, 1, Some(cells));
        // The same world, stirred the same way: each client looks only at its cells.
        assert!(on.visited_mean * 2.0 < off.visited_mean, "{on:?} {off:?}");
        assert!(on.visited_mean > 0.0 && on.entries_mean > 1.0, "{on:?}");
        assert!(format_cells(&off, &on).contains("entities visited"));
    }
}
