//! The adaptive input buffer: the least lead at which the server starves of our input no
//! more often than a target (the dynamic input buffer of the Pixonic mobile shooter article,
//! sized from a distribution instead of a mean and variance).
//!
//! The server reports, in every packet, how early (its *slack*, in ticks) the inputs of
//! the ticks it first heard of since its last report arrived, the least of them (a lost
//! message's inputs ride in the next message, inputs being sent redundantly, so its slack
//! counts the loss), and echoes the send stamp of our newest message. The client remembers
//! the lead it ran with when it sent each message (its position minus the server's in a
//! fixed frame: the server clock as first estimated, carried forward by the client's own
//! clock, [`crate::ClockSync::frame_position`]), so every report gives one **need**:
//! `lead at send - slack`, the lead that would have had those inputs arrive just in time.
//! A need is the uplink delay in ticks, losses included, plus the frame's constant error,
//! which cancels: the lead is chosen in the same frame. The frame does not follow the
//! estimate, which a change of link throws off for a second or two; needs measured
//! against it would carry that error for as long as they stay in the window.
//!
//! A report stands for the ticks since the previous one (the client counts its messages
//! between the two echoed stamps): its worst tick's need, and one tick less for each later
//! tick, which was due a tick later (exact for a bunch of messages that arrived together
//! behind a late or lost one). After a lost server packet, whose report is gone, it stands
//! for its worst tick alone.
//!
//! Starvation is a statement about the upper tail of the needs: a lead `L` starves about
//! the share of needs above `L`, and [`AdaptiveLead::lead`] is the least `L` that keeps that
//! share at the target (times [`TAIL_SAFETY`]), over a window of the last [`NEED_WINDOW`]
//! ticks (two minutes at 64 Hz: a 0.5% target is then 40 ticks, and a cellular link's
//! bad spells, which bring most of its late inputs, come several times a window).
//!
//! A link that changes is told by the same test the interpolation buffer uses on its
//! arrivals (the crate's shift test, on the same sorted window type): when
//! the last 32 reports' needs lie beyond the earlier reports' tail more often than chance
//! allows, or all below their median, the window keeps only the needs since the change
//! (the test counts each report once, whatever ticks it stands for). A need far beyond
//! the window's spread (a message that sat in a queue through an outage) counts only when
//! [`OUTLIER_RUN`] of them come in a row: one such message says nothing about the next.

use crate::window::{SortedWindow, shift};
use std::collections::VecDeque;

/// Needs remembered.
pub const NEED_WINDOW: usize = 8192;

/// The recent needs the link-change test compares with the rest of the window.
const SHIFT_RECENT: usize = 32;

/// The recent needs that, all below the rest of the window's median, tell a better link
/// (the shift test's significance allows 20 and more; 2^-24 is far under its one in a
/// million): fewer than the 32 a worse link is judged on, so the lead it no longer needs
/// comes down within a second of the change (`sync.settle_ms`, docs/lead.md); with 20,
/// quiet spells on `broadband` cut the window and raised the mean lead.
const BETTER_RECENT: usize = 24;

/// Reports after a run of outliers was taken in within which [`BETTER_RECENT`] in a row
/// back within the old bound tell an outage that is over (see `check_outage_over`).
const OUTAGE_OVER_WITHIN: usize = 4 * BETTER_RECENT;

/// Needs before the window's answer is used (the open-loop lead holds until then).
pub const MIN_NEEDS: usize = 16;

/// Needs beyond the outlier bound, in a row, that are taken as the link's new normal.
pub const OUTLIER_RUN: usize = 8;

/// How far a need may lie from the middle of the window, either way, in ticks, however
/// the reports lie: a report claiming more is taken as this.
pub const MAX_NEED_TICKS: f64 = 256.0;

/// The share of the target the window's tail is held to. A past window's tail is an
/// optimistic guess of the next minutes' on a link whose lateness comes in spells (a
/// cellular link's bad spells: a spell the window has not seen yet is what starves), so
/// it aims below the target (the runs that chose half: docs/lead.md).
pub const TAIL_SAFETY: f64 = 0.5;

/// Margin added per late tick (see [`AdaptiveLead::margin`]).
pub const MARGIN_STEP: f64 = 0.25;

/// The margin's range, in ticks: how far the starvation loop may move the lead beyond the
/// window's tail. Never below it: on a link quieter than the target (a LAN) the tail is
/// nearly free, and a loop that sought the target there would make a clean link starve.
const MIN_MARGIN: f64 = 0.0;
const MAX_MARGIN: f64 = 16.0;

/// Reports the link-change test and the outlier bound look at (one value per report).
const REPORT_WINDOW: usize = 512;

/// Chooses the client's lead from the server's slack reports (see the module docs).
#[derive(Debug, Clone)]
pub struct AdaptiveLead {
    target: f64,
    /// The starvation share in force: the target, or with felt costs
    /// ([`AdaptiveLead::set_costs`]) the share of least felt cost.
    chosen: f64,
    /// With [`AdaptiveLead::felt`]: the range the chosen share may take.
    felt: Option<(f64, f64)>,
    /// Felt cost of a tick of lead and of a starved tick, per tick of play.
    costs: Option<(f64, f64)>,
    /// Each report's need, as many times as the ticks it stands for: what starvation
    /// counts.
    needs: SortedWindow<f64>,
    /// Each report's need once, for the link-change test: a report standing for a bunch
    /// of ticks is one observation of the link, not several.
    reports: SortedWindow<f64>,
    /// The ticks each report in `reports` stands for, oldest first.
    weights: VecDeque<usize>,
    /// Needs (and their weights) beyond the outlier bound, in a row, not yet taken in.
    pending: Vec<(f64, usize)>,
    /// After a run of outliers was taken in as the link's new normal: the outlier bound
    /// before it, how many reports in a row since lie within that bound, and how many
    /// reports came since.
    admitted: Option<(f64, usize, usize)>,
    /// The first reports were screened for outliers ([`Self::screen_first_reports`]).
    screened: bool,
    scratch: Vec<f64>,
    shifts: u64,
    outliers: u64,
    margin: f64,
}

impl AdaptiveLead {
    /// A policy that keeps starvation at `target` (a fraction: 0.005 is 0.5%; clamped to
    /// 1e-5..=0.5).
    pub fn new(target: f64) -> Self {
        let target = if target.is_finite() { target } else { 0.005 };
        let target = target.clamp(1e-5, 0.5);
        Self {
            target,
            chosen: target,
            felt: None,
            costs: None,
            needs: SortedWindow::new(NEED_WINDOW, NEED_WINDOW),
            reports: SortedWindow::new(REPORT_WINDOW, REPORT_WINDOW),
            weights: VecDeque::with_capacity(REPORT_WINDOW),
            pending: Vec::new(),
            admitted: None,
            screened: false,
            scratch: Vec::new(),
            shifts: 0,
            outliers: 0,
            margin: 0.0,
        }
    }

    /// A policy that chooses its starvation share by what the player feels: the share,
    /// within `min..=max`, whose lead costs least in a tick of lead's cost and a starved
    /// tick's ([`AdaptiveLead::set_costs`]); `target` until costs are given.
    pub fn felt(target: f64, min: f64, max: f64) -> Self {
        let mut a = Self::new(target);
        let min = if min.is_finite() {
            min.clamp(1e-5, 0.5)
        } else {
            1e-5
        };
        let max = if max.is_finite() {
            max.clamp(min, 0.5)
        } else {
            min
        };
        a.felt = Some((min, max));
        a
    }

    /// What a tick of lead and a starved tick cost the player, per tick of play and in one
    /// unit (the game's: centimetres of correction, say). A tick of lead lengthens every
    /// prediction by a tick; a starved tick costs what the server's wrong guesses cost,
    /// times how often it guesses wrong. With [`AdaptiveLead::felt`], the lead is chosen
    /// from the window by the least `lead * per_lead_tick + share_starved(lead) *
    /// per_starved_tick`; other policies ignore them. Non-finite or negative costs are
    /// ignored.
    pub fn set_costs(&mut self, per_lead_tick: f64, per_starved_tick: f64) {
        let valid = |c: f64| c.is_finite() && c >= 0.0;
        if valid(per_lead_tick) && valid(per_starved_tick) {
            self.costs = Some((per_lead_tick, per_starved_tick));
            self.choose();
        }
    }

    /// The share of the chosen starvation the window's tail is held to: [`TAIL_SAFETY`]
    /// for a target, all of it for a felt choice, which was made on the window itself
    /// (a lead of least cost there, not a share to be met).
    fn safety(&self) -> f64 {
        if self.felt.is_some() && self.costs.is_some() {
            1.0
        } else {
            TAIL_SAFETY
        }
    }

    /// The starvation share the lead is held to now: the target, or the felt choice.
    pub fn chosen_share(&self) -> f64 {
        self.chosen
    }

    /// Chooses the share of least felt cost over the window, when felt costs are in use.
    fn choose(&mut self) {
        let (Some((min, max)), Some((per_lead, per_starved))) = (self.felt, self.costs) else {
            return;
        };
        let sorted = self.needs.sorted();
        let n = sorted.len();
        if n < MIN_NEEDS {
            return;
        }
        // Candidates are the window's needs from the top down, as far as the largest
        // share allowed: leading by need `j` starves the needs above it.
        let mut best = (f64::INFINITY, min);
        let lowest = n - 1 - ((max * n as f64).floor() as usize).min(n - 1);
        for j in (lowest..n).rev() {
            let share = (n - 1 - j) as f64 / n as f64;
            let cost = sorted[j] * per_lead + share * per_starved;
            if cost < best.0 {
                best = (cost, share);
            }
        }
        self.chosen = best.1.clamp(min, max);
    }

    /// Ticks added to the window's tail: the closed loop on starvation itself. Every late
    /// tick a report shows (the worst one, and each later one a tick less late) adds
    /// [`MARGIN_STEP`]; every tick on time takes away
    /// `MARGIN_STEP * target`, so the margin settles where the ticks that are late make
    /// up the target. The window's tail reacts within a few reports to a link that
    /// changes (once it holds a few hundred reports: until then, the ticks late while the
    /// link changed raise the margin, by a tick per four late, which then takes a minute
    /// to wear off); the margin corrects, over tens of seconds, what the tail gets wrong on
    /// a link whose late inputs come in spells (the past window has not seen the next
    /// spell).
    pub fn margin(&self) -> f64 {
        self.margin
    }

    /// The starvation target, as a fraction.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// Needs in the window (ticks, not reports).
    pub fn len(&self) -> usize {
        self.needs.len()
    }

    /// True before any need was taken in.
    pub fn is_empty(&self) -> bool {
        self.needs.len() == 0
    }

    /// True while the window holds needs (at least [`MIN_NEEDS`]) but too few to resolve
    /// the target (fewer than `1 / (target * TAIL_SAFETY)`: 400 at 0.5%, six seconds at
    /// 64 Hz): its largest need stands for the tail, and grows as needs come.
    pub fn is_young(&self) -> bool {
        let n = self.needs.len();
        n >= MIN_NEEDS && (n as f64) * self.chosen * self.safety() < 1.0
    }

    /// Times the window was cut because the link changed (or an outage the uplink queued
    /// through was over).
    pub fn shifts(&self) -> u64 {
        self.shifts
    }

    /// Reports set aside as outliers (and never taken in).
    pub fn outliers(&self) -> u64 {
        self.outliers
    }

    /// Forgets the needs.
    pub fn clear(&mut self) {
        self.needs.clear();
        self.reports.clear();
        self.weights.clear();
        self.pending.clear();
        self.admitted = None;
        self.screened = false;
    }

    /// Takes one report's need, in ticks (the lead that would have had its inputs arrive
    /// just in time), standing for `ticks` ticks (at least 1, at most 64): the worst of
    /// them, and one tick less for each later one. Non-finite
    /// values are ignored; others are clamped to within [`MAX_NEED_TICKS`] of zero.
    pub fn add_need(&mut self, need: f64, ticks: usize) {
        self.add_report(need, f64::INFINITY, ticks);
    }

    /// [`AdaptiveLead::add_need`] (which leaves the margin alone), with the report's
    /// `slack` (ticks): its worst tick's,
    /// negative when that tick's input came too late, which drives the margin (see
    /// [`AdaptiveLead::margin`]) when the lead it was sent with (`need + slack`) was at
    /// least the lead now asked for, less half a tick.
    pub fn add_report(&mut self, need: f64, slack: f64, ticks: usize) {
        if !need.is_finite() || slack.is_nan() {
            return;
        }
        let need = need.clamp(-MAX_NEED_TICKS, MAX_NEED_TICKS);
        let ticks = ticks.clamp(1, 64);
        // Ticks late by an outage (an outlier below) say nothing about the buffer.
        // The worst tick, and each later one a tick less late.
        let late = if slack < 0.0 {
            ((-slack).ceil() as usize).min(ticks)
        } else {
            0
        };
        let margin_step = MARGIN_STEP * (late as f64 - self.chosen * ticks as f64);
        if let Some(bound) = self.outlier_bound() {
            if need > bound {
                self.pending.push((need, ticks));
                if self.pending.len() < OUTLIER_RUN {
                    return;
                }
                // A run of them: the link got slower. Take them all; the shift test
                // below sees them as the recent reports.
                for (n, t) in std::mem::take(&mut self.pending) {
                    self.push(n, t);
                }
                self.admitted = Some((bound, 0, 0));
                self.check_shift();
                self.choose();
                return;
            }
            self.outliers += self.pending.len() as u64;
            self.pending.clear();
        }
        // The shift test may have cut the window to the run, which leaves no bound.
        self.check_outage_over(need);
        // Ticks late because the clock had not caught up with the lead asked for (it
        // sent with less than it is asked for now, by over half a tick: at start, or
        // while it dilates after a change) are the clock's, not the buffer's.
        let converged = self.lead().is_some_and(|l| need + slack >= l - 0.5);
        if converged && slack.is_finite() {
            self.margin = (self.margin + margin_step).clamp(MIN_MARGIN, MAX_MARGIN);
        }
        self.push(need, ticks);
        self.screen_first_reports();
        self.check_shift();
        self.choose();
    }

    /// After a run of outliers taken in: the [`BETTER_RECENT`] reports that followed it
    /// all within the bound before it say the run was an outage the uplink queued
    /// through, not a slower link, and the window keeps only them (as after a change of
    /// link). Otherwise the run's needs, a hundred ticks each after a seconds-long
    /// outage, would hold the lead up until the window had forgotten them: minutes, on
    /// a cellular trace at 30 ticks/s (`docs/lead.md`).
    fn check_outage_over(&mut self, need: f64) {
        let Some((before, within, since)) = self.admitted else {
            return;
        };
        // The outage's own tail (needs falling back as the queue drains) comes first;
        // a link that stays slower never gives the run, and is left alone after a while.
        let since = since + 1;
        if since > OUTAGE_OVER_WITHIN {
            self.admitted = None;
            return;
        }
        let within = if need > before { 0 } else { within + 1 };
        self.admitted = Some((before, within, since));
        if within >= BETTER_RECENT {
            // `push` of this report comes next: keep the ones before it.
            self.cut_to(within - 1);
            self.admitted = None;
        }
    }

    /// Once the window first holds enough reports to tell outliers, the ones taken in
    /// before that which lie beyond the bound (an outage in the first seconds, before
    /// there was a bound) leave it, as they would have been set aside later: otherwise
    /// two such reports held a 30-tick/s shooter's lead at 1.6 s for its first ten
    /// seconds on a cellular trace (`docs/lead.md`).
    fn screen_first_reports(&mut self) {
        if self.screened || self.reports.len() < 4 * MIN_NEEDS {
            return;
        }
        self.screened = true;
        let Some(bound) = self.outlier_bound() else {
            return;
        };
        let n = self.reports.len();
        let kept: Vec<(f64, usize)> = self
            .reports
            .recent(n)
            .zip(self.weights.iter().copied())
            .filter(|(need, _)| *need <= bound)
            .collect();
        if kept.len() == n {
            return;
        }
        self.outliers += (n - kept.len()) as u64;
        self.needs.clear();
        self.reports.clear();
        self.weights.clear();
        for (need, ticks) in kept {
            self.push(need, ticks);
        }
    }

    fn push(&mut self, need: f64, ticks: usize) {
        // The report's slack is its worst tick's, the oldest of those first heard of;
        // the others were due a tick later each, so needed a tick less each (exactly so
        // when they arrived together, as a bunch behind a late or lost message does).
        for j in 0..ticks {
            self.needs.push(need - j as f64);
        }
        self.reports.push(need);
        if self.weights.len() >= REPORT_WINDOW {
            self.weights.pop_front();
        }
        self.weights.push_back(ticks);
    }

    /// The largest need taken in as it is, once the window holds enough to tell: eight
    /// times the distance from the median to the 95th percentile above the median, plus
    /// eight ticks. On normal jitter that is over thirteen standard deviations; on a
    /// bursty link, a loss run of a few dozen messages still counts (a buffer may ride it
    /// out), while an outage's worth of queued messages does not.
    fn outlier_bound(&self) -> Option<f64> {
        let sorted = self.reports.sorted();
        if sorted.len() < 4 * MIN_NEEDS {
            return None;
        }
        let median = sorted[sorted.len() / 2];
        let p95 = sorted[(sorted.len() * 95) / 100];
        Some(median + 8.0 * (p95 - median) + 8.0)
    }

    fn check_shift(&mut self) {
        let sorted = self.reports.sorted();
        let since = match shift::worse_since(
            sorted,
            self.reports.recent(SHIFT_RECENT),
            &mut self.scratch,
        ) {
            Some(since) => since,
            None => {
                self.scratch.clear();
                self.scratch.extend(self.reports.recent(BETTER_RECENT));
                if !shift::better(self.reports.sorted(), &mut self.scratch) {
                    return;
                }
                BETTER_RECENT
            }
        };
        self.cut_to(since);
    }

    /// Keeps the newest `since` reports and the ticks they stand for: the link changed.
    fn cut_to(&mut self, since: usize) {
        let ticks: usize = self.weights.iter().rev().take(since).sum();
        self.needs = self.needs.tail(ticks);
        self.reports = self.reports.tail(since);
        while self.weights.len() > since {
            self.weights.pop_front();
        }
        // The margin corrected the old link's window, and the ticks late while the change
        // went unnoticed are the change's, not the new link's: start it again.
        self.margin = 0.0;
        self.shifts += 1;
    }

    /// The share of the window's needs above `lead`: the share of ticks it would have
    /// starved.
    pub fn starvation_at(&self, lead: f64) -> f64 {
        let sorted = self.needs.sorted();
        if sorted.is_empty() {
            return 0.0;
        }
        (sorted.len() - sorted.partition_point(|v| *v <= lead)) as f64 / sorted.len() as f64
    }

    /// The least lead, in ticks, that would have starved at most the target share (times
    /// [`TAIL_SAFETY`]) of the window's needs, plus the [margin](AdaptiveLead::margin); `None` before [`MIN_NEEDS`] needs. With fewer needs than the
    /// target can resolve (fewer than `1 / target`) it is the largest need: the window
    /// cannot tell a rarer tail.
    pub fn lead(&self) -> Option<f64> {
        let sorted = self.needs.sorted();
        if sorted.len() < MIN_NEEDS {
            return None;
        }
        // At most floor(target * TAIL_SAFETY * n) needs may lie above the answer.
        let n = sorted.len();
        let allowed = (self.chosen * self.safety() * n as f64).floor() as usize;
        let tail = sorted.get(n - 1 - allowed.min(n - 1))?;
        Some(tail + self.margin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl AdaptiveLead {
        fn add_need_once(&mut self, need: f64) {
            self.add_need(need, 1);
        }
    }

    /// A deterministic spread of needs around `mean` (a triangle of half-width `spread`).
    fn spread(i: usize, mean: f64, spread: f64) -> f64 {
        let a = ((i * 7919) % 1000) as f64 / 1000.0;
        let b = ((i * 104_729) % 1000) as f64 / 1000.0;
        mean + spread * (a + b - 1.0)
    }

    #[test]
    fn a_steady_link_gets_its_tail_and_no_more() {
        let mut a = AdaptiveLead::new(0.005);
        assert_eq!(a.lead(), None);
        for i in 0..2000 {
            a.add_need_once(spread(i, 5.0, 2.0));
        }
        let lead = a.lead().unwrap();
        // The needs lie within 5 +- 2 (most far inside): the 99.5th percentile.
        assert!((6.0..=7.0).contains(&lead), "{lead}");
        assert!(a.starvation_at(lead) <= 0.005);
        assert!(a.starvation_at(lead - 0.3) > 0.005);
        assert_eq!(a.shifts(), 0);
    }

    #[test]
    fn a_slower_link_is_followed_within_a_few_dozen_needs_and_a_faster_one_too() {
        let mut a = AdaptiveLead::new(0.005);
        for i in 0..600 {
            a.add_need_once(spread(i, 2.0, 0.5));
        }
        let before = a.lead().unwrap();
        for i in 0..48 {
            a.add_need_once(spread(i, 8.0, 0.5));
        }
        let after = a.lead().unwrap();
        assert!(after > 7.5, "{before} -> {after}");
        assert!(a.shifts() >= 1);
        for i in 0..600 {
            a.add_need_once(spread(i, 8.0, 0.5));
        }
        for i in 0..64 {
            a.add_need_once(spread(i, 2.0, 0.5));
        }
        let back = a.lead().unwrap();
        assert!(back < 3.0, "{back}");
    }

    #[test]
    fn late_ticks_raise_the_margin_and_ticks_on_time_lower_it_within_bounds() {
        let mut a = AdaptiveLead::new(0.005);
        for _ in 0..100 {
            a.add_report(3.0, 1.0, 1);
        }
        let base = a.margin();
        // A report of a bunch of 4 ticks, the worst 2.5 late: three late ticks.
        a.add_report(6.5, -2.5, 4);
        assert!((a.margin() - base - MARGIN_STEP * (3.0 - 0.02)).abs() < 1e-9);
        for _ in 0..100_000 {
            a.add_report(3.0, 1.0, 1);
        }
        assert_eq!(a.margin(), MIN_MARGIN);
        // Late by a tick with the clock in step (sent with the lead asked for): up it
        // goes, never past its bound.
        // (Seven in a row beyond all the earlier ones would be a changed link.)
        let before = a.margin();
        for _ in 0..5 {
            let lead = a.lead().unwrap_or(3.0);
            a.add_report(lead + 1.0, -1.0, 1);
        }
        assert!(a.margin() >= before + 4.9 * MARGIN_STEP, "{}", a.margin());
        for _ in 0..10_000 {
            let lead = a.lead().unwrap_or(3.0);
            a.add_report(lead + 1.0, -1.0, 1);
            assert!(a.margin() <= MAX_MARGIN);
        }
        // Late because the clock lagged the lead asked for: not the buffer's doing.
        let mut b = AdaptiveLead::new(0.005);
        for _ in 0..1000 {
            b.add_report(3.0, 1.0, 1);
        }
        b.add_report(3.0, -3.0, 4);
        assert_eq!(b.margin(), MIN_MARGIN);
    }

    #[test]
    fn the_window_is_young_until_it_can_resolve_the_target() {
        let mut a = AdaptiveLead::new(0.005);
        for i in 0..MIN_NEEDS - 1 {
            a.add_need_once(spread(i, 4.0, 1.0));
        }
        // Too few for an answer: the open loop holds, and nothing is young yet.
        assert!(!a.is_young());
        a.add_need_once(4.0);
        assert!(a.is_young());
        // 1 / (0.5% * TAIL_SAFETY) = 400 needs resolve the target.
        for i in MIN_NEEDS..399 {
            a.add_need_once(spread(i, 4.0, 1.0));
        }
        assert!(a.is_young());
        a.add_need_once(4.0);
        assert!(!a.is_young());
    }

    #[test]
    fn a_few_queued_messages_do_not_move_it_and_lies_are_bounded() {
        let mut a = AdaptiveLead::new(0.005);
        for i in 0..600 {
            a.add_need_once(spread(i, 4.0, 1.0));
        }
        let lead = a.lead().unwrap();
        // Messages that sat in an uplink queue through an outage: a few absurd needs.
        for need in [300.0, 250.0, f64::NAN, f64::INFINITY] {
            a.add_need_once(need);
        }
        a.add_need_once(4.0);
        assert_eq!(a.lead().unwrap(), lead);
        // Non-finite ones are ignored; the two absurd ones set aside.
        assert_eq!(a.outliers(), 2);
        // A server whose every report lies: the lead stays within the need bounds.
        for k in 0..2000 {
            a.add_need_once(if k % 2 == 0 { f64::MAX } else { f64::MIN });
        }
        let lied = a.lead().unwrap();
        assert!(lied.abs() <= MAX_NEED_TICKS, "{lied}");
    }

    #[test]
    fn an_outage_the_uplink_queued_through_leaves_the_lead_once_it_is_over() {
        // A cellular trace's shape at 30 ticks/s: a steady link, then an uplink outage of
        // seconds whose queued messages come as a run of a dozen reports a hundred ticks
        // late and falling, standing for a dozen ticks each, then the steady link again.
        let mut a = AdaptiveLead::new(0.05);
        for i in 0..300 {
            a.add_need_once(spread(i, 1.0, 0.5));
        }
        let steady = a.lead().unwrap();
        for k in 0..12 {
            a.add_need(146.0 - 8.0 * f64::from(k), 11);
        }
        assert!(a.lead().unwrap() > 50.0, "the run was taken in");
        let mut back = None;
        for i in 0..200 {
            a.add_need_once(spread(i, 1.0, 0.5));
            if back.is_none() && a.lead().unwrap() < steady + 2.0 {
                back = Some(i);
            }
        }
        // Back within the reports that tell it (24 within the old bound, after the run's
        // own tail), not once the window forgot the run (thousands).
        let back = back.expect("the lead came back down");
        assert!(back <= BETTER_RECENT + 4, "{back}");
        // A link that stays slower keeps its lead.
        let mut b = AdaptiveLead::new(0.05);
        for i in 0..300 {
            b.add_need_once(spread(i, 1.0, 0.5));
        }
        for i in 0..300 {
            b.add_need_once(spread(i, 40.0, 2.0));
        }
        assert!(b.lead().unwrap() > 35.0, "{:?}", b.lead());
    }

    #[test]
    fn an_outage_before_the_window_can_tell_outliers_is_screened_out() {
        let mut a = AdaptiveLead::new(0.05);
        for i in 0..10 {
            a.add_need_once(spread(i, 1.0, 0.5));
        }
        // Two queued bunches in the first seconds, before there is an outlier bound.
        a.add_need(31.0, 16);
        for i in 0..40 {
            a.add_need_once(spread(i, 1.0, 0.5));
        }
        a.add_need(48.0, 10);
        assert!(a.lead().unwrap() > 30.0);
        for i in 0..20 {
            a.add_need_once(spread(i, 1.0, 0.5));
        }
        // At 64 reports the bound exists and the two leave the window.
        assert!(a.lead().unwrap() < 3.0, "{:?}", a.lead());
        assert_eq!(a.outliers(), 2);
    }

    #[test]
    fn the_felt_lead_trades_a_tick_of_lead_against_starved_ticks() {
        // Needs of 3 to 13 ticks, evenly spread: each tick of lead starves 10% less.
        let fill = |a: &mut AdaptiveLead| {
            for i in 0..4000 {
                a.add_need_once(3.0 + (i % 100) as f64 / 10.0);
            }
        };
        let mut a = AdaptiveLead::felt(0.005, 0.001, 0.1);
        fill(&mut a);
        // No costs yet: the target holds.
        assert_eq!(a.chosen_share(), 0.005);
        // Starving is dear (a starved tick costs 100 ticks of lead): a tick of lead that
        // saves 10% of ticks starved is worth it down to the least share.
        a.set_costs(1.0, 100.0);
        assert_eq!(a.chosen_share(), 0.001);
        let dear = a.lead().unwrap();
        // Starving is cheap (5 ticks of lead): a tick of lead saves only half a tick's
        // worth, so it leads as little as the range allows.
        a.set_costs(1.0, 5.0);
        assert!(
            (a.chosen_share() - 0.1).abs() < 0.002,
            "{}",
            a.chosen_share()
        );
        let cheap = a.lead().unwrap();
        assert!(cheap < dear - 0.5, "{cheap} {dear}");
        // Garbage costs change nothing.
        a.set_costs(f64::NAN, -1.0);
        assert!((a.chosen_share() - 0.1).abs() < 0.002);
        // A target policy ignores costs.
        let mut t = AdaptiveLead::new(0.005);
        fill(&mut t);
        let before = t.lead();
        t.set_costs(1.0, 5.0);
        assert_eq!(t.lead(), before);
    }
}
