//! Variable-length integers for bit streams: small values take a few bits.
//!
//! The encoding is documented on [`BitWriter::write_var_u32`].

use crate::{BitReader, BitWriter, WireError};

/// Payload width of each class.
const WIDTHS: [u32; 7] = [0, 1, 2, 4, 8, 16, 32];
/// First value of each class.
const BASES: [u64; 7] = [0, 1, 3, 7, 23, 279, 65815];
const LAST: usize = WIDTHS.len() - 1;

fn class_of(v: u32) -> usize {
    let v = u64::from(v);
    // BASES is ascending; the class is the last base not above v.
    let mut class = 0;
    for (i, &base) in BASES.iter().enumerate() {
        if v >= base {
            class = i;
        }
    }
    class
}

/// Bits [`BitWriter::write_var_u32`] spends on `v` (1 to 38).
pub fn var_u32_bits(v: u32) -> u32 {
    let class = class_of(v);
    let prefix = if class == LAST { LAST } else { class + 1 };
    prefix as u32 + WIDTHS[class]
}

/// Bits [`BitWriter::write_var_i32`] spends on `v` (1 to 38).
pub fn var_i32_bits(v: i32) -> u32 {
    var_u32_bits(zigzag(v))
}

/// Zig-zag mapping of signed to unsigned (0, -1, 1, -2 ... to 0, 1, 2, 3 ...), so small
/// magnitudes of either sign become small numbers.
pub fn zigzag(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

impl BitWriter {
    /// Appends an unsigned integer in a variable-length form for small values.
    ///
    /// A value is sent as a size class in unary (`k` one-bits then a zero, except the last
    /// class which needs no terminating zero) followed by its offset within the class:
    ///
    /// | class | prefix    | payload bits | values                | total bits |
    /// |-------|-----------|--------------|-----------------------|------------|
    /// | 0     | `0`       | 0            | 0                     | 1          |
    /// | 1     | `10`      | 1            | 1..=2                 | 3          |
    /// | 2     | `110`     | 2            | 3..=6                 | 5          |
    /// | 3     | `1110`    | 4            | 7..=22                | 8          |
    /// | 4     | `11110`   | 8            | 23..=278              | 13         |
    /// | 5     | `111110`  | 16           | 279..=65814           | 22         |
    /// | 6     | `111111`  | 32           | 65815..=u32::MAX      | 38         |
    ///
    /// Zero costs one bit, which suits deltas and "how many changed" counts where nothing
    /// changing is the common case. Because each class starts where the previous one ends,
    /// every value has exactly one encoding (there is no over-long form to reject); the only
    /// invalid input is a class-6 payload that would run past `u32::MAX`.
    ///
    /// Signed values use zig-zag (0, -1, 1, -2, 2, ... -> 0, 1, 2, 3, 4, ...), so
    /// -1..=1 costs at most 3 bits.
    pub fn write_var_u32(&mut self, v: u32) {
        let class = class_of(v);
        for _ in 0..class {
            self.write_bool(true);
        }
        if class != LAST {
            self.write_bool(false);
        }
        let offset = u64::from(v) - BASES[class];
        self.write_bits_u64(offset, WIDTHS[class]);
    }

    /// Appends a signed integer, zig-zag mapped, as [`BitWriter::write_var_u32`].
    pub fn write_var_i32(&mut self, v: i32) {
        self.write_var_u32(zigzag(v));
    }
}

impl BitReader<'_> {
    /// Reads an integer written by [`BitWriter::write_var_u32`]; a value past `u32::MAX`
    /// is [`WireError::VarintOverflow`]. On error the reader position is unspecified.
    pub fn read_var_u32(&mut self) -> Result<u32, WireError> {
        let mut class = 0;
        while class < LAST && self.read_bool()? {
            class += 1;
        }
        let offset = self.read_bits_u64(WIDTHS[class])?;
        u32::try_from(BASES[class] + offset).map_err(|_| WireError::VarintOverflow { bits: 32 })
    }

    /// Reads a signed integer written by [`BitWriter::write_var_i32`].
    pub fn read_var_i32(&mut self) -> Result<i32, WireError> {
        self.read_var_u32().map(unzigzag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_u(v: u32) -> (Vec<u8>, usize) {
        let mut w = BitWriter::new();
        w.write_var_u32(v);
        let len = w.bit_len();
        (w.into_bytes(), len)
    }

    #[test]
    fn class_boundaries_round_trip_with_documented_sizes() {
        let cases = [
            (0u32, 1usize),
            (1, 3),
            (2, 3),
            (3, 5),
            (6, 5),
            (7, 8),
            (22, 8),
            (23, 13),
            (278, 13),
            (279, 22),
            (65814, 22),
            (65815, 38),
            (u32::MAX, 38),
        ];
        for (v, bits) in cases {
            let (bytes, len) = encode_u(v);
            assert_eq!(len, bits, "size of {v}");
            assert_eq!(var_u32_bits(v) as usize, bits);
            let mut r = BitReader::new(&bytes);
            assert_eq!(r.read_var_u32().unwrap(), v);
            r.finish().unwrap();
        }
    }

    #[test]
    fn zigzag_keeps_small_magnitudes_short() {
        for (v, bits) in [(0, 1), (-1, 3), (1, 3), (-3, 5), (3, 5), (i32::MIN, 38)] {
            assert_eq!(var_i32_bits(v), bits, "{v}");
            let mut w = BitWriter::new();
            w.write_var_i32(v);
            let bytes = w.into_bytes();
            assert_eq!(BitReader::new(&bytes).read_var_i32().unwrap(), v);
        }
        assert_eq!(unzigzag(zigzag(i32::MAX)), i32::MAX);
    }

    #[test]
    fn overflowing_last_class_is_rejected() {
        // Six one-bits then 32 one-bits: 65815 + u32::MAX does not fit.
        let mut w = BitWriter::new();
        w.write_bits(0b11_1111, 6);
        w.write_bits(u32::MAX, 32);
        let bytes = w.into_bytes();
        assert_eq!(
            BitReader::new(&bytes).read_var_u32(),
            Err(WireError::VarintOverflow { bits: 32 })
        );
        // Largest valid payload.
        let mut w = BitWriter::new();
        w.write_bits(0b11_1111, 6);
        w.write_bits(u32::MAX - 65815, 32);
        let bytes = w.into_bytes();
        assert_eq!(BitReader::new(&bytes).read_var_u32(), Ok(u32::MAX));
    }

    #[test]
    fn truncated_input_is_an_error() {
        let (bytes, _) = encode_u(70_000);
        assert!(matches!(
            BitReader::new(&bytes[..3]).read_var_u32(),
            Err(WireError::UnexpectedEnd { .. })
        ));
        assert!(BitReader::new(&[0xff]).read_var_u32().is_err());
    }
}
