use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A seeded xorshift: deterministic loss and reordering without a dependency.
fn rng(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn in_order_over_a_lossy_reordering_link() {
    let mut a = MessageChannel::default();
    let mut b = MessageChannel::default();
    let mut got = Vec::new();
    let mut rand = rng(12345);
    let mut in_flight_ab: Vec<Vec<u8>> = Vec::new();
    let mut in_flight_ba: Vec<Vec<u8>> = Vec::new();
    let mut sent = 0u32;
    for t in 0..5000u64 {
        let now = ms(t * 10);
        if sent < 3000 && a.unacked() < 200 {
            a.send(&sent.to_le_bytes()).expect("send");
            sent += 1;
        }
        if let Some(p) = a.poll_packet(now) {
            in_flight_ab.push(p);
        }
        if let Some(p) = b.poll_packet(now) {
            in_flight_ba.push(p);
        }
        // 30 % loss, random order.
        while !in_flight_ab.is_empty() {
            let i = (rand() % in_flight_ab.len() as u64) as usize;
            let p = in_flight_ab.swap_remove(i);
            if rand() % 10 >= 3 {
                b.handle_packet(&p).expect("valid");
            }
        }
        while let Some(p) = in_flight_ba.pop() {
            if rand() % 10 >= 3 {
                a.handle_packet(&p).expect("valid");
            }
        }
        while let Some(m) = b.recv() {
            got.push(u32::from_le_bytes(m.try_into().expect("4 bytes")));
        }
    }
    assert_eq!(got, (0..3000).collect::<Vec<_>>());
    assert_eq!(a.unacked(), 0);
    assert!(a.stats().resends > 0);
}

#[test]
fn unreliable_at_most_once_even_when_replayed() {
    let mut a = MessageChannel::default();
    let mut b = MessageChannel::default();
    let mut got = Vec::new();
    let mut rand = rng(99);
    let mut sent = 0u32;
    let mut old: Vec<Vec<u8>> = Vec::new();
    for t in 0..2000u64 {
        for _ in 0..(rand() % 4) {
            a.send_unreliable(&sent.to_le_bytes()).expect("queued");
            sent += 1;
        }
        let Some(p) = a.poll_packet(ms(t)) else {
            continue;
        };
        // A quarter lost; one of the last 100 packets replayed now and then, late.
        if rand() % 4 != 0 {
            b.handle_packet(&p).expect("valid");
        }
        old.push(p);
        if rand() % 3 == 0 {
            let recent = old.len().min(100);
            let i = old.len() - 1 - (rand() % recent as u64) as usize;
            b.handle_packet(&old[i]).expect("valid");
        }
        while let Some((d, m)) = b.recv_with_delivery() {
            assert_eq!(d, Delivery::Unreliable);
            got.push(u32::from_le_bytes(m.try_into().expect("4 bytes")));
        }
    }
    let mut unique = got.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "an unreliable message came twice");
    assert!(
        got.len() as f64 > f64::from(sent) * 0.6,
        "{} of {sent}",
        got.len()
    );
    assert_eq!(b.stats().unreliable_delivered, got.len() as u64);
    assert!(b.stats().unreliable_duplicates > 0);
    assert_eq!(a.stats().unreliable_dropped, 0);
}

#[test]
fn unreliable_waits_a_little_for_room_then_is_dropped() {
    let mut a = MessageChannel::default();
    for _ in 0..3 {
        a.send_unreliable(&[7; 500]).expect("queued");
    }
    a.send_unreliable(&[8; 10]).expect("queued");
    let p = a.poll_packet_within(ms(0), 1100).expect("packet");
    assert!(p.len() <= 1100);
    // Two of the big ones and the small one fit; the third waits.
    assert_eq!(a.stats().unreliable_written, 3);
    assert_eq!(a.unreliable_queued(), 1);
    assert!(a.poll_packet_within(ms(10), 100).is_none(), "no room yet");
    let q = a.poll_packet(ms(20)).expect("room");
    assert_eq!(a.stats().unreliable_dropped, 0);
    let mut b = MessageChannel::default();
    b.handle_packet(&p).expect("valid");
    b.handle_packet(&q).expect("valid");
    let sizes: Vec<usize> = std::iter::from_fn(|| b.recv()).map(|m| m.len()).collect();
    assert_eq!(sizes, vec![500, 500, 10, 500]);
    // One that finds no room for `unreliable_max_wait` is dropped, stale.
    a.send_unreliable(&[9; 500]).expect("queued");
    assert!(a.poll_packet_within(ms(100), 100).is_none());
    assert!(a.poll_packet_within(ms(149), 100).is_none());
    assert_eq!(a.unreliable_queued(), 1);
    assert!(a.poll_packet_within(ms(150), 100).is_none());
    assert_eq!(a.unreliable_queued(), 0);
    assert_eq!(a.stats().unreliable_dropped, 1);
    // With no wait allowed, the first packet without room drops it.
    let mut c = MessageChannel::new(ChannelConfig {
        unreliable_max_wait: Duration::ZERO,
        ..Default::default()
    });
    c.send_unreliable(&[1; 200]).expect("queued");
    c.send_unreliable(&[2; 20]).expect("queued");
    assert!(c.poll_packet_within(ms(0), 100).is_some());
    assert_eq!(
        (c.stats().unreliable_written, c.stats().unreliable_dropped),
        (1, 1)
    );
    assert_eq!(c.unreliable_queued(), 0);
}

#[test]
fn a_polling_loop_ends_and_sends_everything_due() {
    let mut a = MessageChannel::default();
    for i in 0..10u8 {
        a.send(&[i; 400]).expect("queued");
        a.send_unreliable(&[i; 300]).expect("queued");
    }
    let packets: Vec<Vec<u8>> = std::iter::from_fn(|| a.poll_packet(ms(0))).collect();
    assert!((6..=8).contains(&packets.len()), "{}", packets.len());
    assert_eq!(a.unreliable_queued(), 0);
    assert_eq!(a.stats().unreliable_dropped, 0);
    assert!(a.poll_packet(ms(1)).is_none());
}

#[test]
fn reliable_waits_for_room_and_small_ones_pass() {
    let mut a = MessageChannel::default();
    a.send(&[1; 600]).expect("queued");
    a.send(&[2; 5]).expect("queued");
    let p = a
        .poll_packet_within(ms(0), 100)
        .expect("the small one fits");
    let mut b = MessageChannel::default();
    b.handle_packet(&p).expect("valid");
    // Buffered behind the big one, acknowledged by bit.
    assert!(b.recv().is_none());
    a.handle_packet(&b.poll_packet(ms(0)).expect("ack"))
        .expect("valid");
    assert_eq!(a.unacked(), 1);
    let p = a.poll_packet_within(ms(1), 700).expect("now it fits");
    b.handle_packet(&p).expect("valid");
    assert_eq!(b.recv(), Some(vec![1; 600]));
    assert_eq!(b.recv(), Some(vec![2; 5]));
    // Too small for even the acknowledgements: nothing written, nothing lost.
    a.send_unreliable(b"x").expect("queued");
    assert!(
        a.poll_packet_within(ms(2), MIN_CHANNEL_PACKET_BYTES - 1)
            .is_none()
    );
    assert_eq!(a.unreliable_queued(), 1);
}

#[test]
fn bounded_queues_and_sizes() {
    let mut a = MessageChannel::new(ChannelConfig {
        send_queue_len: 2,
        unreliable_queue_len: 1,
        ..Default::default()
    });
    a.send(b"1").expect("1");
    a.send(b"2").expect("2");
    assert_eq!(a.send(b"3"), Err(ChannelError::SendQueueFull));
    a.send_unreliable(b"u").expect("u");
    assert_eq!(
        a.send_unreliable(b"v"),
        Err(ChannelError::UnreliableQueueFull)
    );
    let size = |len| ChannelError::MessageSize {
        len,
        max: MAX_MESSAGE_BYTES,
    };
    assert_eq!(a.send(b""), Err(size(0)));
    assert_eq!(
        a.send(&[0; MAX_MESSAGE_BYTES + 1]),
        Err(size(MAX_MESSAGE_BYTES + 1))
    );
    // A small packet limit lowers the largest message: one always fits a packet.
    let mut small = MessageChannel::new(ChannelConfig {
        max_packet_bytes: 100,
        ..Default::default()
    });
    let max = small.max_message_bytes();
    small.send(&vec![1; max]).expect("largest");
    assert!(small.send(&vec![1; max + 1]).is_err());
    let p = small.poll_packet(ms(0)).expect("fits");
    assert!(p.len() <= 100);
    // The largest message fits the largest packet.
    let mut big = MessageChannel::default();
    big.send(&[1; MAX_MESSAGE_BYTES]).expect("largest");
    big.send_unreliable(&[1; MAX_MESSAGE_BYTES])
        .expect("largest");
    // One packet each.
    for _ in 0..2 {
        let p = big.poll_packet(ms(0)).expect("packet");
        assert!(p.len() <= MAX_CHANNEL_PACKET_BYTES);
    }
    assert!(big.poll_packet(ms(0)).is_none());
}

#[test]
fn receive_queue_is_bounded_and_reliable_ones_wait() {
    let mut a = MessageChannel::default();
    let mut b = MessageChannel::new(ChannelConfig {
        recv_queue_len: 2,
        ..Default::default()
    });
    for i in 0..5u8 {
        a.send(&[i]).expect("queued");
    }
    a.send_unreliable(b"u").expect("queued");
    b.handle_packet(&a.poll_packet(ms(0)).expect("packet"))
        .expect("valid");
    assert_eq!(b.received(), 2);
    assert_eq!(b.stats().unreliable_overflow, 1);
    // Reading makes room; the rest follow in order without a resend.
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| b.recv()).collect();
    assert_eq!(got, vec![vec![0], vec![1], vec![2], vec![3], vec![4]]);
    a.handle_packet(&b.poll_packet(ms(0)).expect("ack"))
        .expect("valid");
    assert_eq!(a.unacked(), 0);
}

#[test]
fn malformed_refused_without_state_change() {
    let mut a = MessageChannel::default();
    let mut w = Writer::new();
    w.write_u16(0);
    w.write_u32(0);
    w.write_varint_u32(1);
    w.write_u16(0);
    w.write_varint_u32(3);
    w.write_bytes(b"abc");
    w.write_varint_u32(0);
    let good = w.into_bytes();
    let mut empty = good.clone();
    empty[9] = 0;
    let mut overlong = good[..9].to_vec();
    overlong.extend([0x83, 0x00]);
    overlong.extend(&good[10..]);
    let mut huge_count = good[..6].to_vec();
    huge_count.extend([0xff, 0xff, 0x03]);
    for bytes in [
        &[][..],
        &[0; 6],
        &[0, 0, 0, 0, 0, 0, 1],
        &[0, 0, 0, 0, 0, 0, 0, 1],
        &[0, 0, 0, 0, 0, 0, 0, 0, 9],
        &good[..good.len() - 1],
        &[&good[..], &[0]].concat(),
        &empty,
        &overlong,
        &huge_count,
        &[0; MAX_CHANNEL_PACKET_BYTES + 1],
    ] {
        assert!(
            matches!(a.handle_packet(bytes), Err(ChannelError::Malformed(_))),
            "{bytes:?}"
        );
    }
    assert_eq!(a.stats().malformed, 11);
    assert!(a.recv().is_none());
    assert!(a.poll_packet(ms(0)).is_none());
    a.handle_packet(&good).expect("the good one");
    assert_eq!(a.recv(), Some(b"abc".to_vec()));
}

#[test]
fn forged_unreliable_id_does_not_silence_the_sender() {
    let mut a = MessageChannel::default();
    let mut b = MessageChannel::default();
    a.send_unreliable(b"1").expect("queued");
    b.handle_packet(&a.poll_packet(ms(0)).expect("packet"))
        .expect("valid");
    // A forged packet far ahead in id space.
    let mut w = Writer::new();
    w.write_u16(0);
    w.write_u32(0);
    w.write_varint_u32(0);
    w.write_varint_u32(1);
    w.write_u16(30_000);
    w.write_len_prefixed(b"forged");
    b.handle_packet(w.as_bytes()).expect("well-formed");
    a.send_unreliable(b"2").expect("queued");
    b.handle_packet(&a.poll_packet(ms(1)).expect("packet"))
        .expect("valid");
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| b.recv()).collect();
    assert_eq!(got, vec![b"1".to_vec(), b"forged".to_vec(), b"2".to_vec()]);
}

#[test]
fn decoder_never_panics_on_noise() {
    let mut rand = rng(7);
    let mut a = MessageChannel::default();
    for _ in 0..20_000 {
        let len = (rand() % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rand() as u8).collect();
        let _ = a.handle_packet(&bytes);
        while a.recv().is_some() {}
        let _ = a.poll_packet(ms(0));
    }
}

#[test]
fn varint_len_matches_the_writer() {
    for v in [
        0usize,
        1,
        127,
        128,
        300,
        16_383,
        16_384,
        1 << 21,
        u32::MAX as usize,
    ] {
        let mut w = Writer::new();
        w.write_varint_u32(v as u32);
        assert_eq!(varint_len(v), w.len(), "{v}");
    }
}
