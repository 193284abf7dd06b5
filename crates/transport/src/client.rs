//! [`UdpClient`]: a netcode.io client on a `std::net::UdpSocket`.

use std::collections::VecDeque;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lagless_netcode::{Client, ClientState, ConnectToken};

use crate::reliable::{ChannelConfig, ReliableChannel};
use crate::server::TransportStats;
use crate::{TAG_RELIABLE, TAG_UNRELIABLE, TransportError, unreliable_packet};

/// The first wait before a handshake is tried again; each later wait doubles, up to
/// [`RETRY_BACKOFF_MAX`].
pub const RETRY_BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between two handshake attempts.
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(4);
/// Time an attempt needs at least, besides the wait before it, for it to be worth
/// starting before the token expires: a few round trips.
const RETRY_MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// Why a [`UdpClient`] stopped trying to connect ([`UdpClient::gave_up`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaveUp {
    /// Handshakes tried, the first included.
    pub attempts: u32,
    /// How the last one ended (a netcode.io error state).
    pub last: ClientState,
    /// Why no other was tried.
    pub why: GaveUpWhy,
}

/// Why a [`UdpClient`] tried no other handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GaveUpWhy {
    /// The server answered: it denied the client (full, or draining). Another token,
    /// for another server, is the way back in, so the client does not wait here.
    Denied,
    /// The token cannot be read, or has expired.
    Token,
    /// The token expires before another attempt, after its wait, could finish.
    NoTimeLeft,
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = match self.last {
            ClientState::ConnectionRequestTimedOut => {
                "no challenge or denial answered the requests within the token's timeout"
            }
            ClientState::ConnectionResponseTimedOut => {
                "challenged, but no keep-alive answered the responses within the token's timeout"
            }
            ClientState::ConnectionDenied => "the server denied the connection (full or draining)",
            ClientState::ConnectTokenExpired => "the connect token expired",
            ClientState::InvalidConnectToken => "the connect token is invalid",
            _ => "the handshake failed",
        };
        let why = match self.why {
            GaveUpWhy::Denied => "a denial is the server's answer",
            GaveUpWhy::Token => "the token is no use any more",
            GaveUpWhy::NoTimeLeft => "the token expires before another attempt could finish",
        };
        write!(
            f,
            "gave up after {} handshake attempt{}: the last ended as {:?} ({last}); no retry: {why}",
            self.attempts,
            if self.attempts == 1 { "" } else { "s" },
            self.last
        )
    }
}

/// A netcode.io client on a non-blocking UDP socket, with a real clock.
///
/// Call [`UdpClient::update`] once per frame; once [`UdpClient::is_connected`], send with
/// [`UdpClient::send`] / [`UdpClient::send_reliable`] and drain [`UdpClient::recv`] /
/// [`UdpClient::recv_reliable`].
///
/// A handshake that times out (no challenge, or no keep-alive, within the token's
/// timeout) is tried again from the same socket, so the server's check that a token
/// comes from one address still passes, after a wait of [`RETRY_BACKOFF_FIRST`] doubling
/// up to [`RETRY_BACKOFF_MAX`], for as long as the token is valid. Meanwhile
/// [`UdpClient::state`] stays [`ClientState::SendingConnectionRequest`]. A denial is not
/// tried again. When it stops, [`UdpClient::state`] is the last attempt's error state and
/// [`UdpClient::gave_up`] says why.
pub struct UdpClient {
    socket: UdpSocket,
    netcode: Client,
    /// The token, for the next attempt.
    token: ConnectToken,
    /// Handshakes started.
    attempts: u32,
    /// When the next attempt starts, while waiting for it.
    retry_at: Option<Duration>,
    gave_up: Option<GaveUp>,
    start: Instant,
    channel_config: ChannelConfig,
    channel: Option<ReliableChannel>,
    unreliable: VecDeque<Vec<u8>>,
    reliable: VecDeque<Vec<u8>>,
    stats: TransportStats,
    buf: Vec<u8>,
}

impl UdpClient {
    /// Starts connecting with a 2048-byte connect token, from an OS-chosen port of the
    /// first server address's family.
    pub fn connect(token_bytes: &[u8]) -> Result<Self, TransportError> {
        let token = ConnectToken::read(token_bytes)?;
        let bind: SocketAddr = match token.server_addresses.first() {
            Some(SocketAddr::V6(_)) => (Ipv6Addr::UNSPECIFIED, 0).into(),
            _ => (Ipv4Addr::UNSPECIFIED, 0).into(),
        };
        Self::connect_from(bind, token)
    }

    /// Starts connecting with a decoded token from a given local address.
    pub fn connect_from(bind: SocketAddr, token: ConnectToken) -> Result<Self, TransportError> {
        let socket = UdpSocket::bind(bind)?;
        socket.set_nonblocking(true)?;
        let start = Instant::now();
        let mut client = Self {
            socket,
            netcode: Client::from_token(token.clone(), Duration::ZERO),
            token,
            attempts: 1,
            retry_at: None,
            gave_up: None,
            start,
            channel_config: ChannelConfig::default(),
            channel: None,
            unreliable: VecDeque::new(),
            reliable: VecDeque::new(),
            stats: TransportStats::default(),
            buf: vec![0; 2048],
        };
        client.update();
        Ok(client)
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.socket.local_addr()?)
    }

    /// The protocol state machine.
    pub fn netcode(&self) -> &Client {
        &self.netcode
    }

    /// IO counters.
    pub fn stats(&self) -> &TransportStats {
        &self.stats
    }

    /// The connection state; [`ClientState::SendingConnectionRequest`] while waiting to
    /// try the handshake again.
    pub fn state(&self) -> ClientState {
        if self.retry_at.is_some() {
            return ClientState::SendingConnectionRequest;
        }
        self.netcode.state()
    }

    /// Handshakes started so far, the first included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Why the client stopped trying to connect, once it has.
    pub fn gave_up(&self) -> Option<GaveUp> {
        self.gave_up
    }

    /// After the state machine's update: starts the next attempt when its wait is over,
    /// or decides whether a failed one is tried again.
    fn retry(&mut self, now: Duration) {
        if let Some(at) = self.retry_at {
            if now >= at {
                self.retry_at = None;
                self.attempts += 1;
                self.netcode = Client::from_token(self.token.clone(), now);
            }
            return;
        }
        let last = self.netcode.state();
        if !last.is_error() || self.gave_up.is_some() {
            return;
        }
        let why = match last {
            ClientState::ConnectionRequestTimedOut | ClientState::ConnectionResponseTimedOut => {
                let wait = RETRY_BACKOFF_FIRST
                    .saturating_mul(1 << self.attempts.saturating_sub(1).min(16))
                    .min(RETRY_BACKOFF_MAX);
                let unix_now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let expires = Duration::from_secs(self.token.expire_timestamp);
                if unix_now + wait + RETRY_MIN_ATTEMPT < expires {
                    self.retry_at = Some(now + wait);
                    return;
                }
                GaveUpWhy::NoTimeLeft
            }
            ClientState::ConnectionDenied => GaveUpWhy::Denied,
            ClientState::ConnectTokenExpired | ClientState::InvalidConnectToken => GaveUpWhy::Token,
            // Connected, then lost: not a handshake to try again.
            _ => return,
        };
        self.gave_up = Some(GaveUp {
            attempts: self.attempts,
            last,
            why,
        });
    }

    /// True when connected.
    pub fn is_connected(&self) -> bool {
        self.netcode.is_connected()
    }

    /// Time since the client started.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Reads what arrived, advances the state machine, resends reliable messages and writes
    /// everything due.
    pub fn update(&mut self) {
        let now = self.now();
        for _ in 0..1024 {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.stats.datagrams_received += 1;
                    self.stats.bytes_received += n as u64;
                    let _ = self.netcode.handle_packet(now, from, &self.buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => self.stats.io_errors += 1,
            }
        }
        self.netcode.update(now);
        self.retry(now);
        if self.netcode.is_connected() {
            if self.channel.is_none() {
                self.channel = Some(ReliableChannel::new(self.channel_config.clone()));
            }
        } else {
            self.channel = None;
        }
        while let Some(payload) = self.netcode.recv() {
            match payload.split_first() {
                Some((&TAG_UNRELIABLE, rest)) if !rest.is_empty() => {
                    self.unreliable.push_back(rest.to_vec())
                }
                Some((&TAG_RELIABLE, rest)) => match &mut self.channel {
                    Some(channel) => {
                        if channel.handle_packet(rest).is_err() {
                            self.stats.malformed_payloads += 1;
                        }
                        while self.reliable.len() < lagless_netcode::PACKET_QUEUE_SIZE {
                            let Some(m) = channel.recv() else { break };
                            self.reliable.push_back(m);
                        }
                    }
                    None => self.stats.malformed_payloads += 1,
                },
                _ => self.stats.malformed_payloads += 1,
            }
        }
        if let Some(channel) = &mut self.channel {
            while let Some(packet) = channel.poll_packet(now) {
                let mut payload = Vec::with_capacity(packet.len() + 1);
                payload.push(TAG_RELIABLE);
                payload.extend_from_slice(&packet);
                let _ = self.netcode.send_payload(&payload);
            }
        }
        self.flush();
    }

    fn flush(&mut self) {
        while let Some(t) = self.netcode.poll_transmit() {
            self.stats.send(&self.socket, &t.data, t.addr);
        }
    }

    /// Sends an unreliable payload now.
    pub fn send(&mut self, payload: &[u8]) -> Result<(), TransportError> {
        let packet = unreliable_packet(payload)?;
        self.netcode
            .send_payload(&packet)
            .map_err(|_| TransportError::NotConnected)?;
        self.flush();
        Ok(())
    }

    /// Queues a reliable message (sent on the next [`UdpClient::update`]).
    pub fn send_reliable(&mut self, message: &[u8]) -> Result<(), TransportError> {
        let channel = self.channel.as_mut().ok_or(TransportError::NotConnected)?;
        channel.send(message)?;
        Ok(())
    }

    /// Drains the unreliable payloads received.
    pub fn recv(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.unreliable.drain(..)
    }

    /// Drains the reliable messages received, in order.
    pub fn recv_reliable(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.reliable.drain(..)
    }

    /// Blocks until a datagram arrives or `timeout` passes, whichever comes first. True
    /// when a datagram is waiting for [`UdpClient::update`].
    pub fn wait(&self, timeout: Duration) -> bool {
        crate::wait_readable(&self.socket, timeout)
    }

    /// Leaves: redundant disconnect packets go out now.
    pub fn disconnect(&mut self) {
        self.netcode.disconnect();
        self.channel = None;
        self.flush();
    }
}
