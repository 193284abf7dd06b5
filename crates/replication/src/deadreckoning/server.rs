//! Many characters' senders, and which client has heard what.

use super::{CharacterState, DrMessage, DrSender, SenderConfig, Trigger};
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
    /// Per client, per character: the sender's `seq` when the client last got it.
    clients: BTreeMap<ClientId, BTreeMap<u32, u64>>,
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
            known.remove(&id);
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
                known.remove(&id);
                continue;
            }
            if known.get(&id) == Some(&sender.seq()) {
                continue;
            }
            if let Some(m) = sender.message() {
                known.insert(id, sender.seq());
                out.push(m);
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
}
