//! Replay protection: a 256-entry window of received sequence numbers.

use crate::REPLAY_PROTECTION_BUFFER_SIZE;

/// Remembers which of the last 256 sequence numbers arrived, so a recorded packet cannot be
/// played back. Check with [`ReplayProtection::already_received`] before decrypting and
/// record with [`ReplayProtection::advance`] only after the packet authenticated.
#[derive(Clone, Debug)]
pub struct ReplayProtection {
    most_recent: u64,
    received: [u64; REPLAY_PROTECTION_BUFFER_SIZE],
}

impl Default for ReplayProtection {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayProtection {
    /// An empty window.
    pub fn new() -> Self {
        Self {
            most_recent: 0,
            received: [u64::MAX; REPLAY_PROTECTION_BUFFER_SIZE],
        }
    }

    /// True when `sequence` is older than the window or was already received.
    pub fn already_received(&self, sequence: u64) -> bool {
        let size = REPLAY_PROTECTION_BUFFER_SIZE as u64;
        // Written so it cannot overflow near u64::MAX.
        if self.most_recent >= size && sequence <= self.most_recent - size {
            return true;
        }
        let entry = self.received[(sequence % size) as usize];
        entry != u64::MAX && entry >= sequence
    }

    /// Records `sequence` as received (call only after it decrypted).
    pub fn advance(&mut self, sequence: u64) {
        if sequence > self.most_recent {
            self.most_recent = sequence;
        }
        let size = REPLAY_PROTECTION_BUFFER_SIZE as u64;
        self.received[(sequence % size) as usize] = sequence;
    }

    /// The most recent sequence number received.
    pub fn most_recent(&self) -> u64 {
        self.most_recent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window() {
        let mut r = ReplayProtection::new();
        assert!(!r.already_received(0));
        r.advance(0);
        assert!(r.already_received(0));
        for s in 1..1000u64 {
            assert!(!r.already_received(s));
            r.advance(s);
            assert!(r.already_received(s));
        }
        assert!(r.already_received(999 - 256));
        assert!(r.already_received(999 - 100));
        assert!(!r.already_received(1000));
        // A gap inside the window is still accepted once.
        r.advance(1010);
        assert!(!r.already_received(1005));
        r.advance(1005);
        assert!(r.already_received(1005));
        // Near the top of the range.
        let mut r = ReplayProtection::new();
        r.advance(u64::MAX - 1);
        assert!(!r.already_received(u64::MAX - 2));
        assert!(r.already_received(u64::MAX - 1));
    }
}
