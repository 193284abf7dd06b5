use crate::WireError;

/// Reads little-endian values from untrusted bytes; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Succeeds only if every byte has been read: trailing garbage is an error,
    /// not something to ignore silently.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }

    /// Reads `n` raw bytes.
    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.remaining() {
            return Err(WireError::UnexpectedEnd {
                needed: n,
                remaining: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Everything not yet read.
    pub fn read_rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let bytes = self.read_bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Reads one byte.
    pub fn read_u8(&mut self) -> Result<u8, WireError> {
        Ok(self.read_array::<1>()?[0])
    }

    /// Reads a bool written by [`crate::Writer::write_bool`]; any byte but 0 or 1 is invalid.
    pub fn read_bool(&mut self) -> Result<bool, WireError> {
        match self.read_u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Invalid { what: "bool" }),
        }
    }

    /// Reads a little-endian u16.
    pub fn read_u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.read_array()?))
    }

    /// Reads a little-endian u32.
    pub fn read_u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.read_array()?))
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.read_array()?))
    }

    /// Reads an f32 and rejects NaN and infinities, which no game state should carry
    /// and which would poison a physics engine.
    pub fn read_f32(&mut self) -> Result<f32, WireError> {
        let v = f32::from_bits(self.read_u32()?);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(WireError::Invalid {
                what: "non-finite float",
            })
        }
    }

    /// Reads an unsigned LEB128 varint that must fit in 32 bits.
    pub fn read_varint_u32(&mut self) -> Result<u32, WireError> {
        let v = self.read_varint_bits(32)?;
        Ok(v as u32)
    }

    /// Reads an unsigned LEB128 varint that must fit in 64 bits.
    pub fn read_varint_u64(&mut self) -> Result<u64, WireError> {
        self.read_varint_bits(64)
    }

    /// Reads a zig-zag varint written by [`crate::Writer::write_varint_i32`].
    pub fn read_varint_i32(&mut self) -> Result<i32, WireError> {
        let v = self.read_varint_u32()?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    fn read_varint_bits(&mut self, bits: u32) -> Result<u64, WireError> {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let byte = self.read_u8()?;
            let payload = u64::from(byte & 0x7f);
            // Values too wide for the target are rejected rather than truncated.
            if shift >= bits || (bits - shift < 7 && payload >> (bits - shift) != 0) {
                return Err(WireError::VarintOverflow { bits });
            }
            value |= payload << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(WireError::Invalid {
                        what: "non-minimal varint",
                    });
                }
                return Ok(value);
            }
            shift += 7;
        }
    }

    /// Reads a varint length (at most `max`) and that many bytes.
    pub fn read_len_prefixed(
        &mut self,
        max: usize,
        what: &'static str,
    ) -> Result<&'a [u8], WireError> {
        let len = self.read_varint_u32()? as usize;
        if len > max {
            return Err(WireError::TooLarge { what, len, max });
        }
        self.read_bytes(len)
    }

    /// Reads a count and checks it against `max` before anything is allocated for it.
    pub fn read_count(&mut self, max: usize, what: &'static str) -> Result<usize, WireError> {
        let len = self.read_varint_u32()? as usize;
        if len > max {
            return Err(WireError::TooLarge { what, len, max });
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Writer;
    use proptest::prelude::*;

    #[test]
    fn truncated_reads_fail_with_sizes() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(
            r.read_u32(),
            Err(WireError::UnexpectedEnd {
                needed: 4,
                remaining: 3
            })
        );
        // A failed read consumes nothing.
        assert_eq!(r.read_u16(), Ok(0x0201));
    }

    #[test]
    fn varint_rejects_overflow_and_overlong() {
        // 6 continuation bytes cannot be a u32.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(matches!(
            r.read_varint_u32(),
            Err(WireError::VarintOverflow { bits: 32 })
        ));
        // 5th byte may carry only 4 bits for a u32.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x1f]);
        assert!(r.read_varint_u32().is_err());
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(r.read_varint_u32(), Ok(u32::MAX));
        // Over-long zero.
        let mut r = Reader::new(&[0x80, 0x00]);
        assert!(r.read_varint_u32().is_err());
        // Endless continuation bits end at the buffer, not in a panic.
        let mut r = Reader::new(&[0x80; 3]);
        assert!(matches!(
            r.read_varint_u64(),
            Err(WireError::UnexpectedEnd { .. })
        ));
    }

    #[test]
    fn floats_must_be_finite() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut w = Writer::new();
            w.write_f32(bad);
            assert!(Reader::new(w.as_bytes()).read_f32().is_err());
        }
    }

    #[test]
    fn lengths_are_checked_before_reading() {
        let mut w = Writer::new();
        w.write_varint_u32(1_000_000);
        let mut r = Reader::new(w.as_bytes());
        assert!(matches!(
            r.read_len_prefixed(1200, "payload"),
            Err(WireError::TooLarge {
                len: 1_000_000,
                max: 1200,
                ..
            })
        ));
        assert_eq!(
            Reader::new(&[0, 9]).finish(),
            Err(WireError::TrailingBytes(2))
        );
    }

    proptest! {
        #[test]
        fn round_trip_and_byte_identity(a: u8, b: u16, c: u32, d: u64, e: f32, v32: u32, v64: u64, z: i32, blob: Vec<u8>) {
            prop_assume!(e.is_finite());
            let mut w = Writer::new();
            w.write_u8(a); w.write_u16(b); w.write_u32(c); w.write_u64(d); w.write_f32(e);
            w.write_varint_u32(v32); w.write_varint_u64(v64); w.write_varint_i32(z);
            w.write_len_prefixed(&blob);
            let bytes = w.into_bytes();
            let mut r = Reader::new(&bytes);
            let got = (r.read_u8()?, r.read_u16()?, r.read_u32()?, r.read_u64()?, r.read_f32()?,
                r.read_varint_u32()?, r.read_varint_u64()?, r.read_varint_i32()?,
                r.read_len_prefixed(usize::MAX, "blob")?.to_vec());
            r.finish()?;
            prop_assert_eq!(got.0, a); prop_assert_eq!(got.1, b); prop_assert_eq!(got.2, c);
            prop_assert_eq!(got.3, d); prop_assert_eq!(got.4.to_bits(), e.to_bits());
            prop_assert_eq!(got.5, v32); prop_assert_eq!(got.6, v64); prop_assert_eq!(got.7, z);
            prop_assert_eq!(&got.8, &blob);
            // encode -> decode -> encode is byte-identical
            let mut w2 = Writer::new();
            w2.write_u8(got.0); w2.write_u16(got.1); w2.write_u32(got.2); w2.write_u64(got.3); w2.write_f32(got.4);
            w2.write_varint_u32(got.5); w2.write_varint_u64(got.6); w2.write_varint_i32(got.7);
            w2.write_len_prefixed(&got.8);
            prop_assert_eq!(w2.into_bytes(), bytes);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
            let mut r = Reader::new(&bytes);
            let _ = r.read_varint_u64();
            let _ = r.read_len_prefixed(64, "x");
            let _ = r.read_f32();
            let _ = r.read_bool();
        }
    }
}
