//! Game messages both ways, typed, over the session's reliable and unreliable channels,
//! and the adapter's own control messages beside them.
//!
//! Every message the adapter sends starts with a tag byte: [`TAG_OWNED`] for its
//! ownership message, [`TAG_GAME`] for a game message (then the message type's index in
//! registration order, then the game's bytes). So a game message can never be read as a
//! control message, whatever its bytes.

use crate::bevy::prelude::*;
use lagless_replication::{ClientId, Delivery, Reader, WireError, Writer};

/// The first byte of the adapter's ownership message.
pub(crate) const TAG_OWNED: u8 = 0xB0;
/// The first byte of a game message.
pub(crate) const TAG_GAME: u8 = 0xB1;

/// A game message: registered once with [`crate::ProtocolBuilder::message`], then sent
/// and received as Bevy messages ([`ToServer`], [`FromServer`], [`ToClients`],
/// [`FromClient`]). It writes and reads its own bytes; `decode` reads network bytes, so
/// it must return an error, never panic, on anything malformed.
pub trait NetMessage: Send + Sync + Sized + 'static {
    /// Writes the message.
    fn encode(&self, w: &mut Writer);
    /// Reads a message `encode` wrote.
    fn decode(r: &mut Reader) -> Result<Self, WireError>;
}

/// A message from the server, on a client.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct FromServer<M: NetMessage>(pub M);

/// A message for the server: write it on a client; it goes out in the same frame. One
/// written while the client is not playing (before [`crate::NetworkStatus::ready`]'s
/// transport is, or after the session ended) is dropped.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct ToServer<M: NetMessage> {
    /// Reliable (once, in order) or unreliable.
    pub delivery: Delivery,
    /// The message.
    pub message: M,
}

/// A message from a client, on the server.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct FromClient<M: NetMessage> {
    /// Who sent it.
    pub client: ClientId,
    /// The message.
    pub message: M,
}

/// Which clients a [`ToClients`] goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every connected client.
    All,
    /// One client.
    Client(ClientId),
    /// Every connected client but one.
    AllExcept(ClientId),
}

impl Target {
    /// Whether `client` is one of them.
    pub fn includes(&self, client: ClientId) -> bool {
        match *self {
            Target::All => true,
            Target::Client(c) => c == client,
            Target::AllExcept(c) => c != client,
        }
    }
}

/// A message for clients: write it on the server; it goes out in the same frame (a
/// host's own player is not sent to: it shares the server's world).
#[derive(Message, Debug, Clone, PartialEq)]
pub struct ToClients<M: NetMessage> {
    /// Who gets it.
    pub target: Target,
    /// Reliable (once, in order) or unreliable.
    pub delivery: Delivery,
    /// The message.
    pub message: M,
}

/// Encoded messages waiting to go: (delivery, bytes).
pub(crate) type Outgoing = Vec<(Delivery, Vec<u8>)>;

/// The server's encoded messages waiting to go: (to whom, delivery, bytes).
pub(crate) type OutgoingToClients = Vec<(Target, Delivery, Vec<u8>)>;

/// One message type, type-erased.
#[derive(Clone, Copy)]
pub(crate) struct MessageFns {
    /// Adds the client's Bevy messages for it.
    pub(crate) add_client: fn(&mut App),
    /// Adds the server's.
    pub(crate) add_server: fn(&mut App),
    /// Drains the client's [`ToServer`] into bytes (without the tag and index).
    pub(crate) client_out: fn(&mut World, &mut Outgoing),
    /// Decodes one into a [`FromServer`].
    pub(crate) client_in: fn(&mut World, &mut Reader) -> Result<(), WireError>,
    /// Drains the server's [`ToClients`].
    pub(crate) server_out: fn(&mut World, &mut OutgoingToClients),
    /// Decodes one into a [`FromClient`].
    pub(crate) server_in: fn(&mut World, ClientId, &mut Reader) -> Result<(), WireError>,
}

fn bytes_of<M: NetMessage>(m: &M) -> Vec<u8> {
    let mut w = Writer::new();
    m.encode(&mut w);
    w.into_bytes()
}

impl MessageFns {
    pub(crate) fn of<M: NetMessage>() -> Self {
        Self {
            add_client: |app| {
                app.add_message::<FromServer<M>>()
                    .add_message::<ToServer<M>>();
            },
            add_server: |app| {
                app.add_message::<FromClient<M>>()
                    .add_message::<ToClients<M>>();
            },
            client_out: |world, out| {
                if let Some(mut m) = world.get_resource_mut::<Messages<ToServer<M>>>() {
                    out.extend(m.drain().map(|t| (t.delivery, bytes_of(&t.message))));
                }
            },
            client_in: |world, r| {
                let m = M::decode(r)?;
                r.finish()?;
                world.write_message(FromServer(m));
                Ok(())
            },
            server_out: |world, out| {
                if let Some(mut m) = world.get_resource_mut::<Messages<ToClients<M>>>() {
                    out.extend(
                        m.drain()
                            .map(|t| (t.target, t.delivery, bytes_of(&t.message))),
                    );
                }
            },
            server_in: |world, client, r| {
                let message = M::decode(r)?;
                r.finish()?;
                world.write_message(FromClient { client, message });
                Ok(())
            },
        }
    }
}

/// `body` framed as game message number `index`.
pub(crate) fn frame_game(index: usize, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.write_u8(TAG_GAME);
    w.write_varint_u32(index as u32);
    w.write_bytes(body);
    w.into_bytes()
}

/// Drains every registered [`ToServer`] into framed bytes.
pub(crate) fn client_outgoing(messages: &[MessageFns], world: &mut World) -> Outgoing {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let mut bodies = Vec::new();
        (m.client_out)(world, &mut bodies);
        out.extend(bodies.into_iter().map(|(d, b)| (d, frame_game(i, &b))));
    }
    out
}

/// Reads the index of a game message whose tag was read; network bytes, so a bad
/// index is an error.
pub(crate) fn read_index(messages: &[MessageFns], r: &mut Reader) -> Result<usize, WireError> {
    let i = r.read_varint_u32()? as usize;
    if i >= messages.len() {
        return Err(WireError::Invalid {
            what: "game message type",
        });
    }
    Ok(i)
}
