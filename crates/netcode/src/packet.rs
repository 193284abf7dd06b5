//! netcode.io packets: the unencrypted connection request and the encrypted packet types,
//! with the prefix byte and the variable-length sequence number.

use crate::bytes::{Reader, WriteLe};
use crate::crypto::{self, Key};
use crate::error::PacketError;
use crate::{
    CHALLENGE_TOKEN_BYTES, CONNECT_TOKEN_NONCE_BYTES, CONNECT_TOKEN_PRIVATE_BYTES, MAC_BYTES,
    MAX_PAYLOAD_BYTES, REQUEST_PACKET_BYTES, VERSION_INFO,
};

/// The seven packet types (the low 4 bits of the prefix byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Client to server, unencrypted, carries the private connect token.
    Request = 0,
    /// Server to client: the server is full.
    Denied = 1,
    /// Server to client: a challenge token to echo back.
    Challenge = 2,
    /// Client to server: the echoed challenge token.
    Response = 3,
    /// Both ways: keeps the connection alive; from the server it carries the client index.
    KeepAlive = 4,
    /// Both ways: application data.
    Payload = 5,
    /// Both ways: the sender is leaving.
    Disconnect = 6,
}

impl PacketType {
    /// The type for a prefix byte's low 4 bits, if valid.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Request,
            1 => Self::Denied,
            2 => Self::Challenge,
            3 => Self::Response,
            4 => Self::KeepAlive,
            5 => Self::Payload,
            6 => Self::Disconnect,
            _ => return None,
        })
    }

    /// Whether replay protection applies (keep-alive, payload, disconnect).
    pub fn replay_protected(self) -> bool {
        matches!(self, Self::KeepAlive | Self::Payload | Self::Disconnect)
    }
}

/// The readable fields of a connection request; the private token stays encrypted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPacket {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// Unix time the connect token expires.
    pub expire_timestamp: u64,
    /// The private token's nonce.
    pub nonce: [u8; CONNECT_TOKEN_NONCE_BYTES],
    /// The encrypted private connect token.
    pub private_data: Box<[u8; CONNECT_TOKEN_PRIVATE_BYTES]>,
}

/// A challenge or response body: the challenge token and its sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChallengeBody {
    /// The sequence the server encrypted the challenge token with.
    pub token_sequence: u64,
    /// The encrypted challenge token.
    pub token_data: Box<[u8; CHALLENGE_TOKEN_BYTES]>,
}

/// A decoded packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// Connection request (type 0).
    Request(RequestPacket),
    /// Connection denied (type 1).
    Denied,
    /// Connection challenge (type 2).
    Challenge(ChallengeBody),
    /// Connection response (type 3).
    Response(ChallengeBody),
    /// Keep-alive (type 4).
    KeepAlive {
        /// The client's slot on the server.
        client_index: u32,
        /// The server's number of slots.
        max_clients: u32,
    },
    /// Payload (type 5), 1 to 1200 bytes.
    Payload(Vec<u8>),
    /// Disconnect (type 6).
    Disconnect,
}

impl Packet {
    /// This packet's type.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Self::Request(_) => PacketType::Request,
            Self::Denied => PacketType::Denied,
            Self::Challenge(_) => PacketType::Challenge,
            Self::Response(_) => PacketType::Response,
            Self::KeepAlive { .. } => PacketType::KeepAlive,
            Self::Payload(_) => PacketType::Payload,
            Self::Disconnect => PacketType::Disconnect,
        }
    }

    /// Writes the packet. A request is written as is (`sequence` and `key` unused); every
    /// other type is encrypted with `key`, its nonce built from `sequence`.
    pub fn write(
        &self,
        sequence: u64,
        key: &Key,
        protocol_id: u64,
    ) -> Result<Vec<u8>, PacketError> {
        if let Self::Request(r) = self {
            let mut v = Vec::with_capacity(REQUEST_PACKET_BYTES);
            v.put_u8(0);
            v.extend_from_slice(VERSION_INFO);
            v.put_u64(r.protocol_id);
            v.put_u64(r.expire_timestamp);
            v.extend_from_slice(&r.nonce);
            v.extend_from_slice(&r.private_data[..]);
            return Ok(v);
        }
        let seq_bytes = sequence_bytes_required(sequence);
        let prefix = (self.packet_type() as u8) | (seq_bytes << 4);
        let mut v = Vec::with_capacity(64);
        v.put_u8(prefix);
        v.extend_from_slice(&sequence.to_le_bytes()[..seq_bytes as usize]);
        let body_start = v.len();
        match self {
            Self::Request(_) | Self::Denied | Self::Disconnect => {}
            Self::Challenge(c) | Self::Response(c) => {
                v.put_u64(c.token_sequence);
                v.extend_from_slice(&c.token_data[..]);
            }
            Self::KeepAlive {
                client_index,
                max_clients,
            } => {
                v.put_u32(*client_index);
                v.put_u32(*max_clients);
            }
            Self::Payload(p) => {
                if p.is_empty() || p.len() > MAX_PAYLOAD_BYTES {
                    return Err(PacketError::PayloadSize);
                }
                v.extend_from_slice(p);
            }
        }
        v.extend_from_slice(&[0u8; MAC_BYTES]);
        let ad = packet_ad(protocol_id, prefix);
        if !crypto::seal(key, sequence, &ad, &mut v[body_start..]) {
            return Err(PacketError::DecryptFailed);
        }
        Ok(v)
    }

    /// Reads a whole packet without replay protection (tests, tools). Servers and clients use
    /// [`read_header`], their replay window, then [`open`].
    pub fn read(
        bytes: &[u8],
        key: &Key,
        protocol_id: u64,
        now_unix: u64,
    ) -> Result<Packet, PacketError> {
        if bytes.first() == Some(&0) {
            return read_request(bytes, protocol_id, now_unix).map(Packet::Request);
        }
        let header = read_header(bytes)?;
        open(bytes, &header, key, protocol_id)
    }
}

/// Bytes needed for `sequence` with high zero bytes left out: 1 (for 0 too) to 8.
pub fn sequence_bytes_required(sequence: u64) -> u8 {
    let used = 64 - sequence.leading_zeros();
    (used.div_ceil(8)).max(1) as u8
}

fn packet_ad(protocol_id: u64, prefix: u8) -> [u8; 22] {
    let mut ad = [0u8; 22];
    ad[..13].copy_from_slice(VERSION_INFO);
    ad[13..21].copy_from_slice(&protocol_id.to_le_bytes());
    ad[21] = prefix;
    ad
}

/// The clear header of an encrypted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The prefix byte.
    pub prefix: u8,
    /// The packet type from the prefix byte.
    pub packet_type: PacketType,
    /// The sequence number (the nonce).
    pub sequence: u64,
    /// Where the encrypted body starts.
    pub body_offset: usize,
}

/// Reads the prefix byte and sequence number of an encrypted packet (type 1 to 6), checking
/// the sizes and ranges the standard lists before any decryption.
pub fn read_header(bytes: &[u8]) -> Result<Header, PacketError> {
    if bytes.len() < 1 + 1 + MAC_BYTES {
        return Err(PacketError::TooSmall);
    }
    let prefix = bytes[0];
    let packet_type = PacketType::from_u8(prefix & 0xF).ok_or(PacketError::InvalidType)?;
    if packet_type == PacketType::Request {
        return Err(PacketError::RequestWrongSize);
    }
    let seq_bytes = (prefix >> 4) as usize;
    if !(1..=8).contains(&seq_bytes) {
        return Err(PacketError::BadSequenceBytes);
    }
    if bytes.len() < 1 + seq_bytes + MAC_BYTES {
        return Err(PacketError::TooSmall);
    }
    let mut seq = [0u8; 8];
    seq[..seq_bytes].copy_from_slice(&bytes[1..1 + seq_bytes]);
    Ok(Header {
        prefix,
        packet_type,
        sequence: u64::from_le_bytes(seq),
        body_offset: 1 + seq_bytes,
    })
}

/// Decrypts the body of an encrypted packet whose header was read by [`read_header`] and
/// checks its size for the type.
pub fn open(
    bytes: &[u8],
    header: &Header,
    key: &Key,
    protocol_id: u64,
) -> Result<Packet, PacketError> {
    let body = bytes
        .get(header.body_offset..)
        .ok_or(PacketError::TooSmall)?;
    if body.len() < MAC_BYTES
        || body.len() > MAX_PAYLOAD_BYTES + MAC_BYTES + 8 + CHALLENGE_TOKEN_BYTES
    {
        return Err(PacketError::WrongSize);
    }
    let mut buf = body.to_vec();
    let ad = packet_ad(protocol_id, header.prefix);
    if !crypto::open(key, header.sequence, &ad, &mut buf) {
        return Err(PacketError::DecryptFailed);
    }
    buf.truncate(buf.len() - MAC_BYTES);
    let mut r = Reader::new(&buf);
    let wrong = PacketError::WrongSize;
    let packet = match header.packet_type {
        PacketType::Request => return Err(PacketError::InvalidType),
        PacketType::Denied if buf.is_empty() => Packet::Denied,
        PacketType::Disconnect if buf.is_empty() => Packet::Disconnect,
        PacketType::Challenge | PacketType::Response if buf.len() == 8 + CHALLENGE_TOKEN_BYTES => {
            let token_sequence = r.u64().ok_or(wrong)?;
            let token_data = Box::new(r.array().ok_or(wrong)?);
            let body = ChallengeBody {
                token_sequence,
                token_data,
            };
            if header.packet_type == PacketType::Challenge {
                Packet::Challenge(body)
            } else {
                Packet::Response(body)
            }
        }
        PacketType::KeepAlive if buf.len() == 8 => Packet::KeepAlive {
            client_index: r.u32().ok_or(wrong)?,
            max_clients: r.u32().ok_or(wrong)?,
        },
        PacketType::Payload if (1..=MAX_PAYLOAD_BYTES).contains(&buf.len()) => Packet::Payload(buf),
        _ => return Err(wrong),
    };
    Ok(packet)
}

/// Reads a connection request, in the standard's order: exact size, version info, protocol
/// id, expiry. The private token is left encrypted.
pub fn read_request(
    bytes: &[u8],
    protocol_id: u64,
    now_unix: u64,
) -> Result<RequestPacket, PacketError> {
    if bytes.len() != REQUEST_PACKET_BYTES {
        return Err(PacketError::RequestWrongSize);
    }
    let mut r = Reader::new(bytes);
    let bad = PacketError::RequestWrongSize;
    if r.u8().ok_or(bad)? != 0 {
        return Err(PacketError::InvalidType);
    }
    if r.bytes(VERSION_INFO.len()).ok_or(bad)? != VERSION_INFO {
        return Err(PacketError::BadVersion);
    }
    let packet_protocol_id = r.u64().ok_or(bad)?;
    if packet_protocol_id != protocol_id {
        return Err(PacketError::WrongProtocolId);
    }
    let expire_timestamp = r.u64().ok_or(bad)?;
    if expire_timestamp <= now_unix {
        return Err(PacketError::TokenExpired);
    }
    let nonce = r.array().ok_or(bad)?;
    let private_data = Box::new(r.array().ok_or(bad)?);
    Ok(RequestPacket {
        protocol_id,
        expire_timestamp,
        nonce,
        private_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_bytes() {
        assert_eq!(sequence_bytes_required(0), 1);
        assert_eq!(sequence_bytes_required(0x11), 1);
        assert_eq!(sequence_bytes_required(0x1122), 2);
        assert_eq!(sequence_bytes_required(0x112233), 3);
        assert_eq!(sequence_bytes_required(0x1122_3344), 4);
        assert_eq!(sequence_bytes_required(0x11_2233_4455), 5);
        assert_eq!(sequence_bytes_required(0x1122_3344_5566), 6);
        assert_eq!(sequence_bytes_required(0x11_2233_4455_6677), 7);
        assert_eq!(sequence_bytes_required(0x1122_3344_5566_7788), 8);
        assert_eq!(sequence_bytes_required(u64::MAX), 8);
    }

    #[test]
    fn round_trip_every_type() {
        let key = [7u8; 32];
        let packets = [
            Packet::Denied,
            Packet::Challenge(ChallengeBody {
                token_sequence: 9,
                token_data: Box::new([3; 300]),
            }),
            Packet::Response(ChallengeBody {
                token_sequence: 9,
                token_data: Box::new([4; 300]),
            }),
            Packet::KeepAlive {
                client_index: 3,
                max_clients: 64,
            },
            Packet::Payload(vec![1, 2, 3]),
            Packet::Payload(vec![0xAB; MAX_PAYLOAD_BYTES]),
            Packet::Disconnect,
        ];
        for (i, p) in packets.iter().enumerate() {
            for seq in [0u64, 1000, 1 << 63, u64::MAX] {
                let bytes = p.write(seq, &key, 0x1122).expect("write");
                assert_eq!(bytes[0] >> 4, sequence_bytes_required(seq), "{i}");
                let back = Packet::read(&bytes, &key, 0x1122, 0).expect("read");
                assert_eq!(&back, p);
                // Another key, another protocol id, or a flipped bit: refused.
                assert_eq!(
                    Packet::read(&bytes, &[8; 32], 0x1122, 0),
                    Err(PacketError::DecryptFailed)
                );
                assert_eq!(
                    Packet::read(&bytes, &key, 0x1123, 0),
                    Err(PacketError::DecryptFailed)
                );
                let mut forged = bytes.clone();
                let last = forged.len() - 1;
                forged[last] ^= 1;
                assert_eq!(
                    Packet::read(&forged, &key, 0x1122, 0),
                    Err(PacketError::DecryptFailed)
                );
            }
        }
        assert_eq!(
            Packet::Payload(vec![]).write(0, &key, 1),
            Err(PacketError::PayloadSize)
        );
    }

    #[test]
    fn sequence_1000_is_two_bytes_reversed() {
        let bytes = Packet::Disconnect.write(1000, &[0; 32], 0).expect("write");
        assert_eq!(&bytes[..3], &[0x26, 0xE8, 0x03]);
        assert_eq!(bytes.len(), 3 + MAC_BYTES);
    }
}
