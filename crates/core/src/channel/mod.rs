//! A message channel carried in unreliable datagrams: reliable-ordered messages and
//! unreliable ones, side by side, with the acknowledgements for the other direction.
//!
//! The channel never sends a datagram of its own. It writes a *channel packet* when asked
//! ([`MessageChannel::poll_packet_within`]) and the caller puts it wherever it has room:
//! `lagless-transport` sends it as its own netcode payload, the sessions of this crate
//! frame it in the packets that flow anyway (see [`crate::message`]).
//!
//! # Wire format
//!
//! All integers little-endian; `varint` is LEB128 (minimal encoding only).
//!
//! ```text
//! [ack_next: u16][ack_bits: u32]
//! [reliable: varint]   reliable   x { [id: u16][len: varint][len bytes] }
//! [unreliable: varint] if unreliable > 0 { [first_id: u16] }
//!                      unreliable x { [len: varint][len bytes] }
//! ```
//!
//! | field        | meaning                                                               |
//! |--------------|-----------------------------------------------------------------------|
//! | `ack_next`   | the next reliable id the writer expects: every id below it arrived    |
//! | `ack_bits`   | bit `i` set: reliable id `ack_next + 1 + i` arrived too               |
//! | `reliable`   | reliable messages in this packet, each with its own 16-bit id          |
//! | `first_id`   | the id of the first unreliable message; the others follow it by one   |
//! | `len`        | 1 to [`MAX_MESSAGE_BYTES`]                                             |
//!
//! A packet is at most [`MAX_CHANNEL_PACKET_BYTES`] and at least [`MIN_CHANNEL_PACKET_BYTES`]
//! (acknowledgements only).
//!
//! # Delivery
//!
//! * **Reliable** messages are resent every `resend_interval` until acknowledged and
//!   handed out in the order they were sent, each exactly once. The receiver buffers up to
//!   [`WINDOW`] messages ahead of the next one it delivers.
//! * **Unreliable** messages go in the next packet written with room for them and are never
//!   resent. One that finds no room waits for the next packet, but no longer than
//!   `unreliable_max_wait` after it first found none: then it is dropped
//!   ([`ChannelStats::unreliable_dropped`]); stale is worse than lost. Each gets an
//!   id when written, so a duplicated or late packet delivers it at most once. (A copy
//!   arriving more than 1024 unreliable ids behind the newest is taken as a sign that the
//!   newest was forged and starts the count over, as the sessions do with their sequence
//!   numbers: no network holds a packet that long, and a forged id must not silence the
//!   sender for 32768 messages.)
//!
//! Every queue is bounded ([`ChannelConfig`]); a full one refuses with a [`ChannelError`].
//! [`MessageChannel::handle_packet`] parses the whole packet before it changes any state,
//! and never panics, whatever the bytes.

use std::collections::VecDeque;
use std::time::Duration;

use lagless_wire::{Reader, WireError, Writer};
use thiserror::Error;

/// Reliable messages in flight (sent, unacknowledged) and buffered out of order, at most.
pub const WINDOW: u16 = 256;
/// Largest message, reliable or not.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Largest channel packet: fits a netcode payload with `lagless-transport`'s tag byte, and
/// a snapshot fragment's payload room (see [`crate::message`]).
pub const MAX_CHANNEL_PACKET_BYTES: usize = 1150;
/// Smallest channel packet: acknowledgements and two zero counts.
pub const MIN_CHANNEL_PACKET_BYTES: usize = ACK_BYTES + 2;

/// `ack_next` and `ack_bits`.
const ACK_BYTES: usize = 6;
/// What one message of [`MAX_MESSAGE_BYTES`] costs in a packet of its own beyond its bytes:
/// acknowledgements, both counts, an id (reliable) or a first id (unreliable), a two-byte
/// length.
const MESSAGE_OVERHEAD: usize = MIN_CHANNEL_PACKET_BYTES + 2 + 2;
/// An unreliable id further behind the newest than this means the newest was bogus (a
/// forged packet, or a peer that started over): accept it rather than ignore the next
/// 32768 ids.
const UNRELIABLE_RESET_DISTANCE: u16 = 1024;

/// How a message is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Resent until acknowledged; delivered once, in the order sent.
    Reliable,
    /// Sent once, in the next packet with room for it (dropped if none comes within
    /// [`ChannelConfig::unreliable_max_wait`]); may be lost; delivered at most once, in
    /// the order it arrives.
    Unreliable,
}

/// Why a message could not be queued or a channel packet was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ChannelError {
    /// The message is empty or larger than the channel takes
    /// ([`MessageChannel::max_message_bytes`]).
    #[error("message of {len} bytes is outside 1..={max}")]
    MessageSize {
        /// Size of the message.
        len: usize,
        /// The largest message the channel takes.
        max: usize,
    },
    /// The reliable send queue is full (the peer is not acknowledging).
    #[error("reliable send queue is full")]
    SendQueueFull,
    /// The unreliable send queue is full (no packet was written since it filled).
    #[error("unreliable send queue is full")]
    UnreliableQueueFull,
    /// A channel packet is truncated or malformed.
    #[error("malformed channel packet: {0}")]
    Malformed(#[from] WireError),
}

/// Channel settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Resend an unacknowledged reliable message after this long.
    pub resend_interval: Duration,
    /// Most reliable messages waiting to be sent or acknowledged.
    pub send_queue_len: usize,
    /// Most unreliable messages waiting for the next packet.
    pub unreliable_queue_len: usize,
    /// How long an unreliable message may wait for a packet with room for it, from the
    /// first packet that had none; zero drops it at the first. Packets are polled at the
    /// caller's pace, so this is also at least one packet interval.
    pub unreliable_max_wait: Duration,
    /// Most messages (of either kind) delivered but not yet read by the application.
    pub recv_queue_len: usize,
    /// Largest channel packet written, taken within
    /// [`MIN_CHANNEL_PACKET_BYTES`]`..=`[`MAX_CHANNEL_PACKET_BYTES`]. It also bounds the
    /// largest message: one must fit in a packet of its own.
    pub max_packet_bytes: usize,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            resend_interval: Duration::from_millis(100),
            send_queue_len: 1024,
            unreliable_queue_len: 256,
            unreliable_max_wait: Duration::from_millis(50),
            recv_queue_len: 1024,
            max_packet_bytes: MAX_CHANNEL_PACKET_BYTES,
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Reliable messages queued by the application.
    pub messages_sent: u64,
    /// Reliable messages written again after their first send.
    pub resends: u64,
    /// Reliable messages delivered in order.
    pub messages_delivered: u64,
    /// Reliable messages that arrived twice (already delivered or buffered).
    pub duplicates: u64,
    /// Reliable messages outside the receive window, dropped (the sender resends them).
    pub out_of_window: u64,
    /// Channel packets refused as malformed.
    pub malformed: u64,
    /// Unreliable messages queued by the application.
    pub unreliable_sent: u64,
    /// Unreliable messages written into a packet.
    pub unreliable_written: u64,
    /// Unreliable messages dropped for want of room in the packets written within
    /// `unreliable_max_wait`.
    pub unreliable_dropped: u64,
    /// Unreliable messages delivered.
    pub unreliable_delivered: u64,
    /// Unreliable messages refused on arrival: seen before, or too old to tell.
    pub unreliable_duplicates: u64,
    /// Unreliable messages dropped on arrival because the receive queue was full.
    pub unreliable_overflow: u64,
    /// Channel packets written.
    pub packets_written: u64,
    /// Bytes of channel packets written.
    pub bytes_written: u64,
}

#[derive(Clone, Debug)]
struct Unreliable {
    data: Vec<u8>,
    /// When a packet first had no room for it.
    first_refused: Option<Duration>,
}

#[derive(Clone, Debug)]
struct Outgoing {
    id: u16,
    data: Vec<u8>,
    last_sent: Option<Duration>,
}

/// Both directions of one message channel (sans-IO): what this side sends, and what it
/// receives from the peer and acknowledges.
#[derive(Clone, Debug)]
pub struct MessageChannel {
    config: ChannelConfig,
    next_send_id: u16,
    unacked: VecDeque<Outgoing>,
    unreliable: VecDeque<Unreliable>,
    next_unreliable_id: u16,
    next_recv_id: u16,
    /// Received, undelivered reliable messages, indexed by `id - next_recv_id`.
    ahead: VecDeque<Option<Vec<u8>>>,
    /// The newest unreliable id received, and which of the 64 ids up to it arrived (bit
    /// `k`: `newest - k`).
    unreliable_seen: Option<(u16, u64)>,
    delivered: VecDeque<(Delivery, Vec<u8>)>,
    ack_dirty: bool,
    stats: ChannelStats,
}

impl Default for MessageChannel {
    fn default() -> Self {
        Self::new(ChannelConfig::default())
    }
}

/// How far `a` lies after `b` in 16-bit id space.
fn ahead_of(a: u16, b: u16) -> u16 {
    a.wrapping_sub(b)
}

/// Bytes of `v` as a LEB128 varint.
pub(crate) fn varint_len(v: usize) -> usize {
    let mut len = 1;
    let mut v = v >> 7;
    while v != 0 {
        len += 1;
        v >>= 7;
    }
    len
}

/// Size of a channel packet with these contents.
fn packet_len(
    reliable: usize,
    reliable_bytes: usize,
    unreliable: usize,
    unreliable_bytes: usize,
) -> usize {
    let first_id = if unreliable > 0 { 2 } else { 0 };
    ACK_BYTES
        + varint_len(reliable)
        + reliable_bytes
        + varint_len(unreliable)
        + first_id
        + unreliable_bytes
}

/// A channel packet, parsed and checked, before it changes any state.
struct Parsed<'a> {
    ack_next: u16,
    ack_bits: u32,
    reliable: Vec<(u16, &'a [u8])>,
    first_unreliable: u16,
    unreliable: Vec<&'a [u8]>,
}

fn parse(bytes: &[u8]) -> Result<Parsed<'_>, WireError> {
    if bytes.len() > MAX_CHANNEL_PACKET_BYTES {
        return Err(WireError::TooLarge {
            what: "channel packet",
            len: bytes.len(),
            max: MAX_CHANNEL_PACKET_BYTES,
        });
    }
    let mut r = Reader::new(bytes);
    let ack_next = r.read_u16()?;
    let ack_bits = r.read_u32()?;
    // Every message takes at least two bytes, so a count above this cannot be honest; the
    // check comes before anything is allocated for it.
    let count = r.read_count(MAX_CHANNEL_PACKET_BYTES / 2, "reliable message count")?;
    let mut reliable = Vec::with_capacity(count);
    for _ in 0..count {
        let id = r.read_u16()?;
        reliable.push((id, read_message(&mut r)?));
    }
    let count = r.read_count(MAX_CHANNEL_PACKET_BYTES / 2, "unreliable message count")?;
    let first_unreliable = if count > 0 { r.read_u16()? } else { 0 };
    let mut unreliable = Vec::with_capacity(count);
    for _ in 0..count {
        unreliable.push(read_message(&mut r)?);
    }
    r.finish()?;
    Ok(Parsed {
        ack_next,
        ack_bits,
        reliable,
        first_unreliable,
        unreliable,
    })
}

/// A message: a varint length in `1..=MAX_MESSAGE_BYTES` and its bytes.
fn read_message<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], WireError> {
    let m = r.read_len_prefixed(MAX_MESSAGE_BYTES, "message")?;
    if m.is_empty() {
        // The sender refuses empty messages; an empty one is bytes it never writes.
        return Err(WireError::Invalid {
            what: "empty message",
        });
    }
    Ok(m)
}

impl MessageChannel {
    /// An empty channel. `config.max_packet_bytes` is taken within
    /// [`MIN_CHANNEL_PACKET_BYTES`]`..=`[`MAX_CHANNEL_PACKET_BYTES`].
    pub fn new(mut config: ChannelConfig) -> Self {
        config.max_packet_bytes = config
            .max_packet_bytes
            .clamp(MIN_CHANNEL_PACKET_BYTES, MAX_CHANNEL_PACKET_BYTES);
        Self {
            config,
            next_send_id: 0,
            unacked: VecDeque::new(),
            unreliable: VecDeque::new(),
            next_unreliable_id: 0,
            next_recv_id: 0,
            ahead: VecDeque::new(),
            unreliable_seen: None,
            delivered: VecDeque::new(),
            ack_dirty: false,
            stats: ChannelStats::default(),
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &ChannelConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }

    /// Reliable messages queued and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Unreliable messages waiting for the next packet.
    pub fn unreliable_queued(&self) -> usize {
        self.unreliable.len()
    }

    /// Messages received and not yet read.
    pub fn received(&self) -> usize {
        self.delivered.len()
    }

    /// The largest message this channel takes: [`MAX_MESSAGE_BYTES`], or less when
    /// `max_packet_bytes` could not carry one that large.
    pub fn max_message_bytes(&self) -> usize {
        MAX_MESSAGE_BYTES.min(
            self.config
                .max_packet_bytes
                .saturating_sub(MESSAGE_OVERHEAD),
        )
    }

    /// Queues a message for reliable, ordered delivery.
    pub fn send(&mut self, message: &[u8]) -> Result<(), ChannelError> {
        self.send_with(Delivery::Reliable, message)
    }

    /// Queues a message for unreliable delivery in the next packet with room for it.
    pub fn send_unreliable(&mut self, message: &[u8]) -> Result<(), ChannelError> {
        self.send_with(Delivery::Unreliable, message)
    }

    /// Queues a message for delivery as asked.
    pub fn send_with(&mut self, delivery: Delivery, message: &[u8]) -> Result<(), ChannelError> {
        let max = self.max_message_bytes();
        if message.is_empty() || message.len() > max {
            return Err(ChannelError::MessageSize {
                len: message.len(),
                max,
            });
        }
        match delivery {
            Delivery::Reliable => {
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
            }
            Delivery::Unreliable => {
                if self.unreliable.len() >= self.config.unreliable_queue_len {
                    return Err(ChannelError::UnreliableQueueFull);
                }
                self.unreliable.push_back(Unreliable {
                    data: message.to_vec(),
                    first_refused: None,
                });
                self.stats.unreliable_sent += 1;
            }
        }
        Ok(())
    }

    /// The next message received, of either kind, without saying which (reliable ones in
    /// order).
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        self.recv_with_delivery().map(|(_, m)| m)
    }

    /// The next message received and how it was sent. Messages come out in the order they
    /// were taken in: reliable ones in the order sent, unreliable ones as they arrived.
    pub fn recv_with_delivery(&mut self) -> Option<(Delivery, Vec<u8>)> {
        let next = self.delivered.pop_front();
        if next.is_some() {
            // Room in the queue: reliable messages held back for want of it can go on.
            self.deliver_in_order();
        }
        next
    }

    /// A channel packet of at most `max_packet_bytes` (see [`ChannelConfig`]) to send now,
    /// if any message is due or an acknowledgement is owed.
    pub fn poll_packet(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.poll_packet_within(now, MAX_CHANNEL_PACKET_BYTES)
    }

    /// A channel packet of at most `max_bytes` (and `max_packet_bytes`) to send now, if any
    /// message is due or an acknowledgement is owed.
    ///
    /// Reliable messages due go first, oldest first; one that does not fit waits for a
    /// later packet while smaller ones behind it may go. Then unreliable messages, oldest
    /// first, as many as fit; one that does not waits for a later packet, or is dropped
    /// once it has waited `unreliable_max_wait`. With `max_bytes` below
    /// [`MIN_CHANNEL_PACKET_BYTES`] nothing is written and nothing dropped.
    ///
    /// Called in a loop, it writes packets until nothing more is due: each packet it
    /// returns carries a message or an acknowledgement owed.
    pub fn poll_packet_within(&mut self, now: Duration, max_bytes: usize) -> Option<Vec<u8>> {
        let budget = max_bytes.min(self.config.max_packet_bytes);
        if budget < MIN_CHANNEL_PACKET_BYTES {
            return None;
        }
        let mut reliable = Writer::with_capacity(256);
        let mut reliable_count = 0;
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
            let entry = 2 + varint_len(m.data.len()) + m.data.len();
            if packet_len(reliable_count + 1, reliable.len() + entry, 0, 0) > budget {
                continue;
            }
            reliable.write_u16(m.id);
            reliable.write_len_prefixed(&m.data);
            if m.last_sent.is_some() {
                self.stats.resends += 1;
            }
            m.last_sent = Some(now);
            reliable_count += 1;
        }
        let mut unreliable = Writer::new();
        let mut unreliable_count = 0;
        let first_unreliable = self.next_unreliable_id;
        let max_wait = self.config.unreliable_max_wait;
        let stats = &mut self.stats;
        self.unreliable.retain_mut(|m| {
            let entry = varint_len(m.data.len()) + m.data.len();
            let len = packet_len(
                reliable_count,
                reliable.len(),
                unreliable_count + 1,
                unreliable.len() + entry,
            );
            if len <= budget {
                unreliable.write_len_prefixed(&m.data);
                unreliable_count += 1;
                return false;
            }
            let first = *m.first_refused.get_or_insert(now);
            let keep = now.saturating_sub(first) < max_wait;
            if !keep {
                stats.unreliable_dropped += 1;
            }
            keep
        });
        if reliable_count == 0 && unreliable_count == 0 && !self.ack_dirty {
            return None;
        }
        // Ids are given as messages are written, so those of one packet are consecutive
        // even when some before them were dropped.
        self.next_unreliable_id = self
            .next_unreliable_id
            .wrapping_add(unreliable_count as u16);
        self.stats.unreliable_written += unreliable_count as u64;
        let mut w = Writer::with_capacity(packet_len(
            reliable_count,
            reliable.len(),
            unreliable_count,
            unreliable.len(),
        ));
        w.write_u16(self.next_recv_id);
        w.write_u32(self.ack_bits());
        w.write_varint_u32(reliable_count as u32);
        w.write_bytes(reliable.as_bytes());
        w.write_varint_u32(unreliable_count as u32);
        if unreliable_count > 0 {
            w.write_u16(first_unreliable);
        }
        w.write_bytes(unreliable.as_bytes());
        self.ack_dirty = false;
        self.stats.packets_written += 1;
        self.stats.bytes_written += w.len() as u64;
        Some(w.into_bytes())
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
    /// messages. A malformed packet is refused whole (and counted): nothing in it is used.
    pub fn handle_packet(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        let parsed = match parse(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        self.apply_acks(parsed.ack_next, parsed.ack_bits);
        for (id, data) in parsed.reliable {
            self.take_reliable(id, data);
        }
        // The packet's reliable messages come before its unreliable ones, as written.
        self.deliver_in_order();
        for (k, data) in parsed.unreliable.into_iter().enumerate() {
            let id = parsed.first_unreliable.wrapping_add(k as u16);
            if !self.first_sight(id) {
                self.stats.unreliable_duplicates += 1;
            } else if self.delivered.len() >= self.config.recv_queue_len {
                self.stats.unreliable_overflow += 1;
            } else {
                self.delivered
                    .push_back((Delivery::Unreliable, data.to_vec()));
                self.stats.unreliable_delivered += 1;
            }
        }
        Ok(())
    }

    fn apply_acks(&mut self, ack_next: u16, ack_bits: u32) {
        // An acknowledgement only counts for ids we actually sent.
        let oldest = self.unacked.front().map_or(self.next_send_id, |m| m.id);
        let in_flight = ahead_of(self.next_send_id, oldest);
        if ahead_of(ack_next, oldest) > in_flight {
            return;
        }
        self.unacked.retain(|m| {
            let below = ahead_of(ack_next, m.id) > 0 && ahead_of(ack_next, m.id) <= in_flight;
            let offset = ahead_of(m.id, ack_next);
            let bit = (1..=32).contains(&offset) && ack_bits & (1 << (offset - 1)) != 0;
            !(below || bit)
        });
    }

    fn take_reliable(&mut self, id: u16, data: &[u8]) {
        // Even a duplicate: its sender did not hear our acknowledgement.
        self.ack_dirty = true;
        let offset = ahead_of(id, self.next_recv_id);
        if offset >= WINDOW {
            // Behind (already delivered) or too far ahead.
            if offset > u16::MAX - WINDOW {
                self.stats.duplicates += 1;
            } else {
                self.stats.out_of_window += 1;
            }
            return;
        }
        let index = usize::from(offset);
        while self.ahead.len() <= index {
            self.ahead.push_back(None);
        }
        match &mut self.ahead[index] {
            Some(_) => self.stats.duplicates += 1,
            slot => *slot = Some(data.to_vec()),
        }
    }

    /// Moves reliable messages now in order to the receive queue, as far as it has room.
    fn deliver_in_order(&mut self) {
        while let Some(Some(_)) = self.ahead.front() {
            if self.delivered.len() >= self.config.recv_queue_len {
                break;
            }
            if let Some(Some(next)) = self.ahead.pop_front() {
                self.delivered.push_back((Delivery::Reliable, next));
                self.stats.messages_delivered += 1;
                self.next_recv_id = self.next_recv_id.wrapping_add(1);
                // The next acknowledgement moves on.
                self.ack_dirty = true;
            }
        }
    }

    /// Records unreliable `id` as received; false if it was already (or is too old to tell).
    fn first_sight(&mut self, id: u16) -> bool {
        let Some((newest, seen)) = self.unreliable_seen else {
            self.unreliable_seen = Some((id, 1));
            return true;
        };
        let after = ahead_of(id, newest);
        if after != 0 && after < 0x8000 {
            let seen = if after >= 64 { 0 } else { seen << after };
            self.unreliable_seen = Some((id, seen | 1));
            return true;
        }
        let behind = ahead_of(newest, id);
        if behind > UNRELIABLE_RESET_DISTANCE {
            self.unreliable_seen = Some((id, 1));
            return true;
        }
        if behind >= 64 || seen & (1 << behind) != 0 {
            return false;
        }
        self.unreliable_seen = Some((newest, seen | (1 << behind)));
        true
    }
}

#[cfg(test)]
mod tests;
