//! The adapter's one message: which entities a client owns (and predicts), sent reliably
//! by the server whenever that set changes.

use lagless_replication::{Reader, WireError, Writer};
use std::collections::BTreeSet;

/// The first byte of an ownership message.
const TAG: u8 = 0xB0;
/// Most entities one client may own: a bound on what a message can make the client do.
pub const MAX_OWNED: usize = 1024;

/// The message saying the client owns `ids` (at most [`MAX_OWNED`] are sent).
pub fn encode(ids: &BTreeSet<u32>) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_u8(TAG);
    let n = ids.len().min(MAX_OWNED);
    w.write_varint_u32(n as u32);
    for id in ids.iter().take(n) {
        w.write_varint_u32(*id);
    }
    w.into_bytes()
}

/// The owned ids in a message from the server; an error for anything else (network
/// bytes: never panics).
pub fn decode(bytes: &[u8]) -> Result<BTreeSet<u32>, WireError> {
    let mut r = Reader::new(bytes);
    if r.read_u8()? != TAG {
        return Err(WireError::Invalid {
            what: "ownership message tag",
        });
    }
    let n = r.read_varint_u32()? as usize;
    if n > MAX_OWNED {
        return Err(WireError::TooLarge {
            what: "owned entities",
            len: n,
            max: MAX_OWNED,
        });
    }
    let ids = (0..n)
        .map(|_| r.read_varint_u32())
        .collect::<Result<BTreeSet<u32>, _>>()?;
    r.finish()?;
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let ids: BTreeSet<u32> = [0, 7, 300, u32::MAX].into();
        assert_eq!(decode(&encode(&ids)), Ok(ids.clone()));
        let bytes = encode(&ids);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(&[0x00, 1, 1]).is_err());
        assert!(decode(&[TAG, 0xFF, 0xFF, 0x03]).is_err()); // 65535 ids claimed
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode(&long).is_err());
    }
}
