//! A small reliable-ordered message channel carried in unreliable datagrams.
//!
//! Each message gets a 16-bit id. A channel packet carries the sender's acknowledgement
//! state (the next id it expects, every id below having arrived, plus a 32-bit field for
//! the 32 ids after it) and any messages due for (re)sending:
//!
//! ```text
//! [ack_next: u16 LE][ack_bits: u32 LE][count: u8]
//! count x { [id: u16 LE][len: u16 LE][len bytes] }
//! ```
//!
//! Unacknowledged messages are resent every `resend_interval` until acknowledged; the
//! receiver buffers up to [`WINDOW`] messages ahead of the next one it delivers and hands
//! them out in order. Queues are bounded; nothing in the decoder panics.

use std::collections::VecDeque;
use std::time::Duration;

use thiserror::Error;

/// Messages in flight (sent, unacknowledged) and buffered out of order, at most.
pub const WINDOW: u16 = 256;
/// Largest message.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Largest channel packet this channel writes (fits a netcode payload with its tag byte).
pub const MAX_PACKET_BYTES: usize = 1150;
const HEADER_BYTES: usize = 7;
const MESSAGE_HEADER_BYTES: usize = 4;

/// Why a message could not be queued or a channel packet was refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ChannelError {
    /// The message is empty or larger than [`MAX_MESSAGE_BYTES`].
    #[error("message of {0} bytes is outside 1..={MAX_MESSAGE_BYTES}")]
    MessageSize(usize),
    /// The send queue is full (the peer is not acknowledging).
    #[error("reliable send queue is full")]
    SendQueueFull,
    /// A channel packet is truncated or malformed.
    #[error("malformed channel packet")]
    Malformed,
}

/// Channel settings.
#[derive(Clone, Debug)]
pub struct ChannelConfig {
    /// Resend an unacknowledged message after this long.
    pub resend_interval: Duration,
    /// Most messages waiting to be sent or acknowledged.
    pub send_queue_len: usize,
    /// Most messages delivered but not yet read by the application.
    pub recv_queue_len: usize,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            resend_interval: Duration::from_millis(100),
            send_queue_len: 1024,
            recv_queue_len: 1024,
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Messages queued by the application.
    pub messages_sent: u64,
    /// Messages written again after their first send.
    pub resends: u64,
    /// Messages delivered in order.
    pub messages_delivered: u64,
    /// Messages that arrived twice (already delivered or buffered).
    pub duplicates: u64,
    /// Messages outside the receive window, dropped (the sender resends them).
    pub out_of_window: u64,
    /// Channel packets refused as malformed.
    pub malformed: u64,
}

#[derive(Clone, Debug)]
struct Outgoing {
    id: u16,
    data: Vec<u8>,
    last_sent: Option<Duration>,
}

/// One direction pair of a reliable-ordered channel (sans-IO).
#[derive(Clone, Debug)]
pub struct ReliableChannel {
    config: ChannelConfig,
    next_send_id: u16,
    unacked: VecDeque<Outgoing>,
    next_recv_id: u16,
    /// Received, undelivered messages, indexed by `id - next_recv_id`.
    ahead: VecDeque<Option<Vec<u8>>>,
    delivered: VecDeque<Vec<u8>>,
    ack_dirty: bool,
    stats: ChannelStats,
}

impl Default for ReliableChannel {
    fn default() -> Self {
        Self::new(ChannelConfig::default())
    }
}

fn ahead_of(a: u16, b: u16) -> u16 {
    a.wrapping_sub(b)
}

impl ReliableChannel {
    /// An empty channel.
    pub fn new(config: ChannelConfig) -> Self {
        Self {
            config,
            next_send_id: 0,
            unacked: VecDeque::new(),
            next_recv_id: 0,
            ahead: VecDeque::new(),
            delivered: VecDeque::new(),
            ack_dirty: false,
            stats: ChannelStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }

    /// Messages queued and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Queues a message for reliable, ordered delivery.
    pub fn send(&mut self, message: &[u8]) -> Result<(), ChannelError> {
        if message.is_empty() || message.len() > MAX_MESSAGE_BYTES {
            return Err(ChannelError::MessageSize(message.len()));
        }
        if self.unacked.len() >= self.config.send_queue_len {
            return Err(ChannelError::SendQueueFull);
        }
        self.unacked.push_back(Outgoing {
            id: self.next_send_id,
            data: message.to_vec(),
            last_sent: None,
        });
        self.next_send_id = self.next_send_id.wrapping_add(1);
        self.stats.messages_sent += 1;
        Ok(())
    }

    /// The next message delivered in order.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        self.delivered.pop_front()
    }

    /// A channel packet to send now, if any message is due or an acknowledgement is owed.
    pub fn poll_packet(&mut self, now: Duration) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&self.next_recv_id.to_le_bytes());
        out.extend_from_slice(&self.ack_bits().to_le_bytes());
        out.push(0);
        let mut count = 0u8;
        let oldest = self.unacked.front().map(|m| m.id);
        for m in &mut self.unacked {
            // Never send beyond the receiver's window.
            if oldest.is_some_and(|o| ahead_of(m.id, o) >= WINDOW) {
                break;
            }
            let due = m
                .last_sent
                .is_none_or(|t| t + self.config.resend_interval <= now);
            if !due {
                continue;
            }
            if out.len() + MESSAGE_HEADER_BYTES + m.data.len() > MAX_PACKET_BYTES
                || count == u8::MAX
            {
                break;
            }
            out.extend_from_slice(&m.id.to_le_bytes());
            out.extend_from_slice(&(m.data.len() as u16).to_le_bytes());
            out.extend_from_slice(&m.data);
            if m.last_sent.is_some() {
                self.stats.resends += 1;
            }
            m.last_sent = Some(now);
            count += 1;
        }
        if count == 0 && !self.ack_dirty {
            return None;
        }
        out[6] = count;
        self.ack_dirty = false;
        Some(out)
    }

    fn ack_bits(&self) -> u32 {
        let mut bits = 0u32;
        for (i, slot) in self.ahead.iter().skip(1).take(32).enumerate() {
            if slot.is_some() {
                bits |= 1 << i;
            }
        }
        bits
    }

    /// Handles a channel packet from the peer: applies its acknowledgements and takes its
    /// messages.
    pub fn handle_packet(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        let result = self.decode(bytes);
        if result.is_err() {
            self.stats.malformed += 1;
        }
        result
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        let bad = ChannelError::Malformed;
        if bytes.len() < HEADER_BYTES || bytes.len() > MAX_PACKET_BYTES {
            return Err(bad);
        }
        let ack_next = u16::from_le_bytes([bytes[0], bytes[1]]);
        let ack_bits = u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
        let count = bytes[6];
        // Parse everything before changing any state.
        let mut messages = Vec::with_capacity(count as usize);
        let mut rest = &bytes[HEADER_BYTES..];
        for _ in 0..count {
            if rest.len() < MESSAGE_HEADER_BYTES {
                return Err(bad);
            }
            let id = u16::from_le_bytes([rest[0], rest[1]]);
            let len = u16::from_le_bytes([rest[2], rest[3]]) as usize;
            rest = &rest[MESSAGE_HEADER_BYTES..];
            if len == 0 || len > MAX_MESSAGE_BYTES || rest.len() < len {
                return Err(bad);
            }
            messages.push((id, &rest[..len]));
            rest = &rest[len..];
        }
        if !rest.is_empty() {
            return Err(bad);
        }
        // An acknowledgement only counts for ids we actually sent.
        let in_flight = ahead_of(
            self.next_send_id,
            self.unacked.front().map_or(self.next_send_id, |m| m.id),
        );
        let oldest = self.unacked.front().map_or(self.next_send_id, |m| m.id);
        if ahead_of(ack_next, oldest) <= in_flight {
            self.unacked.retain(|m| {
                let below = ahead_of(ack_next, m.id) > 0 && ahead_of(ack_next, m.id) <= in_flight;
                let offset = ahead_of(m.id, ack_next);
                let bit = (1..=32).contains(&offset) && ack_bits & (1 << (offset - 1)) != 0;
                !(below || bit)
            });
        }
        for (id, data) in messages {
            self.ack_dirty = true;
            let offset = ahead_of(id, self.next_recv_id);
            if offset >= WINDOW {
                // Behind (already delivered) or too far ahead.
                if offset > u16::MAX - WINDOW {
                    self.stats.duplicates += 1;
                } else {
                    self.stats.out_of_window += 1;
                }
                continue;
            }
            let index = offset as usize;
            while self.ahead.len() <= index {
                self.ahead.push_back(None);
            }
            match &mut self.ahead[index] {
                Some(_) => self.stats.duplicates += 1,
                slot => *slot = Some(data.to_vec()),
            }
        }
        // Deliver whatever is now in order.
        while let Some(Some(_)) = self.ahead.front() {
            if self.delivered.len() >= self.config.recv_queue_len {
                break;
            }
            if let Some(Some(next)) = self.ahead.pop_front() {
                self.delivered.push_back(next);
                self.stats.messages_delivered += 1;
                self.next_recv_id = self.next_recv_id.wrapping_add(1);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn in_order_over_a_lossy_reordering_link() {
        let mut a = ReliableChannel::default();
        let mut b = ReliableChannel::default();
        let mut got = Vec::new();
        let mut x = 12345u64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut in_flight_ab: Vec<Vec<u8>> = Vec::new();
        let mut in_flight_ba: Vec<Vec<u8>> = Vec::new();
        let mut sent = 0u32;
        for t in 0..5000u64 {
            let now = ms(t * 10);
            if sent < 3000 && a.unacked() < 200 {
                a.send(&sent.to_le_bytes()).expect("send");
                sent += 1;
            }
            if let Some(p) = a.poll_packet(now) {
                in_flight_ab.push(p);
            }
            if let Some(p) = b.poll_packet(now) {
                in_flight_ba.push(p);
            }
            // 30 % loss, random order.
            while !in_flight_ab.is_empty() {
                let i = (rand() % in_flight_ab.len() as u64) as usize;
                let p = in_flight_ab.swap_remove(i);
                if rand() % 10 >= 3 {
                    b.handle_packet(&p).expect("valid");
                }
            }
            while let Some(p) = in_flight_ba.pop() {
                if rand() % 10 >= 3 {
                    a.handle_packet(&p).expect("valid");
                }
            }
            while let Some(m) = b.recv() {
                got.push(u32::from_le_bytes(m.try_into().expect("4 bytes")));
            }
        }
        assert_eq!(got, (0..3000).collect::<Vec<_>>());
        assert_eq!(a.unacked(), 0);
        assert!(a.stats().resends > 0);
    }

    #[test]
    fn bounded_queue_and_sizes() {
        let mut a = ReliableChannel::new(ChannelConfig {
            send_queue_len: 2,
            ..Default::default()
        });
        a.send(b"1").expect("1");
        a.send(b"2").expect("2");
        assert_eq!(a.send(b"3"), Err(ChannelError::SendQueueFull));
        assert_eq!(a.send(b""), Err(ChannelError::MessageSize(0)));
        assert_eq!(
            a.send(&[0; MAX_MESSAGE_BYTES + 1]),
            Err(ChannelError::MessageSize(MAX_MESSAGE_BYTES + 1))
        );
    }

    #[test]
    fn malformed_refused_without_state_change() {
        let mut a = ReliableChannel::default();
        for bytes in [
            &[][..],
            &[0; 6],
            &[0, 0, 0, 0, 0, 0, 1],
            &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
            &[0, 0, 0, 0, 0, 0, 0, 9],
        ] {
            assert_eq!(
                a.handle_packet(bytes),
                Err(ChannelError::Malformed),
                "{bytes:?}"
            );
        }
        assert_eq!(a.stats().malformed, 5);
        assert!(a.recv().is_none());
        assert!(a.poll_packet(ms(0)).is_none());
    }
}
