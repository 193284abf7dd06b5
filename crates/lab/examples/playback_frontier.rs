//! How much delay can slowing playback down buy, at best? A bound study for the adaptive
//! interpolation buffer's target ("at an underrun rate no worse than a fixed 3-interval
//! buffer, a mean delay at least 30% lower").
//!
//! One emulated downlink of a profile carries tick-stamped snapshots exactly as
//! `lagless sweep-playback` sends them (the same link and seed as its first link, through
//! `link_replay::replay_link`). Instead of the library's buffer, which must learn the link
//! as it goes, playback here runs at a *constant* lag chosen with hindsight (the link's
//! arrivals over the whole trace are known), and slows down by a stretch rule:
//!
//! - `none`: never;
//! - `overdue T`: while the newest snapshot is older than `T` past the fastest arrival,
//!   for `T` = a quantile of arrivals plus one interval, from the slowest arrival (the
//!   library's first rule) to the 80th percentile (the library now uses the 90th);
//! - `runway T`: while less than `T` of snapshots is left ahead of the render position
//!   (a buffer-level controller).
//!
//! Stretched playback runs at `1 - max_stretch` of real time and afterwards catches up at
//! 110%. For each rule and threshold, the lag is swept in 1 ms steps and the shortest mean
//! delay whose underrun rate is no worse than the classic buffer's (median arrival plus
//! three intervals) is reported with the share of frames shown in slow motion. The `none`
//! row is what choosing the lag alone buys.
//!
//! A rule that cannot reach a delay at the best constant lag will not reach it with a lag
//! learned online, which is what the library's policy does (it bounds these rules, not
//! every conceivable playback). A stretched share near one frame in six means the rule
//! fires continually: playback alternates between 50% and 110% speed and never settles.
//!
//! ```text
//! cargo run --release -p lagless-lab --example playback_frontier -- \
//!     [PROFILE] [SNAPSHOT_HZ] [SECONDS] [FRAME_HZ] [MAX_STRETCH] [SEED]
//! ```
//! Defaults: `snapshot-demo 60 1800 59.7 0.5 1`. Ticks run at 60 Hz.

use lagless_lab::link_replay::{LinkEvent, ReplayConfig, replay_link};
use lagless_netem::profile as link_profile;

const TICK_HZ: u32 = 60;

/// A stretch rule: when playback slows down.
#[derive(Debug, Clone, Copy)]
enum Rule {
    None,
    /// The newest snapshot is older than this past the fastest arrival, seconds.
    Overdue(f64),
    /// Less than this much of snapshots ahead of the render position, seconds.
    Runway(f64),
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::None => write!(f, "none"),
            Rule::Overdue(t) => write!(f, "overdue {:.0} ms", t * 1e3),
            Rule::Runway(t) => write!(f, "runway {:.0} ms", t * 1e3),
        }
    }
}

/// Mean delay behind the newest snapshot (ms), underrun and stretched frames (%).
#[derive(Debug, Clone, Copy)]
struct Figures {
    delay_ms: f64,
    underrun_pct: f64,
    stretched_pct: f64,
}

/// The trace: for each rendered frame, the newest tick received by then.
struct Trace {
    frame_secs: f64,
    frames: Vec<(f64, f64)>,
    /// Every arrival offset (arrival minus tick time), sorted, seconds.
    offsets: Vec<f64>,
}

impl Trace {
    /// The `q` quantile of arrival offsets (0: the fastest arrival, 1: the slowest).
    fn offset(&self, q: f64) -> f64 {
        let i = (q * self.offsets.len().saturating_sub(1) as f64).round() as usize;
        self.offsets.get(i).copied().unwrap_or(0.0)
    }
}

fn trace(config: &ReplayConfig) -> Trace {
    let period = 1.0 / f64::from(config.tick_hz);
    let mut newest: Option<u32> = None;
    let (mut offsets, mut frames) = (Vec::new(), Vec::new());
    let replayed = replay_link(config, 0, &mut |event| match event {
        LinkEvent::Arrival { tick, at } => {
            offsets.push(at.as_secs_f64() - f64::from(tick.0) * period);
            newest = Some(newest.map_or(tick.0, |n| n.max(tick.0)));
        }
        // Frames before the first arrival have nothing to show and are not counted.
        LinkEvent::Frame { at } => {
            if let Some(n) = newest {
                frames.push((at.as_secs_f64(), f64::from(n)));
            }
        }
        LinkEvent::LinkChanged { .. } => {}
    });
    if let Err(e) = replayed {
        eprintln!("{e}");
        std::process::exit(2)
    }
    offsets.sort_by(f64::total_cmp);
    Trace {
        frame_secs: 1.0 / config.frame_hz,
        frames,
        offsets,
    }
}

/// Plays the trace back `lag` seconds past the fastest arrival under `rule`.
fn play(trace: &Trace, lag: f64, rule: Rule, rate: f64) -> Figures {
    let p = 1.0 / f64::from(TICK_HZ);
    let min_offset = trace.offset(0.0);
    let dt = trace.frame_secs;
    let (mut pos, mut catching_up) = (None::<f64>, false);
    let (mut under, mut stretched, mut delay) = (0u64, 0u64, 0.0);
    for &(now, newest) in &trace.frames {
        let target = (now - min_offset - lag) / p;
        let next = match pos {
            None => target,
            Some(pos) => {
                let starving = pos < newest
                    && match rule {
                        Rule::None => false,
                        Rule::Overdue(t) => now - min_offset - newest * p > t,
                        Rule::Runway(t) => (newest - pos) * p < t,
                    };
                if starving {
                    stretched += 1;
                    catching_up = true;
                    pos + rate * dt / p
                } else {
                    let natural = pos + dt / p;
                    let error = target - natural;
                    catching_up &= error > 0.0;
                    let gain = if catching_up { 1.0 } else { dt / 0.5 };
                    let bound = 0.1 * dt / p;
                    natural + (error * gain).clamp(-bound, bound)
                }
            }
        };
        pos = Some(next);
        under += u64::from(next > newest);
        delay += (newest - next) * p;
    }
    let n = trace.frames.len().max(1) as f64;
    Figures {
        delay_ms: delay / n * 1e3,
        underrun_pct: under as f64 / n * 100.0,
        stretched_pct: stretched as f64 / n * 100.0,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let number = |i: usize, default: &str| -> f64 {
        arg(i, default).parse().unwrap_or_else(|_| {
            eprintln!("argument {} is not a number", i + 1);
            std::process::exit(2)
        })
    };
    let profile = arg(0, "snapshot-demo");
    let snapshot_hz = number(1, "60") as u32;
    let (seconds, frame_hz, max_stretch) = (number(2, "1800"), number(3, "59.7"), number(4, "0.5"));
    let seed = number(5, "1") as u64;
    // Rates and duration are checked by the replay; the stretch is this study's own.
    if !(0.0..1.0).contains(&max_stretch) {
        eprintln!("need 0 <= MAX_STRETCH < 1");
        std::process::exit(2)
    }
    let link = link_profile(&profile).unwrap_or_else(|| {
        eprintln!("unknown profile {profile}");
        std::process::exit(2)
    });
    let trace = trace(&ReplayConfig {
        link,
        tick_hz: TICK_HZ,
        snapshot_hz,
        frame_hz,
        seconds,
        seed,
        ..ReplayConfig::default()
    });
    let tick_hz = f64::from(TICK_HZ);
    let interval = (tick_hz / f64::from(snapshot_hz)).round() / tick_hz;
    let classic_lag = trace.offset(0.5) - trace.offset(0.0) + 3.0 * interval;
    let classic = play(&trace, classic_lag, Rule::None, 1.0);
    println!(
        "{profile}, {snapshot_hz} snapshots/s, {seconds} s, frames at {frame_hz} Hz, \
         stretch to {:.0}%, seed {seed}",
        (1.0 - max_stretch) * 100.0
    );
    println!(
        "classic (median + 3 intervals, lag {:.1} ms): delay {:.1} ms, underrun {:.3}%",
        classic_lag * 1e3,
        classic.delay_ms,
        classic.underrun_pct
    );
    println!("best lag at an underrun no worse than classic's, per stretch rule:");
    println!(
        "{:<16} {:>8} {:>9} {:>6} {:>9} {:>10}",
        "rule", "lag_ms", "delay_ms", "cut", "underrun", "stretched"
    );
    // The slowest arrival plus an interval (the library's first moment), then earlier
    // ones: the `1 - q` quantile of arrivals plus an interval, which also fires, briefly,
    // on the share `q` of snapshots that are merely late (the library uses q = 0.1).
    let mut rules = vec![Rule::None];
    for q in [0.0, 0.02, 0.05, 0.1, 0.2] {
        rules.push(Rule::Overdue(
            trace.offset(1.0 - q) - trace.offset(0.0) + interval,
        ));
    }
    for ms in [10.0, 20.0, 30.0, 60.0] {
        rules.push(Rule::Runway(ms / 1e3));
    }
    for rule in rules {
        let rate = if matches!(rule, Rule::None) {
            1.0
        } else {
            1.0 - max_stretch
        };
        let best = (0..(classic_lag * 1e3).ceil() as u32)
            .map(|ms| f64::from(ms) / 1e3)
            .chain([classic_lag])
            .map(|lag| (lag, play(&trace, lag, rule, rate)))
            .filter(|(_, f)| f.underrun_pct <= classic.underrun_pct)
            .min_by(|a, b| a.1.delay_ms.total_cmp(&b.1.delay_ms));
        match best {
            Some((lag, f)) => println!(
                "{:<16} {:>8.0} {:>9.1} {:>5.0}% {:>8.3}% {:>9.2}%",
                rule.to_string(),
                lag * 1e3,
                f.delay_ms,
                (1.0 - f.delay_ms / classic.delay_ms) * 100.0,
                f.underrun_pct,
                f.stretched_pct
            ),
            None => println!("{:<16} no lag up to classic's meets it", rule.to_string()),
        }
    }
}
