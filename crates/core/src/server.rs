use crate::channel::{ChannelConfig, ChannelStats, Delivery, MessageChannel};
use crate::message::{
    FRAGMENT_PAYLOAD_BYTES, InputAck, InputMessage, PingEcho, SnapshotFragment, section_wire_len,
};
use crate::{FixedTimestep, Input, ProtocolError, Tick, TickBuffer, TickRate};
use lagless_wire::{Seq16, SeqSpan, Writer};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Identifies a connected client (the transport's id, e.g. the netcode.io client id).
pub type ClientId = u64;

/// What the server does for a client whose input for a tick has not arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingInput {
    /// Apply no input: the player waits for its connection to recover (the Unity physics
    /// prediction article's default).
    Hold,
    /// Apply the client's last known input again, however long it is missing (smoother
    /// for held keys, wrong on releases; kept as a baseline).
    RepeatLast,
    /// Apply the game's guess from the client's last known input
    /// ([`Input::guess`]: by default the last input for a few ticks, then none), and tell
    /// the client which ticks were guessed, so its reconciliation replays what was
    /// applied. A late input costs a misprediction only when the guess was wrong. The
    /// default (Rocket League's rule: inputs repeated when missing, what was guessed
    /// corrected on the client).
    #[default]
    Guess,
}

/// Server settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Simulation rate.
    pub tick_hz: u32,
    /// Send a snapshot every this many ticks (1 = every tick).
    pub snapshot_interval: u32,
    /// Inputs for ticks further ahead of the server than this are refused: a client cannot
    /// queue up more than this much simulated time.
    pub max_input_lead_ticks: u32,
    /// Most inputs one message may carry.
    pub max_inputs_per_message: usize,
    /// Largest snapshot payload the game may hand over.
    pub max_snapshot_bytes: usize,
    /// Policy for missing inputs.
    pub missing_input: MissingInput,
    /// Most ticks run back to back after a stall before time is dropped.
    pub max_backlog_ticks: u32,
    /// An input that arrives after its tick was simulated without it, at most this many
    /// ticks late, is handed to the game with the next tick ([`TickInputs::late`]), so
    /// the game can still carry out what no guess can (a trigger pulled: Source runs
    /// every user command it receives). 0 drops every late input.
    pub max_late_ticks: u32,
    /// Each client's message channel ([`ServerSession::send_message`]): resend interval,
    /// queue bounds, and `max_packet_bytes`, the most a message section may add to one
    /// snapshot.
    pub channel: ChannelConfig,
    /// This run of the server, told to its clients with the tick rate until they hold one
    /// of its snapshots ([`crate::ClientStats::server_restarts`]): a client kept across a
    /// restart hears another instance and starts over at once, whatever the new server's
    /// ticks. Give every start of a server a fresh value (random, or a start counter);
    /// the core reads no randomness itself. `lagless_transport`'s `GameServer` draws one.
    /// With the default 0 on every run, a restart goes unrecognised until eight packets
    /// contradict the client's clock ([`crate::limits::RESYNC_AFTER_PACKETS`]), and not at all
    /// when the old server ran less than [`crate::limits::TICK_TRUST_SECS`].
    pub instance: u32,
    /// End every packet with a CRC-32 of the rest, and refuse a client packet whose own
    /// does not match before decoding it ([`ProtocolError::BadChecksum`]), for a
    /// transport that may deliver damaged bytes. Off by default: the sessions trust
    /// their transport's integrity, and netcode.io provides it. Clients must be
    /// configured alike ([`crate::ClientConfig::checksum`]).
    pub checksum: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            snapshot_interval: 1,
            max_input_lead_ticks: 128,
            max_inputs_per_message: 64,
            max_snapshot_bytes: 64 * 1024,
            missing_input: MissingInput::Guess,
            max_backlog_ticks: 8,
            max_late_ticks: 16,
            channel: ChannelConfig::default(),
            instance: 0,
            checksum: false,
        }
    }
}

/// Counters for one client, as seen by the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerClientStats {
    /// Packets received from the client (valid or not).
    pub packets_received: u64,
    /// Packets the client sent, as its valid packets' sequence numbers tell (from the
    /// first to the newest seen): `packets_expected - (packets_received -
    /// packets_rejected)` were lost on the way up (or are still late).
    pub packets_expected: u64,
    /// Bytes received from the client.
    pub bytes_received: u64,
    /// Packets rejected as malformed, oversized or of unknown kind.
    pub packets_rejected: u64,
    /// Of those, packets announcing another tick rate
    /// ([`ProtocolError::TickRateMismatch`]).
    pub tick_rate_mismatches: u64,
    /// Inputs accepted for a future tick, seen for the first time.
    pub inputs_accepted: u64,
    /// Redundant copies of inputs already held or applied (normal with redundancy).
    pub inputs_redundant: u64,
    /// Inputs received after their tick was simulated (too late to apply), counting every
    /// redundant copy of one (except the copies after one handed to the game late,
    /// counted as redundant).
    pub inputs_late: u64,
    /// Of those, inputs handed to the game late ([`TickInputs::late`]; each tick's once).
    pub inputs_handed_late: u64,
    /// Inputs refused because their tick was too far ahead of the server.
    pub inputs_too_far_ahead: u64,
    /// Ticks simulated with this client's input.
    pub ticks_with_input: u64,
    /// Ticks simulated without this client's input after it had started sending.
    pub ticks_starved: u64,
    /// Packets sent to the client.
    pub packets_sent: u64,
    /// Bytes sent to the client.
    pub bytes_sent: u64,
    /// Bytes of message sections sent to the client with its snapshots, length prefixes
    /// included (also in `bytes_sent`).
    pub message_bytes_sent: u64,
    /// Bytes of message sections received from the client and taken.
    pub message_bytes_received: u64,
    /// Packets refused because their message section was malformed
    /// ([`ProtocolError::Channel`]); also counted in `packets_rejected`.
    pub message_sections_rejected: u64,
    /// Packets refused because their checksum did not match
    /// ([`ServerConfig::checksum`]); also counted in `packets_rejected`.
    pub checksum_failures: u64,
}

/// One tick's worth of work for the game: step from `tick` with these inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickInputs<I> {
    /// The tick being simulated: the game steps state(tick) to state(tick + 1).
    pub tick: Tick,
    /// Each client's input, or `None` when it has none for this tick (per
    /// [`MissingInput`]), in client-id order.
    pub inputs: Vec<(ClientId, Option<I>)>,
    /// The clients, in id order, whose input in `inputs` is the server's stand-in for one
    /// that had not arrived ([`MissingInput::Guess`] or [`MissingInput::RepeatLast`]).
    pub guessed: Vec<ClientId>,
    /// Inputs that arrived since the last tick for ticks already simulated without them
    /// (at most [`ServerConfig::max_late_ticks`] late), each once, in client-id then
    /// tick order: `(client, the input's own tick, input)`. The state those ticks made
    /// stands (the client is told they were guessed and corrects itself); a game uses
    /// these for what must not be lost, such as a shot, judged as of the input's tick.
    pub late: Vec<(ClientId, Tick, I)>,
}

impl<I> TickInputs<I> {
    /// True when client `id` had its own input for this tick: not missing, not a guess.
    pub fn is_fed(&self, id: ClientId) -> bool {
        self.guessed.binary_search(&id).is_err()
            && self.inputs.iter().any(|(c, i)| *c == id && i.is_some())
    }
}

/// How far behind the newest sequence number a packet may be before the newest is
/// considered bogus.
const SEQ_RESET_DISTANCE: i16 = 1024;

/// Inputs older than the current tick that are remembered, so late resends can be told
/// from inputs that were never seen.
const INPUT_HISTORY: u32 = 64;

struct ClientSlot<I> {
    inputs: TickBuffer<I>,
    /// The newest input received and applied (never a guess).
    last_applied: Option<I>,
    /// Ticks in a row simulated without an input, up to now.
    missing_run: u32,
    /// Which of the last 32 ticks simulated were starved: bit `i` is the tick `i` before
    /// the newest one simulated (the form [`InputAck::starved`] carries).
    starved_bits: u32,
    newest_input: Option<Tick>,
    /// Inputs that came after their tick was simulated, for the next tick's
    /// [`TickInputs::late`].
    late: Vec<(Tick, I)>,
    /// Slack of the newest input message, in ticks.
    slack: Option<f64>,
    /// The least slack among the ticks whose input first arrived since the last report:
    /// a late message bunches up with the one after it (paths keep order), and a lost
    /// one's inputs come with the next; reporting the newest message's alone would hide
    /// both.
    worst_slack: Option<f64>,
    /// The newest tick any input arrived for (late ones included).
    newest_seen: Option<Tick>,
    first_input: Option<Tick>,
    echo: Option<(u32, Duration)>,
    newest_seq: Option<Seq16>,
    /// Every valid packet's sequence number, for [`ServerClientStats::packets_expected`].
    seq_span: SeqSpan,
    send_seq: Seq16,
    snapshot_ack: Option<Tick>,
    /// The snapshots of the 32 ticks before `snapshot_ack` the newest packet said the
    /// client holds too (bit `i`: tick `snapshot_ack - 1 - i`).
    snapshot_acks: u32,
    /// The tick of the last snapshot queued for this client.
    snapshot_sent: Option<Tick>,
    /// The tick of the first snapshot queued for this client: an acknowledgement of an
    /// older one is of another server's (a client kept across a restart).
    first_snapshot: Option<Tick>,
    /// The client's newest packet asked for a snapshot against nothing.
    resync: bool,
    channel: MessageChannel,
    stats: ServerClientStats,
}

/// The authoritative side: runs the fixed-rate clock, collects each client's inputs into a
/// per-tick queue, and packs snapshots into packets.
///
/// Sans-IO: feed it received bytes with [`ServerSession::handle_packet`] and the current
/// time with [`ServerSession::update`]; drain ticks with [`ServerSession::next_tick`] and
/// packets with [`ServerSession::poll_transmit`]. It never reads a clock or a socket.
pub struct ServerSession<I: Input> {
    config: ServerConfig,
    timestep: FixedTimestep,
    last_update: Option<Duration>,
    clients: BTreeMap<ClientId, ClientSlot<I>>,
    outbox: VecDeque<(ClientId, Vec<u8>)>,
    /// Where [`ServerSession::poll_message`] looks first: the client after the one it last
    /// took a message from, so one busy client cannot keep the others waiting.
    next_message_from: ClientId,
}

impl<I: Input> ServerSession<I> {
    /// A server whose first simulated tick is 0.
    ///
    /// # Panics
    /// If `config.tick_hz` is outside 1..=1000 or `snapshot_interval` is 0.
    pub fn new(config: ServerConfig) -> Self {
        assert!(
            config.snapshot_interval > 0,
            "snapshot_interval must be at least 1"
        );
        let timestep = FixedTimestep::new(
            TickRate::new(config.tick_hz),
            Tick(0),
            config.max_backlog_ticks,
        );
        Self {
            config,
            timestep,
            last_update: None,
            clients: BTreeMap::new(),
            outbox: VecDeque::new(),
            next_message_from: 0,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The tick of the current state (the next tick to simulate).
    pub fn current_tick(&self) -> Tick {
        self.timestep.next_tick()
    }

    /// Connected clients, in id order.
    pub fn clients(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.clients.keys().copied()
    }

    /// A client's counters.
    pub fn client_stats(&self, id: ClientId) -> Option<&ServerClientStats> {
        self.clients.get(&id).map(|c| &c.stats)
    }

    /// How early the client's newest input message arrived, in ticks before the server
    /// needed it (negative: late). What the server itself sees of the client's input
    /// lead, whatever the client says; a game can add it to the round trip to tell how
    /// old the client's view is when its input is applied (lag compensation).
    pub fn input_slack(&self, id: ClientId) -> Option<f64> {
        self.clients.get(&id)?.slack
    }

    /// Newest complete snapshot tick the client reported holding.
    pub fn snapshot_ack(&self, id: ClientId) -> Option<Tick> {
        self.clients.get(&id).and_then(|c| c.snapshot_ack)
    }

    /// The newest complete snapshot tick the client reported holding, and which of the 32
    /// ticks before it it holds too (bit `i`: tick `newest - 1 - i`), as its newest packet
    /// said ([`crate::ClientSession::acknowledge_snapshot`]). The client's word: a server
    /// must expect ticks it never sent a snapshot of.
    pub fn snapshot_acks(&self, id: ClientId) -> Option<(Tick, u32)> {
        let c = self.clients.get(&id)?;
        Some((c.snapshot_ack?, c.snapshot_acks))
    }

    /// Registers a client (the transport has authenticated it).
    pub fn add_client(&mut self, id: ClientId) -> Result<(), ProtocolError> {
        if self.clients.contains_key(&id) {
            return Err(ProtocolError::DuplicateClient(id));
        }
        let cap = (INPUT_HISTORY + self.config.max_input_lead_ticks + 1) as usize;
        let floor = self.current_tick().saturating_sub(INPUT_HISTORY);
        self.clients.insert(
            id,
            ClientSlot {
                inputs: TickBuffer::new(cap, floor),
                last_applied: None,
                missing_run: 0,
                starved_bits: 0,
                newest_input: None,
                late: Vec::new(),
                slack: None,
                worst_slack: None,
                newest_seen: None,
                first_input: None,
                echo: None,
                newest_seq: None,
                seq_span: SeqSpan::default(),
                send_seq: Seq16(0),
                snapshot_ack: None,
                snapshot_acks: 0,
                snapshot_sent: None,
                first_snapshot: None,
                resync: false,
                channel: MessageChannel::new(self.config.channel.clone()),
                stats: ServerClientStats::default(),
            },
        );
        Ok(())
    }

    /// True while the client's newest packet asks for a snapshot against nothing
    /// ([`crate::ClientSession::set_resync`]): it holds no baseline the server may
    /// delta-encode against, whatever [`ServerSession::snapshot_ack`] says. False for an
    /// unknown client.
    pub fn resync_requested(&self, id: ClientId) -> bool {
        self.clients.get(&id).is_some_and(|c| c.resync)
    }

    /// Queues a game message for client `id`. It rides the client's next snapshots
    /// ([`ServerSession::send_snapshot`]), in fragment 0 of each: a reliable one until
    /// the client acknowledges it, an unreliable one once, in the next snapshot with room
    /// for it (dropped if none has within [`ChannelConfig::unreliable_max_wait`], see
    /// [`ChannelStats::unreliable_dropped`]). A client sent no snapshots gets no messages.
    /// At most `max_packet_bytes` of the channel config (1150 by default) ride one
    /// snapshot, which bounds the message rate to a client by the snapshot rate.
    ///
    /// Refused with [`ProtocolError::UnknownClient`], or [`ProtocolError::Channel`] when
    /// the message is empty or larger than [`MessageChannel::max_message_bytes`] or its
    /// queue is full.
    pub fn send_message(
        &mut self,
        id: ClientId,
        delivery: Delivery,
        bytes: &[u8],
    ) -> Result<(), ProtocolError> {
        let client = self
            .clients
            .get_mut(&id)
            .ok_or(ProtocolError::UnknownClient(id))?;
        client.channel.send_with(delivery, bytes)?;
        Ok(())
    }

    /// The next game message from any client, with its sender and how it was sent:
    /// each client's reliable ones exactly once and in the order sent, unreliable ones
    /// at most once. Clients take turns, one message each.
    pub fn poll_message(&mut self) -> Option<(ClientId, Delivery, Vec<u8>)> {
        let start = self.next_message_from;
        let take = |(&id, c): (&ClientId, &mut ClientSlot<I>)| {
            c.channel.recv_with_delivery().map(|(d, m)| (id, d, m))
        };
        let found = match self.clients.range_mut(start..).find_map(take) {
            Some(m) => Some(m),
            None => self.clients.range_mut(..start).find_map(take),
        };
        let (id, delivery, bytes) = found?;
        self.next_message_from = id.wrapping_add(1);
        Some((id, delivery, bytes))
    }

    /// The next game message from client `id`.
    pub fn poll_message_from(&mut self, id: ClientId) -> Option<(Delivery, Vec<u8>)> {
        self.clients.get_mut(&id)?.channel.recv_with_delivery()
    }

    /// Bytes of messages sent to client `id` so far with its snapshots, length prefixes
    /// included (0 for an unknown client). Read it before and after
    /// [`ServerSession::send_snapshot`] to learn what the messages added to that snapshot,
    /// to count against a bandwidth budget.
    pub fn message_bytes_sent(&self, id: ClientId) -> u64 {
        self.clients
            .get(&id)
            .map_or(0, |c| c.stats.message_bytes_sent)
    }

    /// Client `id`'s message channel counters.
    pub fn message_stats(&self, id: ClientId) -> Option<&ChannelStats> {
        self.clients.get(&id).map(|c| c.channel.stats())
    }

    /// Client `id`'s message channel, for its queue lengths and limits.
    pub fn channel(&self, id: ClientId) -> Option<&MessageChannel> {
        self.clients.get(&id).map(|c| &c.channel)
    }

    /// Forgets a client; returns whether it existed.
    pub fn remove_client(&mut self, id: ClientId) -> bool {
        self.outbox.retain(|(c, _)| *c != id);
        self.clients.remove(&id).is_some()
    }

    /// Processes a packet from `id` received at `now`; the session stays healthy whatever
    /// the bytes.
    ///
    /// A malformed packet, or one whose start tick cannot be placed, is dropped and
    /// counted in `packets_rejected`. A well-formed one with some inputs too far ahead is
    /// kept apart from those (`inputs_too_far_ahead`) and still returns
    /// [`ProtocolError::TickOutOfRange`]. Clock stamps and the snapshot ack of a
    /// well-formed packet are taken even then.
    pub fn handle_packet(
        &mut self,
        id: ClientId,
        now: Duration,
        bytes: &[u8],
    ) -> Result<(), ProtocolError> {
        let current = self.current_tick();
        let position = self.timestep.position_after(
            self.last_update
                .map_or(Duration::ZERO, |t| now.saturating_sub(t)),
        );
        let max_inputs = self.config.max_inputs_per_message;
        let lead_limit = self.config.max_input_lead_ticks;
        let late_limit = i64::from(self.config.max_late_ticks);
        let tick_hz = self.config.tick_hz;
        let checksum = self.config.checksum;
        let client = self
            .clients
            .get_mut(&id)
            .ok_or(ProtocolError::UnknownClient(id))?;
        client.stats.packets_received += 1;
        client.stats.bytes_received += bytes.len() as u64;
        let bytes = match checksum.then(|| crate::integrity::open(bytes)) {
            None => bytes,
            Some(Ok(body)) => body,
            Some(Err(e)) => {
                client.stats.packets_rejected += 1;
                client.stats.checksum_failures += 1;
                return Err(e);
            }
        };
        let msg = match InputMessage::<I>::decode(bytes, max_inputs) {
            Ok(m) => m,
            Err(e) => {
                client.stats.packets_rejected += 1;
                return Err(e);
            }
        };
        if let Some(theirs) = msg.tick_hz.map(u32::from).filter(|&hz| hz != tick_hz) {
            client.stats.packets_rejected += 1;
            client.stats.tick_rate_mismatches += 1;
            return Err(ProtocolError::TickRateMismatch {
                ours: tick_hz,
                theirs,
            });
        }
        // Messages: the channel checks the whole section before it takes anything, and a
        // packet whose section is bad is refused whole. A reordered packet's section counts
        // too: the channel orders and deduplicates what it takes.
        if let Some(section) = &msg.messages {
            if let Err(e) = client.channel.handle_packet(section) {
                client.stats.packets_rejected += 1;
                client.stats.message_sections_rejected += 1;
                return Err(e.into());
            }
            client.stats.message_bytes_received += section_wire_len(section.len()) as u64;
        }
        client.seq_span.observe(msg.seq);
        client.stats.packets_expected = client.seq_span.expected();
        // Clock stamps: keep only the newest packet's, so reordering cannot inflate the RTT.
        // A sequence number far behind the newest means the newest was bogus (a corrupt or
        // forged packet) or the client restarted; accept it rather than ignore the client's
        // clock stamps for the next 32768 packets.
        let newest_packet = client
            .newest_seq
            .is_none_or(|s| msg.seq.is_newer_than(s) || s.diff(msg.seq) > SEQ_RESET_DISTANCE);
        if newest_packet {
            client.newest_seq = Some(msg.seq);
            client.resync = msg.resync;
            client.echo = Some((msg.client_time_us, now));
            if let Some(ack) = msg.snapshot_ack {
                client.snapshot_ack = Tick::from_wire(ack, current);
                client.snapshot_acks = msg.snapshot_acks;
            }
        }
        if msg.inputs.is_empty() {
            return Ok(());
        }
        let Some(start) = Tick::from_wire(msg.start_tick, current) else {
            client.stats.packets_rejected += 1;
            return Err(ProtocolError::TickOutOfRange {
                tick: Tick(u32::from(msg.start_tick.0)),
                low: Tick(current.0.saturating_sub(u32::from(u16::MAX / 2))),
                high: current.saturating_add(lead_limit),
            });
        };
        // Starvation is counted from the first tick the client ever sent input for.
        client.first_input = Some(client.first_input.map_or(start, |f| f.min(start)));
        let newest = start.saturating_add(msg.inputs.len() as u32 - 1);
        if newest_packet && newest.diff(current) <= i64::from(lead_limit) {
            // The newest input is needed once the server's position passes its tick + 1.
            client.slack = Some(f64::from(newest.0) + 1.0 - position);
        }
        let mut result = Ok(());
        for (k, input) in msg.inputs.into_iter().enumerate() {
            let tick = start.saturating_add(k as u32);
            if tick.diff(current) > i64::from(lead_limit) {
                client.stats.inputs_too_far_ahead += 1;
                result = Err(ProtocolError::TickOutOfRange {
                    tick,
                    low: Tick(current.0.saturating_sub(u32::from(u16::MAX / 2))),
                    high: current.saturating_add(lead_limit),
                });
                continue;
            }
            if client.newest_seen.is_none_or(|n| tick > n) {
                // The first copy of this tick's input: how early it came is what decides
                // starvation (a lost message's inputs come with the next one, later).
                client.newest_seen = Some(tick);
                let slack = f64::from(tick.0) + 1.0 - position;
                client.worst_slack = Some(client.worst_slack.map_or(slack, |w| w.min(slack)));
            }
            if client.inputs.contains(tick) {
                client.stats.inputs_redundant += 1;
            } else if tick < current {
                if tick < client.inputs.floor() {
                    // Older than our memory: can only be a very old resend.
                    client.stats.inputs_redundant += 1;
                } else {
                    client.stats.inputs_late += 1;
                    // Not held, so its tick ran without it. Kept in the history, so a
                    // redundant copy is not handed over twice.
                    if current.diff(tick) <= late_limit && client.inputs.insert(tick, input).is_ok()
                    {
                        client.stats.inputs_handed_late += 1;
                        client.late.push((tick, input));
                    }
                }
            } else if client.inputs.insert(tick, input).is_ok() {
                client.stats.inputs_accepted += 1;
                client.newest_input = Some(client.newest_input.map_or(tick, |n| n.max(tick)));
            }
        }
        result
    }

    /// Advances the server clock to `now`. Call once per loop iteration, then drain
    /// [`ServerSession::next_tick`].
    pub fn update(&mut self, now: Duration) {
        let elapsed = self
            .last_update
            .map_or(Duration::ZERO, |t| now.saturating_sub(t));
        self.last_update = Some(now);
        self.timestep.accumulate(elapsed);
    }

    /// When the next tick falls due, on the clock [`ServerSession::update`] is given
    /// (`None` before the first update): a loop that sleeps calls `update` then, not
    /// sooner. A tick already due gives the last update's time.
    pub fn poll_timeout(&self) -> Option<Duration> {
        Some(self.last_update? + self.timestep.until_next_tick())
    }

    /// The next tick due, with every client's input for it; `None` when the game is up to
    /// date. After the game steps with these inputs, [`ServerSession::current_tick`] is
    /// `tick + 1` and snapshots sent are labelled with it.
    pub fn next_tick(&mut self) -> Option<TickInputs<I>> {
        let tick = self.timestep.pop_tick()?;
        let policy = self.config.missing_input;
        let mut guessed = Vec::new();
        let mut late = Vec::new();
        let inputs = self
            .clients
            .iter_mut()
            .map(|(&id, c)| {
                late.extend(c.late.drain(..).map(|(t, i)| (id, t, i)));
                let got = c.inputs.get(tick).copied();
                let started = c.first_input.is_some_and(|f| tick >= f);
                c.starved_bits = (c.starved_bits << 1) | u32::from(got.is_none() && started);
                let applied = match got {
                    Some(i) => {
                        c.stats.ticks_with_input += 1;
                        c.last_applied = Some(i);
                        c.missing_run = 0;
                        Some(i)
                    }
                    None => {
                        if started {
                            c.stats.ticks_starved += 1;
                        }
                        c.missing_run = c.missing_run.saturating_add(1);
                        let guess = match policy {
                            MissingInput::Hold => None,
                            MissingInput::RepeatLast => c.last_applied,
                            MissingInput::Guess => c.last_applied.map(|i| i.guess(c.missing_run)),
                        };
                        if guess.is_some() {
                            guessed.push(id);
                        }
                        guess
                    }
                };
                // Keep a window of applied ticks so late duplicates are recognised.
                c.inputs
                    .advance_floor(tick.next().saturating_sub(INPUT_HISTORY));
                (id, applied)
            })
            .collect();
        // A packet reordered on the way brings an older tick after a newer one.
        late.sort_by_key(|&(id, t, _)| (id, t));
        Some(TickInputs {
            tick,
            inputs,
            guessed,
            late,
        })
    }

    /// Sends a snapshot every `interval` ticks from now on (a live snapshot-rate change:
    /// clients measure the send interval from the ticks that arrive, so nothing else has
    /// to be told). Zero is taken as 1, since every tick is the most there can be.
    pub fn set_snapshot_interval(&mut self, interval: u32) {
        self.config.snapshot_interval = interval.max(1);
    }

    /// Names this run of the server [`ServerConfig::instance`] from now on (a host that
    /// draws it after the game built its server). Clients that already hold one of this
    /// server's snapshots are not told again; set it before the first client connects.
    pub fn set_instance(&mut self, instance: u32) {
        self.config.instance = instance;
    }

    /// True when a snapshot should be sent for the current state (every
    /// `snapshot_interval` ticks).
    pub fn snapshot_due(&self) -> bool {
        self.current_tick().0 % self.config.snapshot_interval == 0
    }

    /// Queues the game's snapshot of the current state for `id`, split into as many
    /// packets as needed. Every packet also carries the clock echo and the input ack, and
    /// the first one the client's message section ([`ServerSession::send_message`]), whose
    /// bytes [`ServerSession::message_bytes_sent`] counts.
    ///
    /// One snapshot per client per tick: a second one for the same tick is refused with
    /// [`ProtocolError::SnapshotAlreadySent`], since the client knows a snapshot by its
    /// tick and could not tell the two apart.
    pub fn send_snapshot(
        &mut self,
        id: ClientId,
        now: Duration,
        payload: &[u8],
    ) -> Result<(), ProtocolError> {
        self.queue_snapshot(id, now, None, payload)
    }

    /// Like [`ServerSession::send_snapshot`], but first sends `essential` as a standalone
    /// packet: the part the client needs every tick (its own player's state, say), which
    /// then arrives whenever that one packet does, however many fragments of the full
    /// snapshot are lost. `essential` must fit in one packet.
    pub fn send_snapshot_with_essential(
        &mut self,
        id: ClientId,
        now: Duration,
        essential: &[u8],
        payload: &[u8],
    ) -> Result<(), ProtocolError> {
        self.queue_snapshot(id, now, Some(essential), payload)
    }

    /// Queues an optional essential part (one packet) and the fragments of `payload`.
    /// Everything is checked before anything is queued, and the control data every packet
    /// repeats (clock echo, input ack) is computed once.
    fn queue_snapshot(
        &mut self,
        id: ClientId,
        now: Duration,
        essential: Option<&[u8]>,
        payload: &[u8],
    ) -> Result<(), ProtocolError> {
        if let Some(e) = essential.filter(|e| e.len() > FRAGMENT_PAYLOAD_BYTES) {
            return Err(ProtocolError::SnapshotTooLarge {
                len: e.len(),
                max: FRAGMENT_PAYLOAD_BYTES,
            });
        }
        let max = self
            .config
            .max_snapshot_bytes
            .min(255 * FRAGMENT_PAYLOAD_BYTES);
        if payload.len() > max {
            return Err(ProtocolError::SnapshotTooLarge {
                len: payload.len(),
                max,
            });
        }
        let current = self.current_tick();
        let tick_hz = self.config.tick_hz;
        let instance = self.config.instance;
        let checksum = self.config.checksum;
        let client = self
            .clients
            .get_mut(&id)
            .ok_or(ProtocolError::UnknownClient(id))?;
        if client.snapshot_sent == Some(current) {
            return Err(ProtocolError::SnapshotAlreadySent(current));
        }
        client.snapshot_sent = Some(current);
        let first = *client.first_snapshot.get_or_insert(current);
        // Until the client holds a snapshot of ours, so it can check it runs at our rate
        // and learn which server this is.
        let hello = client.snapshot_ack.is_none_or(|a| a < first || a > current);
        let policy = self.config.missing_input;
        let echo = client.echo.map(|(t, at)| PingEcho {
            client_time_us: t,
            hold_us: u32::try_from(now.saturating_sub(at).as_micros()).unwrap_or(u32::MAX),
        });
        // The report covers the messages since the last one; with none, the newest's.
        let slack = client.worst_slack.take().or(client.slack).unwrap_or(0.0);
        let input_ack = client.newest_input.map(|newest| {
            // Everything before the current tick is either held or useless now; at tick 0
            // nothing is before it.
            let mut through = current.0.checked_sub(1).map(Tick);
            loop {
                let next = through.map_or(Tick(0), Tick::next);
                if next > newest || !client.inputs.contains(next) {
                    break;
                }
                through = Some(next);
            }
            InputAck {
                // "Through tick -1" is the 16 bits below tick 0, which the client cannot
                // expand: it takes it as no acknowledgement.
                acked_through: through.map_or(Seq16(u16::MAX), Tick::to_wire),
                input_slack: (slack * 256.0).round().clamp(-1e9, 1e9) as i32,
                // The ticks before the current one: bit 0 is the newest simulated.
                starved: client.starved_bits,
                guessed: policy != MissingInput::Hold,
            }
        });
        // The message section rides fragment 0, out of its room, within the fragments the
        // largest snapshot may take, so a client configured as we are never refuses a
        // snapshot for its messages. Messages wait for room; only a snapshot within a
        // packet of that limit leaves less than any section needs.
        let max_room = max.div_ceil(FRAGMENT_PAYLOAD_BYTES).max(1) * FRAGMENT_PAYLOAD_BYTES;
        let room = max_room.saturating_sub(payload.len()).saturating_sub(2);
        let mut messages = client.channel.poll_packet_within(now, room);
        let section = messages.as_ref().map_or(0, |m| section_wire_len(m.len()));
        client.stats.message_bytes_sent += section as u64;
        // Every fragment but the last fills its room: fragment 0's room is what the section
        // leaves (never less than a few bytes), the others' is whole.
        let (head, tail) = payload.split_at(payload.len().min(FRAGMENT_PAYLOAD_BYTES - section));
        let chunks: Vec<&[u8]> = std::iter::once(head)
            .chain(tail.chunks(FRAGMENT_PAYLOAD_BYTES))
            .collect();
        let count = chunks.len() as u8;
        let parts = essential.map(|e| (e, 0, 1, true)).into_iter().chain(
            chunks
                .into_iter()
                .enumerate()
                .map(|(i, c)| (c, i as u8, count, false)),
        );
        for (chunk, index, count, essential) in parts {
            let frag = SnapshotFragment {
                seq: client.send_seq,
                tick: current.0,
                echo,
                input_ack,
                index,
                count,
                essential,
                tick_hz: hello.then_some(tick_hz as u16),
                server_instance: if hello { instance } else { 0 },
                messages: if essential { None } else { messages.take() },
                payload: chunk.to_vec(),
            };
            client.send_seq = client.send_seq.next();
            let mut w = Writer::with_capacity(chunk.len() + 32);
            frag.encode(&mut w);
            let mut bytes = w.into_bytes();
            if checksum {
                crate::integrity::seal(&mut bytes);
            }
            client.stats.packets_sent += 1;
            client.stats.bytes_sent += bytes.len() as u64;
            self.outbox.push_back((id, bytes));
        }
        Ok(())
    }

    /// The next packet to send, with its destination.
    pub fn poll_transmit(&mut self) -> Option<(ClientId, Vec<u8>)> {
        self.outbox.pop_front()
    }
}
