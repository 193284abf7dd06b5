//! The game server's side of the high-level API.

use super::{MAX_SNAPSHOT_EVENT_BYTES, NetConfig, NetError};
use crate::ReplicationError;
use crate::deadreckoning::{CharacterState, DrCodec, DrMessage, DrServer, Motion, PollRoom};
use crate::schema::{KindId, Schema};
use crate::server::{
    CellConfig, ClientReplicationStats, Interest, ReplicationConfig, ReplicationServer,
};
use crate::state::StateWriter;
use lagless_core::message::FRAGMENT_PAYLOAD_BYTES;
use lagless_core::{ClientId, Delivery, Input, ServerClientStats, ServerSession, Tick, TickInputs};
use lagless_wire::{BitWriter, Writer};
use std::collections::BTreeMap;
use std::time::Duration;

/// An authoritative game server: the core's [`ServerSession`] (inputs in, clock,
/// snapshots out) with a [`ReplicationServer`] (what each client is sent).
///
/// The game's loop:
/// ```text
/// for (client, bytes) in packets { server.receive(client, now, &bytes) }
/// server.update(now);
/// while let Some(step) = server.next_tick() {
///     world.step(&step.inputs);              // the game's own simulation
///     server.update_entity(id, |w| ...)?;    // write what changed (spawn, despawn too)
///     server.send_snapshots(now)?;           // encodes and queues them when one is due
/// }
/// while let Some((client, bytes)) = server.poll_transmit() { send(client, bytes) }
/// ```
///
/// It trusts its transport's integrity: a packet arrives as it was sent, or not at all
/// (netcode.io, under `lagless_transport::GameServer`, authenticates every packet). Over
/// a transport that may damage bytes, turn the sessions' checksum on at both ends
/// (`NetConfig::server_session.checksum`, `client_session.checksum`; `docs/sessions.md`,
/// "Integrity"): damaged packets are then refused before decoding.
pub struct Server<I: Input> {
    session: ServerSession<I>,
    replication: ReplicationServer,
    dead_reckoning: Option<(DrServer, DrCodec)>,
    /// [`crate::deadreckoning::DrConfig::budget_share`], clamped to 0..=1.
    dr_share: Option<f32>,
    relevant: Option<Box<CharacterRelevance>>,
    /// Per client, the message bytes its session had sent at the last snapshot.
    message_bytes: BTreeMap<ClientId, u64>,
    /// Per client, the events to ride in front of its next snapshot (`None`: snapshots
    /// carry no events, [`NetConfig::snapshot_events`]).
    events: Option<BTreeMap<ClientId, Vec<u8>>>,
    /// What went out with each client's snapshots.
    counters: BTreeMap<ClientId, SnapshotCounters>,
    /// Whether fragmented snapshots are preceded by an essential part.
    essential_parts: bool,
    now: Duration,
}

/// What [`Server::send_snapshots`] sent one client besides the replication bytes (those
/// are counted in [`Server::replication_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotCounters {
    /// Snapshots sent.
    pub snapshots: u64,
    /// Of those, needing more than one packet.
    pub fragmented: u64,
    /// Essential parts sent before fragmented snapshots.
    pub essential: u64,
    /// Bytes of snapshot events ([`Server::set_snapshot_events`]).
    pub event_bytes: u64,
    /// Dead-reckoning messages sent.
    pub dead_reckoning_messages: u64,
    /// Bits of the dead-reckoning batches (their counts included).
    pub dead_reckoning_bits: u64,
}

/// A departed client's counters over its whole connection, as [`Server::disconnect`]
/// hands them back: for the game's logs, or totals that include the clients that left.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DepartedClient {
    /// The session's counters (packets, inputs, starvation).
    pub session: ServerClientStats,
    /// The replication layer's (entities, bytes, budget).
    pub replication: ClientReplicationStats,
    /// What was sent beside the replication bytes.
    pub snapshots: SnapshotCounters,
}

/// What the server measured of one client's latency: its own observations, never what
/// the client claims. A lag compensator's allowance (how old a view a shot may be judged
/// in) is about `rtt + input_slack + k * snapshot_interval - tick`, with `k` the
/// snapshots the client's interpolation buffer holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    /// The round trip of snapshots, from sending one to its acknowledgement arriving
    /// (smoothed); `None` before the first acknowledgement.
    pub rtt: Option<Duration>,
    /// How long before it was needed the client's newest input arrived (zero when
    /// late); `None` before any input.
    pub input_slack: Option<Duration>,
    /// The time between two snapshots.
    pub snapshot_interval: Duration,
    /// The tick period. The input slack runs until the server steps the input's tick
    /// `N`, one tick after the state `N` that step starts from was made: a rewind
    /// counted from state `N` is a tick shorter.
    pub tick: Duration,
}

/// Which characters a client hears of by dead reckoning: `(client, character) -> bool`.
pub type CharacterRelevance = dyn Fn(ClientId, u32) -> bool + Send + Sync;

impl<I: Input> Server<I> {
    /// A server replicating `schema`'s kinds (the clients build the same schema).
    pub fn new(schema: Schema, config: &NetConfig) -> Result<Self, NetError> {
        config.check()?;
        let session = ServerSession::new(lagless_core::ServerConfig {
            tick_hz: config.tick_hz,
            snapshot_interval: config.snapshot_interval(),
            ..config.server_session.clone()
        });
        let replication = ReplicationServer::new(
            schema,
            ReplicationConfig {
                tick_hz: config.tick_hz,
                snapshot_hz: f64::from(config.tick_hz) / f64::from(config.snapshot_interval()),
                budget: config.budget,
                max_snapshot_bytes: config.server_session.max_snapshot_bytes,
                ..config.replication.clone()
            },
        );
        Ok(Self {
            session,
            replication,
            dead_reckoning: config
                .dead_reckoning
                .map(|c| (DrServer::new(c.sender), c.codec)),
            dr_share: config.dead_reckoning.and_then(|c| c.budget_share).map(|s| {
                if s.is_finite() {
                    s.clamp(0.0, 1.0)
                } else {
                    0.0
                }
            }),
            relevant: None,
            message_bytes: BTreeMap::new(),
            events: config.snapshot_events.then(BTreeMap::new),
            counters: BTreeMap::new(),
            essential_parts: config.essential_parts,
            now: Duration::ZERO,
        })
    }

    /// Accepts client `id` (after the game's own authentication, or the transport's).
    pub fn connect(&mut self, id: ClientId) -> Result<(), NetError> {
        self.session.add_client(id)?;
        self.replication.add_client(id);
        if let Some((dr, _)) = &mut self.dead_reckoning {
            dr.add_client(id);
        }
        Ok(())
    }

    /// Forgets client `id` (disconnected or timed out) and returns its counters over the
    /// connection (`None` for a client it did not know). Its entities stay: despawn them
    /// if the game wants.
    pub fn disconnect(&mut self, id: ClientId) -> Option<DepartedClient> {
        let departed = self.session.client_stats(id).map(|s| DepartedClient {
            session: s.clone(),
            replication: self.replication_stats(id).unwrap_or_default(),
            snapshots: self.counters.get(&id).copied().unwrap_or_default(),
        });
        self.session.remove_client(id);
        self.replication.remove_client(id);
        self.message_bytes.remove(&id);
        self.counters.remove(&id);
        if let Some(events) = &mut self.events {
            events.remove(&id);
        }
        if let Some((dr, _)) = &mut self.dead_reckoning {
            dr.remove_client(id);
        }
        departed
    }

    /// Takes in a packet from client `id`. Errors mean it was dropped (and counted).
    pub fn receive(&mut self, id: ClientId, now: Duration, bytes: &[u8]) -> Result<(), NetError> {
        let result = self.session.handle_packet(id, now, bytes);
        if self.session.resync_requested(id) {
            // The client refused a snapshot whose view checksum differed (or lost its
            // baselines): the next one goes against nothing.
            self.replication.resync(id);
        } else if let Some((newest, older)) = self.session.snapshot_acks(id) {
            self.replication.acknowledge_many(id, newest, older, now);
        }
        Ok(result?)
    }

    /// Queues a game message for client `id` (a pickup, a kill, a chat line): reliable
    /// ones arrive once and in order, unreliable ones at most once. They ride the
    /// client's next snapshots, and their bytes are taken out of its snapshot budget.
    pub fn send_message(
        &mut self,
        id: ClientId,
        delivery: Delivery,
        bytes: &[u8],
    ) -> Result<(), NetError> {
        Ok(self.session.send_message(id, delivery, bytes)?)
    }

    /// Sets the events that ride in front of client `id`'s next snapshot, replacing any
    /// not yet sent ([`NetConfig::snapshot_events`]): reports that belong with the state
    /// of that snapshot's tick and are worth nothing without it (a shooter's hit reports;
    /// repeat them in later snapshots for redundancy). The client's predicted world gets
    /// them as the snapshot is decoded ([`super::PredictedWorld::snapshot_events`]).
    pub fn set_snapshot_events(&mut self, id: ClientId, bytes: Vec<u8>) -> Result<(), NetError> {
        let Some(events) = &mut self.events else {
            return Err(NetError::Config(
                "snapshot events are off (NetConfig::snapshot_events)".into(),
            ));
        };
        if bytes.len() > MAX_SNAPSHOT_EVENT_BYTES {
            return Err(NetError::Config(format!(
                "snapshot events of {} bytes exceed {MAX_SNAPSHOT_EVENT_BYTES}",
                bytes.len()
            )));
        }
        if !self.session.clients().any(|c| c == id) {
            return Err(NetError::Protocol(
                lagless_core::ProtocolError::UnknownClient(id),
            ));
        }
        events.insert(id, bytes);
        Ok(())
    }

    /// What the server measured of client `id`'s latency (`None`: not connected).
    pub fn latency(&self, id: ClientId) -> Option<Latency> {
        self.session.client_stats(id)?;
        let config = self.session.config();
        let tick = Duration::from_secs(1) / config.tick_hz.max(1);
        let secs = |s: f64| Duration::try_from_secs_f64(s.clamp(0.0, 60.0)).ok();
        Some(Latency {
            rtt: self.replication.rtt(id).and_then(secs),
            input_slack: self
                .session
                .input_slack(id)
                .and_then(|ticks| secs(ticks * tick.as_secs_f64())),
            snapshot_interval: tick * config.snapshot_interval.max(1),
            tick,
        })
    }

    /// The next game message from a client, the clients taking turns.
    pub fn poll_message(&mut self) -> Option<(ClientId, Delivery, Vec<u8>)> {
        self.session.poll_message()
    }

    /// When the next tick falls due, on the clock [`Server::update`] is given (`None`
    /// before the first update). A loop that sleeps (or waits on its socket with a
    /// timeout) wakes then, calls `update`, drains [`Server::next_tick`], sends and
    /// drains [`Server::poll_transmit`]: nothing else of the server's is timed.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.session.poll_timeout()
    }

    /// Advances the clock to `now`; then run [`Server::next_tick`] until it returns `None`.
    pub fn update(&mut self, now: Duration) {
        self.now = now;
        self.session.update(now);
    }

    /// The next tick to simulate, with each client's input for it.
    pub fn next_tick(&mut self) -> Option<TickInputs<I>> {
        self.session.next_tick()
    }

    /// The server's tick: the state the game's world is at after the last step.
    pub fn current_tick(&self) -> Tick {
        self.session.current_tick()
    }

    /// Spawns an entity of `kind`, written by `write` (one call per field, in declaration
    /// order); returns its id.
    pub fn spawn(
        &mut self,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<u32, NetError> {
        Ok(self.replication.spawn(kind, write)?)
    }

    /// Spawns an entity with the id the game chose (a player's, say).
    pub fn spawn_with_id(
        &mut self,
        id: u32,
        kind: KindId,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<(), NetError> {
        Ok(self.replication.spawn_with_id(id, kind, write)?)
    }

    /// Writes entity `id`'s current state; true if it changed. A state that quantizes to
    /// what was written before costs nothing.
    pub fn update_entity(
        &mut self,
        id: u32,
        write: impl FnOnce(&mut StateWriter),
    ) -> Result<bool, NetError> {
        Ok(self.replication.update(id, write)?)
    }

    /// Despawns entity `id`.
    pub fn despawn(&mut self, id: u32) -> Result<(), NetError> {
        if let Some((dr, _)) = &mut self.dead_reckoning {
            dr.despawn(id);
        }
        Ok(self.replication.despawn(id)?)
    }

    /// Character `id`'s true motion after this tick's step, sent by dead reckoning
    /// ([`NetConfig::dead_reckoning`]) instead of in snapshots: call it every tick. Spawn
    /// the entity as usual (its spawn and despawn travel in snapshots) and leave its
    /// replicated state alone; clients show it with [`super::Policy::DeadReckoned`].
    /// A state outside the codec's limits (NaN, too fast, off the map) is refused, so
    /// clients never see it; the character's previous state stays.
    pub fn update_character(&mut self, id: u32, state: CharacterState) -> Result<(), NetError> {
        let Some((dr, codec)) = &mut self.dead_reckoning else {
            return Err(NetError::Config(
                "dead reckoning is not configured (NetConfig::dead_reckoning)".into(),
            ));
        };
        let tick = self.session.current_tick();
        let probe = DrMessage {
            id,
            tick,
            position: state.position,
            heading: state.heading,
            motion: Motion::Moving {
                speed: state.speed,
                interval: dr.config().sync_interval,
                lag: state.source_lag,
            },
        };
        probe.check(&codec.limits)?;
        dr.update(id, self.now, tick, state);
        Ok(())
    }

    /// Which characters each client is sent by dead reckoning (all, by default). A
    /// character that becomes relevant to a client is sent at once; one that stops being
    /// relevant is no longer sent (the game despawns it for that client if it wants).
    pub fn set_character_relevance(
        &mut self,
        relevant: impl Fn(ClientId, u32) -> bool + Send + Sync + 'static,
    ) {
        self.relevant = Some(Box::new(relevant));
    }

    /// The dead-reckoning senders (their counters, say), if configured.
    pub fn dead_reckoning(&self) -> Option<&DrServer> {
        self.dead_reckoning.as_ref().map(|(dr, _)| dr)
    }

    /// Where client `id`'s player is, for the default relevance (nearer entities are
    /// sent first when the budget is short).
    pub fn set_focus(&mut self, id: ClientId, focus: Option<[f32; 3]>) {
        self.replication.set_focus(id, focus);
    }

    /// Lets client `id` see `entity` or not: rooms, teams, line of sight, as the game
    /// decides. An entity a client may not see is never sent to it (neither in snapshots
    /// nor by dead reckoning), and leaving its set despawns it on the client; coming back
    /// into it spawns it again with its current state. Every entity is visible until
    /// said otherwise ([`Server::set_visible_by_default`]); see
    /// [`ReplicationServer::set_visible`].
    pub fn set_visible(&mut self, id: ClientId, entity: u32, visible: bool) {
        self.replication.set_visible(id, entity, visible);
    }

    /// Makes every entity visible to client `id`, or none (then let it see its room's
    /// with [`Server::set_visible`]), forgetting the exceptions made before.
    pub fn set_visible_by_default(&mut self, id: ClientId, visible: bool) {
        self.replication.set_visible_by_default(id, visible);
    }

    /// True if client `id` may see `entity` ([`Server::set_visible`]).
    pub fn is_visible(&self, id: ClientId, entity: u32) -> bool {
        self.replication.is_visible(id, entity)
    }

    /// Turns spatial cells on (`Some`) or off (`None`, the default: every entity is in
    /// every client's interest). With cells on, each client sees only the entities in
    /// the cells of its interest ([`Server::set_interest`]; by default those within
    /// [`CellConfig::radius`] of its focus, [`Server::set_focus`]) and those without a
    /// position: what lies elsewhere is treated as not visible ([`Server::set_visible`])
    /// and costs that client nothing. See [`ReplicationServer::set_cells`].
    pub fn set_cells(&mut self, cells: Option<CellConfig>) {
        self.replication.set_cells(cells);
    }

    /// Sets the cells client `id` is interested in while cells are on (`None`: the
    /// default, [`Interest::Around`] the grid's radius around its focus). Entities of
    /// cells leaving its interest are despawned on it; those of cells entering it are
    /// sent with their whole state. See [`ReplicationServer::set_interest`].
    pub fn set_interest(&mut self, id: ClientId, interest: Option<Interest>) {
        self.replication.set_interest(id, interest);
    }

    /// True if `entity` is in client `id`'s interest ([`Server::set_cells`]; always, for
    /// a live entity, with cells off).
    pub fn in_interest(&self, id: ClientId, entity: u32) -> bool {
        self.replication.in_interest(id, entity)
    }

    /// Entities client `id` predicts (its own player, say): when they change they are sent
    /// in every snapshot, ahead of the budget's priorities, so its prediction is never
    /// compared with a state the budget held back.
    pub fn set_owned(&mut self, id: ClientId, entities: &[u32]) {
        self.replication.set_owned(id, entities);
    }

    /// Sends every client its snapshot of the current tick, if one is due. Call after
    /// writing the tick's state.
    ///
    /// A snapshot is framed as: the snapshot events (with [`NetConfig::snapshot_events`],
    /// length-prefixed), the dead-reckoning batch (with [`NetConfig::dead_reckoning`]),
    /// then the replication bytes from the next whole byte. One that needs more than one
    /// packet is preceded by an essential part, a standalone snapshot of the entities the
    /// client predicts ([`Server::set_owned`]), so its prediction is corrected whatever
    /// becomes of the fragments.
    pub fn send_snapshots(&mut self, now: Duration) -> Result<(), NetError> {
        if !self.session.snapshot_due() {
            return Ok(());
        }
        let tick = self.session.current_tick();
        let replication = &self.replication;
        let ids: Vec<ClientId> = self
            .session
            .clients()
            .filter(|&id| replication.snapshot_due(id, tick))
            .collect();
        let batches = self.dead_reckoning_batches(&ids, tick)?;
        // Every client's snapshot first, over the replication's threads: an encode
        // changes only its own client's state, and what follows reads it, so this is
        // what encoding each in the loop below would give.
        let snapshots = self.replication.encode_many(&ids, tick, now);
        for ((id, snapshot), batch) in ids.into_iter().zip(snapshots).zip(batches) {
            let snapshot = match snapshot {
                Ok(s) => s,
                Err(ReplicationError::UnknownClient(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            let counters = self.counters.entry(id).or_default();
            counters.snapshots += 1;
            let mut framed = Writer::new();
            if let Some(events) = &mut self.events {
                let bytes = events.remove(&id).unwrap_or_default();
                counters.event_bytes += bytes.len() as u64;
                framed.write_len_prefixed(&bytes);
            }
            if let Some((messages, bits)) = batch {
                counters.dead_reckoning_messages += messages as u64;
                counters.dead_reckoning_bits += bits.bit_len() as u64;
                framed.write_bytes(bits.as_bytes());
            }
            framed.write_bytes(&snapshot.bytes);
            let bytes = framed.into_bytes();
            let fragmented = bytes.len() > FRAGMENT_PAYLOAD_BYTES;
            counters.fragmented += u64::from(fragmented);
            let replication = &self.replication;
            let owned: Vec<u32> = replication
                .owned(id)
                .iter()
                .copied()
                .filter(|&e| replication.is_visible(id, e))
                .collect();
            let essential = (fragmented && self.essential_parts && !owned.is_empty())
                .then(|| replication.encode_standalone(&owned, tick))
                .filter(|e| e.len() <= FRAGMENT_PAYLOAD_BYTES);
            match essential {
                Some(essential) => {
                    counters.essential += 1;
                    self.session
                        .send_snapshot_with_essential(id, now, &essential, &bytes)?;
                    self.replication.charge(id, essential.len() as u64 * 8);
                }
                None => self.session.send_snapshot(id, now, &bytes)?,
            }
            // The messages that rode this snapshot come out of the next one's budget.
            let sent = self.session.message_bytes_sent(id);
            let before = self.message_bytes.insert(id, sent).unwrap_or(0);
            self.replication
                .charge(id, sent.saturating_sub(before).saturating_mul(8));
        }
        Ok(())
    }

    /// Each of `ids`' dead-reckoning batch for its snapshot of `tick` (`None`s without
    /// dead reckoning), with its message count. With a budget the messages wait as
    /// entries of their own within [`crate::deadreckoning::DrConfig::budget_share`] of
    /// the snapshot's room ([`DrServer::poll_within`], weighed by nearness to the
    /// client's focus), and the batch is charged to the snapshot, whose entities get the
    /// rest; without one every message due goes.
    #[allow(clippy::type_complexity)]
    fn dead_reckoning_batches(
        &mut self,
        ids: &[ClientId],
        tick: Tick,
    ) -> Result<Vec<Option<(usize, BitWriter)>>, NetError> {
        let Some((dr, codec)) = &mut self.dead_reckoning else {
            return Ok(ids.iter().map(|_| None).collect());
        };
        let tick_hz = self.session.config().tick_hz;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let (relevant, replication) = (&self.relevant, &self.replication);
            // Only characters the client holds: a message for one whose spawn the
            // budget still holds back would be refused as an unknown id, and the
            // character unshown until the next sync clock, seconds later. Held back
            // here, it goes as soon as the spawn is acknowledged.
            let hold = |c| {
                relevant.as_ref().is_none_or(|f| f(id, c))
                    && replication.is_visible(id, c)
                    && replication.in_interest(id, c)
                    && replication.client_holds(id, c)
            };
            let room = self
                .dr_share
                .and_then(|share| Some((share, replication.snapshot_room_bits(id)?)));
            let messages = match room {
                Some((share, room)) => {
                    let room = PollRoom {
                        tick,
                        tick_hz,
                        bits: (room as f64 * f64::from(share)) as usize,
                    };
                    dr.poll_within(id, room, codec, |c, m| {
                        if hold(c) {
                            replication.nearness(id, m.position)
                        } else {
                            0.0
                        }
                    })
                }
                None => dr.poll_messages(id, hold),
            };
            let mut bits = BitWriter::new();
            codec.write_batch(&mut bits, &messages)?;
            if self.dr_share.is_some() {
                self.replication.charge(id, bits.bit_len() as u64);
            }
            out.push(Some((messages.len(), bits)));
        }
        Ok(out)
    }

    /// The next packet to send, and to whom.
    pub fn poll_transmit(&mut self) -> Option<(ClientId, Vec<u8>)> {
        self.session.poll_transmit()
    }

    /// Client `id`'s session counters (inputs late or missing, packets).
    pub fn client_stats(&self, id: ClientId) -> Option<&ServerClientStats> {
        self.session.client_stats(id)
    }

    /// Client `id`'s replication counters (snapshots, bits, budget).
    pub fn replication_stats(&self, id: ClientId) -> Option<ClientReplicationStats> {
        self.replication.client_stats(id)
    }

    /// What went out with client `id`'s snapshots besides the replication bytes.
    pub fn snapshot_counters(&self, id: ClientId) -> Option<&SnapshotCounters> {
        self.counters.get(&id)
    }

    /// True when the tick just stepped is one snapshots go out on (every
    /// [`NetConfig::snapshot_hz`]th of a second).
    pub fn snapshot_due(&self) -> bool {
        self.session.snapshot_due()
    }

    /// Sends a snapshot every `ticks` ticks from now on (a server under load, or a
    /// tuning knob); clients follow from the ticks that arrive.
    pub fn set_snapshot_interval(&mut self, ticks: u32) {
        self.session.set_snapshot_interval(ticks);
    }

    /// The generation of live entity `id` ([`ReplicationServer::generation`]): the
    /// number the client's events and entities carry for it.
    pub fn generation(&self, id: u32) -> Option<u32> {
        self.replication.generation(id)
    }

    /// The replication server, to read what it holds.
    pub fn replication(&self) -> &ReplicationServer {
        &self.replication
    }

    /// The session, to send what this API does not (another snapshot codec: the
    /// uncompressed baseline a lab compares against). Snapshots sent here bypass the
    /// replication layer: a client of this [`Server`] would refuse them.
    pub fn session_mut(&mut self) -> &mut ServerSession<I> {
        &mut self.session
    }

    /// The session, for what this API does not cover.
    pub fn session(&self) -> &ServerSession<I> {
        &self.session
    }

    /// The replication server, for what this API does not cover (a game's relevance
    /// function, say).
    pub fn replication_mut(&mut self) -> &mut ReplicationServer {
        &mut self.replication
    }
}
