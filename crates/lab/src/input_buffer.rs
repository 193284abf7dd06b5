//! The client's lead over the server (its input buffer at the server): the command-line
//! forms of a lead policy and of an outage, and the measurements a run reports on them
//! (`sync.lead_ms_mean`, `input.delay_ms_mean`, `sync.recover_ms_max`; see docs/metrics.md).

use crate::metrics::{Metric, Report};
use lagless_core::{LeadPolicy, Tick};
use lagless_netem::{Direction, Outage, OutageMode};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Parses `--input-buffer` (the core's text form of a lead policy: `adaptive`,
/// `adaptive:P%`, `fixed:N`, `lightyear`, `unity`).
pub fn parse_lead_policy(text: &str) -> Result<LeadPolicy, String> {
    text.parse()
        .map_err(|e: lagless_core::PolicyParseError| e.to_string())
}

/// A short label for a lead policy, for reports and sweep tables.
pub fn lead_label(policy: &LeadPolicy) -> String {
    policy.to_string()
}

/// An outage on the command line: `--outage START:SECS[:up|down|both][:hold|drop]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageSpec {
    /// The outage (start, length, what happens to packets).
    pub outage: Outage,
    /// Which direction goes out.
    pub direction: Direction,
}

impl OutageSpec {
    /// Parses `START:SECS[:up|down|both][:hold|drop]` (both directions and `hold` unless
    /// named: packets wait in the link and arrive late, all at once, when it returns).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("outage {text:?}: {why}");
        let parts: Vec<&str> = text.trim().split(':').map(str::trim).collect();
        if parts.len() < 2 || parts.len() > 4 {
            return Err(bad("expected START:SECS[:up|down|both][:hold|drop]"));
        }
        let secs = |s: &str| -> Result<Duration, String> {
            let v: f64 = s.parse().map_err(|_| bad("times are seconds"))?;
            if !(0.0..=1e6).contains(&v) {
                return Err(bad("times must be in 0..=1e6 s"));
            }
            Ok(Duration::from_secs_f64(v))
        };
        let mut spec = OutageSpec {
            outage: Outage {
                start: secs(parts[0])?,
                duration: secs(parts[1])?,
                mode: OutageMode::Hold,
            },
            direction: Direction::Both,
        };
        for p in &parts[2..] {
            match *p {
                "up" => spec.direction = Direction::Up,
                "down" => spec.direction = Direction::Down,
                "both" => spec.direction = Direction::Both,
                "hold" => spec.outage.mode = OutageMode::Hold,
                "drop" => spec.outage.mode = OutageMode::Drop,
                other => {
                    return Err(bad(&format!(
                        "unknown {other:?} (up, down, both, hold, drop)"
                    )));
                }
            }
        }
        if spec.outage.duration.is_zero() {
            return Err(bad("the outage must last some time"));
        }
        Ok(spec)
    }

    /// A label for reports: `10s+5s down hold`.
    pub fn label(&self) -> String {
        format!(
            "{}s+{}s {} {}",
            self.outage.start.as_secs_f64(),
            self.outage.duration.as_secs_f64(),
            match self.direction {
                Direction::Up => "up",
                Direction::Down => "down",
                Direction::Both => "both",
            },
            match self.outage.mode {
                OutageMode::Hold => "hold",
                OutageMode::Drop => "drop",
            }
        )
    }
}

/// How long after a link change or an outage's end the recovery is watched.
const RECOVERY_WATCH: Duration = Duration::from_secs(10);

/// Back in step: the clock within this many ticks of the lead its policy asks for...
const IN_STEP_TICKS: f64 = 1.0;

/// ... and no tick starved, for this long.
const QUIET: Duration = Duration::from_millis(500);

/// The span at the end of a link's time whose mean lead is its level, for
/// `sync.settle_ms`.
const SETTLE_LEVEL: Duration = Duration::from_secs(10);

/// Lead samples are taken this often.
const LEAD_SAMPLE: Duration = Duration::from_millis(10);

/// Folds into the largest value so far.
fn max_of(m: Option<f64>, v: f64) -> Option<f64> {
    Some(m.map_or(v, |m| m.max(v)))
}

/// Per client: what the probe watches.
#[derive(Debug, Default)]
struct ClientProbe {
    lead_sum_ms: f64,
    lead_samples: u64,
    next_lead_sample: Duration,
    /// Ticks sampled and not yet applied by the server: tick -> local time sampled.
    pending: BTreeMap<u32, Duration>,
    delay_sum_ms: f64,
    delays: u64,
    /// Each applied input's delay: (seconds on the server's clock, ms), for `--plot`.
    delay_series: Vec<(f64, f64)>,
    /// Tracking errors (time, ticks: the clock's lead over its own server estimate minus
    /// the lead its policy asks for) and starved tick times around the events.
    tracking: VecDeque<(Duration, f64)>,
    starved: Vec<Duration>,
    /// Times around the events of server ticks that applied another input than the
    /// player's (a wrong guess, or none), when the runner knows ([`SyncProbe::server_wrong`]).
    wrong: Vec<Duration>,
    /// The lead over the server's true position (time, ms), every sample, with events to
    /// measure [`SyncProbe::settle_ms`] against.
    leads: Vec<(Duration, f64)>,
}

/// Measures the clients' lead and input delay during a run, and how long they take to
/// be back in step after each link change or outage (see docs/metrics.md).
///
/// The runner calls [`SyncProbe::client_ticks`] after each client step,
/// [`SyncProbe::server_tick`] for each server tick, and [`SyncProbe::fill`] at the end.
#[derive(Debug)]
pub struct SyncProbe {
    tick_hz: f64,
    /// Times from which recovery is measured: link changes and outage ends.
    events: Vec<Duration>,
    clients: Vec<ClientProbe>,
    /// The runner reported which ticks the server applied another input than the
    /// player's ([`SyncProbe::server_wrong`]).
    wrong_known: bool,
    /// Per event whose link comes back later than the event itself (a trace's outage
    /// followed by more holes), when it is back in earnest; `None`: not within the run
    /// ([`SyncProbe::link_back`]).
    link_back: BTreeMap<Duration, Option<Duration>>,
}

impl SyncProbe {
    /// A probe for `clients` clients at `tick_hz`, measuring recovery after `events`.
    pub fn new(clients: usize, tick_hz: u32, mut events: Vec<Duration>) -> Self {
        events.sort();
        Self {
            tick_hz: f64::from(tick_hz),
            events,
            clients: (0..clients).map(|_| ClientProbe::default()).collect(),
            wrong_known: false,
            link_back: BTreeMap::new(),
        }
    }

    /// After event `event` the link is back in earnest only at `back` (`None`: not
    /// within the run), not at once: a cellular trace's outage is often followed by
    /// further holes. `sync.resume_link_ms_max` measures play resuming from there.
    pub fn link_back(&mut self, event: Duration, back: Option<Duration>) {
        self.link_back.insert(event, back);
    }

    /// When the link is back after event `e`: `None` if not within the run.
    fn back_after(&self, e: Duration) -> Option<Duration> {
        self.link_back.get(&e).copied().unwrap_or(Some(e))
    }

    /// The server stepped a tick at `now`: `wrong[i]` says whether it applied another
    /// input than client `i`'s own for it (a guess that differed, or none while the
    /// player was acting). A tick starved but guessed right is play going on.
    pub fn server_wrong(&mut self, now: Duration, wrong: &[bool]) {
        self.wrong_known = true;
        if !self.watched(now) {
            return;
        }
        for (c, w) in self.clients.iter_mut().zip(wrong) {
            if *w {
                c.wrong.push(now);
            }
        }
    }

    /// True when `now` lies where recovery is measured (an event's watch and settling).
    fn watched(&self, now: Duration) -> bool {
        self.events.iter().any(|e| {
            let until = self.back_after(*e).unwrap_or(*e).max(*e);
            now >= *e && now <= until + RECOVERY_WATCH + QUIET
        })
    }

    /// After client `i` stepped at `now`: its ticks went from `before` to `after` (the
    /// ticks between were sampled now), its clock is at `position` (fractional ticks),
    /// its smoothed RTT is `rtt`, and `tracking` is how far (ticks) its clock is from the
    /// lead its policy asks for, over its own estimate of the server. The server's
    /// position is `now` in ticks (its clock starts at tick 0 at time 0 in a lab run).
    pub fn client_ticks(
        &mut self,
        i: usize,
        now: Duration,
        (before, after): (Tick, Tick),
        (position, rtt, tracking): (Option<f64>, Option<Duration>, Option<f64>),
    ) {
        let watched = self.watched(now);
        let hz = self.tick_hz;
        let Some(c) = self.clients.get_mut(i) else {
            return;
        };
        // A clock jump skips ticks that were never sampled; a step produces at most the
        // backlog of ticks otherwise.
        if after > before && after.diff(before) <= 16 {
            for t in before.0..after.0 {
                c.pending.insert(t, now);
            }
        }
        let (Some(position), Some(rtt)) = (position, rtt) else {
            return;
        };
        if now < c.next_lead_sample {
            return;
        }
        c.next_lead_sample = now + LEAD_SAMPLE;
        let lead_ticks = position - now.as_secs_f64() * hz;
        let beyond_ms = lead_ticks / hz * 1000.0 - rtt.as_secs_f64() * 500.0;
        c.lead_sum_ms += beyond_ms;
        c.lead_samples += 1;
        if !self.events.is_empty() {
            // The whole lead, not beyond the client's RTT estimate: that estimate takes a
            // few hundred milliseconds to follow a new link, and a lead measured against
            // it would show the estimate settling, not the clock.
            c.leads.push((now, lead_ticks / hz * 1000.0));
        }
        if let (true, Some(err)) = (watched, tracking) {
            c.tracking.push_back((now, err));
        }
    }

    /// [`SyncProbe::client_ticks`] for client `i` from its `session` after a step at
    /// `now` (its own clock) from tick `before`; `at` is the same instant on the probe's
    /// clock (the server's).
    pub fn client_stepped<I: lagless_core::Input>(
        &mut self,
        i: usize,
        (at, now): (Duration, Duration),
        before: Tick,
        session: &lagless_core::ClientSession<I>,
    ) {
        let position = session.is_synced().then(|| session.position());
        let tracking = position
            .zip(session.server_position(now))
            .map(|(p, server)| p - server - session.target_lead_ticks());
        let ticks = (before, session.current_tick());
        self.client_ticks(i, at, ticks, (position, session.rtt().smoothed(), tracking));
    }

    /// The server stepped `tick` at `now`; `fed[i]` says whether client `i` had input for
    /// it (`None` before that client's first input).
    pub fn server_tick(&mut self, now: Duration, tick: Tick, fed: &[Option<bool>]) {
        let watched = self.watched(now);
        for (c, fed) in self.clients.iter_mut().zip(fed) {
            if let Some(sampled) = c.pending.remove(&tick.0) {
                if *fed == Some(true) {
                    let ms = now.saturating_sub(sampled).as_secs_f64() * 1000.0;
                    c.delay_sum_ms += ms;
                    c.delays += 1;
                    c.delay_series.push((now.as_secs_f64(), ms));
                }
            }
            // Forget what can no longer be applied.
            while c
                .pending
                .first_key_value()
                .is_some_and(|(t, _)| *t < tick.0)
            {
                c.pending.pop_first();
            }
            if watched && *fed == Some(false) {
                c.starved.push(now);
            }
        }
    }

    /// Client `i`'s applied inputs' delays: (seconds on the server's clock, ms).
    pub fn input_delays(&self, i: usize) -> &[(f64, f64)] {
        self.clients.get(i).map_or(&[], |c| &c.delay_series)
    }

    /// Recovery after event `e` for client `c`, ms: until the clock stays within
    /// [`IN_STEP_TICKS`] of the lead its policy asks for, with no tick starved, for
    /// [`QUIET`]; the whole watch (10 s) if that never happens.
    fn recovery_ms(c: &ClientProbe, e: Duration) -> Option<f64> {
        Self::back_in_step_ms(c, e, &c.starved)
    }

    /// Play resumed after event `e` for client `c`, ms: as [`SyncProbe::recovery_ms`],
    /// with no tick applied wrong (another input than the player's) instead of none
    /// starved, which a lead that chooses to starve a few percent of ticks, guessed
    /// right, rarely gives.
    ///
    /// An input applied far later than usual also spoils play (the clock can track its
    /// own estimate of the server while that estimate is seconds off: inputs then wait
    /// seconds): one whose wait is over twice the run's median and 100 ms more than it.
    fn resume_ms(c: &ClientProbe, e: Duration) -> Option<f64> {
        let mut waits: Vec<f64> = c.delay_series.iter().map(|(_, ms)| *ms).collect();
        waits.sort_by(f64::total_cmp);
        let Some(&median) = waits.get(waits.len() / 2) else {
            return Self::back_in_step_ms(c, e, &c.wrong);
        };
        let late = (2.0 * median).max(median + 100.0);
        let mut spoiled: Vec<Duration> = c
            .delay_series
            .iter()
            .filter(|(_, ms)| *ms > late)
            .map(|(at, _)| Duration::from_secs_f64(*at))
            .chain(c.wrong.iter().copied())
            .collect();
        spoiled.sort();
        Self::back_in_step_ms(c, e, &spoiled)
    }

    /// After event `e`, ms until client `c`'s clock stays within [`IN_STEP_TICKS`] of the
    /// lead its policy asks for, with none of the `spoiled` ticks, for [`QUIET`]; the
    /// whole watch (10 s) if that never happens.
    fn back_in_step_ms(c: &ClientProbe, e: Duration, spoiled: &[Duration]) -> Option<f64> {
        let end = e + RECOVERY_WATCH;
        let mut seen = false;
        for (t, _) in c.tracking.iter().filter(|(t, _)| *t >= e && *t <= end) {
            seen = true;
            let in_step = c
                .tracking
                .iter()
                .filter(|(u, _)| *u >= *t && *u <= *t + QUIET)
                .all(|(_, err)| err.abs() <= IN_STEP_TICKS);
            let quiet = !spoiled.iter().any(|s| *s >= *t && *s <= *t + QUIET);
            if in_step && quiet {
                return Some(t.saturating_sub(e).as_secs_f64() * 1000.0);
            }
        }
        seen.then(|| RECOVERY_WATCH.as_secs_f64() * 1000.0)
    }

    /// `sync.resume_link_ms_max` (play resumed, from the link being back) and
    /// `sync.resume_ms` (per event: resumed after, and when the link was back), when some
    /// event's link comes back later than the event.
    fn fill_resume_from_link(&self, r: &mut Report) {
        if self.link_back.is_empty() {
            return;
        }
        let mut worst: Option<f64> = None;
        let mut each = Vec::new();
        for e in &self.events {
            let Some(resumed) = self.slowest(*e, Self::resume_ms) else {
                continue;
            };
            let at = e.as_secs_f64();
            match self.back_after(*e) {
                Some(back) => {
                    let after = back.saturating_sub(*e).as_secs_f64() * 1000.0;
                    if let Some(v) = self.slowest(back, Self::resume_ms) {
                        worst = max_of(worst, v);
                    }
                    each.push(format!("{at:.1}s: {resumed:.0} ms (link back +{after:.0})"));
                }
                None => each.push(format!("{at:.1}s: {resumed:.0} ms (link not back)")),
            }
        }
        r.number("sync.resume_link_ms_max", worst);
        r.set("sync.resume_ms", Metric::Text(each.join(", ")));
    }

    /// The worst of `measure` over every event and client.
    fn worst(&self, measure: fn(&ClientProbe, Duration) -> Option<f64>) -> Option<f64> {
        self.events
            .iter()
            .filter_map(|e| self.slowest(*e, measure))
            .fold(None, max_of)
    }

    /// The slowest client's `measure` from `from`.
    fn slowest(
        &self,
        from: Duration,
        measure: fn(&ClientProbe, Duration) -> Option<f64>,
    ) -> Option<f64> {
        self.clients
            .iter()
            .filter_map(|c| measure(c, from))
            .fold(None, max_of)
    }

    /// How long after event `e` client `c`'s lead settled on the level it
    /// held before the next event (or the run's end): the mean over the last
    /// [`SETTLE_LEVEL`] of that span. Settled is within 10% of the level (at least a
    /// tick's worth) for [`QUIET`]; `None` without samples.
    fn settle_ms(&self, c: &ClientProbe, e: Duration) -> Option<f64> {
        let end = self
            .events
            .iter()
            .find(|n| **n > e)
            .copied()
            .unwrap_or(Duration::MAX);
        let span: Vec<(Duration, f64)> = c
            .leads
            .iter()
            .filter(|(t, _)| *t >= e && *t < end)
            .copied()
            .collect();
        let last = span.last()?.0;
        let tail: Vec<f64> = span
            .iter()
            .filter(|(t, _)| *t + SETTLE_LEVEL >= last)
            .map(|(_, l)| *l)
            .collect();
        let level = tail.iter().sum::<f64>() / tail.len() as f64;
        let band = (level.abs() * 0.1).max(1000.0 / self.tick_hz);
        let within = |l: f64| (l - level).abs() <= band;
        span.iter()
            .enumerate()
            .find(|(i, (t, _))| {
                span[*i..]
                    .iter()
                    .take_while(|(u, _)| *u <= *t + QUIET)
                    .all(|(_, l)| within(*l))
            })
            .map(|(_, (t, _))| t.saturating_sub(e).as_secs_f64() * 1000.0)
    }

    /// Writes `sync.lead_ms_mean`, `input.delay_ms_mean` and (with events)
    /// `sync.recover_ms_max` and `sync.settle_ms` into `r`.
    pub fn fill(&self, r: &mut Report) {
        let (mut lead, mut leads, mut delay, mut delays) = (0.0, 0u64, 0.0, 0u64);
        for c in &self.clients {
            lead += c.lead_sum_ms;
            leads += c.lead_samples;
            delay += c.delay_sum_ms;
            delays += c.delays;
        }
        r.number(
            "sync.lead_ms_mean",
            (leads > 0).then(|| lead / leads as f64),
        );
        r.number(
            "input.delay_ms_mean",
            (delays > 0).then(|| delay / delays as f64),
        );
        if !self.events.is_empty() {
            r.number("sync.recover_ms_max", self.worst(Self::recovery_ms));
            if self.wrong_known {
                r.number("sync.resume_ms_max", self.worst(Self::resume_ms));
                self.fill_resume_from_link(r);
            }
            // Per event, the slowest client: `60s: 420 ms, 120s: 730 ms`.
            let settle: Vec<String> = self
                .events
                .iter()
                .filter_map(|e| {
                    let worst = self
                        .clients
                        .iter()
                        .filter_map(|c| self.settle_ms(c, *e))
                        .fold(None, max_of)?;
                    Some(format!("{}s: {worst:.0} ms", e.as_secs_f64()))
                })
                .collect();
            if !settle.is_empty() {
                r.set("sync.settle_ms", Metric::Text(settle.join(", ")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse() {
        assert_eq!(parse_lead_policy("adaptive"), Ok(LeadPolicy::ADAPTIVE));
        assert_eq!(
            parse_lead_policy("adaptive:1%"),
            Ok(LeadPolicy::Adaptive { starvation: 0.01 })
        );
        assert_eq!(parse_lead_policy("fixed:3"), Ok(LeadPolicy::fixed(3.0)));
        assert_eq!(parse_lead_policy("lightyear"), Ok(LeadPolicy::LIGHTYEAR));
        assert_eq!(parse_lead_policy("unity"), Ok(LeadPolicy::CommandAge));
        for bad in [
            "",
            "adaptive:0",
            "adaptive:x",
            "fixed:-1",
            "fixed",
            "nope:1",
        ] {
            assert!(parse_lead_policy(bad).is_err(), "{bad}");
        }
        assert_eq!(lead_label(&LeadPolicy::fixed(4.0)), "fixed:4");
        assert_eq!(lead_label(&LeadPolicy::ADAPTIVE), "adaptive:0.5%");
    }

    #[test]
    fn outages_parse() {
        let o = OutageSpec::parse("10:5:down").expect("valid");
        assert_eq!(o.outage.start, Duration::from_secs(10));
        assert_eq!(o.outage.duration, Duration::from_secs(5));
        assert_eq!(o.direction, Direction::Down);
        assert_eq!(o.outage.mode, OutageMode::Hold);
        let o = OutageSpec::parse("1.5:2:drop:up").expect("valid");
        assert_eq!(o.outage.mode, OutageMode::Drop);
        assert_eq!(o.direction, Direction::Up);
        assert_eq!(o.label(), "1.5s+2s up drop");
        for bad in [
            "10",
            "10:0",
            "x:5",
            "10:5:sideways",
            "10:5:up:hold:x",
            "-1:5",
        ] {
            assert!(OutageSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn recovery_is_the_time_until_the_clock_is_in_step_and_nothing_starves() {
        let ms = Duration::from_millis;
        let mut p = SyncProbe::new(1, 64, vec![ms(1000)]);
        let rtt = Some(ms(0));
        for k in 0..2000u64 {
            let now = ms(k * 10);
            // The clock is 10 ticks off its target until 1.3 s, then in step.
            let err = if now < ms(1300) { 10.0 } else { 0.2 };
            let position = now.as_secs_f64() * 64.0 + 2.0;
            p.client_ticks(0, now, (Tick(0), Tick(0)), (Some(position), rtt, Some(err)));
            let fed = now != ms(1500);
            p.server_tick(now, Tick(k as u32), &[Some(fed)]);
        }
        let mut r = Report::default();
        p.fill(&mut r);
        let recover = r.get_f64("sync.recover_ms_max").expect("measured");
        // In step at 1.3 s but a tick starved at 1.5 s: quiet from 1.51 s on.
        assert!((recover - 510.0).abs() < 1e-6, "{recover}");
        // Not said which ticks were applied wrong: no resume figure.
        assert!(r.get("sync.resume_ms_max").is_none());
        let lead = r.get_f64("sync.lead_ms_mean").expect("measured");
        assert!((lead - 2.0 / 64.0 * 1000.0).abs() < 1e-6, "{lead}");
    }

    #[test]
    fn play_resumes_when_the_clock_is_in_step_and_no_tick_is_applied_wrong() {
        let ms = Duration::from_millis;
        let mut p = SyncProbe::new(1, 64, vec![ms(1000)]);
        let rtt = Some(ms(0));
        for k in 0..2000u64 {
            let now = ms(k * 10);
            let err = if now < ms(1300) { 10.0 } else { 0.2 };
            let position = now.as_secs_f64() * 64.0 + 2.0;
            p.client_ticks(0, now, (Tick(0), Tick(0)), (Some(position), rtt, Some(err)));
            // Starved every 200 ms (a lead that chooses to), but guessed right but once,
            // at 1.4 s.
            let fed = k % 20 != 0;
            p.server_tick(now, Tick(k as u32), &[Some(fed)]);
            p.server_wrong(now, &[now == ms(1400)]);
        }
        let mut r = Report::default();
        p.fill(&mut r);
        // Starved ticks keep coming: never quiet by the old measure.
        let recover = r.get_f64("sync.recover_ms_max").expect("measured");
        assert!((recover - 10_000.0).abs() < 1e-6, "{recover}");
        // Play resumed once in step with no wrong tick: from 1.41 s on.
        let resume = r.get_f64("sync.resume_ms_max").expect("measured");
        assert!((resume - 410.0).abs() < 1e-6, "{resume}");
    }

    #[test]
    fn play_resuming_is_also_measured_from_the_link_being_back() {
        let ms = Duration::from_millis;
        // Two outages: the link is back 2 s after the first ends, never after the second.
        let mut p = SyncProbe::new(1, 64, vec![ms(1000), ms(8000)]);
        p.link_back(ms(1000), Some(ms(3000)));
        p.link_back(ms(8000), None);
        let rtt = Some(ms(0));
        for k in 0..2000u64 {
            let now = ms(k * 10);
            let position = now.as_secs_f64() * 64.0 + 2.0;
            p.client_ticks(0, now, (Tick(0), Tick(0)), (Some(position), rtt, Some(0.0)));
            p.server_tick(now, Tick(k as u32), &[Some(true)]);
            // Ticks applied wrong while the link comes and goes, up to 3.3 s; and 8-8.2 s.
            let wrong = (now < ms(3300) && k % 25 == 0) || (now >= ms(8000) && now < ms(8200));
            p.server_wrong(now, &[wrong]);
        }
        let mut r = Report::default();
        p.fill(&mut r);
        // From the first outage's end: clean from 3.26 s on.
        let resume = r.get_f64("sync.resume_ms_max").expect("measured");
        assert!((resume - 2260.0).abs() < 1e-6, "{resume}");
        // From the link being back: 0.26 s. The second outage's link never came back, so
        // it has no figure from there.
        let from_link = r.get_f64("sync.resume_link_ms_max").expect("measured");
        assert!((from_link - 260.0).abs() < 1e-6, "{from_link}");
        let Some(Metric::Text(each)) = r.get("sync.resume_ms") else {
            panic!("per outage");
        };
        assert_eq!(
            each,
            "1.0s: 2260 ms (link back +2000), 8.0s: 200 ms (link not back)"
        );
    }

    #[test]
    fn settling_is_the_time_until_the_lead_holds_its_new_level() {
        let ms = Duration::from_millis;
        let mut p = SyncProbe::new(1, 64, vec![ms(1000)]);
        for k in 0..3000u64 {
            let now = ms(k * 10);
            // 20 ticks ahead until 1 s, then down by a tick every 100 ms to 4 ticks
            // (2.6 s), where it stays.
            let ahead = if now < ms(1000) {
                20.0
            } else {
                (20.0 - (k as f64 - 100.0) / 10.0).max(4.0)
            };
            let position = now.as_secs_f64() * 64.0 + ahead;
            p.client_ticks(
                0,
                now,
                (Tick(0), Tick(0)),
                (Some(position), Some(ms(0)), None),
            );
        }
        let mut r = Report::default();
        p.fill(&mut r);
        let Some(Metric::Text(settle)) = r.get("sync.settle_ms") else {
            panic!("no settle time");
        };
        // Within a tick of 4 from 5 ticks ahead: 1.5 s after the change.
        assert_eq!(settle, "1s: 1500 ms");
    }
}
