//! Valid inputs for every target, made by the real encoders, for mutation-based smoke
//! runs and as a starting corpus for libFuzzer (see `write_corpus`).

use crate::targets::{DELTA_TICK, FIXED, POSITION, VELOCITY, frame, new_replication_pair, packets};
use lagless_core::Tick;
use lagless_core::{ClientConfig, ClientSession, Delivery, ServerConfig, ServerSession};
use lagless_scenes::cubes::replicate;
use lagless_scenes::cubes::snapshot::CubeSnapshot;
use lagless_scenes::cubes::{CubeInput, CubeScene, CubeSceneConfig};
use lagless_wire::{BitWriter, QuatCodec, Writer};
use std::time::Duration;

/// Valid inputs for the target called `name` (empty for an unknown name).
pub fn for_target(name: &str) -> Vec<Vec<u8>> {
    match name {
        "wire_reader" => wire_reader(),
        "bit_reader" => bit_reader(),
        "input_message" => input_messages(),
        "snapshot_fragment" => snapshot_fragments(),
        "cube_snapshot" => cube_snapshots(),
        "replication_snapshot" => replication_snapshots(),
        "client_session" => vec![session_traffic(0).0, session_traffic(4).0],
        "server_session" => vec![session_traffic(0).1, session_traffic(4).1],
        "netcode_server" => vec![
            crate::netcode::netcode_sessions(false).0,
            crate::netcode::netcode_sessions(true).0,
        ],
        "netcode_client" => vec![
            crate::netcode::netcode_sessions(false).1,
            crate::netcode::netcode_sessions(true).1,
        ],
        "reliable_channel" => vec![crate::netcode::reliable_traffic()],
        "lab_control" => lab_controls(),
        "session_control" => session_controls(),
        "dead_reckoning" => crate::deadreckoning::seeds(),
        "view_claim" | "hit_reports" | "spawn_claims" | "shooter_input" => {
            crate::shooter::seeds(name)
        }
        _ => Vec::new(),
    }
}

/// The UDP session library's messages: a hello, both refusals and a game's message.
fn session_controls() -> Vec<Vec<u8>> {
    use lagless_transport::session::{Control, Mismatch};
    vec![
        Control::Hello {
            tick_hz: 64,
            snapshot_interval: 2,
            resumed: false,
            client: 7,
        }
        .encode(),
        Control::Refused(Mismatch::TickRate {
            server: 64,
            client: 30,
        })
        .encode(),
        Control::Refused(Mismatch::SnapshotRate {
            tick_hz: 64,
            server: 1,
            client: 2,
        })
        .encode(),
        Control::Game(b"map arena".to_vec()).encode(),
    ]
}

/// The two control messages a server sends.
fn lab_controls() -> Vec<Vec<u8>> {
    use lagless_lab::net::Control;
    vec![
        Control::Welcome {
            player: 3,
            tick_hz: 64,
            snapshot_hz: 32,
            grid: 30,
            scene: 1,
            schema: 0x9e37_79b9_7f4a_7c15,
            seed: 2,
        }
        .encode(),
        Control::Link {
            up_expected: 6400,
            up_received: 6123,
            down_sent: 3200,
            down_bytes: 600_000,
            elapsed_ms: 100_000,
        }
        .encode(),
    ]
}

/// Writes every target's seeds to `dir/<target>/seed-<n>` (libFuzzer's corpus layout).
pub fn write_corpus(dir: &std::path::Path) -> std::io::Result<()> {
    for (name, _) in crate::TARGETS {
        let d = dir.join(name);
        std::fs::create_dir_all(&d)?;
        for (i, s) in for_target(name).iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i}")), s)?;
        }
    }
    Ok(())
}

fn wire_reader() -> Vec<Vec<u8>> {
    let mut w = Writer::new();
    for op in 0..14u8 {
        w.write_u8(op);
        match op {
            0 => w.write_u8(9),
            1 => w.write_bool(true),
            2 => w.write_u16(0xbeef),
            3 => w.write_u32(7),
            4 => w.write_u64(u64::MAX),
            5 => w.write_f32(-1.5),
            6 => w.write_varint_u32(300),
            7 => w.write_varint_u64(1 << 40),
            8 => w.write_varint_i32(-2),
            9 => w.write_len_prefixed(b"hello"),
            10 => w.write_varint_u32(12),
            11 => w.write_bytes(&[2, 0xaa, 0xbb]),
            _ => {}
        }
    }
    vec![w.into_bytes(), vec![12, 1, 2, 3], vec![13]]
}

fn bit_reader() -> Vec<Vec<u8>> {
    let quat = QuatCodec::new(10);
    let mut w = BitWriter::new();
    let op = |w: &mut BitWriter, op: u32| w.write_bits(op, 4);
    op(&mut w, 0);
    w.write_bits(13, 6);
    w.write_bits(0x1abc, 13);
    op(&mut w, 1);
    w.write_bool(true);
    op(&mut w, 2);
    w.write_bits(40, 7);
    w.write_bits_u64(1 << 39, 40);
    op(&mut w, 3);
    w.write_var_u32(5);
    op(&mut w, 4);
    w.write_var_i32(-300);
    op(&mut w, 7);
    POSITION.write(&mut w, [1.0, 2.0, -3.0]);
    op(&mut w, 8);
    POSITION.write_delta(&mut w, [1.0, 2.0, -3.0], [1.01, 2.0, -3.5]);
    op(&mut w, 9);
    VELOCITY.write(&mut w, -4.25);
    op(&mut w, 10);
    VELOCITY.write_delta(&mut w, 1.0, 1.5);
    op(&mut w, 11);
    quat.write(&mut w, [0.1, 0.2, -0.3, 0.9]);
    op(&mut w, 12);
    FIXED.write(&mut w, 1.5);
    op(&mut w, 5);
    w.align();
    op(&mut w, 6);
    w.write_bits(2, 4);
    w.write_bytes_aligned(&[1, 2]);
    op(&mut w, 15);
    let mut stream = vec![8u8]; // first byte: 2 + 8 % 15 = 10 bits per quaternion component
    stream.extend(w.into_bytes());
    vec![stream]
}

/// Input messages a real client sent (see [`session_traffic`]).
fn input_messages() -> Vec<Vec<u8>> {
    let (_, up) = session_traffic(0);
    sample(packets(&up).map(|(_, p)| p.to_vec()).collect())
}

/// Snapshot fragments a real server sent, one- and two-fragment snapshots alike.
fn snapshot_fragments() -> Vec<Vec<u8>> {
    let (down, _) = session_traffic(0);
    sample(packets(&down).map(|(_, p)| p.to_vec()).collect())
}

/// The first, last and a few evenly spread items.
fn sample(all: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let step = (all.len() / 6).max(1);
    let mut out: Vec<Vec<u8>> = all.iter().step_by(step).cloned().collect();
    out.extend(all.last().cloned());
    out
}

/// Snapshots of a real (small) cube scene with a player pushing into it, made with
/// the scene's own encoder, plus the empty snapshot.
fn cube_snapshots() -> Vec<Vec<u8>> {
    let mut out = vec![CubeSnapshot::capture(&pushed_scene(0)).to_bytes()];
    out.push(CubeSnapshot::capture(&pushed_scene(40)).to_bytes());
    out.push(CubeSnapshot::default().to_bytes());
    out
}

/// A small scene (4 x 4 cubes, players 0 and 7) after player 0 pushed forward for
/// `ticks` ticks.
pub(crate) fn pushed_scene(ticks: u32) -> CubeScene {
    let mut scene = CubeScene::new(CubeSceneConfig {
        grid: 4,
        ..CubeSceneConfig::default()
    });
    scene.add_player(0);
    scene.add_player(7);
    for _ in 0..ticks {
        scene.step(&[(0, CubeInput::FORWARD)]);
    }
    scene
}

/// Replication snapshots of the same scene a few ticks after the fuzz target's
/// baseline: against it (with budget and without), and in full.
fn replication_snapshots() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for ticks in [33, 45] {
        let (mut server, _) = new_replication_pair();
        let _ = replicate::capture(&pushed_scene(ticks), &mut server);
        if let Ok(s) = server.encode(1, Tick(DELTA_TICK), std::time::Duration::ZERO) {
            out.push(s.bytes);
        }
        server.add_client(2);
        if let Ok(s) = server.encode(2, Tick(DELTA_TICK), std::time::Duration::ZERO) {
            out.push(s.bytes);
        }
    }
    out
}

/// A real exchange: (server -> client packets, client -> server packets), each framed
/// with the milliseconds between them, with game messages both ways now and then (so
/// packets carry message sections) and a resync request for a while. With
/// `loss_every > 0`, every `loss_every`-th packet in each direction is lost (and left
/// out of the recording).
fn session_traffic(loss_every: usize) -> (Vec<u8>, Vec<u8>) {
    let lost = |n: usize| loss_every > 0 && n % loss_every == loss_every - 1;
    let (mut sent_down, mut sent_up) = (0usize, 0usize);
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    if server.add_client(1).is_err() {
        return (Vec::new(), Vec::new());
    }
    let (mut to_client, mut to_server) = (Vec::new(), Vec::new());
    let (mut last_down, mut last_up) = (0u64, 0u64);
    let mut position = 0i64;
    for ms in 0..600u64 {
        let now = Duration::from_millis(ms);
        if ms % 40 == 0 {
            let n = (ms / 40) as u8;
            let delivery = [Delivery::Reliable, Delivery::Unreliable][usize::from(n % 2)];
            let _ = client.send_message(delivery, &[n; 5]);
            let _ = server.send_message(1, delivery, &vec![n; 1 + usize::from(n) * 20]);
        }
        client.set_resync((200..300).contains(&ms));
        server.update(now);
        while let Some(step) = server.next_tick() {
            for (_, input) in &step.inputs {
                position += i64::from(input.unwrap_or(0));
            }
            if server.snapshot_due() {
                // Big enough to need two fragments now and then.
                let payload: Vec<u8> = (0..1100 + (ms % 300) as usize)
                    .map(|i| (i as i64 + position) as u8)
                    .collect();
                let _ = server.send_snapshot(1, now, &payload);
            }
        }
        while let Some((_, packet)) = server.poll_transmit() {
            sent_down += 1;
            if lost(sent_down) {
                continue;
            }
            let _ = client.handle_packet(now, &packet);
            to_client.push(((ms - last_down).min(255) as u8, packet));
            last_down = ms;
        }
        client.update(now);
        while let Some(tick) = client.next_tick() {
            client.set_input(tick, (tick.0 % 3) as u8);
        }
        while let Some(packet) = client.poll_transmit(now) {
            sent_up += 1;
            if lost(sent_up) {
                continue;
            }
            let _ = server.handle_packet(1, now, &packet);
            to_server.push(((ms - last_up).min(255) as u8, packet));
            last_up = ms;
        }
        while client.poll_snapshot().is_some() {}
        while client.poll_message().is_some() {}
        while server.poll_message().is_some() {}
    }
    (frame(&to_client), frame(&to_server))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lagless_core::message::{InputMessage, SnapshotFragment};

    #[test]
    fn seeds_are_valid_encodings() {
        for s in input_messages() {
            assert!(InputMessage::<u8>::decode(&s, 64).is_ok());
        }
        for s in snapshot_fragments() {
            assert!(SnapshotFragment::decode(&s).is_ok());
        }
        for s in cube_snapshots() {
            assert!(CubeSnapshot::decode(&s, Default::default()).is_ok());
        }
        for s in replication_snapshots() {
            let mut client = crate::targets::replication_pair().1.clone();
            assert!(matches!(client.receive(Tick(DELTA_TICK), &s), Ok(Some(_))));
        }
        let (down, up) = session_traffic(0);
        let down: Vec<_> = packets(&down).collect();
        let up: Vec<_> = packets(&up).collect();
        assert!(
            down.len() > 10 && up.len() > 10,
            "{} {}",
            down.len(),
            up.len()
        );
        assert!(
            down.iter()
                .all(|(_, p)| SnapshotFragment::decode(p).is_ok())
        );
        assert!(
            up.iter()
                .all(|(_, p)| InputMessage::<u8>::decode(p, 64).is_ok())
        );
        // Message sections and the resync flag appear both ways.
        let fragments: Vec<_> = down
            .iter()
            .filter_map(|(_, p)| SnapshotFragment::decode(p).ok())
            .collect();
        let inputs: Vec<_> = up
            .iter()
            .filter_map(|(_, p)| InputMessage::<u8>::decode(p, 64).ok())
            .collect();
        assert!(fragments.iter().filter(|f| f.messages.is_some()).count() > 5);
        assert!(inputs.iter().filter(|m| m.messages.is_some()).count() > 5);
        assert!(inputs.iter().any(|m| m.resync));
    }

    #[test]
    fn session_seeds_reach_deep() {
        let (down, up) = session_traffic(0);
        let c = crate::targets::client_session_run(&down);
        assert!(c.snapshots_received > 5, "{c:?}");
        assert_eq!(c.packets_rejected, 0, "{c:?}");
        assert!(c.message_bytes_received > 0, "{c:?}");
        let s = crate::targets::server_session_run(&up).expect("client 1");
        assert!(s.packets_received > 5, "{s:?}");
        assert!(s.message_bytes_received > 0, "{s:?}");
        assert_eq!(s.packets_rejected, 0, "{s:?}");
        println!("{c:?}\n{s:?}");
    }

    #[test]
    fn stream_seeds_decode_without_a_single_error() {
        for s in wire_reader() {
            assert_eq!(crate::targets::wire_reader_ops(&s), 0, "{s:?}");
        }
        for s in bit_reader() {
            assert_eq!(crate::targets::bit_reader_ops(&s), 0, "{s:?}");
        }
    }
}
