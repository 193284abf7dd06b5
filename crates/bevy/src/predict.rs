//! The client's predicted world: a Bevy `World` of its own that holds only the entities
//! the client owns, stepped by the game's [`NetTick`] systems (partial simulation: the
//! rest of the world is interpolated, never re-simulated).

use crate::bevy::ecs::schedule::Schedule;
use crate::bevy::prelude::{Entity, World};
use crate::protocol::{NetInput, NetTick, Protocol, SimTick};
use lagless_replication::{
    Input, KindId, Pose, PredictedWorld, ReplicationClient, Rollback, Tick, pose_of, values_of,
};
use std::collections::{BTreeMap, BTreeSet};

/// Codes further apart than this (quantization steps) on any field are a misprediction:
/// the server and the client both quantize unrounded floats, so one step either way is
/// rounding, not disagreement.
const TOLERANCE_CODES: i32 = 1;

/// An entity of the prediction world.
#[derive(Debug, Clone, Copy)]
struct Held {
    entity: Entity,
    kind: KindId,
    generation: u32,
}

/// What the client predicts, as [`lagless_replication::Client`] drives it: the game's
/// simulation systems over the owned entities, in a world apart from the app's.
pub struct PredictionWorld<I: Input + Sync> {
    protocol: Protocol,
    world: World,
    schedule: Schedule,
    owned: BTreeSet<u32>,
    held: BTreeMap<u32, Held>,
    _input: std::marker::PhantomData<I>,
}

/// The owned entities' quantized codes after one tick, by id (with their generation).
pub type Saved = BTreeMap<u32, (u32, Vec<i32>)>;

impl<I: Input + Sync> PredictionWorld<I> {
    /// An empty prediction world running `protocol`'s simulation.
    pub fn new(protocol: Protocol) -> Self {
        let mut world = World::new();
        let mut schedule = Schedule::new(NetTick);
        protocol.build_simulation(&mut world, &mut schedule);
        world.insert_resource(SimTick(0));
        Self {
            protocol,
            world,
            schedule,
            owned: BTreeSet::new(),
            held: BTreeMap::new(),
            _input: std::marker::PhantomData,
        }
    }

    /// The entities this client owns and predicts. An owned entity enters the world at
    /// the next reconciliation with a snapshot that holds it.
    pub fn set_owned(&mut self, owned: BTreeSet<u32>) {
        self.owned = owned;
        let gone: Vec<u32> = self
            .held
            .keys()
            .filter(|id| !self.owned.contains(id))
            .copied()
            .collect();
        for id in gone {
            self.remove(id);
        }
    }

    /// The ids this client owns.
    pub fn owned(&self) -> &BTreeSet<u32> {
        &self.owned
    }

    /// The prediction world (the owned entities as predicted now).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Predicted entity `id`'s current values (dequantized), with its kind.
    pub fn values(&self, id: u32) -> Option<(KindId, Vec<f32>)> {
        let held = self.held.get(&id)?;
        let codes = self.codes(held)?;
        let kind = self.protocol.schema().get(held.kind)?;
        Some((held.kind, values_of(kind, &codes)))
    }

    fn codes(&self, held: &Held) -> Option<Vec<i32>> {
        let entity = self.world.get_entity(held.entity).ok()?;
        self.protocol.codes(held.kind, &entity)
    }

    fn remove(&mut self, id: u32) {
        if let Some(held) = self.held.remove(&id) {
            self.world.despawn(held.entity);
        }
    }
}

impl<I: Input + Sync> Rollback for PredictionWorld<I> {
    type Input = I;
    type Saved = Saved;
    type Confirmed = ReplicationClient;

    fn advance(&mut self, tick: Tick, input: I) {
        for held in self.held.values() {
            if let Ok(mut e) = self.world.get_entity_mut(held.entity) {
                e.insert(NetInput(input));
            }
        }
        self.world.insert_resource(SimTick(tick.0));
        self.schedule.run(&mut self.world);
        // A system may have despawned an owned entity: forget it until the server says.
        let world = &self.world;
        self.held.retain(|_, h| world.get_entity(h.entity).is_ok());
    }

    fn save(&self) -> Saved {
        self.held
            .iter()
            .filter_map(|(id, h)| Some((*id, (h.generation, self.codes(h)?))))
            .collect()
    }

    fn diverged(&self, predicted: &Saved, confirmed: &ReplicationClient) -> bool {
        self.owned.iter().any(|id| {
            match (predicted.get(id), confirmed.get(*id)) {
                (None, None) => false,
                (Some((generation, codes)), Some(server)) => {
                    *generation != server.generation
                        || codes.len() != server.codes.len()
                        || codes.iter().zip(server.codes.iter()).any(|(a, b)| {
                            (i64::from(*a) - i64::from(*b)).abs() > i64::from(TOLERANCE_CODES)
                        })
                }
                // Spawned or despawned on the server, or not yet held here.
                _ => true,
            }
        })
    }

    fn load(&mut self, confirmed: &ReplicationClient, _predicted: Option<&Saved>) {
        let owned: Vec<u32> = self.owned.iter().copied().collect();
        for id in owned {
            let Some(server) = confirmed.get(id) else {
                self.remove(id);
                continue;
            };
            let stale = self
                .held
                .get(&id)
                .is_some_and(|h| h.kind != server.kind || h.generation != server.generation);
            if stale {
                self.remove(id);
            }
            let entity = match self.held.get(&id) {
                Some(h) => h.entity,
                None => {
                    let entity = self.world.spawn(crate::NetId(id)).id();
                    self.held.insert(
                        id,
                        Held {
                            entity,
                            kind: server.kind,
                            generation: server.generation,
                        },
                    );
                    entity
                }
            };
            if let Ok(mut e) = self.world.get_entity_mut(entity) {
                self.protocol.apply(server.kind, &server.values, &mut e);
            }
        }
    }
}

impl<I: Input + Sync> PredictedWorld for PredictionWorld<I> {
    fn pose(&self, id: u32) -> Option<Pose> {
        let (kind, values) = self.values(id)?;
        pose_of(self.protocol.schema().get(kind)?, &values)
    }
}
