//! [`UdpClient`]: a netcode.io client on a `std::net::UdpSocket`.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use lagless_netcode::{Client, ClientState, ConnectToken};

use crate::reliable::{ChannelConfig, ReliableChannel};
use crate::server::TransportStats;
use crate::{TAG_RELIABLE, TAG_UNRELIABLE, TransportError, unreliable_packet};

/// A netcode.io client on a non-blocking UDP socket, with a real clock.
///
/// Call [`UdpClient::update`] once per frame; once [`UdpClient::is_connected`], send with
/// [`UdpClient::send`] / [`UdpClient::send_reliable`] and drain [`UdpClient::recv`] /
/// [`UdpClient::recv_reliable`].
pub struct UdpClient {
    socket: UdpSocket,
    netcode: Client,
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
            netcode: Client::from_token(token, Duration::ZERO),
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

    /// The connection state.
    pub fn state(&self) -> ClientState {
        self.netcode.state()
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
