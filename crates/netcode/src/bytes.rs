//! Little-endian cursor helpers. The reader never panics: every read past the end fails.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Reads little-endian values from a byte slice; every method fails instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }

    /// One netcode address: type byte 1 (IPv4: 4 octets) or 2 (IPv6: 8 u16 segments, each
    /// little-endian), then the port little-endian. `None` on an unknown type or short input.
    pub(crate) fn address(&mut self) -> Option<SocketAddr> {
        match self.u8()? {
            crate::ADDRESS_IPV4 => {
                let o: [u8; 4] = self.array()?;
                let port = self.u16()?;
                Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(o)), port))
            }
            crate::ADDRESS_IPV6 => {
                let mut seg = [0u16; 8];
                for s in &mut seg {
                    *s = self.u16()?;
                }
                let port = self.u16()?;
                Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(seg)), port))
            }
            _ => None,
        }
    }
}

/// Appends little-endian values to a `Vec<u8>`.
pub(crate) trait WriteLe {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_address(&mut self, addr: &SocketAddr);
}

impl WriteLe for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_address(&mut self, addr: &SocketAddr) {
        match addr.ip() {
            IpAddr::V4(ip) => {
                self.put_u8(crate::ADDRESS_IPV4);
                self.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                self.put_u8(crate::ADDRESS_IPV6);
                for s in ip.segments() {
                    self.put_u16(s);
                }
            }
        }
        self.put_u16(addr.port());
    }
}
