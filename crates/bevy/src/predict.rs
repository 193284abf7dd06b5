//! The client's predicted world: a Bevy `World` of its own that holds only the entities
//! the client owns, stepped by the game's [`NetTick`] systems (partial simulation: the
//! rest of the world is interpolated, never re-simulated).

use crate::bevy::ecs::component::ComponentId;
use crate::bevy::ecs::schedule::Schedule;
use crate::bevy::prelude::{Entity, World};
use crate::protocol::{Kept, NetId, NetInput, NetTick, Protocol, SimTick};
use lagless_replication::{
    Input, KindId, Pose, PredictedWorld, ReplicationClient, Rollback, Tick, pose_of, values_of,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Comparisons with the server before prediction's failures are looked into: two
/// seconds of snapshots at 30 Hz. Prediction that works fails a few in a thousand.
const WATCH_COMPARES: u64 = 60;

/// Snapshot events kept for the app until its next frame takes them; older ones go.
const MAX_SNAPSHOT_EVENTS: usize = 1024;

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
    /// Snapshot events (tick, bytes) not yet passed to the app.
    events: VecDeque<(u32, Vec<u8>)>,
    /// Whether the game was warned that its simulation spawns in the prediction world.
    warned_leak: bool,
    /// Replicated entities the simulation spawned here, despawned.
    leaked: u64,
    /// Components the world had before the game's simulation was built, and the
    /// protocol's: never suspects for a system that cannot run.
    known: BTreeSet<ComponentId>,
    /// Comparisons with the server's state, and how many diverged (`diverged` takes
    /// `&self`; atomics keep the world `Sync`).
    compared: AtomicU64,
    diverged: AtomicU64,
    /// Components the simulation's systems name that no entity here has: set when
    /// prediction fails most comparisons.
    lacking: Vec<String>,
    _input: std::marker::PhantomData<I>,
}

/// What the prediction world remembers of one tick: per owned entity, its generation,
/// its quantized codes (compared with the server's) and its components as they were,
/// unquantized (a load keeps those the prediction had right).
pub struct Saved(BTreeMap<u32, SavedEntity>);

struct SavedEntity {
    generation: u32,
    codes: Vec<i32>,
    kept: Vec<Kept>,
}

impl<I: Input + Sync> PredictionWorld<I> {
    /// An empty prediction world running `protocol`'s simulation.
    pub fn new(protocol: Protocol) -> Self {
        let mut world = World::new();
        let mut schedule = Schedule::new(NetTick);
        world.register_component::<NetId>();
        world.register_component::<NetInput<I>>();
        let mut known: BTreeSet<ComponentId> = world
            .components()
            .iter_registered()
            .map(|c| c.id())
            .collect();
        known.extend(protocol.register_components(&mut world));
        protocol.build_simulation(&mut world, &mut schedule);
        world.insert_resource(SimTick(0));
        Self {
            protocol,
            world,
            schedule,
            owned: BTreeSet::new(),
            held: BTreeMap::new(),
            events: VecDeque::new(),
            warned_leak: false,
            leaked: 0,
            known,
            compared: AtomicU64::new(0),
            diverged: AtomicU64::new(0),
            lacking: Vec::new(),
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

    /// Predicted entity `id`'s generation, kind and current values, if the world holds
    /// it.
    pub fn held(&self, id: u32) -> Option<(u32, KindId, Vec<f32>)> {
        let generation = self.held.get(&id)?.generation;
        let (kind, values) = self.values(id)?;
        Some((generation, kind, values))
    }

    /// Takes the snapshot events that arrived since the last call, oldest first.
    pub fn take_snapshot_events(&mut self) -> Vec<(u32, Vec<u8>)> {
        self.events.drain(..).collect()
    }

    /// Despawns entities of a replicated kind the simulation spawned here: on a client
    /// only the server spawns them (they come in a snapshot), so one spawned by a
    /// prediction step would pile up, a copy per tick and per replay. The game is warned
    /// once: the system that spawns wants `run_if(resource_exists::<Authority>)`.
    fn despawn_leaked(&mut self) {
        let held: BTreeSet<Entity> = self.held.values().map(|h| h.entity).collect();
        let leaked: Vec<Entity> = self
            .protocol
            .marked(&mut self.world)
            .into_iter()
            .map(|(_, e)| e)
            .filter(|e| !held.contains(e))
            .collect();
        if leaked.is_empty() {
            return;
        }
        if !self.warned_leak {
            self.warned_leak = true;
            tracing::warn!(
                "lagless-bevy: a NetTick system spawned {} replicated entities in a client's \
                 prediction world; they are despawned (only the server spawns): run it with \
                 run_if(resource_exists::<Authority>)",
                leaked.len()
            );
        }
        self.leaked += leaked.len() as u64;
        for e in leaked {
            self.world.despawn(e);
        }
    }

    /// Replicated entities the simulation spawned in this world (and that were
    /// despawned): nonzero means a spawning system wants the `Authority` gate.
    pub fn leaked(&self) -> u64 {
        self.leaked
    }

    /// Components the simulation's systems name but no entity here holds, once
    /// prediction has failed most of its comparisons with the server: a system that
    /// reads one finds nothing to step (a component the server adds but does not
    /// replicate, say). Empty while prediction works.
    pub fn lacking(&self) -> &[String] {
        &self.lacking
    }

    /// When most comparisons with the server failed (at least [`WATCH_COMPARES`]),
    /// finds the components the simulation names that this world never holds and warns
    /// once, naming them.
    fn watch_failures(&mut self) {
        let compared = self.compared.load(Ordering::Relaxed);
        let diverged = self.diverged.load(Ordering::Relaxed);
        if !self.lacking.is_empty() || compared < WATCH_COMPARES || diverged * 2 < compared {
            return;
        }
        let held: Vec<ComponentId> = self
            .world
            .archetypes()
            .iter()
            .filter(|a| !a.is_empty())
            .flat_map(|a| a.components().iter().copied())
            .collect();
        self.lacking = self
            .world
            .components()
            .iter_registered()
            .filter(|c| !self.known.contains(&c.id()) && !held.contains(&c.id()))
            .map(|c| c.name().to_string())
            // Bevy's own (a schedule's events, registered on its first run).
            .filter(|name| !name.starts_with("bevy_"))
            .collect();
        if self.lacking.is_empty() {
            // Nothing to name; keep the check from running every tick.
            self.lacking.push(String::from("(none found)"));
        }
        tracing::warn!(
            "lagless-bevy: the prediction world disagreed with the server on {diverged} of \
             {compared} snapshots. It holds only the owned entities' replicated components, \
             their kind's marker, NetId and NetInput; the NetTick systems name these \
             components it never holds: {:?}. A system reading one steps nothing here \
             (replicate the component, or run the system on the server only)",
            self.lacking
        );
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
        // The state this step reaches, as the server names it (see `SimTick`).
        self.world.insert_resource(SimTick(tick.0.wrapping_add(1)));
        self.schedule.run(&mut self.world);
        // A system may have despawned an owned entity: forget it until the server says.
        let world = &self.world;
        self.held.retain(|_, h| world.get_entity(h.entity).is_ok());
        self.despawn_leaked();
        self.watch_failures();
    }

    fn save(&self) -> Saved {
        Saved(
            self.held
                .iter()
                .filter_map(|(id, h)| {
                    let entity = self.world.get_entity(h.entity).ok()?;
                    let saved = SavedEntity {
                        generation: h.generation,
                        codes: self.protocol.codes(h.kind, &entity)?,
                        kept: self.protocol.keep(h.kind, &entity)?,
                    };
                    Some((*id, saved))
                })
                .collect(),
        )
    }

    fn diverged(&self, predicted: &Saved, confirmed: &ReplicationClient) -> bool {
        let diverged = self.owned.iter().any(|id| {
            match (predicted.0.get(id), confirmed.get(*id)) {
                (None, None) => false,
                (
                    Some(SavedEntity {
                        generation, codes, ..
                    }),
                    Some(server),
                ) => {
                    // Per code: ints and bools exact, floats within a step (or as the
                    // component declared).
                    let tolerances = self.protocol.tolerances(server.kind);
                    *generation != server.generation
                        || codes.len() != server.codes.len()
                        || codes.len() != tolerances.len()
                        || codes.iter().zip(server.codes.iter()).zip(tolerances).any(
                            |((a, b), t)| (i64::from(*a) - i64::from(*b)).abs() > i64::from(*t),
                        )
                }
                // Spawned or despawned on the server, or not yet held here.
                _ => true,
            }
        });
        if !self.held.is_empty() {
            self.compared.fetch_add(1, Ordering::Relaxed);
            self.diverged
                .fetch_add(u64::from(diverged), Ordering::Relaxed);
        }
        diverged
    }

    /// Takes the server's state of the owned entities. A component whose codes the
    /// prediction had right keeps its predicted value, unrounded: a rollback another
    /// component made (a score only the server changes) leaves it where it was predicted,
    /// instead of moving it by the server's rounding.
    fn load(&mut self, confirmed: &ReplicationClient, predicted: Option<&Saved>) {
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
            let held = &self.held;
            let entity_of = |id: u32| held.get(&id).map(|h| h.entity);
            if let Ok(mut e) = self.world.get_entity_mut(entity) {
                self.protocol
                    .apply(server.kind, &server.values, &mut e, &entity_of);
                let same = predicted
                    .and_then(|p| p.0.get(&id))
                    .filter(|p| p.generation == server.generation);
                if let Some(p) = same {
                    let codes = (&server.codes[..], &p.codes[..], &p.kept[..]);
                    self.protocol
                        .restore_matching(server.kind, codes, &mut e, &entity_of);
                }
            }
        }
    }
}

impl<I: Input + Sync> PredictedWorld for PredictionWorld<I> {
    fn pose(&self, id: u32) -> Option<Pose> {
        let (kind, values) = self.values(id)?;
        pose_of(self.protocol.schema().get(kind)?, &values)
    }

    fn snapshot_events(&mut self, tick: Tick, bytes: &[u8], _rtt: Option<Duration>) {
        if self.events.len() >= MAX_SNAPSHOT_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back((tick.0, bytes.to_vec()));
    }
}
