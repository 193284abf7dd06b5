//! One direction of one emulated connection.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::bandwidth::BandwidthQueue;
use crate::config::{ConfigError, LinkConfig};
use crate::jitter::apply_delay;
use crate::loss::LossProcess;
use crate::outage::{Outage, OutageMode};
use crate::seed::derive_seed;
use crate::trace::TraceQueue;

/// Counters of everything that happened on a [`Link`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkStats {
    /// Packets passed to [`Link::send`].
    pub sent_packets: u64,
    /// Payload bytes passed to [`Link::send`].
    pub sent_bytes: u64,
    /// Packets returned by [`Link::poll`], duplicates included.
    pub delivered_packets: u64,
    /// Payload bytes returned by [`Link::poll`], duplicates included.
    pub delivered_bytes: u64,
    /// Packets dropped by random loss.
    pub lost_packets: u64,
    /// Packets dropped because the bandwidth or trace queue was full.
    pub queue_dropped_packets: u64,
    /// Extra copies scheduled by duplication.
    pub duplicated_packets: u64,
    /// Packets picked for reordering (held back and exempt from FIFO),
    /// whether or not a later packet actually overtook them.
    pub reordered_packets: u64,
    /// Packets dropped because they were sent during an [`Outage`] in
    /// [`OutageMode::Drop`].
    pub outage_dropped_packets: u64,
    /// Packets held back by an [`Outage`] in [`OutageMode::Hold`].
    pub outage_held_packets: u64,
}

impl LinkStats {
    /// All packets that will never be delivered: random loss, queue overflow and
    /// outages.
    pub fn dropped_packets(&self) -> u64 {
        self.lost_packets + self.queue_dropped_packets + self.outage_dropped_packets
    }
}

/// A packet waiting in the network, ordered by delivery time and then by
/// the order in which it was scheduled.
#[derive(Debug, Clone)]
struct Scheduled {
    at: Duration,
    order: u64,
    packet: Vec<u8>,
}

impl Scheduled {
    fn key(&self) -> (Duration, u64) {
        (self.at, self.order)
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// One independent random stream per kind of decision, so that changing
/// one aspect of a config (say the jitter) leaves the others (which packets
/// are lost) exactly as they were for the same seed.
#[derive(Debug, Clone)]
struct Streams {
    loss: ChaCha8Rng,
    jitter: ChaCha8Rng,
    reorder: ChaCha8Rng,
    duplicate: ChaCha8Rng,
}

impl Streams {
    fn new(seed: u64) -> Self {
        let stream = |index| ChaCha8Rng::seed_from_u64(derive_seed(seed, index));
        Self {
            loss: stream(0),
            jitter: stream(1),
            reorder: stream(2),
            duplicate: stream(3),
        }
    }
}

/// One direction of one emulated connection.
///
/// Packets go in with [`send`](Self::send) and come out with
/// [`poll`](Self::poll) once their delivery time has been reached. See the
/// [crate docs](crate) for what happens in between.
#[derive(Debug, Clone)]
pub struct Link {
    config: LinkConfig,
    rng: Streams,
    loss: LossProcess,
    bandwidth: BandwidthQueue,
    trace: TraceQueue,
    /// Latest `now` seen by `send`; earlier times are raised to it.
    last_send: Duration,
    /// Delivery time of the latest non-reordered packet.
    fifo_floor: Duration,
    in_network: BinaryHeap<Reverse<Scheduled>>,
    next_order: u64,
    stats: LinkStats,
    outages: Vec<Outage>,
}

impl Link {
    /// Creates a link after [validating](LinkConfig::validate) `config`.
    /// Equal configs and seeds give identical behaviour.
    pub fn new(config: LinkConfig, seed: u64) -> Result<Link, ConfigError> {
        config.validate()?;
        Ok(Link {
            config,
            rng: Streams::new(seed),
            loss: LossProcess::default(),
            bandwidth: BandwidthQueue::default(),
            trace: TraceQueue::default(),
            last_send: Duration::ZERO,
            fifo_floor: Duration::ZERO,
            in_network: BinaryHeap::new(),
            next_order: 0,
            stats: LinkStats::default(),
            outages: Vec::new(),
        })
    }

    /// Hands a packet to the link at time `now`.
    ///
    /// Time must not run backwards: a `now` earlier than that of a previous
    /// `send` is treated as equal to it, so queues stay consistent.
    pub fn send(&mut self, now: Duration, packet: Vec<u8>) {
        let now = now.max(self.last_send);
        self.last_send = now;
        let bytes = packet.len();
        self.stats.sent_packets += 1;
        self.stats.sent_bytes += bytes as u64;

        // Draw every random decision up front, whatever the packet's fate,
        // so that one packet's fate never shifts the random numbers of
        // the packets after it.
        let lost = self.loss.is_lost(&self.config.loss, &mut self.rng.loss);
        let jitter = self.config.jitter.sample_nanos(&mut self.rng.jitter);
        let reordered = self.rng.reorder.random::<f64>() < self.config.reorder_rate;
        let duplicated = self.rng.duplicate.random::<f64>() < self.config.duplicate_rate;

        if lost {
            self.stats.lost_packets += 1;
            return;
        }
        let mut leaves_queues = now;
        if let Some(outage) = self.outages.iter().find(|o| o.covers(now)) {
            match outage.mode {
                OutageMode::Drop => {
                    self.stats.outage_dropped_packets += 1;
                    return;
                }
                OutageMode::Hold => {
                    self.stats.outage_held_packets += 1;
                    leaves_queues = outage.end();
                }
            }
        }
        if let Some(bandwidth) = &self.config.bandwidth {
            match self.bandwidth.enqueue(bandwidth, leaves_queues, bytes) {
                Some(departure) => leaves_queues = departure,
                None => {
                    self.stats.queue_dropped_packets += 1;
                    return;
                }
            }
        }
        if let Some(trace) = &self.config.trace {
            let limit = self.config.trace_queue_packets;
            match self.trace.schedule(trace, limit, leaves_queues, bytes) {
                Some(opportunity) => leaves_queues = opportunity,
                None => {
                    self.stats.queue_dropped_packets += 1;
                    return;
                }
            }
        }
        let mut at = apply_delay(leaves_queues, self.config.delay, jitter);
        if reordered {
            self.stats.reordered_packets += 1;
            at = at.saturating_add(self.config.reorder_delay);
        } else {
            // Jitter on a real path rarely reorders: packets share queues.
            at = at.max(self.fifo_floor);
            self.fifo_floor = at;
        }
        if duplicated {
            self.stats.duplicated_packets += 1;
            let copy = packet.clone();
            self.schedule(at, packet);
            self.schedule(at, copy);
        } else {
            self.schedule(at, packet);
        }
    }

    fn schedule(&mut self, at: Duration, packet: Vec<u8>) {
        let order = self.next_order;
        self.next_order += 1;
        self.in_network
            .push(Reverse(Scheduled { at, order, packet }));
    }

    /// Takes the next packet whose delivery time is at or before `now`:
    /// earliest delivery time first, ties in the order they were sent.
    /// Returns `None` when nothing is due yet.
    pub fn poll(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.in_network.peek()?.0.at > now {
            return None;
        }
        let Reverse(due) = self.in_network.pop()?;
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += due.packet.len() as u64;
        Some(due.packet)
    }

    /// Earliest scheduled delivery time, so a virtual clock can jump
    /// straight to it; `None` when nothing is in flight.
    pub fn next_due(&self) -> Option<Duration> {
        self.in_network.peek().map(|due| due.0.at)
    }

    /// Packets scheduled for delivery and not yet polled, duplicates
    /// included.
    pub fn in_flight(&self) -> usize {
        self.in_network.len()
    }

    /// Counters since the link was created.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The configuration the link runs with: the one it was created with, or the latest
    /// given to [`reconfigure`](Self::reconfigure).
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Adds an outage: packets sent while it lasts are held until it ends, or dropped
    /// ([`Outage`]). Random decisions are drawn for them all the same, so the packets
    /// after it meet the same fates as without it.
    pub fn add_outage(&mut self, outage: Outage) {
        self.outages.push(outage);
    }

    /// The outages added.
    pub fn outages(&self) -> &[Outage] {
        &self.outages
    }

    /// Switches the link to `config` for packets sent from now on, as when a phone walks
    /// out of Wi-Fi range onto a cell network, or a neighbour starts a download.
    ///
    /// What is already in the network stays as it was: packets in flight keep their
    /// delivery times, the bandwidth queue its backlog, and the random streams and the
    /// loss chain's state carry on, so a run with a change is as reproducible as one
    /// without. Packets sent after a drop in delay still queue behind those in flight
    /// (unless picked for reordering), as on a real path. A different trace starts its own
    /// queue. An invalid `config` is refused and the link keeps its old one.
    pub fn reconfigure(&mut self, config: LinkConfig) -> Result<(), ConfigError> {
        config.validate()?;
        if config.trace != self.config.trace {
            self.trace = TraceQueue::default();
        }
        self.config = config;
        Ok(())
    }
}

#[cfg(test)]
mod outage_tests {
    use super::*;

    #[test]
    fn an_outage_holds_or_drops_what_is_sent_during_it() {
        let ms = Duration::from_millis;
        let config = LinkConfig {
            delay: ms(10),
            ..LinkConfig::default()
        };
        for mode in [OutageMode::Hold, OutageMode::Drop] {
            let mut link = Link::new(config.clone(), 1).expect("valid");
            link.add_outage(Outage {
                start: ms(100),
                duration: ms(50),
                mode,
            });
            for t in [90, 100, 120, 149, 150] {
                link.send(ms(t), vec![t as u8]);
            }
            let mut got = Vec::new();
            for t in 0..400 {
                while let Some(p) = link.poll(ms(t)) {
                    got.push((t, p[0]));
                }
            }
            match mode {
                OutageMode::Hold => {
                    assert_eq!(
                        got,
                        vec![(100, 90), (160, 100), (160, 120), (160, 149), (160, 150)]
                    );
                    assert_eq!(link.stats().outage_held_packets, 3);
                }
                OutageMode::Drop => {
                    assert_eq!(got, vec![(100, 90), (160, 150)]);
                    assert_eq!(link.stats().outage_dropped_packets, 3);
                    assert_eq!(link.stats().dropped_packets(), 3);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bandwidth, Jitter, Loss, Trace};
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    fn link(config: LinkConfig) -> Link {
        Link::new(config, 7).expect("valid config")
    }

    /// Drains everything in flight, returning (delivery time, packet).
    fn drain(link: &mut Link) -> Vec<(Duration, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(at) = link.next_due() {
            let packet = link.poll(at).expect("due packet");
            out.push((at, packet));
        }
        out
    }

    #[test]
    fn reconfiguring_shapes_later_packets_and_keeps_those_in_flight() {
        let mut link = link(LinkConfig {
            delay: 100 * MS,
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![1]);
        let faster = LinkConfig {
            delay: 10 * MS,
            ..LinkConfig::default()
        };
        link.reconfigure(faster.clone()).expect("valid");
        assert_eq!(link.config(), &faster);
        // Sent after the change but queued behind the slow packet still in flight.
        link.send(MS, vec![2]);
        link.send(200 * MS, vec![3]);
        link.reconfigure(LinkConfig {
            loss: Loss::Uniform { rate: 1.0 },
            ..faster
        })
        .expect("valid");
        link.send(300 * MS, vec![4]);
        assert_eq!(
            drain(&mut link),
            vec![
                (100 * MS, vec![1]),
                (100 * MS, vec![2]),
                (210 * MS, vec![3])
            ]
        );
        assert_eq!(link.stats().lost_packets, 1);
    }

    #[test]
    fn an_invalid_reconfiguration_is_refused_and_changes_nothing() {
        let config = LinkConfig {
            delay: 5 * MS,
            ..LinkConfig::default()
        };
        let mut link = link(config.clone());
        let bad = LinkConfig {
            duplicate_rate: f64::NAN,
            ..LinkConfig::default()
        };
        assert!(link.reconfigure(bad).is_err());
        assert_eq!(link.config(), &config);
        link.send(Duration::ZERO, vec![1]);
        assert_eq!(link.next_due(), Some(5 * MS));
    }

    #[test]
    fn perfect_link_delivers_immediately() {
        let mut link = link(LinkConfig::default());
        assert_eq!(link.next_due(), None);
        assert_eq!(link.poll(Duration::ZERO), None);
        link.send(5 * MS, vec![1, 2, 3]);
        assert_eq!(link.in_flight(), 1);
        assert_eq!(link.next_due(), Some(5 * MS));
        assert_eq!(link.poll(5 * MS), Some(vec![1, 2, 3]));
        assert_eq!(link.in_flight(), 0);
        let stats = link.stats();
        assert_eq!(stats.sent_packets, 1);
        assert_eq!(stats.sent_bytes, 3);
        assert_eq!(stats.delivered_packets, 1);
        assert_eq!(stats.delivered_bytes, 3);
    }

    #[test]
    fn delay_is_exact_without_jitter() {
        let mut link = link(LinkConfig {
            delay: 20 * MS,
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![0]);
        assert_eq!(link.poll(19 * MS), None);
        assert_eq!(link.poll(20 * MS), Some(vec![0]));
        assert_eq!(link.poll(20 * MS), None);
    }

    #[test]
    fn ties_are_delivered_in_send_order() {
        let mut link = link(LinkConfig {
            delay: 10 * MS,
            ..LinkConfig::default()
        });
        for i in 0..10u8 {
            link.send(Duration::ZERO, vec![i]);
        }
        let order: Vec<u8> = std::iter::from_fn(|| link.poll(10 * MS))
            .map(|p| p[0])
            .collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn poll_returns_one_packet_per_call_in_time_order() {
        let mut link = link(LinkConfig {
            delay: 10 * MS,
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![0]);
        link.send(3 * MS, vec![1]);
        assert_eq!(link.poll(100 * MS), Some(vec![0]));
        assert_eq!(link.poll(100 * MS), Some(vec![1]));
        assert_eq!(link.poll(100 * MS), None);
    }

    #[test]
    fn time_running_backwards_is_clamped() {
        let mut link = link(LinkConfig {
            delay: 10 * MS,
            ..LinkConfig::default()
        });
        link.send(50 * MS, vec![0]);
        link.send(20 * MS, vec![1]);
        let delivered = drain(&mut link);
        assert_eq!(delivered[0], (60 * MS, vec![0]));
        assert_eq!(delivered[1], (60 * MS, vec![1]));
    }

    #[test]
    fn lost_packets_never_arrive() {
        let mut link = link(LinkConfig {
            loss: Loss::Uniform { rate: 1.0 },
            ..LinkConfig::default()
        });
        for _ in 0..10 {
            link.send(Duration::ZERO, vec![0; 10]);
        }
        assert_eq!(link.next_due(), None);
        assert_eq!(link.stats().lost_packets, 10);
        assert_eq!(link.stats().dropped_packets(), 10);
        assert_eq!(link.stats().sent_bytes, 100);
    }

    #[test]
    fn duplicate_arrives_right_after_original() {
        let mut link = link(LinkConfig {
            delay: 5 * MS,
            duplicate_rate: 1.0,
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![1]);
        link.send(Duration::ZERO, vec![2]);
        assert_eq!(link.in_flight(), 4);
        let delivered = drain(&mut link);
        let packets: Vec<_> = delivered.iter().map(|(_, p)| p[0]).collect();
        assert_eq!(packets, vec![1, 1, 2, 2]);
        assert!(delivered.iter().all(|(at, _)| *at == 5 * MS));
        assert_eq!(link.stats().duplicated_packets, 2);
        assert_eq!(link.stats().delivered_packets, 4);
    }

    #[test]
    fn reordered_packet_gets_extra_delay() {
        let mut link = link(LinkConfig {
            delay: 10 * MS,
            reorder_rate: 1.0,
            reorder_delay: 30 * MS,
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![0]);
        assert_eq!(link.next_due(), Some(40 * MS));
        assert_eq!(link.stats().reordered_packets, 1);
    }

    #[test]
    fn fifo_holds_back_packets_behind_slow_ones() {
        let mut link = link(LinkConfig {
            delay: 50 * MS,
            jitter: Jitter::Uniform { max: 40 * MS },
            ..LinkConfig::default()
        });
        for i in 0..200u8 {
            link.send(u32::from(i) * MS, vec![i]);
        }
        let delivered = drain(&mut link);
        let order: Vec<u8> = delivered.iter().map(|(_, p)| p[0]).collect();
        assert_eq!(order, (0..200).collect::<Vec<_>>());
        for (i, (at, _)) in delivered.iter().enumerate() {
            let sent = i as u32 * MS;
            assert!(
                *at >= sent + 10 * MS && *at <= sent + 90 * MS,
                "{i}: {at:?}"
            );
        }
    }

    #[test]
    fn bandwidth_then_delay() {
        let mut link = link(LinkConfig {
            delay: 10 * MS,
            bandwidth: Some(Bandwidth {
                kbps: 1000,
                queue_bytes: 250,
            }),
            ..LinkConfig::default()
        });
        for _ in 0..3 {
            link.send(Duration::ZERO, vec![0; 125]);
        }
        let times: Vec<_> = drain(&mut link).into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, vec![11 * MS, 12 * MS]);
        assert_eq!(link.stats().queue_dropped_packets, 1);
        assert_eq!(link.stats().dropped_packets(), 1);
    }

    #[test]
    fn trace_then_delay() {
        let trace = Trace::from_opportunities(vec![5, 10]).expect("valid");
        let mut link = link(LinkConfig {
            delay: 3 * MS,
            trace: Some(trace),
            trace_queue_packets: 2,
            ..LinkConfig::default()
        });
        // 1032 bytes each with headers: the second shares the 5 ms
        // opportunity and finishes in the 10 ms one; the third finds the
        // queue full.
        for _ in 0..3 {
            link.send(Duration::ZERO, vec![0; 1000]);
        }
        let times: Vec<_> = drain(&mut link).into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, vec![8 * MS, 13 * MS]);
        assert_eq!(link.stats().queue_dropped_packets, 1);
    }

    #[test]
    fn bandwidth_feeds_trace() {
        // The rate cap delays departure to 8 ms, so the packet takes the
        // 10 ms opportunity rather than the 5 ms one.
        let trace = Trace::from_opportunities(vec![5, 10]).expect("valid");
        let mut link = link(LinkConfig {
            bandwidth: Some(Bandwidth {
                kbps: 100,
                queue_bytes: 1000,
            }),
            trace: Some(trace),
            ..LinkConfig::default()
        });
        link.send(Duration::ZERO, vec![0; 100]);
        assert_eq!(link.next_due(), Some(10 * MS));
    }

    #[test]
    fn new_rejects_invalid_config() {
        let config = LinkConfig {
            loss: Loss::Uniform { rate: 1.5 },
            ..LinkConfig::default()
        };
        assert!(matches!(
            Link::new(config, 0),
            Err(ConfigError::ProbabilityOutOfRange { .. })
        ));
        let config = LinkConfig {
            duplicate_rate: f64::NAN,
            ..LinkConfig::default()
        };
        assert!(Link::new(config, 0).is_err());
    }

    #[test]
    fn config_is_kept() {
        let config = LinkConfig {
            delay: 3 * MS,
            ..LinkConfig::default()
        };
        assert_eq!(link(config.clone()).config(), &config);
    }

    #[test]
    fn loss_decisions_ignore_other_settings() {
        // Separate random streams: turning on jitter, reordering and
        // duplication must not change which packets are lost.
        let plain = LinkConfig {
            loss: Loss::Uniform { rate: 0.3 },
            ..LinkConfig::default()
        };
        let busy = LinkConfig {
            jitter: Jitter::Normal { std_dev: 5 * MS },
            reorder_rate: 0.2,
            duplicate_rate: 0.2,
            ..plain.clone()
        };
        let survivors = |config: LinkConfig| {
            let mut link = Link::new(config, 99).expect("valid");
            for i in 0..500u16 {
                link.send(u32::from(i) * 100 * MS, i.to_le_bytes().to_vec());
            }
            let mut ids: Vec<_> = drain(&mut link)
                .into_iter()
                .map(|(_, p)| u16::from_le_bytes([p[0], p[1]]))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        assert_eq!(survivors(plain), survivors(busy));
    }

    fn arb_config() -> impl Strategy<Value = LinkConfig> {
        (
            0u64..50,
            0u64..20,
            0.0..=1.0f64,
            0.0..=1.0f64,
            0.0..=1.0f64,
            proptest::option::of((1u32..2000, 1usize..5000)),
            proptest::bool::ANY,
        )
            .prop_map(
                |(delay, jitter, loss, duplicate, reorder, bandwidth, uniform)| LinkConfig {
                    delay: Duration::from_millis(delay),
                    jitter: if uniform {
                        Jitter::Uniform {
                            max: Duration::from_millis(jitter),
                        }
                    } else {
                        Jitter::Normal {
                            std_dev: Duration::from_millis(jitter),
                        }
                    },
                    loss: Loss::Uniform { rate: loss },
                    duplicate_rate: duplicate,
                    reorder_rate: reorder,
                    bandwidth: bandwidth.map(|(kbps, queue_bytes)| Bandwidth { kbps, queue_bytes }),
                    ..LinkConfig::default()
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn accounting_and_ordering_invariants(
            config in arb_config(),
            seed in any::<u64>(),
            sends in proptest::collection::vec((0u64..5, 0usize..300), 1..200),
        ) {
            let mut link = Link::new(config.clone(), seed).expect("valid");
            let mut now = Duration::ZERO;
            let mut sent_at = Vec::new();
            let mut delivered = Vec::new();
            for (i, (gap, size)) in sends.iter().enumerate() {
                now += Duration::from_millis(*gap);
                let mut packet = vec![0u8; (*size).max(4)];
                packet[..4].copy_from_slice(&(i as u32).to_le_bytes());
                sent_at.push(now);
                link.send(now, packet);
                while let Some(p) = link.poll(now) {
                    delivered.push((now, p));
                }
            }
            let mut last = Duration::ZERO;
            while let Some(at) = link.next_due() {
                prop_assert!(at >= last, "delivery times never decrease");
                last = at;
                let p = link.poll(at).expect("due");
                delivered.push((at, p));
            }
            let stats = link.stats().clone();
            prop_assert_eq!(stats.sent_packets, sends.len() as u64);
            prop_assert_eq!(stats.delivered_packets, delivered.len() as u64);
            prop_assert_eq!(
                stats.sent_packets + stats.duplicated_packets,
                stats.delivered_packets + stats.dropped_packets()
            );
            prop_assert_eq!(link.in_flight(), 0);
            for (at, p) in &delivered {
                let id = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
                prop_assert!(*at >= sent_at[id], "delivered before it was sent");
            }
            if config.reorder_rate == 0.0 {
                let ids: Vec<u32> = delivered
                    .iter()
                    .map(|(_, p)| u32::from_le_bytes([p[0], p[1], p[2], p[3]]))
                    .collect();
                prop_assert!(ids.windows(2).all(|w| w[0] <= w[1]), "FIFO without reordering");
            }
        }
    }
}
