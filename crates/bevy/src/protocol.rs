//! What a game declares once: its replicated components with their quantization, the
//! kinds of entity that carry them, and the systems that are its simulation.

use crate::bevy::ecs::schedule::{Schedule, ScheduleLabel};
use crate::bevy::prelude::*;
use lagless_replication::{
    Client, Input, Kind, KindId, NetConfig, NetError, Schema, SchemaError, Server, StateReader,
    StateWriter,
};
use std::sync::Arc;

/// A component the server replicates: it declares its fields (names, limits,
/// resolution) and writes and reads them in that order.
///
/// ```
/// # use lagless_bevy::bevy::prelude::*;
/// # use lagless_bevy::NetComponent;
/// # use lagless_replication::{Kind, StateReader, StateWriter};
/// #[derive(Component, Clone, Copy)]
/// struct Position(Vec2);
/// impl NetComponent for Position {
///     fn declare(kind: Kind) -> Kind { kind.vec2("position", 50.0, 0.01) } // ±50 m, 1 cm
///     fn write(&self, w: &mut StateWriter) { w.vec2(self.0.into()) }
///     fn read(r: &mut StateReader) -> Self { Position(r.vec2().into()) }
/// }
/// ```
pub trait NetComponent:
    Component<Mutability = crate::bevy::ecs::component::Mutable> + Clone
{
    /// Adds this component's fields to `kind`.
    fn declare(kind: Kind) -> Kind;
    /// Writes the fields, one call per declared field, in order.
    fn write(&self, w: &mut StateWriter);
    /// Reads the fields back (from values the schema produced, never raw bytes).
    fn read(r: &mut StateReader) -> Self;
}

/// The schedule that is the game's simulation: run once per network tick on the server
/// (with every client's input in [`NetInput`]) and, on a client, in its prediction world
/// for the entities it owns, again on every rollback. The session owns the tick clock
/// (a client runs ahead of the server by a lead it adapts, slowing and hurrying), so
/// Bevy's `Time<Fixed>` does not drive it.
#[derive(ScheduleLabel, Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetTick;

/// The player's input for the tick being simulated, on each entity the player owns.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetInput<I: Input + Sync>(pub I);

/// The local player's input, written by the game each frame; the adapter sends it (or,
/// on a host, applies it) with every tick that comes due.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalInput<I: Input + Sync>(pub I);

/// The transport's clock (virtual on the emulator), refreshed every frame by either
/// plugin: what a game times its input or effects by.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetClock(pub std::time::Duration);

/// On the server, while [`NetTick`] runs: inputs that arrived after their tick was
/// simulated without them (the server's guess stood), as `(client, the input's tick,
/// input)`, each once ([`lagless_core::TickInputs::late`]). For what must not be lost to
/// a late packet, such as a shot, judged as of its own tick. Empty on most ticks, and in
/// a client's prediction world.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct LateInputs<I: Input + Sync>(pub Vec<(lagless_core::ClientId, u32, I)>);

impl<I: Input + Sync> Default for LateInputs<I> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

/// The tick being simulated, a resource while [`NetTick`] runs.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimTick(pub u32);

/// Present in the server's world only (never in a client's prediction world): run the
/// rules only the server decides (pickups, spawns) with `run_if(resource_exists::<Authority>)`.
#[derive(Resource, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Authority;

/// A replicated entity's id, the same on the server and every client.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetId(pub u32);

/// The client that drives this entity (server side): it gets that client's input each
/// tick, the client predicts it, and it is despawned when the client leaves.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner(pub lagless_replication::ClientId);

type Has = fn(&EntityRef) -> bool;
type Write = fn(&EntityRef, &mut StateWriter);
type Apply = fn(&mut StateReader, &mut EntityWorldMut);

/// One replicated component, type-erased.
#[derive(Clone, Copy)]
struct ComponentFns {
    has: Has,
    write: Write,
    apply: Apply,
}

/// An entity kind: the marker component that makes a Bevy entity one, and the
/// replicated components it carries, in order.
#[derive(Clone)]
pub struct NetKind {
    kind: Kind,
    marked: fn(&mut World) -> Vec<Entity>,
    mark: fn(&mut EntityWorldMut),
    components: Vec<ComponentFns>,
}

impl NetKind {
    /// Entities with marker `M` are of this kind (named `name` in the schema).
    pub fn new<M: Component + Default>(name: &str) -> Self {
        Self {
            kind: Kind::new(name),
            marked: |world| {
                let mut q = world.query_filtered::<Entity, With<M>>();
                q.iter(world).collect()
            },
            mark: |e| {
                e.insert(M::default());
            },
            components: Vec::new(),
        }
    }

    /// Replicates component `C` on this kind.
    pub fn with<C: NetComponent>(mut self) -> Self {
        self.kind = C::declare(self.kind);
        self.components.push(ComponentFns {
            has: |e| e.contains::<C>(),
            write: |e, w| {
                if let Some(c) = e.get::<C>() {
                    c.write(w);
                }
            },
            apply: |r, e| {
                e.insert(C::read(r));
            },
        });
        self
    }
}

/// The game's declaration, shared by its server and clients: the network settings,
/// its kinds and its simulation.
#[derive(Clone)]
pub struct Protocol {
    inner: Arc<Inner>,
}

struct Inner {
    config: NetConfig,
    schema: Schema,
    kinds: Vec<NetKind>,
    simulation: fn(&mut World, &mut Schedule),
}

/// Builds a [`Protocol`].
pub struct ProtocolBuilder {
    config: NetConfig,
    kinds: Vec<NetKind>,
    simulation: fn(&mut World, &mut Schedule),
}

impl Protocol {
    /// Starts a declaration with `config` (tick rate and the rest).
    pub fn builder(config: NetConfig) -> ProtocolBuilder {
        ProtocolBuilder {
            config,
            kinds: Vec::new(),
            simulation: |_, _| {},
        }
    }

    /// The network settings.
    pub fn config(&self) -> &NetConfig {
        &self.inner.config
    }

    /// The schema the kinds make.
    pub fn schema(&self) -> &Schema {
        &self.inner.schema
    }

    /// A server for this protocol, to host on a transport.
    pub fn server<I: Input + Sync>(&self) -> Result<Server<I>, NetError> {
        Server::new(self.inner.schema.clone(), &self.inner.config)
    }

    /// A client for this protocol, predicting with the game's simulation.
    pub fn client<I: Input + Sync>(&self) -> Result<Client<crate::PredictionWorld<I>>, NetError> {
        Client::new(
            self.inner.schema.clone(),
            crate::PredictionWorld::new(self.clone()),
            &self.inner.config,
        )
    }

    /// Adds the simulation's systems and resources to `world` and `schedule`.
    pub(crate) fn build_simulation(&self, world: &mut World, schedule: &mut Schedule) {
        (self.inner.simulation)(world, schedule);
    }

    /// The kind of `entity` (the first whose marker it has), scanning `world`.
    pub(crate) fn marked(&self, world: &mut World) -> Vec<(KindId, Entity)> {
        let mut out = Vec::new();
        for (k, kind) in self.inner.kinds.iter().enumerate() {
            out.extend((kind.marked)(world).into_iter().map(|e| (k as KindId, e)));
        }
        out
    }

    /// Whether `entity` carries every component of `kind`.
    pub(crate) fn complete(&self, kind: KindId, entity: &EntityRef) -> bool {
        self.kind(kind)
            .is_some_and(|k| k.components.iter().all(|c| (c.has)(entity)))
    }

    /// Writes `entity`'s replicated components.
    pub(crate) fn write(&self, kind: KindId, entity: &EntityRef, w: &mut StateWriter) {
        if let Some(k) = self.kind(kind) {
            for c in &k.components {
                (c.write)(entity, w);
            }
        }
    }

    /// `entity`'s quantized codes, `None` when a component is missing.
    pub(crate) fn codes(&self, kind: KindId, entity: &EntityRef) -> Option<Vec<i32>> {
        if !self.complete(kind, entity) {
            return None;
        }
        let mut w = StateWriter::new(self.inner.schema.get(kind)?);
        self.write(kind, entity, &mut w);
        w.finish().ok()
    }

    /// Inserts the components `values` hold (and the kind's marker) on `entity`.
    pub(crate) fn apply(&self, kind: KindId, values: &[f32], entity: &mut EntityWorldMut) {
        let (Some(k), Some(schema_kind)) = (self.kind(kind), self.inner.schema.get(kind)) else {
            return;
        };
        if values.len() != schema_kind.width() {
            return;
        }
        let mut r = StateReader::new(schema_kind, values);
        for c in &k.components {
            (c.apply)(&mut r, entity);
        }
        (k.mark)(entity);
    }

    fn kind(&self, kind: KindId) -> Option<&NetKind> {
        self.inner.kinds.get(usize::from(kind))
    }
}

impl ProtocolBuilder {
    /// Declares a kind. Kinds are numbered in declaration order.
    pub fn kind(mut self, kind: NetKind) -> Self {
        self.kinds.push(kind);
        self
    }

    /// The game's simulation: adds its systems to the [`NetTick`] schedule (and any
    /// resources they read to the world). It runs on the server's world and, on each
    /// client, on a prediction world that holds only the entities the client owns.
    pub fn simulation(mut self, simulation: fn(&mut World, &mut Schedule)) -> Self {
        self.simulation = simulation;
        self
    }

    /// The protocol, or why its schema is invalid.
    pub fn build(self) -> Result<Protocol, SchemaError> {
        let schema = self
            .kinds
            .iter()
            .fold(Schema::new(), |s, k| s.kind(k.kind.clone()))
            .build()?;
        Ok(Protocol {
            inner: Arc::new(Inner {
                config: self.config,
                schema,
                kinds: self.kinds,
                simulation: self.simulation,
            }),
        })
    }
}
