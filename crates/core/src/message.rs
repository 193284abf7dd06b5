//! The packets the core exchanges, and their codecs.
//!
//! Two kinds exist: client -> server [`InputMessage`] and server -> client
//! [`SnapshotFragment`]. Every decoder takes untrusted bytes and returns a
//! [`ProtocolError`] on anything malformed; none panics.
//!
//! # Wire format
//!
//! Integers little-endian; `varint` is LEB128, `zigzag` a zig-zag varint. A field in
//! brackets is present only when its flag bit is set.
//!
//! ```text
//! input    = 'I' seq:u16 client_time_us:u32 flags:u8
//!            [tick_hz:varint]                            flags bit 1
//!            ( ack:u16 start_offset:zigzag               flags bit 0: snapshot ack
//!              not_acks:varint                           (the complement of snapshot_acks)
//!            | start_tick:u16 )                          otherwise
//!            count:varint  runs x { repeat:varint input }
//!            [len:varint channel packet]                 flags bit 2: messages
//!                                                        flags bit 3: resync, no field
//!
//! snapshot = 'S' seq:u16 tick:u32 flags:u8
//!            [tick_hz:varint server_instance:u32]        flags bit 3
//!            [client_time_us:u32 hold_us:varint]         flags bit 0: echo
//!            [acked_through:u16 input_slack:zigzag]      flags bit 1: input ack
//!            [index:u8 count:u8]                         unless flags bit 4 (whole)
//!            [len:varint channel packet]                 flags bit 5: messages
//!            payload (the rest)                          flags bit 2: essential part
//! ```
//!
//! The *message section* (`len` and a [`crate::channel`] packet of 1 to
//! [`MAX_CHANNEL_PACKET_BYTES`] bytes) carries game messages and the acknowledgements for
//! the other direction's. A client sends one in an input message whenever its channel has a
//! message due or owes an acknowledgement; a server sends one in fragment 0 of a full
//! snapshot (never in an essential part). Every packet is processed on arrival, so the
//! messages in fragment 0 arrive whenever that one packet does, whether or not the rest of
//! the snapshot does; lost reliable ones are resent with a later snapshot.
//!
//! A snapshot's fragments share [`FRAGMENT_PAYLOAD_BYTES`] of room each: fragment 0's
//! section comes out of its room, and every fragment but the last fills its room exactly
//! (section plus payload). Packets without messages are byte for byte what they were before
//! the section existed.
//!
//! An input message with a snapshot acknowledgement names, after the newest snapshot, which
//! of the 32 ticks before it the client holds too (`not_acks`), so the server rebuilds the
//! client's view from exactly the snapshots that arrived: a change in a snapshot that
//! arrived is not sent again. A client from before that field is not understood: the
//! transport's protocol id changed with it.

use crate::channel::{MAX_CHANNEL_PACKET_BYTES, varint_len};
use crate::{Input, ProtocolError};
use lagless_wire::{Reader, Seq16, WireError, Writer};

/// Largest packet the core produces or accepts. 1200 bytes keeps clear of IPv6's minimum
/// MTU (1280) after UDP/IP and netcode.io overhead, so nothing is fragmented by IP.
pub const MAX_PACKET_BYTES: usize = 1200;

/// First byte of a client input message.
pub const KIND_INPUT: u8 = 0x49; // 'I'
/// First byte of a server snapshot fragment.
pub const KIND_SNAPSHOT: u8 = 0x53; // 'S'

/// Bytes of room per fragment for the snapshot payload (and, in fragment 0, the message
/// section); the header takes at most 40 bytes.
pub const FRAGMENT_PAYLOAD_BYTES: usize = MAX_PACKET_BYTES - 40;

/// Client -> server: redundant inputs plus the client's acknowledgements and clock stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputMessage<I> {
    /// Packet sequence number (per client, per direction).
    pub seq: Seq16,
    /// Client's local time in microseconds (wrapping), echoed back for RTT measurement.
    pub client_time_us: u32,
    /// Newest complete snapshot the client holds (low 16 bits of its tick), if any.
    pub snapshot_ack: Option<Seq16>,
    /// The snapshots of the 32 ticks before `snapshot_ack` the client also holds: bit `i`
    /// is tick `snapshot_ack - 1 - i` (0 without an ack). Repeated in every message, so
    /// a server learns of each snapshot that arrived, not only the newest, and one lost
    /// message loses none of it. Sent as the varint of its complement: one byte while
    /// every snapshot arrives.
    pub snapshot_acks: u32,
    /// Low 16 bits of the tick of `inputs[0]`; expanded by the server against its own tick.
    pub start_tick: Seq16,
    /// Inputs for consecutive ticks starting at `start_tick` (may be empty: a ping).
    pub inputs: Vec<I>,
    /// The client's tick rate, sent until it holds a snapshot, so a server running at
    /// another rate refuses it with a clear error instead of mispredicting everything.
    pub tick_hz: Option<u16>,
    /// The client holds no snapshot the server may delta-encode against: "send me one
    /// against nothing", whatever `snapshot_ack` says.
    pub resync: bool,
    /// The client's message section: a [`crate::channel`] packet of 1 to
    /// [`MAX_CHANNEL_PACKET_BYTES`] bytes, opaque to this codec.
    pub messages: Option<Vec<u8>>,
}

impl<I: Input> InputMessage<I> {
    /// Encodes the message. Runs of identical consecutive inputs are sent once with a
    /// repeat count, so a held key costs a couple of bytes however long the redundancy window.
    pub fn encode(&self, w: &mut Writer) {
        w.write_u8(KIND_INPUT);
        w.write_u16(self.seq.0);
        w.write_u32(self.client_time_us);
        let flags = u8::from(self.snapshot_ack.is_some())
            | (u8::from(self.tick_hz.is_some()) << 1)
            | (u8::from(self.messages.is_some()) << 2)
            | (u8::from(self.resync) << 3);
        w.write_u8(flags);
        if let Some(hz) = self.tick_hz {
            w.write_varint_u32(u32::from(hz));
        }
        match self.snapshot_ack {
            Some(a) => {
                w.write_u16(a.0);
                // The first input's tick is a few dozen ticks past the newest snapshot the
                // client holds (its lead plus the round trip): a one-byte zig-zag varint
                // relative to the ack instead of 16 bits (the Unity physics prediction
                // article packs it in 8-10 bits).
                w.write_varint_i32(i32::from(self.start_tick.diff(a)));
                w.write_varint_u32(!self.snapshot_acks);
            }
            None => w.write_u16(self.start_tick.0),
        }
        w.write_varint_u32(self.inputs.len() as u32);
        let mut i = 0;
        while i < self.inputs.len() {
            let mut run = 1;
            while i + run < self.inputs.len() && self.inputs[i + run] == self.inputs[i] {
                run += 1;
            }
            w.write_varint_u32(run as u32);
            self.inputs[i].encode(w);
            i += run;
        }
        // Last, so a client can measure the rest before it asks its channel for a section
        // that fits.
        if let Some(m) = &self.messages {
            w.write_len_prefixed(m);
        }
    }

    /// Decodes a message, accepting at most `max_inputs` inputs.
    pub fn decode(bytes: &[u8], max_inputs: usize) -> Result<Self, ProtocolError> {
        let (mut r, seq) = open_packet(bytes, KIND_INPUT)?;
        let client_time_us = r.read_u32()?;
        let flags = r.read_u8()?;
        if flags & !15 != 0 {
            return Err(WireError::Invalid {
                what: "input flags",
            }
            .into());
        }
        let tick_hz = if flags & 2 != 0 {
            Some(read_tick_hz(&mut r)?)
        } else {
            None
        };
        let (snapshot_ack, start_tick, snapshot_acks) = if flags & 1 != 0 {
            let ack = Seq16(r.read_u16()?);
            let delta = i16::try_from(r.read_varint_i32()?).map_err(|_| WireError::Invalid {
                what: "start tick offset",
            })?;
            let acks = !r.read_varint_u32()?;
            (Some(ack), Seq16(ack.0.wrapping_add_signed(delta)), acks)
        } else {
            (None, Seq16(r.read_u16()?), 0)
        };
        let count = r.read_count(max_inputs, "input count")?;
        let mut inputs: Vec<I> = Vec::with_capacity(count);
        while inputs.len() < count {
            let run = r.read_varint_u32()? as usize;
            if run == 0 || run > count - inputs.len() {
                return Err(WireError::Invalid {
                    what: "input run length",
                }
                .into());
            }
            let input = I::decode(&mut r)?;
            // The encoder merges equal neighbours into one run; two runs of one input
            // are bytes it never writes.
            if inputs.last() == Some(&input) {
                return Err(WireError::Invalid {
                    what: "input runs not merged",
                }
                .into());
            }
            inputs.extend(std::iter::repeat_n(input, run));
        }
        let messages = if flags & 4 != 0 {
            Some(read_section(&mut r)?.to_vec())
        } else {
            None
        };
        r.finish()?;
        Ok(Self {
            seq,
            client_time_us,
            snapshot_ack,
            snapshot_acks,
            start_tick,
            inputs,
            tick_hz,
            resync: flags & 8 != 0,
            messages,
        })
    }
}

/// A tick rate on the wire: 1 to 1000 Hz, as the sessions accept.
fn read_tick_hz(r: &mut Reader<'_>) -> Result<u16, ProtocolError> {
    match r.read_varint_u32()? {
        hz @ 1..=1000 => Ok(hz as u16),
        _ => Err(WireError::Invalid { what: "tick rate" }.into()),
    }
}

/// A message section: a varint length in `1..=MAX_CHANNEL_PACKET_BYTES` and the channel
/// packet. Its contents are the channel's to check.
fn read_section<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], ProtocolError> {
    let section = r.read_len_prefixed(MAX_CHANNEL_PACKET_BYTES, "message section")?;
    if section.is_empty() {
        // The flag says there is one; an empty one is bytes no sender writes.
        return Err(WireError::Invalid {
            what: "empty message section",
        }
        .into());
    }
    Ok(section)
}

/// Bytes a message section of `len` takes in a packet, its length prefix included.
pub fn section_wire_len(len: usize) -> usize {
    varint_len(len) + len
}

/// Checks a packet's size and kind and reads its sequence number, the header every
/// message starts with.
fn open_packet(bytes: &[u8], kind: u8) -> Result<(Reader<'_>, Seq16), ProtocolError> {
    if bytes.len() > MAX_PACKET_BYTES {
        return Err(ProtocolError::PacketTooLarge { len: bytes.len() });
    }
    let mut r = Reader::new(bytes);
    match r.read_u8()? {
        k if k == kind => {}
        k => return Err(ProtocolError::UnknownKind(k)),
    }
    let seq = Seq16(r.read_u16()?);
    Ok((r, seq))
}

/// The server's echo of the newest client clock stamp it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingEcho {
    /// The client's `client_time_us`, unchanged.
    pub client_time_us: u32,
    /// Microseconds the server held the stamp before sending this packet; the client
    /// subtracts it so server-side waiting does not count as network delay.
    pub hold_us: u32,
}

/// The server's report on this client's inputs, sent in every packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputAck {
    /// Low 16 bits of a tick up to which the client need not resend inputs: each was
    /// received or is too late to matter.
    pub acked_through: Seq16,
    /// How early the client's inputs arrived, in 1/256 tick: a tick, plus one, minus the
    /// server's fractional tick position when its input first arrived; the least of those
    /// among the ticks first heard of since the previous report (with none, the newest
    /// message's newest tick's). Negative means too late. The client steers its lead by this, which
    /// measures the uplink directly instead of assuming a symmetric route.
    pub input_slack: i32,
    /// The ticks the server simulated without the client's input (it came too late or not
    /// at all), among the 32 before the packet's tick: bit `i` is tick `tick - 1 - i`.
    /// Repeated in every packet while in range, so one lost packet loses none of it.
    pub starved: u32,
    /// True when the server stood in a guess for those ticks' inputs
    /// ([`crate::MissingInput::Guess`] or [`crate::MissingInput::RepeatLast`]), false when
    /// it applied none ([`crate::MissingInput::Hold`]): with the client's own inputs this
    /// tells it exactly what the server applied.
    pub guessed: bool,
}

/// Server -> client: one fragment of the snapshot for `tick`, plus control data that every
/// fragment repeats, so time sync and acks survive the loss of any single packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFragment {
    /// Packet sequence number (per client, per direction).
    pub seq: Seq16,
    /// The server tick of the snapshot, which is also the server's tick when it was sent.
    pub tick: u32,
    /// Clock echo, if the client has sent anything yet.
    pub echo: Option<PingEcho>,
    /// Input acknowledgement, if the client has sent any input yet.
    pub input_ack: Option<InputAck>,
    /// Index of this fragment, `0..count`.
    pub index: u8,
    /// Number of fragments of this snapshot (1..=255).
    pub count: u8,
    /// A standalone *essential* part (always one fragment): what the client needs every
    /// tick, such as its own player's state, sent apart from the full snapshot so that the
    /// loss of any fragment of the full one cannot hold it back.
    pub essential: bool,
    /// The server's tick rate, sent until the client acknowledges a snapshot, so a
    /// client running at another rate can say so clearly.
    pub tick_hz: Option<u16>,
    /// The server's instance ([`crate::ServerConfig::instance`]): travels with `tick_hz`
    /// only (0 when that is absent), so it costs four bytes in the few packets before
    /// the client acknowledges a snapshot of this server. A client that hears another
    /// instance than the one it played with knows the server restarted, and starts over.
    pub server_instance: u32,
    /// The server's message section for this client (fragment 0 of a full snapshot only):
    /// a [`crate::channel`] packet of 1 to [`MAX_CHANNEL_PACKET_BYTES`] bytes, opaque to
    /// this codec. It takes its room out of the fragment's [`FRAGMENT_PAYLOAD_BYTES`].
    pub messages: Option<Vec<u8>>,
    /// This fragment's slice of the game's snapshot payload.
    pub payload: Vec<u8>,
}

impl SnapshotFragment {
    /// Encodes the fragment.
    pub fn encode(&self, w: &mut Writer) {
        w.write_u8(KIND_SNAPSHOT);
        w.write_u16(self.seq.0);
        w.write_u32(self.tick);
        let flags = u8::from(self.echo.is_some())
            | (u8::from(self.input_ack.is_some()) << 1)
            | (u8::from(self.essential) << 2)
            | (u8::from(self.tick_hz.is_some()) << 3)
            | (u8::from(self.is_whole()) << 4)
            | (u8::from(self.messages.is_some()) << 5)
            | (u8::from(self.input_ack.is_some_and(|a| a.starved != 0)) << 6)
            | (u8::from(self.input_ack.is_some_and(|a| a.starved != 0 && a.guessed)) << 7);
        w.write_u8(flags);
        if let Some(hz) = self.tick_hz {
            w.write_varint_u32(u32::from(hz));
            w.write_u32(self.server_instance);
        }
        if let Some(e) = self.echo {
            w.write_u32(e.client_time_us);
            w.write_varint_u32(e.hold_us);
        }
        if let Some(a) = self.input_ack {
            w.write_u16(a.acked_through.0);
            w.write_varint_i32(a.input_slack);
            if a.starved != 0 {
                w.write_varint_u32(a.starved);
            }
        }
        // Most snapshots fit one packet: a flag says so instead of two bytes.
        if !self.is_whole() {
            w.write_u8(self.index);
            w.write_u8(self.count);
        }
        if let Some(m) = &self.messages {
            w.write_len_prefixed(m);
        }
        w.write_bytes(&self.payload);
    }

    /// True for the only fragment of a snapshot that fits one packet.
    fn is_whole(&self) -> bool {
        self.index == 0 && self.count == 1
    }

    /// Decodes a fragment.
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let (mut r, seq) = open_packet(bytes, KIND_SNAPSHOT)?;
        let tick = r.read_u32()?;
        let flags = r.read_u8()?;
        // Starved ticks ride an input ack, and a guess needs starved ticks.
        if (flags & 64 != 0 && flags & 2 == 0) || (flags & 128 != 0 && flags & 64 == 0) {
            return Err(WireError::Invalid {
                what: "snapshot flags",
            }
            .into());
        }
        let (tick_hz, server_instance) = if flags & 8 != 0 {
            (Some(read_tick_hz(&mut r)?), r.read_u32()?)
        } else {
            (None, 0)
        };
        let echo = if flags & 1 != 0 {
            Some(PingEcho {
                client_time_us: r.read_u32()?,
                hold_us: r.read_varint_u32()?,
            })
        } else {
            None
        };
        let input_ack = if flags & 2 != 0 {
            let acked_through = Seq16(r.read_u16()?);
            let input_slack = r.read_varint_i32()?;
            let starved = if flags & 64 != 0 {
                match r.read_varint_u32()? {
                    0 => {
                        return Err(WireError::Invalid {
                            what: "empty starved ticks",
                        }
                        .into());
                    }
                    m => m,
                }
            } else {
                0
            };
            Some(InputAck {
                acked_through,
                input_slack,
                starved,
                guessed: flags & 128 != 0,
            })
        } else {
            None
        };
        let (index, count) = if flags & 16 != 0 {
            (0, 1)
        } else {
            let (index, count) = (r.read_u8()?, r.read_u8()?);
            if (index, count) == (0, 1) {
                // The encoder writes a whole snapshot with the flag, never like this.
                return Err(WireError::Invalid {
                    what: "whole snapshot without its flag",
                }
                .into());
            }
            (index, count)
        };
        let essential = flags & 4 != 0;
        if essential && count != 1 {
            return Err(WireError::Invalid {
                what: "essential part in fragments",
            }
            .into());
        }
        if count == 0 || index >= count {
            return Err(WireError::Invalid {
                what: "fragment index",
            }
            .into());
        }
        let messages = if flags & 32 != 0 {
            // The server writes its section on the first fragment of a full snapshot only.
            if index != 0 || essential {
                return Err(WireError::Invalid {
                    what: "message section off fragment 0",
                }
                .into());
            }
            Some(read_section(&mut r)?.to_vec())
        } else {
            None
        };
        let room =
            FRAGMENT_PAYLOAD_BYTES - messages.as_ref().map_or(0, |m| section_wire_len(m.len()));
        let payload = r.read_rest().to_vec();
        // The server cuts a payload into full fragments and a non-empty last one; any
        // other cut is bytes it never writes.
        let last = index + 1 == count;
        if (!last && payload.len() != room) || (last && count > 1 && payload.is_empty()) {
            return Err(WireError::Invalid {
                what: "fragment size",
            }
            .into());
        }
        if payload.len() > room {
            return Err(WireError::TooLarge {
                what: "fragment payload",
                len: payload.len(),
                max: room,
            }
            .into());
        }
        Ok(Self {
            seq,
            tick,
            echo,
            input_ack,
            index,
            count,
            essential,
            tick_hz,
            server_instance,
            messages,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn input_msg(inputs: Vec<u8>) -> InputMessage<u8> {
        InputMessage {
            seq: Seq16(7),
            client_time_us: 123_456,
            snapshot_ack: Some(Seq16(65535)),
            snapshot_acks: u32::MAX,
            start_tick: Seq16(65530),
            inputs,
            tick_hz: None,
            resync: false,
            messages: None,
        }
    }

    #[test]
    fn held_inputs_compress_to_runs() {
        let m = input_msg(vec![3; 32]);
        let mut w = Writer::new();
        m.encode(&mut w);
        // kind+seq+time+flags+ack + start (1-byte offset from the ack) + the other acks
        // (every one held: one byte) + count + one run
        assert_eq!(w.len(), 1 + 2 + 4 + 1 + 2 + 1 + 1 + 1 + 2);
        assert_eq!(InputMessage::<u8>::decode(w.as_bytes(), 64).unwrap(), m);
    }

    #[test]
    fn rejects_bad_input_messages() {
        let mut w = Writer::new();
        input_msg(vec![1, 2, 3]).encode(&mut w);
        let good = w.into_bytes();
        // Too many inputs for this server.
        assert!(matches!(
            InputMessage::<u8>::decode(&good, 2),
            Err(ProtocolError::Wire(WireError::TooLarge { .. }))
        ));
        // Every truncation fails cleanly.
        for n in 0..good.len() {
            assert!(
                InputMessage::<u8>::decode(&good[..n], 64).is_err(),
                "prefix {n}"
            );
        }
        // Unknown kind, trailing bytes, unknown flags, zero-length run.
        let mut bad = good.clone();
        bad[0] = 0x00;
        assert_eq!(
            InputMessage::<u8>::decode(&bad, 64),
            Err(ProtocolError::UnknownKind(0))
        );
        let mut bad = good.clone();
        bad.push(0);
        assert!(InputMessage::<u8>::decode(&bad, 64).is_err());
        let mut bad = good.clone();
        bad[7] = 0x80;
        assert!(InputMessage::<u8>::decode(&bad, 64).is_err());
        let mut bad = good.clone();
        bad[13] = 0; // first run length
        assert!(InputMessage::<u8>::decode(&bad, 64).is_err());
        // Two runs of the same input: the encoder would have merged them.
        let mut bad = good.clone();
        bad[16] = bad[14];
        assert_eq!(
            InputMessage::<u8>::decode(&bad, 64),
            Err(ProtocolError::Wire(WireError::Invalid {
                what: "input runs not merged"
            }))
        );
        assert!(matches!(
            InputMessage::<u8>::decode(&vec![KIND_INPUT; 5000], 64),
            Err(ProtocolError::PacketTooLarge { .. })
        ));
    }

    #[test]
    fn rejects_bad_fragments() {
        let f = SnapshotFragment {
            seq: Seq16(1),
            tick: 99,
            echo: None,
            input_ack: None,
            index: 0,
            count: 1,
            essential: false,
            tick_hz: None,
            server_instance: 0,
            messages: None,
            payload: vec![1, 2, 3],
        };
        let mut w = Writer::new();
        f.encode(&mut w);
        let good = w.into_bytes();
        assert_eq!(SnapshotFragment::decode(&good).unwrap(), f);
        // A whole snapshot costs a flag, not an index and a count.
        assert_eq!(good.len(), 1 + 2 + 4 + 1 + 3);
        for n in 0..8 {
            assert!(SnapshotFragment::decode(&good[..n]).is_err());
        }
        // Without the flag: index 1 of count 1, count 0, and index 0 of count 1 (which
        // the encoder writes with the flag) are bytes no server writes.
        for (index, count) in [(1, 1), (0, 0), (0, 1)] {
            let mut bad = good[..7].to_vec();
            bad.extend([good[7] & !16, index, count, 1, 2, 3]);
            assert!(SnapshotFragment::decode(&bad).is_err(), "{index}/{count}");
        }
        // A payload cut other than the server cuts it: a short fragment before the last,
        // or an empty last one.
        let cut = |index: u8, count: u8, len: usize| {
            let mut w = Writer::new();
            SnapshotFragment {
                index,
                count,
                payload: vec![5; len],
                ..f.clone()
            }
            .encode(&mut w);
            SnapshotFragment::decode(w.as_bytes())
        };
        let size = Err(ProtocolError::Wire(WireError::Invalid {
            what: "fragment size",
        }));
        assert_eq!(cut(0, 2, FRAGMENT_PAYLOAD_BYTES - 1), size);
        assert_eq!(cut(1, 2, 0), size);
        assert!(cut(0, 2, FRAGMENT_PAYLOAD_BYTES).is_ok());
        assert!(cut(1, 2, 1).is_ok());
        assert!(cut(0, 1, 0).is_ok());
    }

    #[test]
    fn an_input_message_without_sections_decodes() {
        // Bytes without message sections (flags 0b01), every snapshot before the newest
        // held (the complement of the bits: 0).
        let old = [
            KIND_INPUT, 7, 0, 0x40, 0xe2, 0x01, 0, 0b01, 0xff, 0xff, 9, 0, 32, 32, 3,
        ];
        let m = InputMessage::<u8>::decode(&old, 64).unwrap();
        assert_eq!(m, input_msg(vec![3; 32]));
        assert!(!m.resync && m.messages.is_none());
        // And a message without the new fields encodes to those very bytes.
        let mut w = Writer::new();
        m.encode(&mut w);
        assert_eq!(w.as_bytes(), old);
    }

    #[test]
    fn input_message_sections_and_resync() {
        let m = InputMessage {
            resync: true,
            messages: Some(vec![9; 300]),
            ..input_msg(vec![1, 2])
        };
        let mut w = Writer::new();
        m.encode(&mut w);
        let good = w.into_bytes();
        assert_eq!(good[7], 0b1101);
        assert_eq!(InputMessage::<u8>::decode(&good, 64).unwrap(), m);
        // The section is the last field: a two-byte length and its bytes.
        assert_eq!(good.len(), 1 + 2 + 4 + 1 + 2 + 1 + 1 + 1 + 4 + 2 + 300);
        for n in 0..good.len() {
            assert!(InputMessage::<u8>::decode(&good[..n], 64).is_err(), "{n}");
        }
        // An empty section, a section flag without one, and the next unknown flag bit.
        let mut w = Writer::new();
        InputMessage {
            messages: Some(Vec::new()),
            ..m.clone()
        }
        .encode(&mut w);
        assert_eq!(
            InputMessage::<u8>::decode(w.as_bytes(), 64),
            Err(ProtocolError::Wire(WireError::Invalid {
                what: "empty message section"
            }))
        );
        let mut bare = Writer::new();
        input_msg(vec![1, 2]).encode(&mut bare);
        let mut bad = bare.into_bytes();
        bad[7] |= 4;
        assert!(InputMessage::<u8>::decode(&bad, 64).is_err());
        bad[7] = 0b1_0001;
        assert!(InputMessage::<u8>::decode(&bad, 64).is_err());
        // A section larger than any channel packet is refused by its length alone.
        let mut w = Writer::new();
        InputMessage {
            messages: Some(vec![1; MAX_CHANNEL_PACKET_BYTES + 1]),
            ..input_msg(Vec::new())
        }
        .encode(&mut w);
        assert!(matches!(
            InputMessage::<u8>::decode(w.as_bytes(), 64),
            Err(ProtocolError::Wire(WireError::TooLarge { .. }))
        ));
    }

    #[test]
    fn fragment_sections_only_where_the_server_writes_them() {
        let f = |index: u8, count: u8, essential: bool, section: usize, len: usize| {
            let mut w = Writer::new();
            SnapshotFragment {
                seq: Seq16(4),
                tick: 10,
                echo: None,
                input_ack: None,
                index,
                count,
                essential,
                tick_hz: None,
                server_instance: 0,
                messages: (section > 0).then(|| vec![6; section]),
                payload: vec![5; len],
            }
            .encode(&mut w);
            SnapshotFragment::decode(w.as_bytes())
        };
        let full = FRAGMENT_PAYLOAD_BYTES;
        // Fragment 0 gives the section's room (and its two-byte length) out of its payload.
        assert!(f(0, 2, false, 200, full - 202).is_ok());
        assert!(f(0, 2, false, 200, full).is_err());
        assert!(f(0, 2, false, 200, full - 201).is_err());
        assert!(f(0, 1, false, 200, full - 202).is_ok());
        assert!(f(0, 1, false, 200, full - 201).is_err());
        assert!(f(0, 1, false, 100, full - 101).is_ok(), "a one-byte length");
        assert!(f(0, 1, false, 100, 0).is_ok());
        assert!(f(0, 1, false, MAX_CHANNEL_PACKET_BYTES, full - 1152).is_ok());
        // Nowhere else: not on a later fragment, not on an essential part.
        assert!(f(1, 2, false, 100, 10).is_err());
        assert!(f(0, 1, true, 100, 10).is_err());
        // The next unknown flag bit is refused.
        let mut w = Writer::new();
        f(0, 1, false, 10, 3).unwrap().encode(&mut w);
        let mut bad = w.into_bytes();
        assert!(SnapshotFragment::decode(&bad).is_ok());
        bad[7] |= 64;
        assert!(SnapshotFragment::decode(&bad).is_err());
    }

    proptest! {
        #[test]
        fn input_round_trip_is_byte_identical(seq: u16, t: u32, ack: Option<u16>, acks: u32, start: u16,
                                              inputs in proptest::collection::vec(0u8..4, 0..64),
                                              tick_hz in proptest::option::of(1u16..=1000),
                                              resync: bool,
                                              // What room 64 one-byte inputs leave.
                                              messages in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..1000))) {
            let acks = if ack.is_some() { acks } else { 0 };
            let m = InputMessage { seq: Seq16(seq), client_time_us: t, snapshot_ack: ack.map(Seq16), snapshot_acks: acks, start_tick: Seq16(start), inputs, tick_hz, resync, messages };
            let mut w = Writer::new();
            m.encode(&mut w);
            let d = InputMessage::<u8>::decode(w.as_bytes(), 64).unwrap();
            prop_assert_eq!(&d, &m);
            let mut w2 = Writer::new();
            d.encode(&mut w2);
            prop_assert_eq!(w2.as_bytes(), w.as_bytes());
        }

        #[test]
        fn fragment_round_trip(seq: u16, tick: u32, echo: Option<(u32, u32)>, ack: Option<(u16, i32, u32, bool)>,
                               count in 1u8..=255, idx: u8, payload in proptest::collection::vec(any::<u8>(), 0..FRAGMENT_PAYLOAD_BYTES),
                               tick_hz in proptest::option::of(1u16..=1000),
                               messages in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..=MAX_CHANNEL_PACKET_BYTES))) {
            // A section on fragment 0 only, out of its room.
            let messages = messages.filter(|_| idx % count == 0);
            let room = FRAGMENT_PAYLOAD_BYTES - messages.as_ref().map_or(0, |m| section_wire_len(m.len()));
            // Cut as the server cuts: full fragments, then a non-empty last one.
            let mut payload = payload;
            if idx % count + 1 < count {
                payload.resize(room, 7);
            } else {
                payload.truncate(room);
                if count > 1 && payload.is_empty() {
                    payload.push(7);
                }
            }
            let f = SnapshotFragment {
                seq: Seq16(seq), tick,
                echo: echo.map(|(c, h)| PingEcho { client_time_us: c, hold_us: h }),
                input_ack: ack.map(|(a, l, starved, g)| InputAck { acked_through: Seq16(a), input_slack: l, starved, guessed: g && starved != 0 }),
                index: idx % count, count, payload, essential: false, tick_hz, server_instance: tick_hz.map_or(0, |hz| u32::from(hz) * 65_537), messages,
            };
            let mut w = Writer::new();
            f.encode(&mut w);
            prop_assert!(w.len() <= MAX_PACKET_BYTES);
            prop_assert_eq!(SnapshotFragment::decode(w.as_bytes()).unwrap(), f);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1400)) {
            let _ = InputMessage::<u8>::decode(&bytes, 64);
            let _ = SnapshotFragment::decode(&bytes);
        }
    }
}
