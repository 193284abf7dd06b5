//! Statistical checks of the emulator against its configuration.
//!
//! Every test is seeded, so a failure is reproducible; the seed is in every
//! assertion message. Tolerances are several standard errors wide.

use std::time::Duration;

use lagless_netem::{
    Bandwidth, GilbertElliott, Jitter, Link, LinkConfig, LinkStats, Loss, Trace, derive_seed,
};

const MS: Duration = Duration::from_millis(1);

fn id_packet(id: u32, size: usize) -> Vec<u8> {
    let mut packet = vec![0; size.max(4)];
    packet[..4].copy_from_slice(&id.to_le_bytes());
    packet
}

fn id_of(packet: &[u8]) -> u32 {
    u32::from_le_bytes([packet[0], packet[1], packet[2], packet[3]])
}

/// Sends `count` packets of `size` bytes, one every `spacing`, then drains
/// the link. Returns (packet id, send time, delivery time) per delivery in
/// delivery order, and the final stats.
fn run(
    config: LinkConfig,
    seed: u64,
    count: u32,
    spacing: Duration,
    size: usize,
) -> (Vec<(u32, Duration, Duration)>, LinkStats) {
    let mut link = Link::new(config, seed).expect("valid config");
    let mut deliveries = Vec::new();
    let mut record = |link: &mut Link, now: Duration| {
        while let Some(packet) = link.poll(now) {
            let id = id_of(&packet);
            deliveries.push((id, spacing * id, now));
        }
    };
    for id in 0..count {
        let now = spacing * id;
        // Jump the virtual clock through every delivery before this send,
        // so each delivery is observed at its exact time.
        while let Some(due) = link.next_due().filter(|&due| due <= now) {
            record(&mut link, due);
        }
        link.send(now, id_packet(id, size));
    }
    while let Some(due) = link.next_due() {
        record(&mut link, due);
    }
    (deliveries, link.stats().clone())
}

/// Fate of each of `count` packets on a zero-delay link: `true` if lost.
fn loss_pattern(loss: Loss, seed: u64, count: u32) -> Vec<bool> {
    let config = LinkConfig {
        loss,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, seed).expect("valid config");
    (0..count)
        .map(|id| {
            link.send(Duration::ZERO, id_packet(id, 4));
            link.poll(Duration::ZERO).is_none()
        })
        .collect()
}

fn loss_rate(pattern: &[bool]) -> f64 {
    pattern.iter().filter(|&&lost| lost).count() as f64 / pattern.len() as f64
}

fn mean_burst_len(pattern: &[bool]) -> f64 {
    let mut bursts = 0usize;
    let mut losses = 0usize;
    let mut previous = false;
    for &lost in pattern {
        if lost {
            losses += 1;
            if !previous {
                bursts += 1;
            }
        }
        previous = lost;
    }
    losses as f64 / bursts as f64
}

fn mean_and_std_ms(samples: &[Duration]) -> (f64, f64) {
    let values: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, variance.sqrt())
}

fn everything_on() -> LinkConfig {
    LinkConfig {
        delay: 40 * MS,
        jitter: Jitter::Normal { std_dev: 10 * MS },
        loss: Loss::GilbertElliott(GilbertElliott::with_mean_loss(0.05, 3.0)),
        duplicate_rate: 0.02,
        reorder_rate: 0.02,
        bandwidth: Some(Bandwidth {
            kbps: 800,
            queue_bytes: 4000,
        }),
        ..LinkConfig::default()
    }
}

#[test]
fn same_seed_same_fates_different_seed_differs() {
    let seed = 0x5EED;
    let (first, first_stats) = run(everything_on(), seed, 10_000, MS, 120);
    let (second, second_stats) = run(everything_on(), seed, 10_000, MS, 120);
    assert_eq!(first, second, "seed {seed}");
    assert_eq!(first_stats, second_stats, "seed {seed}");
    assert!(first_stats.lost_packets > 0, "seed {seed}: loss exercised");
    assert!(
        first_stats.queue_dropped_packets > 0,
        "seed {seed}: queue exercised"
    );
    assert!(
        first_stats.duplicated_packets > 0,
        "seed {seed}: duplication exercised"
    );
    assert!(
        first_stats.reordered_packets > 0,
        "seed {seed}: reordering exercised"
    );

    let other = derive_seed(seed, 1);
    let (third, _) = run(everything_on(), other, 10_000, MS, 120);
    assert_ne!(first, third, "seeds {seed} and {other}");
}

#[test]
fn uniform_loss_rate() {
    let seed = 1;
    let pattern = loss_pattern(Loss::Uniform { rate: 0.25 }, seed, 100_000);
    let rate = loss_rate(&pattern);
    println!("uniform 25%: measured {rate:.4}");
    assert!((rate - 0.25).abs() < 0.01, "seed {seed}: loss rate {rate}");
}

#[test]
fn gilbert_elliott_mean_and_bursts() {
    let seed = 2;
    let ge = GilbertElliott::with_mean_loss(0.05, 4.0);
    let pattern = loss_pattern(Loss::GilbertElliott(ge), seed, 200_000);
    let rate = loss_rate(&pattern);
    let burst = mean_burst_len(&pattern);
    println!("gilbert-elliott 5%/4: loss {rate:.4}, mean burst {burst:.3}");
    assert!(
        (rate - 0.05).abs() < 0.0075,
        "seed {seed}: loss rate {rate}"
    );
    assert!((burst - 4.0).abs() < 0.6, "seed {seed}: mean burst {burst}");

    let uniform = loss_pattern(Loss::Uniform { rate: 0.05 }, seed, 200_000);
    let uniform_burst = mean_burst_len(&uniform);
    println!("uniform 5%: mean burst {uniform_burst:.3}");
    assert!(
        burst > 2.0 * uniform_burst,
        "seed {seed}: bursty {burst} vs uniform {uniform_burst}"
    );
}

#[test]
fn normal_jitter_mean_and_std_dev() {
    let seed = 3;
    let config = LinkConfig {
        delay: 100 * MS,
        jitter: Jitter::Normal { std_dev: 10 * MS },
        ..LinkConfig::default()
    };
    // One second apart: far more than the jitter, so FIFO never holds a
    // packet back and the raw distribution is visible.
    let (deliveries, _) = run(config, seed, 20_000, Duration::from_secs(1), 10);
    let delays: Vec<Duration> = deliveries.iter().map(|&(_, sent, at)| at - sent).collect();
    let (mean, std_dev) = mean_and_std_ms(&delays);
    println!("normal jitter 100±10 ms: mean {mean:.3} ms, std dev {std_dev:.3} ms");
    assert!((mean - 100.0).abs() < 0.5, "seed {seed}: mean {mean}");
    assert!(
        (std_dev - 10.0).abs() < 1.0,
        "seed {seed}: std dev {std_dev}"
    );
}

#[test]
fn uniform_jitter_stays_in_range_and_covers_it() {
    let seed = 4;
    let config = LinkConfig {
        delay: 50 * MS,
        jitter: Jitter::Uniform { max: 33 * MS },
        ..LinkConfig::default()
    };
    let (deliveries, _) = run(config, seed, 20_000, Duration::from_secs(1), 10);
    let delays: Vec<Duration> = deliveries.iter().map(|&(_, sent, at)| at - sent).collect();
    let min = delays.iter().min().copied().unwrap_or_default();
    let max = delays.iter().max().copied().unwrap_or_default();
    let (mean, _) = mean_and_std_ms(&delays);
    println!("uniform jitter 50±33 ms: min {min:?}, max {max:?}, mean {mean:.3} ms");
    assert!(
        min >= 17 * MS && max <= 83 * MS,
        "seed {seed}: {min:?}..{max:?}"
    );
    assert!(
        min < 17 * MS + MS / 2,
        "seed {seed}: low end reached, min {min:?}"
    );
    assert!(
        max > 83 * MS - MS / 2,
        "seed {seed}: high end reached, max {max:?}"
    );
    assert!((mean - 50.0).abs() < 0.5, "seed {seed}: mean {mean}");
    // Coverage: every 1 ms bucket of the 66 ms range is hit.
    let mut buckets = [0u32; 67];
    for delay in &delays {
        buckets[(*delay - 17 * MS).as_millis() as usize] += 1;
    }
    assert!(
        buckets[..66].iter().all(|&n| n > 0),
        "seed {seed}: {buckets:?}"
    );
}

#[test]
fn jitter_without_reordering_preserves_order() {
    let seed = 5;
    let config = LinkConfig {
        delay: 100 * MS,
        jitter: Jitter::Normal { std_dev: 30 * MS },
        ..LinkConfig::default()
    };
    let (deliveries, stats) = run(config, seed, 10_000, 5 * MS, 10);
    let ids: Vec<u32> = deliveries.iter().map(|&(id, _, _)| id).collect();
    assert_eq!(ids, (0..10_000).collect::<Vec<_>>(), "seed {seed}");
    assert_eq!(stats.reordered_packets, 0, "seed {seed}");
    // FIFO makes the mean delay exceed the base delay when jitter is large
    // relative to the spacing, which is what real queues do.
    let delays: Vec<Duration> = deliveries.iter().map(|&(_, sent, at)| at - sent).collect();
    let (mean, _) = mean_and_std_ms(&delays);
    println!("normal jitter 100±30 ms at 5 ms spacing with FIFO: mean delay {mean:.1} ms");
    assert!(mean > 100.0, "seed {seed}: mean {mean}");
}

#[test]
fn reordering_rate_and_overtaking() {
    let seed = 6;
    let config = LinkConfig {
        delay: 20 * MS,
        reorder_rate: 0.1,
        reorder_delay: 30 * MS,
        ..LinkConfig::default()
    };
    let count = 20_000;
    let (deliveries, stats) = run(config, seed, count, MS, 10);
    let rate = stats.reordered_packets as f64 / f64::from(count);
    // A packet is late if a packet sent after it was delivered before it.
    let mut highest = None;
    let mut late = 0u64;
    for &(id, _, _) in &deliveries {
        if highest.is_some_and(|h| id < h) {
            late += 1;
        }
        highest = highest.max(Some(id));
    }
    println!("reorder 10%: picked {rate:.4}, late arrivals {late}");
    assert!(
        (rate - 0.1).abs() < 0.01,
        "seed {seed}: reorder rate {rate}"
    );
    // With 1 ms spacing and a 30 ms hold-back, every held packet is
    // overtaken, and nothing else is out of order.
    assert_eq!(late, stats.reordered_packets, "seed {seed}");
    assert_eq!(deliveries.len() as u32, count, "seed {seed}");
}

#[test]
fn duplication_rate() {
    let seed = 7;
    let config = LinkConfig {
        duplicate_rate: 0.1,
        ..LinkConfig::default()
    };
    let count = 100_000;
    let (deliveries, stats) = run(config, seed, count, MS, 4);
    let rate = stats.duplicated_packets as f64 / f64::from(count);
    println!("duplicate 10%: measured {rate:.4}");
    assert!(
        (rate - 0.1).abs() < 0.01,
        "seed {seed}: duplicate rate {rate}"
    );
    assert_eq!(
        deliveries.len() as u64,
        u64::from(count) + stats.duplicated_packets,
        "seed {seed}"
    );
    assert_eq!(
        stats.delivered_packets,
        deliveries.len() as u64,
        "seed {seed}"
    );
}

#[test]
fn bandwidth_caps_throughput_and_bounds_queueing_delay() {
    let seed = 8;
    let delay = 10 * MS;
    let bandwidth = Bandwidth {
        kbps: 1000,
        queue_bytes: 12_500,
    };
    let config = LinkConfig {
        delay,
        bandwidth: Some(bandwidth),
        ..LinkConfig::default()
    };
    // 250 bytes every ms = 2000 kbit/s, twice the cap, for 4 s.
    let (deliveries, stats) = run(config, seed, 4000, MS, 250);
    let first = deliveries.first().map(|d| d.2).unwrap_or_default();
    let last = deliveries.last().map(|d| d.2).unwrap_or_default();
    // Each delivery marks the end of a packet's serialisation, so the
    // first packet's bytes went out before `first`.
    let bits = (deliveries.len() - 1) as f64 * 250.0 * 8.0;
    let kbps = bits / (last - first).as_secs_f64() / 1000.0;
    let queueing: Vec<Duration> = deliveries
        .iter()
        .map(|&(_, sent, at)| at - sent - delay)
        .collect();
    let max_queueing = queueing.iter().max().copied().unwrap_or_default();
    let expected = bandwidth.serialisation_time(bandwidth.queue_bytes);
    println!(
        "bandwidth 1000 kbps, 12500 B queue, offered 2000 kbps: delivered {kbps:.1} kbps, \
         queue drops {}, max queueing {max_queueing:?} (limit {expected:?})",
        stats.queue_dropped_packets
    );
    assert!(
        (kbps - 1000.0).abs() < 10.0,
        "seed {seed}: throughput {kbps}"
    );
    assert_eq!(
        stats.sent_packets,
        stats.delivered_packets + stats.queue_dropped_packets,
        "seed {seed}"
    );
    let drop_rate = stats.queue_dropped_packets as f64 / stats.sent_packets as f64;
    assert!(
        (drop_rate - 0.5).abs() < 0.05,
        "seed {seed}: drop rate {drop_rate}"
    );
    assert!(max_queueing <= expected, "seed {seed}: {max_queueing:?}");
    assert!(
        max_queueing >= expected * 95 / 100,
        "seed {seed}: {max_queueing:?}"
    );
    // Queueing delay grows from zero to the limit while the queue fills.
    assert!(queueing[0] <= 2 * MS, "seed {seed}: {:?}", queueing[0]);
}

#[test]
fn trace_deliveries_land_on_opportunities_and_loop() {
    let seed = 9;
    let opportunities = vec![3, 7, 7, 12, 20];
    let trace = Trace::from_opportunities(opportunities.clone()).expect("valid trace");
    let delay = 5 * MS;
    let config = LinkConfig {
        delay,
        trace: Some(trace),
        trace_queue_packets: 1000,
        ..LinkConfig::default()
    };
    // 2 full-size packets (1472 bytes and 32 of headers fill an
    // opportunity) per 3 ms against 5 opportunities per 20 ms: the queue
    // builds, so every opportunity is used once it does.
    let (deliveries, stats) = run(config.clone(), seed, 600, Duration::from_micros(1500), 1472);
    assert_eq!(stats.queue_dropped_packets, 0, "seed {seed}");
    let mut per_instant = std::collections::BTreeMap::new();
    for &(id, sent, at) in &deliveries {
        let leaves = at - delay;
        assert_eq!(
            leaves.subsec_nanos() % 1_000_000,
            0,
            "seed {seed}: {id} at {at:?}"
        );
        // Timestamp 20 is the end of each loop, i.e. phase 0 of the next.
        let phase = leaves.as_millis() as u64 % 20;
        let phase = if phase == 0 { 20 } else { phase };
        assert!(
            opportunities.contains(&phase),
            "seed {seed}: packet {id} left at {leaves:?}, not an opportunity"
        );
        assert!(
            leaves >= sent,
            "seed {seed}: packet {id} left before it was sent"
        );
        *per_instant.entry(leaves).or_insert(0u32) += 1;
    }
    // One packet per opportunity: the trace lists 7 ms twice.
    for (&instant, &n) in &per_instant {
        let phase = instant.as_millis() % 20;
        let allowed = if phase == 7 { 2 } else { 1 };
        assert!(n <= allowed, "seed {seed}: {n} packets at {instant:?}");
    }
    let last = deliveries.last().map(|d| d.2).unwrap_or_default();
    assert!(
        last > 20 * 40 * MS,
        "seed {seed}: trace looped many times, last {last:?}"
    );
    // Once saturated, exactly 5 packets per 20 ms period leave.
    let loop_10 = per_instant
        .range(200 * MS..220 * MS)
        .map(|(_, n)| *n)
        .sum::<u32>();
    assert_eq!(loop_10, 5, "seed {seed}");

    // Small packets (100 bytes and 32 of headers) share opportunities:
    // 1.76 kB offered per 20 ms against 7.5 kB of capacity, so the queue
    // never builds and each packet leaves with the next opportunity.
    let (deliveries, stats) = run(config, seed, 600, Duration::from_micros(1500), 100);
    assert_eq!(stats.queue_dropped_packets, 0, "seed {seed}");
    assert_eq!(deliveries.len(), 600, "seed {seed}");
    let mut shared = 0;
    let mut previous = None;
    for &(id, sent, at) in &deliveries {
        let leaves = at - delay;
        let phase = leaves.as_millis() as u64 % 20;
        let phase = if phase == 0 { 20 } else { phase };
        assert!(opportunities.contains(&phase), "seed {seed}: packet {id}");
        // The next opportunity after the sending millisecond: at most 8 ms
        // (the gap from 12 to 20) later.
        assert!(
            leaves > sent && leaves - sent <= 9 * MS,
            "seed {seed}: {id}"
        );
        shared += usize::from(previous == Some(leaves));
        previous = Some(leaves);
    }
    assert!(
        shared > 200,
        "seed {seed}: {shared} packets shared an opportunity"
    );
}

#[test]
fn trace_queue_overflow_drops() {
    let seed = 10;
    let trace = Trace::from_opportunities(vec![3, 7, 7, 12, 20]).expect("valid trace");
    let config = LinkConfig {
        delay: 5 * MS,
        trace: Some(trace),
        trace_queue_packets: 10,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, seed).expect("valid config");
    // Full-size packets: one opportunity each.
    for id in 0..50 {
        link.send(Duration::ZERO, id_packet(id, 1472));
    }
    let mut times = Vec::new();
    while let Some(at) = link.next_due() {
        let packet = link.poll(at).expect("due");
        times.push((id_of(&packet), at.as_millis()));
    }
    let expected: Vec<(u32, u128)> = [3, 7, 7, 12, 20, 23, 27, 27, 32, 40]
        .iter()
        .enumerate()
        .map(|(id, ms)| (id as u32, ms + 5))
        .collect();
    assert_eq!(times, expected, "seed {seed}");
    assert_eq!(link.stats().queue_dropped_packets, 40, "seed {seed}");
}
