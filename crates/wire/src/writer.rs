/// Appends little-endian values to a growable byte buffer.
///
/// Writing never fails; limits are enforced by whoever assembles packets.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer that will not reallocate before `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: Vec::with_capacity(capacity),
        }
    }

    /// Writes onto the end of an existing buffer (which is kept).
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Self { buf }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Consumes the writer, returning its bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Appends one byte.
    pub fn write_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a bool as one byte (0 or 1).
    pub fn write_bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// Appends a little-endian u16.
    pub fn write_u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian u32.
    pub fn write_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a little-endian u64.
    pub fn write_u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends an f32 by its IEEE-754 bits, so the value round-trips exactly.
    pub fn write_f32(&mut self, v: f32) {
        self.write_u32(v.to_bits());
    }

    /// Appends an unsigned LEB128 varint (1 byte below 128, at most 5 bytes).
    pub fn write_varint_u32(&mut self, v: u32) {
        self.write_varint_u64(u64::from(v));
    }

    /// Appends an unsigned LEB128 varint (at most 10 bytes).
    pub fn write_varint_u64(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(byte);
                return;
            }
            self.buf.push(byte | 0x80);
        }
    }

    /// Appends a signed integer as a zig-zag varint, so small magnitudes stay short.
    pub fn write_varint_i32(&mut self, v: i32) {
        self.write_varint_u32(((v << 1) ^ (v >> 31)) as u32);
    }

    /// Appends raw bytes with no length prefix.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends a varint length followed by the bytes.
    pub fn write_len_prefixed(&mut self, bytes: &[u8]) {
        // A usize longer than u32 cannot be a packet; saturate rather than truncate silently.
        self.write_varint_u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        self.write_bytes(bytes);
    }
}
