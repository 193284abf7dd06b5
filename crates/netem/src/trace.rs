//! Mahimahi delivery traces: links whose capacity varies over time.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

/// The IP packet size a delivery opportunity stands for (Mahimahi's traces
/// are recorded in 1500-byte packets); [`Trace::mean_kbps`] counts it.
pub const TRACE_MTU: usize = 1500;

/// Bytes one delivery opportunity carries: Mahimahi's `PACKET_SIZE`, the
/// largest frame it reads from its TUN device (a [`TRACE_MTU`]-byte IP
/// packet and the device's 4-byte packet-information header).
pub const TRACE_OPPORTUNITY_BYTES: usize = 1504;

/// Bytes a packet takes on a trace link beyond the payload the emulator
/// carries: the 20-byte IPv4 and 8-byte UDP headers and the TUN device's
/// 4-byte header, as Mahimahi counts a UDP datagram. A datagram with 1472
/// bytes of payload (a full 1500-byte IP packet) fills one opportunity.
pub const TRACE_PACKET_OVERHEAD: usize = 32;

/// A Mahimahi delivery trace: the millisecond timestamps at which the link
/// can deliver [`TRACE_OPPORTUNITY_BYTES`] bytes, shared by the packets
/// waiting in its queue (see [`crate::LinkConfig::trace`]).
///
/// Timestamps are relative to time zero of the caller's clock. The trace
/// loops: after the last timestamp `P` (the period) the same pattern
/// repeats shifted by `P`, `2P`, …, so a first timestamp of 0 and a last of
/// `P` are two opportunities at the same instant.
#[derive(Clone, PartialEq, Eq)]
pub struct Trace {
    /// Non-decreasing, non-empty, last element > 0.
    opportunities: Vec<u64>,
}

impl fmt::Debug for Trace {
    // Real traces have tens of thousands of lines; printing them all would
    // drown any `LinkConfig` debug output.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace")
            .field("opportunities", &self.opportunities.len())
            .field("period_ms", &self.period_ms())
            .finish()
    }
}

/// Why a trace could not be loaded.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The trace file could not be read.
    #[error("cannot read trace file {}: {source}", path.display())]
    Io {
        /// The file that was being read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a non-negative integer.
    #[error("line {line}: `{text}` is not a millisecond timestamp (non-negative integer)")]
    NotANumber {
        /// 1-based line number (entry index for `from_opportunities`).
        line: usize,
        /// The offending line, trimmed.
        text: String,
    },
    /// A timestamp is smaller than the one before it.
    #[error("line {line}: timestamp {value} is smaller than the previous timestamp {previous}")]
    Decreasing {
        /// 1-based line number (entry index for `from_opportunities`).
        line: usize,
        /// The offending timestamp.
        value: u64,
        /// The timestamp before it.
        previous: u64,
    },
    /// The trace contains no timestamps at all.
    #[error("trace contains no delivery opportunities")]
    Empty,
    /// The last timestamp is 0, so the trace has no period to loop over.
    #[error("line {line}: the last timestamp is 0, so the trace cannot loop (period must be > 0)")]
    ZeroPeriod {
        /// 1-based line number of the last timestamp (entry index for
        /// `from_opportunities`).
        line: usize,
    },
}

impl Trace {
    /// Parses Mahimahi's format: one integer millisecond timestamp per line,
    /// non-decreasing, blank lines ignored, at least one timestamp, last
    /// timestamp > 0. Surrounding whitespace (including `\r`) is ignored.
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut opportunities = Vec::new();
        let mut last_line = 0;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() {
                continue;
            }
            let value = trimmed.parse::<u64>().map_err(|_| TraceError::NotANumber {
                line,
                text: trimmed.to_owned(),
            })?;
            push_checked(&mut opportunities, value, line)?;
            last_line = line;
        }
        finish(opportunities, last_line)
    }

    /// Reads and [parses](Self::parse) a trace file.
    pub fn from_file(path: &Path) -> Result<Trace, TraceError> {
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Builds a trace from millisecond timestamps, with the same rules as
    /// [`parse`](Self::parse); error "line" numbers are 1-based indices.
    pub fn from_opportunities(ms: Vec<u64>) -> Result<Trace, TraceError> {
        for (index, pair) in ms.windows(2).enumerate() {
            if pair[1] < pair[0] {
                return Err(TraceError::Decreasing {
                    line: index + 2,
                    value: pair[1],
                    previous: pair[0],
                });
            }
        }
        let len = ms.len();
        finish(ms, len)
    }

    /// The delivery opportunities of one period, in milliseconds.
    pub fn opportunities(&self) -> &[u64] {
        &self.opportunities
    }

    /// Length of one loop of the trace in milliseconds (its last timestamp).
    pub fn period_ms(&self) -> u64 {
        // Construction guarantees at least one element.
        self.opportunities.last().copied().unwrap_or(1)
    }

    /// Long-run capacity in kilobits per second, assuming every opportunity
    /// carries a full [`TRACE_MTU`]-byte packet.
    pub fn mean_kbps(&self) -> f64 {
        // bits per millisecond is kilobits per second.
        (self.opportunities.len() * TRACE_MTU * 8) as f64 / self.period_ms() as f64
    }

    /// The stretches of at least `min` without a delivery opportunity that begin before
    /// `until`, counted across loops, as (start, end): the opportunity before the gap
    /// (or time zero, for a trace that starts late) and the first one after it. A
    /// cellular trace's outages: nothing crosses the link between the two.
    pub fn outages(&self, min: Duration, until: Duration) -> Vec<(Duration, Duration)> {
        let min = u64::try_from(min.as_millis()).unwrap_or(u64::MAX).max(1);
        let until = u64::try_from(until.as_millis()).unwrap_or(u64::MAX);
        let mut gaps = Vec::new();
        let mut previous = 0;
        let mut index = 0;
        loop {
            let time = self.time_of(index);
            if time.saturating_sub(previous) >= min && previous < until {
                gaps.push((Duration::from_millis(previous), Duration::from_millis(time)));
            }
            if time >= until || time == u64::MAX {
                return gaps;
            }
            previous = time;
            index += 1;
        }
    }

    /// The first time at or after `from` from which the trace holds no gap longer than
    /// `max_gap` for `span`: where a link that went out is back in earnest, not just
    /// delivering a packet between further holes. `None` if that comes only after
    /// `until`.
    pub fn steady_from(
        &self,
        from: Duration,
        (max_gap, span): (Duration, Duration),
        until: Duration,
    ) -> Option<Duration> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let (from, max_gap, span, until) = (ms(from), ms(max_gap), ms(span), ms(until));
        let mut start = from;
        let mut previous = from;
        let mut index = self.first_at_or_after(from);
        loop {
            let time = self.time_of(index);
            if time.saturating_sub(previous) > max_gap {
                // The steady stretch can start no earlier than this opportunity.
                start = time;
            } else if time.saturating_sub(start) >= span {
                break;
            }
            if start > until || time == u64::MAX {
                return None;
            }
            previous = time;
            index += 1;
        }
        (start <= until).then(|| Duration::from_millis(start))
    }

    /// Time in ms of the opportunity with global index `index`, counting
    /// across loops.
    fn time_of(&self, index: u64) -> u64 {
        let len = self.opportunities.len() as u64;
        let cycle = index / len;
        let within = self.opportunities[(index % len) as usize];
        cycle
            .saturating_mul(self.period_ms())
            .saturating_add(within)
    }

    /// Global index of the first opportunity at or after `ms`.
    fn first_at_or_after(&self, ms: u64) -> u64 {
        let period = self.period_ms();
        let len = self.opportunities.len() as u64;
        // The previous loop can end exactly at `ms` (its last opportunity is
        // at a multiple of the period), so start searching one loop early.
        let mut cycle = (ms / period).saturating_sub(1);
        loop {
            let base = cycle.saturating_mul(period);
            if base.saturating_add(period) >= ms {
                let within = self
                    .opportunities
                    .partition_point(|&t| base.saturating_add(t) < ms);
                return cycle.saturating_mul(len).saturating_add(within as u64);
            }
            cycle += 1;
        }
    }
}

fn push_checked(opportunities: &mut Vec<u64>, value: u64, line: usize) -> Result<(), TraceError> {
    if let Some(&previous) = opportunities.last() {
        if value < previous {
            return Err(TraceError::Decreasing {
                line,
                value,
                previous,
            });
        }
    }
    opportunities.push(value);
    Ok(())
}

fn finish(opportunities: Vec<u64>, last_line: usize) -> Result<Trace, TraceError> {
    match opportunities.last() {
        None => Err(TraceError::Empty),
        Some(0) => Err(TraceError::ZeroPeriod { line: last_line }),
        Some(_) => Ok(Trace { opportunities }),
    }
}

/// The whole millisecond `time` falls in, as Mahimahi's millisecond clock
/// reads it.
fn floor_ms(time: Duration) -> u64 {
    u64::try_from(time.as_millis()).unwrap_or(u64::MAX)
}

/// Packets waiting for trace delivery opportunities on one link, served as
/// Mahimahi's `LinkQueue` serves them.
///
/// Each opportunity carries [`TRACE_OPPORTUNITY_BYTES`] bytes, handed to the
/// queued packets in order: several small packets share one opportunity, and
/// a packet larger than what is left of it carries its remaining bytes into
/// the next opportunities, leaving with the one that carries its last byte.
/// Opportunities that find the queue empty go unused. A packet arriving
/// during millisecond `m` can use opportunities stamped after `m` only
/// (Mahimahi spends the opportunities up to its clock's current millisecond
/// before it queues a packet).
///
/// The queue is FIFO and arrivals are non-decreasing, so each packet's
/// departure is known when it arrives: the queue keeps only where the last
/// packet ended (an opportunity and the bytes of it already used).
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceQueue {
    /// Global index of the opportunity the last queued packet ended in (or
    /// the first one after it, when it filled that one exactly).
    cursor: u64,
    /// Bytes of opportunity `cursor` already used, below
    /// [`TRACE_OPPORTUNITY_BYTES`].
    used: usize,
    /// Delivery times of packets still waiting, non-decreasing. Bounded by
    /// the queue limit.
    waiting: VecDeque<Duration>,
}

impl TraceQueue {
    /// Offers a packet of `bytes` payload bytes (plus
    /// [`TRACE_PACKET_OVERHEAD`]) arriving at `arrival` (non-decreasing
    /// between calls). Returns the opportunity at which it leaves, or `None`
    /// if `limit` packets are already waiting and it is dropped (a dropped
    /// packet uses no capacity).
    pub(crate) fn schedule(
        &mut self,
        trace: &Trace,
        limit: usize,
        arrival: Duration,
        bytes: usize,
    ) -> Option<Duration> {
        while self.waiting.front().is_some_and(|&at| at <= arrival) {
            self.waiting.pop_front();
        }
        if self.waiting.len() >= limit {
            return None;
        }
        let first = trace.first_at_or_after(floor_ms(arrival).saturating_add(1));
        if first > self.cursor {
            // The queue emptied before this packet came: the opportunities
            // in between went unused.
            self.cursor = first;
            self.used = 0;
        }
        let need = bytes.saturating_add(TRACE_PACKET_OVERHEAD);
        let room = TRACE_OPPORTUNITY_BYTES - self.used;
        if need <= room {
            self.used += need;
        } else {
            // What does not fit here fills whole opportunities, the last
            // one partly.
            let rest = need - room;
            let more = rest.div_ceil(TRACE_OPPORTUNITY_BYTES);
            self.cursor = self.cursor.saturating_add(more as u64);
            self.used = rest - (more - 1) * TRACE_OPPORTUNITY_BYTES;
        }
        let at = Duration::from_millis(trace.time_of(self.cursor));
        if self.used == TRACE_OPPORTUNITY_BYTES {
            self.cursor = self.cursor.saturating_add(1);
            self.used = 0;
        }
        self.waiting.push_back(at);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn parses_mahimahi_text() {
        let trace = Trace::parse("0\n5\n\n5\r\n  12 \n20\n").expect("valid");
        assert_eq!(trace.opportunities(), &[0, 5, 5, 12, 20]);
        assert_eq!(trace.period_ms(), 20);
        assert_eq!(
            format!("{trace:?}"),
            "Trace { opportunities: 5, period_ms: 20 }"
        );
    }

    #[test]
    fn parse_errors_carry_line_numbers() {
        assert!(matches!(
            Trace::parse("1\n\nabc\n"),
            Err(TraceError::NotANumber { line: 3, ref text }) if text == "abc"
        ));
        assert!(matches!(
            Trace::parse("1\n-4\n"),
            Err(TraceError::NotANumber { line: 2, .. })
        ));
        assert!(matches!(
            Trace::parse("1.5\n"),
            Err(TraceError::NotANumber { line: 1, .. })
        ));
        assert!(matches!(
            Trace::parse("5\n7\n\n6\n"),
            Err(TraceError::Decreasing {
                line: 4,
                value: 6,
                previous: 7
            })
        ));
        assert!(matches!(Trace::parse(""), Err(TraceError::Empty)));
        assert!(matches!(Trace::parse("\n  \n"), Err(TraceError::Empty)));
        assert!(matches!(
            Trace::parse("0\n0\n\n"),
            Err(TraceError::ZeroPeriod { line: 2 })
        ));
        let message = Trace::parse("1\nx").err().map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("line 2: `x` is not a millisecond timestamp (non-negative integer)")
        );
    }

    #[test]
    fn from_opportunities_applies_the_same_rules() {
        assert!(Trace::from_opportunities(vec![1, 2, 2, 3]).is_ok());
        assert!(matches!(
            Trace::from_opportunities(vec![1, 3, 2]),
            Err(TraceError::Decreasing {
                line: 3,
                value: 2,
                previous: 3
            })
        ));
        assert!(matches!(
            Trace::from_opportunities(vec![]),
            Err(TraceError::Empty)
        ));
        assert!(matches!(
            Trace::from_opportunities(vec![0]),
            Err(TraceError::ZeroPeriod { line: 1 })
        ));
    }

    #[test]
    fn from_file_reads_and_reports_missing_files() {
        let path = std::env::temp_dir().join(format!("lagless-netem-trace-{}", std::process::id()));
        std::fs::write(&path, "3\n6\n").expect("write temp trace");
        let trace = Trace::from_file(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(trace.expect("valid").opportunities(), &[3, 6]);
        let missing = Path::new("/nonexistent/lagless/trace.txt");
        assert!(matches!(
            Trace::from_file(missing),
            Err(TraceError::Io { ref path, .. }) if path == missing
        ));
    }

    #[test]
    fn mean_kbps_counts_full_mtu_per_opportunity() {
        // One full packet per ms: 12 000 bits per ms, i.e. 12 000 kbit/s.
        let trace = Trace::from_opportunities((1..=12).collect()).expect("valid");
        assert_eq!(trace.mean_kbps(), 12_000.0);
    }

    #[test]
    fn opportunity_indexing_loops() {
        let trace = Trace::from_opportunities(vec![0, 4, 10]).expect("valid");
        let times: Vec<u64> = (0..7).map(|i| trace.time_of(i)).collect();
        assert_eq!(times, vec![0, 4, 10, 10, 14, 20, 20]);
        assert_eq!(trace.first_at_or_after(0), 0);
        assert_eq!(trace.first_at_or_after(1), 1);
        assert_eq!(trace.first_at_or_after(5), 2);
        // Loop boundary: the end of loop 0 and start of loop 1 coincide.
        assert_eq!(trace.first_at_or_after(10), 2);
        assert_eq!(trace.first_at_or_after(11), 4);
        assert_eq!(trace.first_at_or_after(20), 5);
        assert_eq!(trace.first_at_or_after(1_000_001), 300_001);
        assert_eq!(trace.time_of(300_001), 1_000_004);
    }

    #[test]
    fn outages_are_the_long_gaps_across_loops() {
        let trace = Trace::from_opportunities(vec![1500, 1600, 4000, 4100]).expect("valid");
        let secs = |a: u64, b: u64| (ms(a), ms(b));
        assert_eq!(
            trace.outages(Duration::from_secs(1), Duration::from_secs(10)),
            vec![
                secs(0, 1500),
                secs(1600, 4000),
                secs(4100, 5600),
                secs(5700, 8100),
                secs(8200, 9700),
                secs(9800, 12200),
            ]
        );
        // A gap is kept if it begins before `until`, however long it lasts.
        assert_eq!(
            trace.outages(Duration::from_secs(2), Duration::from_millis(1601)),
            vec![secs(1600, 4000)]
        );
        assert!(
            trace
                .outages(Duration::from_secs(3), Duration::from_secs(60))
                .is_empty()
        );
    }

    #[test]
    fn a_link_is_steady_once_a_span_passes_without_a_long_gap() {
        // Out until 2 s, one packet at 2.0 s, out again until 3.0 s, then every 100 ms.
        let mut ms_list = vec![100, 200, 2000];
        ms_list.extend((0..40).map(|i| 3000 + i * 100));
        let trace = Trace::from_opportunities(ms_list).expect("valid");
        let steady = |from, gap| trace.steady_from(ms(from), (ms(gap), ms(1000)), ms(60_000));
        assert_eq!(steady(200, 300), Some(ms(3000)));
        // From within the steady stretch: steady at once.
        assert_eq!(steady(3050, 300), Some(ms(3050)));
        // A gap allowance as long as the second hole makes the lone packet count.
        assert_eq!(steady(200, 1000), Some(ms(2000)));
        // Not before `until`.
        assert_eq!(
            trace.steady_from(ms(200), (ms(300), ms(1000)), ms(2500)),
            None
        );
    }

    #[test]
    fn floor_ms_reads_whole_milliseconds() {
        assert_eq!(floor_ms(Duration::ZERO), 0);
        assert_eq!(floor_ms(ms(3)), 3);
        assert_eq!(floor_ms(ms(4) - Duration::from_nanos(1)), 3);
        assert_eq!(floor_ms(Duration::MAX), u64::MAX);
    }

    /// Payload bytes that, with the headers, fill one opportunity exactly.
    const FULL: usize = TRACE_OPPORTUNITY_BYTES - TRACE_PACKET_OVERHEAD;

    #[test]
    fn small_packets_share_an_opportunity() {
        let trace = Trace::from_opportunities(vec![2, 5, 9]).expect("valid");
        let mut queue = TraceQueue::default();
        // 100-byte payloads take 132 bytes: eleven fit in 1504, the twelfth
        // is split across the first two opportunities and leaves with the
        // second, and the thirteenth fits in what is left of that one.
        let at: Vec<_> = (0..13)
            .map(|_| queue.schedule(&trace, 100, Duration::ZERO, 100))
            .collect();
        let mut expected = vec![Some(ms(2)); 11];
        expected.extend([Some(ms(5)), Some(ms(5))]);
        assert_eq!(at, expected);
        // Idle gap: the next packet skips opportunities that went unused.
        // Arriving during millisecond 50, it cannot use the opportunity at
        // 50 (Mahimahi spends it before it queues the packet).
        assert_eq!(queue.schedule(&trace, 100, ms(50), 100), Some(ms(54)));
        assert_eq!(
            queue.schedule(&trace, 100, ms(51) - Duration::from_nanos(1), 100),
            Some(ms(54))
        );
    }

    #[test]
    fn a_partial_packet_carries_into_the_next_opportunity() {
        let trace = Trace::from_opportunities(vec![1]).expect("valid");
        let mut queue = TraceQueue::default();
        // 1032 bytes each: the second uses the 472 left of the first
        // opportunity and 560 of the next; the third needs 1032 of the 944
        // left and ends in the third opportunity.
        let at: Vec<_> = (0..3)
            .map(|_| queue.schedule(&trace, 10, Duration::ZERO, 1000))
            .collect();
        assert_eq!(at, vec![Some(ms(1)), Some(ms(2)), Some(ms(3))]);
        // Exactly full opportunities, and one byte more spilling over.
        let mut queue = TraceQueue::default();
        assert_eq!(
            queue.schedule(&trace, 10, Duration::ZERO, FULL),
            Some(ms(1))
        );
        assert_eq!(
            queue.schedule(&trace, 10, Duration::ZERO, FULL),
            Some(ms(2))
        );
        assert_eq!(
            queue.schedule(&trace, 10, Duration::ZERO, 2 * FULL + 1),
            Some(ms(4))
        );
        // 32 bytes of headers: 31 left in the fourth opportunity, so it ends
        // in the fifth.
        assert_eq!(queue.schedule(&trace, 10, Duration::ZERO, 0), Some(ms(5)));
    }

    #[test]
    fn queue_limit_drops_and_frees_up() {
        let trace = Trace::from_opportunities(vec![10]).expect("valid");
        let mut queue = TraceQueue::default();
        assert_eq!(
            queue.schedule(&trace, 2, Duration::ZERO, FULL),
            Some(ms(10))
        );
        assert_eq!(
            queue.schedule(&trace, 2, Duration::ZERO, FULL),
            Some(ms(20))
        );
        // Dropped: it uses no capacity.
        assert_eq!(queue.schedule(&trace, 2, Duration::ZERO, FULL), None);
        // Once the first packet has left there is room again.
        assert_eq!(queue.schedule(&trace, 2, ms(10), FULL), Some(ms(30)));
        assert_eq!(queue.waiting.len(), 2);
    }

    /// The rule this crate had before: every packet claims whole
    /// opportunities of its own (`ceil(bytes / 1500)`, at least one), from
    /// the first at or after its arrival rounded up to a millisecond.
    fn one_packet_per_opportunity(
        trace: &Trace,
        limit: usize,
        packets: &[(Duration, usize)],
    ) -> Vec<Option<Duration>> {
        let mut next_free = 0;
        let mut waiting: VecDeque<Duration> = VecDeque::new();
        packets
            .iter()
            .map(|&(arrival, bytes)| {
                while waiting.front().is_some_and(|&at| at <= arrival) {
                    waiting.pop_front();
                }
                if waiting.len() >= limit {
                    return None;
                }
                let ceil = floor_ms(arrival) + u64::from(arrival.subsec_nanos() % 1_000_000 != 0);
                let first = trace.first_at_or_after(ceil).max(next_free);
                let last = first + bytes.div_ceil(TRACE_MTU).max(1) as u64 - 1;
                next_free = last + 1;
                let at = ms(trace.time_of(last));
                waiting.push_back(at);
                Some(at)
            })
            .collect()
    }

    fn mahimahi_rule(
        trace: &Trace,
        limit: usize,
        packets: &[(Duration, usize)],
    ) -> Vec<Option<Duration>> {
        let mut queue = TraceQueue::default();
        packets
            .iter()
            .map(|&(arrival, bytes)| queue.schedule(trace, limit, arrival, bytes))
            .collect()
    }

    #[test]
    fn game_traffic_on_a_slow_trace_under_both_rules() {
        // A slow link in Mahimahi's format: an opportunity every 12 ms
        // (1 Mbit/s of 1500-byte packets) for one second, looping.
        let text: String = (1..=83).map(|i| format!("{}\n", i * 12)).collect();
        let trace = Trace::parse(&text).expect("valid");
        // Game traffic at 64 packets/s, alternately a 280-byte snapshot and
        // a 40-byte input message every 7.8 ms: 128 packets/s, about
        // 180 kbit/s with headers, a fifth of the link.
        let packets: Vec<(Duration, usize)> = (0..256u32)
            .map(|i| {
                let at = Duration::from_micros(u64::from(i) * 7_812);
                (at, if i % 2 == 0 { 280 } else { 40 })
            })
            .collect();
        let delay_ms = |rule: &[Option<Duration>]| -> Vec<Option<u64>> {
            rule.iter()
                .zip(&packets)
                .map(|(at, &(sent, _))| at.map(|at| (at - sent).as_millis() as u64))
                .collect()
        };
        let limit = 50;
        let mahimahi = delay_ms(&mahimahi_rule(&trace, limit, &packets));
        let old = delay_ms(&one_packet_per_opportunity(&trace, limit, &packets));
        // Mahimahi: every packet leaves with the next opportunity or the one
        // after; nothing queues up, nothing is dropped.
        assert!(
            mahimahi.iter().all(|d| d.is_some_and(|d| d <= 24)),
            "{mahimahi:?}"
        );
        // One packet per opportunity: 128 packets/s offered to 83 slots/s,
        // so the queue grows to its limit and drops.
        let dropped = old.iter().filter(|d| d.is_none()).count();
        let worst = old.iter().flatten().max().copied().unwrap_or(0);
        assert!(dropped > 0, "{old:?}");
        assert!(worst > 500, "{old:?}");
        // On a lone packet on an idle link the two agree.
        let lone = [(ms(100), 280)];
        assert_eq!(
            mahimahi_rule(&trace, 100, &lone),
            one_packet_per_opportunity(&trace, 100, &lone)
        );
    }

    /// Mahimahi's `LinkQueue`, written as a loop over opportunities: a packet
    /// that arrived during millisecond `m` is queued before every
    /// opportunity stamped after `m`, and each opportunity hands its bytes to
    /// the queue's head in order. Returns each packet's departure (no limit).
    fn reference_link_queue(trace: &Trace, packets: &[(Duration, usize)]) -> Vec<Duration> {
        let mut departures = vec![None; packets.len()];
        let mut queue: VecDeque<(usize, usize)> = VecDeque::new();
        let mut next = 0;
        let mut index = 0;
        while departures.iter().any(Option::is_none) {
            let time = trace.time_of(index);
            index += 1;
            while next < packets.len() && floor_ms(packets[next].0) < time {
                queue.push_back((next, packets[next].1 + TRACE_PACKET_OVERHEAD));
                next += 1;
            }
            let mut left = TRACE_OPPORTUNITY_BYTES;
            while left > 0 {
                let Some(head) = queue.front_mut() else { break };
                let sent = left.min(head.1);
                head.1 -= sent;
                left -= sent;
                if head.1 == 0 {
                    departures[head.0] = Some(ms(time));
                    queue.pop_front();
                }
            }
        }
        departures.into_iter().flatten().collect()
    }

    #[test]
    fn matches_a_literal_model_of_mahimahi() {
        // A small deterministic generator (no dependency needed).
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |bound: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        for _ in 0..20 {
            // Bursty opportunities: repeats within a millisecond, and gaps.
            let mut time = 0;
            let mut ops = Vec::new();
            for _ in 0..(1 + next(40)) {
                time += match next(4) {
                    0 => 0,
                    1 => next(3),
                    2 => next(20),
                    _ => next(300),
                };
                ops.push(time);
            }
            if time == 0 {
                ops.push(1);
            }
            let trace = Trace::from_opportunities(ops).expect("valid");
            let mut at = Duration::ZERO;
            let packets: Vec<(Duration, usize)> = (0..200)
                .map(|_| {
                    at += Duration::from_micros(next(8_000));
                    let bytes = match next(3) {
                        0 => next(100),
                        1 => next(1_500),
                        _ => next(5_000),
                    };
                    (at, bytes as usize)
                })
                .collect();
            let ours: Vec<Duration> = mahimahi_rule(&trace, usize::MAX, &packets)
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(ours, reference_link_queue(&trace, &packets), "{trace:?}");
        }
    }
}
