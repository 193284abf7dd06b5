//! Game messages both ways, framed in the input messages and snapshots the sessions send
//! anyway, over the seeded network emulator: reliable ones arrive exactly once and in
//! order through heavy loss, unreliable ones at most once; bad sections are refused and
//! counted; queues stay bounded; every packet still fits; the resync flag round-trips.
#![allow(clippy::unwrap_used)]

use lagless_core::channel::{ChannelError, MAX_MESSAGE_BYTES, MessageChannel};
use lagless_core::message::{InputMessage, KIND_INPUT, SnapshotFragment};
use lagless_core::{
    ChannelConfig, ClientConfig, ClientSession, Delivery, MAX_PACKET_BYTES, ProtocolError,
    ServerConfig, ServerSession, Tick,
};
use lagless_netem::{Duplex, Jitter, LinkConfig, Loss};
use lagless_wire::{Seq16, Writer};
use std::time::Duration;

const ID: u64 = 1;

/// One client and the server over a seeded emulated link, on a virtual clock, with a
/// toy game (input adds to a position; the snapshot is the position padded to
/// `payload_bytes`). Records the largest packet each way.
struct Pair {
    server: ServerSession<u8>,
    client: ClientSession<u8>,
    link: Duplex,
    now: Duration,
    payload_bytes: usize,
    position: i64,
    largest_up: usize,
    largest_down: usize,
    server_errors: Vec<ProtocolError>,
    client_errors: Vec<ProtocolError>,
}

impl Pair {
    fn new(server: ServerConfig, client: ClientConfig, link: LinkConfig, seed: u64) -> Self {
        let mut s = ServerSession::new(server);
        s.add_client(ID).unwrap();
        Self {
            server: s,
            client: ClientSession::new(client),
            link: Duplex::symmetric(link, seed).unwrap(),
            now: Duration::ZERO,
            payload_bytes: 16,
            position: 0,
            largest_up: 0,
            largest_down: 0,
            server_errors: Vec::new(),
            client_errors: Vec::new(),
        }
    }

    fn run_for(&mut self, span: Duration) {
        let until = self.now + span;
        let step = Duration::from_micros(500);
        while self.now < until {
            let now = self.now;
            while let Some(p) = self.link.up.poll(now) {
                if let Err(e) = self.server.handle_packet(ID, now, &p) {
                    self.server_errors.push(e);
                }
            }
            self.server.update(now);
            while let Some(step) = self.server.next_tick() {
                for (_, i) in &step.inputs {
                    self.position += i64::from(i.unwrap_or(0));
                }
                if self.server.snapshot_due() {
                    let mut payload = self.position.to_le_bytes().to_vec();
                    payload.resize(self.payload_bytes.max(8), 0xAB);
                    self.server.send_snapshot(ID, now, &payload).unwrap();
                }
            }
            while let Some((_, p)) = self.server.poll_transmit() {
                self.largest_down = self.largest_down.max(p.len());
                self.link.down.send(now, p);
            }
            while let Some(p) = self.link.down.poll(now) {
                if let Err(e) = self.client.handle_packet(now, &p) {
                    self.client_errors.push(e);
                }
            }
            while self.client.poll_snapshot().is_some() {}
            self.client.update(now);
            while let Some(t) = self.client.next_tick() {
                self.client.set_input(t, 1);
            }
            while let Some(p) = self.client.poll_transmit(now) {
                self.largest_up = self.largest_up.max(p.len());
                self.link.up.send(now, p);
            }
            self.now += step;
        }
    }
}

/// 25 % independent loss each way, 40 ms each way with jitter, and a few duplicated and
/// reordered packets.
fn lossy() -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(40),
        jitter: Jitter::Uniform {
            max: Duration::from_millis(5),
        },
        loss: Loss::Uniform { rate: 0.25 },
        duplicate_rate: 0.03,
        reorder_rate: 0.03,
        ..LinkConfig::default()
    }
}

/// Message `n` of a stream: its number, then `n`-dependent filler of `n`-dependent length,
/// so a message cut short, spliced or swapped shows.
fn message(stream: u8, n: u32) -> Vec<u8> {
    let len = 5 + (n as usize * 37) % 300;
    let mut m = vec![stream];
    m.extend(n.to_le_bytes());
    m.extend((0..len - 5).map(|i| (n as usize + i) as u8));
    m
}

/// The number of a message made by [`message`], checking the rest of it.
fn number(stream: u8, m: &[u8]) -> u32 {
    assert_eq!(m[0], stream, "stream");
    let n = u32::from_le_bytes(m[1..5].try_into().unwrap());
    assert_eq!(m, message(stream, n), "message {n} arrived altered");
    n
}

#[derive(Default)]
struct Received {
    reliable: Vec<u32>,
    unreliable: Vec<u32>,
}

impl Received {
    fn take(&mut self, delivery: Delivery, m: &[u8]) {
        match delivery {
            Delivery::Reliable => self.reliable.push(number(b'R', m)),
            Delivery::Unreliable => self.unreliable.push(number(b'U', m)),
        }
    }

    /// Every reliable message exactly once and in order; unreliable ones at most once,
    /// and most of them.
    fn check(&self, sent: u32, what: &str) {
        assert_eq!(
            self.reliable,
            (0..sent).collect::<Vec<_>>(),
            "{what}: reliable"
        );
        let mut unique = self.unreliable.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            self.unreliable.len(),
            "{what}: an unreliable one twice"
        );
        assert!(unique.iter().all(|&n| n < sent), "{what}: unreliable");
        // 25 % loss (and a few dropped had they waited for room too long).
        assert!(
            unique.len() as f64 > f64::from(sent) * 0.6,
            "{what}: {} of {sent} unreliable arrived",
            unique.len()
        );
    }
}

/// Sends `per_burst` messages of each kind each way every 50 ms for 10 s, then runs on
/// 3 s to let resends land, and checks what arrived.
fn exchange(payload_bytes: usize, snapshot_interval: u32, seed: u64) -> Pair {
    let mut pair = Pair::new(
        ServerConfig {
            snapshot_interval,
            ..ServerConfig::default()
        },
        ClientConfig::default(),
        lossy(),
        seed,
    );
    pair.payload_bytes = payload_bytes;
    let (mut up, mut down) = (Received::default(), Received::default());
    let per_burst = 3;
    let mut sent = 0u32;
    let drain = |pair: &mut Pair, up: &mut Received, down: &mut Received| {
        while let Some((id, d, m)) = pair.server.poll_message() {
            assert_eq!(id, ID);
            up.take(d, &m);
        }
        while let Some((d, m)) = pair.client.poll_message() {
            down.take(d, &m);
        }
    };
    for _ in 0..200 {
        for _ in 0..per_burst {
            pair.client
                .send_message(Delivery::Reliable, &message(b'R', sent))
                .unwrap();
            pair.client
                .send_message(Delivery::Unreliable, &message(b'U', sent))
                .unwrap();
            pair.server
                .send_message(ID, Delivery::Reliable, &message(b'R', sent))
                .unwrap();
            pair.server
                .send_message(ID, Delivery::Unreliable, &message(b'U', sent))
                .unwrap();
            sent += 1;
        }
        pair.run_for(Duration::from_millis(50));
        drain(&mut pair, &mut up, &mut down);
    }
    pair.run_for(Duration::from_secs(3));
    drain(&mut pair, &mut up, &mut down);
    up.check(sent, "client -> server");
    down.check(sent, "server -> client");
    assert!(pair.largest_up <= MAX_PACKET_BYTES, "{}", pair.largest_up);
    assert!(
        pair.largest_down <= MAX_PACKET_BYTES,
        "{}",
        pair.largest_down
    );
    // Loss makes the channel work for it.
    assert!(pair.client.message_stats().resends > 0);
    assert!(pair.server.message_stats(ID).unwrap().resends > 0);
    // Everything acknowledged in the end; nothing refused on the way.
    assert_eq!(pair.client.channel().unacked(), 0);
    assert_eq!(pair.server.channel(ID).unwrap().unacked(), 0);
    let channel_errors = |errors: &[ProtocolError]| {
        errors
            .iter()
            .filter(|e| matches!(e, ProtocolError::Channel(_)))
            .count()
    };
    assert_eq!(channel_errors(&pair.server_errors), 0);
    assert_eq!(channel_errors(&pair.client_errors), 0);
    assert_eq!(pair.client.stats().message_sections_rejected, 0);
    pair
}

#[test]
fn messages_both_ways_through_25_percent_loss() {
    let pair = exchange(16, 1, 7);
    assert!(pair.client.stats().snapshots_received > 100);
}

#[test]
fn messages_flow_with_snapshots_too_large_to_arrive_whole() {
    // Six fragments each: at 25 % loss fewer than one snapshot in five arrives whole, yet
    // the messages in fragment 0 arrive whenever that packet does.
    let pair = exchange(6000, 2, 11);
    let stats = pair.client.stats();
    assert!(
        stats.snapshots_received * 3 < stats.packets_received / 6,
        "{stats:?}"
    );
    assert!(
        pair.largest_down > 1160,
        "full fragments: {}",
        pair.largest_down
    );
}

#[test]
fn message_bytes_sent_counts_what_rode_each_snapshot() {
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    server.add_client(ID).unwrap();
    let now = Duration::ZERO;
    server.update(now);
    server
        .send_message(ID, Delivery::Reliable, b"hello")
        .unwrap();
    server
        .send_message(ID, Delivery::Unreliable, &[9; 700])
        .unwrap();
    let before = server.message_bytes_sent(ID);
    // A snapshot that almost fills its last fragment: the section takes a fragment more.
    server.send_snapshot(ID, now, &vec![1; 2300]).unwrap();
    let spent = server.message_bytes_sent(ID) - before;
    let packets: Vec<Vec<u8>> =
        std::iter::from_fn(|| server.poll_transmit().map(|(_, p)| p)).collect();
    assert_eq!(packets.len(), 3);
    let first = SnapshotFragment::decode(&packets[0]).unwrap();
    let section = first.messages.as_ref().unwrap().len();
    assert_eq!(spent, (2 + section) as u64);
    assert_eq!(server.client_stats(ID).unwrap().message_bytes_sent, spent);
    for p in &packets {
        assert!(p.len() <= MAX_PACKET_BYTES);
        client.handle_packet(now, p).unwrap();
    }
    let snap = client.poll_snapshot().unwrap();
    assert_eq!(snap.payload, vec![1; 2300]);
    assert_eq!(
        client.poll_message(),
        Some((Delivery::Reliable, b"hello".to_vec()))
    );
    assert_eq!(
        client.poll_message(),
        Some((Delivery::Unreliable, vec![9; 700]))
    );
    assert_eq!(client.poll_message(), None);
    assert_eq!(client.stats().message_bytes_received, spent);
    // Nothing to say: the next snapshot carries no section and costs nothing more.
    server.update(Duration::from_millis(20));
    while server.next_tick().is_some() {}
    server.send_snapshot(ID, now, &[1; 10]).unwrap();
    assert_eq!(server.message_bytes_sent(ID) - before, spent);
    let (_, p) = server.poll_transmit().unwrap();
    assert!(SnapshotFragment::decode(&p).unwrap().messages.is_none());
}

#[test]
fn snapshots_of_the_largest_size_leave_messages_waiting_not_refused() {
    let config = ServerConfig {
        max_snapshot_bytes: 2 * 1160,
        ..ServerConfig::default()
    };
    let mut server = ServerSession::<u8>::new(config.clone());
    let mut client = ClientSession::<u8>::new(ClientConfig {
        max_snapshot_bytes: config.max_snapshot_bytes,
        ..ClientConfig::default()
    });
    server.add_client(ID).unwrap();
    server.update(Duration::ZERO);
    server
        .send_message(ID, Delivery::Reliable, &[3; 100])
        .unwrap();
    // No room within the fragments the largest snapshot takes: the message waits.
    server
        .send_snapshot(ID, Duration::ZERO, &vec![1; 2 * 1160])
        .unwrap();
    let mut n = 0;
    while let Some((_, p)) = server.poll_transmit() {
        client.handle_packet(Duration::ZERO, &p).unwrap();
        n += 1;
    }
    assert_eq!(n, 2);
    assert_eq!(client.poll_snapshot().unwrap().payload.len(), 2 * 1160);
    assert_eq!(client.poll_message(), None);
    // With room, it goes.
    server.update(Duration::from_millis(20));
    while server.next_tick().is_some() {}
    server
        .send_snapshot(ID, Duration::ZERO, &[1; 1000])
        .unwrap();
    while let Some((_, p)) = server.poll_transmit() {
        client.handle_packet(Duration::ZERO, &p).unwrap();
    }
    assert_eq!(
        client.poll_message(),
        Some((Delivery::Reliable, vec![3; 100]))
    );
}

#[test]
fn largest_messages_fit_every_packet() {
    let mut pair = Pair::new(
        ServerConfig::default(),
        ClientConfig::default(),
        LinkConfig::default(),
        3,
    );
    pair.payload_bytes = 1100;
    let mut got_up = 0;
    let mut got_down = 0;
    for round in 0..40u8 {
        let big = vec![round; MAX_MESSAGE_BYTES];
        pair.client.send_message(Delivery::Reliable, &big).unwrap();
        pair.server
            .send_message(ID, Delivery::Reliable, &big)
            .unwrap();
        pair.run_for(Duration::from_millis(50));
        while let Some((_, d, m)) = pair.server.poll_message() {
            assert_eq!((d, m.len()), (Delivery::Reliable, MAX_MESSAGE_BYTES));
            got_up += 1;
        }
        while let Some((d, m)) = pair.client.poll_message() {
            assert_eq!((d, m.len()), (Delivery::Reliable, MAX_MESSAGE_BYTES));
            got_down += 1;
        }
    }
    pair.run_for(Duration::from_millis(500));
    got_up += std::iter::from_fn(|| pair.server.poll_message()).count();
    got_down += std::iter::from_fn(|| pair.client.poll_message()).count();
    assert_eq!((got_up, got_down), (40, 40));
    assert!(pair.largest_up > MAX_MESSAGE_BYTES && pair.largest_up <= MAX_PACKET_BYTES);
    assert!(pair.largest_down > 1160 && pair.largest_down <= MAX_PACKET_BYTES);
    assert!(pair.server_errors.is_empty(), "{:?}", pair.server_errors);
    assert!(pair.client_errors.is_empty(), "{:?}", pair.client_errors);
}

/// An input message from client 1 for `start`, with this message section.
fn input_with_section(seq: u16, start: Tick, section: Vec<u8>) -> Vec<u8> {
    let mut w = Writer::new();
    InputMessage {
        seq: Seq16(seq),
        client_time_us: 0,
        snapshot_ack: None,
        snapshot_acks: 0,
        start_tick: start.to_wire(),
        inputs: vec![5],
        tick_hz: None,
        resync: false,
        messages: Some(section),
    }
    .encode(&mut w);
    w.into_bytes()
}

/// A real channel packet carrying one reliable and one unreliable message.
fn good_section() -> Vec<u8> {
    let mut ch = MessageChannel::default();
    ch.send(b"reliable").unwrap();
    ch.send_unreliable(b"unreliable").unwrap();
    ch.poll_packet(Duration::ZERO).unwrap()
}

/// Garbage of every kind: cut short, spliced, bit-flipped, counts that lie, noise.
fn bad_sections() -> Vec<Vec<u8>> {
    let good = good_section();
    let mut out: Vec<Vec<u8>> = (1..good.len()).map(|n| good[..n].to_vec()).collect();
    out.push([&good[..], &good[..]].concat());
    out.push([&good[..], &[0]].concat());
    let mut lying = good.clone();
    lying[6] = 0x7f; // 127 reliable messages
    out.push(lying);
    let mut empty = good.clone();
    empty[9] = 0; // the first message's length
    out.push(empty);
    out.push(vec![0; 5]);
    out.push(vec![0xff; 40]);
    out
}

#[test]
fn server_refuses_and_counts_bad_sections_and_goes_on() {
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    server.add_client(ID).unwrap();
    let now = Duration::ZERO;
    let bad = bad_sections();
    for (k, section) in bad.iter().enumerate() {
        let packet = input_with_section(k as u16, Tick(1), section.clone());
        match server.handle_packet(ID, now, &packet) {
            Err(ProtocolError::Channel(ChannelError::Malformed(_))) => {}
            other => panic!("section {k} {section:?}: {other:?}"),
        }
    }
    let stats = server.client_stats(ID).unwrap();
    assert_eq!(stats.message_sections_rejected, bad.len() as u64);
    assert_eq!(stats.packets_rejected, bad.len() as u64);
    // Nothing of a refused packet is used: not its inputs, not its messages.
    assert_eq!(stats.inputs_accepted, 0);
    assert_eq!(server.poll_message(), None);
    assert_eq!(
        server.message_stats(ID).unwrap().malformed,
        bad.len() as u64
    );
    // Random sections and random bit flips of a good one: refused or taken, never a panic.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let good = good_section();
    for k in 0..5000u32 {
        let section: Vec<u8> = if k % 2 == 0 {
            (0..1 + rand() % 80).map(|_| rand() as u8).collect()
        } else {
            let mut s = good.clone();
            let i = (rand() % s.len() as u64) as usize;
            s[i] ^= 1 << (rand() % 8);
            s
        };
        let _ = server.handle_packet(ID, now, &input_with_section(k as u16, Tick(1), section));
        while server.poll_message().is_some() {}
    }
    // A good packet is taken afterwards. (Noise may have delivered reliable id 0 already,
    // or moved the unreliable window: a fresh session for the exact check.)
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    server.add_client(ID).unwrap();
    server
        .handle_packet(ID, now, &input_with_section(1, Tick(1), good))
        .unwrap();
    assert_eq!(
        server.poll_message(),
        Some((ID, Delivery::Reliable, b"reliable".to_vec()))
    );
    assert_eq!(
        server.poll_message(),
        Some((ID, Delivery::Unreliable, b"unreliable".to_vec()))
    );
    assert_eq!(server.client_stats(ID).unwrap().inputs_accepted, 1);
}

#[test]
fn client_refuses_and_counts_bad_sections_and_goes_on() {
    let mut client = ClientSession::<u8>::new(ClientConfig::default());
    let fragment = |seq: u16, section: Vec<u8>| {
        let mut w = Writer::new();
        SnapshotFragment {
            seq: Seq16(seq),
            tick: 100,
            echo: None,
            input_ack: None,
            index: 0,
            count: 1,
            essential: false,
            tick_hz: None,
            server_instance: 0,
            messages: Some(section),
            payload: vec![1, 2, 3],
        }
        .encode(&mut w);
        w.into_bytes()
    };
    let bad = bad_sections();
    for (k, section) in bad.iter().enumerate() {
        match client.handle_packet(Duration::ZERO, &fragment(k as u16, section.clone())) {
            Err(ProtocolError::Channel(ChannelError::Malformed(_))) => {}
            other => panic!("section {k} {section:?}: {other:?}"),
        }
    }
    let stats = client.stats();
    assert_eq!(stats.message_sections_rejected, bad.len() as u64);
    assert_eq!(stats.packets_rejected, bad.len() as u64);
    // The snapshot part of a refused packet is not used either.
    assert_eq!(stats.snapshots_received, 0);
    assert!(client.poll_snapshot().is_none());
    assert!(client.poll_message().is_none());
    client
        .handle_packet(Duration::ZERO, &fragment(99, good_section()))
        .unwrap();
    assert_eq!(client.poll_snapshot().unwrap().payload, vec![1, 2, 3]);
    assert_eq!(
        client.poll_message(),
        Some((Delivery::Reliable, b"reliable".to_vec()))
    );
    assert_eq!(
        client.poll_message(),
        Some((Delivery::Unreliable, b"unreliable".to_vec()))
    );
}

#[test]
fn queues_stay_bounded_when_the_peer_never_acknowledges() {
    let channel = ChannelConfig {
        send_queue_len: 20,
        unreliable_queue_len: 4,
        recv_queue_len: 30,
        ..ChannelConfig::default()
    };
    let mut pair = Pair::new(
        ServerConfig {
            channel: channel.clone(),
            ..ServerConfig::default()
        },
        ClientConfig {
            channel: channel.clone(),
            ..ClientConfig::default()
        },
        LinkConfig::default(),
        5,
    );
    // Everything the server sends is lost: the client never hears an acknowledgement.
    pair.link
        .down
        .reconfigure(LinkConfig {
            loss: Loss::Uniform { rate: 1.0 },
            ..LinkConfig::default()
        })
        .unwrap();
    let mut refused = 0;
    for n in 0..200u32 {
        match pair
            .client
            .send_message(Delivery::Reliable, &n.to_le_bytes())
        {
            Ok(()) => {}
            Err(ChannelError::SendQueueFull) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        pair.run_for(Duration::from_millis(20));
        assert!(pair.client.channel().unacked() <= channel.send_queue_len);
    }
    assert_eq!(refused, 200 - channel.send_queue_len);
    assert_eq!(pair.client.channel().unacked(), channel.send_queue_len);
    // The server took each once, in order, however often it was resent.
    let server_channel = pair.server.channel(ID).unwrap();
    assert_eq!(server_channel.received(), channel.send_queue_len);
    assert!(pair.client.message_stats().resends > 100);
    let got: Vec<u32> = std::iter::from_fn(|| pair.server.poll_message())
        .map(|(_, _, m)| u32::from_le_bytes(m.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..channel.send_queue_len as u32).collect::<Vec<_>>());
    // Unreliable messages queued faster than packets leave: refused past the bound.
    for _ in 0..channel.unreliable_queue_len {
        pair.client
            .send_message(Delivery::Unreliable, b"u")
            .unwrap();
    }
    assert_eq!(
        pair.client.send_message(Delivery::Unreliable, b"u"),
        Err(ChannelError::UnreliableQueueFull)
    );
    // The server's side: a client that never hears (nor acknowledges) anything.
    for n in 0..100u32 {
        let r = pair
            .server
            .send_message(ID, Delivery::Reliable, &n.to_le_bytes());
        if n < channel.send_queue_len as u32 {
            r.unwrap();
        } else {
            assert_eq!(r, Err(ProtocolError::Channel(ChannelError::SendQueueFull)));
        }
    }
    pair.run_for(Duration::from_secs(2));
    assert_eq!(
        pair.server.channel(ID).unwrap().unacked(),
        channel.send_queue_len
    );
    assert!(pair.largest_down <= MAX_PACKET_BYTES);
    assert!(pair.largest_up <= MAX_PACKET_BYTES);
}

#[test]
fn a_game_that_never_reads_messages_holds_a_bounded_queue() {
    let channel = ChannelConfig {
        recv_queue_len: 8,
        ..ChannelConfig::default()
    };
    let mut pair = Pair::new(
        ServerConfig::default(),
        ClientConfig {
            channel: channel.clone(),
            ..ClientConfig::default()
        },
        LinkConfig::default(),
        9,
    );
    for n in 0..50u32 {
        for k in 0..4 {
            let _ = pair
                .server
                .send_message(ID, Delivery::Unreliable, &(n * 4 + k).to_le_bytes());
        }
        let _ = pair
            .server
            .send_message(ID, Delivery::Reliable, &n.to_le_bytes());
        pair.run_for(Duration::from_millis(20));
        assert!(pair.client.channel().received() <= channel.recv_queue_len);
    }
    assert!(pair.client.message_stats().unreliable_overflow > 0);
    // Reliable ones were held back, not lost: reading lets them all through.
    let mut reliable = Vec::new();
    for _ in 0..200 {
        while let Some((d, m)) = pair.client.poll_message() {
            if d == Delivery::Reliable {
                reliable.push(u32::from_le_bytes(m.try_into().unwrap()));
            }
        }
        pair.run_for(Duration::from_millis(20));
    }
    assert_eq!(reliable, (0..50).collect::<Vec<_>>());
}

#[test]
fn resync_flag_round_trips() {
    let mut pair = Pair::new(
        ServerConfig::default(),
        ClientConfig::default(),
        lossy(),
        13,
    );
    pair.run_for(Duration::from_secs(1));
    assert!(!pair.server.resync_requested(ID));
    assert!(!pair.client.wants_resync());
    pair.client.set_resync(true);
    assert!(pair.client.wants_resync());
    pair.run_for(Duration::from_millis(500));
    assert!(pair.server.resync_requested(ID));
    // Sent in every input message while set: still set however many were lost.
    for _ in 0..20 {
        pair.run_for(Duration::from_millis(50));
        assert!(pair.server.resync_requested(ID));
    }
    pair.client.set_resync(false);
    pair.run_for(Duration::from_millis(500));
    assert!(!pair.server.resync_requested(ID));
    assert!(!pair.server.resync_requested(42), "unknown client");
}

#[test]
fn an_old_clients_input_message_is_served() {
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    server.add_client(ID).unwrap();
    // As a client from before message sections wrote it: seq 1, time 0, flags 0
    // (no ack, no rate, no section, no resync), start tick 2, one run of input 5.
    let old = [KIND_INPUT, 1, 0, 0, 0, 0, 0, 0, 2, 0, 1, 1, 5];
    server.handle_packet(ID, Duration::ZERO, &old).unwrap();
    let stats = server.client_stats(ID).unwrap();
    assert_eq!((stats.packets_rejected, stats.inputs_accepted), (0, 1));
    assert!(!server.resync_requested(ID));
    assert_eq!(server.poll_message(), None);
    // And a new client with nothing to say writes exactly those bytes.
    let decoded = InputMessage::<u8>::decode(&old, 64).unwrap();
    let mut w = Writer::new();
    decoded.encode(&mut w);
    assert_eq!(w.as_bytes(), old);
}

#[test]
fn clients_take_turns_at_poll_message() {
    let mut server = ServerSession::<u8>::new(ServerConfig::default());
    let mut clients: Vec<ClientSession<u8>> = (0..3)
        .map(|_| ClientSession::new(ClientConfig::default()))
        .collect();
    for (k, c) in clients.iter_mut().enumerate() {
        let id = k as u64 + 1;
        server.add_client(id).unwrap();
        for n in 0..3u8 {
            c.send_message(Delivery::Reliable, &[id as u8, n]).unwrap();
        }
        // Before synchronisation a client pings once per tick period; the ping carries
        // its messages.
        let p = c.poll_transmit(Duration::ZERO).unwrap();
        server.handle_packet(id, Duration::ZERO, &p).unwrap();
    }
    let order: Vec<(u64, u8)> = std::iter::from_fn(|| server.poll_message())
        .map(|(id, _, m)| (id, m[1]))
        .collect();
    assert_eq!(
        order,
        vec![
            (1, 0),
            (2, 0),
            (3, 0),
            (1, 1),
            (2, 1),
            (3, 1),
            (1, 2),
            (2, 2),
            (3, 2)
        ]
    );
    assert_eq!(server.poll_message_from(1), None);
    assert!(matches!(
        server.send_message(9, Delivery::Reliable, b"x"),
        Err(ProtocolError::UnknownClient(9))
    ));
    assert_eq!(server.message_bytes_sent(9), 0);
}
