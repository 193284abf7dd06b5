//! The dead-reckoning message decoders and the receiver behind them.

use lagless_core::Tick;
use lagless_replication::deadreckoning::{
    CharacterState, DrCodec, DrMessage, DrReceiver, DrServer, ReceiverConfig, SenderConfig,
    Steering,
};
use lagless_wire::{BitReader, BitWriter, Reader};
use std::time::Duration;

/// The receiver's estimate of the sender's tick in [`dead_reckoning`].
const REFERENCE: Tick = Tick(70_000);
/// Ids the receiver has spawned (the seeds use these and a few others).
const SPAWNED: u32 = 8;

/// Dead-reckoning bytes three ways: one message alone (what decodes must check
/// against the limits and re-encode to the same bytes), one inside a byte stream, and a
/// batch fed to a receiver with both steering modes, whose shown characters must stay
/// finite at any later time.
pub fn dead_reckoning(data: &[u8]) {
    let codec = DrCodec::default();
    if let Ok(m) = codec.decode(data, REFERENCE) {
        assert!(m.check(&codec.limits).is_ok(), "decoded a refused message");
        let again = codec.encode(&m).expect("a decoded message re-encodes");
        assert_eq!(again, data, "re-encoding differs");
    }
    let mut r = Reader::new(data);
    if let Ok(m) = codec.read_bytes(&mut r, REFERENCE) {
        assert!(m.check(&codec.limits).is_ok(), "decoded a refused message");
    }
    for steering in [Steering::Arrive, Steering::Pvb] {
        let mut rx = DrReceiver::new(ReceiverConfig {
            steering,
            ..ReceiverConfig::default()
        });
        (0..SPAWNED).for_each(|id| _ = rx.spawn(id));
        rx.set_one_way_lag(Duration::from_millis(80));
        let mut bits = BitReader::new(data);
        // Two batches back to back: the second steers from what the first showed.
        for at in [1000, 1500] {
            let _ = rx.receive_batch(Duration::from_millis(at), REFERENCE, &codec, &mut bits);
        }
        for at in [1500u64, 1700, 4000, 60_000, u64::from(u32::MAX)] {
            for (id, s) in rx.shown_all(Duration::from_millis(at)) {
                let all = s
                    .position
                    .iter()
                    .chain(&s.velocity)
                    .chain(&s.predicted_point);
                assert!(all.copied().all(f32::is_finite), "{id}: {s:?}");
                assert!(s.heading.is_finite(), "{id}: {s:?}");
            }
        }
    }
}

/// Valid inputs: single messages (moving, idle, large ids) and batches of two from a
/// real sender, in both framings.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let codec = DrCodec::default();
    let mut server = DrServer::new(SenderConfig::default());
    server.add_client(1);
    let mut out = Vec::new();
    for (tick, heading, speed) in [(69_990, 0.0, 1.4), (69_995, 2.0, 4.5), (70_000, 2.0, 0.0)] {
        let now = Duration::from_millis(u64::from(tick) * 16);
        for id in [1, 3] {
            let p = [id as f32, 0.0, -(tick as f32) * 1e-3];
            server.update(id, now, Tick(tick), CharacterState::new(p, heading, speed));
        }
        let messages = server.poll_messages(1, |_| true);
        let mut w = BitWriter::new();
        codec.write_batch(&mut w, &messages).expect("valid");
        out.push(w.into_bytes());
        for m in &messages {
            out.push(codec.encode(m).expect("valid"));
        }
    }
    let far = DrMessage {
        id: 1_000_000,
        ..DrCodec::default()
            .decode(&out[1], REFERENCE)
            .expect("a seed decodes")
    };
    out.push(codec.encode(&far).expect("valid"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_alone_or_as_a_batch_and_reach_the_receiver() {
        let codec = DrCodec::default();
        let seeds = seeds();
        let mut alone = 0;
        for s in &seeds {
            let single = codec.decode(s, REFERENCE).is_ok();
            let batch = codec.read_batch(&mut BitReader::new(s), REFERENCE);
            assert!(single || batch.is_ok(), "{s:02x?}");
            alone += usize::from(single);
        }
        assert!(
            alone >= 6 && alone < seeds.len(),
            "{alone} of {}",
            seeds.len()
        );
        let mut rx = DrReceiver::new(ReceiverConfig::default());
        (0..SPAWNED).for_each(|id| _ = rx.spawn(id));
        let got = rx.receive_batch(
            Duration::ZERO,
            REFERENCE,
            &codec,
            &mut BitReader::new(&seeds[0]),
        );
        assert_eq!(got, Ok(2));
    }
}
