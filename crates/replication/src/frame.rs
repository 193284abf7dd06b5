//! What the client shows of the entities it does not predict: a [`Frame`] of replicated
//! states that the core's interpolation buffer blends field by field, as each field's
//! declaration says (Glenn Fiedler's "Snapshot Interpolation", for any schema).

use crate::schema::{FieldType, Kind, KindId, Schema};
use crate::state::StateReader;
use lagless_core::interpolation::{Interpolate, Pose};
use std::f32::consts::TAU;
use std::sync::Arc;

/// One entity in a [`Frame`].
#[derive(Debug, Clone, PartialEq)]
struct FrameEntity {
    id: u32,
    /// Its incarnation ([`crate::ClientEntity::generation`]): two frames' entities of one
    /// id are blended only when it is the same entity.
    generation: u32,
    kind: KindId,
    values: Arc<[f32]>,
}

/// The replicated state of a set of entities at one (possibly fractional) server tick:
/// what the [`crate::Client`] interpolates and hands to the renderer.
///
/// Blending follows the declaration: vectors move in a straight line, or along the
/// Hermite curve their declared velocity gives ([`crate::Kind::velocity_of`]); rotations
/// take the shorter way round; angles wrap; ints, enums and bools switch when the newer
/// state is reached. So do entities: one only in the newer frame appears when the newer
/// state is reached, and one only in the older stays until then.
#[derive(Debug, Clone)]
pub struct Frame {
    schema: Arc<Schema>,
    entities: Vec<FrameEntity>,
}

impl Frame {
    /// An empty frame of `schema`'s kinds.
    pub fn new(schema: Arc<Schema>) -> Self {
        Self {
            schema,
            entities: Vec::new(),
        }
    }

    /// Adds entity `id` (ids must come in ascending order; others are ignored, as are
    /// values of the wrong width for the kind), of generation 0.
    pub fn push(&mut self, id: u32, kind: KindId, values: Arc<[f32]>) {
        self.push_generation(id, 0, kind, values);
    }

    /// Adds entity `id` of `generation` ([`crate::ClientEntity::generation`]), as
    /// [`Frame::push`] does: an entity is blended with an older frame's of the same id
    /// only if their generations agree, so an id the server reused does not slide from
    /// where the old entity was.
    pub fn push_generation(&mut self, id: u32, generation: u32, kind: KindId, values: Arc<[f32]>) {
        let fits = self
            .schema
            .get(kind)
            .is_some_and(|k| k.width() == values.len());
        if fits && self.entities.last().is_none_or(|e| e.id < id) {
            self.entities.push(FrameEntity {
                id,
                generation,
                kind,
                values,
            });
        }
    }

    /// Entity `id`'s generation.
    pub fn generation(&self, id: u32) -> Option<u32> {
        self.find(id).map(|e| e.generation)
    }

    /// Entities in the frame.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// True when the frame holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.entities.iter().map(|e| e.id)
    }

    fn find(&self, id: u32) -> Option<&FrameEntity> {
        self.entities
            .binary_search_by_key(&id, |e| e.id)
            .ok()
            .map(|i| &self.entities[i])
    }

    /// Entity `id`'s kind and values (in the kind's layout).
    pub fn get(&self, id: u32) -> Option<(KindId, &[f32])> {
        self.find(id).map(|e| (e.kind, &e.values[..]))
    }

    /// Entity `id`'s generation, kind and values, sharing them rather than copying.
    pub(crate) fn get_shared(&self, id: u32) -> Option<(u32, KindId, Arc<[f32]>)> {
        self.find(id)
            .map(|e| (e.generation, e.kind, Arc::clone(&e.values)))
    }

    /// A typed reader over entity `id`'s values.
    pub fn reader(&self, id: u32) -> Option<StateReader<'_>> {
        let e = self.find(id)?;
        Some(StateReader::new(self.schema.get(e.kind)?, &e.values))
    }

    /// Entity `id`'s pose, when its kind has a position ([`Kind::position_field`]): 2D
    /// positions lie in the plane z = 0 and 2D angles turn about z
    /// ([`pose_of`]).
    pub fn pose(&self, id: u32) -> Option<Pose> {
        let e = self.find(id)?;
        pose_of(self.schema.get(e.kind)?, &e.values)
    }
}

/// The pose a kind's values describe: its position field ([`Kind::position_field`], a 2D
/// one in the plane z = 0), its first rotation or angle field (an angle turns about z; with
/// neither, no rotation), and the position's declared velocity.
pub fn pose_of(kind: &Kind, values: &[f32]) -> Option<Pose> {
    let p = kind.position_field()?;
    let at = |f: &crate::Field| values.get(f.offset..f.offset + f.ty.width());
    let v = at(p)?;
    let position = [v[0], v[1], v.get(2).copied().unwrap_or(0.0)];
    let rotation = kind
        .fields()
        .iter()
        .find_map(|f| match f.ty {
            FieldType::Rotation { .. } => at(f).map(|q| [q[0], q[1], q[2], q[3]]),
            FieldType::Angle { .. } => at(f).map(|a| Pose::planar([0.0; 2], a[0]).rotation),
            _ => None,
        })
        .unwrap_or([0.0, 0.0, 0.0, 1.0]);
    let mut pose = Pose::new(position, rotation);
    if let Some(vel) = p.velocity.and_then(|i| at(&kind.fields()[i])) {
        pose.linear_velocity = Some([vel[0], vel[1], vel.get(2).copied().unwrap_or(0.0)]);
    }
    Some(pose)
}

/// Blends `a` towards `b` field by field; `dt` is the time between them for Hermite
/// curves (`None`: straight lines).
fn blend(kind: &Kind, a: &[f32], b: &[f32], t: f32, dt: Option<f32>) -> Arc<[f32]> {
    let mut out = b.to_vec();
    for f in kind.fields() {
        let r = f.offset..f.offset + f.ty.width();
        let (x, y) = (&a[r.clone()], &b[r.clone()]);
        let o = &mut out[r];
        match f.ty {
            FieldType::Vector { .. } => {
                let vel = f.velocity.map(|i| &kind.fields()[i]);
                match (vel, dt) {
                    (Some(v), Some(dt)) if v.ty.width() == o.len() => {
                        let (va, vb) = (&a[v.offset..], &b[v.offset..]);
                        let (t2, t3) = (t * t, t * t * t);
                        let h00 = 2.0 * t3 - 3.0 * t2 + 1.0;
                        let h10 = t3 - 2.0 * t2 + t;
                        let h01 = -2.0 * t3 + 3.0 * t2;
                        let h11 = t3 - t2;
                        for k in 0..o.len() {
                            o[k] = h00 * x[k] + h10 * dt * va[k] + h01 * y[k] + h11 * dt * vb[k];
                        }
                    }
                    _ => {
                        for k in 0..o.len() {
                            o[k] = x[k] + (y[k] - x[k]) * t;
                        }
                    }
                }
            }
            FieldType::Rotation { .. } => {
                let dot: f32 = (0..4).map(|k| x[k] * y[k]).sum();
                let s = if dot < 0.0 { -1.0 } else { 1.0 };
                let q: Vec<f32> = (0..4).map(|k| x[k] + (s * y[k] - x[k]) * t).collect();
                let n = q.iter().map(|c| c * c).sum::<f32>().sqrt();
                if n > 1e-6 {
                    for k in 0..4 {
                        o[k] = q[k] / n;
                    }
                }
            }
            FieldType::Angle { .. } => {
                let d = (y[0] - x[0] + TAU / 2.0).rem_euclid(TAU) - TAU / 2.0;
                o[0] = (x[0] + d * t).rem_euclid(TAU);
            }
            FieldType::Int { .. } | FieldType::Bool => {
                o[0] = if t >= 1.0 { y[0] } else { x[0] };
            }
        }
    }
    out.into()
}

/// `a` blended towards `b` at `t`. Each entity appears and goes at the state that says
/// so, as ints and bools switch: one only in `b` (spawned, or come into the client's
/// interest, or a new incarnation of a reused id) is shown once `b` is reached, and one
/// only in `a` stays until then, moving along its declared velocity when `dt` is known.
/// Showing the newer state early would put an entity that came into view moving where it
/// will be a tick later, and a player respawned far away at its spawn point while the
/// truth of that time still has it where it died.
fn merge(a: &Frame, b: &Frame, t: f32, dt: Option<f32>) -> Frame {
    let reached = t >= 1.0;
    let mut entities = Vec::with_capacity(b.entities.len());
    let mut older = a.entities.iter().peekable();
    let held = |o: &FrameEntity, entities: &mut Vec<FrameEntity>| {
        if !reached {
            let values = match (dt, a.schema.get(o.kind)) {
                (Some(dt), Some(kind)) => along_velocity(kind, &o.values, t * dt)
                    .map_or_else(|| Arc::clone(&o.values), Arc::from),
                _ => Arc::clone(&o.values),
            };
            entities.push(FrameEntity {
                values,
                ..o.clone()
            });
        }
    };
    for e in &b.entities {
        while let Some(o) = older.next_if(|o| o.id < e.id) {
            held(o, &mut entities);
        }
        let kind = b.schema.get(e.kind);
        let same = older.next_if(|o| o.id == e.id);
        match (same, kind) {
            (Some(o), Some(kind)) if o.kind == e.kind && o.generation == e.generation => {
                entities.push(FrameEntity {
                    values: blend(kind, &o.values, &e.values, t, dt),
                    ..e.clone()
                });
            }
            (Some(o), _) if !reached => held(o, &mut entities),
            _ if reached => entities.push(e.clone()),
            _ => {}
        }
    }
    for o in older {
        held(o, &mut entities);
    }
    Frame {
        schema: Arc::clone(&b.schema),
        entities,
    }
}

/// `values` with every position that has a declared velocity moved along it for
/// `secs`; `None` when no field moves.
fn along_velocity(kind: &Kind, values: &[f32], secs: f32) -> Option<Vec<f32>> {
    let mut out = values.to_vec();
    let mut moved = false;
    for f in kind.fields() {
        if let Some(v) = f.velocity.map(|i| &kind.fields()[i]) {
            for k in 0..f.ty.width().min(v.ty.width()) {
                out[f.offset + k] += values[v.offset + k] * secs;
                moved = true;
            }
        }
    }
    moved.then_some(out)
}

impl Interpolate for Frame {
    fn lerp(a: &Self, b: &Self, t: f32) -> Self {
        merge(a, b, t, None)
    }

    fn hermite(a: &Self, b: &Self, t: f32, dt_secs: f32) -> Self {
        merge(a, b, t, Some(dt_secs))
    }

    /// Positions with a declared velocity move along it; everything else holds.
    fn extrapolate(a: &Self, dt_secs: f32) -> Self {
        let mut out = a.clone();
        for e in &mut out.entities {
            if let Some(values) = a
                .schema
                .get(e.kind)
                .and_then(|kind| along_velocity(kind, &e.values, dt_secs))
            {
                e.values = values.into();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Arc<Schema> {
        let s = Schema::new()
            .kind(
                Kind::new("dot")
                    .vec2("position", 100.0, 0.01)
                    .vec2("velocity", 50.0, 0.01)
                    .velocity_of("position")
                    .angle("heading", 12)
                    .int("hp", 0, 100),
            )
            .kind(
                Kind::new("box")
                    .vec3("position", 100.0, 0.01)
                    .rotation("r", 12),
            )
            .build()
            .unwrap();
        Arc::new(s)
    }

    #[test]
    fn fields_blend_as_declared() {
        let s = schema();
        let mut a = Frame::new(Arc::clone(&s));
        a.push(1, 0, vec![0.0, 0.0, 1.0, 0.0, 6.0, 100.0].into());
        a.push(2, 1, vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0].into());
        a.push(3, 1, vec![9.0, 9.0, 9.0, 0.0, 0.0, 0.0, 1.0].into());
        let mut b = Frame::new(Arc::clone(&s));
        b.push(1, 0, vec![2.0, 0.0, 1.0, 0.0, 0.2, 50.0].into());
        let half = std::f32::consts::FRAC_1_SQRT_2;
        b.push(2, 1, vec![2.0, 4.0, 6.0, 0.0, 0.0, half, half].into());
        b.push(4, 1, vec![1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0].into());

        let m = Frame::lerp(&a, &b, 0.5);
        assert_eq!(
            m.ids().collect::<Vec<_>>(),
            vec![1, 2, 3],
            "3 stays and 4 waits until the newer state is reached"
        );
        assert_eq!(
            Frame::lerp(&a, &b, 1.0).ids().collect::<Vec<_>>(),
            vec![1, 2, 4],
            "then 3 is gone and 4 appears"
        );
        let (_, d) = m.get(1).unwrap();
        assert!((d[0] - 1.0).abs() < 1e-6);
        // The same id in a new incarnation appears where it is, not half-way, and only
        // once its state is reached: until then the old one moves on along its velocity.
        let mut c = Frame::new(Arc::clone(&s));
        c.push_generation(1, 1, 0, vec![9.0, 0.0, 1.0, 0.0, 0.2, 50.0].into());
        let r = Frame::lerp(&a, &c, 0.5);
        assert_eq!((r.get(1).unwrap().1[0], r.generation(1)), (0.0, Some(0)));
        let r = Frame::hermite(&a, &c, 0.5, 2.0);
        assert_eq!((r.get(1).unwrap().1[0], r.generation(1)), (1.0, Some(0)));
        let r = Frame::lerp(&a, &c, 1.0);
        assert_eq!((r.get(1).unwrap().1[0], r.generation(1)), (9.0, Some(1)));
        // 6.0 to 0.2 rad is shorter across 2π: halfway lies near 0.
        assert!(!(0.5..5.8).contains(&d[4]), "heading {}", d[4]);
        assert_eq!(d[5], 100.0, "ints switch only at the newer state");
        assert_eq!(Frame::lerp(&a, &b, 1.0).get(1).unwrap().1[5], 50.0);
        let (_, r) = m.get(2).unwrap();
        assert_eq!(r[0..3], [1.0, 2.0, 3.0]);
        let norm: f32 = r[3..7].iter().map(|c| c * c).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert_eq!(
            m.get(3).unwrap().1,
            a.get(3).unwrap().1,
            "no velocity: holds"
        );

        // Along the velocity: 1 m/s for 2 s from 0 to 2 is a straight line anyway, and
        // extrapolation moves the position by the velocity.
        let h = Frame::hermite(&a, &b, 0.5, 2.0);
        assert!((h.get(1).unwrap().1[0] - 1.0).abs() < 1e-5);
        let e = Frame::extrapolate(&b, 0.5);
        assert!((e.get(1).unwrap().1[0] - 2.5).abs() < 1e-6);
        assert_eq!(
            e.get(2).unwrap().1,
            b.get(2).unwrap().1,
            "no velocity: holds"
        );
    }

    #[test]
    fn poses_read_2d_and_3d_kinds() {
        let s = schema();
        let mut f = Frame::new(Arc::clone(&s));
        f.push(
            1,
            0,
            vec![3.0, 4.0, 1.0, 2.0, std::f32::consts::PI, 7.0].into(),
        );
        // Wrong width and out-of-order pushes are ignored.
        f.push(0, 0, vec![1.0].into());
        f.push(5, 0, vec![1.0].into());
        assert_eq!(f.len(), 1);
        let p = f.pose(1).unwrap();
        assert_eq!(p.position, [3.0, 4.0, 0.0]);
        assert_eq!(p.linear_velocity, Some([1.0, 2.0, 0.0]));
        assert!((p.rotation[2] - 1.0).abs() < 1e-6, "half a turn about z");
        let mut r = f.reader(1).unwrap();
        assert_eq!(r.vec2(), [3.0, 4.0]);
    }
}
