use crate::Tick;
use thiserror::Error;

/// Why a [`TickBuffer`] refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RingError {
    /// The tick is older than the buffer's window: it has been or would be discarded.
    #[error("tick {tick} is older than the window starting at {floor}")]
    Stale {
        /// The rejected tick.
        tick: Tick,
        /// The oldest tick the buffer accepts.
        floor: Tick,
    },
    /// The tick lies beyond the window; storing it would overwrite live entries.
    #[error("tick {tick} is beyond the window ending before {end}")]
    TooFarAhead {
        /// The rejected tick.
        tick: Tick,
        /// One past the newest tick the buffer accepts.
        end: Tick,
    },
}

/// A fixed-capacity ring buffer indexed by tick (the input and state
/// histories of the Unity physics prediction article).
///
/// The buffer holds the window `[floor, floor + capacity)`. Writes outside it are refused
/// with a [`RingError`] instead of silently overwriting an entry from another lap of the
/// ring; the owner moves the window explicitly with [`TickBuffer::advance_floor`] (or
/// [`TickBuffer::insert_advancing`] for histories that always write at the present).
/// Each slot remembers its tick, so a read can never return data from another lap.
#[derive(Debug, Clone)]
pub struct TickBuffer<T> {
    slots: Vec<Option<(Tick, T)>>,
    floor: Tick,
    len: usize,
}

impl<T> TickBuffer<T> {
    /// An empty buffer of `capacity` slots whose window starts at `floor`.
    ///
    /// # Panics
    /// If `capacity` is 0.
    pub fn new(capacity: usize, floor: Tick) -> Self {
        assert!(capacity > 0, "TickBuffer capacity must be positive");
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, || None);
        Self {
            slots,
            floor,
            len: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of stored entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest tick accepted.
    pub fn floor(&self) -> Tick {
        self.floor
    }

    /// One past the newest tick accepted.
    pub fn end(&self) -> Tick {
        self.floor.saturating_add(self.capacity() as u32)
    }

    fn index(&self, tick: Tick) -> usize {
        tick.0 as usize % self.slots.len()
    }

    fn check(&self, tick: Tick) -> Result<(), RingError> {
        let ahead = tick.diff(self.floor);
        if ahead < 0 {
            Err(RingError::Stale {
                tick,
                floor: self.floor,
            })
        } else if ahead >= self.capacity() as i64 {
            Err(RingError::TooFarAhead {
                tick,
                end: self.end(),
            })
        } else {
            Ok(())
        }
    }

    /// Stores `value` at `tick`, replacing any value already stored for that same tick
    /// (which is returned). Refuses ticks outside the window.
    pub fn insert(&mut self, tick: Tick, value: T) -> Result<Option<T>, RingError> {
        self.check(tick)?;
        let i = self.index(tick);
        let old = self.slots[i].replace((tick, value));
        match old {
            Some((t, v)) if t == tick => Ok(Some(v)),
            Some(_) => Ok(None), // an entry below the floor: already logically gone
            None => {
                self.len += 1;
                Ok(None)
            }
        }
    }

    /// Stores at `tick`, first moving the window forward just enough to include it
    /// (discarding the oldest entries). Ticks below the floor are still refused.
    pub fn insert_advancing(&mut self, tick: Tick, value: T) -> Result<Option<T>, RingError> {
        if tick >= self.end() {
            self.advance_floor(tick.saturating_sub(self.capacity() as u32 - 1));
        }
        self.insert(tick, value)
    }

    /// Moves the window so it starts at `floor`, dropping older entries. Moving it
    /// backwards is ignored: discarded history cannot come back.
    pub fn advance_floor(&mut self, floor: Tick) {
        if floor <= self.floor {
            return;
        }
        let cap = self.capacity() as u32;
        if floor.diff(self.floor) >= i64::from(cap) {
            self.clear_slots();
        } else {
            let mut t = self.floor;
            while t < floor {
                let i = self.index(t);
                if matches!(self.slots[i], Some((st, _)) if st == t) {
                    self.slots[i] = None;
                    self.len -= 1;
                }
                t = t.next();
            }
        }
        self.floor = floor;
    }

    /// Empties the buffer and restarts its window at `floor` (e.g. after a resync).
    pub fn reset(&mut self, floor: Tick) {
        self.clear_slots();
        self.floor = floor;
    }

    fn clear_slots(&mut self) {
        for s in &mut self.slots {
            *s = None;
        }
        self.len = 0;
    }

    /// The value stored for exactly `tick`.
    pub fn get(&self, tick: Tick) -> Option<&T> {
        if self.check(tick).is_err() {
            return None;
        }
        match &self.slots[self.index(tick)] {
            Some((t, v)) if *t == tick => Some(v),
            _ => None,
        }
    }

    /// Mutable access to the value stored for exactly `tick`.
    pub fn get_mut(&mut self, tick: Tick) -> Option<&mut T> {
        if self.check(tick).is_err() {
            return None;
        }
        let i = self.index(tick);
        match &mut self.slots[i] {
            Some((t, v)) if *t == tick => Some(v),
            _ => None,
        }
    }

    /// True if a value is stored for `tick`.
    pub fn contains(&self, tick: Tick) -> bool {
        self.get(tick).is_some()
    }

    /// Removes and returns the value for `tick`.
    pub fn remove(&mut self, tick: Tick) -> Option<T> {
        if self.check(tick).is_err() {
            return None;
        }
        let i = self.index(tick);
        match self.slots[i].take() {
            Some((t, v)) if t == tick => {
                self.len -= 1;
                Some(v)
            }
            other => {
                self.slots[i] = other;
                None
            }
        }
    }

    /// Stored entries in tick order.
    pub fn iter(&self) -> impl Iterator<Item = (Tick, &T)> + '_ {
        let floor = self.floor;
        // Near the end of the tick range the window is cut short at u32::MAX rather than
        // visiting it several times.
        (0..self.capacity() as u32).filter_map(move |k| {
            let t = Tick(floor.0.checked_add(k)?);
            self.get(t).map(|v| (t, v))
        })
    }

    /// The newest stored tick.
    pub fn newest(&self) -> Option<Tick> {
        self.iter().last().map(|(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_stale_and_too_far_ahead() {
        let mut b = TickBuffer::new(4, Tick(10));
        assert_eq!(
            b.insert(Tick(9), 'a'),
            Err(RingError::Stale {
                tick: Tick(9),
                floor: Tick(10)
            })
        );
        assert_eq!(
            b.insert(Tick(14), 'a'),
            Err(RingError::TooFarAhead {
                tick: Tick(14),
                end: Tick(14)
            })
        );
        assert_eq!(b.insert(Tick(13), 'z'), Ok(None));
        assert_eq!(b.insert(Tick(10), 'a'), Ok(None));
        // Same tick replaces and reports the old value; nothing else is touched.
        assert_eq!(b.insert(Tick(10), 'b'), Ok(Some('a')));
        assert_eq!(b.len(), 2);
        assert_eq!(b.get(Tick(13)), Some(&'z'));
    }

    #[test]
    fn the_last_ticks_of_the_range_are_visited_once() {
        let mut b = TickBuffer::new(16, Tick(u32::MAX - 4));
        b.insert(Tick(u32::MAX), 'z').unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![(Tick(u32::MAX), &'z')]);
        assert_eq!(b.newest(), Some(Tick(u32::MAX)));
    }

    #[test]
    fn slots_never_alias_across_laps() {
        let mut b = TickBuffer::new(4, Tick(0));
        b.insert(Tick(1), 1).unwrap();
        b.advance_floor(Tick(3));
        // Tick 5 maps to the same slot as tick 1; tick 1 must be gone, not returned.
        assert_eq!(b.get(Tick(1)), None);
        b.insert(Tick(5), 5).unwrap();
        assert_eq!(b.get(Tick(5)), Some(&5));
        assert_eq!(b.get(Tick(1)), None);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn advancing_insert_keeps_the_last_capacity_ticks() {
        let mut b = TickBuffer::new(32, Tick(0));
        for t in 0..100u32 {
            b.insert_advancing(Tick(t), t).unwrap();
        }
        assert_eq!(b.len(), 32);
        assert_eq!(b.floor(), Tick(68));
        assert_eq!(
            b.iter().map(|(t, _)| t.0).collect::<Vec<_>>(),
            (68..100).collect::<Vec<_>>()
        );
        assert_eq!(b.newest(), Some(Tick(99)));
        assert!(b.insert_advancing(Tick(10), 0).is_err());
        // A jump far ahead empties the buffer rather than keeping aliased entries.
        b.insert_advancing(Tick(10_000), 1).unwrap();
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn remove_and_reset() {
        let mut b = TickBuffer::new(8, Tick(100));
        b.insert(Tick(101), "x").unwrap();
        assert_eq!(b.remove(Tick(109)), None);
        assert_eq!(b.remove(Tick(101)), Some("x"));
        assert!(b.is_empty());
        b.insert(Tick(102), "y").unwrap();
        b.reset(Tick(5));
        assert!(b.is_empty());
        assert_eq!(b.floor(), Tick(5));
        // Moving the floor backwards is ignored.
        b.advance_floor(Tick(1));
        assert_eq!(b.floor(), Tick(5));
    }

    #[test]
    fn window_near_u32_max_does_not_overflow() {
        let mut b = TickBuffer::new(16, Tick(u32::MAX - 4));
        assert!(b.insert(Tick(u32::MAX), 1).is_ok());
        assert_eq!(b.get(Tick(u32::MAX)), Some(&1));
    }
}
