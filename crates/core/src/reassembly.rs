use crate::message::SnapshotFragment;
use crate::{ProtocolError, Tick};
use lagless_wire::Seq16;

/// A snapshot whose fragments are still arriving.
struct Partial {
    tick: Tick,
    /// The sequence number of fragment 0: the server sends a snapshot's fragments under
    /// consecutive numbers, so every fragment of one snapshot gives the same `seq - index`,
    /// and a fragment of another snapshot stamped with the same tick does not.
    first_seq: Seq16,
    count: u8,
    received: u8,
    parts: Vec<Option<Vec<u8>>>,
}

/// Rebuilds snapshots from fragments, keeping memory bounded.
///
/// At most `max_partials` snapshots are assembled at once (the oldest is abandoned when a
/// newer one starts), fragments of snapshots older than the newest completed one are
/// dropped, and the fragment count is checked against the configured size limit before
/// anything is allocated. Fragments of one snapshot must agree on the count and carry
/// consecutive sequence numbers, so two payloads are never spliced into one.
pub(crate) struct Reassembler {
    partials: Vec<Partial>,
    max_partials: usize,
    max_fragments: usize,
    newest_complete: Option<Tick>,
    pub(crate) abandoned: u64,
}

pub(crate) enum Assembled {
    /// The fragment was stored; the snapshot is incomplete.
    Pending,
    /// The fragment completed this snapshot.
    Complete(Tick, Vec<u8>),
    /// The fragment belongs to a snapshot older than one already delivered.
    Stale,
}

impl Reassembler {
    pub(crate) fn new(max_partials: usize, max_fragments: usize) -> Self {
        Self {
            partials: Vec::new(),
            max_partials: max_partials.max(1),
            max_fragments: max_fragments.clamp(1, 255),
            newest_complete: None,
            abandoned: 0,
        }
    }

    pub(crate) fn newest_complete(&self) -> Option<Tick> {
        self.newest_complete
    }

    pub(crate) fn push(
        &mut self,
        tick: Tick,
        frag: SnapshotFragment,
    ) -> Result<Assembled, ProtocolError> {
        if usize::from(frag.count) > self.max_fragments {
            return Err(ProtocolError::SnapshotTooLarge {
                len: usize::from(frag.count) * crate::message::FRAGMENT_PAYLOAD_BYTES,
                max: self.max_fragments * crate::message::FRAGMENT_PAYLOAD_BYTES,
            });
        }
        if self.newest_complete.is_some_and(|n| tick <= n) {
            return Ok(Assembled::Stale);
        }
        let pos = match self.partials.iter().position(|p| p.tick == tick) {
            Some(i) => i,
            None => {
                if self.partials.len() >= self.max_partials {
                    // Abandon the oldest: a newer snapshot supersedes it anyway.
                    let (oldest, _) = self
                        .partials
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, p)| p.tick)
                        .unwrap_or((0, &self.partials[0]));
                    if self.partials[oldest].tick > tick {
                        return Ok(Assembled::Stale);
                    }
                    self.partials.swap_remove(oldest);
                    self.abandoned += 1;
                }
                self.partials.push(Partial {
                    tick,
                    first_seq: first_seq(&frag),
                    count: frag.count,
                    received: 0,
                    parts: vec![None; usize::from(frag.count)],
                });
                self.partials.len() - 1
            }
        };
        let p = &mut self.partials[pos];
        if p.count != frag.count || p.first_seq != first_seq(&frag) {
            return Err(ProtocolError::InconsistentFragment);
        }
        let slot = &mut p.parts[usize::from(frag.index)];
        if slot.is_some() {
            return Ok(Assembled::Pending); // duplicate
        }
        *slot = Some(frag.payload);
        p.received += 1;
        if p.received < p.count {
            return Ok(Assembled::Pending);
        }
        let done = self.partials.swap_remove(pos);
        let payload: Vec<u8> = done.parts.into_iter().flatten().flatten().collect();
        self.newest_complete = Some(tick);
        // Anything older than what we just completed is useless now.
        let before = self.partials.len();
        self.partials.retain(|p| p.tick > tick);
        self.abandoned += (before - self.partials.len()) as u64;
        Ok(Assembled::Complete(tick, payload))
    }
}

/// The sequence number fragment 0 of `frag`'s snapshot was (or will be) sent under.
fn first_seq(frag: &SnapshotFragment) -> Seq16 {
    Seq16(frag.seq.0.wrapping_sub(u16::from(frag.index)))
}
