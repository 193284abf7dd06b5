//! A seeded, sans-IO network emulator for testing netcode.
//!
//! A [`Link`] is one direction of one connection. It owns no clock, socket
//! or thread: the caller passes the current time (a [`Duration`](std::time::Duration) since an
//! arbitrary epoch) to [`Link::send`] and [`Link::poll`], and all
//! randomness comes from the seed given to [`Link::new`]. The same config,
//! seed and sequence of calls therefore always produce the same packet
//! fates and delivery times, which makes network-dependent bugs
//! reproducible. [`Link::next_due`] lets a virtual clock jump straight to
//! the next delivery instead of ticking.
//!
//! ```
//! use std::time::Duration;
//! use lagless_netem::{Link, LinkConfig};
//!
//! let ms = Duration::from_millis;
//! let config = LinkConfig { delay: ms(20), ..LinkConfig::default() };
//! let mut link = Link::new(config, 42)?;
//! link.send(ms(0), b"hello".to_vec());
//! assert_eq!(link.next_due(), Some(ms(20)));
//! assert_eq!(link.poll(ms(19)), None);
//! assert_eq!(link.poll(ms(20)), Some(b"hello".to_vec()));
//! # Ok::<(), lagless_netem::ConfigError>(())
//! ```
//!
//! # What happens to a packet
//!
//! [`Link::send`] takes each packet through these stages, in this order:
//!
//! 1. **Count** it as sent ([`LinkStats::sent_packets`]).
//! 2. **Random loss** ([`Loss`]). For Gilbert-Elliott the two-state Markov
//!    chain steps once per packet, then the packet is lost with the loss
//!    probability of the new state. Lost packets use no bandwidth.
//! 3. **Bandwidth** ([`Bandwidth`]). The link serialises packets one after
//!    another at `kbps` using the payload size (no header overhead), so a
//!    packet departs at `max(now, link busy until) + size * 8 / rate`.
//!    Packets that have not departed form a queue; a packet that would
//!    push the queued bytes past `queue_bytes` is dropped
//!    ([`LinkStats::queue_dropped_packets`]).
//! 4. **Trace** ([`Trace`]), served as Mahimahi's `LinkQueue` serves it.
//!    Each delivery opportunity carries
//!    [`TRACE_OPPORTUNITY_BYTES`] (1504) bytes, shared in order by the
//!    packets waiting (each counted with [`TRACE_PACKET_OVERHEAD`] bytes of
//!    headers): many small packets leave with one opportunity, and a packet
//!    larger than what is left continues in the next ones and leaves with
//!    the one carrying its last byte. A packet arriving (when it left stage
//!    3, or at `now`) during millisecond `m` can use opportunities after
//!    `m` only; the trace loops with its period. If
//!    [`trace_queue_packets`](LinkConfig::trace_queue_packets) packets
//!    are already waiting it is dropped.
//! 5. **Propagation**: `+ delay + jitter` ([`Jitter`]), with the sum
//!    clamped at zero.
//! 6. **Ordering**. With probability
//!    [`reorder_rate`](LinkConfig::reorder_rate) the packet is held back a
//!    further [`reorder_delay`](LinkConfig::reorder_delay) and exempt from
//!    FIFO, so packets sent after it can arrive first. Every other packet is
//!    delivered no earlier than the previous non-reordered packet: real
//!    paths queue packets behind each other, so jitter alone rarely
//!    reorders.
//! 7. **Duplication**. With probability
//!    [`duplicate_rate`](LinkConfig::duplicate_rate) a second copy is
//!    scheduled at the same delivery time, right after the original.
//!
//! Scheduled packets wait in a min-heap keyed on (delivery time, order of
//! scheduling); [`Link::poll`] pops them in that order. Memory is bounded by
//! what is in flight plus the queue limits.
//!
//! Each kind of random decision (loss, jitter, reordering, duplication)
//! draws from its own stream, and every decision is drawn for every packet,
//! so e.g. enabling jitter does not change which packets are lost for the
//! same seed. Use [`derive_seed`] to give every client and direction its
//! own seed, or [`Duplex`] for both directions at once, and [`profile`] for
//! the named conditions used in experiments.
//!
//! Conditions may change part-way through ([`Link::reconfigure`]): the new
//! config shapes packets sent from then on, and what is already in flight
//! is delivered as scheduled. A link may also go out for a while ([`Outage`]): packets
//! sent meanwhile are held until it returns, or dropped; [`Duplex::add_outage`] picks the
//! direction.
#![deny(missing_docs)]

mod bandwidth;
mod config;
mod duplex;
mod jitter;
mod link;
mod loss;
mod outage;
mod profiles;
mod seed;
mod trace;

pub use bandwidth::Bandwidth;
pub use config::{ConfigError, LinkConfig};
pub use duplex::Duplex;
pub use jitter::Jitter;
pub use link::{Link, LinkStats};
pub use loss::{GilbertElliott, Loss};
pub use outage::{Direction, Outage, OutageMode};
pub use profiles::{PROFILE_NAMES, profile};
pub use seed::derive_seed;
pub use trace::{TRACE_MTU, TRACE_OPPORTUNITY_BYTES, TRACE_PACKET_OVERHEAD, Trace, TraceError};
