//! Bit-level streams: values that take fewer than 8 bits cost only their width.
//!
//! Bits are packed LSB-first: bit `i` of the stream is bit `i % 8` of byte `i / 8`, and a
//! multi-bit value is written least significant bit first. The last byte is padded with
//! zero bits, and the reader insists on that, so every accepted stream has exactly one
//! encoding (encode -> decode -> encode gives identical bytes).

use crate::WireError;

/// The number of bits needed to write any value in `0..=max_value` (0 for `max_value == 0`).
///
/// ```
/// use lagless_wire::bits_needed;
/// assert_eq!(bits_needed(0), 0);
/// assert_eq!(bits_needed(1), 1);
/// assert_eq!(bits_needed(255), 8);
/// assert_eq!(bits_needed(256), 9);
/// ```
pub const fn bits_needed(max_value: u64) -> u32 {
    64 - max_value.leading_zeros()
}

/// Appends values of 0 to 64 bits to a growable buffer, LSB-first.
///
/// Writing never fails. Asking for more than 32 bits (64 for [`BitWriter::write_bits_u64`]),
/// or passing a value wider than the bit count, is a caller bug and panics: silently
/// truncating would put a different value on the wire than the one the game holds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BitWriter {
    buf: Vec<u8>,
    bits: usize,
}

impl BitWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer that will not reallocate before `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            buf: Vec::with_capacity(bytes),
            bits: 0,
        }
    }

    /// Empties the writer, keeping its memory for what is written next.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.bits = 0;
    }

    /// Bits written so far (including any alignment padding).
    pub fn bit_len(&self) -> usize {
        self.bits
    }

    /// Bytes the output takes so far: `bit_len()` rounded up to whole bytes.
    pub fn byte_len(&self) -> usize {
        self.buf.len()
    }

    /// The bytes written so far; the last byte's unused high bits are zero.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Consumes the writer, returning its bytes with the last byte padded with zero bits.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Appends the low `bits` bits of `value`. `bits == 0` writes nothing.
    ///
    /// # Panics
    /// If `bits > 32` or `value` does not fit in `bits` bits (API misuse, never data).
    pub fn write_bits(&mut self, value: u32, bits: u32) {
        assert!(bits <= 32, "write_bits: {bits} bits is more than 32");
        assert!(
            bits == 32 || value >> bits == 0,
            "write_bits: {value} does not fit in {bits} bits"
        );
        self.put(u64::from(value), bits);
    }

    /// Appends the low `bits` bits of a 64-bit `value`. `bits == 0` writes nothing.
    ///
    /// # Panics
    /// If `bits > 64` or `value` does not fit in `bits` bits (API misuse, never data).
    pub fn write_bits_u64(&mut self, value: u64, bits: u32) {
        assert!(bits <= 64, "write_bits_u64: {bits} bits is more than 64");
        assert!(
            bits == 64 || value >> bits == 0,
            "write_bits_u64: {value} does not fit in {bits} bits"
        );
        self.put(value, bits);
    }

    /// Appends one bit.
    pub fn write_bool(&mut self, v: bool) {
        self.put(u64::from(v), 1);
    }

    /// Pads with zero bits up to the next byte boundary (nothing if already aligned).
    pub fn align(&mut self) {
        // The buffer's last byte is already zero above `bits`; just move the cursor.
        self.bits = self.buf.len() * 8;
    }

    /// Aligns to a byte boundary, then appends `bytes` verbatim (fast: no bit shifting).
    pub fn write_bytes_aligned(&mut self, bytes: &[u8]) {
        self.align();
        self.buf.extend_from_slice(bytes);
        self.bits = self.buf.len() * 8;
    }

    /// Appends everything `other` wrote, bit for bit (as if its writes had been made
    /// here), so pieces encoded once can be shared between streams.
    pub fn append(&mut self, other: &BitWriter) {
        let whole = other.bits / 8;
        if self.bits % 8 == 0 {
            self.buf.extend_from_slice(&other.buf[..whole]);
            self.bits += whole * 8;
        } else {
            for &b in &other.buf[..whole] {
                self.put(u64::from(b), 8);
            }
        }
        let rest = (other.bits % 8) as u32;
        if rest > 0 {
            self.put(u64::from(other.buf[whole]), rest);
        }
    }

    /// Writes `bits` (at most 64) low bits of `value`, filling the current byte first.
    fn put(&mut self, mut value: u64, bits: u32) {
        let mut left = bits;
        while left > 0 {
            let offset = (self.bits % 8) as u32;
            if offset == 0 {
                self.buf.push(0);
            }
            let take = (8 - offset).min(left);
            let chunk = (value & ((1u64 << take) - 1)) as u8;
            let idx = self.bits / 8;
            self.buf[idx] |= chunk << offset;
            value >>= take;
            left -= take;
            self.bits += take as usize;
        }
    }
}

/// Reads values written by [`BitWriter`] from untrusted bytes; every read is bounds-checked.
///
/// A failed read consumes nothing. Reading past the end gives
/// [`WireError::UnexpectedEnd`], with `needed` the bytes the read spans
/// (`ceil(bits / 8)`) and `remaining` the whole bytes left. Asking for more than 32 bits
/// (64 for [`BitReader::read_bits_u64`]) is a caller bug and panics; no input data can
/// cause a panic.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BitReader<'a> {
    /// A reader positioned at the first bit of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bits not yet read (including the final byte's padding).
    pub fn remaining_bits(&self) -> usize {
        self.buf.len() * 8 - self.pos
    }

    /// Bits read so far.
    pub fn bit_position(&self) -> usize {
        self.pos
    }

    /// Reads `bits` bits (0 to 32) as an unsigned integer.
    ///
    /// # Panics
    /// If `bits > 32` (API misuse).
    pub fn read_bits(&mut self, bits: u32) -> Result<u32, WireError> {
        assert!(bits <= 32, "read_bits: {bits} bits is more than 32");
        Ok(self.take(bits)? as u32)
    }

    /// Reads `bits` bits (0 to 64) as an unsigned integer.
    ///
    /// # Panics
    /// If `bits > 64` (API misuse).
    pub fn read_bits_u64(&mut self, bits: u32) -> Result<u64, WireError> {
        assert!(bits <= 64, "read_bits_u64: {bits} bits is more than 64");
        self.take(bits)
    }

    /// Reads one bit.
    pub fn read_bool(&mut self) -> Result<bool, WireError> {
        Ok(self.take(1)? == 1)
    }

    /// Skips to the next byte boundary; the skipped padding bits must all be zero.
    pub fn align(&mut self) -> Result<(), WireError> {
        let pad = (8 - self.pos % 8) % 8;
        if pad == 0 {
            return Ok(());
        }
        // pos is not on a boundary, so its byte exists.
        let byte = self.buf[self.pos / 8];
        if byte >> (self.pos % 8) != 0 {
            return Err(WireError::Invalid {
                what: "nonzero padding bits",
            });
        }
        self.pos += pad;
        Ok(())
    }

    /// Aligns (checking the padding) and reads `n` whole bytes.
    pub fn read_bytes_aligned(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let start = self.pos;
        self.align()?;
        let at = self.pos / 8;
        let remaining = self.buf.len() - at;
        if n > remaining {
            self.pos = start;
            return Err(WireError::UnexpectedEnd {
                needed: n,
                remaining,
            });
        }
        self.pos += n * 8;
        Ok(&self.buf[at..at + n])
    }

    /// Succeeds only at the end of the stream: at most 7 padding bits may remain and
    /// they must all be zero.
    pub fn finish(&self) -> Result<(), WireError> {
        let left = self.remaining_bits();
        if left >= 8 {
            return Err(WireError::TrailingBytes(left / 8));
        }
        self.clone().align()
    }

    fn take(&mut self, bits: u32) -> Result<u64, WireError> {
        if bits as usize > self.remaining_bits() {
            return Err(WireError::UnexpectedEnd {
                needed: bits.div_ceil(8) as usize,
                remaining: self.remaining_bits() / 8,
            });
        }
        let mut out = 0u64;
        let mut got = 0u32;
        while got < bits {
            let offset = (self.pos % 8) as u32;
            let take = (8 - offset).min(bits - got);
            let byte = u64::from(self.buf[self.pos / 8]);
            out |= ((byte >> offset) & ((1u64 << take) - 1)) << got;
            got += take;
            self.pos += take as usize;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_lsb_first() {
        let mut w = BitWriter::new();
        w.write_bool(true);
        w.write_bits(0b10, 2);
        w.write_bits(0x1f, 5); // fills byte 0
        w.write_bits(0xabc, 12);
        assert_eq!(w.bit_len(), 20);
        // byte0: 1 | 10<<1 | 11111<<3 = 0b1111_1101
        assert_eq!(w.as_bytes(), &[0b1111_1101, 0xbc, 0x0a]);

        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        assert!(r.read_bool().unwrap());
        assert_eq!(r.read_bits(2).unwrap(), 0b10);
        assert_eq!(r.read_bits(5).unwrap(), 0x1f);
        assert_eq!(r.read_bits(12).unwrap(), 0xabc);
        assert_eq!(r.remaining_bits(), 4);
        r.finish().unwrap();
    }

    #[test]
    fn wide_values_and_zero_width() {
        let mut w = BitWriter::new();
        w.write_bits(0, 0);
        w.write_bits(3, 3);
        w.write_bits(u32::MAX, 32);
        w.write_bits_u64(u64::MAX - 5, 64);
        w.write_bits_u64(0x1_2345_6789, 33);
        let bytes = w.into_bytes();
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(0).unwrap(), 0);
        assert_eq!(r.read_bits(3).unwrap(), 3);
        assert_eq!(r.read_bits(32).unwrap(), u32::MAX);
        assert_eq!(r.read_bits_u64(64).unwrap(), u64::MAX - 5);
        assert_eq!(r.read_bits_u64(33).unwrap(), 0x1_2345_6789);
        r.finish().unwrap();
    }

    #[test]
    fn reading_past_the_end_fails_and_consumes_nothing() {
        let mut r = BitReader::new(&[0xff]);
        assert_eq!(r.read_bits(3).unwrap(), 7);
        assert_eq!(
            r.read_bits(9),
            Err(WireError::UnexpectedEnd {
                needed: 2,
                remaining: 0
            })
        );
        assert_eq!(r.bit_position(), 3);
        assert_eq!(r.read_bits(5).unwrap(), 31);
        assert!(matches!(
            r.read_bool(),
            Err(WireError::UnexpectedEnd { .. })
        ));
        assert!(BitReader::new(&[]).read_bits(1).is_err());
    }

    #[test]
    fn padding_must_be_zero() {
        // One bit of data, then a stray 1 in the padding.
        let mut r = BitReader::new(&[0b0000_0011]);
        assert!(r.read_bool().unwrap());
        assert_eq!(
            r.finish(),
            Err(WireError::Invalid {
                what: "nonzero padding bits"
            })
        );
        assert!(r.clone().align().is_err());
        // A whole spare byte is trailing data, even if zero.
        let r = BitReader::new(&[0]);
        assert_eq!(r.finish(), Err(WireError::TrailingBytes(1)));
        let mut r = BitReader::new(&[0b1, 0]);
        r.read_bool().unwrap();
        assert_eq!(r.finish(), Err(WireError::TrailingBytes(1)));
        BitReader::new(&[]).finish().unwrap();
    }

    #[test]
    fn aligned_bytes() {
        let mut w = BitWriter::new();
        w.write_bits(5, 3);
        w.write_bytes_aligned(b"hi");
        w.write_bool(true);
        w.align();
        w.align();
        assert_eq!(w.bit_len(), 32);
        let bytes = w.into_bytes();
        assert_eq!(bytes, vec![5, b'h', b'i', 1]);
        let mut r = BitReader::new(&bytes);
        assert_eq!(r.read_bits(3).unwrap(), 5);
        assert_eq!(r.read_bytes_aligned(2).unwrap(), b"hi");
        assert!(r.read_bool().unwrap());
        r.align().unwrap();
        r.finish().unwrap();
        // Too few bytes: error, position unchanged.
        let mut r = BitReader::new(&[1, 2]);
        r.read_bool().unwrap();
        assert!(r.read_bytes_aligned(2).is_err());
        assert_eq!(r.bit_position(), 1);
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn oversized_value_is_api_misuse() {
        BitWriter::new().write_bits(4, 2);
    }

    #[test]
    #[should_panic(expected = "more than 32")]
    fn too_many_bits_is_api_misuse() {
        let _ = BitReader::new(&[0; 8]).read_bits(33);
    }

    #[test]
    fn bits_needed_matches_widths() {
        assert_eq!(bits_needed(u64::MAX), 64);
        assert_eq!(bits_needed(u64::from(u32::MAX)), 32);
        assert_eq!(bits_needed(2), 2);
        assert_eq!(bits_needed(3), 2);
        assert_eq!(bits_needed(4), 3);
    }
}
