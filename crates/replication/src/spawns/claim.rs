//! What a client tells the server about a spawn it predicted, and its encoding.

use super::{IdSpace, SpawnError};
use lagless_core::Tick;
use lagless_wire::{BitReader, BitWriter, Seq16};

/// A client's claim that it spawned an entity: the predicted id it gave it, the kind,
/// the tick of the input that spawned it and its sequence among that tick's spawns.
/// The server checks it ([`SpawnGuard::check`](super::SpawnGuard::check)), spawns its
/// own entity with the claim's owner, tick and kind, and the client matches that one
/// to its prediction ([`SpawnRegistry::match_server`](super::SpawnRegistry::match_server)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpawnClaim {
    /// The predicted id, in the claiming client's range of the [`IdSpace`].
    pub id: u32,
    /// The game's kind of entity (a projectile type).
    pub kind: u16,
    /// The tick of the input that spawned it.
    pub tick: Tick,
    /// Its place among the client's spawns of that tick (0 for the first).
    pub seq: u8,
}

/// Encoding of a batch of [`SpawnClaim`]s, bit-packed: a count, then per claim the id
/// as an offset into the sender's range (so a claim can only name an id of its own
/// sender's slot), the kind, the low 16 bits of the tick (expanded against the
/// receiver's tick) and the sequence. A claim costs about 5 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnClaimCodec {
    /// The id layout both ends use.
    pub space: IdSpace,
    /// Most claims in one batch (default 16); more is refused.
    pub max_batch: usize,
}

impl Default for SpawnClaimCodec {
    fn default() -> Self {
        Self {
            space: IdSpace::default(),
            max_batch: 16,
        }
    }
}

impl SpawnClaimCodec {
    /// Writes `claims` of the client in `slot`. Refused: more than
    /// [`max_batch`](Self::max_batch), an id outside the slot's range.
    pub fn write(
        &self,
        w: &mut BitWriter,
        slot: u32,
        claims: &[SpawnClaim],
    ) -> Result<(), SpawnError> {
        if claims.len() > self.max_batch {
            return Err(SpawnError::TooMany);
        }
        let range = self
            .space
            .range(slot)
            .ok_or(SpawnError::UnknownSlot(slot))?;
        for c in claims {
            if !range.contains(&c.id) {
                return Err(SpawnError::IdOutOfRange(c.id));
            }
        }
        w.write_var_u32(claims.len() as u32);
        for c in claims {
            w.write_var_u32(c.id - range.start());
            w.write_var_u32(u32::from(c.kind));
            w.write_bits(u32::from(c.tick.to_wire().0), 16);
            w.write_var_u32(u32::from(c.seq));
        }
        Ok(())
    }

    /// Reads a batch from the client in `slot`, expanding ticks against `reference`
    /// (the server's tick). Every malformed or out-of-range field is a typed error.
    pub fn read(
        &self,
        r: &mut BitReader<'_>,
        slot: u32,
        reference: Tick,
    ) -> Result<Vec<SpawnClaim>, SpawnError> {
        let range = self
            .space
            .range(slot)
            .ok_or(SpawnError::UnknownSlot(slot))?;
        let count = r.read_var_u32()? as usize;
        if count > self.max_batch {
            return Err(SpawnError::TooMany);
        }
        let mut claims = Vec::with_capacity(count);
        for _ in 0..count {
            let offset = r.read_var_u32()?;
            let id = range
                .start()
                .checked_add(offset)
                .filter(|id| range.contains(id))
                .ok_or(SpawnError::IdOutOfRange(
                    range.start().saturating_add(offset),
                ))?;
            let kind = u16::try_from(r.read_var_u32()?).map_err(|_| SpawnError::BadField)?;
            let wire = Seq16(r.read_bits(16)? as u16);
            let tick = Tick::from_wire(wire, reference).ok_or(SpawnError::BadField)?;
            let seq = u8::try_from(r.read_var_u32()?).map_err(|_| SpawnError::BadField)?;
            claims.push(SpawnClaim {
                id,
                kind,
                tick,
                seq,
            });
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn claim(space: &IdSpace, slot: u32, offset: u32, tick: u32) -> SpawnClaim {
        SpawnClaim {
            id: space.range(slot).unwrap().start() + offset,
            kind: 3,
            tick: Tick(tick),
            seq: 1,
        }
    }

    #[test]
    fn another_slots_id_cannot_be_written_or_read() {
        let codec = SpawnClaimCodec::default();
        let theirs = claim(&codec.space, 5, 0, 100);
        let mut w = BitWriter::new();
        assert_eq!(
            codec.write(&mut w, 4, &[theirs]),
            Err(SpawnError::IdOutOfRange(theirs.id))
        );
        // A forged offset beyond the slot's range.
        let mut w = BitWriter::new();
        w.write_var_u32(1);
        w.write_var_u32(codec.space.per_slot());
        let bytes = w.into_bytes();
        assert!(matches!(
            codec.read(&mut BitReader::new(&bytes), 4, Tick(100)),
            Err(SpawnError::IdOutOfRange(_))
        ));
    }

    proptest! {
        #[test]
        fn round_trips(
            slot in 0u32..256,
            items in proptest::collection::vec((0u32..16_773_120, any::<u16>(), 0u32..60, any::<u8>()), 0..16),
        ) {
            let codec = SpawnClaimCodec::default();
            let reference = Tick(70_000);
            let claims: Vec<_> = items
                .iter()
                .map(|&(offset, kind, back, seq)| SpawnClaim {
                    id: codec.space.range(slot).unwrap().start() + offset,
                    kind,
                    tick: Tick(reference.0 + 30 - back),
                    seq,
                })
                .collect();
            let mut w = BitWriter::new();
            codec.write(&mut w, slot, &claims).unwrap();
            let bytes = w.into_bytes();
            let mut r = BitReader::new(&bytes);
            prop_assert_eq!(codec.read(&mut r, slot, reference), Ok(claims));
        }

        #[test]
        fn decoding_never_panics(bytes: Vec<u8>, slot in 0u32..300) {
            let codec = SpawnClaimCodec::default();
            let _ = codec.read(&mut BitReader::new(&bytes), slot, Tick(5));
        }
    }
}
