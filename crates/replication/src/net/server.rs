//! The game server's side of the high-level API.

use super::{NetConfig, NetError};
use crate::ReplicationError;
use crate::deadreckoning::{CharacterState, DrCodec, DrMessage, DrServer, Motion};
use crate::schema::{KindId, Schema};
use crate::server::{ClientReplicationStats, ReplicationServer, ServerConfig};
use crate::state::StateWriter;
use lagless_core::{ClientId, Delivery, Input, ServerClientStats, ServerSession, Tick, TickInputs};
use lagless_wire::BitWriter;
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
pub struct Server<I: Input> {
    session: ServerSession<I>,
    replication: ReplicationServer,
    dead_reckoning: Option<(DrServer, DrCodec)>,
    relevant: Option<Box<CharacterRelevance>>,
    /// Per client, the message bytes its session had sent at the last snapshot.
    message_bytes: BTreeMap<ClientId, u64>,
    now: Duration,
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
            ServerConfig {
                tick_hz: config.tick_hz,
                snapshot_hz: f64::from(config.tick_hz) / f64::from(config.snapshot_interval()),
                budget: config.budget,
                max_snapshot_bytes: config.server_session.max_snapshot_bytes,
                ..ServerConfig::default()
            },
        );
        Ok(Self {
            session,
            replication,
            dead_reckoning: config
                .dead_reckoning
                .map(|c| (DrServer::new(c.sender), c.codec)),
            relevant: None,
            message_bytes: BTreeMap::new(),
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

    /// Forgets client `id` (disconnected or timed out). Its entities stay: despawn them
    /// if the game wants.
    pub fn disconnect(&mut self, id: ClientId) {
        self.session.remove_client(id);
        self.replication.remove_client(id);
        self.message_bytes.remove(&id);
        if let Some((dr, _)) = &mut self.dead_reckoning {
            dr.remove_client(id);
        }
    }

    /// Takes in a packet from client `id`. Errors mean it was dropped (and counted).
    pub fn receive(&mut self, id: ClientId, now: Duration, bytes: &[u8]) -> Result<(), NetError> {
        let result = self.session.handle_packet(id, now, bytes);
        if self.session.resync_requested(id) {
            // The client refused a snapshot whose view checksum differed (or lost its
            // baselines): the next one goes against nothing.
            self.replication.resync(id);
        } else if let Some(tick) = self.session.snapshot_ack(id) {
            self.replication.acknowledge(id, tick, now);
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

    /// The next game message from a client, the clients taking turns.
    pub fn poll_message(&mut self) -> Option<(ClientId, Delivery, Vec<u8>)> {
        self.session.poll_message()
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

    /// Entities client `id` predicts (its own player, say): when they change they are sent
    /// in every snapshot, ahead of the budget's priorities, so its prediction is never
    /// compared with a state the budget held back.
    pub fn set_owned(&mut self, id: ClientId, entities: &[u32]) {
        self.replication.set_owned(id, entities);
    }

    /// Sends every client its snapshot of the current tick, if one is due. Call after
    /// writing the tick's state.
    pub fn send_snapshots(&mut self, now: Duration) -> Result<(), NetError> {
        if !self.session.snapshot_due() {
            return Ok(());
        }
        let tick = self.session.current_tick();
        let ids: Vec<ClientId> = self.session.clients().collect();
        for id in ids {
            let snapshot = match self.replication.encode(id, tick, now) {
                Ok(s) => s,
                Err(ReplicationError::UnknownClient(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            match &mut self.dead_reckoning {
                // The messages due first, then the snapshot from the next whole byte.
                Some((dr, codec)) => {
                    let mut bits = BitWriter::new();
                    let (relevant, replication) = (&self.relevant, &self.replication);
                    // Only characters the client holds: a message for one whose spawn
                    // the budget still holds back would be refused as an unknown id, and
                    // the character unshown until the next sync clock, seconds later.
                    // Held back here, it goes as soon as the spawn is acknowledged.
                    let messages = dr.poll_messages(id, |c| {
                        relevant.as_ref().is_none_or(|f| f(id, c))
                            && replication.client_holds(id, c)
                    });
                    codec.write_batch(&mut bits, &messages)?;
                    bits.write_bytes_aligned(&snapshot.bytes);
                    self.session.send_snapshot(id, now, bits.as_bytes())?;
                }
                None => self.session.send_snapshot(id, now, &snapshot.bytes)?,
            }
            // The messages that rode this snapshot come out of the next one's budget.
            let sent = self.session.message_bytes_sent(id);
            let before = self.message_bytes.insert(id, sent).unwrap_or(0);
            self.replication
                .charge(id, sent.saturating_sub(before).saturating_mul(8));
        }
        Ok(())
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
