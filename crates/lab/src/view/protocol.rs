//! What the page and `lagless view` say to each other over the WebSocket.
//!
//! The page sends small JSON texts (held keys, knob changes); anything it sends is
//! network input, so [`parse_command`] refuses what is malformed or out of range with a
//! message the page shows, and never panics. The server sends binary frames of
//! little-endian `f32`s ([`FrameWriter`]), which the page reads as one `Float32Array`
//! without parsing, and JSON texts for everything rarer (stats, knob values, errors).

use crate::scene::Keys;
use lagless_core::interpolation::DelayPolicy;
use serde_json::Value;

/// The most bytes a command from the page may have: the longest valid one is far shorter,
/// so anything longer is refused before it is parsed.
pub const MAX_COMMAND_BYTES: usize = 1024;

/// Bounds of the numeric knobs, checked before anything reaches the emulator.
pub const MAX_DELAY_MS: f64 = 2000.0;
/// Most jitter, ms.
pub const MAX_JITTER_MS: f64 = 1000.0;
/// Most smoothing half-life, ms.
pub const MAX_HALF_LIFE_MS: f64 = 5000.0;
/// Most send intervals a fixed interpolation delay may trail by.
pub const MAX_FIXED_INTERVALS: f32 = 10.0;

/// A knob the page can turn while the run goes on.
#[derive(Debug, Clone, PartialEq)]
pub enum Knob {
    /// A named network profile for both directions (clears the overrides below).
    Profile(String),
    /// One-way base delay on top of the profile, ms.
    DelayMs(f64),
    /// Jitter on top of the profile, ms.
    JitterMs(f64),
    /// Mean loss on top of the profile, percent.
    LossPct(f64),
    /// Client-side prediction of the own player.
    Prediction(bool),
    /// Correction smoothing (off: corrections show at once).
    Smoothing(bool),
    /// The smoother's half-life, ms (used while smoothing is on).
    HalfLifeMs(f64),
    /// Snapshots per second, 1 to the tick rate.
    SnapshotHz(u32),
    /// The delay policy of the buffer that shows the others.
    Interpolation(DelayPolicy),
}

/// One command from the page.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// The keys held now, and the page's number for this change (echoed in frames, so
    /// the page can time a press to the frame that shows it).
    Keys {
        /// The keys held.
        keys: Keys,
        /// The page's sequence number of this change.
        seq: u32,
    },
    /// Turn a knob.
    Knob(Knob),
}

/// Parses one text message from the page, or says why it is refused. `tick_hz` bounds
/// the snapshot rate.
pub fn parse_command(text: &str, tick_hz: u32) -> Result<Command, String> {
    if text.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "message of {} bytes refused (at most {MAX_COMMAND_BYTES})",
            text.len()
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("malformed message: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("malformed message: not a JSON object".into());
    };
    if let Some(keys) = object.get("keys") {
        let keys = keys
            .as_str()
            .ok_or("keys: expected a string of held keys (w, a, s, d, space)")?;
        let seq = match object.get("seq") {
            None => 0,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("seq: expected a whole number")?,
        };
        return Ok(Command::Keys {
            keys: parse_keys(keys)?,
            seq,
        });
    }
    let name = object
        .get("knob")
        .and_then(Value::as_str)
        .ok_or("expected {\"keys\": ...} or {\"knob\": NAME, \"value\": ...}")?;
    let value = object.get("value").ok_or("knob: missing value")?;
    parse_knob(name, value, tick_hz).map(Command::Knob)
}

/// The keys in `held`: each of `w`, `a`, `s`, `d` and a space at most once.
fn parse_keys(held: &str) -> Result<Keys, String> {
    let mut keys = Keys::default();
    if held.len() > 5 {
        return Err("keys: at most w, a, s, d and space".into());
    }
    for c in held.chars() {
        let slot = match c.to_ascii_lowercase() {
            'w' => &mut keys.forward,
            's' => &mut keys.back,
            'a' => &mut keys.left,
            'd' => &mut keys.right,
            ' ' => &mut keys.jump,
            other => return Err(format!("keys: unknown key {other:?}")),
        };
        *slot = true;
    }
    Ok(keys)
}

/// A number within `[lo, hi]`, or why not.
fn number_in(name: &str, value: &Value, lo: f64, hi: f64) -> Result<f64, String> {
    let x = value
        .as_f64()
        .ok_or_else(|| format!("{name}: expected a number"))?;
    if !(lo..=hi).contains(&x) {
        return Err(format!("{name}: {x} is out of range [{lo}, {hi}]"));
    }
    Ok(x)
}

fn boolean(name: &str, value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{name}: expected true or false"))
}

/// Knob `name` set to `value`, checked.
pub fn parse_knob(name: &str, value: &Value, tick_hz: u32) -> Result<Knob, String> {
    Ok(match name {
        "profile" => {
            let p = value.as_str().ok_or("profile: expected a name")?;
            if lagless_netem::profile(p).is_none() {
                return Err(format!(
                    "profile: unknown {p:?} (known: {})",
                    lagless_netem::PROFILE_NAMES.join(", ")
                ));
            }
            Knob::Profile(p.to_owned())
        }
        "delay_ms" => Knob::DelayMs(number_in(name, value, 0.0, MAX_DELAY_MS)?),
        "jitter_ms" => Knob::JitterMs(number_in(name, value, 0.0, MAX_JITTER_MS)?),
        "loss_pct" => Knob::LossPct(number_in(name, value, 0.0, 100.0)?),
        "prediction" => Knob::Prediction(boolean(name, value)?),
        "smoothing" => Knob::Smoothing(boolean(name, value)?),
        "half_life_ms" => Knob::HalfLifeMs(number_in(name, value, 1.0, MAX_HALF_LIFE_MS)?),
        "snapshot_hz" => {
            let hz = number_in(name, value, 1.0, f64::from(tick_hz))?;
            if hz.fract() != 0.0 {
                return Err(format!("snapshot_hz: {hz} is not a whole number"));
            }
            Knob::SnapshotHz(hz as u32)
        }
        "interpolation" => Knob::Interpolation(parse_policy(
            value
                .as_str()
                .ok_or("interpolation: expected a policy name")?,
        )?),
        other => return Err(format!("unknown knob {other:?}")),
    })
}

/// `adaptive`, `felt`, or `fixedN` (N send intervals, 0 to [`MAX_FIXED_INTERVALS`]).
pub fn parse_policy(name: &str) -> Result<DelayPolicy, String> {
    if name == "adaptive" {
        return Ok(DelayPolicy::adaptive());
    }
    if name == "felt" {
        return Ok(DelayPolicy::felt());
    }
    let intervals = name
        .strip_prefix("fixed")
        .and_then(|n| n.parse::<f32>().ok())
        .ok_or_else(|| format!("interpolation: unknown policy {name:?} (adaptive, fixed3, ...)"))?;
    if !(0.0..=MAX_FIXED_INTERVALS).contains(&intervals) {
        return Err(format!(
            "interpolation: {intervals} intervals is out of range [0, {MAX_FIXED_INTERVALS}]"
        ));
    }
    Ok(DelayPolicy::Fixed { intervals })
}

/// The name [`parse_policy`] reads back.
pub fn policy_name(policy: &DelayPolicy) -> String {
    match policy {
        DelayPolicy::Fixed { intervals } => format!("fixed{intervals}"),
        DelayPolicy::Adaptive { .. } => "adaptive".into(),
        DelayPolicy::Felt { .. } => "felt".into(),
    }
}

/// Layout version of binary frames; the page refuses others.
pub const FRAME_VERSION: f32 = 1.0;

/// Builds one binary frame: little-endian `f32`s, in the order the page reads them (see
/// `page.html`, `readFrame`).
#[derive(Default)]
pub struct FrameWriter {
    bytes: Vec<u8>,
    /// The two axes of the ground (`LabScene::GROUND_AXES`): the page's across and down.
    ground: [usize; 2],
}

impl FrameWriter {
    /// An empty frame, reusing `bytes`' allocation.
    pub fn new(mut bytes: Vec<u8>) -> Self {
        bytes.clear();
        Self {
            bytes,
            ground: [0, 2],
        }
    }
    /// The same, for a scene whose ground is the plane of axes `ground` (`[0, 2]` for a
    /// 3D scene with y up, `[0, 1]` for a 2D one).
    pub fn on_ground(mut self, ground: [usize; 2]) -> Self {
        self.ground = [ground[0].min(2), ground[1].min(2)];
        self
    }
    /// Appends one number.
    pub fn num(&mut self, x: f32) {
        self.bytes.extend_from_slice(&x.to_le_bytes());
    }
    /// Appends a point seen from above: its two ground coordinates (x and z for a 3D
    /// scene with y up).
    pub fn xz(&mut self, p: [f32; 3]) {
        let [a, b] = self.ground;
        self.num(p[a]);
        self.num(p[b]);
    }
    /// Appends a count, then the points seen from above.
    pub fn points(&mut self, points: impl ExactSizeIterator<Item = [f32; 3]>) {
        self.num(points.len() as f32);
        for p in points {
            self.xz(p);
        }
    }
    /// The frame's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_and_echo_their_number() {
        let c = parse_command(r#"{"keys":"wd ","seq":7}"#, 64).expect("valid");
        let Command::Keys { keys, seq } = c else {
            panic!("keys expected")
        };
        assert_eq!(seq, 7);
        assert!(keys.forward && keys.right && keys.jump && !keys.back && !keys.left);
        assert_eq!(
            parse_command(r#"{"keys":""}"#, 64),
            Ok(Command::Keys {
                keys: Keys::default(),
                seq: 0
            })
        );
    }

    #[test]
    fn knobs_in_range_are_taken() {
        let ok = [
            (r#"{"knob":"loss_pct","value":20}"#, Knob::LossPct(20.0)),
            (r#"{"knob":"delay_ms","value":0}"#, Knob::DelayMs(0.0)),
            (r#"{"knob":"jitter_ms","value":30.5}"#, Knob::JitterMs(30.5)),
            (
                r#"{"knob":"profile","value":"lan"}"#,
                Knob::Profile("lan".into()),
            ),
            (
                r#"{"knob":"prediction","value":false}"#,
                Knob::Prediction(false),
            ),
            (
                r#"{"knob":"smoothing","value":true}"#,
                Knob::Smoothing(true),
            ),
            (
                r#"{"knob":"half_life_ms","value":200}"#,
                Knob::HalfLifeMs(200.0),
            ),
            (r#"{"knob":"snapshot_hz","value":64}"#, Knob::SnapshotHz(64)),
            (
                r#"{"knob":"interpolation","value":"fixed3"}"#,
                Knob::Interpolation(DelayPolicy::CLASSIC),
            ),
            (
                r#"{"knob":"interpolation","value":"adaptive"}"#,
                Knob::Interpolation(DelayPolicy::adaptive()),
            ),
        ];
        for (text, knob) in ok {
            assert_eq!(parse_command(text, 64), Ok(Command::Knob(knob)), "{text}");
        }
    }

    #[test]
    fn malformed_and_out_of_range_messages_are_refused_with_a_reason() {
        let long = format!(r#"{{"keys":"{}"}}"#, "w".repeat(2000));
        let bad = [
            "",
            "not json",
            "[1,2]",
            "null",
            r#"{"keys":5}"#,
            r#"{"keys":"wx"}"#,
            r#"{"keys":"wwwwwww"}"#,
            r#"{"keys":"w","seq":-1}"#,
            r#"{"keys":"w","seq":1e20}"#,
            r#"{"knob":"loss_pct"}"#,
            r#"{"knob":"loss_pct","value":101}"#,
            r#"{"knob":"loss_pct","value":-1}"#,
            r#"{"knob":"loss_pct","value":"20"}"#,
            r#"{"knob":"delay_ms","value":1e308}"#,
            r#"{"knob":"jitter_ms","value":5000}"#,
            r#"{"knob":"half_life_ms","value":0}"#,
            r#"{"knob":"snapshot_hz","value":0}"#,
            r#"{"knob":"snapshot_hz","value":65}"#,
            r#"{"knob":"snapshot_hz","value":10.5}"#,
            r#"{"knob":"profile","value":"moon"}"#,
            r#"{"knob":"prediction","value":1}"#,
            r#"{"knob":"interpolation","value":"fixed99"}"#,
            r#"{"knob":"interpolation","value":"fixedNaN"}"#,
            r#"{"knob":"interpolation","value":"sometimes"}"#,
            r#"{"knob":"warp","value":1}"#,
            long.as_str(),
        ];
        for text in bad {
            let e = parse_command(text, 64).expect_err(text);
            assert!(!e.is_empty(), "{text}");
        }
    }

    #[test]
    fn policies_read_back_by_name() {
        for name in ["adaptive", "fixed3", "fixed0.5"] {
            let p = parse_policy(name).expect(name);
            assert_eq!(parse_policy(&policy_name(&p)), Ok(p));
        }
    }

    #[test]
    fn frames_are_little_endian_f32s() {
        let mut w = FrameWriter::new(Vec::new());
        w.num(FRAME_VERSION);
        w.points([[1.0, 9.0, 2.0]].into_iter());
        let bytes = w.finish();
        let floats: Vec<f32> = bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(floats, [1.0, 1.0, 1.0, 2.0]);
    }
}
