use crate::channel::{ChannelConfig, ChannelError, ChannelStats, Delivery, MessageChannel};
use crate::message::{
    FRAGMENT_PAYLOAD_BYTES, InputAck, InputMessage, MAX_PACKET_BYTES, PingEcho, SnapshotFragment,
    section_wire_len,
};
use crate::reassembly::{Assembled, Reassembler};
use crate::sync::{ClockAdjust, ClockSync, SyncConfig};
use crate::{FixedTimestep, Input, ProtocolError, RttEstimator, Tick, TickBuffer, TickRate};
use lagless_wire::{Seq16, Writer};
use std::collections::VecDeque;
use std::time::Duration;

/// Client settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Simulation rate; must equal the server's.
    pub tick_hz: u32,
    /// Most inputs one message carries (the redundancy cap). Must not exceed the server's
    /// `max_inputs_per_message`.
    pub max_inputs_per_message: usize,
    /// Ticks of input history kept (the Unity physics prediction article uses 1024 at
    /// 64 Hz).
    pub input_history_ticks: usize,
    /// Largest snapshot accepted, in bytes.
    pub max_snapshot_bytes: usize,
    /// Snapshots assembled in parallel.
    pub max_partial_snapshots: usize,
    /// Clock synchronisation.
    pub sync: SyncConfig,
    /// Most ticks run back to back after a stall.
    pub max_backlog_ticks: u32,
    /// The message channel ([`ClientSession::send_message`]): resend interval, queue
    /// bounds, and `max_packet_bytes`, the most a message section may take of an input
    /// message.
    pub channel: ChannelConfig,
    /// End every packet with a CRC-32 of the rest, and refuse a server packet whose own
    /// does not match before decoding it ([`ProtocolError::BadChecksum`]), for a
    /// transport that may deliver damaged bytes. Off by default: the sessions trust
    /// their transport's integrity, and netcode.io provides it. The server must be
    /// configured alike ([`crate::ServerConfig::checksum`]).
    pub checksum: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            tick_hz: 64,
            max_inputs_per_message: 32,
            input_history_ticks: 1024,
            max_snapshot_bytes: 64 * 1024,
            max_partial_snapshots: 4,
            sync: SyncConfig::default(),
            max_backlog_ticks: 8,
            channel: ChannelConfig::default(),
            checksum: false,
        }
    }
}

/// Client-side counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Packets received.
    pub packets_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Packets rejected as malformed, oversized, inconsistent or of unknown kind.
    pub packets_rejected: u64,
    /// Of those, packets announcing another tick rate
    /// ([`ProtocolError::TickRateMismatch`]).
    pub tick_rate_mismatches: u64,
    /// Complete snapshots delivered to the game.
    pub snapshots_received: u64,
    /// Fragments of snapshots older than one already delivered.
    pub stale_fragments: u64,
    /// Snapshots abandoned incomplete because newer ones arrived.
    pub snapshots_abandoned: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Inputs sent, counting every redundant copy.
    pub inputs_sent: u64,
    /// Times the clock jumped to resynchronise with the server.
    pub clock_jumps: u64,
    /// Packets whose server tick lay implausibly far from the server clock estimate (more
    /// than [`TICK_TRUST_SECS`] away): garbage, or a forgery. Also counted in
    /// `packets_rejected`.
    pub implausible_ticks: u64,
    /// Times the client dropped everything it had learned from the server's tick stamps
    /// (clock, acknowledgements, snapshots in progress, input history) and started over as
    /// if newly connected, because [`RESYNC_AFTER_PACKETS`] packets in a row agreed with
    /// each other and not with its estimate. The game should treat it like a reconnection:
    /// ticks restart from the server's.
    pub tick_resyncs: u64,
    /// Server packets that arrived far later than packets on this link do (they sat in a
    /// queue, as through an outage): their clock stamps and echoes were not used (see
    /// [`crate::SyncConfig::stale_margin_secs`]).
    pub stale_packets: u64,
    /// Bytes of message sections sent, length prefixes included (also in `bytes_sent`).
    pub message_bytes_sent: u64,
    /// Bytes of message sections received and taken, length prefixes included.
    pub message_bytes_received: u64,
    /// Packets refused because their message section was malformed
    /// ([`ProtocolError::Channel`]); also counted in `packets_rejected`.
    pub message_sections_rejected: u64,
    /// Times half a second of our input messages or more reached the server at once (an
    /// outage of the uplink, the queue let go): left out of the lead's statistics.
    pub uplink_outages: u64,
    /// Ticks the server reported it simulated without our input (it came too late, or
    /// was lost with every redundant copy), each counted once.
    pub ticks_starved: u64,
    /// Of those, ticks whose input the server applied (its guess, or none) differed from
    /// ours: the late inputs that cost a misprediction. Our input history holds what the
    /// server applied for them, so a replay through them matches the server.
    pub guesses_wrong: u64,
    /// Times a packet named another server instance than the one the client was playing
    /// with ([`crate::ServerConfig::instance`]): the server restarted, and the client
    /// started over at once (as for `tick_resyncs`, not counted there), its message
    /// channel too, since the new server's is new: messages the old server had not
    /// acknowledged are dropped.
    pub server_restarts: u64,
    /// Packets refused because their checksum did not match
    /// ([`ClientConfig::checksum`]); also counted in `packets_rejected`.
    pub checksum_failures: u64,
}

/// How far, in seconds of server ticks, a packet's tick may lie from where the client
/// expects the server's clock to be. Far beyond any network delay or server hitch, yet a
/// garbage tick (a uniformly random u32 is years away) can never slip through and pin the
/// newest-tick bookkeeping for good.
pub const TICK_TRUST_SECS: f64 = 10.0;

/// No packet from the server for this long is a silence of the link: for
/// [`TICK_TRUST_SECS`] after it, ticks as old as the newest heard before it are plausible
/// (what the link queued during it).
const SILENCE: Duration = Duration::from_millis(500);

/// Packets in a row that must contradict the client's server clock estimate, and agree
/// with each other, before the client believes them over it. One bogus packet can come
/// from anywhere; a steady stream that disagrees means the estimate itself came from a
/// bogus first packet, or the server restarted.
pub const RESYNC_AFTER_PACKETS: u32 = 8;

/// A complete snapshot from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSnapshot {
    /// The server tick of the state it describes.
    pub tick: Tick,
    /// The game's payload, as the server's game produced it.
    pub payload: Vec<u8>,
    /// True for an essential part (see
    /// [`crate::ServerSession::send_snapshot_with_essential`]); the full snapshot of the
    /// same tick may follow.
    pub essential: bool,
}

/// The client side: keeps its clock ahead of the server, records and sends inputs
/// redundantly, and reassembles snapshots.
///
/// Sans-IO, like [`crate::ServerSession`]: feed it packets and time, then drain ticks
/// ([`ClientSession::next_tick`]), snapshots ([`ClientSession::poll_snapshot`]) and packets
/// ([`ClientSession::poll_transmit`]).
pub struct ClientSession<I: Input> {
    config: ClientConfig,
    rate: TickRate,
    timestep: FixedTimestep,
    started: bool,
    last_update: Option<Duration>,
    /// The speed the clock ran at in the last update (1 when not adjusting), for
    /// [`ClientSession::poll_timeout`].
    speed: f64,
    rtt: RttEstimator,
    sync: ClockSync,
    last_echo: Option<u32>,
    newest_server_tick: Option<Tick>,
    newest_recv_seq: Option<Seq16>,
    inputs: TickBuffer<I>,
    newest_input: Option<Tick>,
    sent_through: Option<Tick>,
    /// First tick of the current unbroken run of produced ticks: ticks skipped by a clock
    /// jump had no input and are never sent.
    send_floor: Tick,
    acked_through: Option<Tick>,
    /// Newest snapshot the game reported holding ([`ClientSession::acknowledge_snapshot`]).
    snapshot_ack: Option<Tick>,
    /// The snapshots of the 32 ticks before it the game reported too: bit `i` is tick
    /// `snapshot_ack - 1 - i`.
    snapshot_acks: u32,
    last_slack_tick: Option<Tick>,
    reassembler: Reassembler,
    newest_essential: Option<Tick>,
    /// The first tick and length of the current run of packets that contradicted the
    /// server clock estimate.
    contradictions: Option<(Tick, u32)>,
    /// When the newest packet (with a plausible tick) arrived.
    last_packet_at: Option<Duration>,
    /// The last silence of the link: when it ended and the newest server tick heard
    /// before it (what a link that queued through it delivers first is newer).
    silence: Option<(Duration, Tick)>,
    snapshots: VecDeque<ReceivedSnapshot>,
    send_seq: Seq16,
    last_ping: Option<Duration>,
    /// Send stamp and lead (client position minus the server's position in the sync's
    /// fixed frame, [`ClockSync::frame_position`], ticks) of the last input messages, to
    /// turn the server's slack reports into needs.
    sent_leads: VecDeque<(u32, f64)>,
    /// The stamp of the last message a need was taken for.
    echoed_lead: Option<u32>,
    /// A server packet was lost since the last report used.
    report_lost: bool,
    /// Game messages both ways; kept through a [`ClientSession::resync`], which the server
    /// does not see: its channel state goes on.
    channel: MessageChannel,
    /// Ask the server for a snapshot against nothing, in every input message.
    resync_flag: bool,
    /// What the server's starved-tick reports have told so far.
    starved: StarvedTicks<I>,
    /// The server instance heard with the tick rate ([`crate::ServerConfig::instance`]).
    server_instance: Option<u32>,
    /// Times everything keyed on the server's ticks was forgotten ([`ClientSession::epoch`]).
    epoch: u64,
    stats: ClientStats,
}

/// The client's replay of the server's missing-input rule over the ticks reported.
#[derive(Debug, Clone)]
struct StarvedTicks<I> {
    /// The newest tick whose starved bit has been read.
    through: Option<Tick>,
    /// The newest ticks whose input the server applied differently from ours, oldest
    /// first (at most [`WRONG_TICKS`]).
    wrong: VecDeque<Tick>,
    /// Our input for the newest tick the server had it for (what it guesses from).
    last_delivered: Option<I>,
    /// Starved ticks in a row up to `through`.
    run: u32,
}

/// A jump forward of at most this many ticks is made by producing the ticks between at
/// once (a burst of simulation, as after a hitch); a longer one skips them.
pub const FAST_FORWARD_TICKS: f64 = 64.0;

/// Wrong-guessed ticks remembered for [`ClientSession::guesses_wrong_between`].
const WRONG_TICKS: usize = 256;

/// Most ticks one slack report stands for.
const MAX_TICKS_PER_REPORT: usize = 16;

/// Input messages whose lead is remembered: a few seconds' worth, longer than any RTT
/// worth synchronising over.
const SENT_LEADS: usize = 512;

impl<I: Input> ClientSession<I> {
    /// A client that has heard nothing from the server yet.
    ///
    /// # Panics
    /// If `config.tick_hz` is outside 1..=1000 or `input_history_ticks` is 0.
    pub fn new(config: ClientConfig) -> Self {
        let rate = TickRate::new(config.tick_hz);
        Self {
            timestep: FixedTimestep::new(rate, Tick(0), config.max_backlog_ticks),
            rate,
            started: false,
            last_update: None,
            speed: 1.0,
            rtt: RttEstimator::new(),
            sync: ClockSync::new(rate, config.sync),
            last_echo: None,
            newest_server_tick: None,
            newest_recv_seq: None,
            inputs: TickBuffer::new(config.input_history_ticks, Tick(0)),
            newest_input: None,
            sent_through: None,
            send_floor: Tick(0),
            acked_through: None,
            snapshot_ack: None,
            snapshot_acks: 0,
            last_slack_tick: None,
            newest_essential: None,
            contradictions: None,
            last_packet_at: None,
            silence: None,
            reassembler: reassembler(&config),
            snapshots: VecDeque::new(),
            send_seq: Seq16(0),
            last_ping: None,
            sent_leads: VecDeque::with_capacity(SENT_LEADS),
            echoed_lead: None,
            report_lost: false,
            channel: MessageChannel::new(config.channel.clone()),
            resync_flag: false,
            starved: StarvedTicks {
                through: None,
                wrong: VecDeque::new(),
                last_delivered: None,
                run: 0,
            },
            server_instance: None,
            epoch: 0,
            stats: ClientStats::default(),
            config,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        let mut s = self.stats.clone();
        s.snapshots_abandoned = self.reassembler.abandoned;
        s.stale_packets = self.sync.stale_packets();
        s
    }

    /// The clock synchroniser: the server clock estimate and the lead policy's state.
    pub fn clock_sync(&self) -> &ClockSync {
        &self.sync
    }

    /// The client clock's fractional position (its current tick plus the fraction of the
    /// next one accumulated).
    pub fn position(&self) -> f64 {
        self.timestep.position()
    }

    /// The RTT estimator (smoothed, deviation, min).
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// True once the clock runs in step with the server: ticks are being produced.
    pub fn is_synced(&self) -> bool {
        self.started
    }

    /// The next tick the client will produce: its current (predicted) tick.
    pub fn current_tick(&self) -> Tick {
        self.timestep.next_tick()
    }

    /// Fraction of the way to the next tick, for rendering between ticks.
    pub fn alpha(&self) -> f64 {
        self.timestep.alpha()
    }

    /// How many times the client forgot everything it knew keyed on the server's ticks: a
    /// resync ([`ClientStats::tick_resyncs`]), a server restart
    /// ([`ClientStats::server_restarts`]), a first tick found bogus. Whatever the game
    /// keyed on server ticks before it changed (decoded snapshots, interpolation, predicted
    /// history) belongs to another timeline and must go with it: the ticks that follow
    /// may be lower. `lagless-replication`'s `Client` follows it by itself.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The server instance the client is playing with, once heard
    /// ([`crate::ServerConfig::instance`]).
    pub fn server_instance(&self) -> Option<u32> {
        self.server_instance
    }

    /// The newest server tick seen in any packet.
    pub fn newest_server_tick(&self) -> Option<Tick> {
        self.newest_server_tick
    }

    /// The server's estimated fractional tick at `now`.
    pub fn server_position(&self, now: Duration) -> Option<f64> {
        self.sync.server_position(now)
    }

    /// The lead over the server the sync policy currently asks for, in ticks.
    pub fn target_lead_ticks(&self) -> f64 {
        self.sync.lead_ticks(&self.rtt)
    }

    /// How early our inputs reach the server, in ticks (smoothed mean of the server's
    /// reports); `None` before the first report.
    pub fn input_slack(&self) -> Option<f64> {
        self.sync.slack_mean()
    }

    /// The lead correction learned from the server's slack reports, in ticks.
    pub fn lead_correction(&self) -> f64 {
        self.sync.correction()
    }

    /// The newest tick the server acknowledged for inputs.
    pub fn acked_through(&self) -> Option<Tick> {
        self.acked_through
    }

    /// The input recorded for `tick`, if still in history.
    pub fn input(&self, tick: Tick) -> Option<I> {
        self.inputs.get(tick).copied()
    }

    /// Processes a packet from the server received at `now`. Errors mean the packet was
    /// dropped (and counted).
    ///
    /// Snapshot ticks travel in full (a fresh client has nothing to expand 16 bits
    /// against), so once the client has a server clock estimate, a packet stamped more than
    /// [`TICK_TRUST_SECS`] away from it is refused with [`ProtocolError::TickOutOfRange`]:
    /// one such packet must not pin the newest tick, the acknowledgements or snapshot
    /// reassembly on a tick the server will never reach. If
    /// [`RESYNC_AFTER_PACKETS`] packets in a row contradict the estimate and agree with
    /// each other, the estimate is what was wrong, and the client starts over from them
    /// ([`ClientStats::tick_resyncs`]).
    pub fn handle_packet(&mut self, now: Duration, bytes: &[u8]) -> Result<(), ProtocolError> {
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        let frag = self.decode_checked(now, bytes)?;
        let tick = Tick(frag.tick);
        self.take_messages(&frag)?;
        // See the server's SEQ_RESET_DISTANCE: a far older packet means the newest was bogus.
        let newest_packet = self
            .newest_recv_seq
            .is_none_or(|s| frag.seq.is_newer_than(s) || s.diff(frag.seq) > 1024);
        // A packet that sat in a queue (an outage) would drag the clock and the RTT back.
        let fresh = self.sync.is_fresh(now, tick);
        if newest_packet {
            self.take_newest_packet(now, tick, &frag, fresh);
        }
        self.track_server_tick(now, tick, fresh);
        self.deliver(tick, frag)
    }

    /// Decodes a packet and refuses it (counted) if it is malformed, from a server at
    /// another tick rate, or stamped with a tick it cannot be at.
    fn decode_checked(
        &mut self,
        now: Duration,
        bytes: &[u8],
    ) -> Result<SnapshotFragment, ProtocolError> {
        let bytes = match self.config.checksum.then(|| crate::integrity::open(bytes)) {
            None => bytes,
            Some(Ok(body)) => body,
            Some(Err(e)) => {
                self.stats.packets_rejected += 1;
                self.stats.checksum_failures += 1;
                return Err(e);
            }
        };
        let frag = match SnapshotFragment::decode(bytes) {
            Ok(f) => f,
            Err(e) => {
                self.stats.packets_rejected += 1;
                return Err(e);
            }
        };
        if let Some(theirs) = frag
            .tick_hz
            .map(u32::from)
            .filter(|&hz| hz != self.config.tick_hz)
        {
            self.stats.packets_rejected += 1;
            self.stats.tick_rate_mismatches += 1;
            return Err(ProtocolError::TickRateMismatch {
                ours: self.config.tick_hz,
                theirs,
            });
        }
        if frag.tick_hz.is_some() {
            self.take_instance(frag.server_instance);
        }
        let tick = Tick(frag.tick);
        // A server never gets there; a clock started from such a stamp would run into the
        // end of the tick range (see `Tick::LAST`).
        if tick > Tick::LAST || !self.tick_is_plausible(now, tick) {
            self.stats.packets_rejected += 1;
            self.stats.implausible_ticks += 1;
            let window = self.trust_window_ticks();
            let (low, high) = match self.sync.server_position(now) {
                Some(at) => ((at - window).max(0.0) as u32, (at + window) as u32),
                None => (0, Tick::LAST.0),
            };
            return Err(ProtocolError::TickOutOfRange {
                tick,
                low: Tick(low),
                high: Tick(high.min(Tick::LAST.0)),
            });
        }
        Ok(frag)
    }

    /// Hands the packet's message section, if any, to the channel.
    fn take_messages(&mut self, frag: &SnapshotFragment) -> Result<(), ProtocolError> {
        // Messages first: the channel checks the whole section before it takes anything,
        // and a packet whose section is bad is refused whole, snapshot part included. Any
        // packet's section counts, a stale or duplicated one's too: the channel orders and
        // deduplicates what it takes.
        if let Some(section) = &frag.messages {
            if let Err(e) = self.channel.handle_packet(section) {
                self.stats.packets_rejected += 1;
                self.stats.message_sections_rejected += 1;
                return Err(e.into());
            }
            self.stats.message_bytes_received += section_wire_len(section.len()) as u64;
        }
        Ok(())
    }

    /// What only the newest packet so far tells: loss before it, the echoed stamp (the
    /// RTT) and the input acknowledgement with its slack report.
    fn take_newest_packet(
        &mut self,
        now: Duration,
        tick: Tick,
        frag: &SnapshotFragment,
        fresh: bool,
    ) {
        // Packets lost just before this one may have carried a report: only if this one
        // echoes a newer message than the last heard. The echo never goes back, so a lost
        // packet between two with the same echo had it too, and reported nothing new (the
        // server heard no message in between). Counting such a loss as a lost report hid
        // an uplink outage with a downlink loss in it from the outage rule below, and
        // the outage's queued messages raised the lead by a second.
        let after_loss = self
            .newest_recv_seq
            .is_some_and(|s| frag.seq.is_newer_than(s) && frag.seq.diff(s) > 1);
        self.newest_recv_seq = Some(frag.seq);
        let new_echo = self.take_echo(now, frag.echo, fresh);
        if after_loss && new_echo.is_some() {
            self.report_lost = true;
        }
        if let Some(ack) = frag.input_ack {
            self.take_input_ack(now, tick, ack, new_echo);
        }
        if let Some(stamp) = new_echo {
            self.last_echo = Some(stamp);
        }
    }

    /// The echoed stamp if it is new; from a fresh packet, it also gives an RTT sample.
    fn take_echo(&mut self, now: Duration, echo: Option<PingEcho>, fresh: bool) -> Option<u32> {
        let mut new_echo = None;
        if let Some(echo) = echo {
            if self.last_echo != Some(echo.client_time_us) {
                new_echo = Some(echo.client_time_us);
            }
        }
        if let Some(echo) = echo.filter(|_| fresh) {
            if self.last_echo != Some(echo.client_time_us) {
                self.last_echo = Some(echo.client_time_us);
                let now_us = now.as_micros() as u32;
                let rtt_us = now_us
                    .wrapping_sub(echo.client_time_us)
                    .checked_sub(echo.hold_us);
                // A stamp from before a wrap of the 71-minute u32 clock, or garbage, would
                // give an absurd RTT: ignore anything over 10 s, and a hold longer than
                // the whole round trip.
                if let Some(rtt_us) = rtt_us.filter(|&r| r < 10_000_000) {
                    self.rtt
                        .add_sample(Duration::from_micros(u64::from(rtt_us)));
                }
            }
        }
        new_echo
    }

    /// Takes the server's input acknowledgement and its slack report.
    fn take_input_ack(&mut self, now: Duration, tick: Tick, ack: InputAck, new_echo: Option<u32>) {
        // Never past what was sent: a bogus ack far ahead would otherwise silence
        // every input until the clock caught up with it.
        let acked = Tick::from_wire(ack.acked_through, tick)
            .zip(self.sent_through)
            .map(|(t, sent)| t.min(sent));
        if let Some(t) = acked {
            self.acked_through = Some(self.acked_through.map_or(t, |a| a.max(t)));
        }
        self.take_starved(tick, ack);
        // Every fragment of a snapshot repeats the report: use it once.
        if self.last_slack_tick.is_none_or(|t| tick > t) {
            self.last_slack_tick = Some(tick);
            let position = self.timestep.position_after(
                self.last_update
                    .map_or(Duration::ZERO, |t| now.saturating_sub(t)),
            );
            let slack = f64::from(ack.input_slack) / 256.0;
            self.sync.on_input_slack(now, slack, position, &self.rtt);
        }
        self.take_lead_report(ack, new_echo);
    }

    /// Reads which of the ticks before `tick` the server simulated without our input,
    /// each once, oldest first, and puts what it applied for them into our input history
    /// (its guess from our last input it had, or none), counting the ticks where that
    /// differs from ours.
    fn take_starved(&mut self, tick: Tick, ack: InputAck) {
        let first = tick.saturating_sub(32);
        let from = match self.starved.through {
            Some(t) if t >= first => t.next(),
            // A gap longer than the report spans (or the first report): the run and the
            // last input the server had are unknown; start afresh.
            _ => {
                self.starved.run = 0;
                self.starved.last_delivered = None;
                first
            }
        };
        let mut t = from;
        while t < tick {
            let bit = (tick.diff(t) - 1) as u32;
            let own = self.inputs.get(t).copied();
            if ack.starved >> bit & 1 == 0 {
                self.starved.run = 0;
                if own.is_some() {
                    self.starved.last_delivered = own;
                }
            } else {
                self.starved.run = self.starved.run.saturating_add(1);
                self.stats.ticks_starved += 1;
                let applied = if ack.guessed {
                    let run = self.starved.run;
                    self.starved.last_delivered.map(|i| i.guess(run))
                } else {
                    None
                }
                .unwrap_or_default();
                if let Some(slot) = self.inputs.get_mut(t).filter(|i| **i != applied) {
                    *slot = applied;
                    self.stats.guesses_wrong += 1;
                    if self.starved.wrong.len() >= WRONG_TICKS {
                        self.starved.wrong.pop_front();
                    }
                    self.starved.wrong.push_back(t);
                }
            }
            self.starved.through = Some(t);
            t = t.next();
        }
    }

    /// How many ticks after `after` and through `through` the server applied another
    /// input than ours for ([`ClientStats::guesses_wrong`]), among the newest
    /// 256: a reconciliation across them corrects a late input, not the
    /// prediction's horizon.
    pub fn guesses_wrong_between(&self, after: Tick, through: Tick) -> u32 {
        self.starved
            .wrong
            .iter()
            .filter(|t| **t > after && **t <= through)
            .count() as u32
    }

    /// Tells the felt lead policy ([`crate::LeadPolicy::Felt`]) what a tick of lead and a
    /// late input cost the player, in one unit per tick of play: `per_lead_tick`, what a
    /// tick more of prediction adds to its error; `per_wrong_tick`, what one tick whose
    /// input the server got wrong costs. A starved tick costs the second times the share
    /// of starved ticks the server got wrong so far (with one wrong and one right
    /// counted in before any are seen). Other policies ignore it.
    pub fn set_lead_costs(&mut self, per_lead_tick: f64, per_wrong_tick: f64) {
        let wrong =
            (self.stats.guesses_wrong as f64 + 1.0) / (self.stats.ticks_starved as f64 + 2.0);
        self.sync
            .set_lead_costs(per_lead_tick, per_wrong_tick * wrong);
    }

    /// Tells the clock sync what lead the inputs the report covers needed.
    fn take_lead_report(&mut self, ack: InputAck, new_echo: Option<u32>) {
        // The slack is that of the message whose stamp the server echoes: a new
        // stamp is a new message's report, and the lead it was sent with tells
        // what lead it needed.
        // The report covers the messages since the one echoed before (one a tick):
        // it stands for that many ticks, or a bunch of messages that arrived
        // together behind a late one would count as one tick.
        let sent_with = new_echo.and_then(|stamp| {
            let at = self.sent_leads.iter().rposition(|(t, _)| *t == stamp)?;
            let previous = self
                .echoed_lead
                .and_then(|p| self.sent_leads.iter().take(at).rposition(|(t, _)| *t == p));
            // If a report was lost since, its ticks are not all this one's: count
            // this one's worst once rather than make up the rest, unless it came
            // late. A late worst tick has its inputs arrive in a bunch with the
            // ticks after it, each a tick less late: it stands for as many ticks
            // as it was late. Reports go missing most in a link's bad spells,
            // which are when inputs come late: counted once, a `mobile` run's
            // reports showed a third of the ticks the server starved, and the
            // starvation loop never saw the rest.
            let late_ticks = (-f64::from(ack.input_slack) / 256.0).ceil();
            let ticks = match (previous, self.report_lost) {
                (Some(p), false) => (at - p).clamp(1, MAX_TICKS_PER_REPORT),
                _ if late_ticks >= 1.0 => (late_ticks.min(MAX_TICKS_PER_REPORT as f64)) as usize,
                _ => 1,
            };
            // Half a second of messages or more reached the server between two of its
            // reports, which it sends every tick: the uplink held them and let them go
            // at once. That is an outage, which no input buffer rides out; as a need it
            // would have the lead chase it (a cellular trace's outages of seconds set
            // leads of a second). It is left out of the lead, and counted.
            let outage = previous.is_some_and(|p| at - p >= (self.rate.hz() as usize / 2).max(4));
            Some((
                self.sent_leads[at].1,
                ticks,
                stamp,
                outage && !self.report_lost,
            ))
        });
        if let Some((lead, ticks, stamp, outage)) = sent_with {
            self.echoed_lead = Some(stamp);
            self.report_lost = false;
            if outage {
                self.stats.uplink_outages += 1;
                return;
            }
            let slack = f64::from(ack.input_slack) / 256.0;
            self.sync.on_need(lead - slack, slack, ticks);
        }
    }

    /// Moves the newest server tick and the clock estimate on with the packet's tick.
    fn track_server_tick(&mut self, now: Duration, tick: Tick, fresh: bool) {
        if self.newest_server_tick.is_none_or(|n| tick > n) {
            self.newest_server_tick = Some(tick);
        }
        if fresh {
            self.sync.on_server_tick(now, tick, &self.rtt);
        }
        if self.clock_contradicts(now, self.newest_server_tick) {
            // A tick from before the clock existed, far ahead of it: the estimate just
            // formed from this packet is the better word, and everything keyed on the
            // bogus tick (newest tick, acks, snapshots in progress) would wait for it.
            self.forget_server_ticks();
            self.newest_server_tick = Some(tick);
        }
    }

    /// Hands over the packet's snapshot part: an essential part at once if it is newer
    /// than anything delivered, a fragment to reassembly.
    fn deliver(&mut self, tick: Tick, frag: SnapshotFragment) -> Result<(), ProtocolError> {
        if frag.essential {
            // Newer than any essential part or full snapshot delivered: hand it over now.
            let newer_than_full = self.reassembler.newest_complete().is_none_or(|n| tick > n);
            if newer_than_full && self.newest_essential.is_none_or(|n| tick > n) {
                self.newest_essential = Some(tick);
                self.push_snapshot(ReceivedSnapshot {
                    tick,
                    payload: frag.payload,
                    essential: true,
                });
            } else {
                self.stats.stale_fragments += 1;
            }
            return Ok(());
        }
        match self.reassembler.push(tick, frag) {
            Ok(Assembled::Complete(tick, payload)) => {
                self.stats.snapshots_received += 1;
                self.push_snapshot(ReceivedSnapshot {
                    tick,
                    payload,
                    essential: false,
                });
                Ok(())
            }
            Ok(Assembled::Pending) => Ok(()),
            Ok(Assembled::Stale) => {
                self.stats.stale_fragments += 1;
                Ok(())
            }
            Err(e) => {
                self.stats.packets_rejected += 1;
                Err(e)
            }
        }
    }

    /// True when `tick` lies within [`TICK_TRUST_SECS`] of the server clock estimate, or
    /// there is none yet. After [`RESYNC_AFTER_PACKETS`] contradicting packets that agree
    /// with each other, the client starts over ([`ClientSession::resync`]) and takes the
    /// packet as its first.
    fn tick_is_plausible(&mut self, now: Duration, tick: Tick) -> bool {
        if let (Some(last), Some(newest)) = (self.last_packet_at, self.newest_server_tick) {
            if now.saturating_sub(last) >= SILENCE {
                self.silence = Some((now, newest));
            }
        }
        if !self.clock_contradicts(now, Some(tick)) {
            self.last_packet_at = Some(self.last_packet_at.map_or(now, |l| l.max(now)));
            self.contradictions = None;
            return true;
        }
        let window = self.trust_window_ticks();
        let run = match self.contradictions {
            Some((first, n)) if f64::from(first.0.abs_diff(tick.0)) <= window => (first, n + 1),
            _ => (tick, 1),
        };
        if run.1 < RESYNC_AFTER_PACKETS {
            self.contradictions = Some(run);
            return false;
        }
        self.resync();
        self.stats.tick_resyncs += 1;
        true
    }

    /// Starts over as a new connection (a reconnection, given a new slot on the server):
    /// the clock, the input history, everything keyed on the server's ticks
    /// ([`ClientSession::epoch`] moves) and the message channel go, since the new slot's
    /// are new; queued messages are dropped. Settings, counters and the RTT estimate stay.
    pub fn restart(&mut self) {
        self.resync();
        self.channel = MessageChannel::new(self.config.channel.clone());
        self.server_instance = None;
    }

    /// Notes the server instance a packet names; another than the one played with means
    /// the server restarted: its ticks, acknowledgements and message channel are new, and
    /// the client starts over at once rather than wait for its ticks to contradict the
    /// clock (they may not, after a short run).
    fn take_instance(&mut self, instance: u32) {
        if self.server_instance.is_some_and(|i| i != instance) {
            self.restart();
            self.stats.server_restarts += 1;
        }
        self.server_instance = Some(instance);
    }

    /// [`TICK_TRUST_SECS`] in ticks.
    fn trust_window_ticks(&self) -> f64 {
        TICK_TRUST_SECS * f64::from(self.config.tick_hz)
    }

    /// True when the server clock estimate exists and `tick` lies farther from it than
    /// [`TICK_TRUST_SECS`]: ahead of it, or behind both it and the newest tick heard.
    ///
    /// Behind the estimate, the span the server went through while the client heard
    /// nothing is plausible too: a link that queued through an outage delivers what the
    /// server sent at its start, as old as the outage was long. Those packets agree with
    /// each other, so after a 15 s outage they were believed over the clock: the
    /// session started over (its clock, its inputs, the game's interpolation) just as the
    /// fresh ones were about to arrive.
    fn clock_contradicts(&self, now: Duration, tick: Option<Tick>) -> bool {
        match (self.sync.server_position(now), tick) {
            (Some(expected), Some(t)) => {
                let t = f64::from(t.0);
                let window = self.trust_window_ticks();
                let heard = self
                    .newest_server_tick
                    .map_or(expected, |n| expected.min(f64::from(n.0)));
                // The newest tick may already be a fresh one that overtook the queue.
                let heard = match self.silence {
                    Some((ended, before))
                        if now.saturating_sub(ended).as_secs_f64() < TICK_TRUST_SECS =>
                    {
                        heard.min(f64::from(before.0))
                    }
                    _ => heard,
                };
                t > expected + window || t < heard - window
            }
            _ => false,
        }
    }

    /// Forgets what was keyed on the server's ticks: the newest tick, input and snapshot
    /// acknowledgements, and snapshots in progress or waiting.
    fn forget_server_ticks(&mut self) {
        self.newest_server_tick = None;
        self.acked_through = None;
        self.last_slack_tick = None;
        self.reassembler = reassembler(&self.config);
        self.newest_essential = None;
        self.snapshots.clear();
        self.silence = None;
        self.epoch += 1;
    }

    /// Starts over as if newly connected, keeping the settings, the counters, the RTT
    /// estimate and the outgoing sequence: the clock, the input history and everything
    /// keyed on server ticks go.
    fn resync(&mut self) {
        self.forget_server_ticks();
        self.sync = ClockSync::new(self.rate, self.config.sync);
        self.started = false;
        self.newest_recv_seq = None;
        self.inputs = TickBuffer::new(self.config.input_history_ticks, Tick(0));
        self.newest_input = None;
        self.sent_through = None;
        self.send_floor = Tick(0);
        self.snapshot_ack = None;
        self.snapshot_acks = 0;
        self.contradictions = None;
        self.sent_leads.clear();
        self.echoed_lead = None;
    }

    fn push_snapshot(&mut self, snapshot: ReceivedSnapshot) {
        // The game only ever wants the newest; keep a few in case it drains slowly.
        if self.snapshots.len() >= 8 {
            self.snapshots.pop_front();
        }
        self.snapshots.push_back(snapshot);
    }

    /// Advances the client clock to `now`, running slightly fast or slow (or jumping) to
    /// hold the lead the sync policy asks for.
    pub fn update(&mut self, now: Duration) {
        let elapsed = self
            .last_update
            .map_or(Duration::ZERO, |t| now.saturating_sub(t));
        self.last_update = Some(now);
        let projected = self.timestep.position() + self.rate.ticks_in(elapsed);
        self.speed = 1.0;
        match self.sync.adjust(now, projected, &self.rtt) {
            ClockAdjust::Wait => {}
            ClockAdjust::Jump(target)
                if self.started && target - projected <= FAST_FORWARD_TICKS =>
            {
                // Produce the ticks between at once rather than skip them: their inputs
                // still go out, ahead of the server, and it never starves of them.
                self.timestep.accumulate(elapsed);
                let gap = target - self.timestep.position();
                self.timestep.fast_forward(gap);
                self.stats.clock_jumps += 1;
            }
            ClockAdjust::Jump(target) => {
                let tick = Tick::from_position(target);
                // Never move backwards: ticks already produced keep their inputs.
                if !self.started || tick > self.timestep.next_tick() {
                    self.timestep.reset(tick, target.fract());
                    if self.started {
                        self.stats.clock_jumps += 1;
                    }
                    self.send_floor = tick;
                }
                self.started = true;
            }
            ClockAdjust::Run(speed) if self.started => {
                if speed.is_finite() && speed > 0.0 {
                    self.speed = speed;
                }
                self.timestep.accumulate(elapsed.mul_f64(speed));
            }
            ClockAdjust::Run(_) => {
                // First synchronisation: start exactly at the target.
                if let Some(target) = self.sync.target_position(now, &self.rtt) {
                    let tick = Tick::from_position(target);
                    self.timestep.reset(tick, target.fract());
                    self.send_floor = tick;
                    self.started = true;
                }
            }
        }
    }

    /// When the session next has work, on the clock [`ClientSession::update`] is given
    /// (`None` before the first update): the next tick at the clock's present speed, or,
    /// before the clock is synchronised, the next ping. A loop that sleeps calls
    /// `update` then (and drains [`ClientSession::next_tick`] and
    /// [`ClientSession::poll_transmit`]); packets that arrive meanwhile are work too.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let last = self.last_update?;
        if !self.started {
            let ping = self.last_ping.map_or(last, |t| t + self.rate.period());
            return Some(ping.max(last));
        }
        Some(last + self.timestep.until_next_tick().div_f64(self.speed))
    }

    /// The next tick to produce, if one is due. The game samples input for it and passes
    /// it to [`ClientSession::set_input`].
    pub fn next_tick(&mut self) -> Option<Tick> {
        // The clock stops at the end of the tick range rather than saturate there.
        if !self.started || self.timestep.next_tick() > Tick::LAST {
            return None;
        }
        self.timestep.pop_tick()
    }

    /// Records the input for `tick` (normally the tick just returned by
    /// [`ClientSession::next_tick`]); it will be sent, redundantly, until acknowledged.
    pub fn set_input(&mut self, tick: Tick, input: I) {
        if self.inputs.insert_advancing(tick, input).is_ok() {
            self.newest_input = Some(self.newest_input.map_or(tick, |n| n.max(tick)));
        }
    }

    /// Reports that the game decoded and kept the snapshot of `tick`, so the server may
    /// delta-encode later snapshots against it (the `lagless-replication` crate does). Every input
    /// message carries the newest tick reported and which of the 32 ticks before it were
    /// reported too, so the server learns of every snapshot that arrived (and, from the
    /// gaps, of every one that did not); a report older than that is left out.
    ///
    /// Call it only for snapshots the game can use as a baseline: not for essential parts,
    /// and not for snapshots that failed to decode. A game that never calls it is never
    /// sent a delta against anything, which is always safe.
    pub fn acknowledge_snapshot(&mut self, tick: Tick) {
        match self.snapshot_ack {
            None => {
                self.snapshot_ack = Some(tick);
                self.snapshot_acks = 0;
            }
            Some(a) if tick > a => {
                // The old newest becomes bit `d - 1`; what falls past bit 31 is dropped.
                let d = u64::from(tick.0 - a.0);
                let bits = (u64::from(self.snapshot_acks) << d.min(63)) | (1u64 << (d - 1).min(63));
                self.snapshot_acks = bits as u32;
                self.snapshot_ack = Some(tick);
            }
            Some(a) if tick < a && a.0 - tick.0 <= 32 => {
                self.snapshot_acks |= 1 << (a.0 - tick.0 - 1);
            }
            Some(_) => {}
        }
    }

    /// The newest snapshot tick reported with [`ClientSession::acknowledge_snapshot`].
    pub fn snapshot_ack(&self) -> Option<Tick> {
        self.snapshot_ack
    }

    /// Which of the 32 ticks before [`Self::snapshot_ack`] were reported too: bit `i` is
    /// tick `snapshot_ack - 1 - i`. What every input message carries beside the newest.
    pub fn snapshot_acks(&self) -> u32 {
        self.snapshot_acks
    }

    /// The next complete snapshot, oldest first (stale ones were already dropped).
    pub fn poll_snapshot(&mut self) -> Option<ReceivedSnapshot> {
        self.snapshots.pop_front()
    }

    /// Queues a game message for the server. It rides the next input messages
    /// ([`ClientSession::poll_transmit`]) with room for it: a reliable one until the
    /// server acknowledges it, an unreliable one once, in the next input message with
    /// room for it (dropped if none has within
    /// [`ChannelConfig::unreliable_max_wait`](crate::ChannelConfig::unreliable_max_wait),
    /// see [`ChannelStats::unreliable_dropped`]).
    ///
    /// Refused when the message is empty or larger than
    /// [`MessageChannel::max_message_bytes`] (1024 bytes by default), or when its queue
    /// is full (the server is not acknowledging, or unreliable messages are queued faster
    /// than input messages go out).
    ///
    /// Input messages leave once per tick when synchronised (and once per tick period
    /// before), so do messages; none are sent while the game records no input.
    pub fn send_message(&mut self, delivery: Delivery, bytes: &[u8]) -> Result<(), ChannelError> {
        self.channel.send_with(delivery, bytes)
    }

    /// The next game message from the server and how it was sent: reliable ones exactly
    /// once and in the order sent, unreliable ones at most once as they arrived.
    pub fn poll_message(&mut self) -> Option<(Delivery, Vec<u8>)> {
        self.channel.recv_with_delivery()
    }

    /// The message channel's counters (messages sent, resent, delivered, dropped).
    pub fn message_stats(&self) -> &ChannelStats {
        self.channel.stats()
    }

    /// The message channel, for its queue lengths and limits.
    pub fn channel(&self) -> &MessageChannel {
        &self.channel
    }

    /// While set, every input message asks the server for a snapshot that is not a delta
    /// against anything the client acknowledged (it lost or dropped its baselines, say);
    /// the server sees it in [`crate::ServerSession::resync_requested`]. Clear it once a
    /// snapshot the game can build on has arrived.
    pub fn set_resync(&mut self, resync: bool) {
        self.resync_flag = resync;
    }

    /// Whether input messages ask the server for a resync ([`ClientSession::set_resync`]).
    pub fn wants_resync(&self) -> bool {
        self.resync_flag
    }

    /// The next packet to send: an input message whenever new input was recorded, or a
    /// ping once per tick period before synchronisation.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Vec<u8>> {
        let has_new = match (self.newest_input, self.sent_through) {
            (Some(n), Some(s)) => n > s,
            (Some(_), None) => true,
            _ => false,
        };
        let ping_due = self
            .last_ping
            .is_none_or(|t| now.saturating_sub(t) >= self.rate.period());
        if !has_new && (self.started || !ping_due) {
            return None;
        }
        self.last_ping = Some(now);
        let mut inputs = Vec::new();
        let mut start = Tick(0);
        // Ticks this message sends for the first time, beyond one.
        let mut produced_late = 0.0;
        if let Some(newest) = self.newest_input {
            if let Some(before) = self.sent_through {
                produced_late = (newest.diff(before) - 1).clamp(0, i64::from(u16::MAX)) as f64;
            }
            let cap = self.config.max_inputs_per_message.max(1) as u32;
            let first_unacked = self.acked_through.map_or(Tick(0), Tick::next);
            // Always at least the newest input: a message without one tells the server
            // nothing about how early inputs arrive. Acks taken no further than what was
            // sent already keep `first_unacked` at or below `newest`; this keeps it so
            // should the ack rule ever change.
            start = first_unacked
                .max(newest.saturating_sub(cap - 1))
                .max(self.inputs.floor())
                .max(self.send_floor)
                .min(newest);
            // Defensive: every tick from send_floor on was produced, so none is missing.
            inputs.extend(
                start
                    .through(newest)
                    .map(|t| self.inputs.get(t).copied().unwrap_or_default()),
            );
            self.sent_through = Some(newest);
        }
        let stamp = now.as_micros() as u32;
        if let (true, Some(server)) = (!inputs.is_empty(), self.sync.frame_position(now)) {
            if self.sent_leads.len() >= SENT_LEADS {
                self.sent_leads.pop_front();
            }
            // The server reports the least slack of the ticks that first arrived: with
            // several produced at once (the clock catching up), the oldest, which left
            // with a lead that much shorter than the newest's. A need taken against the
            // newest's lead was too high by as many ticks (30 after a burst of queued
            // packets at the start), and stayed in the window for minutes.
            self.sent_leads
                .push_back((stamp, self.timestep.position() - server - produced_late));
        }
        let mut msg = InputMessage {
            seq: self.send_seq,
            client_time_us: stamp,
            snapshot_ack: self.snapshot_ack.map(Tick::to_wire),
            snapshot_acks: if self.snapshot_ack.is_some() {
                self.snapshot_acks
            } else {
                0
            },
            start_tick: start.to_wire(),
            inputs,
            // Until the client holds a snapshot, so the server can check our rate.
            tick_hz: self
                .snapshot_ack
                .is_none()
                .then_some(self.config.tick_hz as u16),
            resync: self.resync_flag,
            messages: None,
        };
        self.send_seq = self.send_seq.next();
        let mut w = Writer::with_capacity(64);
        msg.encode(&mut w);
        // The section goes last, in what room the rest leaves (less its length prefix,
        // two bytes for any section).
        let room = MAX_PACKET_BYTES.saturating_sub(w.len() + 2);
        if let Some(section) = self.channel.poll_packet_within(now, room) {
            self.stats.message_bytes_sent += section_wire_len(section.len()) as u64;
            msg.messages = Some(section);
            // Encoded again rather than appended: the flags byte says a section follows.
            w = Writer::with_capacity(w.len() + 2 + msg.messages.as_ref().map_or(0, Vec::len));
            msg.encode(&mut w);
        }
        let mut bytes = w.into_bytes();
        if self.config.checksum {
            crate::integrity::seal(&mut bytes);
        }
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += bytes.len() as u64;
        self.stats.inputs_sent += msg.inputs.len() as u64;
        Some(bytes)
    }
}

/// A reassembler sized by `config`.
fn reassembler(config: &ClientConfig) -> Reassembler {
    let max_fragments = config.max_snapshot_bytes.div_ceil(FRAGMENT_PAYLOAD_BYTES);
    Reassembler::new(config.max_partial_snapshots, max_fragments)
}
