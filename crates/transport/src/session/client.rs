//! [`GameClient`]: a game's [`Client`] on a [`UdpClient`].

use std::collections::VecDeque;
use std::time::Duration;

use lagless_core::{ClientId, ProtocolError, Tick};
use lagless_netcode::ClientState;
use lagless_replication::{Client, NetConfig, NetError, PredictedWorld, Render};

use super::{Control, Mismatch, SessionError, snapshot_interval};
use crate::{TransportError, UdpClient};

/// How long a connected client waits for the server's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a [`GameClient`]'s session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// netcode.io is connecting.
    Connecting,
    /// Connected; the server's hello has not come yet.
    AwaitingHello,
    /// The server's settings match this client's: the game plays.
    Ready,
    /// Over, and why.
    Ended(SessionError),
}

/// A [`GameClient`]'s counters beyond the hosted [`Client`]'s and the transport's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GameClientStats {
    /// Server packets dropped because they came before the hello was checked (the
    /// server sends snapshots as soon as the client connects).
    pub packets_before_hello: u64,
    /// Server packets the hosted [`Client`] refused (it counts them by reason).
    pub packets_refused: u64,
    /// Reliable messages that were not a [`Control`] message, ignored.
    pub control_malformed: u64,
    /// Packets of the [`Client`] the transport could not send.
    pub send_failures: u64,
    /// The game's control messages dropped because it did not poll them.
    pub controls_dropped: u64,
}

/// The game's control messages kept until polled ([`GameClient::poll_control`]); older
/// ones are dropped beyond this.
const MAX_CONTROLS: usize = 1024;

/// A game's [`Client`] on a [`UdpClient`] (netcode.io), on a real clock.
///
/// The game's loop:
/// ```text
/// let mut host = GameClient::connect(&token, Client::new(schema, world, &config)?, &config)?;
/// loop {
///     host.step(|tick| read_input(tick))?;       // socket in, ticks, socket out
///     let render = host.render();                // draw render.pose(id)
///     while let Some(e) = host.client_mut().poll_event() { /* spawns, despawns */ }
/// }
/// host.disconnect();
/// ```
/// or, step by step: [`GameClient::update`], then `client_mut().next_tick()` and
/// `client_mut().tick(..)` while [`GameClient::is_ready`], then [`GameClient::transmit`].
/// Leave the `Client`'s `receive`, `update` and `poll_transmit` to the host.
pub struct GameClient<W: PredictedWorld> {
    udp: UdpClient,
    client: Client<W>,
    tick_hz: u32,
    snapshot_interval: u32,
    state: SessionState,
    /// When netcode.io connected (the hello's clock starts then).
    connected_at: Duration,
    stats: GameClientStats,
    /// The game's control messages not yet polled.
    controls: VecDeque<Vec<u8>>,
    /// When [`GameClient::update`] last ran: the client sends nothing between two, so a
    /// gap longer than the timeout means the server has dropped it.
    last_update: Option<Duration>,
    /// The id the server's hello named.
    id: Option<ClientId>,
}

impl<W: PredictedWorld> GameClient<W> {
    /// Starts connecting with a 2048-byte connect token; `client` must have been built
    /// with `config`, whose rates are checked against the server's.
    pub fn connect(
        token_bytes: &[u8],
        client: Client<W>,
        config: &NetConfig,
    ) -> Result<Self, TransportError> {
        let udp = UdpClient::connect(token_bytes)?;
        Ok(Self::over(udp, client, config))
    }

    /// Hosts `client` on a [`UdpClient`] that is connecting or connected (one bound to a
    /// given address, say), as [`GameClient::connect`] does.
    pub fn over(udp: UdpClient, client: Client<W>, config: &NetConfig) -> Self {
        Self {
            udp,
            client,
            tick_hz: config.tick_hz,
            snapshot_interval: snapshot_interval(config.tick_hz, config.snapshot_hz),
            state: SessionState::Connecting,
            connected_at: Duration::ZERO,
            stats: GameClientStats::default(),
            controls: VecDeque::new(),
            last_update: None,
            id: None,
        }
    }

    /// Connects again with a fresh token after the session ended (a timeout, a
    /// suspension, the server gone), keeping the game's [`Client`]: it starts over as a
    /// new connection ([`Client::start_over`]: its entities despawned, and back from the
    /// server's first snapshot), the world and its policies kept.
    pub fn reconnect(&mut self, token_bytes: &[u8]) -> Result<(), TransportError> {
        if self.udp.is_connected() {
            self.udp.disconnect();
        }
        self.connect_again(token_bytes)?;
        self.client.start_over();
        Ok(())
    }

    /// Connects again with a fresh token for the same client id, to a server that kept
    /// this client's place ([`GameServer::set_resume_grace`](super::GameServer::set_resume_grace)):
    /// the game's [`Client`] goes on exactly where it was (its clock, inputs, snapshot
    /// acknowledgements and message streams), as the server's side of it does, so
    /// reliable messages arrive once and in order across the gap. From a new socket,
    /// hence a new address: what a phone that changed networks needs. A server that did
    /// not keep the place starts this client as a new one (a restarted server names
    /// another instance, and the `Client` starts over by itself); a server that did
    /// keep it but with another client id is not what this is for.
    ///
    /// The old connection is dropped without a goodbye: a disconnect reaching the server
    /// would make it leave at once, where the server takes the new connection's place
    /// over from it (or lets it time out) and keeps the player.
    pub fn resume(&mut self, token_bytes: &[u8]) -> Result<(), TransportError> {
        self.connect_again(token_bytes)
    }

    /// A new netcode.io connection from a new socket, the session waiting for its hello.
    fn connect_again(&mut self, token_bytes: &[u8]) -> Result<(), TransportError> {
        self.udp = UdpClient::connect(token_bytes)?;
        self.state = SessionState::Connecting;
        self.connected_at = Duration::ZERO;
        self.last_update = None;
        Ok(())
    }

    /// How long the client was silent before this update, if longer than the
    /// connection's timeout while connected: it sent nothing meanwhile (not even
    /// netcode.io keep-alives), so the server, which times clients out after the same
    /// timeout, has dropped it. The packets waiting in the socket are from before that;
    /// read, they would refresh the connection's own timeout and keep it `Ready` on a
    /// dead connection for a whole timeout more.
    fn silent_too_long(&self, now: Duration) -> Option<Duration> {
        if !matches!(
            self.state,
            SessionState::Ready | SessionState::AwaitingHello
        ) {
            return None;
        }
        let timeout = self
            .udp
            .netcode()
            .token()
            .map(|t| t.timeout_seconds)
            .filter(|&t| t > 0)
            .map(|t| Duration::from_secs(t as u64))?;
        let silent = now.saturating_sub(self.last_update?);
        (silent > timeout).then_some(silent)
    }

    /// Time since the client started: the clock the hosted [`Client`] runs on.
    pub fn now(&self) -> Duration {
        self.udp.now()
    }

    /// The game's client.
    pub fn client(&self) -> &Client<W> {
        &self.client
    }

    /// The game's client, to tick it and read its events.
    pub fn client_mut(&mut self) -> &mut Client<W> {
        &mut self.client
    }

    /// The transport (its counters, the netcode.io state).
    pub fn transport(&self) -> &UdpClient {
        &self.udp
    }

    /// Where the session stands.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// True once the server's settings were checked: the game plays.
    pub fn is_ready(&self) -> bool {
        self.state == SessionState::Ready
    }

    /// Why the session ended, if it did.
    pub fn error(&self) -> Option<SessionError> {
        match self.state {
            SessionState::Ended(e) => Some(e),
            _ => None,
        }
    }

    /// This host's counters.
    pub fn stats(&self) -> &GameClientStats {
        &self.stats
    }

    /// Ends the session: redundant disconnect packets go out now if still connected.
    fn end(&mut self, error: SessionError) -> Result<(), SessionError> {
        if self.udp.is_connected() {
            self.udp.disconnect();
        }
        self.state = SessionState::Ended(error);
        Err(error)
    }

    /// Reads the socket, checks the server's hello, hands the hosted [`Client`] the
    /// server's packets and advances its clock to [`GameClient::now`]. An error means the
    /// session is over (refused, timed out, closed); every later call returns it again.
    pub fn update(&mut self) -> Result<(), SessionError> {
        if let SessionState::Ended(e) = self.state {
            return Err(e);
        }
        // Before the socket is read: a client woken after a long freeze must not take
        // what queued up meanwhile for a live connection.
        let woke = self.udp.now();
        if let Some(silent) = self.silent_too_long(woke) {
            return self.end(SessionError::Suspended(silent));
        }
        self.last_update = Some(woke);
        self.udp.update();
        let now = self.udp.now();
        // Before the connection state: a refusal may come with the disconnect after it.
        let messages: Vec<Vec<u8>> = self.udp.recv_reliable().collect();
        for m in messages {
            match Control::decode(&m) {
                Ok(Control::Hello {
                    tick_hz,
                    snapshot_interval,
                    client,
                }) => {
                    if tick_hz != self.tick_hz {
                        return self.end(SessionError::Mismatch(Mismatch::TickRate {
                            server: tick_hz,
                            client: self.tick_hz,
                        }));
                    }
                    if snapshot_interval != self.snapshot_interval {
                        return self.end(SessionError::Mismatch(Mismatch::SnapshotRate {
                            tick_hz,
                            server: snapshot_interval,
                            client: self.snapshot_interval,
                        }));
                    }
                    self.state = SessionState::Ready;
                    self.id = Some(client);
                }
                Ok(Control::Refused(mismatch)) => {
                    return self.end(SessionError::Refused(mismatch));
                }
                Ok(Control::Idle(after)) => return self.end(SessionError::Idle(after)),
                Ok(Control::Game(bytes)) => {
                    if self.controls.len() >= MAX_CONTROLS {
                        self.controls.pop_front();
                        self.stats.controls_dropped += 1;
                    }
                    self.controls.push_back(bytes);
                }
                Err(_) => self.stats.control_malformed += 1,
            }
        }
        match self.udp.state() {
            ClientState::Connected if self.state == SessionState::Connecting => {
                self.state = SessionState::AwaitingHello;
                self.connected_at = now;
            }
            ClientState::ConnectionTimedOut => return self.end(SessionError::TimedOut),
            ClientState::Disconnected => return self.end(SessionError::ServerClosed),
            s if s.is_error() => {
                let gave_up = self.udp.gave_up().unwrap_or(crate::GaveUp {
                    attempts: self.udp.attempts(),
                    last: s,
                    why: crate::GaveUpWhy::Token,
                });
                return self.end(SessionError::Connect(gave_up));
            }
            _ => {}
        }
        if self.state == SessionState::AwaitingHello
            && now.saturating_sub(self.connected_at) >= HELLO_TIMEOUT
        {
            return self.end(SessionError::NoHello(HELLO_TIMEOUT));
        }
        let packets: Vec<Vec<u8>> = self.udp.recv().collect();
        for p in packets {
            if self.state != SessionState::Ready {
                self.stats.packets_before_hello += 1;
                continue;
            }
            match self.client.receive(now, &p) {
                Ok(()) => {}
                // The hello said otherwise, or came from a server that skipped it.
                Err(NetError::Protocol(ProtocolError::TickRateMismatch { ours, theirs })) => {
                    return self.end(SessionError::Mismatch(Mismatch::TickRate {
                        server: theirs,
                        client: ours,
                    }));
                }
                Err(_) => self.stats.packets_refused += 1,
            }
        }
        if self.is_ready() {
            self.client.update(now);
        }
        Ok(())
    }

    /// The id the server knows this client by (the connect token's, which only the server
    /// can read), as its hello said; `None` until the hello came.
    pub fn client_id(&self) -> Option<ClientId> {
        self.id
    }

    /// The next of the game's own messages the server sent with
    /// [`GameServer::send_control`](super::GameServer::send_control), in order; they are
    /// read from the first update on, before the hello is checked.
    pub fn poll_control(&mut self) -> Option<Vec<u8>> {
        self.controls.pop_front()
    }

    /// Sends what the hosted [`Client`] has queued (nothing before the hello is checked).
    pub fn transmit(&mut self) {
        if !self.is_ready() {
            return;
        }
        let now = self.udp.now();
        while let Some(p) = self.client.poll_transmit(now) {
            if self.udp.send(&p).is_err() {
                self.stats.send_failures += 1;
            }
        }
    }

    /// One frame: [`GameClient::update`], every tick due with the player's `input` for it,
    /// and [`GameClient::transmit`].
    pub fn step(&mut self, mut input: impl FnMut(Tick) -> W::Input) -> Result<(), SessionError> {
        self.update()?;
        if self.is_ready() {
            while let Some(tick) = self.client.next_tick() {
                self.client.tick(tick, input(tick));
            }
        }
        self.transmit();
        Ok(())
    }

    /// What to draw now ([`Client::render`] at [`GameClient::now`]).
    pub fn render(&mut self) -> Render {
        let now = self.udp.now();
        self.client.render(now)
    }

    /// Sleeps until a datagram arrives or `timeout` passes, whichever comes first.
    pub fn wait(&self, timeout: Duration) {
        self.udp.wait(timeout);
    }

    /// Leaves: redundant disconnect packets go out now, and the session ends with
    /// [`SessionError::Left`].
    pub fn disconnect(&mut self) {
        if !matches!(self.state, SessionState::Ended(_)) {
            let _ = self.end(SessionError::Left);
        }
    }
}
