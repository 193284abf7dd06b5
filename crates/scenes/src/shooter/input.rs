//! The player's input: keys, aim, fire, and its wire encoding.

use super::Weapon;
use lagless_core::{Input, Reader, WireError, Writer};
use lagless_replication::lagcomp::ViewClaim;

/// A player's input for one tick.
///
/// The aim travels as the raw bits of two floats, so what arrives is what was sent:
/// a NaN or infinite aim reaches the server's checks (refused and counted there) rather
/// than being made harmless by the encoding alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShooterInput {
    /// Movement keys: bit 0 +x, bit 1 -x, bit 2 +y, bit 3 -y.
    pub keys: u8,
    /// Aim direction as `f32` bits (any length; the server normalizes it).
    pub aim: [u32; 2],
    /// 0: no shot, 1: rifle, 2: launcher.
    pub fire: u8,
    /// The rifle shot's number (the hit reports name it).
    pub shot: u16,
    /// The launcher projectile's predicted id (in the client's range).
    pub spawn_id: u32,
    /// The view the client was showing (lag compensation).
    pub view: ViewClaim,
}

impl ShooterInput {
    /// Moving along `(x, y)` (signs only), aiming along +x.
    pub fn moving(x: f32, y: f32) -> Self {
        let mut keys = 0;
        keys |= u8::from(x > 0.0);
        keys |= u8::from(x < 0.0) << 1;
        keys |= u8::from(y > 0.0) << 2;
        keys |= u8::from(y < 0.0) << 3;
        Self {
            keys,
            aim: [1.0f32.to_bits(), 0.0f32.to_bits()],
            ..Self::default()
        }
    }

    /// Sets the aim direction.
    pub fn with_aim(mut self, aim: [f32; 2]) -> Self {
        self.aim = [aim[0].to_bits(), aim[1].to_bits()];
        self
    }

    /// The aim as floats, as sent.
    pub fn aim(&self) -> [f32; 2] {
        [f32::from_bits(self.aim[0]), f32::from_bits(self.aim[1])]
    }

    /// The aim as a unit vector, `None` for a NaN, infinite or zero one.
    pub fn aim_dir(&self) -> Option<[f32; 2]> {
        let a = self.aim();
        let len = a[0].hypot(a[1]);
        (len.is_finite() && len > 1e-6).then(|| [a[0] / len, a[1] / len])
    }

    /// The weapon fired, if any.
    pub fn weapon(&self) -> Option<Weapon> {
        match self.fire {
            1 => Some(Weapon::Rifle),
            2 => Some(Weapon::Launcher),
            _ => None,
        }
    }

    /// The wanted velocity direction (not normalized: diagonals are).
    pub fn direction(&self) -> [f32; 2] {
        let x = f32::from(self.keys & 1) - f32::from((self.keys >> 1) & 1);
        let y = f32::from((self.keys >> 2) & 1) - f32::from((self.keys >> 3) & 1);
        let len = x.hypot(y);
        if len > 0.0 {
            [x / len, y / len]
        } else {
            [0.0, 0.0]
        }
    }
}

impl Input for ShooterInput {
    /// Movement and aim are held (a player keeps running and aiming for a few ticks), a
    /// trigger never is: a repeated shot would be one the player did not fire. After
    /// [`lagless_core::GUESS_REPEAT_TICKS`] the player stops.
    fn guess(&self, missing: u32) -> Self {
        if missing <= lagless_core::GUESS_REPEAT_TICKS {
            Self {
                fire: 0,
                shot: 0,
                spawn_id: 0,
                ..*self
            }
        } else {
            Self::default()
        }
    }

    fn encode(&self, w: &mut Writer) {
        w.write_u8(self.keys | (self.fire << 4));
        w.write_u32(self.aim[0]);
        w.write_u32(self.aim[1]);
        match self.fire {
            1 => w.write_u16(self.shot),
            2 => w.write_varint_u32(self.spawn_id),
            _ => {}
        }
        self.view.write(w);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let b = r.read_u8()?;
        let (keys, fire) = (b & 0x0f, b >> 4);
        if fire > 2 {
            return Err(WireError::Invalid {
                what: "shooter fire",
            });
        }
        let aim = [r.read_u32()?, r.read_u32()?];
        let (shot, spawn_id) = match fire {
            1 => (r.read_u16()?, 0),
            2 => (0, r.read_varint_u32()?),
            _ => (0, 0),
        };
        let view = ViewClaim::read(r)?;
        Ok(Self {
            keys,
            aim,
            fire,
            shot,
            spawn_id,
            view,
        })
    }
}
