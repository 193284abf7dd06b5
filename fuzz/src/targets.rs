//! The target bodies. Inputs that drive a sequence of reads use the first bytes (or bits)
//! of each step as an opcode, so one input exercises any mix of decoders.

use lagless_core::channel::MAX_MESSAGE_BYTES;
use lagless_core::message::{InputMessage, SnapshotFragment};
use lagless_core::{ClientConfig, ClientSession, Delivery, ServerConfig, ServerSession, Tick};
use lagless_replication::{ReplicationClient, ReplicationServer, codes_valid};
use lagless_scenes::cubes::quantize::StateQuantization;
use lagless_scenes::cubes::replicate;
use lagless_scenes::cubes::snapshot::{CubeSnapshot, SnapshotLimits};
use lagless_wire::{
    BitReader, BitWriter, BoundedFloat, QuantizedVec3, QuatCodec, Reader, Writer, var_i32_bits,
    var_u32_bits,
};
use std::sync::OnceLock;
use std::time::Duration;

/// Codecs the bit-stream target reads with (the same ones the seeds write with).
pub(crate) const POSITION: QuantizedVec3 = QuantizedVec3::uniform(-256.0, 256.0, 1.0 / 512.0);
pub(crate) const VELOCITY: BoundedFloat = BoundedFloat::new(-32.0, 32.0, 1.0 / 128.0);
pub(crate) const FIXED: BoundedFloat = BoundedFloat::new(1.5, 1.5, 1.0);

/// Most packets a session target processes, so one input cannot run for long.
const MAX_PACKETS: usize = 512;
/// More ticks than this from one `update` would be a runaway clock.
const MAX_TICKS_PER_UPDATE: usize = 10_000;

/// Byte-level [`Reader`]: fixed-width numbers, varints, floats, length-prefixed data.
pub fn wire_reader(data: &[u8]) {
    wire_reader_ops(data);
}

/// [`wire_reader`], returning how many operations failed (for checking the seeds).
pub(crate) fn wire_reader_ops(data: &[u8]) -> usize {
    let mut failed = 0;
    let mut r = Reader::new(data);
    while let Ok(op) = r.read_u8() {
        let before = r.position();
        let ok = match op % 14 {
            0 => r.read_u8().is_ok(),
            1 => r.read_bool().is_ok(),
            2 => r.read_u16().is_ok(),
            3 => r.read_u32().is_ok(),
            4 => r.read_u64().is_ok(),
            5 => r.read_f32().inspect(|v| assert!(v.is_finite())).is_ok(),
            6 => r
                .read_varint_u32()
                .inspect(|&v| {
                    // Minimal encodings only: re-encoding gives the bytes consumed.
                    let mut w = Writer::new();
                    w.write_varint_u32(v);
                    assert_eq!(w.as_bytes(), &data[before..r.position()], "varint u32");
                })
                .is_ok(),
            7 => r
                .read_varint_u64()
                .inspect(|&v| {
                    let mut w = Writer::new();
                    w.write_varint_u64(v);
                    assert_eq!(w.as_bytes(), &data[before..r.position()], "varint u64");
                })
                .is_ok(),
            8 => r.read_varint_i32().is_ok(),
            9 => r
                .read_len_prefixed(64, "fuzz")
                .inspect(|b| assert!(b.len() <= 64))
                .is_ok(),
            10 => r
                .read_count(1000, "fuzz")
                .inspect(|&n| assert!(n <= 1000))
                .is_ok(),
            11 => {
                let n = r.read_u8().unwrap_or(0);
                r.read_bytes(usize::from(n)).is_ok()
            }
            12 => {
                r.read_rest();
                true
            }
            _ => r.finish().is_ok(),
        };
        failed += usize::from(!ok);
        assert!(r.position() <= data.len());
    }
    failed
}

/// Bit-level [`BitReader`] with its variable-length integers and the quantization codecs.
/// The first byte picks the quaternion codec's width; the rest is a stream of 4-bit
/// opcodes and their operands.
pub fn bit_reader(data: &[u8]) {
    bit_reader_ops(data);
}

/// [`bit_reader`], returning how many operations failed (for checking the seeds).
pub(crate) fn bit_reader_ops(data: &[u8]) -> usize {
    let Some((&first, rest)) = data.split_first() else {
        return 0;
    };
    let mut failed = 0;
    let quat = QuatCodec::new(2 + u32::from(first) % 15);
    let mut r = BitReader::new(rest);
    let mut baseline = [0.0f32; 3];
    // Stop once only zero padding is left.
    while r.clone().finish().is_err() {
        let Ok(op) = r.read_bits(4) else { break };
        let before = r.bit_position();
        let ok = match op {
            0 => r.read_bits(6).and_then(|n| r.read_bits(n % 33)).is_ok(),
            1 => r.read_bool().is_ok(),
            2 => r.read_bits(7).and_then(|n| r.read_bits_u64(n % 65)).is_ok(),
            // One encoding per value: the bits consumed are exactly its size.
            3 => r
                .read_var_u32()
                .inspect(|&v| assert_eq!(r.bit_position() - before, var_u32_bits(v) as usize))
                .is_ok(),
            4 => r
                .read_var_i32()
                .inspect(|&v| assert_eq!(r.bit_position() - before, var_i32_bits(v) as usize))
                .is_ok(),
            5 => r.align().is_ok(),
            6 => r
                .read_bits(4)
                .and_then(|n| r.read_bytes_aligned(n as usize).map(drop))
                .is_ok(),
            // Decoded values are on the grid: snapping changes nothing.
            7 => POSITION
                .read(&mut r)
                .inspect(|p| {
                    assert_eq!(POSITION.snap(*p).map(f32::to_bits), p.map(f32::to_bits));
                    baseline = *p;
                })
                .is_ok(),
            8 => POSITION
                .read_delta(&mut r, baseline)
                .inspect(|p| assert_eq!(POSITION.snap(*p).map(f32::to_bits), p.map(f32::to_bits)))
                .is_ok(),
            9 => VELOCITY
                .read(&mut r)
                .inspect(|v| assert_eq!(VELOCITY.snap(*v).to_bits(), v.to_bits()))
                .is_ok(),
            10 => VELOCITY.read_delta(&mut r, 1.0).is_ok(),
            11 => {
                // Accepted quaternions are canonical: re-encoding gives the same bits.
                let bits = quat.bits();
                let original = r.clone().read_bits_u64(bits).ok();
                quat.read(&mut r)
                    .inspect(|q| {
                        assert!(q.iter().all(|c| c.is_finite()));
                        let mut w = BitWriter::new();
                        quat.write(&mut w, *q);
                        let again = BitReader::new(w.as_bytes()).read_bits_u64(bits).ok();
                        assert_eq!(original, again, "quaternion re-encoding");
                    })
                    .is_ok()
            }
            12 => FIXED.read(&mut r).inspect(|&v| assert_eq!(v, 1.5)).is_ok(),
            _ => r.finish().is_ok(),
        };
        failed += usize::from(!ok);
    }
    failed
}

/// Client -> server input messages: whatever decodes re-encodes to the very same bytes
/// (the decoder accepts only what the encoder writes).
pub fn input_message(data: &[u8]) {
    if let Ok(m) = InputMessage::<u8>::decode(data, 64) {
        assert!(m.inputs.len() <= 64);
        let mut w = Writer::new();
        m.encode(&mut w);
        assert_eq!(w.as_bytes(), data, "input message re-encoding");
    }
}

/// Server -> client snapshot fragments: whatever decodes re-encodes to the same bytes.
pub fn snapshot_fragment(data: &[u8]) {
    if let Ok(f) = SnapshotFragment::decode(data) {
        assert!(f.index < f.count);
        let mut w = Writer::new();
        f.encode(&mut w);
        assert_eq!(w.as_bytes(), data, "snapshot fragment re-encoding");
    }
}

/// The cube scene's snapshot payload: decode, and re-encoding decodes to the same state.
pub fn cube_snapshot(data: &[u8]) {
    if let Ok(s) = CubeSnapshot::decode(data, SnapshotLimits::default()) {
        let bytes = s.to_bytes();
        assert_eq!(
            CubeSnapshot::decode(&bytes, SnapshotLimits::default()).as_ref(),
            Ok(&s)
        );
    }
}

/// The tick [`replication_snapshot`] decodes at, and the one baseline it holds.
pub(crate) const DELTA_TICK: u32 = 100;
pub(crate) const DELTA_BASELINE_TICK: u32 = 97;

/// A replication server of the cube scene after its snapshots of the three ticks to
/// [`DELTA_BASELINE_TICK`] were acknowledged (the newest naming the two before it), and a
/// client that decoded them: a small real scene (16 cubes, two players) after a player
/// pushed into it. Its snapshots go against the newest with the two before merged, so
/// the decoder's merge is fuzzed too. Built once.
pub(crate) fn replication_pair() -> &'static (ReplicationServer, ReplicationClient) {
    static PAIR: OnceLock<(ReplicationServer, ReplicationClient)> = OnceLock::new();
    PAIR.get_or_init(new_replication_pair)
}

/// What [`replication_pair`] holds, built anew.
pub(crate) fn new_replication_pair() -> (ReplicationServer, ReplicationClient) {
    {
        let q = StateQuantization::default();
        let mut server = ReplicationServer::new(replicate::schema(&q), Default::default());
        let mut client = ReplicationClient::new(replicate::schema(&q), Default::default());
        server.add_client(1);
        let scene = crate::seeds::pushed_scene(30);
        let _ = replicate::capture(&scene, &mut server);
        for tick in DELTA_BASELINE_TICK - 2..=DELTA_BASELINE_TICK {
            if let Ok(s) = server.encode(1, Tick(tick), Duration::ZERO) {
                let _ = client.receive(Tick(tick), &s.bytes);
            }
        }
        server.acknowledge_many(1, Tick(DELTA_BASELINE_TICK), 0b11, Duration::ZERO);
        (server, client)
    }
}

/// A replication snapshot, decoded by a client holding one baseline view; whatever it
/// accepts leaves every entity with codes its kind allows.
pub fn replication_snapshot(data: &[u8]) {
    let mut client = replication_pair().1.clone();
    if let Ok(Some(_)) = client.receive(Tick(DELTA_TICK), data) {
        for (_, e) in client.entities() {
            let kind = client.kind(e.kind).expect("decoded kinds are declared");
            assert!(codes_valid(kind, &e.codes), "decoded codes out of range");
        }
    }
}

/// Splits a session input into packets: `[dt_ms: u8][len: u16 LE][len bytes]...`, the
/// last packet taking whatever is left if `len` runs past the end.
pub(crate) fn packets(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let [dt, lo, hi, rest @ ..] = data else {
            return None;
        };
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
        let (packet, tail) = rest.split_at(len);
        data = tail;
        Some((*dt, packet))
    })
    .take(MAX_PACKETS)
}

/// Frames packets for [`client_session`] / [`server_session`] (the inverse of `packets`).
pub fn frame(packets: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (dt, p) in packets {
        out.push(*dt);
        let len = u16::try_from(p.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&p[..usize::from(len)]);
    }
    out
}

/// A [`ClientSession`] fed arbitrary packets as if from the server, `dt_ms` apart, running
/// its game loop in between: it sends a game message now and then (reliable or not) and
/// reads what messages arrive. It must never panic nor run away.
pub fn client_session(data: &[u8]) {
    client_session_run(data);
}

/// [`client_session`], returning the client's stats (for checking the seeds reach deep).
pub(crate) fn client_session_run(data: &[u8]) -> lagless_core::ClientStats {
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    let mut now = Duration::ZERO;
    for (dt, packet) in packets(data) {
        now += Duration::from_millis(u64::from(dt));
        drop(client.handle_packet(now, packet));
        while let Some((_, m)) = client.poll_message() {
            assert!((1..=MAX_MESSAGE_BYTES).contains(&m.len()), "message size");
        }
        if dt % 5 == 0 {
            let delivery = if dt % 2 == 0 {
                Delivery::Reliable
            } else {
                Delivery::Unreliable
            };
            drop(client.send_message(delivery, &[dt; 3]));
        }
        client.set_resync(dt % 7 == 0);
        client.update(now);
        let mut ticks = 0;
        while let Some(tick) = client.next_tick() {
            client.set_input(tick, dt);
            ticks += 1;
            assert!(ticks <= MAX_TICKS_PER_UPDATE, "client ticks ran away");
        }
        while let Some(p) = client.poll_transmit(now) {
            assert!(
                p.len() <= lagless_core::MAX_PACKET_BYTES,
                "oversized packet"
            );
        }
        while client.poll_snapshot().is_some() {}
        let _ = (client.stats(), client.alpha(), client.server_position(now));
        let _ = (client.input_slack(), client.target_lead_ticks());
    }
    client.stats()
}

/// A [`ServerSession`] with client 1, fed arbitrary packets from it (and, when
/// `dt_ms % 8 == 7`, from an unknown client 2), running its game loop and sending
/// snapshots in between, with a game message now and then and reading what messages
/// arrive. It must never panic nor run away.
pub fn server_session(data: &[u8]) {
    server_session_run(data);
}

/// [`server_session`], returning client 1's stats (for checking the seeds reach deep).
pub(crate) fn server_session_run(data: &[u8]) -> Option<lagless_core::ServerClientStats> {
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    server.add_client(1).ok()?;
    let mut now = Duration::ZERO;
    let mut state = 0u64;
    for (dt, packet) in packets(data) {
        now += Duration::from_millis(u64::from(dt));
        let from = if dt % 8 == 7 { 2 } else { 1 };
        drop(server.handle_packet(from, now, packet));
        while let Some((id, _, m)) = server.poll_message() {
            assert_eq!(id, 1, "a message from a client never added");
            assert!((1..=MAX_MESSAGE_BYTES).contains(&m.len()), "message size");
        }
        if dt % 5 == 0 {
            let delivery = if dt % 2 == 0 {
                Delivery::Reliable
            } else {
                Delivery::Unreliable
            };
            drop(server.send_message(1, delivery, &[dt; 3]));
        }
        server.update(now);
        let mut ticks = 0;
        while let Some(step) = server.next_tick() {
            for (_, input) in &step.inputs {
                state = state.wrapping_add(u64::from(input.unwrap_or(0)));
            }
            if server.snapshot_due() {
                drop(server.send_snapshot(1, now, &state.to_le_bytes()));
            }
            ticks += 1;
            assert!(ticks <= MAX_TICKS_PER_UPDATE, "server ticks ran away");
        }
        while let Some((_, p)) = server.poll_transmit() {
            assert!(
                p.len() <= lagless_core::MAX_PACKET_BYTES,
                "oversized packet"
            );
        }
        let _ = (server.client_stats(1), server.snapshot_ack(1));
        let _ = (server.resync_requested(1), server.message_bytes_sent(1));
    }
    server.client_stats(1).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_tolerates_garbage() {
        let ps = vec![(3u8, vec![1, 2, 3]), (0, vec![]), (255, vec![9; 300])];
        let got: Vec<(u8, Vec<u8>)> = packets(&frame(&ps)).map(|(d, p)| (d, p.to_vec())).collect();
        assert_eq!(got, ps);
        // A length past the end takes the rest; fewer than 3 bytes is no packet.
        let got: Vec<_> = packets(&[1, 200, 0, 7, 7, 9]).collect();
        assert_eq!(got, vec![(1, &[7u8, 7, 9][..])]);
        assert_eq!(packets(&[1, 0]).count(), 0);
    }
}

/// The lab's control messages over UDP (`lagless_lab::net::Control`, on the reliable
/// channel): what decodes must re-encode to the same bytes.
pub fn lab_control(data: &[u8]) {
    if let Ok(m) = lagless_lab::net::Control::decode(data) {
        assert_eq!(m.encode(), data, "{m:?} re-encodes differently");
    }
}

/// The UDP session library's control messages (`lagless_transport::session::Control`:
/// the hello with the rates, a refusal, a game's own message), on the reliable channel: what decodes must
/// re-encode to the same bytes.
pub fn session_control(data: &[u8]) {
    if let Ok(m) = lagless_transport::session::Control::decode(data) {
        assert_eq!(m.encode(), data, "{m:?} re-encodes differently");
    }
}
