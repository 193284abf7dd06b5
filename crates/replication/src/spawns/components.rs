//! A typed component store for predicted entities, for games without an ECS.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;

/// At most one value of each type, added and removed at will: the Pixonic article's
/// components on predicted entities ("each entity has at most one component of a
/// type"). Use it as the payload of a [`SpawnRegistry`](super::SpawnRegistry)
/// (`SpawnRegistry<Components>`); a game with an ECS uses its own entity handle as the
/// payload instead (`SpawnRegistry<hecs::Entity>`) and adds components there.
#[derive(Default)]
pub struct Components {
    map: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
}

impl fmt::Debug for Components {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Components")
            .field("len", &self.map.len())
            .finish()
    }
}

impl Components {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value`, returning the one of its type it replaces.
    pub fn insert<C: Any + Send + Sync>(&mut self, value: C) -> Option<C> {
        let old = self.map.insert(TypeId::of::<C>(), Box::new(value))?;
        old.downcast::<C>().ok().map(|b| *b)
    }

    /// Removes the value of type `C`.
    pub fn remove<C: Any + Send + Sync>(&mut self) -> Option<C> {
        let old = self.map.remove(&TypeId::of::<C>())?;
        old.downcast::<C>().ok().map(|b| *b)
    }

    /// The value of type `C`.
    pub fn get<C: Any + Send + Sync>(&self) -> Option<&C> {
        self.map.get(&TypeId::of::<C>())?.downcast_ref()
    }

    /// The value of type `C`, mutably.
    pub fn get_mut<C: Any + Send + Sync>(&mut self) -> Option<&mut C> {
        self.map.get_mut(&TypeId::of::<C>())?.downcast_mut()
    }

    /// Whether a value of type `C` is there.
    pub fn contains<C: Any + Send + Sync>(&self) -> bool {
        self.map.contains_key(&TypeId::of::<C>())
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Trail(u32);
    #[derive(Debug, PartialEq)]
    struct Bounced;

    #[test]
    fn add_replace_remove() {
        let mut c = Components::new();
        assert_eq!(c.insert(Trail(1)), None);
        assert_eq!(c.insert(Trail(2)), Some(Trail(1)));
        c.insert(Bounced);
        assert_eq!(c.len(), 2);
        c.get_mut::<Trail>().unwrap().0 += 1;
        assert_eq!(c.get::<Trail>(), Some(&Trail(3)));
        assert_eq!(c.remove::<Bounced>(), Some(Bounced));
        assert!(!c.contains::<Bounced>());
        assert_eq!(c.remove::<Bounced>(), None);
    }
}
