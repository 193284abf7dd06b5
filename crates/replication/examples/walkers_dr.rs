//! Dead reckoning against snapshot interpolation: N scripted walkers (roam, stop, turn, run,
//! idle) on a server, one client over an emulated network: present-time error and bytes.
//! `cargo run --release -p lagless-replication --example walkers_dr -- [walkers] [secs] [profile]`
use Steering::{Arrive, Pvb};
use lagless_core::RttEstimator;
use lagless_netem::{Duplex, Link, profile};
use lagless_replication::{Tick, deadreckoning::*};
use lagless_wire::{BitReader, BitWriter};
use std::collections::BTreeMap;
use std::f32::consts::TAU;
use std::time::Duration;

const HZ: u32 = 64;
const SNAPSHOT_EVERY: u32 = 2; // 32 snapshots a second
/// A seeded generator (Knuth's MMIX LCG), so every run is the same.
struct Rng(u64);
impl Rng {
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1);
        lo + (hi - lo) * (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Like a player: idle a while (`timer`), walk somewhere, break into a run, turn now and then.
fn step((s, timer): &mut (CharacterState, f32), rng: &mut Rng, dt: f32) {
    *timer -= dt;
    if *timer <= 0.0 {
        let r = rng.range(0.0, 1.0);
        (s.speed, *timer) = match r {
            _ if r < 0.3 => (0.0, rng.range(1.0, 4.0)),
            _ if r < 0.75 => (1.4, rng.range(2.0, 6.0)),
            _ => (4.5, rng.range(1.0, 4.0)),
        };
        s.heading += rng.range(-1.6, 1.6);
    } else if s.speed > 0.0 && rng.range(0.0, 1.0) < 0.3 * dt {
        s.heading += rng.range(-1.0, 1.0);
    }
    let [x, _, z] = s.position;
    if x.hypot(z) > 100.0 {
        s.heading = (-x).atan2(-z); // back towards the middle of the level
    }
    let d = DrMessage::direction(s.heading);
    s.position = [x + d[0] * s.speed * dt, 0.0, z + d[2] * s.speed * dt];
}

/// Linear interpolation between the snapshots around `at` (ticks), holding the newest.
fn interpolate(snapshots: &BTreeMap<u32, Vec<[f32; 3]>>, at: f64, id: usize) -> Option<[f32; 3]> {
    let (&t0, a) = snapshots.range(..=at.floor() as u32).next_back()?;
    let later = snapshots.range(at.floor() as u32 + 1..).next();
    let (&t1, b) = later.unwrap_or((&t0, a));
    let k = ((at - f64::from(t0)) / f64::from((t1 - t0).max(1))) as f32;
    Some([0, 1, 2].map(|i| a[id][i] + (b[id][i] - a[id][i]) * k))
}

#[derive(Default)]
struct Metrics {
    bytes: usize,
    messages: usize,
    error_cm: Vec<f32>,
    jerk_cm: Vec<f32>,
    last: BTreeMap<u32, ([f32; 3], [f32; 3])>,
}

impl Metrics {
    fn add(&mut self, id: u32, shown: [f32; 3], truth: [f32; 3]) {
        let sub = |a: [f32; 3], b: [f32; 3]| [0, 1, 2].map(|i| a[i] - b[i]);
        let cm = |v: [f32; 3]| 100.0 * v[0].hypot(v[1]).hypot(v[2]);
        self.error_cm.push(cm(sub(shown, truth)));
        if let Some((s, t)) = self.last.insert(id, (shown, truth)) {
            self.jerk_cm.push(cm(sub(sub(shown, s), sub(truth, t)))); // per tick
        }
    }
    fn row(&mut self, name: &str, secs: f64) {
        let kbps = self.bytes as f64 * 0.008 / secs;
        let msgs = self.messages as f64 / secs;
        let mean = self.error_cm.iter().map(|&e| f64::from(e)).sum::<f64>()
            / self.error_cm.len().max(1) as f64;
        let p99 = |v: &mut Vec<f32>| {
            v.sort_by(f32::total_cmp);
            v.get(v.len() * 99 / 100).copied().unwrap_or(0.0)
        };
        let (e99, j99) = (p99(&mut self.error_cm), p99(&mut self.jerk_cm));
        println!(
            "| {name:<15} | {mean:>6.1} | {e99:>6.1} | {j99:>6.2} | {kbps:>6.1} | {msgs:>6.0} |"
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u32 = args.get(1).map_or(200, |a| a.parse().expect("walkers"));
    let secs: u32 = args.get(2).map_or(60, |a| a.parse().expect("seconds"));
    let link = profile(args.get(3).map_or("mobile", String::as_str)).expect("a netem profile");
    let mut rng = Rng(7);
    let mut walkers: Vec<(CharacterState, f32)> = (0..n)
        .map(|_| {
            let p = [rng.range(-80.0, 80.0), 0.0, rng.range(-80.0, 80.0)];
            (CharacterState::new(p, rng.range(0.0, TAU), 0.0), 0.0)
        })
        .collect();
    let codec = DrCodec::default();
    let mut server = DrServer::new(SenderConfig::default());
    server.add_client(1);
    let shown_by = ["dr arrive", "dr arrive 0.5 s", "dr pvb", "interp 100 ms"];
    let half_s = Some(Duration::from_millis(500));
    let configs = [(Arrive, None), (Arrive, half_s), (Pvb, None)];
    let mut receivers = configs.map(|(steering, steer_time)| {
        let mut c = ReceiverConfig::default();
        (c.steering, c.steer_time) = (steering, steer_time);
        let mut r = DrReceiver::new(c);
        (0..n).for_each(|id| _ = r.spawn(id));
        r
    });
    let mut ping = Duplex::new(link.clone(), link.clone(), 1).expect("link");
    let mut dr_link = Link::new(link.clone(), 2).expect("link");
    let mut snap_link = Link::new(link, 3).expect("link");
    let mut rtt = RttEstimator::new();
    let mut snapshots: BTreeMap<u32, Vec<[f32; 3]>> = BTreeMap::new();
    let mut metrics: [Metrics; 4] = Default::default();
    for tick in 0..secs * HZ {
        let now = Duration::from_secs_f64(f64::from(tick) / f64::from(HZ));
        for (id, w) in (0..).zip(walkers.iter_mut()) {
            step(w, &mut rng, 1.0 / HZ as f32);
            server.update(id, now, Tick(tick), w.0);
        }
        if tick % SNAPSHOT_EVERY == 0 {
            let messages = server.poll_messages(1, |_| true);
            if !messages.is_empty() {
                let mut bits = BitWriter::new();
                codec.write_batch(&mut bits, &messages).expect("valid");
                for m in &mut metrics[..3] {
                    m.bytes += bits.byte_len() + 28; // and a UDP/IP header
                    m.messages += messages.len();
                }
                dr_link.send(now, bits.into_bytes());
            }
            // The baseline: every walker's state in every snapshot, as quantized as ours.
            let mut bits = BitWriter::new();
            bits.write_bits(tick, 32);
            for (s, _) in &walkers {
                codec.position.write(&mut bits, s.position);
                codec.heading.write(&mut bits, s.heading.rem_euclid(TAU));
            }
            metrics[3].bytes += bits.byte_len() + 28;
            metrics[3].messages += walkers.len();
            snap_link.send(now, bits.into_bytes());
        }
        if tick % (HZ / 10) == 0 {
            ping.up
                .send(now, (now.as_nanos() as u64).to_le_bytes().to_vec());
        }
        while let Some(echo) = ping.up.poll(now) {
            ping.down.send(now, echo);
        }
        while let Some(echo) = ping.down.poll(now) {
            let sent = u64::from_le_bytes(echo.try_into().expect("8 bytes"));
            rtt.add_sample(now - Duration::from_nanos(sent));
        }
        while let Some(bytes) = dr_link.poll(now) {
            for r in &mut receivers {
                r.set_rtt(&rtt);
                let mut bits = BitReader::new(&bytes);
                let _ = r.receive_batch(now, Tick(tick), &codec, &mut bits); // counted
            }
        }
        while let Some(bytes) = snap_link.poll(now) {
            let mut bits = BitReader::new(&bytes);
            let sent = bits.read_bits(32).expect("a tick");
            let mut positions = Vec::with_capacity(n as usize);
            for _ in 0..n {
                positions.push(codec.position.read(&mut bits).expect("decodes"));
                codec.heading.read(&mut bits).expect("decodes");
            }
            snapshots.insert(sent, positions);
        }
        // Interpolation: the server's time now, less the one-way lag and 100 ms.
        let one_way = rtt.smoothed().unwrap_or_default().as_secs_f64() / 2.0;
        let at = (now.as_secs_f64() - one_way - 0.1) * f64::from(HZ);
        for (id, w) in (0..).zip(&walkers) {
            for (r, m) in receivers.iter().zip(&mut metrics) {
                if let Some(s) = r.shown(id, now) {
                    m.add(id, s.position, w.0.position);
                }
            }
            if let Some(p) = interpolate(&snapshots, at, id as usize) {
                metrics[3].add(id, p, w.0.position);
            }
        }
        if let Some((&t0, _)) = snapshots.range(..=at.floor() as u32).next_back() {
            snapshots = snapshots.split_off(&t0); // older ones are no longer needed
        }
    }
    let rtt = rtt.smoothed().unwrap_or_default();
    println!("{n} walkers, {secs} s, RTT {rtt:?}");
    println!("| shown by        | err cm | p99 cm | jerk99 |   kbps | msg/s  |");
    println!("|-----------------|-------:|-------:|-------:|-------:|-------:|");
    for (m, name) in metrics.iter_mut().zip(shown_by) {
        m.row(name, f64::from(secs));
    }
}
