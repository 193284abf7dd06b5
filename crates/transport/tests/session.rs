//! The game session over loopback sockets: refusals of other tick rates on either end,
//! clients that vanish, garbage at the server's socket, and a loop that sleeps between
//! ticks. Every wait is bounded by a deadline.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lagless_core::{ClientConfig, ClientSession};
use lagless_replication::{
    Client, Delivery, EntityEvent, Kind, NetConfig, Schema, Server, Spectator,
};
use lagless_transport::session::{
    Control, GameClient, GameServer, LeaveReason, Mismatch, SessionError, SessionEvent,
    SessionState,
};
use lagless_transport::{ServerSettings, UdpClient, keys};

const PROTOCOL_ID: u64 = 0x5e55_1011;

fn schema() -> Schema {
    Schema::new()
        .kind(Kind::new("dot").vec2("position", 100.0, 0.01))
        .build()
        .expect("schema")
}

fn host(key: [u8; 32], hz: u32, max_clients: usize) -> GameServer<u8> {
    let server = Server::new(schema(), &NetConfig::new(hz)).expect("server");
    let settings = ServerSettings::new(PROTOCOL_ID, key, max_clients);
    GameServer::bind("127.0.0.1:0".parse().expect("addr"), settings, server).expect("bind")
}

fn token(key: &[u8; 32], id: u64, addr: SocketAddr, timeout: i32) -> Vec<u8> {
    let token = keys::issue_token(key, PROTOCOL_ID, id, vec![addr], 30, timeout);
    token.expect("token").write().expect("write").to_vec()
}

fn game_client(token: &[u8], hz: u32) -> GameClient<Spectator<u8>> {
    let config = NetConfig::new(hz);
    let client = Client::new(schema(), Spectator::default(), &config).expect("client");
    GameClient::connect(token, client, &config).expect("connect")
}

/// One frame of the server: update, take the ticks due, send.
fn serve(host: &mut GameServer<u8>, events: &mut Vec<SessionEvent>) {
    host.update();
    events.extend(std::iter::from_fn(|| host.poll_event()));
    let now = host.now();
    while host.server_mut().next_tick().is_some() {
        host.server_mut().send_snapshots(now).expect("snapshots");
    }
    host.transmit();
}

/// Runs `step` every 2 ms until it returns true; panics after `secs`.
fn until(secs: u64, what: &str, mut step: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if step() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("timed out waiting for {what}");
}

fn left(events: &[SessionEvent], id: u64) -> Option<LeaveReason> {
    events.iter().find_map(|e| match e {
        SessionEvent::Disconnected { client, reason, .. } if *client == id => Some(*reason),
        _ => None,
    })
}

#[test]
fn a_client_at_another_tick_rate_refuses_the_server_by_name_and_frees_its_slot() {
    let key = keys::generate_private_key().expect("key");
    // One slot, so a second client connecting shows the first one's slot is free.
    let mut host = host(key, 64, 1);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut wrong = game_client(&token(&key, 7, addr, 5), 30);
    until(5, "the refusal", || {
        serve(&mut host, &mut events);
        wrong.update().is_err()
    });
    let expected = Mismatch::TickRate {
        server: 64,
        client: 30,
    };
    assert_eq!(wrong.error(), Some(SessionError::Mismatch(expected)));
    assert_eq!(wrong.update(), Err(SessionError::Mismatch(expected)));
    let message = wrong.error().expect("ended").to_string();
    assert_eq!(message, "server runs 64 Hz ticks, this client 30 Hz");
    // The client said nothing of the game's before it checked the hello.
    assert_eq!(wrong.client().session().stats().packets_sent, 0);

    until(5, "the server sees it leave", || {
        serve(&mut host, &mut events);
        left(&events, 7).is_some()
    });
    assert_eq!(left(&events, 7), Some(LeaveReason::Left));
    assert!(host.clients().is_empty());
    assert!(host.transport().clients().is_empty());

    let mut right = game_client(&token(&key, 8, addr, 5), 64);
    until(5, "the next client plays", || {
        serve(&mut host, &mut events);
        right.update().expect("no error");
        right.is_ready()
    });
    assert_eq!(host.clients(), vec![8]);
}

#[test]
fn the_server_refuses_a_client_whose_packets_announce_another_tick_rate() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 64, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    // A client that skips the hello check: its session announces 30 Hz in its pings.
    let mut udp = UdpClient::connect(&token(&key, 9, addr, 5)).expect("client");
    let mut session = ClientSession::<u8>::new(ClientConfig {
        tick_hz: 30,
        ..ClientConfig::default()
    });
    let mut control = Vec::new();
    until(5, "the refusal and the disconnect", || {
        serve(&mut host, &mut events);
        udp.update();
        let now = udp.now();
        for p in udp.recv().collect::<Vec<_>>() {
            let _ = session.handle_packet(now, &p);
        }
        control.extend(
            udp.recv_reliable()
                .map(|m| Control::decode(&m).expect("control")),
        );
        if udp.is_connected() {
            session.update(now);
            while let Some(p) = session.poll_transmit(now) {
                let _ = udp.send(&p);
            }
        }
        udp.state() == lagless_netcode::ClientState::Disconnected
    });
    let mismatch = Mismatch::TickRate {
        server: 64,
        client: 30,
    };
    assert_eq!(
        control,
        vec![
            Control::Hello {
                tick_hz: 64,
                snapshot_interval: 1,
                resumed: false,
                client: 9,
            },
            Control::Refused(mismatch)
        ]
    );
    assert!(matches!(
        events[..],
        [
            SessionEvent::Connected { client: 9, .. },
            SessionEvent::Disconnected {
                client: 9,
                reason: LeaveReason::Refused(_),
                ..
            }
        ]
    ));
    assert_eq!(left(&events, 9), Some(LeaveReason::Refused(mismatch)));
    until(2, "the slot to be free", || {
        serve(&mut host, &mut events);
        host.transport().clients().is_empty()
    });
    let stats = host.stats();
    assert_eq!(
        (stats.connects, stats.disconnects, stats.refusals),
        (1, 1, 1)
    );
    assert!(stats.refused.tick_rate_mismatch >= 1);
    // Its disconnect came after the refusal: no second event.
    assert_eq!(events.len(), 2);
}

#[test]
fn a_client_whose_game_runs_another_rate_than_it_says_is_refused_by_name() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 64, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    // The host checks 64 Hz against the hello, but the hosted client runs at 30 Hz.
    let client = Client::new(schema(), Spectator::default(), &NetConfig::new(30)).expect("client");
    let token = token(&key, 10, addr, 5);
    let mut c = GameClient::connect(&token, client, &NetConfig::new(64)).expect("connect");
    until(5, "the refusal", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).is_err()
    });
    // Whichever end noticed first, the error names both rates.
    let mismatch = Mismatch::TickRate {
        server: 64,
        client: 30,
    };
    let error = c.error().expect("ended");
    assert!(
        error == SessionError::Refused(mismatch) || error == SessionError::Mismatch(mismatch),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("server runs 64 Hz ticks, this client 30 Hz")
    );
}

#[test]
fn a_client_that_vanishes_is_reported_disconnected_after_its_timeout() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 11, addr, 1), 30);
    until(5, "the client plays", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.is_ready()
    });
    assert_eq!(c.state(), SessionState::Ready);
    // No disconnect packets: the socket just closes.
    drop(c);
    let gone = Instant::now();
    until(5, "the timeout", || {
        serve(&mut host, &mut events);
        left(&events, 11).is_some()
    });
    assert_eq!(left(&events, 11), Some(LeaveReason::TimedOut));
    // Its counters over the connection come with the event: it sent packets while it
    // played, which the server received.
    let counters = events.iter().find_map(|e| match e {
        SessionEvent::Disconnected { counters, .. } => Some(counters),
        _ => None,
    });
    assert!(counters.is_some_and(|c| c.session.packets_received > 0 && c.session.packets_sent > 0));
    assert!(
        gone.elapsed() >= Duration::from_millis(900),
        "{:?}",
        gone.elapsed()
    );
    assert!(host.clients().is_empty());
    let stats = host.stats();
    assert_eq!(
        (stats.connects, stats.disconnects, stats.timeouts),
        (1, 1, 1)
    );
    // Over a second passed: the once-a-second counters came too, and add up to the totals.
    let seconds: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Second(s) => Some(s),
            _ => None,
        })
        .collect();
    assert!(!seconds.is_empty());
    let connects: u64 = seconds.iter().map(|s| s.connects).sum();
    assert!(connects <= 1);
    assert!(seconds.iter().all(|s| s.datagrams_in <= stats.datagrams_in));
}

#[test]
fn garbage_at_the_server_is_counted_and_breaks_nothing() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 12, addr, 5), 30);
    until(5, "the client plays", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.is_ready()
    });

    // Unauthenticated garbage of every length, some of it starting like netcode.io
    // packets (type bytes 0 to 7), from a fixed-seed LCG.
    let socket = UdpSocket::bind("127.0.0.1:0").expect("socket");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u8
    };
    let sent = 300;
    for i in 0..sent {
        let len = (usize::from(next()) * 7 + i) % 1400;
        let mut bytes: Vec<u8> = (0..len).map(|_| next()).collect();
        if let Some(b) = bytes.first_mut().filter(|_| i % 2 == 0) {
            *b %= 8;
        }
        socket.send_to(&bytes, addr).expect("send");
        if i % 50 == 0 {
            serve(&mut host, &mut events);
        }
    }
    // Authenticated garbage: a connected client whose payloads are no game packets.
    let mut raw = UdpClient::connect(&token(&key, 13, addr, 5)).expect("client");
    until(5, "the raw client connects", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        raw.update();
        raw.is_connected()
    });
    raw.send(&[0xff, 1, 2, 3]).expect("send");
    raw.send(&[0x49]).expect("send");
    raw.send_reliable(b"not from a client").expect("send");
    until(5, "the drops to be counted", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        raw.update();
        let s = host.stats();
        s.netcode_dropped() >= sent as u64 - 10
            && s.refused.unknown_kind >= 1
            && s.refused.malformed >= 1
            && s.malformed_payloads >= 1
    });
    let stats = host.stats();
    assert!(stats.datagrams_in >= sent as u64, "{stats:?}");
    assert_eq!(stats.refused.tick_rate_mismatch, 0);
    // Nobody was hurt: the game client still plays, both clients are still connected.
    for _ in 0..20 {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        raw.update();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(c.is_ready());
    assert_eq!(host.clients(), vec![12, 13]);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, SessionEvent::Disconnected { .. }))
    );
}

#[test]
fn the_server_loop_sleeps_until_its_next_tick() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 64, 4);
    let mut events = Vec::new();
    let (mut frames, mut ticks) = (0, 0);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        host.update();
        events.extend(std::iter::from_fn(|| host.poll_event()));
        while host.server_mut().next_tick().is_some() {
            ticks += 1;
        }
        let (now, deadline) = (host.now(), host.next_deadline());
        assert!(
            deadline <= now + Duration::from_micros(15_700),
            "{deadline:?} {now:?}"
        );
        host.wait();
        frames += 1;
    }
    // A frame per tick (and the odd early one): a busy loop would run thousands.
    assert!((55..=70).contains(&ticks), "{ticks} ticks");
    assert!(frames <= ticks + 20, "{frames} frames for {ticks} ticks");
}

#[test]
fn the_games_control_messages_arrive_in_order_before_play() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 64, 2);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut client = game_client(&token(&key, 5, addr, 5), 64);
    let mut got = Vec::new();
    let mut sent = false;
    until(5, "the game's messages", || {
        serve(&mut host, &mut events);
        if !sent
            && events
                .iter()
                .any(|e| matches!(e, SessionEvent::Connected { .. }))
        {
            // Sent on connect, beside the hello: the map, then the player.
            host.send_control(5, b"map arena").expect("send");
            host.send_control(5, &[2]).expect("send");
            sent = true;
        }
        let _ = client.update();
        got.extend(std::iter::from_fn(|| client.poll_control()));
        got.len() == 2
    });
    assert_eq!(got, vec![b"map arena".to_vec(), vec![2]]);
    assert_eq!(client.stats().control_malformed, 0);
    // An unknown client is an error, not a panic.
    assert!(host.send_control(99, b"x").is_err());
}

fn match_token(key: &[u8; 32], id: u64, addr: SocketAddr, match_id: u32) -> Vec<u8> {
    let data = lagless_transport::session::match_user_data(match_id);
    let token = keys::issue_token_with(key, PROTOCOL_ID, id, vec![addr], (30, 5), data);
    token.expect("token").write().expect("write").to_vec()
}

/// One frame of a host with several matches: update, every match's ticks, send.
fn serve_matches(host: &mut GameServer<u8>, events: &mut Vec<SessionEvent>) {
    host.update();
    events.extend(std::iter::from_fn(|| host.poll_event()));
    let now = host.now();
    for (_, server) in host.matches_mut() {
        while server.next_tick().is_some() {
            server.send_snapshots(now).expect("snapshots");
        }
    }
    host.transmit();
}

#[test]
fn clients_join_the_match_their_token_names_and_a_match_restarts_alone() {
    let key = keys::generate_private_key().expect("key");
    let servers = (0..2)
        .map(|_| Server::new(schema(), &NetConfig::new(64)).expect("server"))
        .collect();
    let settings = ServerSettings::new(PROTOCOL_ID, key, 8);
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let mut host = GameServer::bind_matches(addr, settings, servers).expect("bind");
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut a = game_client(&match_token(&key, 1, addr, 0), 64);
    let mut b = game_client(&match_token(&key, 2, addr, 1), 64);
    let mut stray = game_client(&match_token(&key, 3, addr, 7), 64);
    until(5, "both in their matches, the stray turned away", || {
        serve_matches(&mut host, &mut events);
        let _ = (a.update(), b.update(), stray.update());
        a.is_ready() && b.is_ready() && host.stats().no_such_match == 1
    });
    assert_eq!(host.match_of(1), Some(0));
    assert_eq!(host.match_of(2), Some(1));
    assert_eq!(host.match_of(3), None);
    let in_match = |host: &GameServer<u8>, m: u32| {
        let server = host.match_server(m).expect("hosted");
        server.session().clients().collect::<Vec<_>>()
    };
    assert_eq!(in_match(&host, 0), vec![1]);
    assert_eq!(in_match(&host, 1), vec![2]);
    until(5, "the stray's session to end", || {
        serve_matches(&mut host, &mut events);
        stray.update().is_err()
    });

    // Match 1 ends: its client is let go, match 0 plays on.
    let fresh = Server::new(schema(), &NetConfig::new(64)).expect("server");
    assert!(host.restart_match(1, fresh).is_some());
    let ended: Vec<SessionEvent> = std::iter::from_fn(|| host.poll_event()).collect();
    assert!(
        matches!(
            &ended[..],
            [SessionEvent::Disconnected {
                client: 2,
                match_id: 1,
                reason: LeaveReason::MatchEnded,
                ..
            }]
        ),
        "{ended:?}"
    );
    assert!(in_match(&host, 1).is_empty());
    until(5, "the ended match's client to hear it", || {
        serve_matches(&mut host, &mut events);
        let _ = a.update();
        b.update().is_err()
    });
    assert!(a.is_ready());
    assert_eq!(in_match(&host, 0), vec![1]);
    let unknown = Server::new(schema(), &NetConfig::new(64)).expect("server");
    assert!(host.restart_match(9, unknown).is_none());
}

#[test]
fn a_draining_server_turns_new_clients_away_and_keeps_the_playing_ones() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 64, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut playing = game_client(&token(&key, 1, addr, 5), 64);
    until(5, "the first client", || {
        serve(&mut host, &mut events);
        let _ = playing.update();
        playing.is_ready()
    });
    host.set_accepting(false);
    let mut late = game_client(&token(&key, 2, addr, 5), 64);
    until(5, "the late client to be denied", || {
        serve(&mut host, &mut events);
        let _ = playing.update();
        late.update().is_err()
    });
    assert!(
        matches!(late.error(), Some(SessionError::Connect(_))),
        "{:?}",
        late.error()
    );
    assert!(playing.is_ready());
    assert_eq!(host.clients(), vec![1]);
    // Accepting again, a new client gets in.
    host.set_accepting(true);
    let mut again = game_client(&token(&key, 3, addr, 5), 64);
    until(5, "a client after the drain was called off", || {
        serve(&mut host, &mut events);
        let _ = (playing.update(), again.update());
        again.is_ready()
    });
}

#[test]
fn a_client_frozen_longer_than_its_timeout_wakes_disconnected_and_reconnects() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 12, addr, 1), 30);
    until(5, "the client plays", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.is_ready() && c.client().replication().newest().is_some()
    });
    // The app goes to the background: the client runs nothing for longer than its
    // 1 s timeout, while the server runs on, sends snapshots into its socket, and drops it.
    let frozen = Instant::now();
    until(5, "the server drops it", || {
        serve(&mut host, &mut events);
        left(&events, 12).is_some() && frozen.elapsed() >= Duration::from_millis(1500)
    });
    assert_eq!(left(&events, 12), Some(LeaveReason::TimedOut));
    // It wakes: the queued snapshots do not make a dead connection look alive.
    let woke = c.update();
    assert!(
        matches!(woke, Err(SessionError::Suspended(d)) if d >= Duration::from_millis(1500)),
        "{woke:?}"
    );
    assert!(!c.is_ready());
    let before = c.client().session().stats().snapshots_received;
    // With a fresh token it plays again, the same Client kept.
    c.reconnect(&token(&key, 12, addr, 5)).expect("reconnect");
    until(5, "the client plays again", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.is_ready() && c.client().session().stats().snapshots_received > before + 5
    });
    assert_eq!(host.clients(), vec![12]);
    assert_eq!(c.client().stats().restarts, 1);
}

#[test]
fn a_client_that_sends_only_keep_alives_is_dropped_as_idle_with_the_reason_on_both_ends() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    assert_eq!(
        host.idle_timeout(),
        Some(lagless_transport::session::DEFAULT_IDLE_TIMEOUT)
    );
    let idle_after = Duration::from_millis(500);
    host.set_idle_timeout(Some(idle_after));
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    // One client plays; the other's game never ticks it: its transport still sends
    // netcode.io keep-alives, so the connection lives.
    let mut playing = game_client(&token(&key, 13, addr, 5), 30);
    let mut idle = game_client(&token(&key, 14, addr, 5), 30);
    let mut idle_end = None;
    until(5, "the idle client's drop, told on both ends", || {
        serve(&mut host, &mut events);
        playing.step(|_| 0).expect("the playing client plays on");
        if idle_end.is_none() {
            idle_end = idle.update().err();
        }
        idle_end.is_some() && left(&events, 14).is_some()
    });
    assert_eq!(left(&events, 14), Some(LeaveReason::Idle(idle_after)));
    assert_eq!(idle_end, Some(SessionError::Idle(idle_after)));
    assert!(
        idle_end
            .expect("ended")
            .to_string()
            .contains("no game packet from this client for 500ms")
    );
    assert_eq!(host.clients(), vec![13]);
    assert!(playing.is_ready());
    assert_eq!(host.stats().idle, 1);
}

/// Numbered reliable messages both ways, for checking each arrives once and in order.
#[derive(Default)]
struct Talk {
    frame: u32,
    down_sent: u32,
    up_sent: u32,
    down_got: Vec<u32>,
    up_got: Vec<u32>,
}

impl Talk {
    /// A server frame that sends the next number to client `id` now and then (also
    /// while it is away), and takes the client's.
    fn serve(&mut self, host: &mut GameServer<u8>, events: &mut Vec<SessionEvent>, id: u64) {
        serve(host, events);
        self.frame += 1;
        if self.frame % 10 == 0 && host.clients() == vec![id] {
            host.server_mut()
                .send_message(id, Delivery::Reliable, &self.down_sent.to_le_bytes())
                .expect("queued");
            self.down_sent += 1;
        }
        while let Some((_, _, m)) = host.server_mut().poll_message() {
            self.up_got
                .push(u32::from_le_bytes(m.try_into().expect("4 bytes")));
        }
    }

    /// A client frame that sends the next number now and then, and takes the server's.
    fn play(&mut self, c: &mut GameClient<Spectator<u8>>) {
        c.step(|_| 0).expect("no error");
        if c.is_ready() && self.frame % 10 == 5 {
            c.client_mut()
                .send_message(Delivery::Reliable, &self.up_sent.to_le_bytes())
                .expect("queued");
            self.up_sent += 1;
        }
        while let Some((_, m)) = c.client_mut().poll_message() {
            self.down_got
                .push(u32::from_le_bytes(m.try_into().expect("4 bytes")));
        }
    }
}

#[test]
fn a_frozen_client_resumes_its_place_within_the_grace_period_messages_exactly_once_in_order() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    host.set_resume_grace(Some(Duration::from_secs(10)));
    host.server_mut()
        .spawn_with_id(5, 0, |w| w.vec2([1.0, 2.0]))
        .expect("spawn");
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 15, addr, 1), 30);
    let mut talk = Talk::default();
    until(5, "the client plays", || {
        talk.serve(&mut host, &mut events, 15);
        talk.play(&mut c);
        c.client().replication().get(5).is_some() && talk.down_got.len() >= 3
    });
    // Frozen past its 1 s timeout: the server keeps its place, and goes on queuing.
    let frozen = Instant::now();
    until(5, "the client is away", || {
        talk.serve(&mut host, &mut events, 15);
        frozen.elapsed() >= Duration::from_millis(1500)
    });
    assert!(events.contains(&SessionEvent::Away {
        client: 15,
        match_id: 0
    }));
    assert_eq!(left(&events, 15), None);
    assert!(matches!(c.update(), Err(SessionError::Suspended(_))));
    // Back with a fresh token, from a new socket.
    let before = c.client().replication().newest().expect("a snapshot");
    let resumed = Instant::now();
    c.resume(&token(&key, 15, addr, 5)).expect("resume");
    let mut in_play = None;
    let (down_target, up_target) = (talk.down_sent + 3, talk.up_sent + 3);
    until(5, "the message streams caught up", || {
        talk.serve(&mut host, &mut events, 15);
        talk.play(&mut c);
        if c.client().replication().newest() > Some(before) {
            in_play.get_or_insert(resumed.elapsed());
        }
        talk.down_got.len() as u32 >= down_target && talk.up_got.len() as u32 >= up_target
    });
    // Loopback: the netcode.io handshake and the hello, then the next snapshot.
    println!("a snapshot applied {in_play:?} after the resume began");
    assert!(events.iter().any(|e| matches!(
        e,
        SessionEvent::Resumed { client: 15, away, .. } if *away < Duration::from_secs(10)
    )));
    assert_eq!(host.stats().resumes, 1);
    assert_same_player_messages_once_in_order(&mut c, &talk, &events, 15);
}

#[test]
fn a_client_that_changes_networks_resumes_at_once_from_its_new_address() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    host.set_resume_grace(Some(Duration::from_secs(10)));
    host.server_mut()
        .spawn_with_id(5, 0, |w| w.vec2([1.0, 2.0]))
        .expect("spawn");
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 16, addr, 5), 30);
    let mut talk = Talk::default();
    until(5, "the client plays", || {
        talk.serve(&mut host, &mut events, 16);
        talk.play(&mut c);
        c.client().replication().get(5).is_some() && talk.down_got.len() >= 3
    });
    let old_addr = c.transport().local_addr().expect("addr");
    // The phone switches networks: a new socket, a fresh token, while the old
    // connection is still alive on the server (its 5 s timeout far off).
    let before = c.client().replication().newest().expect("a snapshot");
    let switched = Instant::now();
    c.resume(&token(&key, 16, addr, 5)).expect("resume");
    assert_ne!(c.transport().local_addr().expect("addr"), old_addr);
    let mut in_play = None;
    let (down_target, up_target) = (talk.down_sent + 5, talk.up_sent + 5);
    until(5, "the message streams caught up", || {
        talk.serve(&mut host, &mut events, 16);
        talk.play(&mut c);
        if c.client().replication().newest() > Some(before) {
            in_play.get_or_insert(switched.elapsed());
        }
        talk.down_got.len() as u32 >= down_target && talk.up_got.len() as u32 >= up_target
    });
    let in_play = in_play.expect("in play");
    println!("a snapshot applied {in_play:?} after the switch");
    assert!(in_play < Duration::from_secs(1), "{in_play:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        SessionEvent::Resumed { client: 16, addr, .. } if addr.port() != old_addr.port()
    )));
    assert_eq!(host.clients(), vec![16]);
    assert_same_player_messages_once_in_order(&mut c, &talk, &events, 16);
}

#[test]
fn an_away_client_leaves_when_its_grace_ends_or_the_server_shuts_down() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    host.set_resume_grace(Some(Duration::from_millis(500)));
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    for id in [17, 18] {
        let mut c = game_client(&token(&key, id, addr, 1), 30);
        until(5, "the client plays", || {
            serve(&mut host, &mut events);
            c.step(|_| 0).expect("no error");
            c.is_ready()
        });
        // Gone without a word: away after its 1 s timeout.
        drop(c);
        until(5, "the client is away", || {
            serve(&mut host, &mut events);
            events.contains(&SessionEvent::Away {
                client: id,
                match_id: 0,
            })
        });
        assert_eq!(host.clients(), vec![id]);
        if id == 17 {
            // Not back within the grace period: it leaves as timed out.
            until(5, "the grace period ends", || {
                serve(&mut host, &mut events);
                left(&events, 17).is_some()
            });
            assert_eq!(left(&events, 17), Some(LeaveReason::TimedOut));
        } else {
            host.shutdown();
            events.extend(std::iter::from_fn(|| host.poll_event()));
            assert_eq!(left(&events, 18), Some(LeaveReason::Kicked));
        }
        assert!(host.clients().is_empty());
    }
}

/// A path between clients and a server that can be cut for one client address, as a
/// network that went away (the Wi-Fi a phone walked out of) cuts the old address: each
/// client address gets its own upstream socket; datagrams from or to a cut address are
/// dropped both ways.
struct Path {
    addr: SocketAddr,
    cut: std::sync::Arc<std::sync::Mutex<Vec<SocketAddr>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Path {
    /// A path from a port of its own to the server at `server`.
    fn to(front: UdpSocket, server: SocketAddr) -> Self {
        use std::sync::atomic::Ordering;
        front.set_nonblocking(true).expect("nonblocking");
        let addr = front.local_addr().expect("addr");
        let cut = std::sync::Arc::new(std::sync::Mutex::new(Vec::<SocketAddr>::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, s) = (cut.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut ups: Vec<(SocketAddr, UdpSocket)> = Vec::new();
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Relaxed) {
                let cut = c.lock().expect("lock").clone();
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    if cut.contains(&from) {
                        continue;
                    }
                    if !ups.iter().any(|(a, _)| *a == from) {
                        let up = UdpSocket::bind("127.0.0.1:0").expect("bind");
                        up.set_nonblocking(true).expect("nonblocking");
                        ups.push((from, up));
                    }
                    if let Some((_, up)) = ups.iter().find(|(a, _)| *a == from) {
                        let _ = up.send_to(&buf[..n], server);
                    }
                }
                for (client, up) in &ups {
                    while let Ok((n, _)) = up.recv_from(&mut buf) {
                        if !cut.contains(client) {
                            let _ = front.send_to(&buf[..n], client);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            addr,
            cut,
            stop,
            thread: Some(thread),
        }
    }

    /// Drops everything from and to `client` from now on.
    fn cut(&self, client: SocketAddr) {
        self.cut.lock().expect("lock").push(client);
    }
}

impl Drop for Path {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The client's address as the server sees it through a [`Path`]: loopback, its port.
fn local(c: &GameClient<Spectator<u8>>) -> SocketAddr {
    let port = c.transport().local_addr().expect("addr").port();
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// What a run of one client through a fault left: the events, the messages both ways.
fn assert_same_player_messages_once_in_order(
    c: &mut GameClient<Spectator<u8>>,
    talk: &Talk,
    events: &[SessionEvent],
    id: u64,
) {
    assert_eq!(left(events, id), None, "{events:?}");
    let in_order = |got: &[u32]| got.iter().enumerate().all(|(i, n)| *n == i as u32);
    assert!(in_order(&talk.down_got), "{:?}", talk.down_got);
    assert!(in_order(&talk.up_got), "{:?}", talk.up_got);
    // The same entity, never despawned, and the client never started over.
    let spawns: Vec<EntityEvent> = std::iter::from_fn(|| c.client_mut().poll_event()).collect();
    assert_eq!(spawns.len(), 1, "{spawns:?}");
    assert_eq!(c.client().stats().restarts, 0);
}

#[test]
fn a_client_whose_path_goes_silent_suspects_a_switch_and_resumes_by_itself() {
    let key = keys::generate_private_key().expect("key");
    // The path's port is chosen first: the tokens name it, so the server answers for it.
    let front = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let server = Server::new(schema(), &NetConfig::new(30)).expect("server");
    let mut settings = ServerSettings::new(PROTOCOL_ID, key, 4);
    settings.public_addresses = vec![front.local_addr().expect("addr")];
    let bind = "127.0.0.1:0".parse().expect("addr");
    let mut host = GameServer::bind(bind, settings, server).expect("bind");
    host.set_resume_grace(Some(Duration::from_secs(10)));
    host.server_mut()
        .spawn_with_id(5, 0, |w| w.vec2([1.0, 2.0]))
        .expect("spawn");
    let path = Path::to(front, host.local_addr().expect("addr"));
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 20, path.addr, 5), 30);
    // The backend: a fresh token for the same id whenever asked.
    let (k, to) = (key, path.addr);
    c.set_token_source(move || Some(token(&k, 20, to, 5)));
    let suspicion = Duration::from_millis(600);
    c.set_switch_after(Some(suspicion));
    let mut talk = Talk::default();
    until(5, "the client plays", || {
        talk.serve(&mut host, &mut events, 20);
        talk.play(&mut c);
        c.client().replication().get(5).is_some() && talk.down_got.len() >= 3
    });
    // The old network goes away: nothing from or to the client's address any more,
    // while it goes on sending into the void. The game says nothing.
    let old = local(&c);
    path.cut(old);
    let cut = Instant::now();
    let (down_target, up_target) = (talk.down_sent + 5, talk.up_sent + 5);
    until(10, "the client back and the streams caught up", || {
        talk.serve(&mut host, &mut events, 20);
        talk.play(&mut c);
        c.stats().last_back_in_play.is_some()
            && talk.down_got.len() as u32 >= down_target
            && talk.up_got.len() as u32 >= up_target
    });
    let back = c.stats().last_back_in_play.expect("back");
    println!(
        "suspected after {suspicion:?} of silence; back in play {back:?} after the resume, {:?} after the cut",
        cut.elapsed()
    );
    assert_eq!(c.stats().switches_suspected, 1);
    assert_eq!(
        c.stats().switches_signalled + c.stats().resumes_after_freeze,
        0
    );
    assert_ne!(local(&c), old);
    assert!(back < Duration::from_secs(1), "{back:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        SessionEvent::Resumed { client: 20, addr, .. } if addr.port() != old.port()
    )));
    assert_eq!(host.stats().resumes, 1);
    assert_same_player_messages_once_in_order(&mut c, &talk, &events, 20);
}

#[test]
fn a_client_told_the_network_changed_resumes_at_once_and_one_that_wakes_late_resumes_too() {
    let key = keys::generate_private_key().expect("key");
    let mut host = host(key, 30, 4);
    host.set_resume_grace(Some(Duration::from_secs(10)));
    host.server_mut()
        .spawn_with_id(5, 0, |w| w.vec2([1.0, 2.0]))
        .expect("spawn");
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 21, addr, 1), 30);
    // A backend slow to answer: no token on the first request of each resume.
    let mut asked = 0;
    c.set_token_source(move || {
        asked += 1;
        (asked % 2 == 0).then(|| token(&key, 21, addr, 1))
    });
    let mut talk = Talk::default();
    until(5, "the client plays", || {
        talk.serve(&mut host, &mut events, 21);
        talk.play(&mut c);
        c.client().replication().get(5).is_some() && talk.down_got.len() >= 3
    });
    let old = local(&c);
    c.network_changed();
    let (down_target, up_target) = (talk.down_sent + 3, talk.up_sent + 3);
    until(5, "back after the signalled switch", || {
        talk.serve(&mut host, &mut events, 21);
        talk.play(&mut c);
        c.stats().last_back_in_play.is_some()
            && talk.down_got.len() as u32 >= down_target
            && talk.up_got.len() as u32 >= up_target
    });
    assert_ne!(local(&c), old);
    assert_eq!(c.stats().switches_signalled, 1);
    assert!(c.stats().token_waits >= 1);
    let back = c.stats().last_back_in_play.expect("back");
    println!("signalled: back in play {back:?} after the resume");
    assert!(back < Duration::from_secs(1), "{back:?}");

    // Frozen past its 1 s timeout: it wakes and resumes instead of ending Suspended.
    let frozen = Instant::now();
    until(5, "the client is away", || {
        talk.serve(&mut host, &mut events, 21);
        frozen.elapsed() >= Duration::from_millis(1500)
    });
    assert!(events.contains(&SessionEvent::Away {
        client: 21,
        match_id: 0
    }));
    let (down_target, up_target) = (talk.down_sent + 3, talk.up_sent + 3);
    until(5, "back after the freeze", || {
        talk.serve(&mut host, &mut events, 21);
        talk.play(&mut c);
        c.stats().resumes_after_freeze == 1
            && talk.down_got.len() as u32 >= down_target
            && talk.up_got.len() as u32 >= up_target
    });
    assert_eq!(host.stats().resumes, 2);
    assert_eq!(c.stats().resumes_refused, 0);
    assert_same_player_messages_once_in_order(&mut c, &talk, &events, 21);
}

#[test]
fn a_resume_the_server_does_not_take_starts_the_client_over() {
    let key = keys::generate_private_key().expect("key");
    // No resume grace: a client that comes back is a new one.
    let mut host = host(key, 30, 4);
    host.server_mut()
        .spawn_with_id(5, 0, |w| w.vec2([1.0, 2.0]))
        .expect("spawn");
    let addr = host.local_addr().expect("addr");
    let mut events = Vec::new();
    let mut c = game_client(&token(&key, 22, addr, 1), 30);
    until(5, "the client plays", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.client().replication().get(5).is_some()
    });
    while c.client_mut().poll_event().is_some() {}
    // Away past its timeout; the server lets it go.
    until(5, "the server drops it", || {
        serve(&mut host, &mut events);
        left(&events, 22).is_some()
    });
    c.resume(&token(&key, 22, addr, 5)).expect("resume");
    until(5, "the client plays again", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        c.stats().last_back_in_play.is_some()
    });
    assert_eq!(c.stats().resumes_refused, 1);
    assert_eq!(c.client().stats().restarts, 1);
    // Its entity despawned with the old place and spawned again from the new one.
    let spawns: Vec<EntityEvent> = std::iter::from_fn(|| c.client_mut().poll_event()).collect();
    assert_eq!(spawns.len(), 2, "{spawns:?}");
    // Messages from the new place arrive: the channel started over with it.
    host.server_mut()
        .send_message(22, Delivery::Reliable, b"hi")
        .expect("queued");
    let mut got = Vec::new();
    until(5, "a message from the new place", || {
        serve(&mut host, &mut events);
        c.step(|_| 0).expect("no error");
        got.extend(std::iter::from_fn(|| c.client_mut().poll_message()));
        !got.is_empty()
    });
}
