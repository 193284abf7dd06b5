//! Mahimahi delivery traces: links whose capacity varies over time.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

/// Bytes one delivery opportunity can carry (Mahimahi's MTU).
pub const TRACE_MTU: usize = 1500;

/// A Mahimahi delivery trace: the millisecond timestamps at which the link
/// can deliver one packet of up to [`TRACE_MTU`] bytes.
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

/// Smallest whole millisecond at or after `time`.
fn ceil_ms(time: Duration) -> u64 {
    let whole = time.as_millis() + u128::from(time.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(whole).unwrap_or(u64::MAX)
}

/// Packets waiting for trace delivery opportunities on one link.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceQueue {
    /// Global index of the first opportunity no packet has claimed.
    next_free: u64,
    /// Delivery times of packets still waiting, non-decreasing. Bounded by
    /// the queue limit.
    waiting: VecDeque<Duration>,
}

impl TraceQueue {
    /// Offers a packet arriving at `arrival` (non-decreasing between
    /// calls). Returns the opportunity at which it leaves, or `None` if
    /// `limit` packets are already waiting and it is dropped.
    ///
    /// A packet larger than [`TRACE_MTU`] claims `ceil(bytes / MTU)`
    /// consecutive opportunities, as if IP-fragmented, and leaves with the
    /// last one.
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
        let needed = bytes.div_ceil(TRACE_MTU).max(1) as u64;
        let first = trace
            .first_at_or_after(ceil_ms(arrival))
            .max(self.next_free);
        let last = first.saturating_add(needed - 1);
        self.next_free = last.saturating_add(1);
        let at = Duration::from_millis(trace.time_of(last));
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
    fn ceil_ms_rounds_up_partial_milliseconds() {
        assert_eq!(ceil_ms(Duration::ZERO), 0);
        assert_eq!(ceil_ms(ms(3)), 3);
        assert_eq!(ceil_ms(ms(3) + Duration::from_nanos(1)), 4);
        assert_eq!(ceil_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn queue_claims_one_opportunity_per_packet() {
        let trace = Trace::from_opportunities(vec![2, 2, 5]).expect("valid");
        let mut queue = TraceQueue::default();
        let at: Vec<_> = (0..5)
            .map(|_| queue.schedule(&trace, 100, Duration::ZERO, 100))
            .collect();
        assert_eq!(
            at,
            vec![
                Some(ms(2)),
                Some(ms(2)),
                Some(ms(5)),
                Some(ms(7)),
                Some(ms(7))
            ]
        );
        // Idle gap: the next packet skips opportunities that went unused.
        assert_eq!(
            queue.schedule(&trace, 100, ms(50) + Duration::from_micros(1), 100),
            Some(ms(52))
        );
    }

    #[test]
    fn queue_limit_drops_and_frees_up() {
        let trace = Trace::from_opportunities(vec![10]).expect("valid");
        let mut queue = TraceQueue::default();
        assert_eq!(queue.schedule(&trace, 2, Duration::ZERO, 1), Some(ms(10)));
        assert_eq!(queue.schedule(&trace, 2, Duration::ZERO, 1), Some(ms(20)));
        assert_eq!(queue.schedule(&trace, 2, Duration::ZERO, 1), None);
        // Once the first packet has left there is room again.
        assert_eq!(queue.schedule(&trace, 2, ms(10), 1), Some(ms(30)));
        assert_eq!(queue.waiting.len(), 2);
    }

    #[test]
    fn large_packets_take_several_opportunities() {
        let trace = Trace::from_opportunities(vec![1]).expect("valid");
        let mut queue = TraceQueue::default();
        assert_eq!(
            queue.schedule(&trace, 10, Duration::ZERO, 1500),
            Some(ms(1))
        );
        assert_eq!(
            queue.schedule(&trace, 10, Duration::ZERO, 1501),
            Some(ms(3))
        );
        assert_eq!(queue.schedule(&trace, 10, Duration::ZERO, 0), Some(ms(4)));
    }
}
