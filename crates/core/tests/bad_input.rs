//! Malformed, truncated, unknown, far-off and oversized packets are rejected with typed
//! errors and counted; nothing panics and the sessions keep working. A tick far from the
//! server clock estimate is refused, and one that made the estimate is outlived.

mod common;

use common::Harness;
use lagless_core::message::{
    FRAGMENT_PAYLOAD_BYTES, InputAck, InputMessage, KIND_INPUT, KIND_SNAPSHOT, PingEcho,
    SnapshotFragment,
};
use lagless_core::{
    ClientConfig, ClientSession, LeadPolicy, ProtocolError, ServerConfig, ServerSession,
    SyncConfig, Tick,
};
use lagless_netem::profile;
use lagless_wire::{Seq16, Writer};
use std::time::Duration;

fn input_packet(start: Seq16, inputs: Vec<u8>) -> Vec<u8> {
    let mut w = Writer::new();
    InputMessage {
        seq: Seq16(1),
        client_time_us: 0,
        snapshot_ack: None,
        snapshot_acks: 0,
        start_tick: start,
        inputs,
        tick_hz: None,
        resync: false,
        messages: None,
    }
    .encode(&mut w);
    w.into_bytes()
}

#[test]
fn server_rejects_and_counts_bad_packets() {
    let mut s = ServerSession::<u8>::new(ServerConfig::default());
    s.add_client(1).unwrap();
    let now = Duration::from_secs(1);
    s.update(Duration::ZERO);
    s.update(now);
    while s.next_tick().is_some() {}
    let current = s.current_tick();

    assert_eq!(
        s.handle_packet(9, now, &[KIND_INPUT]),
        Err(ProtocolError::UnknownClient(9))
    );
    assert_eq!(
        s.handle_packet(1, now, &[0xEE, 1, 2]),
        Err(ProtocolError::UnknownKind(0xEE))
    );
    assert!(matches!(
        s.handle_packet(1, now, &[KIND_INPUT, 1]),
        Err(ProtocolError::Wire(_))
    ));
    assert!(matches!(
        s.handle_packet(1, now, &vec![KIND_INPUT; 70_000]),
        Err(ProtocolError::PacketTooLarge { .. })
    ));
    // An absurd input count is refused before anything is allocated.
    let mut w = Writer::new();
    w.write_u8(KIND_INPUT);
    w.write_u16(2);
    w.write_u32(0);
    w.write_u8(0);
    w.write_u16(0);
    w.write_varint_u32(u32::MAX);
    assert!(matches!(
        s.handle_packet(1, now, w.as_bytes()),
        Err(ProtocolError::Wire(_))
    ));
    // Inputs far in the future are refused and counted; a client cannot queue up time.
    let far = current.saturating_add(1000);
    let refused = s.handle_packet(1, now, &input_packet(far.to_wire(), vec![1; 4]));
    let Err(ProtocolError::TickOutOfRange { tick, low, high }) = refused else {
        panic!("{refused:?}");
    };
    // The error names the tick and the range accepted, so a log line explains itself.
    assert!(tick >= far && tick > high, "{tick}");
    assert!(low <= current && current < high, "{low}..={high}");
    let text = refused.unwrap_err().to_string();
    assert!(
        text.contains(&tick.to_string()) && text.contains(&high.to_string()),
        "{text}"
    );
    let st = s.client_stats(1).unwrap().clone();
    assert_eq!(st.packets_rejected, 4);
    assert_eq!(st.inputs_too_far_ahead, 4);
    assert_eq!(st.inputs_accepted, 0);
    // Inputs for ticks already simulated are ignored and counted as late.
    s.handle_packet(
        1,
        now,
        &input_packet(current.saturating_sub(10).to_wire(), vec![1; 5]),
    )
    .unwrap();
    assert_eq!(s.client_stats(1).unwrap().inputs_late, 5);
    // A valid packet still works afterwards.
    s.handle_packet(1, now, &input_packet(current.to_wire(), vec![3]))
        .unwrap();
    s.update(now + Duration::from_millis(16));
    let step = s.next_tick().unwrap();
    assert_eq!(step.tick, current);
    assert_eq!(step.inputs, vec![(1, Some(3))]);
}

#[test]
fn server_never_runs_faster_than_its_clock() {
    // A client flooding inputs for many future ticks cannot make the server step more.
    let mut s = ServerSession::<u8>::new(ServerConfig::default());
    s.add_client(1).unwrap();
    s.update(Duration::ZERO);
    for k in 0..50u32 {
        let _ = s.handle_packet(
            1,
            Duration::ZERO,
            &input_packet(Tick(k * 60).to_wire(), vec![1; 60]),
        );
    }
    s.update(Duration::from_secs(1));
    let mut ticks = 0;
    while s.next_tick().is_some() {
        ticks += 1;
    }
    // The backlog cap (8 ticks) applies to a 1 s stall; either way, never more than real time.
    assert!(ticks <= 64, "{ticks}");
}

#[test]
fn client_rejects_and_counts_bad_packets() {
    let mut c = ClientSession::<u8>::new(ClientConfig::default());
    let now = Duration::from_millis(5);
    assert_eq!(
        c.handle_packet(now, &[KIND_INPUT]),
        Err(ProtocolError::UnknownKind(KIND_INPUT))
    );
    assert!(c.handle_packet(now, &[KIND_SNAPSHOT, 0, 0]).is_err());
    // A fragment count implying a snapshot beyond the configured maximum.
    // Fragments before the last are full, as the server cuts them.
    let frag = |index: u8, count: u8, tick: u32, mut payload: Vec<u8>| {
        if index + 1 < count {
            payload.resize(FRAGMENT_PAYLOAD_BYTES, 0);
        }
        let mut w = Writer::new();
        SnapshotFragment {
            seq: Seq16(tick as u16),
            tick,
            echo: None,
            input_ack: None,
            index,
            count,
            essential: false,
            tick_hz: None,
            server_instance: 0,
            messages: None,
            payload,
        }
        .encode(&mut w);
        w.into_bytes()
    };
    assert!(matches!(
        c.handle_packet(now, &frag(0, 255, 10, vec![1])),
        Err(ProtocolError::SnapshotTooLarge { .. })
    ));
    // Fragments that disagree about the count.
    c.handle_packet(now, &frag(0, 3, 20, vec![1])).unwrap();
    assert_eq!(
        c.handle_packet(now, &frag(1, 2, 20, vec![2])),
        Err(ProtocolError::InconsistentFragment)
    );
    assert_eq!(c.stats().packets_rejected, 4);
    // A good snapshot still comes through, and an older one afterwards is dropped as stale.
    c.handle_packet(now, &frag(0, 1, 30, vec![7])).unwrap();
    assert_eq!(
        c.poll_snapshot().map(|s| (s.tick, s.payload)),
        Some((Tick(30), vec![7]))
    );
    c.handle_packet(now, &frag(0, 1, 25, vec![8])).unwrap();
    assert_eq!(c.poll_snapshot(), None);
    assert_eq!(c.stats().stale_fragments, 1);
}

#[test]
fn random_garbage_on_the_wire_is_survived() {
    // For 10 s, throw random bytes at both sides and bit-flipped copies of valid input
    // messages at the server. Garbage must be rejected and counted. Flipped messages that
    // still parse are accepted as the client's own (only an authenticated transport can
    // tell them apart, and a client lying about itself only harms itself), so they may
    // disturb the clock; once they stop, the session must recover on its own.
    let mut h = Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("broadband").unwrap(),
        1,
        21,
    );
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut rejected_server = 0;
    let mut rejected_client = 0;
    for k in 0..200u64 {
        let now = h.now;
        let garbage: Vec<u8> = (0..(next() % 1500)).map(|_| next() as u8).collect();
        let mut flipped = input_packet(Seq16(k as u16), vec![1, 2, 3]);
        let i = (next() as usize) % flipped.len();
        flipped[i] ^= 1 << (next() % 8);
        for p in [garbage.clone(), flipped] {
            if h.server.handle_packet(1, now, &p).is_err() {
                rejected_server += 1;
            }
        }
        if h.clients[0].session.handle_packet(now, &garbage).is_err() {
            rejected_client += 1;
        }
        let until = h.now + Duration::from_millis(50);
        h.run_until(until, &mut |_, _| 1);
    }
    assert!(
        rejected_server > 200 && rejected_client > 150,
        "{rejected_server} {rejected_client}"
    );
    // Errors also cover parseable packets with some inputs out of range; the rejected
    // count covers packets dropped whole.
    let rejected = h.server.client_stats(1).unwrap().packets_rejected;
    assert!(rejected > 200 && rejected <= rejected_server);

    // Clean traffic again: within a few seconds the input flows as on a clean link (the
    // adaptive lead lets at most its 0.5% target go short; 1% allows for a few).
    h.run_until(Duration::from_secs(15), &mut |_, _| 1);
    let before = h.server.client_stats(1).unwrap().clone();
    let shown_before = h.clients[0].shown.unwrap().1;
    h.run_until(Duration::from_secs(20), &mut |_, _| 1);
    let after = h.server.client_stats(1).unwrap().clone();
    assert!(
        after.ticks_starved - before.ticks_starved <= 3,
        "{before:?} -> {after:?}"
    );
    assert!(after.ticks_with_input - before.ticks_with_input >= 5 * 64 - 1);
    let shown_after = h.clients[0].shown.unwrap().1;
    assert!(
        shown_after - shown_before >= 5 * 64 - 2,
        "{shown_before} -> {shown_after}"
    );
}

/// One fragment as the server would cut it (full before the last), with a clock echo.
fn fragment(seq: u16, tick: u32, index: u8, count: u8, byte: u8) -> Vec<u8> {
    let len = if index + 1 < count {
        FRAGMENT_PAYLOAD_BYTES
    } else {
        16
    };
    let mut w = Writer::new();
    SnapshotFragment {
        seq: Seq16(seq),
        tick,
        echo: Some(PingEcho {
            client_time_us: 0,
            hold_us: 0,
        }),
        input_ack: None,
        index,
        count,
        essential: false,
        tick_hz: None,
        server_instance: 0,
        messages: None,
        payload: vec![byte; len],
    }
    .encode(&mut w);
    w.into_bytes()
}

/// One client over `broadband`.
fn one_client(seed: u64) -> Harness {
    Harness::new(
        ServerConfig::default(),
        ClientConfig::default(),
        profile("broadband").unwrap_or_default(),
        1,
        seed,
    )
}

/// Runs to `until` and checks the session works: at 64 Hz, every second brings nearly 64
/// snapshots to the client and 64 ticks of its input to the server (the adaptive lead
/// lets its 0.5% target, a tick now and then, go short).
fn assert_flowing(h: &mut Harness, until: Duration) {
    let fed = |h: &Harness| h.server.client_stats(1).map_or(0, |s| s.ticks_with_input);
    let (snapshots, before) = (h.clients[0].snapshot_ticks.len(), fed(h));
    let from = h.now;
    h.run_until(until, &mut |_, _| 1);
    let secs = (until - from).as_secs_f64();
    let snapshots = (h.clients[0].snapshot_ticks.len() - snapshots) as f64;
    let fed = (fed(h) - before) as f64;
    assert!(
        snapshots >= 60.0 * secs && fed >= 62.0 * secs,
        "{snapshots} snapshots, {fed} inputs in {secs} s"
    );
}

#[test]
fn a_far_off_tick_mid_session_is_refused_and_changes_nothing() {
    // A complete snapshot stamped u32::MAX used to pin the newest delivered tick there,
    // and four incomplete ones to fill every reassembly slot: nothing was delivered again.
    let mut h = one_client(5);
    h.run_until(Duration::from_secs(2), &mut |_, _| 1);
    let now = h.now;
    let c = &mut h.clients[0].session;
    let before = c.stats();
    assert!(matches!(
        c.handle_packet(now, &fragment(60_000, u32::MAX, 0, 1, 1)),
        Err(ProtocolError::TickOutOfRange { .. })
    ));
    for k in 0..4 {
        assert!(matches!(
            c.handle_packet(
                now,
                &fragment(60_001 + k, u32::MAX - 1 - u32::from(k), 0, 2, 1)
            ),
            Err(ProtocolError::TickOutOfRange { .. })
        ));
    }
    let after = c.stats();
    assert_eq!(after.implausible_ticks - before.implausible_ticks, 5);
    assert_eq!(after.packets_rejected - before.packets_rejected, 5);
    assert!(c.newest_server_tick().unwrap().0 < 1000);
    // The next second goes on as if nothing happened: 64 snapshots, 64 inputs.
    assert_flowing(&mut h, Duration::from_secs(3));
    assert_eq!(h.clients[0].session.stats().tick_resyncs, 0);
}

#[test]
fn what_a_link_held_through_a_long_outage_does_not_start_the_session_over() {
    // 15 s of silence (past the 10 s a tick may lie from the clock), then the link
    // delivers first what the server sent as the outage began: ticks 15 s behind the
    // clock's estimate, agreeing with each other. They are old, not another timeline.
    let mut h = one_client(8);
    // Long enough that 11 s before the newest tick is a tick.
    h.run_until(Duration::from_secs(12), &mut |_, _| 1);
    let c = &mut h.clients[0].session;
    let newest = c.newest_server_tick().expect("flowing").0;
    let (epoch, before) = (c.epoch(), c.stats());
    let back = h.now + Duration::from_secs(15);
    // A fresh snapshot may overtake the queue: the held ones are still plausible.
    let fresh = c.server_position(back).expect("a clock") as u32;
    c.handle_packet(back, &fragment(49_999, fresh, 0, 1, 1))
        .unwrap();
    for k in 0..8u16 {
        c.handle_packet(
            back,
            &fragment(50_000 + k, newest + 1 + u32::from(k), 0, 1, 1),
        )
        .unwrap();
    }
    let after = c.stats();
    assert_eq!(after.tick_resyncs, before.tick_resyncs);
    assert_eq!(after.implausible_ticks, before.implausible_ticks);
    assert_eq!(c.epoch(), epoch);
    // Still refused: a tick from further back than anything heard, or from the future.
    assert!(matches!(
        c.handle_packet(back, &fragment(50_100, newest - 64 * 11, 0, 1, 1)),
        Err(ProtocolError::TickOutOfRange { .. })
    ));
    let ahead = c.server_position(back).expect("a clock") as u32 + 64 * 11;
    assert!(matches!(
        c.handle_packet(back, &fragment(50_101, ahead, 0, 1, 1)),
        Err(ProtocolError::TickOutOfRange { .. })
    ));
}

#[test]
fn a_client_whose_first_packet_lied_about_the_tick_starts_over() {
    // The very first packet, echo and all, says the server is at tick 3 000 000 000: the
    // clock is set from it. The real packets that follow all contradict it and agree with
    // each other, so after a few the client starts over from them.
    let mut h = one_client(6);
    h.run_until(Duration::from_millis(1), &mut |_, _| 1);
    let now = h.now;
    h.clients[0]
        .session
        .handle_packet(now, &fragment(40_000, 3_000_000_000, 0, 1, 1))
        .unwrap();
    assert!(h.clients[0].session.server_position(now).unwrap() > 2e9);
    h.run_until(Duration::from_secs(2), &mut |_, _| 1);
    let stats = h.clients[0].session.stats();
    assert_eq!(stats.tick_resyncs, 1);
    assert_eq!(
        stats.implausible_ticks,
        u64::from(lagless_core::limits::RESYNC_AFTER_PACKETS) - 1
    );
    assert_flowing(&mut h, Duration::from_secs(3));
    let server = h.server.current_tick().0;
    let client = h.clients[0].session.current_tick().0;
    assert!(
        client > server && client < server + 20,
        "{client} vs {server}"
    );
}

#[test]
fn a_far_off_tick_before_the_clock_exists_does_not_outlive_it() {
    // Before any echo there is no clock to check a tick against: a bogus complete
    // snapshot and bogus partials are taken in. The first real packet with an echo
    // makes the clock, which shows them for what they are.
    let mut h = one_client(7);
    let c = &mut h.clients[0].session;
    let no_echo = |bytes: Vec<u8>| {
        let mut f = SnapshotFragment::decode(&bytes).unwrap();
        f.echo = None;
        let mut w = Writer::new();
        f.encode(&mut w);
        w.into_bytes()
    };
    // (Beyond `Tick::LAST` nothing is taken in at all.)
    assert!(matches!(
        c.handle_packet(Duration::ZERO, &no_echo(fragment(1, u32::MAX, 0, 1, 1))),
        Err(ProtocolError::TickOutOfRange { .. })
    ));
    c.handle_packet(Duration::ZERO, &no_echo(fragment(1, Tick::LAST.0, 0, 1, 1)))
        .unwrap();
    for k in 0..4 {
        c.handle_packet(
            Duration::ZERO,
            &no_echo(fragment(2 + k, Tick::LAST.0 - 1 - u32::from(k), 0, 2, 1)),
        )
        .unwrap();
    }
    assert_eq!(c.poll_snapshot().map(|s| s.tick), Some(Tick::LAST));
    h.run_until(Duration::from_secs(1), &mut |_, _| 1);
    assert_flowing(&mut h, Duration::from_secs(2));
    assert!(h.clients[0].session.newest_server_tick().unwrap().0 < 1000);
    assert_eq!(h.clients[0].session.stats().tick_resyncs, 0);
}

#[test]
fn fragments_of_two_payloads_stamped_with_one_tick_are_not_spliced() {
    let mut c = ClientSession::<u8>::new(ClientConfig::default());
    let now = Duration::from_millis(5);
    // Payload A goes out as sequence numbers 10 and 11, payload B (same tick) as 12 and
    // 13. A's first fragment and B's second must not make a snapshot.
    c.handle_packet(now, &fragment(10, 50, 0, 2, 0xAA)).unwrap();
    assert_eq!(
        c.handle_packet(now, &fragment(13, 50, 1, 2, 0xBB)),
        Err(ProtocolError::InconsistentFragment)
    );
    assert_eq!(c.poll_snapshot(), None);
    c.handle_packet(now, &fragment(11, 50, 1, 2, 0xAA)).unwrap();
    let s = c.poll_snapshot().unwrap();
    assert_eq!(s.tick, Tick(50));
    assert!(s.payload.iter().all(|&b| b == 0xAA));
}

#[test]
fn a_second_snapshot_for_one_tick_is_refused() {
    // The client knows a snapshot by its tick: two for one tick would be confused.
    let mut s = ServerSession::<u8>::new(ServerConfig::default());
    s.add_client(1).unwrap();
    s.update(Duration::ZERO);
    let tick = s.current_tick();
    s.send_snapshot(1, Duration::ZERO, &[1; 2000]).unwrap();
    let queued = std::iter::from_fn(|| s.poll_transmit()).count();
    assert_eq!(
        s.send_snapshot_with_essential(1, Duration::ZERO, &[2], &[3]),
        Err(ProtocolError::SnapshotAlreadySent(tick))
    );
    assert_eq!((queued, s.poll_transmit()), (2, None));
    // A snapshot refused for its size does not use up the tick.
    s.update(Duration::from_millis(20));
    while s.next_tick().is_some() {}
    assert!(
        s.send_snapshot(1, Duration::ZERO, &vec![0; 1 << 20])
            .is_err()
    );
    s.send_snapshot(1, Duration::ZERO, &[4]).unwrap();
    assert_eq!(std::iter::from_fn(|| s.poll_transmit()).count(), 1);
}

/// A server packet for the current tick with the given control data, under the sequence
/// number the server would use next, so the client takes it as the newest.
fn control_packet(h: &Harness, echo: Option<PingEcho>, acked_through: Option<Seq16>) -> Vec<u8> {
    let sent = h.server.client_stats(1).map_or(0, |s| s.packets_sent);
    let mut w = Writer::new();
    SnapshotFragment {
        seq: Seq16(sent as u16),
        tick: h.server.current_tick().0,
        echo,
        input_ack: acked_through.map(|a| InputAck {
            acked_through: a,
            input_slack: 0,
            starved: 0,
            guessed: false,
        }),
        index: 0,
        count: 1,
        essential: true,
        tick_hz: None,
        server_instance: 0,
        messages: None,
        // The harness's game reads one 8-byte position per client.
        payload: vec![0; 16],
    }
    .encode(&mut w);
    w.into_bytes()
}

#[test]
fn a_forged_input_ack_far_ahead_does_not_silence_the_client() {
    // An ack 30 000 ticks ahead used to stop every input message until the client's
    // clock caught up with it: eight minutes of a starved server.
    let mut h = one_client(8);
    h.run_until(Duration::from_secs(3), &mut |_, _| 1);
    let far = Tick(h.server.current_tick().0 + 30_000).to_wire();
    let forged = control_packet(&h, None, Some(far));
    let now = h.now;
    h.clients[0].session.handle_packet(now, &forged).unwrap();
    assert!(h.clients[0].session.acked_through().unwrap().0 < 30_000);
    assert_flowing(&mut h, Duration::from_secs(5));
}

#[test]
fn one_absurd_clock_echo_starves_nothing() {
    // An echo claiming a 10 s round trip makes the client jump far ahead; its lead
    // correction then winds the other way, it falls behind the server, and (before
    // every message carried the newest input) never heard how late its inputs were:
    // the server starved for 46 s, for good with a smaller input buffer.
    for buffer_ticks in [2.0, 0.5] {
        let client = ClientConfig {
            sync: SyncConfig {
                lead: LeadPolicy::Fixed {
                    buffer_ticks,
                    jitter_factor: 1.0,
                },
                ..SyncConfig::default()
            },
            ..ClientConfig::default()
        };
        let mut h = Harness::new(
            ServerConfig::default(),
            client,
            profile("broadband").unwrap_or_default(),
            1,
            9,
        );
        h.run_until(Duration::from_secs(3), &mut |_, _| 1);
        let now_us = h.now.as_micros() as u32;
        let echo = PingEcho {
            client_time_us: now_us.wrapping_sub(9_999_000),
            hold_us: 0,
        };
        let packet = control_packet(&h, Some(echo), None);
        let now = h.now;
        h.clients[0].session.handle_packet(now, &packet).unwrap();
        // The sample enters the RTT mean as its outlier bound: nothing starves.
        assert_flowing(&mut h, Duration::from_secs(5));
    }
}

#[test]
fn a_hold_longer_than_the_round_trip_is_no_rtt_sample() {
    let mut h = one_client(10);
    h.run_until(Duration::from_secs(2), &mut |_, _| 1);
    let before = h.clients[0].session.rtt().min().unwrap();
    let now_us = h.now.as_micros() as u32;
    let echo = PingEcho {
        client_time_us: now_us.wrapping_sub(1000),
        hold_us: u32::MAX,
    };
    let packet = control_packet(&h, Some(echo), None);
    let now = h.now;
    h.clients[0].session.handle_packet(now, &packet).unwrap();
    assert_eq!(h.clients[0].session.rtt().min(), Some(before));
    assert!(before > Duration::from_millis(30));
}

#[test]
fn at_tick_zero_the_server_acknowledges_nothing_it_lacks() {
    // Input for tick 1 only: the ack must not cover tick 0, or the client would stop
    // resending it and the server would run tick 0 without it.
    let mut s = ServerSession::<u8>::new(ServerConfig::default());
    s.add_client(1).unwrap();
    s.update(Duration::ZERO);
    s.handle_packet(1, Duration::ZERO, &input_packet(Tick(1).to_wire(), vec![7]))
        .unwrap();
    s.send_snapshot(1, Duration::ZERO, &[0]).unwrap();
    let (_, bytes) = s.poll_transmit().unwrap();
    let ack = SnapshotFragment::decode(&bytes).unwrap().input_ack.unwrap();
    assert_eq!(Tick::from_wire(ack.acked_through, Tick(0)), None);
    // Once tick 0's input is there too, both are acknowledged.
    s.handle_packet(
        1,
        Duration::ZERO,
        &input_packet(Tick(0).to_wire(), vec![6, 7]),
    )
    .unwrap();
    s.update(Duration::from_millis(16));
    while s.next_tick().is_some() {}
    s.send_snapshot(1, Duration::from_millis(16), &[0]).unwrap();
    let (_, bytes) = s.poll_transmit().unwrap();
    let ack = SnapshotFragment::decode(&bytes).unwrap().input_ack.unwrap();
    assert_eq!(Tick::from_wire(ack.acked_through, Tick(1)), Some(Tick(1)));
}

#[test]
fn a_first_packet_at_the_end_of_the_tick_range_cannot_run_the_clock_there() {
    // A fuzz finding: a first packet stamped near u32::MAX set the clock there,
    // it reached Tick(u32::MAX), and poll_transmit's loop over ticks never ended.
    let mut c = ClientSession::<u8>::new(ClientConfig::default());
    for (seq, tick) in [(1, u32::MAX), (2, u32::MAX - 3), (3, Tick::LAST.0 + 1)] {
        assert!(
            matches!(
                c.handle_packet(Duration::ZERO, &fragment(seq, tick, 0, 1, 1)),
                Err(ProtocolError::TickOutOfRange { .. })
            ),
            "{tick}"
        );
    }
    // The last tick a session runs to is accepted; the clock stops there.
    c.handle_packet(Duration::ZERO, &fragment(4, Tick::LAST.0 - 2, 0, 1, 1))
        .unwrap();
    let mut now = Duration::ZERO;
    let mut produced = Vec::new();
    for _ in 0..200 {
        now += Duration::from_millis(16);
        c.update(now);
        while let Some(t) = c.next_tick() {
            c.set_input(t, 1);
            produced.push(t);
        }
        let mut packets = 0;
        while c.poll_transmit(now).is_some() {
            packets += 1;
            assert!(packets < 4, "poll_transmit ran away");
        }
    }
    assert!(produced.iter().all(|t| *t <= Tick::LAST), "{produced:?}");
    assert_eq!(produced.last(), Some(&Tick::LAST));
    assert!(c.current_tick() <= Tick::LAST.next());
}

#[test]
fn a_server_whose_input_reports_lie_moves_the_lead_only_within_bounds() {
    // The server's slack reports say absurd things: i32::MIN, i32::MAX, wild swings. The
    // adaptive lead stays within RTT/2 and RTT/2 + max_correction_ticks, so the client never
    // runs behind the server nor runs off ahead of it.
    let lies: [fn(u64) -> i32; 5] = [
        |_| i32::MIN,
        |_| i32::MAX,
        |k| if k % 2 == 0 { -1_000_000 } else { 1_000_000 },
        // Plausible-looking slack that swings anywhere within +-64 ticks, packet to packet.
        |k| ((k * 7919 % 129) as i32 - 64) * 256,
        // Every input far too late, then far too early, in spells of a second.
        |k| {
            if (k / 64) % 2 == 0 {
                -100 * 256
            } else {
                100 * 256
            }
        },
    ];
    for lie in lies {
        let mut server = ServerSession::<u8>::new(ServerConfig::default());
        server.add_client(1).unwrap();
        let mut client = ClientSession::<u8>::new(ClientConfig::default());
        let ms = Duration::from_millis;
        let mut packets = 0u64;
        for step in 0..10_000u64 {
            let now = ms(step);
            server.update(now);
            while let Some(t) = server.next_tick() {
                let _ = t;
                if server.snapshot_due() {
                    server.send_snapshot(1, now, &[0; 8]).unwrap();
                }
            }
            while let Some((_, bytes)) = server.poll_transmit() {
                let mut f = SnapshotFragment::decode(&bytes).unwrap();
                if let Some(ack) = &mut f.input_ack {
                    ack.input_slack = lie(packets);
                }
                packets += 1;
                let mut w = Writer::new();
                f.encode(&mut w);
                let _ = client.handle_packet(now, &w.into_bytes());
            }
            client.update(now);
            while let Some(t) = client.next_tick() {
                client.set_input(t, 1);
            }
            while let Some(p) = client.poll_transmit(now) {
                let _ = server.handle_packet(1, now, &p);
            }
            if step > 1000 {
                let lead = client.target_lead_ticks();
                let max = client.config().sync.max_correction_ticks + 1.0;
                assert!((0.0..=max).contains(&lead), "lead {lead} at {step} ms");
                // Never behind the server (but for the tick being rounded down).
                assert!(
                    client.current_tick().next() >= server.current_tick(),
                    "{} vs {} at {step} ms",
                    client.current_tick(),
                    server.current_tick()
                );
            }
        }
    }
}

/// A client and a server configured with different tick rates refuse each other's
/// packets with an error naming both rates, on both ends; with equal rates the same
/// exchange goes through and the announcement stops once the client holds a snapshot.
#[test]
fn a_client_at_another_tick_rate_is_refused_on_both_ends() {
    let run = |client_hz: u32| {
        let mut server = ServerSession::<u8>::new(ServerConfig::default());
        server.add_client(1).unwrap();
        let mut client = ClientSession::<u8>::new(ClientConfig {
            tick_hz: client_hz,
            ..ClientConfig::default()
        });
        let mut server_errors = Vec::new();
        let mut client_errors = Vec::new();
        let mut announced = Vec::new();
        for ms in (0..2000u64).step_by(5) {
            let now = Duration::from_millis(ms);
            client.update(now);
            while let Some(t) = client.next_tick() {
                client.set_input(t, 1);
            }
            while let Some(p) = client.poll_transmit(now) {
                if let Err(e) = server.handle_packet(1, now, &p) {
                    server_errors.push(e);
                }
            }
            server.update(now);
            while server.next_tick().is_some() {
                if server.snapshot_due() {
                    server.send_snapshot(1, now, &[7; 10]).unwrap();
                }
            }
            while let Some((_, p)) = server.poll_transmit() {
                announced.push(SnapshotFragment::decode(&p).unwrap().tick_hz);
                if let Err(e) = client.handle_packet(now, &p) {
                    client_errors.push(e);
                }
            }
            while let Some(s) = client.poll_snapshot() {
                client.acknowledge_snapshot(s.tick);
            }
        }
        (server, client, server_errors, client_errors, announced)
    };
    let (server, client, server_errors, client_errors, _) = run(30);
    let mismatch = |ours, theirs| ProtocolError::TickRateMismatch { ours, theirs };
    assert!(!server_errors.is_empty() && server_errors.iter().all(|e| *e == mismatch(64, 30)));
    assert!(!client_errors.is_empty() && client_errors.iter().all(|e| *e == mismatch(30, 64)));
    assert_eq!(client.stats().snapshots_received, 0);
    assert_eq!(server.client_stats(1).unwrap().inputs_accepted, 0);
    assert!(server.client_stats(1).unwrap().tick_rate_mismatches > 0);
    assert!(client.stats().tick_rate_mismatches > 0);

    let (server, client, server_errors, client_errors, announced) = run(64);
    assert!(server_errors.is_empty() && client_errors.is_empty());
    assert!(client.stats().snapshots_received > 100);
    assert!(server.client_stats(1).unwrap().inputs_accepted > 100);
    // The server announces its rate only until the first acknowledgement.
    assert_eq!(announced.first(), Some(&Some(64)));
    assert_eq!(announced.last(), Some(&None));
}

#[test]
fn a_client_that_floods_inputs_gets_them_capped_and_counted() {
    // Every millisecond for two seconds, a client sends the most inputs a message may
    // carry, starting at the server's tick, halfway to its lead limit, just short of it
    // and far beyond it, plus one message with an input too many. The server refuses and
    // counts every input beyond the limit and every oversized message, keeps at most one
    // input per tick, steps no faster than its clock, and what it reports of how early
    // inputs arrive stays within the limit.
    let config = ServerConfig::default();
    let (limit, max) = (config.max_input_lead_ticks, config.max_inputs_per_message);
    let mut s = ServerSession::<u8>::new(config);
    s.add_client(1).unwrap();
    let ms = Duration::from_millis;
    s.update(ms(0));
    let (mut too_far, mut oversized, mut ticks) = (0u64, 0u64, 0u64);
    for step in 1..=2000u64 {
        let now = ms(step);
        let current = s.current_tick();
        for ahead in [0, limit / 2, limit - 10, 10_000] {
            let start = current.saturating_add(ahead);
            too_far += (0..max as u32)
                .filter(|k| start.saturating_add(*k).diff(current) > i64::from(limit))
                .count() as u64;
            let _ = s.handle_packet(1, now, &input_packet(start.to_wire(), vec![1; max]));
        }
        let bytes = input_packet(current.to_wire(), vec![1; max + 1]);
        assert!(s.handle_packet(1, now, &bytes).is_err());
        oversized += 1;
        s.update(now);
        while let Some(t) = s.next_tick() {
            ticks += 1;
            assert_eq!(t.inputs.len(), 1);
            if s.snapshot_due() {
                s.send_snapshot(1, now, &[0; 8]).unwrap();
            }
        }
        while let Some((_, packet)) = s.poll_transmit() {
            let f = SnapshotFragment::decode(&packet).unwrap();
            let slack = f64::from(f.input_ack.unwrap().input_slack) / 256.0;
            assert!(slack <= f64::from(limit) + 1.0, "slack {slack}");
        }
    }
    let st = s.client_stats(1).unwrap();
    assert!(ticks <= 2 * 64 + 1, "{ticks} ticks in 2 s");
    assert_eq!(st.inputs_too_far_ahead, too_far);
    assert!(too_far > 0);
    assert_eq!(st.packets_rejected, oversized);
    // One input per tick at most: the ticks run, and those within the limit ahead.
    assert!(
        st.inputs_accepted <= ticks + u64::from(limit) + 1,
        "{} inputs kept over {ticks} ticks",
        st.inputs_accepted
    );
    assert_eq!(st.ticks_starved, 0);
}

/// The session keeps which snapshots the game acknowledged, not only the newest: each
/// new newest shifts the older ones into the bit field, an older report sets its bit,
/// and what is more than 32 ticks older than the newest is dropped.
#[test]
fn snapshot_acknowledgements_name_every_snapshot_held() {
    let mut c = ClientSession::<u8>::new(ClientConfig::default());
    assert_eq!((c.snapshot_ack(), c.snapshot_acks()), (None, 0));
    c.acknowledge_snapshot(Tick(10));
    assert_eq!((c.snapshot_ack(), c.snapshot_acks()), (Some(Tick(10)), 0));
    c.acknowledge_snapshot(Tick(12));
    assert_eq!(c.snapshot_acks(), 0b10, "10 is two back from 12");
    c.acknowledge_snapshot(Tick(11));
    assert_eq!(c.snapshot_acks(), 0b11);
    c.acknowledge_snapshot(Tick(11));
    c.acknowledge_snapshot(Tick(12));
    assert_eq!(
        (c.snapshot_ack(), c.snapshot_acks()),
        (Some(Tick(12)), 0b11)
    );
    c.acknowledge_snapshot(Tick(44));
    assert_eq!(
        c.snapshot_acks(),
        1 << 31,
        "12 is the last bit; 11 and 10 are dropped"
    );
    c.acknowledge_snapshot(Tick(11));
    assert_eq!(c.snapshot_acks(), 1 << 31, "beyond the field: ignored");
    c.acknowledge_snapshot(Tick(1000));
    assert_eq!((c.snapshot_ack(), c.snapshot_acks()), (Some(Tick(1000)), 0));
}
