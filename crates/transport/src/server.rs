//! [`UdpServer`]: a netcode.io server on a `std::net::UdpSocket`.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lagless_netcode::{DisconnectReason, Key, Server, ServerConfig, ServerEvent};

use crate::reliable::{ChannelConfig, ReliableChannel};
use crate::{TAG_RELIABLE, TAG_UNRELIABLE, TransportError, keys, unreliable_packet};

/// What a [`UdpServer`] needs.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// The private key tokens are encrypted with.
    pub private_key: Key,
    /// Client slots.
    pub max_clients: usize,
    /// Addresses clients may be told to reach in their tokens (a proxy's, a NAT's), beside
    /// the bound address, which is always accepted.
    pub public_addresses: Vec<SocketAddr>,
    /// Reliable channel settings (per client).
    pub channel: ChannelConfig,
    /// Most datagrams read per [`UdpServer::update`] (bounds the work a flood can cause).
    pub max_datagrams_per_update: usize,
}

impl ServerSettings {
    /// Settings with default channel and limits.
    pub fn new(protocol_id: u64, private_key: Key, max_clients: usize) -> Self {
        Self {
            protocol_id,
            private_key,
            max_clients,
            public_addresses: Vec::new(),
            channel: ChannelConfig::default(),
            max_datagrams_per_update: 64 * max_clients.max(1),
        }
    }
}

/// A connection change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// A client connected.
    Connected {
        /// The id from its token.
        client_id: u64,
        /// Its address.
        addr: SocketAddr,
    },
    /// A client left.
    Disconnected {
        /// The id from its token.
        client_id: u64,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Counters of the IO layer (the protocol's are in [`Server::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Datagrams read from the socket.
    pub datagrams_received: u64,
    /// Datagrams written to the socket.
    pub datagrams_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Socket errors on send or receive (other than "would block").
    pub io_errors: u64,
    /// Authenticated payloads with an unknown channel tag or a malformed channel packet.
    pub malformed_payloads: u64,
    /// Received payloads or messages dropped because the application did not drain
    /// them (at most 256 per client are kept).
    pub queue_dropped: u64,
}

impl TransportStats {
    /// Writes one datagram to `socket`, counting it or the error.
    pub(crate) fn send(&mut self, socket: &UdpSocket, data: &[u8], to: SocketAddr) {
        match socket.send_to(data, to) {
            Ok(n) => {
                self.datagrams_sent += 1;
                self.bytes_sent += n as u64;
            }
            Err(_) => self.io_errors += 1,
        }
    }
}

/// A netcode.io server on a non-blocking UDP socket, with a real clock: unreliable payloads
/// and a reliable-ordered channel per client.
///
/// Call [`UdpServer::update`] once per frame, then drain [`UdpServer::poll_event`],
/// [`UdpServer::recv`] and [`UdpServer::recv_reliable`].
pub struct UdpServer {
    socket: UdpSocket,
    netcode: Server,
    start: Instant,
    channel_config: ChannelConfig,
    max_datagrams: usize,
    queue_limit: usize,
    channels: HashMap<u64, (usize, ReliableChannel)>,
    unreliable: VecDeque<(u64, Vec<u8>)>,
    reliable: VecDeque<(u64, Vec<u8>)>,
    events: VecDeque<ConnectionEvent>,
    stats: TransportStats,
    buf: Vec<u8>,
}

impl UdpServer {
    /// Binds `addr` (port 0 picks one) and starts a server.
    pub fn bind(addr: SocketAddr, settings: ServerSettings) -> Result<Self, TransportError> {
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        // The bound address is always one the server answers for; a proxy's address in
        // front of it (or a NAT's) comes on top.
        let mut public_addresses = settings.public_addresses;
        if !public_addresses.contains(&local) {
            public_addresses.insert(0, local);
        }
        let config = ServerConfig {
            protocol_id: settings.protocol_id,
            private_key: settings.private_key,
            max_clients: settings.max_clients,
            public_addresses,
        };
        let start = Instant::now();
        let netcode = Server::new(
            config,
            keys::random_key()?,
            Duration::ZERO,
            keys::unix_now(),
        )?;
        Ok(Self {
            socket,
            netcode,
            start,
            channel_config: settings.channel,
            max_datagrams: settings.max_datagrams_per_update.max(1),
            queue_limit: settings.max_clients.max(1) * lagless_netcode::PACKET_QUEUE_SIZE,
            channels: HashMap::new(),
            unreliable: VecDeque::new(),
            reliable: VecDeque::new(),
            events: VecDeque::new(),
            stats: TransportStats::default(),
            buf: vec![0; 2048],
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.socket.local_addr()?)
    }

    /// The protocol state machine (its stats, clients, drops).
    pub fn netcode(&self) -> &Server {
        &self.netcode
    }

    /// Admits new clients (the default) or denies them as if full; the connected ones
    /// play on ([`Server::set_accepting`]).
    pub fn set_accepting(&mut self, accepting: bool) {
        self.netcode.set_accepting(accepting);
    }

    /// Lets a fresh token for a connected client id, from another address, replace that
    /// connection instead of being refused (netcode.io's
    /// [`Server::set_replace_connected`]): off by default.
    pub fn set_replace_connected(&mut self, replace: bool) {
        self.netcode.set_replace_connected(replace);
    }

    /// IO counters.
    pub fn stats(&self) -> &TransportStats {
        &self.stats
    }

    /// Time since the server started.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Reads what arrived, runs timeouts and keep-alives, resends reliable messages and
    /// writes everything due.
    pub fn update(&mut self) {
        let now = self.now();
        for _ in 0..self.max_datagrams {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.stats.datagrams_received += 1;
                    self.stats.bytes_received += n as u64;
                    let _ = self.netcode.handle_packet(now, from, &self.buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    // ICMP errors surface here on some systems; keep reading.
                    self.stats.io_errors += 1;
                }
            }
        }
        self.netcode.update(now);
        self.drain_netcode_events();
        let ids: Vec<u64> = self.channels.keys().copied().collect();
        for id in ids {
            self.flush_channel(id, now);
        }
        self.flush();
    }

    fn drain_netcode_events(&mut self) {
        while let Some(event) = self.netcode.poll_event() {
            match event {
                ServerEvent::Connected {
                    client_index,
                    client_id,
                    addr,
                    ..
                } => {
                    self.channels.insert(
                        client_id,
                        (
                            client_index,
                            ReliableChannel::new(self.channel_config.clone()),
                        ),
                    );
                    self.events
                        .push_back(ConnectionEvent::Connected { client_id, addr });
                }
                ServerEvent::Disconnected {
                    client_id, reason, ..
                } => {
                    self.channels.remove(&client_id);
                    self.events
                        .push_back(ConnectionEvent::Disconnected { client_id, reason });
                }
                ServerEvent::Payload {
                    client_id, payload, ..
                } => match payload.split_first() {
                    Some((&TAG_UNRELIABLE, rest)) if !rest.is_empty() => {
                        if self.unreliable.len() >= self.queue_limit {
                            self.stats.queue_dropped += 1;
                        } else {
                            self.unreliable.push_back((client_id, rest.to_vec()));
                        }
                    }
                    Some((&TAG_RELIABLE, rest)) => {
                        let Some((_, channel)) = self.channels.get_mut(&client_id) else {
                            continue;
                        };
                        if channel.handle_packet(rest).is_err() {
                            self.stats.malformed_payloads += 1;
                        }
                        while self.reliable.len() < self.queue_limit {
                            let Some(m) = channel.recv() else { break };
                            self.reliable.push_back((client_id, m));
                        }
                    }
                    _ => self.stats.malformed_payloads += 1,
                },
            }
        }
    }

    fn flush_channel(&mut self, client_id: u64, now: Duration) {
        let Some((index, channel)) = self.channels.get_mut(&client_id) else {
            return;
        };
        let index = *index;
        while let Some(packet) = channel.poll_packet(now) {
            let mut payload = Vec::with_capacity(packet.len() + 1);
            payload.push(TAG_RELIABLE);
            payload.extend_from_slice(&packet);
            let _ = self.netcode.send_payload(index, &payload);
        }
    }

    fn flush(&mut self) {
        while let Some(t) = self.netcode.poll_transmit() {
            self.stats.send(&self.socket, &t.data, t.addr);
        }
    }

    /// The next connect or disconnect.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// Drains the unreliable payloads received, as `(client_id, payload)`.
    pub fn recv(&mut self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        self.unreliable.drain(..)
    }

    /// Drains the reliable messages received, in order per client.
    pub fn recv_reliable(&mut self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        self.reliable.drain(..)
    }

    fn index_of(&self, client_id: u64) -> Result<usize, TransportError> {
        self.channels
            .get(&client_id)
            .map(|(i, _)| *i)
            .ok_or(TransportError::UnknownClient(client_id))
    }

    /// Sends an unreliable payload (1 to [`crate::MAX_UNRELIABLE_BYTES`] bytes) now.
    pub fn send(&mut self, client_id: u64, payload: &[u8]) -> Result<(), TransportError> {
        let index = self.index_of(client_id)?;
        let packet = unreliable_packet(payload)?;
        self.netcode.send_payload(index, &packet)?;
        self.flush();
        Ok(())
    }

    /// Queues a reliable message; it goes out on the next [`UdpServer::update`] and is
    /// resent until acknowledged.
    pub fn send_reliable(&mut self, client_id: u64, message: &[u8]) -> Result<(), TransportError> {
        let (_, channel) = self
            .channels
            .get_mut(&client_id)
            .ok_or(TransportError::UnknownClient(client_id))?;
        channel.send(message)?;
        Ok(())
    }

    /// Disconnects a client (redundant disconnect packets go out now).
    pub fn disconnect(&mut self, client_id: u64) -> Result<(), TransportError> {
        let index = self.index_of(client_id)?;
        self.netcode.disconnect(index)?;
        self.drain_netcode_events();
        self.flush();
        Ok(())
    }

    /// Disconnects everyone, for a clean shutdown.
    pub fn shutdown(&mut self) {
        self.netcode.disconnect_all();
        self.drain_netcode_events();
        self.flush();
    }

    /// The slot (`0..max_clients`) a connected client holds, as netcode.io numbers it
    /// (`client_index` in its keep-alives); slots are reused after a client leaves.
    pub fn client_index(&self, client_id: u64) -> Option<usize> {
        self.channels.get(&client_id).map(|(i, _)| *i)
    }

    /// Reliable messages queued for a connected client and not yet acknowledged by it
    /// (`None` for an unknown client): zero means everything sent has arrived, so a server
    /// can disconnect a client once it has read a last message.
    pub fn reliable_unacked(&self, client_id: u64) -> Option<usize> {
        self.channels.get(&client_id).map(|(_, c)| c.unacked())
    }

    /// Blocks until a datagram arrives or `timeout` passes, whichever comes first, so a
    /// loop can sleep until its next tick and still read packets as they come. True when
    /// a datagram is waiting for [`UdpServer::update`].
    pub fn wait(&self, timeout: Duration) -> bool {
        crate::wait_readable(&self.socket, timeout)
    }

    /// Ids of the connected clients.
    pub fn clients(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.channels.keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}
