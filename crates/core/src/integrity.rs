//! The optional packet checksum ([`crate::ServerConfig::checksum`],
//! [`crate::ClientConfig::checksum`]).
//!
//! The sessions trust their transport to deliver a packet's bytes as they were sent, or
//! not at all: a damaged packet that still decodes is taken as sent (a reliable message
//! duplicated or reordered, a wrong snapshot shown). netcode.io guarantees it (every
//! packet is authenticated). Over a transport that does not, both ends turn the
//! checksum on: every packet then ends with the CRC-32 of the rest, four bytes, checked
//! before anything is decoded.

use crate::ProtocolError;
use lagless_wire::crc32;

/// Bytes the checksum adds to every packet.
pub const CHECKSUM_BYTES: usize = 4;

/// Appends the checksum of `packet` to it.
pub(crate) fn seal(packet: &mut Vec<u8>) {
    let sum = crc32(packet);
    packet.extend_from_slice(&sum.to_le_bytes());
}

/// The packet without its checksum, if the checksum matches.
pub(crate) fn open(packet: &[u8]) -> Result<&[u8], ProtocolError> {
    let split = packet
        .len()
        .checked_sub(CHECKSUM_BYTES)
        .ok_or(ProtocolError::BadChecksum)?;
    let (body, sum) = packet.split_at(split);
    if sum != crc32(body).to_le_bytes() {
        return Err(ProtocolError::BadChecksum);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_packets_open_and_damaged_ones_do_not() {
        let mut p = vec![0x53, 1, 2, 3, 4, 5];
        seal(&mut p);
        assert_eq!(p.len(), 6 + CHECKSUM_BYTES);
        assert_eq!(open(&p), Ok(&[0x53, 1, 2, 3, 4, 5][..]));
        for bit in 0..p.len() * 8 {
            let mut bad = p.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(open(&bad), Err(ProtocolError::BadChecksum), "bit {bit}");
        }
        for n in 0..p.len() {
            assert!(open(&p[..n]).is_err(), "prefix {n}");
        }
    }
}
