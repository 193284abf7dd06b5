/// A 16-bit wire sequence number that orders correctly across wrap-around.
///
/// `a` is newer than `b` when it is ahead by less than half the space (32768), the rule
/// from RFC 1982 serial-number arithmetic. Exactly half-way apart is ambiguous and is
/// treated as *not* newer in either direction, so a peer 32768 packets stale is never
/// mistaken for fresh.
///
/// There is deliberately no `PartialOrd`: "newer" is not transitive (0 < 20000 < 40000 <
/// 0 around the circle), which would break the contract sorting and `max` rely on. Compare
/// with [`Seq16::is_newer_than`] or [`Seq16::diff`], or expand to a full counter first
/// ([`Seq16::expand`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq16(pub u16);

impl Seq16 {
    /// Signed distance from `other` to `self`: positive when `self` is newer.
    /// Exactly half-way returns `i16::MIN` (ambiguous).
    pub fn diff(self, other: Seq16) -> i16 {
        self.0.wrapping_sub(other.0) as i16
    }

    /// True when `self` comes after `other` (wrap-safe).
    pub fn is_newer_than(self, other: Seq16) -> bool {
        let d = self.diff(other);
        d > 0
    }

    /// The next sequence number, wrapping from 65535 to 0.
    #[must_use]
    pub fn next(self) -> Seq16 {
        Seq16(self.0.wrapping_add(1))
    }

    /// The low 16 bits of a 32-bit counter (what goes on the wire).
    pub fn from_u32(full: u32) -> Seq16 {
        Seq16(full as u16)
    }

    /// Recovers the 32-bit counter whose low 16 bits are `self` and which lies closest to
    /// `reference` (within -32768..=32767 of it).
    ///
    /// A receiver that knows roughly where the sender is (its own latest tick, say) can
    /// therefore send ticks as 2 bytes. Returns `None` if the result would fall outside
    /// the u32 range (before 0 or past `u32::MAX`).
    pub fn expand(self, reference: u32) -> Option<u32> {
        let d = i64::from(self.diff(Seq16::from_u32(reference)));
        let full = i64::from(reference) + d;
        u32::try_from(full).ok()
    }
}

/// The span of sequence numbers seen in one direction: from the first to the newest,
/// expanded across wrap-around, so a receiver can tell how many packets the sender sent
/// (the span) from how many arrived, and so the loss, with no acknowledgement traffic.
///
/// Duplicates must be dropped before (netcode.io's replay protection does); a number
/// older than the first widens the span backwards, as a reordered first packet should.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqSpan {
    /// First and newest number seen, expanded to 32 bits.
    range: Option<(u32, u32)>,
}

impl SeqSpan {
    /// Counts a packet's sequence number.
    pub fn observe(&mut self, seq: Seq16) {
        self.range = Some(match self.range {
            // Start a lap up, so numbers just before the first one still expand.
            None => {
                let full = (1 << 16) + u32::from(seq.0);
                (full, full)
            }
            Some((first, newest)) => match seq.expand(newest) {
                Some(full) => (first.min(full), newest.max(full)),
                None => (first, newest),
            },
        });
    }

    /// Packets from the first to the newest number seen (0 before any).
    pub fn expected(&self) -> u64 {
        self.range
            .map_or(0, |(first, newest)| u64::from(newest - first) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_counts_across_the_wrap_and_backwards() {
        let mut s = SeqSpan::default();
        assert_eq!(s.expected(), 0);
        s.observe(Seq16(2));
        s.observe(Seq16(65534));
        s.observe(Seq16(5));
        // 65534, 65535, 0..=5.
        assert_eq!(s.expected(), 8);
    }
    use proptest::prelude::*;

    #[test]
    fn ordering_across_the_wrap() {
        assert!(Seq16(0).is_newer_than(Seq16(65535)));
        assert!(Seq16(5).is_newer_than(Seq16(65530)));
        assert!(!Seq16(65530).is_newer_than(Seq16(5)));
        assert!(Seq16(65535).next() == Seq16(0));
        assert_eq!(Seq16(3).diff(Seq16(65533)), 6);
        assert!(Seq16(1).is_newer_than(Seq16(65000)));
        // Exactly half the space apart: neither is newer.
        assert!(!Seq16(32768).is_newer_than(Seq16(0)));
        assert!(!Seq16(0).is_newer_than(Seq16(32768)));
        assert_eq!(Seq16(0).diff(Seq16(32768)), i16::MIN);
    }

    #[test]
    fn expand_recovers_full_counters_across_wraps() {
        assert_eq!(Seq16(2).expand(65534), Some(65538));
        assert_eq!(Seq16(65534).expand(65538), Some(65534));
        assert_eq!(Seq16(100).expand(100), Some(100));
        // Nothing lies before tick 0.
        assert_eq!(Seq16(65535).expand(0), None);
        assert_eq!(Seq16(0).expand(u32::MAX), None);
    }

    proptest! {
        #[test]
        fn expand_inverts_truncation_near_the_reference(full: u32, offset in -32768i64..32768) {
            let reference = i64::from(full) - offset;
            prop_assume!(reference >= 0 && reference <= i64::from(u32::MAX));
            prop_assert_eq!(Seq16::from_u32(full).expand(reference as u32), Some(full));
        }

        #[test]
        fn newer_is_antisymmetric(a: u16, b: u16) {
            let (a, b) = (Seq16(a), Seq16(b));
            prop_assert!(!(a.is_newer_than(b) && b.is_newer_than(a)));
            if a != b && a.0.abs_diff(b.0) != 32768 {
                prop_assert!(a.is_newer_than(b) ^ b.is_newer_than(a));
            }
        }
    }
}
