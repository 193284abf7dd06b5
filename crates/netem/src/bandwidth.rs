//! A rate-limited link with a drop-tail byte queue in front of it.

use std::collections::VecDeque;
use std::time::Duration;

use crate::config::ConfigError;

/// Rate cap of a link, with a drop-tail queue of limited size.
///
/// The link serialises one packet at a time at `kbps`, using the payload
/// size as given (no UDP/IP header overhead is added). A packet that
/// arrives while the link is busy waits in the queue; a packet that would
/// make the queued bytes (including the packet being serialised) exceed
/// `queue_bytes` is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bandwidth {
    /// Link rate in kilobits per second (1 kbit = 1000 bits).
    pub kbps: u32,
    /// Queue capacity in bytes.
    pub queue_bytes: usize,
}

impl Bandwidth {
    /// Time the link needs to put `bytes` on the wire, rounded up to whole
    /// nanoseconds so that the link never exceeds its rate.
    pub fn serialisation_time(&self, bytes: usize) -> Duration {
        // bits / (kbps * 1000 bit/s) seconds = bytes * 8e6 / kbps nanoseconds.
        let nanos = (bytes as u128 * 8_000_000).div_ceil(u128::from(self.kbps.max(1)));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.kbps == 0 {
            return Err(ConfigError::ZeroBandwidth);
        }
        if self.queue_bytes == 0 {
            return Err(ConfigError::ZeroQueueBytes);
        }
        Ok(())
    }
}

/// The queue state of a [`Bandwidth`] stage between packets.
#[derive(Debug, Clone, Default)]
pub(crate) struct BandwidthQueue {
    /// When the link finishes serialising everything accepted so far.
    busy_until: Duration,
    /// Departure time and size of every accepted packet not yet departed.
    /// Empty packets are never stored: they occupy no queue space, and
    /// skipping them bounds this by `queue_bytes` entries.
    pending: VecDeque<(Duration, usize)>,
    /// Sum of the sizes in `pending`.
    queued_bytes: usize,
}

impl BandwidthQueue {
    /// Offers a packet of `bytes` at `now` (non-decreasing between calls).
    /// Returns when it has fully left the link, or `None` if the queue is
    /// full and the packet is dropped.
    pub(crate) fn enqueue(
        &mut self,
        bandwidth: &Bandwidth,
        now: Duration,
        bytes: usize,
    ) -> Option<Duration> {
        while let Some(&(departure, size)) = self.pending.front() {
            if departure > now {
                break;
            }
            self.pending.pop_front();
            self.queued_bytes -= size;
        }
        if self.queued_bytes.saturating_add(bytes) > bandwidth.queue_bytes {
            return None;
        }
        let departure = self
            .busy_until
            .max(now)
            .saturating_add(bandwidth.serialisation_time(bytes));
        self.busy_until = departure;
        if bytes > 0 {
            self.pending.push_back((departure, bytes));
            self.queued_bytes += bytes;
        }
        Some(departure)
    }

    #[cfg(test)]
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn serialisation_time_uses_kilobits_of_1000_bits() {
        let bw = Bandwidth {
            kbps: 8,
            queue_bytes: 1,
        };
        assert_eq!(bw.serialisation_time(1000), Duration::from_secs(1));
        let bw = Bandwidth {
            kbps: 1000,
            queue_bytes: 1,
        };
        assert_eq!(bw.serialisation_time(125), MS);
        assert_eq!(bw.serialisation_time(0), Duration::ZERO);
        // 1 byte at 3 kbps = 8/3 ms, rounded up.
        let bw = Bandwidth {
            kbps: 3,
            queue_bytes: 1,
        };
        assert_eq!(bw.serialisation_time(1), Duration::from_nanos(2_666_667));
    }

    #[test]
    fn idle_link_departs_after_serialisation() {
        let bw = Bandwidth {
            kbps: 1000,
            queue_bytes: 1000,
        };
        let mut queue = BandwidthQueue::default();
        assert_eq!(queue.enqueue(&bw, 10 * MS, 125), Some(11 * MS));
        // Link idle again by 20 ms.
        assert_eq!(queue.enqueue(&bw, 20 * MS, 250), Some(22 * MS));
    }

    #[test]
    fn back_to_back_packets_queue_and_tail_drop() {
        // 125 bytes per ms; room for 4 packets of 125 bytes.
        let bw = Bandwidth {
            kbps: 1000,
            queue_bytes: 500,
        };
        let mut queue = BandwidthQueue::default();
        let departures: Vec<_> = (0..5)
            .map(|_| queue.enqueue(&bw, Duration::ZERO, 125))
            .collect();
        assert_eq!(
            departures,
            vec![Some(MS), Some(2 * MS), Some(3 * MS), Some(4 * MS), None]
        );
        // At 1 ms the first packet has left, making room for one more.
        assert_eq!(queue.enqueue(&bw, MS, 125), Some(5 * MS));
        assert_eq!(queue.enqueue(&bw, MS, 125), None);
        assert_eq!(queue.pending_len(), 4);
    }

    #[test]
    fn oversized_packet_is_dropped_even_on_idle_link() {
        let bw = Bandwidth {
            kbps: 1000,
            queue_bytes: 100,
        };
        let mut queue = BandwidthQueue::default();
        assert_eq!(queue.enqueue(&bw, Duration::ZERO, 101), None);
        assert_eq!(
            queue.enqueue(&bw, Duration::ZERO, 100),
            Some(Duration::from_micros(800))
        );
    }

    #[test]
    fn empty_packets_take_no_room() {
        let bw = Bandwidth {
            kbps: 1000,
            queue_bytes: 125,
        };
        let mut queue = BandwidthQueue::default();
        assert_eq!(queue.enqueue(&bw, Duration::ZERO, 125), Some(MS));
        for _ in 0..1000 {
            assert_eq!(queue.enqueue(&bw, Duration::ZERO, 0), Some(MS));
        }
        assert_eq!(queue.pending_len(), 1);
    }
}
