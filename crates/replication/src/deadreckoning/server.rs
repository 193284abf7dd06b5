//! Many characters' senders, and which client has heard what.

use super::{CharacterState, DrCodec, DrMessage, DrSender, SenderConfig, Trigger};
use crate::server::ClientId;
use lagless_core::Tick;
use std::collections::BTreeMap;
use std::time::Duration;

/// Counters of a [`DrServer`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrServerStats {
    /// Messages that became due, by trigger (each goes to every client it is relevant
    /// to).
    pub due: BTreeMap<Trigger, u64>,
    /// Messages handed out for all clients together.
    pub handed_out: u64,
    /// Messages a budget held back for a later poll ([`DrServer::poll_within`]), summed
    /// over polls: one held back three polls counts three times.
    pub held_back: u64,
}

/// The error, metres, that doubles how fast a waiting message gains priority
/// ([`DrServer::poll_within`]): the distance between where the client carries the last
/// message it was handed and where the character is.
pub const ERROR_TOLERANCE_M: f32 = 0.05;

/// The most a waiting message's error counts for, in tolerances.
const MAX_WRONG: f32 = 100.0;

/// What a character the client never heard of counts as, in tolerances.
const UNSEEN_WRONG: f32 = 9.0;

/// What a message the client is taken to need least counts as, in tolerances: one whose
/// character walks as the client carries it on (a sync, a resend) still climbs, since
/// the message it stands for may have been lost, but a tenth as fast as one a tolerance
/// off.
const LEAST_WRONG: f32 = 0.1;

/// Messages in a row that may not fit before the rest of a poll wait.
const MAX_MISSES: usize = 8;

/// The room of one [`DrServer::poll_within`]: the server's tick and tick rate, and the
/// bits the batch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRoom {
    /// The server's tick now.
    pub tick: Tick,
    /// Its ticks per second (to age the messages clients hold).
    pub tick_hz: u32,
    /// Bits the batch may take, its count included.
    pub bits: usize,
}

/// What one client was handed of one character, and what its next message has waited.
#[derive(Debug, Clone, Copy)]
struct Heard {
    /// The sender's `seq` when the client last got it.
    seq: u64,
    /// The message it got then (`None`: none yet, only a budget's wait).
    last: Option<DrMessage>,
    /// Priority gained waiting ([`DrServer::poll_within`]).
    priority: f32,
}

/// One client's record: per character what it heard, and its last poll's tick.
#[derive(Debug, Clone, Default)]
struct Listener {
    heard: BTreeMap<u32, Heard>,
    last_tick: Option<Tick>,
}

/// The dead-reckoning senders of every character, and per client which message it was
/// last handed for each, so a message due goes to each client once and a client that
/// joins (or for which a character becomes relevant) gets every character at once.
///
/// The server loop:
/// ```text
/// for each character: dr.update(id, now, tick, state)      // every tick
/// for each client: msgs = dr.poll_messages(client, |id| relevant(client, id))
///                  codec.write_batch(&mut bits, &msgs)      // inside the snapshot, say
/// ```
/// Polling less often than every tick (at the snapshot rate) is fine: a client gets the
/// newest state of each character that had a message due since its last poll.
#[derive(Debug, Clone, Default)]
pub struct DrServer {
    config: SenderConfig,
    senders: BTreeMap<u32, DrSender>,
    /// Per client, per character: what it was handed last.
    clients: BTreeMap<ClientId, Listener>,
    stats: DrServerStats,
}

impl DrServer {
    /// A server whose characters all send by `config`.
    pub fn new(config: SenderConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The settings new characters get.
    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    /// Feeds character `id`'s true state of `tick` at `now` (every tick); the first
    /// update adds the character. Returns why a message became due, if one did.
    pub fn update(
        &mut self,
        id: u32,
        now: Duration,
        tick: Tick,
        state: CharacterState,
    ) -> Option<Trigger> {
        let config = self.config;
        let trigger = self
            .senders
            .entry(id)
            .or_insert_with(|| DrSender::new(id, config))
            .update(now, tick, state);
        if let Some(t) = trigger {
            *self.stats.due.entry(t).or_default() += 1;
        }
        trigger
    }

    /// Forgets character `id` (the game tells clients through its own despawn).
    pub fn despawn(&mut self, id: u32) -> bool {
        for known in self.clients.values_mut() {
            known.heard.remove(&id);
        }
        self.senders.remove(&id).is_some()
    }

    /// Character `id`'s sender.
    pub fn sender(&self, id: u32) -> Option<&DrSender> {
        self.senders.get(&id)
    }

    /// The characters, ascending id.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.senders.keys().copied()
    }

    /// Adds a client; its first poll hands it every relevant character.
    pub fn add_client(&mut self, client: ClientId) {
        self.clients.entry(client).or_default();
    }

    /// Removes a client.
    pub fn remove_client(&mut self, client: ClientId) -> bool {
        self.clients.remove(&client).is_some()
    }

    /// The messages `client` has not had yet, ascending id: for each character
    /// `relevant` accepts, its newest state if a message became due since the client
    /// last got one, or if the client never got one (it joined, or the character just
    /// became relevant to it). A character `relevant` refuses is forgotten for this
    /// client, so it is sent afresh when it becomes relevant again. An unknown client
    /// gets nothing.
    pub fn poll_messages(
        &mut self,
        client: ClientId,
        mut relevant: impl FnMut(u32) -> bool,
    ) -> Vec<DrMessage> {
        let Some(known) = self.clients.get_mut(&client) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (&id, sender) in &self.senders {
            if !relevant(id) {
                known.heard.remove(&id);
                continue;
            }
            if known.heard.get(&id).is_some_and(|h| h.seq == sender.seq()) {
                continue;
            }
            if let Some(m) = sender.message() {
                known.heard.insert(
                    id,
                    Heard {
                        seq: sender.seq(),
                        last: Some(m),
                        priority: 0.0,
                    },
                );
                out.push(m);
            }
        }
        self.stats.handed_out += out.len() as u64;
        out
    }

    /// [`Self::poll_messages`] within `room.bits` bits of `codec`'s batch (its count
    /// included), at server tick `room.tick`: each message due waits as an entry of its
    /// own, gaining priority every tick it waits by `weight(character, message)` × (0.1 +
    /// how wrong the client shows the character, in [`ERROR_TOLERANCE_M`]s), and a poll takes
    /// the highest until the room is spent (Fiedler's priority accumulator, as the
    /// snapshots' entities). How wrong is the distance between where the client carries
    /// the last message it was handed (its position on along its heading at its speed,
    /// for at most its interval) and where the character is, plus the speed's error over
    /// a quarter second: a character walking as the client predicts waits (its sync
    /// clock, the resend of a change that arrived), one that turned goes. One the client
    /// never heard of counts as nine tolerances off. A weight of 0 or less (or NaN)
    /// refuses the character, as `relevant` does for [`Self::poll_messages`]. A message
    /// left out waits for the next poll with its priority, and is then the newest state.
    /// Returns the messages ascending by id.
    pub fn poll_within(
        &mut self,
        client: ClientId,
        room: PollRoom,
        codec: &DrCodec,
        mut weight: impl FnMut(u32, &DrMessage) -> f32,
    ) -> Vec<DrMessage> {
        let PollRoom {
            tick,
            tick_hz,
            bits: room_bits,
        } = room;
        let Some(known) = self.clients.get_mut(&client) else {
            return Vec::new();
        };
        let elapsed = known
            .last_tick
            .map_or(1.0, |t| tick.0.wrapping_sub(t.0).clamp(1, 1024) as f32);
        known.last_tick = Some(tick);
        let mut waiting: Vec<(f32, DrMessage)> = Vec::new();
        for (&id, sender) in &self.senders {
            let Some(m) = sender.message() else { continue };
            let w = weight(id, &m);
            if w.is_nan() || w <= 0.0 {
                known.heard.remove(&id);
                continue;
            }
            let heard = known.heard.entry(id).or_insert(Heard {
                seq: u64::MAX,
                last: None,
                priority: 0.0,
            });
            if heard.seq == sender.seq() {
                continue;
            }
            let wrong = heard.last.map_or(UNSEEN_WRONG, |last| {
                let dt = m.tick.0.wrapping_sub(last.tick.0).min(1 << 16) as f32;
                // A receiver keeps a character going past its interval until the next
                // message; a minute is as far as it is worth carrying.
                let secs = (dt / tick_hz.max(1) as f32).min(60.0);
                (carried_error(&last, &m, secs) / ERROR_TOLERANCE_M).min(MAX_WRONG)
            });
            let wrong = if wrong.is_nan() { MAX_WRONG } else { wrong };
            heard.priority += w * (LEAST_WRONG + wrong) * elapsed;
            waiting.push((heard.priority, m));
        }
        waiting.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        // The batch's count is a varint of at most five bytes.
        let mut used = 40;
        let mut misses = 0;
        let mut out = Vec::new();
        for (k, (_, m)) in waiting.iter().enumerate() {
            if misses >= MAX_MISSES {
                self.stats.held_back += (waiting.len() - k) as u64;
                break;
            }
            let bits = codec.bits(m);
            if used + bits > room_bits {
                misses += 1;
                self.stats.held_back += 1;
                continue;
            }
            misses = 0;
            used += bits;
            out.push(*m);
        }
        out.sort_unstable_by_key(|m| m.id);
        for m in &out {
            if let (Some(heard), Some(sender)) =
                (known.heard.get_mut(&m.id), self.senders.get(&m.id))
            {
                *heard = Heard {
                    seq: sender.seq(),
                    last: Some(*m),
                    priority: 0.0,
                };
            }
        }
        self.stats.handed_out += out.len() as u64;
        out
    }

    /// Counters.
    pub fn stats(&self) -> &DrServerStats {
        &self.stats
    }
}

/// How far off a client that carries `last` on for `secs` is from `now` (a newer state
/// of the same character), metres: `last`'s position carried along its heading at its
/// speed, against `now`'s position, plus the velocities' difference over a quarter
/// second.
fn carried_error(last: &DrMessage, now: &DrMessage, secs: f32) -> f32 {
    let speed = last.speed();
    let d0 = DrMessage::direction(last.heading);
    let d1 = DrMessage::direction(now.heading);
    let s1 = now.speed();
    let mut d2 = 0.0;
    let mut v2 = 0.0;
    for k in 0..3 {
        let at = last.position[k] + d0[k] * speed * secs;
        d2 += (at - now.position[k]).powi(2);
        v2 += (d0[k] * speed - d1[k] * s1).powi(2);
    }
    d2.sqrt() + v2.sqrt() * 0.25
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_client_gets_each_due_message_once_and_a_newcomer_gets_everything() {
        let mut dr = DrServer::new(SenderConfig::default());
        dr.add_client(1);
        let walk = |x: f32, heading: f32| CharacterState::new([x, 0.0, 0.0], heading, 2.0);
        for id in 0..3 {
            dr.update(id, ms(0), Tick(0), walk(0.0, 0.0));
        }
        assert_eq!(dr.poll_messages(1, |_| true).len(), 3);
        assert!(dr.poll_messages(1, |_| true).is_empty());
        // Character 2 turns: only it goes out, with the newest state.
        for (tick, x) in [(1, 0.1), (2, 0.2)] {
            for id in 0..3 {
                let heading = if id == 2 { 1.0 } else { 0.0 };
                dr.update(id, ms(tick * 16), Tick(tick as u32), walk(x, heading));
            }
        }
        let got = dr.poll_messages(1, |_| true);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].id, got[0].tick, got[0].position[0]),
            (2, Tick(2), 0.2)
        );
        // A client joining now hears of all three at once.
        dr.add_client(2);
        assert_eq!(dr.poll_messages(2, |_| true).len(), 3);
        // Relevance: character 0 leaves client 1's view and comes back.
        assert!(dr.poll_messages(1, |id| id != 0).is_empty());
        let back = dr.poll_messages(1, |_| true);
        assert_eq!(back.iter().map(|m| m.id).collect::<Vec<_>>(), vec![0]);
        assert!(dr.poll_messages(99, |_| true).is_empty());
        assert_eq!(dr.stats().handed_out, 3 + 1 + 3 + 1);
        // A despawned character is gone for everyone; back under the same id, it is new.
        assert!(dr.despawn(1));
        assert!(dr.sender(1).is_none());
        assert!(dr.poll_messages(2, |_| true).is_empty());
        dr.update(1, ms(100), Tick(6), walk(0.3, 0.0));
        assert_eq!(dr.stats().due[&Trigger::First], 4);
        for client in [1, 2] {
            let got = dr.poll_messages(client, |_| true);
            assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), vec![1]);
        }
        assert!(dr.remove_client(2));
        assert!(dr.poll_messages(2, |_| true).is_empty());
    }

    #[test]
    fn a_budget_takes_the_most_wrong_first_and_the_rest_wait_their_turn() {
        let codec = DrCodec::default();
        let mut dr = DrServer::new(SenderConfig::default());
        dr.add_client(1);
        let walk = |x: f32, heading: f32| CharacterState::new([x, 0.0, 0.0], heading, 2.0);
        let room = |tick: u32, bits: usize| PollRoom {
            tick: Tick(tick),
            tick_hz: 64,
            bits,
        };
        for id in 0..40 {
            dr.update(id, ms(0), Tick(0), walk(id as f32, 0.0));
        }
        // Forty first messages do not fit a room of about ten: each poll takes what
        // fits, within the room, and every character is heard of within a few polls.
        let one = codec.bits(&dr.sender(39).unwrap().message().unwrap());
        let bits = 40 + one * 10;
        let mut heard = std::collections::BTreeSet::new();
        for poll in 1..=5u32 {
            let got = dr.poll_within(1, room(poll, bits), &codec, |_, _| 1.0);
            let mut w = lagless_wire::BitWriter::new();
            codec.write_batch(&mut w, &got).unwrap();
            assert!(
                w.bit_len() <= bits,
                "{} bits in a room of {bits}",
                w.bit_len()
            );
            assert!(got.windows(2).all(|p| p[0].id < p[1].id), "ascending");
            heard.extend(got.iter().map(|m| m.id));
        }
        assert_eq!(heard.len(), 40);
        assert!(dr.stats().held_back > 0);
        // Character 7 turns; the others walk on as the client predicts, and their sync
        // clock runs out on the same tick: the turn goes first.
        for id in 0..40 {
            let heading = if id == 7 { 1.5 } else { 0.0 };
            // Heading 0 walks along +Z: 2 m/s for 134 ticks.
            let z = 2.0 * 134.0 / 64.0;
            let state = CharacterState::new([id as f32, 0.0, z], heading, 2.0);
            dr.update(id, ms(2100), Tick(134), state);
        }
        let got = dr.poll_within(1, room(134, 40 + one), &codec, |_, _| 1.0);
        assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), vec![7]);
        // A weight of 0 refuses a character (it is sent afresh when it counts again),
        // and a heavier one goes before a lighter one as wrong.
        let got = dr.poll_within(1, room(135, 40 + one), &codec, |id, _| {
            if id == 3 {
                0.0
            } else if id == 30 {
                50.0
            } else {
                1.0
            }
        });
        assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), vec![30]);
        let all = dr.poll_within(1, room(136, usize::MAX / 2), &codec, |_, _| 1.0);
        assert!(all.iter().any(|m| m.id == 3), "character 3 is sent afresh");
        assert!(
            dr.poll_within(1, room(137, usize::MAX / 2), &codec, |_, _| 1.0)
                .is_empty()
        );
        assert!(
            dr.poll_within(9, room(137, 1000), &codec, |_, _| 1.0)
                .is_empty()
        );
    }
}
