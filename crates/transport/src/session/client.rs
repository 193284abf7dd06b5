//! [`GameClient`]: a game's [`Client`] on a [`UdpClient`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use lagless_core::{ClientId, ProtocolError, Tick};
use lagless_netcode::ClientState;
use lagless_replication::{Client, NetConfig, NetError, PredictedWorld, Render};

use super::{Control, Mismatch, SessionError, snapshot_interval};
use crate::{TransportError, UdpClient};

/// How long a connected client waits for the server's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a [`GameClient`] with a [`TokenSource`] hears nothing from the server while
/// it plays before it takes the silence for a change of network and resumes from a new
/// socket ([`GameClient::set_switch_after`]). Longer than the 500 ms after which the
/// hosted [`Client`] calls the link interrupted, so a short fade on a path that still
/// works costs no handshake; shorter than the connection timeout tokens usually carry
/// (`lagless token`: 5 s), so the client is back before the server would time it out. A
/// resume on a path that was fine after all costs one handshake (two round trips) of
/// sending nothing.
pub const DEFAULT_SWITCH_AFTER: Duration = Duration::from_secs(2);

/// Where a [`GameClient`] gets a fresh connect token for its own client id when it
/// resumes by itself ([`GameClient::set_token_source`]): tokens come from the game's
/// backend, which signs them. A closure `FnMut() -> Option<Vec<u8>>` is one.
///
/// `Send + Sync` so the client can live where the game's engine keeps it (a Bevy
/// resource, another thread); a source fed by a channel wraps its receiver in a mutex.
pub trait TokenSource: Send + Sync {
    /// A fresh 2048-byte connect token for this client's id, or `None` when none is
    /// ready yet (a request to the backend in flight): the client asks again on its
    /// next update, and resumes once it has one.
    fn fresh_token(&mut self) -> Option<Vec<u8>>;
}

impl<F: FnMut() -> Option<Vec<u8>> + Send + Sync> TokenSource for F {
    fn fresh_token(&mut self) -> Option<Vec<u8>> {
        self()
    }
}

/// Why a [`GameClient`] resumed by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchCause {
    /// The game said the network changed ([`GameClient::network_changed`]).
    Signalled,
    /// Nothing arrived from the server for [`GameClient::set_switch_after`] while the
    /// client played.
    Suspected,
    /// The client woke from a freeze longer than its connection's timeout: the server
    /// has dropped the connection (and kept the place, if it has a resume grace).
    Woke,
}

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
    /// Resumes the client started by itself, by cause: the game signalled a network
    /// change ([`GameClient::network_changed`]).
    pub switches_signalled: u64,
    /// ... nothing arrived for [`GameClient::set_switch_after`] while it played.
    pub switches_suspected: u64,
    /// ... it woke from a freeze longer than its timeout.
    pub resumes_after_freeze: u64,
    /// Resumes the server did not take as one (its grace period was over, or it was
    /// restarted, or it keeps no places): the hosted [`Client`] started over.
    pub resumes_refused: u64,
    /// Updates on which a resume waited because the [`TokenSource`] had no token yet.
    pub token_waits: u64,
    /// The last resume, automatic or not: how long from its first packet (the new
    /// socket's connection request) to the first server tick applied after it.
    pub last_back_in_play: Option<Duration>,
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
    /// The client's clock: one epoch across connections, since every [`UdpClient`]
    /// starts its own clock at zero and the hosted [`Client`] must not see time go back
    /// when a resume brings a new one.
    epoch: Instant,
    /// Where fresh tokens come from for resuming by itself.
    tokens: Option<Box<dyn TokenSource>>,
    /// Silence while playing after which a switch is suspected.
    switch_after: Option<Duration>,
    /// A resume waiting for a token, and why.
    pending_switch: Option<SwitchCause>,
    /// When anything authenticated last came from the server (on [`GameClient::now`]'s
    /// clock), and the netcode.io count of accepted packets then.
    last_heard: (Duration, u64),
    /// The connection in progress is a resume: when it began, the newest server tick
    /// applied before it and the hosted client's restarts then; cleared once a newer
    /// tick is applied (any tick, once the client started over: a new server's ticks
    /// start again from zero).
    resuming: Option<(Duration, Option<Tick>, u64)>,
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
        let epoch = Instant::now()
            .checked_sub(udp.now())
            .unwrap_or_else(Instant::now);
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
            epoch,
            tokens: None,
            switch_after: Some(DEFAULT_SWITCH_AFTER),
            pending_switch: None,
            last_heard: (Duration::ZERO, 0),
            resuming: None,
            id: None,
        }
    }

    /// Lets the client resume by itself, with tokens from `source`, when the network
    /// changes ([`GameClient::network_changed`]), when nothing arrives for
    /// [`GameClient::set_switch_after`] while it plays, and when it wakes from a freeze
    /// longer than its connection's timeout (instead of ending
    /// [`SessionError::Suspended`]). Without a source (the default) it does none of
    /// this: the game calls [`GameClient::resume`] or [`GameClient::reconnect`].
    ///
    /// Each token must name this client's id: the server
    /// ([`GameServer::set_resume_grace`](super::GameServer::set_resume_grace)) gives the
    /// player back to the same id. A resume whose handshake fails ends the session as a
    /// connection would ([`SessionError::Connect`]); the next trigger is the game's.
    /// Against a server without a resume grace, a resume from a new address waits for the
    /// old connection's timeout (netcode.io refuses a second connection for a connected
    /// id) and then starts over as a new player.
    pub fn set_token_source(&mut self, source: impl TokenSource + 'static) {
        self.tokens = Some(Box::new(source));
    }

    /// How long nothing may arrive from the server while the client plays before it
    /// suspects its network changed and resumes ([`DEFAULT_SWITCH_AFTER`] by default;
    /// `None`: never on silence). Only with a [`TokenSource`].
    pub fn set_switch_after(&mut self, after: Option<Duration>) {
        self.switch_after = after;
    }

    /// The game's word that the device's network changed (the platform's callback: Wi-Fi
    /// to mobile data, a new address): the client resumes from a new socket with a fresh
    /// token on its next update, without waiting for the old path's silence. Nothing
    /// happens without a [`TokenSource`] or once the session has ended.
    pub fn network_changed(&mut self) {
        // A wake past the timeout already waits to resume, and keeps the dead
        // connection unread meanwhile.
        let waking = self.pending_switch == Some(SwitchCause::Woke);
        if self.tokens.is_some() && !matches!(self.state, SessionState::Ended(_)) && !waking {
            self.pending_switch = Some(SwitchCause::Signalled);
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
    ///
    /// When the server's hello says it did not take the connection as a resume (the
    /// grace period was over, or the server keeps no places), the `Client` starts over
    /// as [`GameClient::reconnect`] would have made it
    /// ([`GameClientStats::resumes_refused`]).
    pub fn resume(&mut self, token_bytes: &[u8]) -> Result<(), TransportError> {
        let before = self.client.replication().newest();
        let restarts = self.client.stats().restarts;
        self.connect_again(token_bytes)?;
        self.resuming = Some((self.now(), before, restarts));
        Ok(())
    }

    /// A new netcode.io connection from a new socket, the session waiting for its hello.
    fn connect_again(&mut self, token_bytes: &[u8]) -> Result<(), TransportError> {
        self.udp = UdpClient::connect(token_bytes)?;
        self.state = SessionState::Connecting;
        self.connected_at = Duration::ZERO;
        self.last_update = None;
        self.resuming = None;
        self.pending_switch = None;
        self.last_heard = (self.now(), 0);
        Ok(())
    }

    /// Resumes for `cause` with a token from the source, if it has one now; else the
    /// resume waits for the next update. An unusable token (or no socket) ends the
    /// session.
    fn switch(&mut self, cause: SwitchCause) -> Result<(), SessionError> {
        let Some(token) = self.tokens.as_mut().and_then(|t| t.fresh_token()) else {
            self.pending_switch = Some(cause);
            self.stats.token_waits += 1;
            return Ok(());
        };
        if self.resume(&token).is_err() {
            let attempts = self.udp.attempts();
            return self.end(SessionError::Connect(crate::GaveUp {
                attempts,
                last: ClientState::InvalidConnectToken,
                why: crate::GaveUpWhy::Token,
            }));
        }
        let n = match cause {
            SwitchCause::Signalled => &mut self.stats.switches_signalled,
            SwitchCause::Suspected => &mut self.stats.switches_suspected,
            SwitchCause::Woke => &mut self.stats.resumes_after_freeze,
        };
        *n += 1;
        Ok(())
    }

    /// True when the client played and nothing came from the server for the switch
    /// suspicion time (a live server sends every snapshot interval, and netcode.io
    /// keep-alives besides).
    fn switch_suspected(&mut self, now: Duration) -> bool {
        let accepted = self.udp.netcode().stats().packets_accepted;
        if accepted != self.last_heard.1 {
            self.last_heard = (now, accepted);
        }
        let Some(after) = self.switch_after.filter(|_| self.tokens.is_some()) else {
            return false;
        };
        self.state == SessionState::Ready && now.saturating_sub(self.last_heard.0) >= after
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

    /// Time since the client started: the clock the hosted [`Client`] runs on, one
    /// clock across its connections (a resume or a reconnection does not reset it).
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
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
        let woke = self.now();
        if let Some(silent) = self.silent_too_long(woke) {
            if self.tokens.is_none() {
                return self.end(SessionError::Suspended(silent));
            }
            // The old connection is dead on the server: nothing more of it is read or
            // sent, even while the token source has no token yet.
            self.state = SessionState::Connecting;
            self.pending_switch = Some(SwitchCause::Woke);
        }
        self.last_update = Some(woke);
        if let Some(cause) = self.pending_switch.take() {
            self.switch(cause)?;
            if self.pending_switch == Some(SwitchCause::Woke) {
                return Ok(());
            }
        }
        self.udp.update();
        let now = self.now();
        let suspected = self.switch_suspected(now);
        if suspected && self.pending_switch.is_none() {
            self.switch(SwitchCause::Suspected)?;
            // The new socket's first update ran in its connect.
            return Ok(());
        }
        // Before the connection state: a refusal may come with the disconnect after it.
        let messages: Vec<Vec<u8>> = self.udp.recv_reliable().collect();
        for m in messages {
            match Control::decode(&m) {
                Ok(Control::Hello {
                    tick_hz,
                    snapshot_interval,
                    resumed,
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
                    let played = self.client.session().server_instance().is_some();
                    if !resumed && self.resuming.is_some() && played {
                        // A new place on the server: the streams and acknowledgements
                        // the Client kept belong to the old one.
                        self.client.start_over();
                        self.stats.resumes_refused += 1;
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
            if let Some((began, before, restarts)) = self.resuming {
                let newest = self.client.replication().newest();
                let started_over = self.client.stats().restarts != restarts;
                if newest.is_some() && (started_over || newest > before) {
                    self.stats.last_back_in_play = Some(now.saturating_sub(began));
                    self.resuming = None;
                }
            }
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
        let now = self.now();
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
        let now = self.now();
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
