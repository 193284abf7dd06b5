//! The dead-reckoning message, its limits and its bit-packed encoding.

use lagless_core::Tick;
use lagless_wire::{BitReader, BitWriter, BoundedFloat, QuantizedVec3, Reader, Seq16, Writer};
use std::f32::consts::TAU;
use std::time::Duration;

use super::DrError;

/// A character's motion as one message states it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Motion {
    /// Standing still: the short message (no speed, interval or lag).
    Idle,
    /// Walking or running along the heading.
    Moving {
        /// Metres per second along the heading (never negative).
        speed: f32,
        /// The sender's sync interval: the receiver steers to arrive at the predicted
        /// point when it ends, and the next message is due by then.
        interval: Duration,
        /// How old the state already was when the sender sent it (the sender's measured
        /// one-way lag from the character's owner; zero for what the sender simulates).
        lag: Duration,
    },
}

/// One dead-reckoning update for one character.
///
/// Heading is a yaw about +Y in radians, with heading 0 facing +Z and π/2 facing +X
/// (the convention of most engines' yaw angle); the direction of motion is
/// `(sin heading, 0, cos heading)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrMessage {
    /// The character.
    pub id: u32,
    /// The server tick the state is of; a receiver keeps only the newest per character.
    pub tick: Tick,
    /// Position in metres.
    pub position: [f32; 3],
    /// Yaw in radians (any value; the wire keeps it modulo 2π).
    pub heading: f32,
    /// Idle, or moving with speed, interval and lag.
    pub motion: Motion,
}

impl DrMessage {
    /// The direction of motion for `heading` (unit, in the XZ plane).
    pub fn direction(heading: f32) -> [f32; 3] {
        let (s, c) = heading.sin_cos();
        [s, 0.0, c]
    }

    /// Speed in metres per second (0 when idle).
    pub fn speed(&self) -> f32 {
        match self.motion {
            Motion::Idle => 0.0,
            Motion::Moving { speed, .. } => speed,
        }
    }

    /// Checks every value against `limits`: non-finite numbers and values out of
    /// bounds are errors. The decoder and the receiver both call it, so a message built
    /// in memory is held to the same rules as one read from bytes.
    pub fn check(&self, limits: &DrLimits) -> Result<(), DrError> {
        if !self.position.iter().all(|v| v.is_finite()) {
            return Err(DrError::NonFinite(Field::Position));
        }
        if !self.heading.is_finite() {
            return Err(DrError::NonFinite(Field::Heading));
        }
        let [x, y, z] = self.position;
        let h = limits.max_horizontal;
        if x.abs() > h || z.abs() > h || y < limits.min_height || y > limits.max_height {
            return Err(DrError::OutOfLimits(Field::Position));
        }
        if let Motion::Moving {
            speed,
            interval,
            lag,
        } = self.motion
        {
            if !speed.is_finite() {
                return Err(DrError::NonFinite(Field::Speed));
            }
            if !(0.0..=limits.max_speed).contains(&speed) {
                return Err(DrError::OutOfLimits(Field::Speed));
            }
            if interval < limits.min_interval || interval > limits.max_interval {
                return Err(DrError::OutOfLimits(Field::Interval));
            }
            if lag > limits.max_lag {
                return Err(DrError::OutOfLimits(Field::Lag));
            }
        }
        Ok(())
    }
}

/// A field of a [`DrMessage`], naming what a refused message got wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// [`DrMessage::position`].
    Position,
    /// [`DrMessage::heading`].
    Heading,
    /// [`Motion::Moving::speed`].
    Speed,
    /// [`Motion::Moving::interval`].
    Interval,
    /// [`Motion::Moving::lag`].
    Lag,
}

/// What a receiver accepts as plausible; anything else is refused and counted.
///
/// The defaults suit walking and running characters on a level of up to 4 km across.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrLimits {
    /// Largest |x| and |z|, metres (default 2048).
    pub max_horizontal: f32,
    /// Lowest y, metres (default -256).
    pub min_height: f32,
    /// Highest y, metres (default 256).
    pub max_height: f32,
    /// Fastest plausible speed, m/s (default 20: a sprint is under 10).
    pub max_speed: f32,
    /// Shortest sync interval (default 50 ms: shorter would mean the sender is not
    /// dead reckoning at all).
    pub min_interval: Duration,
    /// Longest sync interval (default 10 s).
    pub max_interval: Duration,
    /// Largest sender lag (default 1 s).
    pub max_lag: Duration,
}

impl Default for DrLimits {
    fn default() -> Self {
        Self {
            max_horizontal: 2048.0,
            min_height: -256.0,
            max_height: 256.0,
            max_speed: 20.0,
            min_interval: Duration::from_millis(50),
            max_interval: Duration::from_secs(10),
            max_lag: Duration::from_secs(1),
        }
    }
}

/// How a [`DrMessage`] is quantized; both ends must use the same one.
///
/// The default, for characters on a level of up to 4 km across: position to 1/64 m (x
/// and z 18 bits, y 15 bits), heading to 2π/4096 (12 bits, 0.09°: 1.5 cm sideways over a
/// 10 m extrapolation), speed to 1/64 m/s up to 32 m/s (11 bits), interval to 10 ms up
/// to 10.23 s (10 bits), lag to 1 ms up to 1.023 s (10 bits), the tick as its low 16
/// bits. A moving message is 111 bits plus the id (13 bits for ids 23 to 278), an idle
/// one 80 bits plus the id.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrCodec {
    /// Position.
    pub position: QuantizedVec3,
    /// Heading: one whole turn, `[min, min + 2π)` in steps that divide it (the default
    /// `[0, 2π)` in 4096), since headings wrap around it.
    pub heading: BoundedFloat,
    /// Speed, m/s.
    pub speed: BoundedFloat,
    /// Sync interval, seconds.
    pub interval: BoundedFloat,
    /// Sender lag, seconds.
    pub lag: BoundedFloat,
    /// Values refused on decoding.
    pub limits: DrLimits,
    /// Most messages one batch may hold ([`DrCodec::read_batch`]; default 4096).
    pub max_batch: usize,
}

const POS_RES: f32 = 1.0 / 64.0;
const HEADING_STEPS: f32 = 4096.0;

impl Default for DrCodec {
    fn default() -> Self {
        Self {
            position: QuantizedVec3 {
                x: BoundedFloat::new(-2048.0, 2048.0 - POS_RES, POS_RES),
                y: BoundedFloat::new(-256.0, 256.0 - POS_RES, POS_RES),
                z: BoundedFloat::new(-2048.0, 2048.0 - POS_RES, POS_RES),
            },
            heading: BoundedFloat::new(0.0, TAU - TAU / HEADING_STEPS, TAU / HEADING_STEPS),
            speed: BoundedFloat::new(0.0, 32.0 - 1.0 / 64.0, 1.0 / 64.0),
            interval: BoundedFloat::new(0.0, 10.23, 0.01),
            lag: BoundedFloat::new(0.0, 1.023, 0.001),
            limits: DrLimits::default(),
            max_batch: 4096,
        }
    }
}

/// Durations on the wire are seconds as f32; beyond the codec's range they clamp.
fn secs(d: Duration) -> f32 {
    d.as_secs_f32()
}

/// Decoded seconds, to the nearest microsecond: grid points like 0.05 s are not exact in
/// f32, and 49.999999 ms would fall foul of a 50 ms limit the sender met.
fn duration(s: f32) -> Duration {
    let micros = (f64::from(s) * 1e6).round();
    // Grid points of a range starting at 0 are finite and non-negative; `as` saturates.
    Duration::from_micros(micros as u64)
}

impl DrCodec {
    /// The heading index: a heading just below 2π rounds to the grid point at 2π,
    /// which is heading 0 again, so indices wrap instead of clamping.
    fn heading_index(&self, heading: f32) -> u32 {
        let steps = self.heading.max_index() + 1;
        let from_min = f64::from(heading) - f64::from(self.heading.min());
        let turns = from_min.rem_euclid(std::f64::consts::TAU) / std::f64::consts::TAU;
        ((turns * f64::from(steps)).round() as u32) % steps
    }

    /// `message` as a receiver decodes it: every value snapped to the grid (tick kept).
    pub fn snap(&self, message: &DrMessage) -> DrMessage {
        let motion = match message.motion {
            Motion::Idle => Motion::Idle,
            Motion::Moving {
                speed,
                interval,
                lag,
            } => Motion::Moving {
                speed: self.speed.snap(speed),
                interval: duration(self.interval.snap(secs(interval))),
                lag: duration(self.lag.snap(secs(lag))),
            },
        };
        DrMessage {
            id: message.id,
            tick: message.tick,
            position: self.position.snap(message.position),
            heading: self.heading.dequantize(self.heading_index(message.heading)),
            motion,
        }
    }

    /// Bits [`DrCodec::write`] spends on `message`.
    pub fn bits(&self, message: &DrMessage) -> usize {
        let p = &self.position;
        let mut bits = 1
            + lagless_wire::var_u32_bits(message.id)
            + 16
            + p.x.bits()
            + p.y.bits()
            + p.z.bits()
            + self.heading.bits();
        if let Motion::Moving { .. } = message.motion {
            bits += self.speed.bits() + self.interval.bits() + self.lag.bits();
        }
        bits as usize
    }

    /// Appends `message` to a bit stream (inside a snapshot, say). Values outside the
    /// codec's ranges are clamped and NaN is refused: the sender checks what it sends
    /// against the same [`DrLimits`] as the receiver, so it never sends what is refused.
    pub fn write(&self, w: &mut BitWriter, message: &DrMessage) -> Result<(), DrError> {
        message.check(&self.limits)?;
        w.write_bool(matches!(message.motion, Motion::Moving { .. }));
        w.write_var_u32(message.id);
        w.write_bits(u32::from(message.tick.to_wire().0), 16);
        self.position.write(w, message.position);
        w.write_bits(self.heading_index(message.heading), self.heading.bits());
        if let Motion::Moving {
            speed,
            interval,
            lag,
        } = message.motion
        {
            self.speed.write(w, speed);
            self.interval.write(w, secs(interval));
            self.lag.write(w, secs(lag));
        }
        Ok(())
    }

    /// Reads a message written by [`DrCodec::write`]. The 16-bit tick is expanded to the
    /// full tick nearest `reference` (the receiver's estimate of the server's tick).
    /// Truncated input, out-of-range codes and values outside [`DrCodec::limits`] are
    /// errors; nothing panics.
    pub fn read(&self, r: &mut BitReader<'_>, reference: Tick) -> Result<DrMessage, DrError> {
        let moving = r.read_bool()?;
        let id = r.read_var_u32()?;
        let wire = Seq16(r.read_bits(16)? as u16);
        let tick = Tick::from_wire(wire, reference).ok_or(DrError::TickFarOff)?;
        let position = self.position.read(r)?;
        let heading = self.heading.read(r)?;
        let motion = if moving {
            Motion::Moving {
                speed: self.speed.read(r)?,
                interval: duration(self.interval.read(r)?),
                lag: duration(self.lag.read(r)?),
            }
        } else {
            Motion::Idle
        };
        let message = DrMessage {
            id,
            tick,
            position,
            heading,
            motion,
        };
        message.check(&self.limits)?;
        Ok(message)
    }

    /// `message` alone, padded to whole bytes.
    pub fn encode(&self, message: &DrMessage) -> Result<Vec<u8>, DrError> {
        let mut w = BitWriter::with_capacity(self.bits(message).div_ceil(8));
        self.write(&mut w, message)?;
        Ok(w.into_bytes())
    }

    /// Decodes bytes from [`DrCodec::encode`]; trailing bytes or non-zero padding are
    /// errors.
    pub fn decode(&self, bytes: &[u8], reference: Tick) -> Result<DrMessage, DrError> {
        let mut r = BitReader::new(bytes);
        let message = self.read(&mut r, reference)?;
        r.finish()?;
        Ok(message)
    }

    /// Appends `message` to a byte stream, padded to whole bytes.
    pub fn write_bytes(&self, w: &mut Writer, message: &DrMessage) -> Result<(), DrError> {
        w.write_bytes(&self.encode(message)?);
        Ok(())
    }

    /// Reads a message written by [`DrCodec::write_bytes`], consuming its whole bytes.
    pub fn read_bytes(&self, r: &mut Reader<'_>, reference: Tick) -> Result<DrMessage, DrError> {
        let rest = r.clone().read_rest();
        let mut bits = BitReader::new(rest);
        let message = self.read(&mut bits, reference)?;
        // The padding must be zero, so that re-encoding gives the same bytes.
        bits.align()?;
        let used = bits.bit_position() / 8;
        r.read_bytes(used)?;
        Ok(message)
    }

    /// Appends a count and then `messages` to a bit stream.
    pub fn write_batch(&self, w: &mut BitWriter, messages: &[DrMessage]) -> Result<(), DrError> {
        let count = u32::try_from(messages.len()).map_err(|_| DrError::TooMany)?;
        if messages.len() > self.max_batch {
            return Err(DrError::TooMany);
        }
        w.write_var_u32(count);
        for m in messages {
            self.write(w, m)?;
        }
        Ok(())
    }

    /// Reads a batch from [`DrCodec::write_batch`]. A count above
    /// [`DrCodec::max_batch`] is refused before anything is allocated; the first bad
    /// message fails the batch (its position in the stream is lost with it).
    pub fn read_batch(
        &self,
        r: &mut BitReader<'_>,
        reference: Tick,
    ) -> Result<Vec<DrMessage>, DrError> {
        let count = r.read_var_u32()? as usize;
        if count > self.max_batch {
            return Err(DrError::TooMany);
        }
        // Every message takes at least 80 bits: a count the input cannot hold is
        // refused before reserving room for it.
        let mut out = Vec::with_capacity(count.min(r.remaining_bits() / 80));
        for _ in 0..count {
            out.push(self.read(r, reference)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn moving(id: u32, speed: f32) -> DrMessage {
        DrMessage {
            id,
            tick: Tick(1000),
            position: [10.0, 1.0, -20.0],
            heading: 1.0,
            motion: Motion::Moving {
                speed,
                interval: Duration::from_secs(2),
                lag: Duration::from_millis(40),
            },
        }
    }

    #[test]
    fn idle_messages_are_shorter_than_moving_ones() {
        let codec = DrCodec::default();
        let m = moving(100, 3.0);
        let idle = DrMessage {
            motion: Motion::Idle,
            ..m
        };
        let (a, b) = (codec.encode(&m).unwrap(), codec.encode(&idle).unwrap());
        assert!(
            b.len() < a.len(),
            "idle {} bytes, moving {}",
            b.len(),
            a.len()
        );
        assert_eq!(a.len(), codec.bits(&m).div_ceil(8));
        assert_eq!(b.len(), codec.bits(&idle).div_ceil(8));
    }

    #[test]
    fn heading_wraps_instead_of_clamping() {
        let codec = DrCodec::default();
        let m = DrMessage {
            heading: TAU - 1e-5,
            ..moving(1, 1.0)
        };
        let got = codec.decode(&codec.encode(&m).unwrap(), m.tick).unwrap();
        assert_eq!(got.heading, 0.0);
        let m = DrMessage {
            heading: -std::f32::consts::FRAC_PI_2,
            ..m
        };
        let got = codec.decode(&codec.encode(&m).unwrap(), m.tick).unwrap();
        assert!((got.heading - 1.5 * std::f32::consts::PI).abs() < 1e-3);
    }

    #[test]
    fn nan_and_absurd_values_are_refused_on_both_ends() {
        let codec = DrCodec::default();
        let nan = DrMessage {
            position: [f32::NAN, 0.0, 0.0],
            ..moving(1, 1.0)
        };
        assert_eq!(codec.encode(&nan), Err(DrError::NonFinite(Field::Position)));
        // 25 m/s fits the codec's range but not the limits: a forged sender can write it.
        let fast = moving(1, 25.0);
        let mut w = BitWriter::new();
        let loose = DrCodec {
            limits: DrLimits {
                max_speed: 100.0,
                ..DrLimits::default()
            },
            ..codec
        };
        loose.write(&mut w, &fast).unwrap();
        assert_eq!(
            codec.decode(&w.into_bytes(), fast.tick),
            Err(DrError::OutOfLimits(Field::Speed))
        );
    }

    #[test]
    fn truncated_and_trailing_input_is_an_error() {
        let codec = DrCodec::default();
        let bytes = codec.encode(&moving(5, 2.0)).unwrap();
        for n in 0..bytes.len() {
            assert!(codec.decode(&bytes[..n], Tick(1000)).is_err(), "{n} bytes");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(codec.decode(&long, Tick(1000)).is_err());
    }

    #[test]
    fn a_batch_count_beyond_the_limit_is_refused() {
        let codec = DrCodec {
            max_batch: 2,
            ..DrCodec::default()
        };
        let mut w = BitWriter::new();
        w.write_var_u32(3);
        let bytes = w.into_bytes();
        assert_eq!(
            codec.read_batch(&mut BitReader::new(&bytes), Tick(0)),
            Err(DrError::TooMany)
        );
        let three = [moving(1, 1.0), moving(2, 1.0), moving(3, 1.0)];
        assert_eq!(
            codec.write_batch(&mut BitWriter::new(), &three),
            Err(DrError::TooMany)
        );
    }

    #[test]
    fn messages_ride_inside_byte_streams() {
        let codec = DrCodec::default();
        let (a, b) = (moving(7, 1.5), moving(300, 0.25));
        let mut w = Writer::new();
        w.write_u8(42);
        codec.write_bytes(&mut w, &a).unwrap();
        codec.write_bytes(&mut w, &b).unwrap();
        w.write_u8(43);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.read_u8().unwrap(), 42);
        assert_eq!(
            codec.read_bytes(&mut r, Tick(1000)).unwrap(),
            codec.snap(&a)
        );
        assert_eq!(
            codec.read_bytes(&mut r, Tick(1000)).unwrap(),
            codec.snap(&b)
        );
        assert_eq!(r.read_u8().unwrap(), 43);
        r.finish().unwrap();
    }

    fn arb_message() -> impl Strategy<Value = DrMessage> {
        let limits = DrLimits::default();
        (
            any::<u32>(),
            0u32..1_000_000,
            // Within the codec's range, whose top is one step below the bound.
            -2048.0f32..2048.0 - POS_RES,
            -256.0f32..256.0 - POS_RES,
            -2048.0f32..2048.0 - POS_RES,
            -10.0f32..10.0,
            prop::option::of((0.0f32..=limits.max_speed, 50u64..10_000, 0u64..1000)),
        )
            .prop_map(|(id, tick, x, y, z, heading, motion)| DrMessage {
                id,
                tick: Tick(tick),
                position: [x, y, z],
                heading,
                motion: motion.map_or(Motion::Idle, |(speed, interval, lag)| Motion::Moving {
                    speed,
                    interval: Duration::from_millis(interval),
                    lag: Duration::from_millis(lag),
                }),
            })
    }

    proptest! {
        #[test]
        fn round_trip_gives_the_snapped_message_and_identical_bytes(
            m in arb_message(),
            skew in -30_000i64..30_000,
        ) {
            let codec = DrCodec::default();
            let bytes = codec.encode(&m).unwrap();
            prop_assert_eq!(bytes.len(), codec.bits(&m).div_ceil(8));
            // The receiver's idea of the tick may be anywhere within half the 16-bit lap.
            let reference = Tick((i64::from(m.tick.0) + skew).max(0) as u32);
            let got = codec.decode(&bytes, reference).unwrap();
            let snapped = codec.snap(&m);
            prop_assert_eq!(got, snapped);
            prop_assert_eq!(codec.encode(&got).unwrap(), bytes);
            for (a, b) in got.position.iter().zip(m.position) {
                prop_assert!((a - b).abs() <= POS_RES / 2.0 + 1e-3);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let codec = DrCodec::default();
            if let Ok(m) = codec.decode(&bytes, Tick(5000)) {
                prop_assert!(m.check(&codec.limits).is_ok());
                prop_assert_eq!(codec.encode(&m).unwrap(), bytes.clone());
            }
            let _ = codec.read_batch(&mut BitReader::new(&bytes), Tick(5000));
            let _ = codec.read_bytes(&mut Reader::new(&bytes), Tick(5000));
        }
    }
}
