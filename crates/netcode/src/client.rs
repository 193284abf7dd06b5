//! The client's side of netcode.io: the connect state machine, keep-alives, payloads,
//! timeouts and disconnects. Sans-IO: give it bytes and time, take packets out.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{PacketError, SendError};
use crate::packet::{self, ChallengeBody, Packet, PacketType, RequestPacket};
use crate::replay::ReplayProtection;
use crate::token::ConnectToken;
use crate::{
    DropCounters, NUM_DISCONNECT_PACKETS, PACKET_QUEUE_SIZE, PACKET_SEND_INTERVAL, Transmit,
    normalize,
};

/// The client states of netcode.io 1.02; negative ones are errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum ClientState {
    /// The token expired before a connection was made (-6).
    ConnectTokenExpired = -6,
    /// The token could not be read (-5).
    InvalidConnectToken = -5,
    /// Connected, then nothing arrived within the timeout (-4).
    ConnectionTimedOut = -4,
    /// No keep-alive answered the challenge response within the timeout (-3).
    ConnectionResponseTimedOut = -3,
    /// No challenge or denied packet answered the request within the timeout (-2).
    ConnectionRequestTimedOut = -2,
    /// The server is full (-1).
    ConnectionDenied = -1,
    /// Not connected (0).
    Disconnected = 0,
    /// Sending connection requests (1).
    SendingConnectionRequest = 1,
    /// Sending challenge responses (2).
    SendingConnectionResponse = 2,
    /// Connected (3).
    Connected = 3,
}

impl ClientState {
    /// The standard's numeric code (-6 to 3).
    pub fn code(self) -> i8 {
        self as i8
    }

    /// True for the negative (error) states.
    pub fn is_error(self) -> bool {
        (self as i8) < 0
    }

    /// True while connecting (request or response phase).
    pub fn is_connecting(self) -> bool {
        matches!(
            self,
            Self::SendingConnectionRequest | Self::SendingConnectionResponse
        )
    }
}

/// Counters of what the client received, sent and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Packets given to [`Client::handle_packet`].
    pub packets_received: u64,
    /// Packets accepted.
    pub packets_accepted: u64,
    /// Packets queued for sending.
    pub packets_sent: u64,
    /// Received packets dropped, by reason.
    pub drops: DropCounters,
}

/// A netcode.io 1.02 client, without sockets or clocks.
///
/// Created from a connect token, it sends requests to the first server address at once;
/// call [`Client::update`] every frame, feed it every datagram with
/// [`Client::handle_packet`], send what [`Client::poll_transmit`] returns (to
/// [`Client::server_addr`]) and read payloads with [`Client::recv`].
///
/// # The handshake under a flood
///
/// While it answers a challenge, the client sends its connection request again just
/// ahead of each challenge response (both standard netcode.io 1.02 packets, 10 times a
/// second). The server needs the token's packet keys to read a response, and it can only
/// learn them from a request: keeping them from the first request until the response
/// comes a round trip later is state a flood of valid requests from many addresses can
/// push out of the server's bounded table first. With the request right ahead of it, the
/// response needs the keys for the microseconds between the two datagrams, not for a
/// round trip. A server with the keys still held just challenges again (this client
/// ignores a second challenge); the reference server does the same.
pub struct Client {
    token: Option<ConnectToken>,
    state: ClientState,
    server_index: usize,
    server_addr: Option<SocketAddr>,
    sequence: u64,
    now: Duration,
    connect_start: Duration,
    last_send: Option<Duration>,
    last_receive: Duration,
    challenge: Option<ChallengeBody>,
    client_index: u32,
    max_clients: u32,
    replay: ReplayProtection,
    pending_state: Option<ClientState>,
    transmits: VecDeque<Transmit>,
    payloads: VecDeque<Vec<u8>>,
    stats: ClientStats,
}

impl Client {
    /// A client for a 2048-byte connect token, starting to connect at `now`. An unreadable
    /// token leaves it in [`ClientState::InvalidConnectToken`].
    pub fn new(token_bytes: &[u8], now: Duration) -> Self {
        match ConnectToken::read(token_bytes) {
            Ok(token) => Self::from_token(token, now),
            Err(_) => Self::blank(now, ClientState::InvalidConnectToken),
        }
    }

    /// A client for a decoded token, starting to connect at `now`.
    pub fn from_token(token: ConnectToken, now: Duration) -> Self {
        let valid = !token.server_addresses.is_empty()
            && token.server_addresses.len() <= crate::MAX_SERVERS_PER_CONNECT
            && token.create_timestamp <= token.expire_timestamp;
        if !valid {
            return Self::blank(now, ClientState::InvalidConnectToken);
        }
        let mut c = Self::blank(now, ClientState::SendingConnectionRequest);
        c.server_addr = token.server_addresses.first().copied().map(normalize);
        c.token = Some(token);
        c
    }

    fn blank(now: Duration, state: ClientState) -> Self {
        Self {
            token: None,
            state,
            server_index: 0,
            server_addr: None,
            sequence: 0,
            now,
            connect_start: now,
            last_send: None,
            last_receive: now,
            challenge: None,
            client_index: 0,
            max_clients: 0,
            replay: ReplayProtection::new(),
            pending_state: None,
            transmits: VecDeque::new(),
            payloads: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    /// The current state.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// True when connected.
    pub fn is_connected(&self) -> bool {
        self.state == ClientState::Connected
    }

    /// The server address being tried (or connected to).
    pub fn server_addr(&self) -> Option<SocketAddr> {
        self.server_addr
    }

    /// The slot the server gave this client (valid once connected).
    pub fn client_index(&self) -> u32 {
        self.client_index
    }

    /// The server's number of slots (valid once connected).
    pub fn max_clients(&self) -> u32 {
        self.max_clients
    }

    /// The connect token in use.
    pub fn token(&self) -> Option<&ConnectToken> {
        self.token.as_ref()
    }

    /// Counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    fn timeout(&self) -> Option<Duration> {
        let t = self.token.as_ref()?.timeout_seconds;
        (t > 0).then(|| Duration::from_secs(t as u64))
    }

    fn send(&mut self, packet: &Packet) {
        let (Some(token), Some(addr)) = (&self.token, self.server_addr) else {
            return;
        };
        let seq = self.sequence;
        if let Ok(data) = packet.write(seq, &token.client_to_server_key, token.protocol_id) {
            self.sequence = self.sequence.wrapping_add(1);
            if self.transmits.len() < PACKET_QUEUE_SIZE {
                self.transmits.push_back(Transmit { addr, data });
                self.stats.packets_sent += 1;
            }
        }
        self.last_send = Some(self.now);
    }

    fn send_request(&mut self) {
        if let Some(token) = &self.token {
            let p = Packet::Request(RequestPacket {
                protocol_id: token.protocol_id,
                expire_timestamp: token.expire_timestamp,
                nonce: token.nonce,
                private_data: Box::new(token.private_data),
            });
            self.send(&p);
        }
    }

    fn reset_for_next_server(&mut self) {
        self.connect_start = self.now;
        self.last_send = None;
        self.last_receive = self.now;
        self.pending_state = None;
        self.challenge = None;
        self.replay = ReplayProtection::new();
    }

    fn connect_to_next_server(&mut self) -> bool {
        let Some(token) = &self.token else {
            return false;
        };
        let Some(next) = token.server_addresses.get(self.server_index + 1).copied() else {
            return false;
        };
        self.server_index += 1;
        self.server_addr = Some(normalize(next));
        self.reset_for_next_server();
        self.state = ClientState::SendingConnectionRequest;
        true
    }

    fn fail(&mut self, state: ClientState) {
        self.state = state;
        self.payloads.clear();
    }

    /// Advances time: sends requests, responses or keep-alives at 10 Hz and applies the
    /// timeouts and the token's lifetime.
    pub fn update(&mut self, now: Duration) {
        self.now = self.now.max(now);
        let now = self.now;
        let due = self
            .last_send
            .is_none_or(|t| t + PACKET_SEND_INTERVAL < now);
        if due {
            match self.state {
                ClientState::SendingConnectionRequest => self.send_request(),
                ClientState::SendingConnectionResponse => {
                    // The request goes again, just ahead of the response: see "The
                    // handshake under a flood" on [`Client`].
                    self.send_request();
                    if let Some(c) = self.challenge.clone() {
                        self.send(&Packet::Response(c));
                    }
                }
                ClientState::Connected => self.send(&Packet::KeepAlive {
                    client_index: 0,
                    max_clients: 0,
                }),
                _ => {}
            }
        }
        if let (true, Some(token)) = (self.state.is_connecting(), &self.token) {
            let lifetime = token
                .expire_timestamp
                .saturating_sub(token.create_timestamp);
            if now.saturating_sub(self.connect_start) >= Duration::from_secs(lifetime) {
                self.fail(ClientState::ConnectTokenExpired);
                return;
            }
        }
        if let Some(state) = self.pending_state.take() {
            if !self.connect_to_next_server() {
                self.fail(state);
            }
            return;
        }
        let timed_out = self.timeout().is_some_and(|t| self.last_receive + t < now);
        if timed_out {
            let state = match self.state {
                ClientState::SendingConnectionRequest => ClientState::ConnectionRequestTimedOut,
                ClientState::SendingConnectionResponse => ClientState::ConnectionResponseTimedOut,
                ClientState::Connected => {
                    self.fail(ClientState::ConnectionTimedOut);
                    return;
                }
                _ => return,
            };
            if !self.connect_to_next_server() {
                self.fail(state);
            }
        }
    }

    /// Handles one datagram from `from` at `now`. `Err` says why it was dropped (also
    /// counted); nothing here panics, whatever the bytes.
    pub fn handle_packet(
        &mut self,
        now: Duration,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Result<(), PacketError> {
        self.now = self.now.max(now);
        self.stats.packets_received += 1;
        let result = self.process(normalize(from), bytes);
        match result {
            Ok(()) => self.stats.packets_accepted += 1,
            Err(e) => self.stats.drops.add(e),
        }
        result
    }

    fn process(&mut self, from: SocketAddr, bytes: &[u8]) -> Result<(), PacketError> {
        if bytes.first() == Some(&0) {
            return Err(PacketError::TypeNotAllowed);
        }
        let header = packet::read_header(bytes)?;
        if matches!(
            header.packet_type,
            PacketType::Request | PacketType::Response
        ) {
            return Err(PacketError::TypeNotAllowed);
        }
        let (Some(token), Some(server)) = (&self.token, self.server_addr) else {
            return Err(PacketError::UnexpectedInState);
        };
        if from != server {
            return Err(PacketError::UnknownAddress);
        }
        if !(self.state.is_connecting() || self.state == ClientState::Connected) {
            return Err(PacketError::UnexpectedInState);
        }
        let protected = header.packet_type.replay_protected();
        if protected && self.replay.already_received(header.sequence) {
            return Err(PacketError::Replayed);
        }
        let packet = packet::open(
            bytes,
            &header,
            &token.server_to_client_key,
            token.protocol_id,
        )?;
        if protected {
            self.replay.advance(header.sequence);
        }
        let now = self.now;
        match (packet, self.state) {
            (Packet::Denied, s) if s.is_connecting() => {
                self.pending_state = Some(ClientState::ConnectionDenied);
                self.last_receive = now;
            }
            (Packet::Challenge(body), ClientState::SendingConnectionRequest) => {
                self.challenge = Some(body);
                self.last_receive = now;
                self.last_send = None;
                self.state = ClientState::SendingConnectionResponse;
            }
            // The server's answer to a request sent again with a response: the first
            // challenge still answers (the server's challenge key has not changed), so
            // this one changes nothing, not even the response timeout: a server that
            // keeps challenging and never admits must still time out.
            (Packet::Challenge(_), ClientState::SendingConnectionResponse) => {}
            (Packet::KeepAlive { .. }, ClientState::Connected) => self.last_receive = now,
            (
                Packet::KeepAlive {
                    client_index,
                    max_clients,
                },
                ClientState::SendingConnectionResponse,
            ) => {
                self.last_receive = now;
                self.client_index = client_index;
                self.max_clients = max_clients;
                self.last_send = None;
                self.state = ClientState::Connected;
            }
            (Packet::Payload(p), ClientState::Connected) => {
                self.last_receive = now;
                if self.payloads.len() >= PACKET_QUEUE_SIZE {
                    return Err(PacketError::QueueFull);
                }
                self.payloads.push_back(p);
            }
            (Packet::Disconnect, ClientState::Connected) => {
                self.last_receive = now;
                self.fail(ClientState::Disconnected);
            }
            _ => return Err(PacketError::UnexpectedInState),
        }
        Ok(())
    }

    /// Sends a payload (1 to 1200 bytes) to the server; only while connected.
    pub fn send_payload(&mut self, payload: &[u8]) -> Result<(), SendError> {
        if payload.is_empty() || payload.len() > crate::MAX_PAYLOAD_BYTES {
            return Err(SendError::PayloadSize(payload.len()));
        }
        if self.state != ClientState::Connected {
            return Err(SendError::NotConnected);
        }
        self.send(&Packet::Payload(payload.to_vec()));
        Ok(())
    }

    /// Leaves: while connecting or connected, queues 10 redundant disconnect packets and
    /// the state becomes [`ClientState::Disconnected`], as the reference's
    /// `netcode_client_disconnect` does for every state above `DISCONNECTED`. Connecting
    /// counts because the server may already hold a slot for this client: it took one on
    /// the challenge response, and the keep-alive telling the client so may be lost or
    /// still on its way. The disconnect packets free that slot at once instead of at the
    /// token's timeout (a server with no slot for the address drops them). In
    /// [`ClientState::Disconnected`] or an error state it does nothing, as the reference
    /// does: the error stays readable in [`Client::state`].
    pub fn disconnect(&mut self) {
        if !(self.state == ClientState::Connected || self.state.is_connecting()) {
            return;
        }
        for _ in 0..NUM_DISCONNECT_PACKETS {
            self.send(&Packet::Disconnect);
        }
        // A denied packet not yet acted on must not bring back an error state, or a
        // connect to the next server, on the next update.
        self.pending_state = None;
        self.challenge = None;
        self.fail(ClientState::Disconnected);
    }

    /// The next packet to send (to [`Transmit::addr`], the server).
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next payload from the server.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        self.payloads.pop_front()
    }
}
