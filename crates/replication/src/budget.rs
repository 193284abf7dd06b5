//! A per-client bandwidth budget that follows the link like a congestion controller.
//!
//! What the client acknowledges tells the server how the link is doing: each
//! acknowledgement of a snapshot gives a round-trip sample (from sending the snapshot to
//! hearing it was decoded). A link carrying more than it can queues packets, so its
//! round trip grows long before it drops them. The controller backs off multiplicatively
//! when the smoothed round trip rises well above the lowest it has seen lately, and
//! probes back up additively while the link is clean and the budget is what limits the
//! snapshots (AIMD, with the delay signal of LEDBAT-style controllers). Random loss and
//! jitter on a mobile link do not trigger it; a queue does. After a cut it probes quickly
//! back to 85% of the budget at which the link queued, then creeps on at 3% a second
//! (raising that ceiling as it passes it cleanly), so the queue that tells it the link
//! is full builds seconds apart: each one shows downstream as a sawtooth of delay the
//! interpolation buffer has to ride out.
//!
//! Loss is no signal here: a session acknowledges only the newest snapshot it decoded,
//! so two snapshots arriving between two of the client's messages look like one lost
//! (on a clean link a good share of snapshots would read as lost). Snapshots skipped by
//! the acknowledgements are counted ([`BudgetStats::lost`]) for the record only. A link
//! that drops without queueing (a policer) is therefore not followed; the deltas against
//! acknowledged views keep the game whole on it all the same.

use std::collections::VecDeque;
use std::time::Duration;

/// Budget settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetConfig {
    /// Most a client is sent, kbit/s of snapshot payload. 0: no budget at all (every
    /// change is sent at once; for tests and comparisons).
    pub max_kbps: f64,
    /// Least the controller backs off to, kbit/s.
    pub min_kbps: f64,
    /// Follow the link (true), or always use `max_kbps`.
    pub adaptive: bool,
    /// Queueing delay that means the link is full: the smoothed round trip this much
    /// above its recent low (or a quarter of that low, whichever is more), seconds.
    pub queue_delay_secs: f64,
    /// How long the recent low of the round trip is remembered, seconds.
    pub low_window_secs: f64,
    /// Fewest snapshots a second a client is sent when its budget cannot pay for a
    /// packet every snapshot ([`BudgetController::snapshot_stride`]).
    pub min_snapshot_hz: f64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            max_kbps: 256.0,
            min_kbps: 16.0,
            adaptive: true,
            queue_delay_secs: 0.06,
            low_window_secs: 10.0,
            // Glenn Fiedler's flow control ("Reliability and Flow Control") drops from
            // 30 packets a second to 10 on a bad link.
            min_snapshot_hz: 10.0,
        }
    }
}

/// Counters of one client's budget.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetStats {
    /// Times the budget was cut.
    pub decreases: u64,
    /// Round-trip samples taken.
    pub rtt_samples: u64,
    /// Snapshots acknowledged.
    pub acked: u64,
    /// Snapshots skipped by acknowledgements (lost, or decoded between two of the
    /// client's messages).
    pub lost: u64,
    /// Silences of the acknowledgements that ended (outages of either direction).
    pub outages: u64,
    /// Round-trip samples left out because their snapshot was sent before the link came
    /// back from an outage.
    pub outage_samples: u64,
}

/// One client's budget.
#[derive(Debug, Clone)]
pub struct BudgetController {
    config: BudgetConfig,
    kbps: f64,
    srtt: Option<f64>,
    /// Lowest smoothed round trip per second, for the recent low.
    lows: VecDeque<(u64, f64)>,
    last_update: Option<Duration>,
    hold_until: Duration,
    /// The budget at which the link last queued: probing returns quickly to just below
    /// it and only creeps past it (see [`BudgetController::update`]).
    ceiling: Option<f64>,
    /// See [`BudgetController::snapshot_stride`].
    stride: u32,
    /// Since when the link has not been congested, for relaxing the stride.
    clean_since: Duration,
    /// When the link was last congested, for accelerating the probe past the ceiling.
    congested_at: Duration,
    /// When the newest round-trip sample was taken, and the usual time between two.
    last_sample: Option<Duration>,
    sample_gap: Option<f64>,
    /// When the acknowledgements came back after the newest silence (see
    /// [`BudgetController::on_rtt`]).
    returned_at: Option<Duration>,
    /// What the link delivers ([`BudgetController::delivery_kbps`]).
    delivery: Delivery,
    stats: BudgetStats,
}

/// A snapshot sent and not yet known delivered.
#[derive(Debug, Clone, Copy)]
struct Sent {
    at: Duration,
    bits: u64,
    /// Bits delivered before it was sent, and when the newest of them was known.
    delivered: u64,
    delivered_at: Duration,
}

/// The delivery rate, measured as BBR measures it: for each acknowledged snapshot, the
/// bits delivered between its sending and its acknowledgement over the time they took.
/// A link can deliver no faster than it carries, so the largest recent sample is what it
/// carries (or what was sent, when that was less).
#[derive(Debug, Clone, Default)]
struct Delivery {
    sent: VecDeque<Sent>,
    delivered: u64,
    delivered_at: Option<Duration>,
    /// (time, bit/s) samples within [`RATE_WINDOW`].
    rates: VecDeque<(Duration, f64)>,
    /// (time, overhead bits) of the snapshots sent within the last second.
    overheads: VecDeque<(Duration, u64)>,
}

/// Least time without a round-trip sample that is an outage of the link rather than a
/// queue (see [`BudgetController::on_rtt`]): longer than the loss bursts of a mobile link
/// (a few snapshots), shorter than a coverage hole.
const SILENCE: Duration = Duration::from_millis(500);

/// Past the ceiling, the creep doubles after each this long without congestion.
const ACCELERATE: Duration = Duration::from_secs(4);

/// Delivery-rate samples are kept this long ([`BudgetController::delivery_kbps`]).
const RATE_WINDOW: Duration = Duration::from_secs(2);

/// A delivery-rate sample spans at least this long, seconds: shorter ones measure how
/// acknowledgements bunch up, not the link.
const MIN_RATE_SPAN: f64 = 0.05;

/// Most snapshots tracked in flight.
const MAX_TRACKED: usize = 4096;

/// Most the stride grows to, whatever the rates.
const MAX_STRIDE: u32 = 64;

/// The queueing delay, seconds, at which a link congested at the budget's floor is sent
/// fewer snapshots. A mobile link's jitter reads as a shorter queue, which every snapshot
/// rides out better than fewer would (the `mobile` profile's runs are the same with this
/// rule as without it); a link that cannot carry the packets queues them for seconds.
const STRIDE_QUEUE_SECS: f64 = 0.25;

/// The stride halves after this long without congestion.
const STRIDE_RELAX: Duration = Duration::from_secs(5);

/// Where fast probing stops, as a share of the budget at which the link last queued.
const CRUISE: f64 = 0.85;

/// Probing per second below [`CRUISE`] of the ceiling (or with none known), as a share
/// of the budget.
const FAST_PROBE: f64 = 0.25;

/// Probing per second past it: slow, so the queue that shows the link is full again
/// builds seconds apart rather than every other second.
const SLOW_PROBE: f64 = 0.03;

impl BudgetController {
    /// A budget starting at its maximum.
    pub fn new(config: BudgetConfig) -> Self {
        Self {
            kbps: config.max_kbps,
            config,
            srtt: None,
            lows: VecDeque::new(),
            last_update: None,
            hold_until: Duration::ZERO,
            ceiling: None,
            stride: 1,
            clean_since: Duration::ZERO,
            congested_at: Duration::ZERO,
            last_sample: None,
            sample_gap: None,
            returned_at: None,
            delivery: Delivery::default(),
            stats: BudgetStats::default(),
        }
    }

    /// A snapshot of `payload_bits` went out at `now`, in packets whose headers took
    /// `overhead_bits`: what the delivery rate and the bits in flight count.
    pub fn on_sent(&mut self, now: Duration, payload_bits: u64, overhead_bits: u64) {
        let d = &mut self.delivery;
        let bits = payload_bits + overhead_bits;
        d.sent.push_back(Sent {
            at: now,
            bits,
            delivered: d.delivered,
            delivered_at: d.delivered_at.unwrap_or(now),
        });
        d.overheads.push_back((now, overhead_bits));
        while d
            .overheads
            .front()
            .is_some_and(|(t, _)| *t + Duration::from_secs(1) < now)
        {
            d.overheads.pop_front();
        }
        // Snapshots never acknowledged (lost, or sent into an outage) are forgotten after a
        // while: an acknowledgement can no longer reach them, and memory stays bounded.
        let lost_after = Duration::from_secs_f64((self.srtt.unwrap_or(0.2) * 2.0 + 1.0).min(10.0));
        while d.sent.len() > MAX_TRACKED || d.sent.front().is_some_and(|s| s.at + lost_after < now)
        {
            d.sent.pop_front();
        }
    }

    /// What the link delivered lately, kbit/s (headers included): the largest delivery
    /// rate measured within the last two seconds; `None` before any.
    pub fn delivery_kbps(&self) -> Option<f64> {
        self.delivery
            .rates
            .iter()
            .map(|(_, r)| *r / 1000.0)
            .reduce(f64::max)
    }

    /// Packet headers sent over the last second, kbit/s.
    fn overhead_kbps(&self) -> f64 {
        self.delivery
            .overheads
            .iter()
            .map(|(_, b)| *b as f64)
            .sum::<f64>()
            / 1000.0
    }

    /// The acknowledged snapshot sent at `sent`, acknowledged at `now`: what was sent up
    /// to it is delivered (or lost), and its delivery rate is a sample.
    fn delivered(&mut self, now: Duration, sent: Duration, sample: bool) {
        let d = &mut self.delivery;
        let mut newest = None;
        while d.sent.front().is_some_and(|s| s.at <= sent) {
            if let Some(s) = d.sent.pop_front() {
                d.delivered += s.bits;
                newest = Some(s);
            }
        }
        let Some(p) = newest else {
            return;
        };
        d.delivered_at = Some(now);
        let span = now.saturating_sub(p.delivered_at).as_secs_f64();
        if sample && span >= MIN_RATE_SPAN {
            d.rates
                .push_back((now, (d.delivered - p.delivered) as f64 / span));
        }
        while d.rates.front().is_some_and(|(t, _)| *t + RATE_WINDOW < now) {
            d.rates.pop_front();
        }
    }

    /// How long without a round-trip sample is a silence of the link (an outage), not a
    /// queue: [`SILENCE`], or four times the usual time between samples on a link that
    /// acknowledges seldom.
    fn silence(&self) -> Duration {
        let usual = self.sample_gap.unwrap_or(0.0) * 4.0;
        SILENCE.max(Duration::from_secs_f64(usual.clamp(0.0, 10.0)))
    }

    /// True while acknowledgements have stopped coming for longer than a silence at
    /// `now`: the link is out, which says nothing about how full it is.
    fn silent(&self, now: Duration) -> bool {
        self.last_sample
            .is_some_and(|last| now.saturating_sub(last) >= self.silence())
    }

    /// The budget now, kbit/s; `None` when there is none.
    pub fn kbps(&self) -> Option<f64> {
        (self.config.max_kbps > 0.0).then_some(self.kbps)
    }

    /// Counters.
    pub fn stats(&self) -> &BudgetStats {
        &self.stats
    }

    /// The smoothed round trip, seconds.
    pub fn srtt(&self) -> Option<f64> {
        self.srtt
    }

    /// A round-trip sample taken at `now`: a snapshot acknowledged `secs` after it was sent.
    ///
    /// An outage is not a queue: after acknowledgements stopped for a silence (half a
    /// second, or four usual gaps between them), the snapshots sent before they came back
    /// rode the outage or the queue it left behind, and their round trips say nothing about
    /// what the link carries, so they are not taken. The budget is kept through it, and the
    /// budget at which the link last queued is forgotten (the link that comes back may be
    /// another), so it probes up at the fast rate where the link has room.
    pub fn on_rtt(&mut self, now: Duration, secs: f64) {
        if !(secs.is_finite() && secs >= 0.0) {
            return;
        }
        if let Some(last) = self.last_sample {
            let gap = now.saturating_sub(last);
            if gap >= self.silence() {
                self.returned_at = Some(now);
                self.stats.outages += 1;
                self.ceiling = None;
            } else {
                let g = gap.as_secs_f64();
                self.sample_gap = Some(self.sample_gap.map_or(g, |s| s + (g - s) / 16.0));
            }
        }
        self.last_sample = Some(self.last_sample.map_or(now, |l| l.max(now)));
        let sent = now.saturating_sub(Duration::from_secs_f64(secs.min(1e6)));
        let rode_outage = self.returned_at.is_some_and(|back| sent < back);
        self.delivered(now, sent, !rode_outage);
        if rode_outage {
            self.stats.outage_samples += 1;
            return;
        }
        self.stats.rtt_samples += 1;
        let s = match self.srtt {
            Some(s) => s + (secs - s) / 8.0,
            None => secs,
        };
        self.srtt = Some(s);
        let second = now.as_secs();
        match self.lows.back_mut() {
            Some((t, low)) if *t == second => *low = low.min(s),
            _ => self.lows.push_back((second, s)),
        }
        let keep = self.config.low_window_secs.max(1.0) as u64;
        while self.lows.front().is_some_and(|(t, _)| t + keep <= second) {
            self.lows.pop_front();
        }
    }

    /// A snapshot acknowledged (`true`) or skipped by the acknowledgements (`false`).
    pub fn on_outcome(&mut self, acked: bool) {
        if acked {
            self.stats.acked += 1;
        } else {
            self.stats.lost += 1;
        }
    }

    /// The smoothed round trip above its recent low, seconds.
    pub fn queue_delay(&self) -> Option<f64> {
        let low = self.lows.iter().map(|(_, l)| *l).reduce(f64::min)?;
        Some(self.srtt? - low)
    }

    fn congested(&self) -> bool {
        let low = self.lows.iter().map(|(_, l)| *l).reduce(f64::min);
        match (self.srtt, low) {
            (Some(s), Some(low)) => s - low > self.config.queue_delay_secs.max(low / 4.0),
            _ => false,
        }
    }

    /// Moves the budget on to `now`. `limited` says whether the budget held anything back
    /// since the last call: probing up a budget nobody uses would only make a burst later.
    pub fn update(&mut self, now: Duration, limited: bool) {
        let dt = self
            .last_update
            .map_or(0.0, |t| now.saturating_sub(t).as_secs_f64());
        self.last_update = Some(now);
        let c = self.config;
        if c.max_kbps <= 0.0 || !c.adaptive {
            self.kbps = c.max_kbps;
            return;
        }
        let floor = c.min_kbps.clamp(1.0, c.max_kbps);
        if now < self.hold_until || self.silent(now) {
            // A silent link tells nothing: neither cut nor probe until it speaks.
            return;
        }
        if self.congested() {
            let headers_fill = self
                .delivery_kbps()
                .is_some_and(|d| self.overhead_kbps() > d * 0.5);
            if (self.kbps <= floor || headers_fill)
                && self.queue_delay().is_some_and(|q| q >= STRIDE_QUEUE_SECS)
            {
                // Nothing left to cut from the payload, and a queue no interpolation
                // buffer rides out: send fewer packets.
                self.stride = (self.stride * 2).min(MAX_STRIDE);
            }
            self.clean_since = now;
            self.congested_at = now;
            self.ceiling = Some(self.kbps);
            // At once down to what the link delivers (its headers aside), when that is
            // below a plain cut: a link that went thin would otherwise queue for the
            // several round trips of cuts it takes to get there.
            let carried = self
                .delivery_kbps()
                .map_or(f64::INFINITY, |d| d * CRUISE - self.overhead_kbps());
            self.kbps = (self.kbps * 0.7).min(carried).max(floor);
            self.stats.decreases += 1;
            // Wait a round trip (and a little) for the cut to show before judging again.
            let rtt = self.srtt.unwrap_or(0.2);
            self.hold_until = now + Duration::from_secs_f64((rtt + 0.05).min(2.0));
        } else {
            if self.stride > 1 && now.saturating_sub(self.clean_since) >= STRIDE_RELAX {
                self.stride /= 2;
                self.clean_since = now;
            }
            if limited {
                self.probe(dt);
            }
        }
    }

    /// Probes the budget up by `dt` seconds' worth while the link is clean.
    fn probe(&mut self, dt: f64) {
        // Quickly back to just below where the link last queued, then slowly on: a
        // controller probing at one rate throughout keeps a queue much of the time, and
        // the queue's sawtooth shows as underruns downstream (docs/snapshots.md).
        let cruise = self.ceiling.map_or(f64::INFINITY, |c| c * CRUISE);
        let dt = dt.min(1.0);
        let next = if self.kbps < cruise {
            (self.kbps + (self.kbps * FAST_PROBE).max(8.0) * dt).min(cruise)
        } else {
            // Clean for long past where the link last queued: the link may have grown
            // (a thin stretch is over), so the creep doubles every [`ACCELERATE`] clean
            // up to the fast rate, as BBR probes for more bandwidth.
            let clean = self
                .last_update
                .map_or(0.0, |t| t.saturating_sub(self.congested_at).as_secs_f64());
            let doublings = (clean / ACCELERATE.as_secs_f64()).floor().min(8.0);
            let rate = (SLOW_PROBE * 2f64.powf(doublings)).min(FAST_PROBE);
            let next = self.kbps + (self.kbps * rate).max(1.0) * dt;
            // Past where the link queued, and clean: the ceiling moves up with it
            // (forgetting it instead, to probe fast again, brings the sawtooth back).
            if let Some(c) = &mut self.ceiling {
                *c = c.max(next);
            }
            next
        };
        self.kbps = next.max(self.kbps).min(self.config.max_kbps);
    }

    /// Of the snapshots due at `per_second` a second, send one in this many: 1 unless the
    /// link stayed congested with the budget already at [`BudgetConfig::min_kbps`] and
    /// a queue of a quarter second or more, each time doubling it, down to
    /// [`BudgetConfig::min_snapshot_hz`] a second; halved again after every five seconds
    /// without congestion.
    ///
    /// Why: a thin link (a 3G downlink carrying 20-40 kbit/s) cannot take a packet every
    /// tick whatever the payload, as the headers alone fill it; sent anyway, the packets
    /// queue for seconds and every snapshot arrives stale. Fewer packets, each carrying
    /// what the budget allows, keep the queue short. Only congestion at the floor says
    /// so: a budget the controller merely keeps low, on a link that carries the packets,
    /// is better served by every snapshot (fewer would lengthen the interpolation delay).
    pub fn snapshot_stride(&self, per_second: f64) -> u32 {
        if self.kbps().is_none() {
            return 1;
        }
        let most = (per_second / self.config.min_snapshot_hz.max(1e-3))
            .floor()
            .clamp(1.0, f64::from(MAX_STRIDE)) as u32;
        self.stride.min(most)
    }

    /// Payload bits one snapshot may take, sending `per_second` snapshots a second;
    /// `None` for no budget.
    pub fn bits_per_snapshot(&self, per_second: f64) -> Option<usize> {
        let kbps = self.kbps()?;
        Some((kbps * 1000.0 / per_second.max(1e-3)) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn congestion_at_the_floor_sends_fewer_snapshots_until_the_link_is_clean() {
        let mut b = BudgetController::new(BudgetConfig {
            max_kbps: 64.0,
            min_kbps: 16.0,
            ..BudgetConfig::default()
        });
        let mut t = 0;
        // A clean link at 100 ms.
        for _ in 0..20 {
            t += 50;
            b.on_rtt(ms(t), 0.1);
            b.update(ms(t), true);
        }
        assert_eq!(b.snapshot_stride(64.0), 1);
        // A queue that never drains: the budget is cut to its floor first, then the
        // stride doubles at each cut there.
        let mut strides = Vec::new();
        for i in 0..200 {
            t += 50;
            b.on_rtt(ms(t), 0.1 + 0.01 * f64::from(i));
            b.update(ms(t), true);
            strides.push(b.snapshot_stride(64.0));
        }
        assert_eq!(b.kbps(), Some(16.0));
        let first_wider = strides.iter().position(|&s| s > 1).expect("widened");
        assert!(first_wider > 3, "the payload is cut before packets are");
        // Never below 10 snapshots a second.
        assert_eq!(b.snapshot_stride(64.0), 6);
        assert_eq!(b.snapshot_stride(30.0), 3);
        // Clean again: back to every snapshot within a few relax periods.
        let mut back = None;
        for _ in 0..2000 {
            t += 50;
            b.on_rtt(ms(t), 0.1);
            b.update(ms(t), true);
            if back.is_none() && b.snapshot_stride(64.0) == 1 {
                back = Some(t);
            }
        }
        assert!(back.is_some(), "the stride relaxes");
        // A budget that is only kept low, on a link that does not queue, never widens.
        let fresh = BudgetController::new(BudgetConfig {
            max_kbps: 16.0,
            ..BudgetConfig::default()
        });
        assert_eq!(fresh.snapshot_stride(64.0), 1);
    }

    /// 5 s at a 100 ms round trip, a snapshot every 16 ms; then `secs` with nothing
    /// acknowledged, after which the snapshots sent during it are acknowledged at once
    /// (a link that held them), then 3 s clean again. Returns the budget at the end and
    /// its least value after the outage.
    fn through_an_outage(b: &mut BudgetController, secs: u64) -> (f64, f64) {
        let mut t = 0u64;
        while t < 5000 {
            t += 16;
            b.on_rtt(ms(t), 0.1);
            b.update(ms(t), true);
        }
        let (from, to) = (t, t + secs * 1000);
        t = to;
        let mut least = f64::INFINITY;
        // The held snapshots, sent from `from` on, all come back now.
        for sent in (from..to).step_by(16) {
            b.on_rtt(ms(t), (t - sent) as f64 / 1000.0 + 0.1);
            b.update(ms(t), true);
        }
        while t < to + 3000 {
            t += 16;
            b.on_rtt(ms(t), 0.1);
            b.update(ms(t), true);
            least = least.min(b.kbps().unwrap_or(0.0));
        }
        (b.kbps().unwrap_or(0.0), least)
    }

    #[test]
    fn an_outage_is_not_a_queue() {
        let mut b = BudgetController::new(BudgetConfig::default());
        let (end, least) = through_an_outage(&mut b, 2);
        assert_eq!(b.stats().outages, 1);
        assert!(b.stats().outage_samples > 100, "{:?}", b.stats());
        assert_eq!(b.stats().decreases, 0, "{:?}", b.stats());
        assert_eq!((end, least), (256.0, 256.0));
        // A queue that builds while the link carries on is still one.
        let mut q = BudgetController::new(BudgetConfig::default());
        let mut t = 0u64;
        for i in 0..600u64 {
            t += 16;
            q.on_rtt(ms(t), 0.1 + (i as f64) * 0.005);
            q.update(ms(t), true);
        }
        assert!(
            q.stats().decreases > 0 && q.kbps() < Some(128.0),
            "{:?}",
            q.kbps()
        );
        assert_eq!(q.stats().outages, 0);
    }

    #[test]
    fn a_queue_cuts_the_budget_and_a_clean_link_restores_it() {
        let mut b = BudgetController::new(BudgetConfig::default());
        // 2 s clean at 100 ms.
        for t in 0..128u64 {
            b.on_rtt(ms(t * 16), 0.1);
            b.on_outcome(true);
            b.update(ms(t * 16), true);
        }
        assert_eq!(b.kbps(), Some(256.0));
        // The round trip climbs by 200 ms a second: a queue.
        for t in 128..192u64 {
            let rtt = 0.1 + (t - 128) as f64 * 0.016 * 0.2;
            b.on_rtt(ms(t * 16), rtt);
            b.update(ms(t * 16), true);
        }
        let cut = b.kbps().unwrap();
        assert!(cut < 200.0, "{cut}");
        assert!(b.stats().decreases >= 1);
        // The queue drains, and the budget climbs back: quickly to near where the link
        // queued, then slowly (3% a second) on, within 45 s.
        for t in 192..3072u64 {
            b.on_rtt(ms(t * 16), 0.1);
            b.on_outcome(true);
            b.update(ms(t * 16), true);
        }
        assert_eq!(b.kbps(), Some(256.0));
    }

    /// A link that queues past 100 kbit/s: the budget's time spent queueing, and how
    /// far below the link it cruises.
    fn over_a_link_of_100_kbps(seconds: u64) -> (f64, f64) {
        let mut b = BudgetController::new(BudgetConfig::default());
        let (mut queue, mut queued_ticks, mut sum) = (0.0f64, 0u64, 0.0);
        let ticks = seconds * 64;
        for t in 0..ticks {
            let kbps = b.kbps().unwrap();
            // What the budget sends beyond the link's 100 kbit/s queues, in seconds of
            // the link's time; what it sends below drains it.
            queue = (queue + (kbps - 100.0) / 100.0 / 64.0).max(0.0);
            queued_ticks += u64::from(queue > 0.02);
            b.on_rtt(ms(t * 16), 0.1 + queue);
            b.update(ms(t * 16), true);
            if t >= ticks / 2 {
                sum += kbps;
            }
        }
        (queued_ticks as f64 / ticks as f64, sum / (ticks / 2) as f64)
    }

    #[test]
    fn after_a_queue_it_cruises_just_below_the_link() {
        let (queued, mean) = over_a_link_of_100_kbps(120);
        // Probing at one rate throughout (+25% a second) queues a third of the time here;
        // cruising below the last ceiling and creeping past it, well under a quarter
        // (docs/snapshots.md, "Budget and priorities").
        assert!(queued < 0.25, "queued {:.1}% of the time", queued * 100.0);
        // And it still uses most of the link.
        assert!(mean > 85.0 && mean < 110.0, "{mean}");
    }

    #[test]
    fn random_loss_and_jitter_alone_do_not_cut_it() {
        let mut b = BudgetController::new(BudgetConfig::default());
        let mut x = 12345u64;
        for t in 0..4000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            // 200 ms +- 40 ms uniform, 5% loss.
            b.on_rtt(ms(t * 16), 0.16 + 0.08 * u);
            b.on_outcome(u > 0.05);
            b.update(ms(t * 16), true);
        }
        assert_eq!(b.stats().decreases, 0);
    }

    #[test]
    fn no_budget_means_none() {
        let b = BudgetController::new(BudgetConfig {
            max_kbps: 0.0,
            ..BudgetConfig::default()
        });
        assert_eq!(b.bits_per_snapshot(64.0), None);
    }
}
