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
    },
    /// A client left and is out of the [`Server`]: despawn what it had.
    Disconnected {
        /// Its id.
        client: ClientId,
        /// Why.
        reason: LeaveReason,
        /// Its counters over the connection (packets, inputs, bytes), for the game's logs
        /// and totals.
        counters: Box<DepartedClient>,
    },
    /// Once a second: the counters over the last second ([`SessionStats::clients`] is the
    /// count at its end).
    Second(SessionStats),
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
            NetError::Protocol(ProtocolError::TickOutOfRange) => &mut self.tick_out_of_range,
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
    server: Server<I>,
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
}

impl<I: Input> GameServer<I> {
    /// Binds `addr` (port 0 picks one) and hosts `server` there.
    pub fn bind(
        addr: SocketAddr,
        settings: ServerSettings,
        server: Server<I>,
    ) -> Result<Self, TransportError> {
        let udp = UdpServer::bind(addr, settings)?;
        let config = server.session().config();
        let clock = FixedTimestep::new(
            TickRate::new(config.tick_hz),
            server.current_tick(),
            config.max_backlog_ticks,
        );
        Ok(Self {
            udp,
            server,
            events: VecDeque::new(),
            refusing: BTreeMap::new(),
            clock,
            last_update: Duration::ZERO,
            counts: SessionStats::default(),
            last_second: (Duration::ZERO, SessionStats::default()),
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

    /// The game's server.
    pub fn server(&self) -> &Server<I> {
        &self.server
    }

    /// The game's server, to step the world and write its state.
    pub fn server_mut(&mut self) -> &mut Server<I> {
        &mut self.server
    }

    /// The transport (its counters, the netcode.io server).
    pub fn transport(&self) -> &UdpServer {
        &self.udp
    }

    /// Ids of the clients in the game (refused ones are not).
    pub fn clients(&self) -> Vec<ClientId> {
        self.server.session().clients().collect()
    }

    /// The hello a connecting client checks its settings against.
    fn hello(&self) -> Control {
        let config = self.server.session().config();
        Control::Hello {
            tick_hz: config.tick_hz,
            snapshot_interval: config.snapshot_interval,
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
            if let Err(e) = self.server.receive(client, now, &bytes) {
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
        self.server.update(now);
        self.clock.accumulate(elapsed);
        while self.clock.pop_tick().is_some() {}
        if now.saturating_sub(self.last_second.0) >= Duration::from_secs(1) {
            let total = self.stats();
            let second = total.since(&self.last_second.1);
            self.last_second = (now, total);
            self.push(SessionEvent::Second(second));
        }
    }

    fn join(&mut self, client: ClientId, addr: SocketAddr) {
        if self.server.connect(client).is_err() {
            // The transport admits one connection per id, so the Server knows it only if
            // the game connected it itself: this connection cannot be told apart from it.
            let _ = self.udp.disconnect(client);
            return;
        }
        // A fresh connection's channel has room: this cannot fail.
        let _ = self.udp.send_reliable(client, &self.hello().encode());
        self.counts.connects += 1;
        self.push(SessionEvent::Connected { client, addr });
    }

    fn leave(&mut self, client: ClientId, reason: DisconnectReason) {
        // A refused client left the game when it was refused.
        if self.refusing.remove(&client).is_some() {
            return;
        }
        let Some(counters) = self.server.disconnect(client) else {
            return;
        };
        self.counts.disconnects += 1;
        let reason = match reason {
            DisconnectReason::TimedOut => {
                self.counts.timeouts += 1;
                LeaveReason::TimedOut
            }
            DisconnectReason::ClientDisconnected => LeaveReason::Left,
            DisconnectReason::ServerDisconnected => LeaveReason::Kicked,
        };
        self.push(SessionEvent::Disconnected {
            client,
            reason,
            counters: Box::new(counters),
        });
    }

    /// Takes `client` out of the game now and tells it why; its connection stays until it
    /// has read the refusal, so the message is not lost to the disconnect.
    fn refuse(&mut self, client: ClientId, now: Duration, mismatch: Mismatch) {
        let counters = self.server.disconnect(client).unwrap_or_default();
        self.refusing.insert(client, now);
        let _ = self
            .udp
            .send_reliable(client, &Control::Refused(mismatch).encode());
        self.counts.disconnects += 1;
        self.counts.refusals += 1;
        self.push(SessionEvent::Disconnected {
            client,
            reason: LeaveReason::Refused(mismatch),
            counters: Box::new(counters),
        });
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
        while let Some((client, bytes)) = self.server.poll_transmit() {
            if self.udp.send(client, &bytes).is_err() {
                self.counts.send_failures += 1;
            }
        }
    }

    /// When the loop must run again, on [`GameServer::now`]'s clock: the next tick, or
    /// sooner for the transport's timers and the once-a-second event; the last update's
    /// time when ticks are still waiting to be run.
    pub fn next_deadline(&self) -> Duration {
        if self.server.current_tick() < self.clock.next_tick() {
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
    }

    /// Stops hosting and hands back the game's server, with its counters (call
    /// [`GameServer::shutdown`] first to let the clients know).
    pub fn into_server(self) -> Server<I> {
        self.server
    }

    /// The counters since the server started.
    pub fn stats(&self) -> SessionStats {
        let io = self.udp.stats();
        SessionStats {
            clients: self.server.session().clients().count(),
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
