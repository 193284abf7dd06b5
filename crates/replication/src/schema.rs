//! What a game replicates: entity kinds, declared once, each a list of quantized fields.
//!
//! A field says how its value is put on a grid (a bounded float at a resolution, a 2D or
//! 3D vector, a smallest-three rotation, a 2D angle, a small int, a bool, an enum). Both
//! ends build the same [`Schema`]; the server writes values through it
//! ([`StateWriter`](crate::StateWriter)), the client reads them back
//! ([`StateReader`](crate::StateReader)). In memory, an entity's state is its *codes*: one
//! `i32` per number (a rotation takes four: the dropped component and three levels), so
//! comparing two states, or diffing them, is integer work.
//!
//! ```
//! use lagless_replication::{Kind, Schema};
//! let schema = Schema::new()
//!     .kind(
//!         Kind::new("ball")
//!             .vec3("position", 500.0, 1.0 / 512.0)
//!             .rotation("rotation", 11)
//!             .vec3("velocity", 64.0, 1.0 / 64.0)
//!             .velocity_of("position"),
//!     )
//!     .build()
//!     .unwrap();
//! assert_eq!(schema.kind_id("ball"), Some(0));
//! ```

use lagless_wire::{QuatCodec, dequantize_f32, quantize_f32};
use thiserror::Error;

/// Index of a kind in its [`Schema`], in declaration order.
pub type KindId = u16;

/// Codes stay below this in magnitude, so the difference of two zig-zags into 31 bits.
pub const CODE_LIMIT: i64 = (1 << 29) - 1;

/// Most fields a kind may have.
pub const MAX_FIELDS: usize = 64;

/// Most kinds a schema may have.
pub const MAX_KINDS: usize = 1024;

/// How a field's value is quantized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldType {
    /// `dims` (1 to 3) floats, each within `[min, max]`, on a grid of `resolution`.
    Vector {
        /// Components: 1 (a float), 2 or 3.
        dims: u8,
        /// Smallest value.
        min: f32,
        /// Largest value.
        max: f32,
        /// Grid step.
        resolution: f32,
    },
    /// A unit quaternion `[x, y, z, w]`, smallest-three with `bits` per component.
    Rotation {
        /// Bits per sent component (2 to 16).
        bits: u8,
    },
    /// An angle in radians (a 2D heading), `2^bits` steps per turn; wraps.
    Angle {
        /// Bits per turn (2 to 24).
        bits: u8,
    },
    /// An integer within `[min, max]`.
    Int {
        /// Smallest value.
        min: i32,
        /// Largest value.
        max: i32,
    },
    /// True or false.
    Bool,
}

impl FieldType {
    /// Numbers (codes, and values) the field takes.
    pub fn width(&self) -> usize {
        match self {
            FieldType::Vector { dims, .. } => usize::from(*dims),
            FieldType::Rotation { .. } => 4,
            FieldType::Angle { .. } | FieldType::Int { .. } | FieldType::Bool => 1,
        }
    }

    /// Smallest and largest code of one component (vectors, angles, ints, bools).
    pub(crate) fn code_range(&self) -> (i32, i32) {
        match *self {
            FieldType::Vector {
                min,
                max,
                resolution,
                ..
            } => {
                let r = f64::from(resolution);
                let lo = (f64::from(min) / r).ceil().max(-(CODE_LIMIT as f64));
                let hi = (f64::from(max) / r).floor().min(CODE_LIMIT as f64);
                (lo as i32, hi as i32)
            }
            FieldType::Angle { bits } => (0, (1i32 << bits) - 1),
            FieldType::Int { min, max } => (min, max),
            FieldType::Bool => (0, 1),
            // Rotations are checked as a whole (see `field::valid`).
            FieldType::Rotation { bits } => (0, (1i32 << bits) - 1),
        }
    }

    pub(crate) fn quat_codec(&self) -> Option<QuatCodec> {
        match *self {
            FieldType::Rotation { bits } => Some(QuatCodec::new(u32::from(bits))),
            _ => None,
        }
    }

    /// The code of one vector component, clamped to the range; NaN is 0 (clamped).
    pub(crate) fn quantize_component(&self, v: f32) -> i32 {
        let (lo, hi) = self.code_range();
        match *self {
            FieldType::Vector { resolution, .. } => quantize_f32(v, resolution).clamp(lo, hi),
            _ => 0,
        }
    }

    pub(crate) fn dequantize_component(&self, code: i32) -> f32 {
        match *self {
            FieldType::Vector { resolution, .. } => dequantize_f32(code, resolution),
            _ => 0.0,
        }
    }
}

/// One declared field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name, for errors and docs.
    pub name: String,
    /// How it is quantized.
    pub ty: FieldType,
    /// For a position: the field holding its velocity (per second). The wire then diffs
    /// the position against where the velocities say it went since the baseline, and
    /// interpolation follows the velocity (Hermite) instead of a straight line.
    pub velocity: Option<usize>,
    /// Where its codes start in the kind's codes.
    pub offset: usize,
}

/// One kind of entity: its fields and how much it matters.
#[derive(Debug, Clone, PartialEq)]
pub struct Kind {
    name: String,
    fields: Vec<Field>,
    priority: f32,
    pending_velocity: Vec<(usize, String)>,
    width: usize,
    wire_order: Vec<usize>,
    position: Option<usize>,
}

impl Kind {
    /// A kind with no fields yet, priority 1.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            fields: Vec::new(),
            priority: 1.0,
            pending_velocity: Vec::new(),
            width: 0,
            wire_order: Vec::new(),
            position: None,
        }
    }

    fn push(mut self, name: &str, ty: FieldType) -> Self {
        let offset = self.width;
        self.width += ty.width();
        self.fields.push(Field {
            name: name.to_owned(),
            ty,
            velocity: None,
            offset,
        });
        self
    }

    /// A float within `[min, max]` on a grid of `resolution`.
    pub fn float(self, name: &str, min: f32, max: f32, resolution: f32) -> Self {
        self.push(
            name,
            FieldType::Vector {
                dims: 1,
                min,
                max,
                resolution,
            },
        )
    }

    /// A 2D vector, each component within `±limit`, on a grid of `resolution`.
    pub fn vec2(self, name: &str, limit: f32, resolution: f32) -> Self {
        self.push(
            name,
            FieldType::Vector {
                dims: 2,
                min: -limit,
                max: limit,
                resolution,
            },
        )
    }

    /// A 3D vector, each component within `±limit`, on a grid of `resolution`.
    pub fn vec3(self, name: &str, limit: f32, resolution: f32) -> Self {
        self.push(
            name,
            FieldType::Vector {
                dims: 3,
                min: -limit,
                max: limit,
                resolution,
            },
        )
    }

    /// A 3D rotation (unit quaternion `[x, y, z, w]`), smallest-three with `bits` per
    /// component (11: at most 0.13° off).
    pub fn rotation(self, name: &str, bits: u8) -> Self {
        self.push(name, FieldType::Rotation { bits })
    }

    /// A 2D heading in radians, `2^bits` steps per turn.
    pub fn angle(self, name: &str, bits: u8) -> Self {
        self.push(name, FieldType::Angle { bits })
    }

    /// An integer within `[min, max]` (health, ammo, a team).
    pub fn int(self, name: &str, min: i32, max: i32) -> Self {
        self.push(name, FieldType::Int { min, max })
    }

    /// A flag.
    pub fn bool(self, name: &str) -> Self {
        self.push(name, FieldType::Bool)
    }

    /// One of `variants` values, `0..variants`.
    pub fn enumeration(self, name: &str, variants: u32) -> Self {
        let max = i32::try_from(variants.saturating_sub(1)).unwrap_or(i32::MAX);
        self.push(name, FieldType::Int { min: 0, max })
    }

    /// Declares the field just added as the velocity (per second) of the vector field
    /// `position`, which must have as many components.
    pub fn velocity_of(mut self, position: &str) -> Self {
        if let Some(last) = self.fields.len().checked_sub(1) {
            self.pending_velocity.push((last, position.to_owned()));
        }
        self
    }

    /// How much this kind matters against others when the bandwidth budget is short
    /// (default 1; a player's avatar might be 4). Must be positive and finite.
    pub fn priority(mut self, priority: f32) -> Self {
        self.priority = priority;
        self
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its fields, in declaration order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// Its priority.
    pub fn priority_weight(&self) -> f32 {
        self.priority
    }

    /// Numbers in its state (codes or values).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Fields in the order the wire carries them: velocities before the positions
    /// predicted from them.
    pub(crate) fn wire_order(&self) -> &[usize] {
        &self.wire_order
    }

    /// The field relevance measures distance with: the first 2D or 3D vector with a
    /// velocity, or else the first 2D or 3D vector.
    pub fn position_field(&self) -> Option<&Field> {
        self.position.map(|i| &self.fields[i])
    }

    fn finish(mut self) -> Result<Self, SchemaError> {
        let err = |what: String| SchemaError::Invalid {
            kind: self.name.clone(),
            what,
        };
        if self.fields.len() > MAX_FIELDS {
            return Err(err(format!("more than {MAX_FIELDS} fields")));
        }
        if !(self.priority.is_finite() && self.priority > 0.0) {
            return Err(err("priority must be positive and finite".into()));
        }
        for f in &self.fields {
            let ok = match f.ty {
                FieldType::Vector {
                    min,
                    max,
                    resolution,
                    ..
                } => {
                    resolution.is_finite()
                        && resolution > 0.0
                        && min.is_finite()
                        && max.is_finite()
                        && min <= max
                        && (f64::from(max.abs().max(min.abs())) / f64::from(resolution))
                            < CODE_LIMIT as f64
                }
                FieldType::Rotation { bits } => (2..=16).contains(&bits),
                FieldType::Angle { bits } => (2..=24).contains(&bits),
                FieldType::Int { min, max } => {
                    min <= max && i64::from(min).abs().max(i64::from(max).abs()) <= CODE_LIMIT
                }
                FieldType::Bool => true,
            };
            if !ok {
                return Err(err(format!("field {:?} is out of range", f.name)));
            }
        }
        for (vel, pos_name) in std::mem::take(&mut self.pending_velocity) {
            let Some(pos) = self.fields.iter().position(|f| f.name == pos_name) else {
                return Err(err(format!("velocity of unknown field {pos_name:?}")));
            };
            let both_vectors = matches!(
                (self.fields[pos].ty, self.fields[vel].ty),
                (FieldType::Vector { dims: a, .. }, FieldType::Vector { dims: b, .. }) if a == b
            );
            if pos == vel || !both_vectors {
                return Err(err(format!(
                    "{:?} cannot be the velocity of {pos_name:?}: both must be vectors of one size",
                    self.fields[vel].name
                )));
            }
            if self.fields[pos].velocity.is_some() {
                return Err(err(format!("{pos_name:?} has two velocities")));
            }
            self.fields[pos].velocity = Some(vel);
        }
        if self.fields.iter().any(|f| {
            f.velocity
                .is_some_and(|v| self.fields[v].velocity.is_some())
        }) {
            return Err(err("a velocity cannot itself have a velocity".into()));
        }
        let is_velocity = |i: usize| self.fields.iter().any(|f| f.velocity == Some(i));
        self.wire_order = (0..self.fields.len())
            .filter(|&i| is_velocity(i))
            .chain((0..self.fields.len()).filter(|&i| !is_velocity(i)))
            .collect();
        let spatial = |f: &Field| matches!(f.ty, FieldType::Vector { dims: 2 | 3, .. });
        self.position = self
            .fields
            .iter()
            .position(|f| spatial(f) && f.velocity.is_some())
            .or_else(|| self.fields.iter().position(spatial));
        Ok(self)
    }
}

/// Every kind a game replicates. Both ends must build equal schemas.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    kinds: Vec<Kind>,
    errors: Vec<SchemaError>,
}

/// A schema that cannot be used.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SchemaError {
    /// A kind's declaration is wrong.
    #[error("kind {kind:?}: {what}")]
    Invalid {
        /// The kind.
        kind: String,
        /// What is wrong.
        what: String,
    },
    /// Two kinds share a name, or there are too many.
    #[error("schema: {0}")]
    Kinds(String),
}

impl Schema {
    /// An empty schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a kind (its id is the number of kinds before it).
    pub fn kind(mut self, kind: Kind) -> Self {
        if self.kinds.iter().any(|k| k.name == kind.name) {
            self.errors
                .push(SchemaError::Kinds(format!("kind {:?} twice", kind.name)));
        }
        match kind.finish() {
            Ok(k) => self.kinds.push(k),
            Err(e) => self.errors.push(e),
        }
        self
    }

    /// Checks the declaration.
    pub fn build(mut self) -> Result<Self, SchemaError> {
        if self.kinds.len() > MAX_KINDS {
            self.errors
                .push(SchemaError::Kinds(format!("more than {MAX_KINDS} kinds")));
        }
        match self.errors.first() {
            Some(e) => Err(e.clone()),
            None => Ok(self),
        }
    }

    /// The kinds, by id.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// Kind `id`.
    pub fn get(&self, id: KindId) -> Option<&Kind> {
        self.kinds.get(usize::from(id))
    }

    /// The id of the kind called `name`.
    pub fn kind_id(&self, name: &str) -> Option<KindId> {
        self.kinds
            .iter()
            .position(|k| k.name == name)
            .map(|i| i as KindId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocities_go_first_on_the_wire() {
        let s = Schema::new()
            .kind(
                Kind::new("body")
                    .vec3("position", 100.0, 0.01)
                    .bool("awake")
                    .vec3("velocity", 10.0, 0.01)
                    .velocity_of("position"),
            )
            .build()
            .unwrap();
        let k = &s.kinds()[0];
        assert_eq!(k.wire_order(), &[2, 0, 1]);
        assert_eq!(k.fields()[0].velocity, Some(2));
        assert_eq!(k.width(), 7);
        assert_eq!(
            k.position_field().map(|f| f.name.as_str()),
            Some("position")
        );
    }

    #[test]
    fn bad_declarations_are_refused() {
        let bad = [
            Kind::new("a").vec3("p", 1e9, 1e-3),
            Kind::new("b").rotation("r", 20),
            Kind::new("c").vec3("p", 1.0, 0.0),
            Kind::new("d")
                .vec2("p", 1.0, 0.1)
                .vec3("v", 1.0, 0.1)
                .velocity_of("p"),
            Kind::new("e").vec3("v", 1.0, 0.1).velocity_of("missing"),
            Kind::new("f").float("x", 1.0, 0.0, 0.1),
            Kind::new("g").bool("b").priority(f32::NAN),
        ];
        for k in bad {
            let name = k.name().to_owned();
            assert!(Schema::new().kind(k).build().is_err(), "{name}");
        }
        let twice = Schema::new().kind(Kind::new("x")).kind(Kind::new("x"));
        assert!(twice.build().is_err());
    }
}
