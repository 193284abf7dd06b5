//! Collected figures and their presentation (JSON by the dotted names of docs/metrics.md,
//! and a table).

use serde_json::{Map, Value};

/// Percentile of a sample set by the nearest-rank method; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// Non-negative samples in bins, for percentiles over more samples than are worth
/// keeping (every cube, every frame, every client): exact to 0.001 below 1, and within
/// 0.5% above. Negative, NaN and infinite samples are not counted.
#[derive(Debug, Clone)]
pub struct Histogram {
    bins: Vec<u64>,
    count: u64,
    max: f64,
}

/// A running mean in constant memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mean {
    sum: f64,
    count: u64,
}

impl Mean {
    /// Counts `x` (non-finite samples are not counted).
    pub fn add(&mut self, x: f64) {
        if x.is_finite() {
            self.sum += x;
            self.count += 1;
        }
    }

    /// The mean, `None` before any sample.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// Bins of width 0.001 below 1; log bins of ratio 1.005 from 1 up.
const LINEAR_BINS: usize = 1000;
const LOG_RATIO: f64 = 1.005;

impl Default for Histogram {
    fn default() -> Self {
        Self {
            bins: vec![0; LINEAR_BINS],
            count: 0,
            max: 0.0,
        }
    }
}

impl Histogram {
    /// Counts `x`.
    pub fn record(&mut self, x: f64) {
        if !(x.is_finite() && x >= 0.0) {
            return;
        }
        let i = if x < 1.0 {
            (x * LINEAR_BINS as f64) as usize
        } else {
            LINEAR_BINS + (x.ln() / LOG_RATIO.ln()) as usize
        };
        if self.bins.len() <= i {
            self.bins.resize(i + 1, 0);
        }
        self.bins[i] += 1;
        self.count += 1;
        self.max = self.max.max(x);
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds `other`'s samples.
    pub fn merge(&mut self, other: &Histogram) {
        if self.bins.len() < other.bins.len() {
            self.bins.resize(other.bins.len(), 0);
        }
        for (a, b) in self.bins.iter_mut().zip(&other.bins) {
            *a += b;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    /// The nearest-rank percentile, as its bin's lower edge (never above the largest
    /// sample); `None` when empty.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank.min(self.count) {
                let edge = if i < LINEAR_BINS {
                    i as f64 / LINEAR_BINS as f64
                } else {
                    LOG_RATIO.powi((i - LINEAR_BINS) as i32)
                };
                return Some(edge.min(self.max));
            }
        }
        Some(self.max)
    }
}

/// Arithmetic mean; `None` when empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A value in a report.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A measured number; `None` when nothing could be measured (shown as null / "-").
    Number(Option<f64>),
    /// A count.
    Count(u64),
    /// A label.
    Text(String),
}

/// An ordered list of named metrics. Names are the dotted names of docs/metrics.md.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    entries: Vec<(String, Metric)>,
}

impl Report {
    /// Adds or replaces a metric.
    pub fn set(&mut self, name: &str, value: Metric) {
        match self.entries.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 = value,
            None => self.entries.push((name.to_string(), value)),
        }
    }

    /// Adds a number.
    pub fn number(&mut self, name: &str, value: Option<f64>) {
        self.set(name, Metric::Number(value));
    }

    /// Looks a metric up by name.
    pub fn get(&self, name: &str) -> Option<&Metric> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// A numeric metric's value.
    pub fn get_f64(&self, name: &str) -> Option<f64> {
        match self.get(name)? {
            Metric::Number(v) => *v,
            Metric::Count(c) => Some(*c as f64),
            Metric::Text(_) => None,
        }
    }

    /// All entries in insertion order.
    pub fn entries(&self) -> &[(String, Metric)] {
        &self.entries
    }

    /// The report as nested JSON: `net.down_kbps_mean` becomes `{"net": {"down_kbps_mean": ..}}`.
    pub fn to_json(&self) -> Value {
        let mut root = Map::new();
        for (name, metric) in &self.entries {
            let value = match metric {
                Metric::Number(Some(v)) => {
                    serde_json::Number::from_f64(round(*v)).map_or(Value::Null, Value::Number)
                }
                Metric::Number(None) => Value::Null,
                Metric::Count(c) => Value::from(*c),
                Metric::Text(t) => Value::from(t.clone()),
            };
            let mut parts: Vec<&str> = name.split('.').collect();
            let leaf = parts.pop().unwrap_or_default();
            let mut node = &mut root;
            for p in parts {
                let entry = node
                    .entry(p.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                node = match entry {
                    Value::Object(m) => m,
                    _ => unreachable!("just made an object"),
                };
            }
            node.insert(leaf.to_string(), value);
        }
        Value::Object(root)
    }

    /// A plain-text table of every metric, for the terminal.
    pub fn to_table(&self) -> String {
        let width = self.entries.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        let mut out = String::new();
        let rule = "-".repeat(width + 16);
        out.push_str(&format!("{:<width$}  {:>12}\n{rule}\n", "metric", "value"));
        for (name, metric) in &self.entries {
            let v = match metric {
                Metric::Number(Some(v)) => format_number(*v),
                Metric::Number(None) => "-".into(),
                Metric::Count(c) => c.to_string(),
                Metric::Text(t) => t.clone(),
            };
            out.push_str(&format!("{name:<width$}  {v:>12}\n"));
        }
        out
    }
}

/// The figures of the short report, by section: each metric's name (as in
/// `docs/metrics.md`) and what it says to a person. Metrics a run does not report (a
/// scene's own, the peer's ratio with the plain codec) are left out.
const SUMMARY: &[(&str, &[(&str, &str)])] = &[
    (
        "how it felt",
        &[
            (
                "render.input_to_motion_ticks",
                "ticks from a key press to a frame showing it",
            ),
            (
                "render.error_cm_p99",
                "own player on screen vs the server, cm",
            ),
            (
                "render.jerk_cm_p99",
                "pops: on-screen motion the truth did not make, cm",
            ),
            (
                "interpolation.delay_ms_mean",
                "how far in the past the others are shown, ms",
            ),
            (
                "interpolation.error_cm_p99",
                "the others on screen vs the server then, cm",
            ),
            (
                "input.delay_ms_mean",
                "an input's wait before the server applies it, ms",
            ),
            (
                "feel.latency_ms_mean",
                "input to applied, plus the age of the others shown, ms",
            ),
        ],
    ),
    (
        "the scene",
        &[
            ("ball.error_cm_p99", "the ball on screen vs the server, cm"),
            (
                "hits.confirmed_pct",
                "hits shown that the server confirmed, %",
            ),
            (
                "lagcomp.claimed_ms_p50",
                "age of the view a shot is judged in, ms",
            ),
            (
                "spawns.handover_cm_p99",
                "predicted projectile to the server's, cm",
            ),
            (
                "deadreckoning.error_cm_mean",
                "walkers on screen vs where they are, cm",
            ),
        ],
    ),
    (
        "bandwidth",
        &[
            ("net.down_kbps_mean", "downlink per client, kbit/s"),
            (
                "snapshot.naive_ratio",
                "times smaller than every entity in full floats",
            ),
            (
                "snapshot.peer_ratio",
                "times smaller than the lightyear/replicon stream",
            ),
        ],
    ),
    (
        "server",
        &[
            (
                "server.tick_ms_p99",
                "CPU per tick (physics, capture, encoding), ms",
            ),
            (
                "server.input_starved_pct",
                "ticks a client's input was missing, %",
            ),
            (
                "replication.view_mismatches",
                "client views that differed from the server's",
            ),
        ],
    ),
];

impl Report {
    /// A short report a person reads: how the game felt, the scene's own headline,
    /// bandwidth against the naive and peer streams, and server cost, each figure under
    /// its `docs/metrics.md` name; then where the rest is. At most 30 lines.
    pub fn to_summary(&self) -> String {
        let mut out = String::new();
        let label = |name: &str| match self.get(name) {
            Some(Metric::Text(t)) => t.clone(),
            Some(Metric::Count(c)) => c.to_string(),
            Some(Metric::Number(Some(v))) => format_number(*v),
            _ => "?".into(),
        };
        out.push_str(&format!(
            "{} over {}, {} s, {} client(s), seed {}
",
            label("scene"),
            label("profile"),
            label("seconds"),
            label("clients"),
            label("seed")
        ));
        for (section, rows) in SUMMARY {
            let present: Vec<_> = rows
                .iter()
                .filter_map(|(name, what)| {
                    let v = match self.get(name)? {
                        // A whole number reads as one (0 ticks, not 0.0000).
                        Metric::Number(Some(v)) if v.fract() == 0.0 && v.abs() < 1e9 => {
                            format!("{v:.0}")
                        }
                        Metric::Number(Some(v)) => format_number(*v),
                        Metric::Count(c) => c.to_string(),
                        _ => return None,
                    };
                    Some((name, v, what))
                })
                .collect();
            if present.is_empty() {
                continue;
            }
            out.push_str(&format!(
                "{section}
"
            ));
            for (name, v, what) in present {
                out.push_str(&format!(
                    "  {name:<31} {v:>9}  {what}
"
                ));
            }
        }
        out.push_str(&format!(
            "all {} metrics: --all, or --json FILE (names in docs/metrics.md)\n",
            self.entries.len()
        ));
        out
    }
}

/// Four significant decimals are plenty for every figure we report and keep JSON diffable.
fn round(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

fn format_number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_short_and_names_what_it_shows() {
        let mut r = Report::default();
        r.set("scene", Metric::Text("cubes".into()));
        r.number("render.error_cm_p99", Some(12.5));
        r.set("replication.view_mismatches", Metric::Count(0));
        r.number("interpolation.error_cm_p99", None);
        for i in 0..200 {
            r.number(&format!("other.m{i}"), Some(1.0));
        }
        let s = r.to_summary();
        assert!(s.lines().count() <= 30, "{s}");
        assert!(
            s.contains("render.error_cm_p99") && s.contains("12.50"),
            "{s}"
        );
        assert!(s.contains("replication.view_mismatches"), "{s}");
        // Nothing measured, nothing shown; the rest is where the last line says.
        assert!(!s.contains("interpolation.error_cm_p99"), "{s}");
        assert!(!s.contains("other.m1"), "{s}");
        assert!(s.contains("all 204 metrics: --all"), "{s}");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }

    #[test]
    fn histogram_percentiles_match_the_exact_ones_within_a_bin() {
        let v: Vec<f64> = (0..10_000).map(|i| f64::from(i) * 0.0137).collect();
        let mut h = Histogram::default();
        let mut half = Histogram::default();
        for (i, x) in v.iter().enumerate() {
            if i % 2 == 0 {
                h.record(*x)
            } else {
                half.record(*x)
            }
        }
        h.record(f64::NAN);
        h.merge(&half);
        assert_eq!(h.count(), 10_000);
        for p in [1.0, 50.0, 99.0, 100.0] {
            let exact = percentile(&v, p).unwrap();
            let got = h.percentile(p).unwrap();
            assert!(
                got <= exact && got >= exact / LOG_RATIO - 0.001,
                "p{p}: {got} vs {exact}"
            );
        }
        let mut zeros = Histogram::default();
        zeros.record(0.0);
        assert_eq!(zeros.percentile(99.0), Some(0.0));
        assert_eq!(Histogram::default().percentile(50.0), None);
    }

    #[test]
    fn json_nests_dotted_names() {
        let mut r = Report::default();
        r.set("scene", Metric::Text("cubes".into()));
        r.number("net.down_kbps_mean", Some(12.345_678));
        r.number("net.up_kbps_mean", None);
        r.set("prediction.rollbacks", Metric::Count(3));
        let j = r.to_json();
        assert_eq!(j["scene"], "cubes");
        assert_eq!(j["net"]["down_kbps_mean"], 12.3457);
        assert!(j["net"]["up_kbps_mean"].is_null());
        assert_eq!(j["prediction"]["rollbacks"], 3);
        assert!(r.to_table().contains("net.down_kbps_mean"));
    }
}
