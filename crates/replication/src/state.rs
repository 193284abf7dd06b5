//! Typed access to an entity's state: the server writes values field by field in
//! declaration order ([`StateWriter`]), the client reads them back the same way
//! ([`StateReader`]).

use crate::field;
use crate::schema::{FieldType, Kind};
use thiserror::Error;

/// A write that does not follow the kind's declaration.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// A value of the wrong type, or beyond the last field.
    #[error("kind {kind:?}: wrote a {wrote} where field {field} ({expected}) is declared")]
    Mismatch {
        /// The kind.
        kind: String,
        /// Index of the field written.
        field: usize,
        /// What was written.
        wrote: &'static str,
        /// What the field is.
        expected: String,
    },
    /// Fewer fields written than declared.
    #[error("kind {kind:?}: {written} of {declared} fields written")]
    Incomplete {
        /// The kind.
        kind: String,
        /// Fields written.
        written: usize,
        /// Fields declared.
        declared: usize,
    },
}

/// Writes one entity's values into codes, quantizing each as its field says.
///
/// Call one method per declared field, in declaration order. A call that does not match
/// is remembered, and the update it belongs to returns [`StateError`].
#[derive(Debug)]
pub struct StateWriter<'a> {
    kind: &'a Kind,
    codes: Vec<i32>,
    next: usize,
    error: Option<StateError>,
}

impl<'a> StateWriter<'a> {
    /// A writer of one entity of `kind`, for a game that quantizes state itself (an
    /// engine adapter comparing its prediction with the server's codes); the server's
    /// own writes go through [`crate::Server::update_entity`].
    pub fn new(kind: &'a Kind) -> Self {
        Self {
            kind,
            codes: vec![0; kind.width()],
            next: 0,
            error: None,
        }
    }

    fn put(&mut self, wrote: &'static str, fits: impl Fn(&FieldType) -> bool, values: &[f32]) {
        if self.error.is_some() {
            return;
        }
        match self.kind.fields().get(self.next) {
            Some(f) if fits(&f.ty) => {
                let r = f.offset..f.offset + f.ty.width();
                field::quantize(f, values, &mut self.codes[r]);
            }
            other => {
                self.error = Some(StateError::Mismatch {
                    kind: self.kind.name().to_owned(),
                    field: self.next,
                    wrote,
                    expected: other.map_or("nothing".into(), |f| format!("{:?}", f.ty)),
                });
            }
        }
        self.next += 1;
    }

    /// A float field.
    pub fn float(&mut self, v: f32) {
        self.put(
            "float",
            |t| matches!(t, FieldType::Vector { dims: 1, .. }),
            &[v],
        );
    }

    /// A 2D vector field.
    pub fn vec2(&mut self, v: [f32; 2]) {
        self.put(
            "vec2",
            |t| matches!(t, FieldType::Vector { dims: 2, .. }),
            &v,
        );
    }

    /// A 3D vector field.
    pub fn vec3(&mut self, v: [f32; 3]) {
        self.put(
            "vec3",
            |t| matches!(t, FieldType::Vector { dims: 3, .. }),
            &v,
        );
    }

    /// A rotation field, `[x, y, z, w]`.
    pub fn rotation(&mut self, q: [f32; 4]) {
        self.put("rotation", |t| matches!(t, FieldType::Rotation { .. }), &q);
    }

    /// An angle field, radians.
    pub fn angle(&mut self, radians: f32) {
        self.put(
            "angle",
            |t| matches!(t, FieldType::Angle { .. }),
            &[radians],
        );
    }

    /// An int or enum field.
    pub fn int(&mut self, v: i32) {
        // Through f32 only for values it holds exactly (|v| < 2^24, which CODE_LIMIT
        // keeps ints within).
        self.put("int", |t| matches!(t, FieldType::Int { .. }), &[v as f32]);
    }

    /// A bool field.
    pub fn bool(&mut self, v: bool) {
        self.put(
            "bool",
            |t| matches!(t, FieldType::Bool),
            &[f32::from(u8::from(v))],
        );
    }

    /// The quantized codes written, as [`crate::ClientEntity::codes`] holds them
    /// ([`crate::values_of`] turns them into values); an error if the writes did not
    /// follow the kind's declaration.
    pub fn finish(self) -> Result<Vec<i32>, StateError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.next != self.kind.fields().len() {
            return Err(StateError::Incomplete {
                kind: self.kind.name().to_owned(),
                written: self.next,
                declared: self.kind.fields().len(),
            });
        }
        Ok(self.codes)
    }
}

/// Reads one entity's values, field by field in declaration order.
///
/// # Panics
/// A read of the wrong type, or past the last field, is a bug in the game (the layout
/// comes from its own schema, never from the network) and panics with the field named.
#[derive(Debug, Clone)]
pub struct StateReader<'a> {
    kind: &'a Kind,
    values: &'a [f32],
    next: usize,
}

impl<'a> StateReader<'a> {
    /// A reader over `values` of `kind` (as [`crate::ClientEntity::values`] holds them).
    pub fn new(kind: &'a Kind, values: &'a [f32]) -> Self {
        Self {
            kind,
            values,
            next: 0,
        }
    }

    fn take(&mut self, what: &str, fits: impl Fn(&FieldType) -> bool) -> &'a [f32] {
        let Some(f) = self.kind.fields().get(self.next).filter(|f| fits(&f.ty)) else {
            panic!(
                "kind {:?}: read a {what} at field {}, which is declared otherwise",
                self.kind.name(),
                self.next
            );
        };
        self.next += 1;
        &self.values[f.offset..f.offset + f.ty.width()]
    }

    /// A float field.
    pub fn float(&mut self) -> f32 {
        self.take("float", |t| matches!(t, FieldType::Vector { dims: 1, .. }))[0]
    }

    /// A 2D vector field.
    pub fn vec2(&mut self) -> [f32; 2] {
        let v = self.take("vec2", |t| matches!(t, FieldType::Vector { dims: 2, .. }));
        [v[0], v[1]]
    }

    /// A 3D vector field.
    pub fn vec3(&mut self) -> [f32; 3] {
        let v = self.take("vec3", |t| matches!(t, FieldType::Vector { dims: 3, .. }));
        [v[0], v[1], v[2]]
    }

    /// A rotation field, `[x, y, z, w]`.
    pub fn rotation(&mut self) -> [f32; 4] {
        let v = self.take("rotation", |t| matches!(t, FieldType::Rotation { .. }));
        [v[0], v[1], v[2], v[3]]
    }

    /// An angle field, radians in `[0, 2π)`.
    pub fn angle(&mut self) -> f32 {
        self.take("angle", |t| matches!(t, FieldType::Angle { .. }))[0]
    }

    /// An int or enum field.
    pub fn int(&mut self) -> i32 {
        self.take("int", |t| matches!(t, FieldType::Int { .. }))[0].round() as i32
    }

    /// A bool field.
    pub fn bool(&mut self) -> bool {
        self.take("bool", |t| matches!(t, FieldType::Bool))[0] > 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    #[test]
    fn writes_must_follow_the_declaration() {
        let s = Schema::new()
            .kind(
                Kind::new("k")
                    .vec2("p", 10.0, 0.01)
                    .int("hp", 0, 100)
                    .bool("b"),
            )
            .build()
            .unwrap();
        let k = &s.kinds()[0];
        let mut w = StateWriter::new(k);
        w.vec2([1.0, -2.0]);
        w.int(42);
        w.bool(true);
        let codes = w.finish().unwrap();
        let values = field::values_of(k, &codes);
        let mut r = StateReader::new(k, &values);
        assert_eq!(r.vec2(), [1.0, -2.0]);
        assert_eq!(r.int(), 42);
        assert!(r.bool());

        let mut w = StateWriter::new(k);
        w.vec3([0.0; 3]);
        assert!(matches!(
            w.finish(),
            Err(StateError::Mismatch { field: 0, .. })
        ));
        let mut w = StateWriter::new(k);
        w.vec2([0.0; 2]);
        assert!(matches!(
            w.finish(),
            Err(StateError::Incomplete { written: 1, .. })
        ));
    }
}
