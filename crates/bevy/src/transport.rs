//! What carries the bytes: a small abstraction over a hosted [`Server`] or [`Client`],
//! with the UDP session library (`lagless_transport::{GameServer, GameClient}`) and the
//! seeded emulator ([`EmulatedNetwork`]) behind it.

use lagless_netem::Duplex;
use lagless_replication::{Client, ClientId, Input, PredictedWorld, Server};
use lagless_transport::session::SessionError;
use lagless_transport::{GameClient, GameServer, SessionEvent};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A client joining or leaving, as the transport saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Client `0` connected.
    Connected(ClientId),
    /// Client `0` left or timed out.
    Disconnected(ClientId),
}

/// Hosts a game's [`Server`] on a transport.
pub trait ServerHost<I: Input + Sync>: Send + Sync + 'static {
    /// The hosted server.
    fn server(&self) -> &Server<I>;
    /// The hosted server, to step.
    fn server_mut(&mut self) -> &mut Server<I>;
    /// The transport's clock.
    fn now(&self) -> Duration;
    /// Reads what arrived into the server, advances its clock, and reports clients that
    /// came or went.
    fn update(&mut self, connections: &mut Vec<Connection>);
    /// Sends what the server queued.
    fn transmit(&mut self);
}

/// Hosts a game's [`Client`] on a transport.
pub trait ClientHost<W: PredictedWorld>: Send + Sync + 'static {
    /// The hosted client.
    fn client(&self) -> &Client<W>;
    /// The hosted client, to tick.
    fn client_mut(&mut self) -> &mut Client<W>;
    /// The transport's clock.
    fn now(&self) -> Duration;
    /// Reads what arrived into the client and advances its clock; an error ends the
    /// session.
    fn update(&mut self) -> Result<(), SessionError>;
    /// True once the client may tick (connected, settings checked).
    fn is_ready(&self) -> bool;
    /// Sends what the client queued.
    fn transmit(&mut self);
    /// Leaves: the server is told at once where the transport can (rather than
    /// timing the client out).
    fn disconnect(&mut self);
    /// This client's id, if the transport knows it.
    fn id(&self) -> Option<ClientId> {
        None
    }
}

impl<I: Input + Sync> ServerHost<I> for GameServer<I> {
    fn server(&self) -> &Server<I> {
        GameServer::server(self)
    }
    fn server_mut(&mut self) -> &mut Server<I> {
        GameServer::server_mut(self)
    }
    fn now(&self) -> Duration {
        GameServer::now(self)
    }
    fn update(&mut self, connections: &mut Vec<Connection>) {
        GameServer::update(self);
        while let Some(event) = self.poll_event() {
            match event {
                SessionEvent::Connected { client, .. } => {
                    connections.push(Connection::Connected(client));
                }
                SessionEvent::Disconnected { client, .. } => {
                    connections.push(Connection::Disconnected(client));
                }
                // No resume grace is set here: a timed-out client leaves at once.
                SessionEvent::Second(_)
                | SessionEvent::Away { .. }
                | SessionEvent::Resumed { .. } => {}
            }
        }
    }
    fn transmit(&mut self) {
        GameServer::transmit(self);
    }
}

impl<W: PredictedWorld + Send + Sync + 'static> ClientHost<W> for GameClient<W>
where
    W::Input: Sync,
    W::Saved: Send + Sync,
{
    fn client(&self) -> &Client<W> {
        GameClient::client(self)
    }
    fn client_mut(&mut self) -> &mut Client<W> {
        GameClient::client_mut(self)
    }
    fn now(&self) -> Duration {
        GameClient::now(self)
    }
    fn update(&mut self) -> Result<(), SessionError> {
        GameClient::update(self)
    }
    fn is_ready(&self) -> bool {
        GameClient::is_ready(self)
    }
    fn transmit(&mut self) {
        GameClient::transmit(self);
    }
    fn disconnect(&mut self) {
        GameClient::disconnect(self);
    }
    fn id(&self) -> Option<ClientId> {
        GameClient::client_id(self)
    }
}

/// A seeded emulated network on a virtual clock, shared by a server and its clients (in
/// one app or several): one [`Duplex`] link per client. The test or tool that owns it
/// advances the clock; nothing reads a real one.
#[derive(Clone, Default)]
pub struct EmulatedNetwork {
    inner: Arc<Mutex<Net>>,
}

#[derive(Default)]
struct Net {
    now: Duration,
    links: BTreeMap<ClientId, Duplex>,
}

impl EmulatedNetwork {
    /// An empty network at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Net> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connects client `id` over `link` (its server sees it connect at its next update).
    pub fn add_client(&self, id: ClientId, link: Duplex) {
        self.lock().links.insert(id, link);
    }

    /// Cuts client `id` off (its server sees it leave at its next update).
    pub fn remove_client(&self, id: ClientId) {
        self.lock().links.remove(&id);
    }

    /// The virtual clock.
    pub fn now(&self) -> Duration {
        self.lock().now
    }

    /// Moves the virtual clock on by `dt`.
    pub fn advance(&self, dt: Duration) {
        self.lock().now += dt;
    }

    /// A server on this network.
    pub fn server<I: Input + Sync>(&self, server: Server<I>) -> EmulatedServer<I> {
        EmulatedServer {
            server,
            net: self.clone(),
            connected: BTreeSet::new(),
        }
    }

    /// Client `id`'s end of this network (add its link with
    /// [`EmulatedNetwork::add_client`]).
    pub fn client<W: PredictedWorld>(&self, id: ClientId, client: Client<W>) -> EmulatedClient<W> {
        EmulatedClient {
            client,
            net: self.clone(),
            id,
        }
    }
}

/// A [`Server`] on an [`EmulatedNetwork`].
pub struct EmulatedServer<I: Input + Sync> {
    server: Server<I>,
    net: EmulatedNetwork,
    connected: BTreeSet<ClientId>,
}

impl<I: Input + Sync> ServerHost<I> for EmulatedServer<I> {
    fn server(&self) -> &Server<I> {
        &self.server
    }
    fn server_mut(&mut self) -> &mut Server<I> {
        &mut self.server
    }
    fn now(&self) -> Duration {
        self.net.now()
    }
    fn update(&mut self, connections: &mut Vec<Connection>) {
        let mut net = self.net.lock();
        let now = net.now;
        let gone: Vec<ClientId> = self
            .connected
            .iter()
            .filter(|id| !net.links.contains_key(id))
            .copied()
            .collect();
        for id in gone {
            self.connected.remove(&id);
            self.server.disconnect(id);
            connections.push(Connection::Disconnected(id));
        }
        for (&id, link) in net.links.iter_mut() {
            if self.connected.insert(id) && self.server.connect(id).is_ok() {
                connections.push(Connection::Connected(id));
            }
            while let Some(p) = link.up.poll(now) {
                // A refused packet is counted by the session; the connection goes on.
                let _ = self.server.receive(id, now, &p);
            }
        }
        drop(net);
        self.server.update(now);
    }
    fn transmit(&mut self) {
        let mut net = self.net.lock();
        let now = net.now;
        while let Some((id, bytes)) = self.server.poll_transmit() {
            if let Some(link) = net.links.get_mut(&id) {
                link.down.send(now, bytes);
            }
        }
    }
}

/// A [`Client`] on an [`EmulatedNetwork`].
pub struct EmulatedClient<W: PredictedWorld> {
    client: Client<W>,
    net: EmulatedNetwork,
    id: ClientId,
}

impl<W: PredictedWorld + Send + Sync + 'static> ClientHost<W> for EmulatedClient<W>
where
    W::Input: Sync,
    W::Saved: Send + Sync,
{
    fn client(&self) -> &Client<W> {
        &self.client
    }
    fn client_mut(&mut self) -> &mut Client<W> {
        &mut self.client
    }
    fn now(&self) -> Duration {
        self.net.now()
    }
    fn update(&mut self) -> Result<(), SessionError> {
        let mut net = self.net.lock();
        let now = net.now;
        let Some(link) = net.links.get_mut(&self.id) else {
            return Err(SessionError::ServerClosed);
        };
        while let Some(p) = link.down.poll(now) {
            // Refused packets are counted by the client; the session goes on.
            let _ = self.client.receive(now, &p);
        }
        drop(net);
        self.client.update(now);
        Ok(())
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn transmit(&mut self) {
        let mut net = self.net.lock();
        let now = net.now;
        if let Some(link) = net.links.get_mut(&self.id) {
            while let Some(p) = self.client.poll_transmit(now) {
                link.up.send(now, p);
            }
        }
    }
    fn disconnect(&mut self) {
        // The emulator's goodbye: the link goes, and the server sees it at its next
        // update (as netcode.io's disconnect packets make it on UDP).
        self.net.remove_client(self.id);
    }
    fn id(&self) -> Option<ClientId> {
        Some(self.id)
    }
}
