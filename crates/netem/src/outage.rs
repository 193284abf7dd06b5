//! Outages: stretches of time in which one direction of a link delivers nothing, as when
//! a phone loses its cell for a few seconds.

use std::time::Duration;

/// What happens to packets sent while a link is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutageMode {
    /// They wait in the link's buffers and leave, in order, when it comes back (a cellular
    /// link's radio buffers): they arrive late, all at once. The harder case for clock
    /// synchronisation, and the default.
    #[default]
    Hold,
    /// They are lost ([`LinkStats::outage_dropped_packets`](crate::LinkStats::outage_dropped_packets)).
    Drop,
}

/// Which direction of a connection an outage (or a change) affects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
    /// Both.
    #[default]
    Both,
}

impl Direction {
    /// True when the direction includes the uplink.
    pub fn up(self) -> bool {
        matches!(self, Direction::Up | Direction::Both)
    }

    /// True when the direction includes the downlink.
    pub fn down(self) -> bool {
        matches!(self, Direction::Down | Direction::Both)
    }
}

/// One outage of one link: from [`start`](Self::start) for [`duration`](Self::duration),
/// packets handed to the link are held or dropped ([`OutageMode`]). Packets already in
/// flight when it starts are delivered as scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// When the link goes out, on the caller's clock.
    pub start: Duration,
    /// How long it stays out.
    pub duration: Duration,
    /// What happens to packets sent meanwhile.
    pub mode: OutageMode,
}

impl Outage {
    /// When the link comes back.
    pub fn end(&self) -> Duration {
        self.start.saturating_add(self.duration)
    }

    /// True when `now` lies within the outage.
    pub fn covers(&self, now: Duration) -> bool {
        now >= self.start && now < self.end()
    }
}
