//! [`GameServer`]: a game's [`Server`] on a [`UdpServer`].

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use lagless_core::{ClientId, FixedTimestep, Input, ProtocolError, TickRate};
use lagless_netcode::{DisconnectReason, PacketError};
use lagless_replication::{DepartedClient, NetError, Server};

use super::{Control, Mismatch};
use crate::{ConnectionEvent, ServerSettings, TransportError, UdpServer};

/// Events kept for the game until polled; older ones are dropped (and counted in
/// [`SessionStats::events_dropped`]).
const MAX_EVENTS: usize = 1 << 16;

/// How long a refused client keeps its connection to read the refusal, if it does not
/// acknowledge it (or leave) sooner.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// The longest [`GameServer::next_deadline`] lies ahead: netcode.io keep-alives and the
/// reliable channel's resends are due every 100 ms, and nothing else wakes the loop when
/// no client sends.
const MAX_WAIT: Duration = Duration::from_millis(50);

/// How long a [`GameServer`] keeps a client that sends no game packet by default
/// ([`GameServer::set_idle_timeout`]). On by default: netcode.io's keep-alives keep a
/// client connected whose game stopped ticking it (a bug, a stuck loading screen, a bot
/// that only holds a slot), and such a client stays in the match for ever, its player
/// standing on guessed inputs, its slot taken (642 starved ticks in 10 s, issue 48).
/// Ten seconds is longer than the connection timeout tokens usually carry (`lagless
/// token` gives 5 s), so a client whose link is down is timed out by the transport
/// first, as before, and longer than a [`GameClient`](super::GameClient)'s wait for the
/// hello (5 s), during which it sends nothing; a game whose clients connect long before
/// they play turns it off or raises it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a client left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// Nothing arrived from it within its token's timeout.
    TimedOut,
    /// It disconnected.
    Left,
    /// The server disconnected it ([`GameServer::disconnect`], [`GameServer::shutdown`]).
    Kicked,
    /// Its packets announced settings this server cannot use; it was sent a
    /// [`Control::Refused`] and is disconnected.
    Refused(Mismatch),
    /// Its match ended ([`GameServer::restart_match`]).
    MatchEnded,
    /// No game packet came from it for this long though its connection lived
    /// ([`GameServer::set_idle_timeout`]); it was sent a [`Control::Idle`] and is
    /// disconnected.
    Idle(Duration),
}

/// Draws a random instance for `server` unless the game named one
/// ([`lagless_core::ServerConfig::instance`]): a client kept across a restart of this
/// process then knows at once that it talks to a new server, and starts over.
fn name_instance<I: Input>(server: &mut Server<I>) -> Result<(), TransportError> {
    if server.session().config().instance != 0 {
        return Ok(());
    }
    let mut bytes = [0; 4];
    getrandom::fill(&mut bytes).map_err(|e| TransportError::Random(e.to_string()))?;
    // Never 0, the value of a server nobody named.
    server
        .session_mut()
        .set_instance(u32::from_le_bytes(bytes).max(1));
    Ok(())
}

/// A match's id among those a [`GameServer`] hosts.
pub type MatchId = u32;

/// The connect token user data that names match `id` (the first four bytes, little
/// endian; the rest zero): what a matchmaker puts in the tokens of a match's players.
pub fn match_user_data(id: MatchId) -> [u8; lagless_netcode::USER_DATA_BYTES] {
    let mut data = [0; lagless_netcode::USER_DATA_BYTES];
    data[..4].copy_from_slice(&id.to_le_bytes());
    data
}

/// The match a token's user data names ([`match_user_data`]).
pub fn match_of_user_data(data: &[u8; lagless_netcode::USER_DATA_BYTES]) -> MatchId {
    MatchId::from_le_bytes([data[0], data[1], data[2], data[3]])
}

/// What the game learns from a [`GameServer`], in order.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// A client connected and is in the game's [`Server`]: spawn its player.
    Connected {
        /// The id from its connect token, the `Server`'s client id.
        client: ClientId,
        /// Where it sends from.
        addr: SocketAddr,
        /// The match it joined (0 with one match).
        match_id: MatchId,
    },
    /// A client left and is out of the [`Server`]: despawn what it had.
    Disconnected {
        /// Its id.
        client: ClientId,
        /// The match it was in.
        match_id: MatchId,
        /// Why.
        reason: LeaveReason,
        /// Its counters over the connection (packets, inputs, bytes), for the game's logs
        /// and totals.
        counters: Box<DepartedClient>,
    },
    /// Once a second: the counters over the last second ([`SessionStats::clients`] is the
    /// count at its end).
    Second(SessionStats),
    /// A client's connection timed out, and it stays in the [`Server`] for the resume
    /// grace period ([`GameServer::set_resume_grace`]): its player, its session and its
    /// queued reliable messages wait for it. Freeze the player if the game likes; its
    /// [`SessionEvent::Disconnected`] comes if it is not back within the grace period.
    Away {
        /// Its id.
        client: ClientId,
        /// The match it is in.
        match_id: MatchId,
    },
    /// An away client connected again (a fresh token for the same id, from any address):
    /// it goes on where it was, its player, session and message streams kept.
    Resumed {
        /// Its id.
        client: ClientId,
        /// Where it sends from now.
        addr: SocketAddr,
        /// The match it is in.
        match_id: MatchId,
        /// How long it was away (from its connection's timeout).
        away: Duration,
    },
}

/// Client packets the game's [`Server`] refused, by reason (the packet was dropped; the
/// connection goes on, except after a tick rate mismatch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefusedPackets {
    /// Malformed or truncated.
    pub malformed: u64,
    /// An unknown message kind.
    pub unknown_kind: u64,
    /// Larger than a packet may be.
    pub too_large: u64,
    /// Ticks too far from the server's.
    pub tick_out_of_range: u64,
    /// Announcing another tick rate (the client is then refused).
    pub tick_rate_mismatch: u64,
    /// A malformed message section.
    pub message_channel: u64,
    /// Any other reason.
    pub other: u64,
}

impl RefusedPackets {
    fn count(&mut self, error: &NetError) {
        let n = match error {
            NetError::Protocol(ProtocolError::Wire(_)) => &mut self.malformed,
            NetError::Protocol(ProtocolError::UnknownKind(_)) => &mut self.unknown_kind,
            NetError::Protocol(ProtocolError::PacketTooLarge { .. }) => &mut self.too_large,
            NetError::Protocol(ProtocolError::TickOutOfRange { .. }) => &mut self.tick_out_of_range,
            NetError::Protocol(ProtocolError::TickRateMismatch { .. }) => {
                &mut self.tick_rate_mismatch
            }
            NetError::Protocol(ProtocolError::Channel(_)) => &mut self.message_channel,
            _ => &mut self.other,
        };
        *n += 1;
    }

    /// All refused packets.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.unknown_kind
            + self.too_large
            + self.tick_out_of_range
            + self.tick_rate_mismatch
            + self.message_channel
            + self.other
    }

    fn since(&self, e: &Self) -> Self {
        Self {
            malformed: self.malformed.saturating_sub(e.malformed),
            unknown_kind: self.unknown_kind.saturating_sub(e.unknown_kind),
            too_large: self.too_large.saturating_sub(e.too_large),
            tick_out_of_range: self.tick_out_of_range.saturating_sub(e.tick_out_of_range),
            tick_rate_mismatch: self.tick_rate_mismatch.saturating_sub(e.tick_rate_mismatch),
            message_channel: self.message_channel.saturating_sub(e.message_channel),
            other: self.other.saturating_sub(e.other),
        }
    }
}

/// A [`GameServer`]'s counters: totals since it started ([`GameServer::stats`]) or over
/// one second ([`SessionEvent::Second`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Clients connected now (at the end of the second).
    pub clients: usize,
    /// Clients that connected.
    pub connects: u64,
    /// Clients that left, for any reason (refusals included).
    pub disconnects: u64,
    /// Of those, timed out.
    pub timeouts: u64,
    /// Of those, refused for their settings.
    pub refusals: u64,
    /// Of those, dropped for sending no game packet ([`GameServer::set_idle_timeout`]).
    pub idle: u64,
    /// Clients that came back within the resume grace period
    /// ([`GameServer::set_resume_grace`]), not counted in `connects`.
    pub resumes: u64,
    /// Clients whose token named a match this server does not host: disconnected at once
    /// (not counted in `connects`).
    pub no_such_match: u64,
    /// Datagrams read from the socket, garbage included.
    pub datagrams_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// Datagrams written.
    pub datagrams_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
    /// Client packets the game's [`Server`] refused, by reason.
    pub refused: RefusedPackets,
    /// Datagrams netcode.io dropped (garbage, replays, unknown addresses, expired tokens),
    /// by reason: the reasons with a count.
    pub netcode_drops: Vec<(PacketError, u64)>,
    /// Received payloads the transport dropped because its queues were full.
    pub queue_drops: u64,
    /// Authenticated payloads that were not this transport's (unknown channel tag, a
    /// malformed reliable packet), and reliable messages from clients, who send none.
    pub malformed_payloads: u64,
    /// Packets of the [`Server`] the transport could not send (too large, a client gone).
    pub send_failures: u64,
    /// Socket errors.
    pub io_errors: u64,
    /// Events dropped because the game did not poll them.
    pub events_dropped: u64,
}

impl SessionStats {
    /// Netcode.io drops, all reasons.
    pub fn netcode_dropped(&self) -> u64 {
        self.netcode_drops.iter().map(|(_, n)| n).sum()
    }

    /// The counters since `earlier` (`clients` stays this one's).
    pub fn since(&self, earlier: &SessionStats) -> SessionStats {
        let before = |reason| {
            earlier
                .netcode_drops
                .iter()
                .find(|(r, _)| *r == reason)
                .map_or(0, |(_, n)| *n)
        };
        SessionStats {
            clients: self.clients,
            connects: self.connects.saturating_sub(earlier.connects),
            disconnects: self.disconnects.saturating_sub(earlier.disconnects),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            refusals: self.refusals.saturating_sub(earlier.refusals),
            idle: self.idle.saturating_sub(earlier.idle),
            resumes: self.resumes.saturating_sub(earlier.resumes),
            no_such_match: self.no_such_match.saturating_sub(earlier.no_such_match),
            datagrams_in: self.datagrams_in.saturating_sub(earlier.datagrams_in),
            bytes_in: self.bytes_in.saturating_sub(earlier.bytes_in),
            datagrams_out: self.datagrams_out.saturating_sub(earlier.datagrams_out),
            bytes_out: self.bytes_out.saturating_sub(earlier.bytes_out),
            refused: self.refused.since(&earlier.refused),
            netcode_drops: self
                .netcode_drops
                .iter()
                .map(|&(r, n)| (r, n.saturating_sub(before(r))))
                .filter(|(_, n)| *n > 0)
                .collect(),
            queue_drops: self.queue_drops.saturating_sub(earlier.queue_drops),
            malformed_payloads: self
                .malformed_payloads
                .saturating_sub(earlier.malformed_payloads),
            send_failures: self.send_failures.saturating_sub(earlier.send_failures),
            io_errors: self.io_errors.saturating_sub(earlier.io_errors),
            events_dropped: self.events_dropped.saturating_sub(earlier.events_dropped),
        }
    }
}

/// A game's [`Server`] on a [`UdpServer`] (netcode.io), on a real clock.
///
/// The game's loop:
/// ```text
/// let mut host = GameServer::bind(addr, settings, Server::new(schema, &config)?)?;
/// loop {
///     host.update();                             // socket in, connects, packets -> Server
///     while let Some(event) = host.poll_event() { /* spawn, despawn, log the second */ }
///     let now = host.now();
///     while let Some(step) = host.server_mut().next_tick() {
///         world.step(&step.inputs);              // the game's own simulation
///         host.server_mut().update_entity(id, |w| ...)?;
///         host.server_mut().send_snapshots(now)?;
///     }
///     host.transmit();                           // Server -> socket
///     host.wait();                               // until the next tick or packet
/// }
/// host.shutdown();
/// ```
/// Leave the `Server`'s `connect`, `disconnect`, `receive`, `update` and `poll_transmit`
/// to the host: it calls them as clients come and go and packets arrive.
pub struct GameServer<I: Input> {
    udp: UdpServer,
    /// The matches, by id: one (id 0, every token) from [`GameServer::bind`].
    matches: BTreeMap<MatchId, Server<I>>,
    /// Route every client to one match by its token's user data
    /// ([`GameServer::bind_matches`]), or all to match 0.
    routed: bool,
    /// Each client in a match, and which.
    client_match: BTreeMap<ClientId, MatchId>,
    events: VecDeque<SessionEvent>,
    /// Clients refused and out of the [`Server`], still connected until they have read
    /// why (or [`REFUSAL_GRACE`] after): when they were refused.
    refusing: BTreeMap<ClientId, Duration>,
    /// The `Server`'s clock as the host drives it, drained after every update, so the
    /// next tick's time is known (the session does not say).
    clock: FixedTimestep,
    last_update: Duration,
    counts: SessionStats,
    /// When the last [`SessionEvent::Second`] was queued, and the totals then.
    last_second: (Duration, SessionStats),
    /// Clients sending no game packet for this long are dropped.
    idle_timeout: Option<Duration>,
    /// When each client in a match last sent a game packet (or connected).
    last_game_packet: BTreeMap<ClientId, Duration>,
    /// How long a timed-out client keeps its place for a resume (`None`: not at all).
    resume_grace: Option<Duration>,
    /// Clients whose connection timed out, still in their match, and since when.
    away: BTreeMap<ClientId, Duration>,
}

impl<I: Input> GameServer<I> {
    /// Binds `addr` (port 0 picks one) and hosts `server` there: one match, which every
    /// client with a valid token joins.
    pub fn bind(
        addr: SocketAddr,
        settings: ServerSettings,
        server: Server<I>,
    ) -> Result<Self, TransportError> {
        Self::bind_with(addr, settings, BTreeMap::from([(0, server)]), false)
    }

    /// Binds `addr` and hosts several matches there, each a `Server` of its own (ids
    /// `0..n`). A client joins the match its connect token's user data names
    /// ([`match_user_data`]); a token naming no hosted match is refused at connect
    /// ([`SessionStats::no_such_match`] counts it). All matches must run the same tick rate.
    pub fn bind_matches(
        addr: SocketAddr,
        settings: ServerSettings,
        servers: Vec<Server<I>>,
    ) -> Result<Self, TransportError> {
        if servers.is_empty() {
            return Err(TransportError::Hosting("no match to host".into()));
        }
        let matches = (0..).zip(servers).collect();
        Self::bind_with(addr, settings, matches, true)
    }

    fn bind_with(
        addr: SocketAddr,
        settings: ServerSettings,
        mut matches: BTreeMap<MatchId, Server<I>>,
        routed: bool,
    ) -> Result<Self, TransportError> {
        for server in matches.values_mut() {
            name_instance(server)?;
        }
        let first = matches
            .values()
            .next()
            .ok_or_else(|| TransportError::Hosting("no match to host".into()))?;
        let config = first.session().config();
        if matches
            .values()
            .any(|m| m.session().config().tick_hz != config.tick_hz)
        {
            return Err(TransportError::Hosting(
                "every match must run the same tick rate".into(),
            ));
        }
        let clock = FixedTimestep::new(
            TickRate::new(config.tick_hz),
            first.current_tick(),
            config.max_backlog_ticks,
        );
        let udp = UdpServer::bind(addr, settings)?;
        Ok(Self {
            udp,
            matches,
            routed,
            client_match: BTreeMap::new(),
            events: VecDeque::new(),
            refusing: BTreeMap::new(),
            clock,
            last_update: Duration::ZERO,
            counts: SessionStats::default(),
            last_second: (Duration::ZERO, SessionStats::default()),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            last_game_packet: BTreeMap::new(),
            resume_grace: None,
            away: BTreeMap::new(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.udp.local_addr()
    }

    /// Time since the server started: the clock the hosted [`Server`] runs on (pass it to
    /// `send_snapshots`).
    pub fn now(&self) -> Duration {
        self.udp.now()
    }

    /// The game's server (the first match's, with several).
    pub fn server(&self) -> &Server<I> {
        self.matches
            .values()
            .next()
            .unwrap_or_else(|| unreachable!("a host has a match"))
    }

    /// The game's server, to step the world and write its state (the first match's).
    pub fn server_mut(&mut self) -> &mut Server<I> {
        self.matches
            .values_mut()
            .next()
            .unwrap_or_else(|| unreachable!("a host has a match"))
    }

    /// Match `id`'s server.
    pub fn match_server(&self, id: MatchId) -> Option<&Server<I>> {
        self.matches.get(&id)
    }

    /// Every match's server, by id: step them on as many threads as the game likes (each
    /// is its own world), then [`GameServer::transmit`].
    pub fn matches_mut(&mut self) -> impl Iterator<Item = (MatchId, &mut Server<I>)> {
        self.matches.iter_mut().map(|(&id, s)| (id, s))
    }

    /// The match client `client` plays in.
    pub fn match_of(&self, client: ClientId) -> Option<MatchId> {
        self.client_match.get(&client).copied()
    }

    /// Ends match `id` and starts `fresh` in its place (a new `Server`, so nothing of the
    /// old match stays): its clients are disconnected (their
    /// [`SessionEvent::Disconnected`] come with [`LeaveReason::MatchEnded`]). Returns the
    /// old server; `None` (and `fresh` dropped) if no such match is hosted.
    pub fn restart_match(&mut self, id: MatchId, mut fresh: Server<I>) -> Option<Server<I>> {
        if !self.matches.contains_key(&id) {
            return None;
        }
        // Without randomness the match keeps the instance its server was built with.
        let _ = name_instance(&mut fresh);
        let clients: Vec<ClientId> = self
            .client_match
            .iter()
            .filter(|(_, m)| **m == id)
            .map(|(c, _)| *c)
            .collect();
        for client in clients {
            self.drop_client(client, LeaveReason::MatchEnded);
            // Gone already: nothing to do.
            let _ = self.udp.disconnect(client);
        }
        self.matches.insert(id, fresh)
    }

    /// Drops a client from which no game packet came for `timeout` (`None`: never),
    /// [`DEFAULT_IDLE_TIMEOUT`] unless set: its connection may live on netcode.io's
    /// keep-alives while its game sends nothing. It leaves with [`LeaveReason::Idle`], and
    /// is told why ([`Control::Idle`]; a [`GameClient`](super::GameClient) ends with
    /// [`SessionError::Idle`](super::SessionError::Idle)). Counted from when it
    /// connected, so keep it longer than clients take to start playing.
    pub fn set_idle_timeout(&mut self, timeout: Option<Duration>) {
        self.idle_timeout = timeout;
    }

    /// Keeps a client whose connection timed out in its match for `grace` (`None`, the
    /// default: it leaves at once, as before): its player, its core session (inputs,
    /// acknowledgements, queued reliable messages) and its replication state wait, and a
    /// fresh token for the same client id, from any address, takes it back where it was
    /// ([`SessionEvent::Away`], [`SessionEvent::Resumed`];
    /// [`GameClient::resume`](super::GameClient::resume)): an app frozen in the background,
    /// or a phone that changed networks once its old connection timed out. Off by
    /// default because the game must then keep (or freeze) a player whose client is gone.
    ///
    /// With a grace period, a fresh token for a client id still connected from another
    /// address replaces that connection at once (`UdpServer::set_replace_connected`), so
    /// a client that changed networks resumes without waiting for its old connection to
    /// time out.
    pub fn set_resume_grace(&mut self, grace: Option<Duration>) {
        self.resume_grace = grace;
        self.udp.set_replace_connected(grace.is_some());
    }

    /// The idle timeout in force ([`GameServer::set_idle_timeout`]).
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Stops admitting new clients (`false`) or admits them again; the connected play on.
    /// A server draining before it exits turns this off.
    pub fn set_accepting(&mut self, accepting: bool) {
        self.udp.set_accepting(accepting);
    }

    /// The transport (its counters, the netcode.io server).
    pub fn transport(&self) -> &UdpServer {
        &self.udp
    }

    /// Ids of the clients in the game, every match (refused ones are not; away ones,
    /// waiting for a resume, are: [`SessionEvent::Away`]).
    pub fn clients(&self) -> Vec<ClientId> {
        self.client_match.keys().copied().collect()
    }

    /// The hello a connecting client checks its settings against, saying whether the
    /// connection took an away client's place back, and the id the client learns itself by.
    fn hello(&self, resumed: bool, client: ClientId) -> Control {
        let config = self.server().session().config();
        Control::Hello {
            tick_hz: config.tick_hz,
            snapshot_interval: config.snapshot_interval,
            resumed,
            client,
        }
    }

    fn push(&mut self, event: SessionEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.counts.events_dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Reads the socket; connects and disconnects clients in the [`Server`] (queuing a
    /// [`SessionEvent`] for each); hands it their packets; refuses clients at another tick
    /// rate; advances its clock to [`GameServer::now`]. Then run the ticks due.
    pub fn update(&mut self) {
        self.udp.update();
        let now = self.udp.now();
        while let Some(event) = self.udp.poll_event() {
            match event {
                ConnectionEvent::Connected { client_id, addr } => self.join(client_id, addr),
                ConnectionEvent::Disconnected { client_id, reason } => {
                    self.leave(client_id, reason)
                }
            }
        }
        let received: Vec<(u64, Vec<u8>)> = self.udp.recv().collect();
        for (client, bytes) in received {
            if self.refusing.contains_key(&client) {
                continue;
            }
            let Some(server) = self
                .client_match
                .get(&client)
                .and_then(|m| self.matches.get_mut(m))
            else {
                continue;
            };
            self.last_game_packet.insert(client, now);
            if let Err(e) = server.receive(client, now, &bytes) {
                self.counts.refused.count(&e);
                if let NetError::Protocol(ProtocolError::TickRateMismatch { ours, theirs }) = e {
                    self.refuse(
                        client,
                        now,
                        Mismatch::TickRate {
                            server: ours,
                            client: theirs,
                        },
                    );
                }
            }
        }
        // Clients send nothing on the reliable channel.
        self.counts.malformed_payloads += self.udp.recv_reliable().count() as u64;
        let expired: Vec<ClientId> = self
            .away
            .iter()
            .filter(|&(_, &since)| {
                self.resume_grace
                    .is_none_or(|g| now.saturating_sub(since) >= g)
            })
            .map(|(&id, _)| id)
            .collect();
        for client in expired {
            self.drop_client(client, LeaveReason::TimedOut);
        }
        if let Some(timeout) = self.idle_timeout {
            let idle: Vec<ClientId> = self
                .last_game_packet
                .iter()
                .filter(|&(_, &at)| now.saturating_sub(at) > timeout)
                .map(|(&id, _)| id)
                .collect();
            for client in idle {
                self.drop_idle(client, now, timeout);
            }
        }
        let done: Vec<ClientId> = self
            .refusing
            .iter()
            .filter(|&(&id, &since)| {
                self.udp.reliable_unacked(id).is_none_or(|n| n == 0)
                    || now.saturating_sub(since) >= REFUSAL_GRACE
            })
            .map(|(&id, _)| id)
            .collect();
        for id in done {
            // Gone already: its disconnect event clears it.
            if self.udp.disconnect(id).is_err() {
                self.refusing.remove(&id);
            }
        }
        let elapsed = now.saturating_sub(self.last_update);
        self.last_update = now;
        for server in self.matches.values_mut() {
            server.update(now);
        }
        self.clock.accumulate(elapsed);
        while self.clock.pop_tick().is_some() {}
        if now.saturating_sub(self.last_second.0) >= Duration::from_secs(1) {
            let total = self.stats();
            let second = total.since(&self.last_second.1);
            self.last_second = (now, total);
            self.push(SessionEvent::Second(second));
        }
    }

    /// The match a newly connected client asked for: match 0 unless routed by tokens.
    fn wanted_match(&self, client: ClientId) -> Option<MatchId> {
        if !self.routed {
            return Some(0);
        }
        let slot = self.udp.client_index(client)?;
        let data = self.udp.netcode().user_data(slot)?;
        let id = match_of_user_data(data);
        self.matches.contains_key(&id).then_some(id)
    }

    fn join(&mut self, client: ClientId, addr: SocketAddr) {
        if let Some(since) = self.away.remove(&client) {
            if let Some(&match_id) = self.client_match.get(&client) {
                self.resume(client, addr, match_id, since);
                return;
            }
        }
        let Some(id) = self.wanted_match(client) else {
            self.counts.no_such_match += 1;
            let _ = self.udp.disconnect(client);
            return;
        };
        let Some(server) = self.matches.get_mut(&id) else {
            return;
        };
        if server.connect(client).is_err() {
            // The transport admits one connection per id, so the Server knows it only if
            // the game connected it itself: this connection cannot be told apart from it.
            let _ = self.udp.disconnect(client);
            return;
        }
        self.client_match.insert(client, id);
        self.last_game_packet.insert(client, self.udp.now());
        // A fresh connection's channel has room: this cannot fail.
        let _ = self
            .udp
            .send_reliable(client, &self.hello(false, client).encode());
        self.counts.connects += 1;
        self.push(SessionEvent::Connected {
            client,
            addr,
            match_id: id,
        });
    }

    fn leave(&mut self, client: ClientId, reason: DisconnectReason) {
        // A refused client left the game when it was refused.
        if self.refusing.remove(&client).is_some() {
            return;
        }
        // A timeout is what a frozen app or a lost path looks like, a replacement what a
        // new path looks like: with a grace period the client keeps its place for a while.
        let path_lost = matches!(
            reason,
            DisconnectReason::TimedOut | DisconnectReason::Replaced
        );
        if let (true, Some(_), Some(&match_id)) =
            (path_lost, self.resume_grace, self.client_match.get(&client))
        {
            self.last_game_packet.remove(&client);
            self.away.insert(client, self.udp.now());
            self.push(SessionEvent::Away { client, match_id });
            return;
        }
        let reason = match reason {
            DisconnectReason::TimedOut | DisconnectReason::Replaced => LeaveReason::TimedOut,
            DisconnectReason::ClientDisconnected => LeaveReason::Left,
            DisconnectReason::ServerDisconnected => LeaveReason::Kicked,
        };
        self.drop_client(client, reason);
    }

    /// Takes `client` out of its match, counting why, and queues its
    /// [`SessionEvent::Disconnected`]; nothing for a client in no match.
    /// Takes an away client back on its new connection: nothing of its session is
    /// reset, since the client's own goes on too; it is only told the hello again.
    fn resume(&mut self, client: ClientId, addr: SocketAddr, match_id: MatchId, since: Duration) {
        let now = self.udp.now();
        self.last_game_packet.insert(client, now);
        // A fresh connection's channel has room: this cannot fail.
        let _ = self
            .udp
            .send_reliable(client, &self.hello(true, client).encode());
        self.counts.resumes += 1;
        self.push(SessionEvent::Resumed {
            client,
            addr,
            match_id,
            away: now.saturating_sub(since),
        });
    }

    fn drop_client(&mut self, client: ClientId, reason: LeaveReason) {
        self.last_game_packet.remove(&client);
        self.away.remove(&client);
        let Some(id) = self.client_match.remove(&client) else {
            return;
        };
        let counters = self
            .matches
            .get_mut(&id)
            .and_then(|s| s.disconnect(client))
            .unwrap_or_default();
        self.counts.disconnects += 1;
        match reason {
            LeaveReason::TimedOut => self.counts.timeouts += 1,
            LeaveReason::Refused(_) => self.counts.refusals += 1,
            LeaveReason::Idle(_) => self.counts.idle += 1,
            _ => {}
        }
        self.push(SessionEvent::Disconnected {
            client,
            match_id: id,
            reason,
            counters: Box::new(counters),
        });
    }

    /// Takes `client` out of the game now and tells it why; its connection stays until it
    /// has read the refusal, so the message is not lost to the disconnect.
    fn refuse(&mut self, client: ClientId, now: Duration, mismatch: Mismatch) {
        self.drop_client(client, LeaveReason::Refused(mismatch));
        self.refusing.insert(client, now);
        let _ = self
            .udp
            .send_reliable(client, &Control::Refused(mismatch).encode());
    }

    /// Takes `client` out of the game for sending no game packet for `timeout`, and tells
    /// it why; as for a refusal, its connection stays until it has read the message.
    fn drop_idle(&mut self, client: ClientId, now: Duration, timeout: Duration) {
        self.drop_client(client, LeaveReason::Idle(timeout));
        self.refusing.insert(client, now);
        let _ = self
            .udp
            .send_reliable(client, &Control::Idle(timeout).encode());
    }

    /// Sends `client` one of the game's own messages on the transport's reliable channel
    /// (a [`Control::Game`]): ordered, resent until acknowledged, and read by
    /// [`GameClient::poll_control`](super::GameClient::poll_control) even before the
    /// client plays, so it suits what a client needs to build its world (the map, the
    /// player it drives). In-game messages go through the [`Server`]'s own channel.
    pub fn send_control(&mut self, client: ClientId, bytes: &[u8]) -> Result<(), TransportError> {
        self.udp
            .send_reliable(client, &Control::Game(bytes.to_vec()).encode())
    }

    /// The next connect, leave or second.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// Sends what the [`Server`] has queued.
    pub fn transmit(&mut self) {
        for server in self.matches.values_mut() {
            while let Some((client, bytes)) = server.poll_transmit() {
                // Lost with the client's path; its session resends what matters.
                if self.away.contains_key(&client) {
                    continue;
                }
                if self.udp.send(client, &bytes).is_err() {
                    self.counts.send_failures += 1;
                }
            }
        }
    }

    /// When the loop must run again, on [`GameServer::now`]'s clock: the next tick, or
    /// sooner for the transport's timers and the once-a-second event; the last update's
    /// time when ticks are still waiting to be run.
    pub fn next_deadline(&self) -> Duration {
        if self
            .matches
            .values()
            .any(|m| m.current_tick() < self.clock.next_tick())
        {
            return self.last_update;
        }
        let period = self.clock.rate().period();
        let tick = self.last_update + period.saturating_sub(period.mul_f64(self.clock.alpha()));
        tick.min(self.last_second.0 + Duration::from_secs(1))
            .min(self.last_update + MAX_WAIT)
    }

    /// Sleeps until [`GameServer::next_deadline`] or until a datagram arrives, whichever
    /// comes first.
    pub fn wait(&self) {
        self.wait_until(self.next_deadline());
    }

    /// Sleeps until `deadline` (on [`GameServer::now`]'s clock) or until a datagram
    /// arrives, whichever comes first.
    pub fn wait_until(&self, deadline: Duration) {
        self.udp.wait(deadline.saturating_sub(self.now()));
    }

    /// Disconnects a client (redundant disconnect packets go out now); its
    /// [`SessionEvent::Disconnected`] comes with the next update.
    pub fn disconnect(&mut self, client: ClientId) -> Result<(), TransportError> {
        self.udp.disconnect(client)
    }

    /// Disconnects everyone (redundant disconnect packets go out now), queuing their
    /// [`SessionEvent::Disconnected`].
    pub fn shutdown(&mut self) {
        self.transmit();
        self.udp.shutdown();
        while let Some(event) = self.udp.poll_event() {
            if let ConnectionEvent::Disconnected { client_id, reason } = event {
                self.leave(client_id, reason);
            }
        }
        self.refusing.clear();
        // Those waiting for a resume have no connection left to end: they leave too.
        let away: Vec<ClientId> = self.away.keys().copied().collect();
        for client in away {
            self.drop_client(client, LeaveReason::Kicked);
        }
    }

    /// Stops hosting and hands back the game's server (the first match's), with its
    /// counters (call [`GameServer::shutdown`] first to let the clients know).
    pub fn into_server(self) -> Server<I> {
        self.into_matches()
            .into_iter()
            .next()
            .map(|(_, s)| s)
            .unwrap_or_else(|| unreachable!("a host has a match"))
    }

    /// Stops hosting and hands back every match's server, by id.
    pub fn into_matches(self) -> BTreeMap<MatchId, Server<I>> {
        self.matches
    }

    /// The counters since the server started.
    pub fn stats(&self) -> SessionStats {
        let io = self.udp.stats();
        SessionStats {
            clients: self.client_match.len(),
            datagrams_in: io.datagrams_received,
            bytes_in: io.bytes_received,
            datagrams_out: io.datagrams_sent,
            bytes_out: io.bytes_sent,
            netcode_drops: self.udp.netcode().stats().drops.iter().collect(),
            queue_drops: io.queue_dropped,
            malformed_payloads: self.counts.malformed_payloads + io.malformed_payloads,
            io_errors: io.io_errors,
            ..self.counts.clone()
        }
    }
}
