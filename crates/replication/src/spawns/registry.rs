//! The client's predicted spawns: ids, matching to the server's, expiry.

use super::{IdSpace, SpawnClaim, SpawnError};
use lagless_core::interpolation::Pose;
use lagless_core::{Tick, TickRate};
use std::collections::BTreeMap;
use std::time::Duration;

/// Settings of a [`SpawnRegistry`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpawnConfig {
    /// The simulation's tick rate (30 ticks/s by default).
    pub tick_rate: TickRate,
    /// How far the server's spawn tick may lie from the predicted one and still match
    /// (default 2 ticks: a late input is applied a tick or two later).
    pub match_tolerance: u32,
    /// How long a predicted spawn waits for the server's before it is dropped as an
    /// orphan (default 1 s: a mobile round trip, the server's input buffer and a
    /// margin).
    pub timeout: Duration,
    /// Most predicted spawns alive at once (default 256); more is refused.
    pub max_live: usize,
}

impl Default for SpawnConfig {
    fn default() -> Self {
        Self {
            tick_rate: TickRate::new(30),
            match_tolerance: 2,
            timeout: Duration::from_secs(1),
            max_live: 256,
        }
    }
}

/// A predicted entity: its key, where the game last put it, and the game's payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted<T> {
    /// What was sent to the server (id, kind, tick, sequence).
    pub claim: SpawnClaim,
    /// The pose the game last set ([`SpawnRegistry::set_pose`]).
    pub pose: Pose,
    /// The game's data: its ECS entity, or a [`Components`](super::Components) store.
    pub payload: T,
}

/// The server's entity, as the client's replication layer delivered it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerSpawn {
    /// The server's id.
    pub id: u32,
    /// The slot of the client that spawned it.
    pub owner: u32,
    /// The tick the server spawned it at.
    pub tick: Tick,
    /// Its kind.
    pub kind: u16,
    /// The claim's sequence, when the server's entity carries it (an exact match
    /// among spawns of one tick); `None` matches the earliest.
    pub seq: Option<u8>,
    /// Where the client will show it now. For a projectile of the client's own, that
    /// is its server state extrapolated to the client's present tick (where the
    /// predicted one was flying), not interpolated into the past: then the offset is
    /// only the prediction's error, not the interpolation delay times its speed.
    pub pose: Pose,
}

/// A predicted entity handed over to the server's: the game moves its payload to
/// `server_id`, drops `predicted_id`, and hides the jump by feeding
/// `predicted_pose → server_pose` to an [`ErrorSmoother`](lagless_core::ErrorSmoother)
/// (`correct(predicted.position, predicted.rotation, server.position,
/// server.rotation)`), so the server's entity is first drawn exactly where the
/// predicted one was and the offset decays.
#[derive(Debug, Clone, PartialEq)]
pub struct Handover<T> {
    /// The predicted entity's id, free from now on.
    pub predicted_id: u32,
    /// The server's id.
    pub server_id: u32,
    /// Where the predicted entity was.
    pub predicted_pose: Pose,
    /// Where the server's entity is shown.
    pub server_pose: Pose,
    /// `predicted_pose.position - server_pose.position`: the offset to draw the
    /// server's entity with at the hand-over.
    pub offset: [f32; 3],
    /// Server spawn tick minus predicted spawn tick.
    pub tick_error: i64,
    /// The game's payload.
    pub payload: T,
}

/// Counters of a [`SpawnRegistry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpawnStats {
    /// Spawns predicted: `spawns.predicted`.
    pub predicted: u64,
    /// Predicted spawns the server's entity took over.
    pub matched: u64,
    /// Predicted spawns dropped after the timeout: `spawns.orphaned`.
    pub orphaned: u64,
    /// Predicted spawns the game removed itself ([`SpawnRegistry::despawn`]).
    pub despawned: u64,
    /// Server entities of this client's that matched no prediction.
    pub unmatched_server: u64,
    /// Server ids seen in the client-only range: `spawns.id_collisions` (0 unless the
    /// server and client disagree on the [`IdSpace`]).
    pub id_collisions: u64,
    /// Spawns refused (too many alive, too many in one tick).
    pub refused: u64,
}

impl SpawnStats {
    /// `spawns.matched_pct`: matched over those resolved (matched or orphaned), in
    /// percent; 100 when none resolved yet.
    pub fn matched_pct(&self) -> f64 {
        let resolved = self.matched + self.orphaned;
        if resolved == 0 {
            100.0
        } else {
            100.0 * self.matched as f64 / resolved as f64
        }
    }
}

/// The client's predicted spawns (the Pixonic article's shots in a client-only id
/// range; Overwatch's predicted projectiles): an entity the client creates by
/// prediction exists at once under an id from its own slot's range of the
/// [`IdSpace`], which no server id can equal. It is not reconciled: the game
/// simulates it on its own. When the server's entity arrives, matched by owner,
/// spawn tick (within [`SpawnConfig::match_tolerance`]) and kind, it takes its place
/// ([`Handover`]); one the server never confirms is dropped after
/// [`SpawnConfig::timeout`] and counted as orphaned.
///
/// `T` is the game's payload: its ECS entity handle (`hecs::Entity`: add and remove
/// components there), or a [`Components`](super::Components) store.
#[derive(Debug, Clone)]
pub struct SpawnRegistry<T = ()> {
    config: SpawnConfig,
    space: IdSpace,
    slot: u32,
    next_offset: u32,
    last_tick: Option<(Tick, u8)>,
    live: BTreeMap<u32, Predicted<T>>,
    stats: SpawnStats,
}

impl<T> SpawnRegistry<T> {
    /// The registry of the client in `slot` of `space`. Refused (`UnknownSlot`) when
    /// the slot has no range.
    pub fn new(config: SpawnConfig, space: IdSpace, slot: u32) -> Result<Self, SpawnError> {
        space.range(slot).ok_or(SpawnError::UnknownSlot(slot))?;
        Ok(Self {
            config,
            space,
            slot,
            next_offset: 0,
            last_tick: None,
            live: BTreeMap::new(),
            stats: SpawnStats::default(),
        })
    }

    /// The counters.
    pub fn stats(&self) -> &SpawnStats {
        &self.stats
    }

    /// The id layout.
    pub fn space(&self) -> &IdSpace {
        &self.space
    }

    /// This client's slot.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Predicted entities alive, by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Predicted<T>)> {
        self.live.iter().map(|(&id, p)| (id, p))
    }

    /// Predicted entity `id`.
    pub fn get(&self, id: u32) -> Option<&Predicted<T>> {
        self.live.get(&id)
    }

    /// Predicted entity `id`, mutably (its payload: add and remove components).
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Predicted<T>> {
        self.live.get_mut(&id)
    }

    /// Where the game now shows predicted entity `id` (set every frame it moves, so a
    /// hand-over measures the offset from there). False for an unknown id.
    pub fn set_pose(&mut self, id: u32, pose: Pose) -> bool {
        self.live.get_mut(&id).map(|p| p.pose = pose).is_some()
    }

    /// The id the next [`spawn`](Self::spawn) will hand out (if it is not refused), so
    /// a game can put it in the input that fires before the prediction runs that input.
    pub fn next_id(&self) -> Option<u32> {
        let range = self.space.range(self.slot)?;
        let per_slot = self.space.per_slot();
        (0..per_slot.min(self.live.len() as u32 + 1))
            .map(|k| range.start() + (self.next_offset + k) % per_slot)
            .find(|id| !self.live.contains_key(id))
    }

    /// Predicts a spawn of `kind` by the input of `tick`, at `pose`: returns the claim
    /// to send to the server (its `id` is the predicted entity's). Refused when
    /// [`SpawnConfig::max_live`] are alive or 256 were spawned in one tick.
    pub fn spawn(
        &mut self,
        tick: Tick,
        kind: u16,
        pose: Pose,
        payload: T,
    ) -> Result<SpawnClaim, SpawnError> {
        let seq = match self.last_tick {
            Some((t, s)) if t == tick => s.checked_add(1),
            _ => Some(0),
        };
        let room = self.live.len() < self.config.max_live
            && (self.live.len() as u64) < u64::from(self.space.per_slot());
        let Some(seq) = seq.filter(|_| room) else {
            self.stats.refused += 1;
            return Err(SpawnError::TooMany);
        };
        let range = self
            .space
            .range(self.slot)
            .ok_or(SpawnError::UnknownSlot(self.slot))?;
        // The next free id of the range, cycling; at most `max_live` are taken.
        let id = loop {
            let id = range.start() + self.next_offset;
            self.next_offset = (self.next_offset + 1) % self.space.per_slot();
            if !self.live.contains_key(&id) {
                break id;
            }
        };
        self.last_tick = Some((tick, seq));
        let claim = SpawnClaim {
            id,
            kind,
            tick,
            seq,
        };
        self.live.insert(
            id,
            Predicted {
                claim,
                pose,
                payload,
            },
        );
        self.stats.predicted += 1;
        Ok(claim)
    }

    /// Removes predicted entity `id` (the game's own simulation ended it: it hit a
    /// wall). Its payload is returned; the server's entity, if it comes, then matches
    /// nothing.
    pub fn despawn(&mut self, id: u32) -> Option<T> {
        let p = self.live.remove(&id)?;
        self.stats.despawned += 1;
        Some(p.payload)
    }

    /// Checks a server id the replication layer delivered: one in the client-only
    /// range is counted as an id collision (and true returned). Call it for every
    /// server spawn event; [`match_server`](Self::match_server) calls it too.
    pub fn check_server_id(&mut self, id: u32) -> bool {
        let collides = !self.space.is_server(id) || self.live.contains_key(&id);
        if collides {
            self.stats.id_collisions += 1;
        }
        collides
    }

    /// Matches the server's entity to a prediction: the same owner (this slot), kind,
    /// and sequence when given, the spawn tick within the tolerance, nearest tick
    /// first, then the earliest. Returns the [`Handover`], or `None` (another client's
    /// entity, or one of ours that matched no prediction: counted).
    pub fn match_server(&mut self, server: &ServerSpawn) -> Option<Handover<T>> {
        if self.check_server_id(server.id) || server.owner != self.slot {
            return None;
        }
        let tolerance = i64::from(self.config.match_tolerance);
        let best = self
            .live
            .iter()
            .filter(|(_, p)| {
                p.claim.kind == server.kind
                    && server.seq.is_none_or(|s| s == p.claim.seq)
                    && server.tick.diff(p.claim.tick).abs() <= tolerance
            })
            .min_by_key(|(_, p)| {
                (
                    server.tick.diff(p.claim.tick).abs(),
                    p.claim.tick,
                    p.claim.seq,
                )
            })
            .map(|(&id, _)| id);
        let Some(p) = best.and_then(|id| self.live.remove(&id)) else {
            self.stats.unmatched_server += 1;
            return None;
        };
        self.stats.matched += 1;
        let offset = [0, 1, 2].map(|i| p.pose.position[i] - server.pose.position[i]);
        Some(Handover {
            predicted_id: p.claim.id,
            server_id: server.id,
            predicted_pose: p.pose,
            server_pose: server.pose,
            offset,
            tick_error: server.tick.diff(p.claim.tick),
            payload: p.payload,
        })
    }

    /// Drops, and returns, the predicted spawns older than the timeout at client tick
    /// `now`: the server never confirmed them (a lost claim, a refused one, or a
    /// mismatch). Each is counted as orphaned; the game removes it from view.
    pub fn expire(&mut self, now: Tick) -> Vec<Predicted<T>> {
        let timeout = self.config.tick_rate.ticks_in(self.config.timeout).ceil() as i64;
        let old: Vec<u32> = self
            .live
            .iter()
            .filter(|(_, p)| now.diff(p.claim.tick) >= timeout)
            .map(|(&id, _)| id)
            .collect();
        self.stats.orphaned += old.len() as u64;
        old.iter().filter_map(|id| self.live.remove(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_id_is_the_id_spawn_hands_out() {
        let space = IdSpace::new(100, 2).unwrap();
        let mut r: SpawnRegistry<()> =
            SpawnRegistry::new(SpawnConfig::default(), space, 1).unwrap();
        for t in 0..200 {
            let next = r.next_id();
            let claim = r
                .spawn(Tick(t), 0, Pose::planar([0.0, 0.0], 0.0), ())
                .unwrap();
            assert_eq!(next, Some(claim.id));
            // Keep one alive across the wrap, so the skip over live ids is exercised.
            if t % 3 != 0 {
                r.despawn(claim.id);
            }
            if r.iter().count() > 4 {
                let oldest = r.iter().next().map(|(id, _)| id).unwrap();
                r.despawn(oldest);
            }
        }
    }
    use proptest::prelude::*;

    fn registry(slot: u32) -> SpawnRegistry<&'static str> {
        SpawnRegistry::new(SpawnConfig::default(), IdSpace::default(), slot).unwrap()
    }

    fn server(id: u32, owner: u32, tick: u32, x: f32) -> ServerSpawn {
        ServerSpawn {
            id,
            owner,
            tick: Tick(tick),
            kind: 1,
            seq: None,
            pose: Pose::planar([x, 0.0], 0.0),
        }
    }

    #[test]
    fn the_servers_entity_takes_the_predicted_ones_place() {
        let mut r = registry(3);
        let claim = r
            .spawn(Tick(100), 1, Pose::planar([0.0, 0.0], 0.0), "rocket")
            .unwrap();
        assert!(r.space().range(3).unwrap().contains(&claim.id));
        // The client flew it for a while; the server's copy is shown 0.4 behind.
        assert!(r.set_pose(claim.id, Pose::planar([4.0, 0.0], 0.0)));
        assert_eq!(r.match_server(&server(17, 2, 100, 3.6)), None, "not ours");
        assert_eq!(r.match_server(&server(17, 3, 104, 3.6)), None, "too late");
        let h = r.match_server(&server(17, 3, 101, 3.6)).unwrap();
        assert_eq!((h.predicted_id, h.server_id), (claim.id, 17));
        assert!((h.offset[0] - 0.4).abs() < 1e-6 && h.offset[1] == 0.0);
        assert_eq!((h.tick_error, h.payload), (1, "rocket"));
        assert!(r.get(claim.id).is_none());
        let s = r.stats();
        assert_eq!((s.predicted, s.matched, s.unmatched_server), (1, 1, 1));
        assert_eq!(s.matched_pct(), 100.0);
    }

    #[test]
    fn spawns_of_one_tick_match_in_order() {
        let mut r = registry(0);
        let a = r.spawn(Tick(5), 1, Pose::default(), "a").unwrap();
        let b = r.spawn(Tick(5), 1, Pose::default(), "b").unwrap();
        assert_eq!((a.seq, b.seq), (0, 1));
        let exact = ServerSpawn {
            seq: Some(1),
            ..server(9, 0, 5, 0.0)
        };
        assert_eq!(r.match_server(&exact).unwrap().payload, "b");
        assert_eq!(r.match_server(&server(8, 0, 5, 0.0)).unwrap().payload, "a");
    }

    #[test]
    fn unmatched_spawns_expire_and_are_counted() {
        let mut r = registry(0);
        let a = r.spawn(Tick(10), 1, Pose::default(), "a").unwrap();
        r.spawn(Tick(20), 1, Pose::default(), "b").unwrap();
        assert!(r.expire(Tick(39)).is_empty(), "30 ticks is the timeout");
        let gone = r.expire(Tick(40));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].claim, a);
        assert_eq!(r.stats().orphaned, 1);
        assert_eq!(r.stats().matched_pct(), 0.0);
    }

    #[test]
    fn server_ids_in_the_client_range_are_collisions() {
        let mut r = registry(0);
        let start = *r.space().range(0).unwrap().start();
        assert!(!r.check_server_id(start - 1));
        assert!(r.check_server_id(start));
        assert_eq!(r.match_server(&server(start + 7, 0, 1, 0.0)), None);
        assert_eq!(r.stats().id_collisions, 2);
    }

    #[test]
    fn too_many_alive_is_refused() {
        let mut r = SpawnRegistry::new(
            SpawnConfig {
                max_live: 2,
                ..SpawnConfig::default()
            },
            IdSpace::default(),
            0,
        )
        .unwrap();
        r.spawn(Tick(1), 0, Pose::default(), ()).unwrap();
        let b = r.spawn(Tick(2), 0, Pose::default(), ()).unwrap();
        assert_eq!(
            r.spawn(Tick(3), 0, Pose::default(), ()),
            Err(SpawnError::TooMany)
        );
        r.despawn(b.id).unwrap();
        r.spawn(Tick(3), 0, Pose::default(), ()).unwrap();
        assert_eq!(r.stats().refused, 1);
    }

    proptest! {
        /// However many spawns and hand-overs, a predicted id is never a server id and
        /// never another slot's, and live predicted ids are distinct.
        #[test]
        fn predicted_ids_never_equal_server_ids(
            server_max in 0u32..(1 << 31),
            slots in 1u32..1024,
            slot_pick: u32,
            steps in proptest::collection::vec(any::<bool>(), 1..300),
        ) {
            let space = IdSpace::new(server_max, slots).unwrap();
            let slot = slot_pick % slots;
            let config = SpawnConfig { max_live: 8, ..SpawnConfig::default() };
            let mut r = SpawnRegistry::new(config, space, slot).unwrap();
            for (t, spawn) in steps.into_iter().enumerate() {
                if spawn {
                    if let Ok(c) = r.spawn(Tick(t as u32), 0, Pose::default(), ()) {
                        prop_assert!(!space.is_server(c.id));
                        prop_assert_eq!(space.slot_of(c.id), Some(slot));
                    }
                } else {
                    r.expire(Tick(t as u32 + 30));
                }
                // Any server id the server may allocate is never a live predicted id.
                let ids: Vec<u32> = r.iter().map(|(id, _)| id).collect();
                prop_assert!(ids.iter().all(|&id| id > server_max));
            }
        }
    }
}
