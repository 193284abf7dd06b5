//! The id layout: server ids below, one client-only range per client slot above.

use super::SpawnError;
use crate::Limits;
use std::ops::RangeInclusive;

/// How entity ids are split between the server and its clients' predictions.
///
/// The server allocates ids in `0..=server_max` (the replication layer's
/// [`Limits::max_id`]: the decoder refuses any id above it, so a server id can never
/// be larger). Everything above is client-only, cut into `slots` equal ranges, one
/// per client slot (the game's player index):
///
/// ```text
/// 0 ..= server_max | slot 0: server_max+1 ..= server_max+per_slot | slot 1: ... | unused tail
/// ```
///
/// With the default limits (`max_id` = 2^20 − 1) and 256 slots, each slot holds
/// 16 773 120 ids. A predicted id can therefore never equal a server id, nor another
/// client's predicted id, and the server can tell a spawn claim's id belongs to the
/// claiming client ([`IdSpace::slot_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdSpace {
    server_max: u32,
    slots: u32,
    per_slot: u32,
}

impl Default for IdSpace {
    fn default() -> Self {
        IdSpace::from_limits(&Limits::default(), 256).unwrap_or(IdSpace {
            server_max: 0,
            slots: 1,
            per_slot: 1,
        })
    }
}

impl IdSpace {
    /// Server ids `0..=server_max`, the rest split among `slots` clients. Refused
    /// (`BadIdSpace`) when nothing is left for each slot.
    pub fn new(server_max: u32, slots: u32) -> Result<IdSpace, SpawnError> {
        let above = u32::MAX - server_max;
        if slots == 0 || above / slots == 0 {
            return Err(SpawnError::BadIdSpace);
        }
        Ok(IdSpace {
            server_max,
            slots,
            per_slot: above / slots,
        })
    }

    /// The layout for a replication layer with these limits.
    pub fn from_limits(limits: &Limits, slots: u32) -> Result<IdSpace, SpawnError> {
        IdSpace::new(limits.max_id, slots)
    }

    /// The largest server id.
    pub fn server_max(&self) -> u32 {
        self.server_max
    }

    /// Client slots.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Ids in each slot's range.
    pub fn per_slot(&self) -> u32 {
        self.per_slot
    }

    /// Whether `id` is one the server may allocate.
    pub fn is_server(&self, id: u32) -> bool {
        id <= self.server_max
    }

    /// Slot `slot`'s client-only range (`None` for a slot beyond [`slots`](Self::slots)).
    pub fn range(&self, slot: u32) -> Option<RangeInclusive<u32>> {
        if slot >= self.slots {
            return None;
        }
        let start = self.server_max + 1 + slot * self.per_slot;
        Some(start..=start + (self.per_slot - 1))
    }

    /// The slot whose range holds `id` (`None` for server ids and the unused tail).
    pub fn slot_of(&self, id: u32) -> Option<u32> {
        let offset = id.checked_sub(self.server_max.checked_add(1)?)?;
        let slot = offset / self.per_slot;
        (slot < self.slots).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_layout() {
        let s = IdSpace::default();
        assert_eq!(s.server_max(), (1 << 20) - 1);
        assert_eq!(s.per_slot(), 16_773_120);
        assert_eq!(s.range(0), Some(1 << 20..=(1 << 20) + 16_773_119));
        assert_eq!(*s.range(255).unwrap().end(), u32::MAX);
        assert_eq!(s.range(256), None);
        assert_eq!(IdSpace::new(u32::MAX, 1), Err(SpawnError::BadIdSpace));
        assert_eq!(IdSpace::new(10, 0), Err(SpawnError::BadIdSpace));
    }

    proptest! {
        #[test]
        fn ranges_are_disjoint_from_server_ids_and_each_other(
            server_max in 0u32..u32::MAX - 1,
            slots in 1u32..4096,
            id: u32,
        ) {
            let Ok(s) = IdSpace::new(server_max, slots) else {
                return Ok(());
            };
            match s.slot_of(id) {
                Some(slot) => {
                    prop_assert!(!s.is_server(id));
                    prop_assert!(s.range(slot).unwrap().contains(&id));
                    if slot + 1 < slots {
                        prop_assert!(!s.range(slot + 1).unwrap().contains(&id));
                    }
                }
                None => prop_assert!((0..slots).all(|k| !s.range(k).unwrap().contains(&id))),
            }
        }
    }
}
