//! What a game declares once: its replicated components with their quantization, the
//! kinds of entity that carry them, and the systems that are its simulation.

use crate::bevy::ecs::component::ComponentId;
use crate::bevy::ecs::schedule::{Schedule, ScheduleLabel};
use crate::bevy::prelude::*;
use crate::message::{MessageFns, NetMessage};
use lagless_replication::{
    Client, FieldType, Input, Kind, KindId, NetConfig, NetError, Schema, SchemaError, Server,
    StateReader, StateWriter,
};
use std::sync::Arc;

/// A component the server replicates: it declares its fields (names, limits,
/// resolution) and writes and reads them in that order.
///
/// `PartialEq` lets the client write a component only when its value changed, so
/// `Changed<C>` and `On<Insert, C>` mean what a Bevy game expects.
///
/// ```
/// # use lagless_bevy::bevy::prelude::*;
/// # use lagless_bevy::NetComponent;
/// # use lagless_replication::{Kind, StateReader, StateWriter};
/// #[derive(Component, Clone, Copy, PartialEq)]
/// struct Position(Vec2);
/// impl NetComponent for Position {
///     fn declare(kind: Kind) -> Kind { kind.vec2("position", 50.0, 0.01) } // ±50 m, 1 cm
///     fn write(&self, w: &mut StateWriter) { w.vec2(self.0.into()) }
///     fn read(r: &mut StateReader) -> Self { Position(r.vec2().into()) }
/// }
/// ```
pub trait NetComponent:
    Component<Mutability = crate::bevy::ecs::component::Mutable> + Clone + PartialEq
{
    /// How many quantization codes a predicted value of this component's fields may
    /// differ from the server's before it is a misprediction. `None` (the default): by
    /// field type, none for ints and bools (one code of an int is a whole point) and one
    /// for vectors, rotations and angles (both ends quantize unrounded floats, so one
    /// step either way is rounding, not disagreement).
    const TOLERANCE_CODES: Option<i32> = None;
    /// Adds this component's fields to `kind`.
    fn declare(kind: Kind) -> Kind;
    /// Writes the fields, one call per declared field, in order.
    fn write(&self, w: &mut StateWriter);
    /// Reads the fields back (from values the schema produced, never raw bytes).
    fn read(r: &mut StateReader) -> Self;
    /// Maps the references to other replicated entities this component holds
    /// ([`NetRef`]) to the local entities showing them, after [`NetComponent::read`]:
    /// `entity_of` gives the entity showing a replicated id on this end (the app's on a
    /// client, the prediction world's there). The default holds none.
    fn map_entities(&mut self, _entity_of: &dyn Fn(u32) -> Option<Entity>) {}
}

/// A reference to another replicated entity, inside a replicated component: the server
/// sets `id` (the target's [`NetId`], [`NetRef::to`]); on a client the adapter sets
/// `entity` to the Bevy entity showing that id (`None` while none does, such as before
/// the target's spawn tick), through the component's [`NetComponent::map_entities`]
/// calling [`NetRef::map`]. It travels as one int field ([`NetRef::declare`]), ids up to
/// [`NetRef::MAX_ID`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetRef {
    /// The target's replicated id, if any.
    pub id: Option<u32>,
    /// The local entity showing it (set by the adapter on a client).
    pub entity: Option<Entity>,
}

impl NetRef {
    /// The largest id a reference carries (a larger one travels as none).
    pub const MAX_ID: u32 = (1 << 24) - 2;

    /// A reference to replicated entity `id`.
    pub fn to(id: u32) -> Self {
        Self {
            id: Some(id),
            entity: None,
        }
    }

    /// Adds its field, named `name`, to `kind`.
    pub fn declare(kind: Kind, name: &str) -> Kind {
        kind.int(name, 0, (Self::MAX_ID + 1) as i32)
    }

    /// Writes it (0 for none, else the id plus one).
    pub fn write(&self, w: &mut StateWriter) {
        let code = self
            .id
            .filter(|id| *id <= Self::MAX_ID)
            .map_or(0, |id| id + 1);
        w.int(code as i32);
    }

    /// Reads it back, unmapped.
    pub fn read(r: &mut StateReader) -> Self {
        let code = r.int();
        Self {
            id: u32::try_from(code).ok().and_then(|c| c.checked_sub(1)),
            entity: None,
        }
    }

    /// Sets `entity` from `id`.
    pub fn map(&mut self, entity_of: &dyn Fn(u32) -> Option<Entity>) {
        self.entity = self.id.and_then(entity_of);
    }
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
/// input)`, each once ([`lagless_core::TickInputs::late`]). The input's tick is the
/// tick it was sent for: the step it drove reached [`SimTick`] one more. For what must not be lost to
/// a late packet, such as a shot, judged as of its own tick. Empty on most ticks, and in
/// a client's prediction world.
#[derive(Resource, Debug, Clone, PartialEq, Eq)]
pub struct LateInputs<I: Input + Sync>(pub Vec<(lagless_core::ClientId, u32, I)>);

impl<I: Input + Sync> Default for LateInputs<I> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

/// The tick being simulated, a resource while [`NetTick`] runs: the tick the state
/// reaches when this step is done, as every other tick names it (the snapshot's,
/// [`crate::ServerStatus::tick`], [`crate::PredictionStatus::predicted_tick`], the
/// render tick). An entity spawned while `SimTick` is `t` is in the snapshot of tick `t`
/// and shown from render tick `t`. The inputs applied are those sent for tick `t - 1`.
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
type Apply = fn(&mut StateReader, &mut EntityWorldMut, &dyn Fn(u32) -> Option<Entity>);
/// A component's value as the prediction world held it, unquantized.
pub(crate) type Kept = Box<dyn std::any::Any + Send + Sync>;
type Keep = fn(&EntityRef) -> Option<Kept>;
type Restore = fn(&Kept, &mut EntityWorldMut, &dyn Fn(u32) -> Option<Entity>);

/// One replicated component, type-erased.
#[derive(Clone, Copy)]
struct ComponentFns {
    has: Has,
    write: Write,
    apply: Apply,
    keep: Keep,
    restore: Restore,
    /// Its fields' indices in the kind, and its declared tolerance.
    fields: (usize, usize),
    tolerance: Option<i32>,
    register: fn(&mut World) -> ComponentId,
}

/// An entity kind: the marker component that makes a Bevy entity one, and the
/// replicated components it carries, in order.
#[derive(Clone)]
pub struct NetKind {
    kind: Kind,
    marked: fn(&mut World) -> Vec<Entity>,
    mark: fn(&mut EntityWorldMut),
    /// Registers the marker in a world; returns its id.
    register_marker: fn(&mut World) -> ComponentId,
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
            register_marker: |world| world.register_component::<M>(),
            mark: |e| {
                if !e.contains::<M>() {
                    e.insert(M::default());
                }
            },
            components: Vec::new(),
        }
    }

    /// Replicates component `C` on this kind.
    pub fn with<C: NetComponent>(mut self) -> Self {
        let first = self.kind.fields().len();
        self.kind = C::declare(self.kind);
        self.components.push(ComponentFns {
            fields: (first, self.kind.fields().len()),
            tolerance: C::TOLERANCE_CODES,
            register: |world| world.register_component::<C>(),
            has: |e| e.contains::<C>(),
            write: |e, w| {
                if let Some(c) = e.get::<C>() {
                    c.write(w);
                }
            },
            // Only a changed value is written, so `Changed<C>` fires once per change
            // and an insert observer once per entity.
            apply: |r, e, entity_of| set(e, C::read(r), entity_of),
            keep: |e| e.get::<C>().map(|c| Box::new(c.clone()) as Kept),
            restore: |kept, e, entity_of| {
                if let Some(c) = kept.downcast_ref::<C>() {
                    set(e, c.clone(), entity_of);
                }
            },
        });
        self
    }
}

/// Writes `value` (its references mapped) on `e`, only if it differs from what `e` holds.
fn set<C: NetComponent>(
    e: &mut EntityWorldMut,
    mut value: C,
    entity_of: &dyn Fn(u32) -> Option<Entity>,
) {
    value.map_entities(entity_of);
    match e.get_mut::<C>() {
        Some(mut c) => {
            c.set_if_neq(value);
        }
        None => {
            e.insert(value);
        }
    }
}

/// The game's declaration, shared by its server and clients: the network settings,
/// its kinds and its simulation.
#[derive(Clone)]
pub struct Protocol {
    inner: Arc<Inner>,
}

/// What builds the game's simulation into a world and its [`NetTick`] schedule.
type Simulation = Arc<dyn Fn(&mut World, &mut Schedule) + Send + Sync>;

struct Inner {
    config: NetConfig,
    schema: Schema,
    kinds: Vec<NetKind>,
    /// Per kind, per code: how far a prediction may be from the server's.
    tolerances: Vec<Vec<i32>>,
    messages: Vec<MessageFns>,
    simulation: Simulation,
}

/// Builds a [`Protocol`].
pub struct ProtocolBuilder {
    config: NetConfig,
    kinds: Vec<NetKind>,
    messages: Vec<MessageFns>,
    simulation: Simulation,
}

impl Protocol {
    /// Starts a declaration with `config` (tick rate and the rest).
    pub fn builder(config: NetConfig) -> ProtocolBuilder {
        ProtocolBuilder {
            config,
            kinds: Vec::new(),
            messages: Vec::new(),
            simulation: Arc::new(|_, _| {}),
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

    /// The game's message types, in registration order (their index is their tag).
    pub(crate) fn messages(&self) -> &[MessageFns] {
        &self.inner.messages
    }

    /// Registers every kind's marker and replicated components in `world`: their ids.
    pub(crate) fn register_components(&self, world: &mut World) -> Vec<ComponentId> {
        let mut ids = Vec::new();
        for k in &self.inner.kinds {
            ids.push((k.register_marker)(world));
            ids.extend(k.components.iter().map(|c| (c.register)(world)));
        }
        ids
    }

    /// Per code of `kind`: the quantization steps a prediction may be off by.
    pub(crate) fn tolerances(&self, kind: KindId) -> &[i32] {
        self.inner
            .tolerances
            .get(usize::from(kind))
            .map_or(&[], Vec::as_slice)
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
    /// `entity_of` maps a replicated id to the local entity showing it
    /// ([`NetComponent::map_entities`]).
    pub(crate) fn apply(
        &self,
        kind: KindId,
        values: &[f32],
        entity: &mut EntityWorldMut,
        entity_of: &dyn Fn(u32) -> Option<Entity>,
    ) {
        let (Some(k), Some(schema_kind)) = (self.kind(kind), self.inner.schema.get(kind)) else {
            return;
        };
        if values.len() != schema_kind.width() {
            return;
        }
        let mut r = StateReader::new(schema_kind, values);
        for c in &k.components {
            (c.apply)(&mut r, entity, entity_of);
        }
        (k.mark)(entity);
    }

    /// `entity`'s replicated components as they are, unquantized; `None` when one is
    /// missing.
    pub(crate) fn keep(&self, kind: KindId, entity: &EntityRef) -> Option<Vec<Kept>> {
        let k = self.kind(kind)?;
        k.components.iter().map(|c| (c.keep)(entity)).collect()
    }

    /// Puts back on `entity` each component `kept` holds whose codes in `server` are
    /// those in `predicted` (the prediction had it right, to the server's rounding).
    pub(crate) fn restore_matching(
        &self,
        kind: KindId,
        (server, predicted, kept): (&[i32], &[i32], &[Kept]),
        entity: &mut EntityWorldMut,
        entity_of: &dyn Fn(u32) -> Option<Entity>,
    ) {
        let (Some(k), Some(schema_kind)) = (self.kind(kind), self.inner.schema.get(kind)) else {
            return;
        };
        let fields = schema_kind.fields();
        for (c, kept) in k.components.iter().zip(kept) {
            let (first, end) = c.fields;
            let codes = match (
                fields.get(first),
                end.checked_sub(1).and_then(|l| fields.get(l)),
            ) {
                (Some(a), Some(b)) if first < end => a.offset..b.offset + b.ty.width(),
                _ => continue,
            };
            if server
                .get(codes.clone())
                .is_some_and(|s| predicted.get(codes) == Some(s))
            {
                (c.restore)(kept, entity, entity_of);
            }
        }
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
    pub fn simulation(
        mut self,
        simulation: impl Fn(&mut World, &mut Schedule) + Send + Sync + 'static,
    ) -> Self {
        self.simulation = Arc::new(simulation);
        self
    }

    /// Registers game message `M`, both ways: a client reads [`crate::FromServer<M>`]
    /// and writes [`crate::ToServer<M>`]; the server reads [`crate::FromClient<M>`] and
    /// writes [`crate::ToClients<M>`]. Register the same types in the same order on every end (the
    /// protocol is shared, so they are).
    pub fn message<M: NetMessage>(mut self) -> Self {
        self.messages.push(MessageFns::of::<M>());
        self
    }

    /// The protocol, or why its schema is invalid.
    pub fn build(self) -> Result<Protocol, SchemaError> {
        let schema = self
            .kinds
            .iter()
            .fold(Schema::new(), |s, k| s.kind(k.kind.clone()))
            .build()?;
        let tolerances = self
            .kinds
            .iter()
            .map(|k| {
                k.components
                    .iter()
                    .flat_map(|c| {
                        let fields = &k.kind.fields()[c.fields.0..c.fields.1];
                        fields.iter().flat_map(move |f| {
                            let by_type = match f.ty {
                                FieldType::Int { .. } | FieldType::Bool => 0,
                                _ => 1,
                            };
                            std::iter::repeat_n(c.tolerance.unwrap_or(by_type), f.ty.width())
                        })
                    })
                    .collect()
            })
            .collect();
        Ok(Protocol {
            inner: Arc::new(Inner {
                config: self.config,
                schema,
                kinds: self.kinds,
                tolerances,
                messages: self.messages,
                simulation: self.simulation,
            }),
        })
    }
}
