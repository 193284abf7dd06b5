//! The dedicated server's side of netcode.io: connection requests, challenges, client slots,
//! keep-alives, payloads, timeouts and disconnects. Sans-IO: give it bytes and time, take
//! packets and events out.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::crypto::Key;
use crate::error::{ConfigError, DropCounters, PacketError, SendError};
use crate::packet::{self, ChallengeBody, Packet, PacketType};
use crate::replay::ReplayProtection;
use crate::token::{ChallengeToken, PrivateConnectToken};
use crate::{
    BUSY_REQUESTS_PER_WINDOW, MAC_BYTES, MAX_CLIENTS, MAX_CONNECT_TOKEN_ENTRIES,
    MAX_ENCRYPTION_MAPPINGS, NUM_DISCONNECT_PACKETS, PACKET_QUEUE_SIZE, PACKET_SEND_INTERVAL,
    PENDING_SHARE_PER_SOURCE, REQUEST_PACKET_BYTES, REQUEST_WINDOW, REQUESTS_PER_SOURCE_WHEN_BUSY,
    Transmit, USER_DATA_BYTES, normalize,
};

/// What a server needs to know.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The game's protocol id: requests for other ids are ignored.
    pub protocol_id: u64,
    /// The private key shared with the backend that issues connect tokens.
    pub private_key: Key,
    /// Number of client slots, 1 to [`MAX_CLIENTS`].
    pub max_clients: usize,
    /// The addresses clients reach this server at; a connect token must list one of them.
    /// An unspecified IP (`0.0.0.0:P`, `[::]:P`) matches any token address with port `P`.
    pub public_addresses: Vec<SocketAddr>,
}

/// Why a client left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisconnectReason {
    /// Nothing arrived from the client within its token's timeout.
    TimedOut,
    /// The client sent a disconnect packet.
    ClientDisconnected,
    /// The server application disconnected it.
    ServerDisconnected,
    /// A new connection with the same client id, from another address, took its place
    /// (only with [`Server::set_replace_connected`]): a client that changed networks.
    Replaced,
}

/// Something the application should know about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A client completed the handshake and holds slot `client_index`.
    Connected {
        /// The slot.
        client_index: usize,
        /// The id from its connect token.
        client_id: u64,
        /// Where it sends from.
        addr: SocketAddr,
        /// The user data from its connect token.
        user_data: Box<[u8; USER_DATA_BYTES]>,
    },
    /// A client left; its slot is free.
    Disconnected {
        /// The slot it held.
        client_index: usize,
        /// The id from its connect token.
        client_id: u64,
        /// Where it sent from.
        addr: SocketAddr,
        /// Why.
        reason: DisconnectReason,
    },
    /// A payload from a connected client.
    Payload {
        /// The slot.
        client_index: usize,
        /// The client's id.
        client_id: u64,
        /// 1 to 1200 bytes.
        payload: Vec<u8>,
    },
}

/// Counters of what the server received, sent and dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Packets given to [`Server::handle_packet`].
    pub packets_received: u64,
    /// Packets accepted and processed.
    pub packets_accepted: u64,
    /// Packets queued for sending.
    pub packets_sent: u64,
    /// Outgoing packets dropped because the application did not drain
    /// [`Server::poll_transmit`].
    pub transmits_dropped: u64,
    /// Received packets dropped, by reason.
    pub drops: DropCounters,
    /// Clients that connected.
    pub connects: u64,
    /// Clients that left, for any reason.
    pub disconnects: u64,
    /// Clients timed out.
    pub timeouts: u64,
    /// Connection requests answered with a denied packet (server full, or not
    /// accepting).
    pub denied: u64,
    /// Pending handshakes evicted, with the handshake table full, because their source
    /// held [`PENDING_SHARE_PER_SOURCE`] or more of them: the mark of one host (or one
    /// IPv6 /64) flooding requests it does not follow up.
    pub evicted_crowded_source: u64,
    /// Pending handshakes evicted, with the handshake table full and no source over its
    /// share, because they were the oldest: a flood spread over many sources (spoofed, or
    /// a botnet), or more genuine clients at once than the table holds.
    pub evicted_oldest: u64,
    /// Connection requests whose token was decrypted (the expensive part of a request);
    /// those refused before it are counted in [`ServerStats::drops`], as
    /// [`PacketError::SourceOverShare`] among others.
    pub requests_decrypted: u64,
}

/// Rows and columns of [`SourceCounts`].
const SKETCH_ROWS: usize = 4;
const SKETCH_COLUMNS: usize = 16_384;

/// Connection requests decrypted per source in the current [`REQUEST_WINDOW`], as a
/// count-min sketch: fixed memory (64 KiB), cleared each window, so no number of
/// sources can churn it the way they churn a table, and a count is never under the
/// truth. A source's estimate is its smallest counter over four rows; the columns come
/// from a hash keyed with the server's secret challenge key, so a flood cannot pick
/// addresses that share a genuine client's counters. With 128 flooding sources a genuine
/// source finds all four of its counters taken by them about once in 10^11 windows. The
/// limit: a flood from many thousand sources in one window (each at its share, 16 384 of
/// them fill every counter on average) makes a new source look crowded while the
/// server is busy, and genuine requests are refused with the flood's.
struct SourceCounts {
    window_start: Duration,
    /// Requests decrypted in this window, all sources.
    total: u32,
    rows: Box<[[u8; SKETCH_COLUMNS]; SKETCH_ROWS]>,
    hash_key: Key,
}

impl SourceCounts {
    fn new(hash_key: Key, now: Duration) -> Self {
        Self {
            window_start: now,
            total: 0,
            rows: Box::new([[0; SKETCH_COLUMNS]; SKETCH_ROWS]),
            hash_key,
        }
    }

    fn roll(&mut self, now: Duration) {
        if now >= self.window_start + REQUEST_WINDOW {
            self.window_start = now;
            self.total = 0;
            for row in self.rows.iter_mut() {
                row.fill(0);
            }
        }
    }

    fn columns(&self, source: IpAddr) -> [usize; SKETCH_ROWS] {
        // SipHash over the secret key and the source: one 64-bit hash gives four 14-bit
        // columns.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash_key.hash(&mut h);
        source.hash(&mut h);
        let x = h.finish();
        std::array::from_fn(|r| ((x >> (16 * r)) as usize) % SKETCH_COLUMNS)
    }

    /// Whether `source` may have one more request decrypted now; counts it if so.
    fn admit(&mut self, now: Duration, source: IpAddr) -> bool {
        self.roll(now);
        let cols = self.columns(source);
        let busy = self.total >= BUSY_REQUESTS_PER_WINDOW;
        if busy {
            let estimate = (0..SKETCH_ROWS)
                .map(|r| self.rows[r][cols[r]])
                .min()
                .unwrap_or(0);
            if estimate >= REQUESTS_PER_SOURCE_WHEN_BUSY {
                return false;
            }
        }
        self.total = self.total.saturating_add(1);
        for (row, col) in self.rows.iter_mut().zip(cols) {
            row[col] = row[col].saturating_add(1);
        }
        true
    }
}

#[derive(Clone, Debug)]
struct Mapping {
    send_key: Key,
    receive_key: Key,
    timeout_seconds: i32,
    expire_at: Option<Duration>,
    last_access: Duration,
    /// Place in line for eviction (lower is older). Counted, not timed, so requests that
    /// arrive at the same instant still have a strict order.
    order: u64,
}

impl Mapping {
    fn expired(&self, now: Duration) -> bool {
        let idle = self.timeout_seconds > 0
            && self.last_access + Duration::from_secs(self.timeout_seconds as u64) < now;
        idle || self.expire_at.is_some_and(|t| t < now)
    }
}

#[derive(Clone, Debug)]
struct Slot {
    client_id: u64,
    addr: SocketAddr,
    send_key: Key,
    receive_key: Key,
    timeout_seconds: i32,
    confirmed: bool,
    sequence: u64,
    last_send: Duration,
    last_receive: Duration,
    replay: ReplayProtection,
    user_data: Box<[u8; USER_DATA_BYTES]>,
    queued_payloads: usize,
}

/// A netcode.io 1.02 server, without sockets or clocks.
///
/// Feed it every datagram with [`Server::handle_packet`], call [`Server::update`] every
/// frame, send what [`Server::poll_transmit`] returns and act on [`Server::poll_event`].
/// All tables are bounded: slots (`max_clients`), pending handshakes
/// ([`MAX_ENCRYPTION_MAPPINGS`], whatever `max_clients`), connect-token history
/// ([`MAX_CONNECT_TOKEN_ENTRIES`], whatever `max_clients`), queued payloads (256 per slot)
/// and outgoing packets.
///
/// # Pending handshakes
///
/// A request with a valid token takes an entry (an encryption mapping) until its holder
/// answers the challenge, or until the token's timeout. Refusing requests once the table is
/// full, as the reference implementation does, lets anyone holding enough valid tokens keep
/// every real client out while slots are free, just by never answering. So a full table
/// evicts instead, and never refuses:
///
/// - if some source holds [`PENDING_SHARE_PER_SOURCE`] entries or more, the oldest entry
///   of the source holding the most goes: a flooding host pays for its own flood;
/// - otherwise the oldest entry goes. A genuine client answers within a round trip, so a
///   flood must bring [`MAX_ENCRYPTION_MAPPINGS`] new valid requests per round trip to push
///   its entry out.
///
/// A source is the IPv4 address or the IPv6 /64, ports ignored, because one host picks
/// any port it likes and usually holds a whole /64. The share applies only when the table
/// is full, so many clients behind one NAT (or one test machine) connect at once as
/// freely as from many hosts. An entry keeps its place in line when its address sends
/// the request again, so resending does not make a silent entry young. Evictions are
/// counted in [`ServerStats::evicted_crowded_source`] and [`ServerStats::evicted_oldest`].
///
/// The table holds the one thing a response cannot carry: the token's packet keys, which
/// the server needs to read the response at all (it is encrypted with them). All the
/// rest, the client id and user data, travels sealed in the challenge token. This crate's
/// [`crate::Client`] sends its request again right ahead of each response, so its keys
/// are taken again microseconds before they are needed: a spread flood that evicts a
/// pending entry within a round trip does not keep it out (see "The handshake under a
/// flood" on [`crate::Client`]). A client that does not (the reference's) needs its entry
/// to live a round trip, which the refusals below make likely but do not promise.
///
/// # Requests under load
///
/// A valid request costs an XChaCha20-Poly1305 decryption of 1 KiB and a challenge to
/// seal; refusing one before that costs a hash. Requests are counted per source (as
/// above) in windows of [`REQUEST_WINDOW`]: once [`BUSY_REQUESTS_PER_WINDOW`] were
/// decrypted in a window, a source that already had [`REQUESTS_PER_SOURCE_WHEN_BUSY`]
/// decrypted is refused until the next window, silently, with
/// [`PacketError::SourceOverShare`]. A flood from 128 addresses then gets about 2000
/// requests a second decrypted whatever its rate, and a pending entry lives about half a
/// second. The counts are a sketch of fixed size, not a table a flood could churn.
pub struct Server {
    config: ServerConfig,
    /// New clients are admitted ([`Server::set_accepting`]).
    accepting: bool,
    /// A valid token for a connected client id from another address replaces the
    /// connection ([`Server::set_replace_connected`]).
    replace_connected: bool,
    challenge_key: Key,
    challenge_sequence: u64,
    global_sequence: u64,
    start: Duration,
    unix_at_start: u64,
    now: Duration,
    slots: Vec<Option<Slot>>,
    by_addr: HashMap<SocketAddr, usize>,
    mappings: HashMap<SocketAddr, Mapping>,
    /// The next [`Mapping::order`].
    mapping_order: u64,
    /// The pending entries by [`Mapping::order`], oldest first: the oldest is found
    /// without a scan, since a spread flood evicts one for every request it sends.
    by_order: std::collections::BTreeMap<u64, SocketAddr>,
    /// Pending entries per source, kept as entries come and go.
    per_source: HashMap<IpAddr, usize>,
    /// Sources holding [`PENDING_SHARE_PER_SOURCE`] entries or more: only while there
    /// are some does an eviction scan the table for the most crowded.
    crowded_sources: usize,
    /// Connect-token history: the MAC of each token seen, oldest first, at most
    /// [`MAX_CONNECT_TOKEN_ENTRIES`] ...
    token_order: VecDeque<[u8; MAC_BYTES]>,
    /// ... and the address it came from first (same keys as `token_order`).
    token_addrs: HashMap<[u8; MAC_BYTES], SocketAddr>,
    /// Requests decrypted per source in the current window.
    source_counts: SourceCounts,
    transmits: VecDeque<Transmit>,
    events: VecDeque<ServerEvent>,
    stats: ServerStats,
}

impl Server {
    /// A server started at `now` (any monotonic epoch) when the Unix time is `unix_now`
    /// seconds; `challenge_key` must be random (a fresh one each start).
    pub fn new(
        config: ServerConfig,
        challenge_key: Key,
        now: Duration,
        unix_now: u64,
    ) -> Result<Self, ConfigError> {
        if config.max_clients == 0 || config.max_clients > MAX_CLIENTS {
            return Err(ConfigError::MaxClients {
                got: config.max_clients,
                max: MAX_CLIENTS,
            });
        }
        if config.public_addresses.is_empty() {
            return Err(ConfigError::NoPublicAddress);
        }
        let mut config = config;
        for a in &mut config.public_addresses {
            *a = normalize(*a);
        }
        let n = config.max_clients;
        Ok(Self {
            accepting: true,
            replace_connected: false,
            challenge_key,
            challenge_sequence: 0,
            global_sequence: 1 << 63,
            start: now,
            unix_at_start: unix_now,
            now,
            slots: vec![None; n],
            by_addr: HashMap::with_capacity(n),
            mappings: HashMap::new(),
            mapping_order: 0,
            by_order: std::collections::BTreeMap::new(),
            per_source: HashMap::new(),
            crowded_sources: 0,
            token_order: VecDeque::new(),
            token_addrs: HashMap::new(),
            source_counts: SourceCounts::new(challenge_key, now),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: ServerStats::default(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Unix time (seconds) as the server reckons it from `now`.
    pub fn unix_time(&self) -> u64 {
        self.unix_at_start
            .saturating_add(self.now.saturating_sub(self.start).as_secs())
    }

    fn max_transmits(&self) -> usize {
        self.config.max_clients * PACKET_QUEUE_SIZE * 4
    }

    fn push_transmit(&mut self, addr: SocketAddr, data: Vec<u8>) {
        if self.transmits.len() >= self.max_transmits() {
            self.stats.transmits_dropped += 1;
            return;
        }
        self.stats.packets_sent += 1;
        self.transmits.push_back(Transmit { addr, data });
    }

    fn send_global(&mut self, packet: &Packet, addr: SocketAddr, key: &Key) {
        let seq = self.global_sequence;
        self.global_sequence = self.global_sequence.wrapping_add(1);
        if let Ok(data) = packet.write(seq, key, self.config.protocol_id) {
            self.push_transmit(addr, data);
        }
    }

    fn send_to_slot(&mut self, index: usize, packet: &Packet) {
        let now = self.now;
        let protocol_id = self.config.protocol_id;
        let Some(Some(slot)) = self.slots.get_mut(index) else {
            return;
        };
        let seq = slot.sequence;
        slot.sequence = slot.sequence.wrapping_add(1);
        slot.last_send = now;
        let addr = slot.addr;
        if let Ok(data) = packet.write(seq, &slot.send_key, protocol_id) {
            self.push_transmit(addr, data);
        }
    }

    /// Handles one datagram from `from` at time `now`. `Err` says why it was dropped (it is
    /// also counted in [`ServerStats::drops`]); nothing here panics, whatever the bytes.
    pub fn handle_packet(
        &mut self,
        now: Duration,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Result<(), PacketError> {
        self.now = self.now.max(now);
        self.stats.packets_received += 1;
        let result = self.process(normalize(from), bytes);
        match result {
            Ok(()) => self.stats.packets_accepted += 1,
            Err(e) => self.stats.drops.add(e),
        }
        result
    }

    fn process(&mut self, from: SocketAddr, bytes: &[u8]) -> Result<(), PacketError> {
        match bytes.first() {
            None => return Err(PacketError::TooSmall),
            Some(0) => return self.process_request(from, bytes),
            Some(_) => {}
        }
        let slot_index = self.by_addr.get(&from).copied();
        let now = self.now;
        let key = match slot_index
            .and_then(|i| self.slots.get(i))
            .and_then(|s| s.as_ref())
        {
            Some(slot) => slot.receive_key,
            None => match self.mappings.get_mut(&from) {
                Some(m) if !m.expired(now) => {
                    m.last_access = now;
                    m.receive_key
                }
                _ => return Err(PacketError::NoKeyForAddress),
            },
        };
        let header = packet::read_header(bytes)?;
        if matches!(
            header.packet_type,
            PacketType::Denied | PacketType::Challenge
        ) {
            return Err(PacketError::TypeNotAllowed);
        }
        let replay_checked = header.packet_type.replay_protected();
        let slot_ref = slot_index
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref);
        if replay_checked && slot_ref.is_some_and(|s| s.replay.already_received(header.sequence)) {
            return Err(PacketError::Replayed);
        }
        let packet = packet::open(bytes, &header, &key, self.config.protocol_id)?;
        if replay_checked {
            if let Some(Some(slot)) = slot_index.and_then(|i| self.slots.get_mut(i)) {
                slot.replay.advance(header.sequence);
            }
        }
        match (packet, slot_index) {
            (Packet::Response(body), None) => self.process_response(from, body),
            (Packet::Response(_), Some(_)) => Err(PacketError::AddressAlreadyConnected),
            (Packet::KeepAlive { .. }, Some(i)) => {
                if let Some(Some(slot)) = self.slots.get_mut(i) {
                    slot.last_receive = now;
                    slot.confirmed = true;
                }
                Ok(())
            }
            (Packet::Payload(payload), Some(i)) => {
                let Some(Some(slot)) = self.slots.get_mut(i) else {
                    return Err(PacketError::UnexpectedInState);
                };
                slot.last_receive = now;
                slot.confirmed = true;
                if slot.queued_payloads >= PACKET_QUEUE_SIZE {
                    return Err(PacketError::QueueFull);
                }
                slot.queued_payloads += 1;
                let client_id = slot.client_id;
                self.events.push_back(ServerEvent::Payload {
                    client_index: i,
                    client_id,
                    payload,
                });
                Ok(())
            }
            (Packet::Disconnect, Some(i)) => {
                self.remove_client(i, DisconnectReason::ClientDisconnected, false);
                Ok(())
            }
            _ => Err(PacketError::UnexpectedInState),
        }
    }

    fn process_request(&mut self, from: SocketAddr, bytes: &[u8]) -> Result<(), PacketError> {
        // Only a request of the right size is counted against its source: anything else
        // is refused as cheaply by its size.
        if bytes.len() == REQUEST_PACKET_BYTES
            && !self.source_counts.admit(self.now, source_of(from))
        {
            return Err(PacketError::SourceOverShare);
        }
        let request = packet::read_request(bytes, self.config.protocol_id, self.unix_time())?;
        self.stats.requests_decrypted += 1;
        let private = PrivateConnectToken::decrypt(
            &request.private_data,
            self.config.protocol_id,
            request.expire_timestamp,
            &request.nonce,
            &self.config.private_key,
        )
        .map_err(|e| match e {
            crate::TokenError::DecryptFailed => PacketError::TokenDecryptFailed,
            _ => PacketError::TokenMalformed,
        })?;
        let ours = private.server_addresses.iter().any(|a| {
            let a = normalize(*a);
            self.config
                .public_addresses
                .iter()
                .any(|p| *p == a || (p.ip().is_unspecified() && p.port() == a.port()))
        });
        if !ours {
            return Err(PacketError::ServerAddressNotInToken);
        }
        if self.by_addr.contains_key(&from) {
            return Err(PacketError::AddressAlreadyConnected);
        }
        let replacing = self.replaces(private.client_id, from)?;
        let mut mac = [0u8; MAC_BYTES];
        mac.copy_from_slice(&request.private_data[request.private_data.len() - MAC_BYTES..]);
        if !self.token_entry_find_or_add(from, mac) {
            return Err(PacketError::TokenReused);
        }
        // A replacement takes the slot it frees.
        let others = self.num_connected() - usize::from(replacing);
        if others >= self.config.max_clients || !self.accepting {
            self.stats.denied += 1;
            self.send_global(&Packet::Denied, from, &private.server_to_client_key);
            return Ok(());
        }
        let timeout = private.timeout_seconds;
        let mapping = Mapping {
            send_key: private.server_to_client_key,
            receive_key: private.client_to_server_key,
            timeout_seconds: timeout,
            expire_at: (timeout >= 0).then(|| self.now + Duration::from_secs(timeout as u64)),
            last_access: self.now,
            order: 0,
        };
        self.add_mapping(from, mapping);
        let token = ChallengeToken {
            client_id: private.client_id,
            user_data: private.user_data,
        };
        let sequence = self.challenge_sequence;
        let token_data = token
            .encrypt(sequence, &self.challenge_key)
            .map_err(|_| PacketError::TokenMalformed)?;
        self.challenge_sequence += 1;
        let packet = Packet::Challenge(ChallengeBody {
            token_sequence: sequence,
            token_data: Box::new(token_data),
        });
        self.send_global(&packet, from, &private.server_to_client_key);
        Ok(())
    }

    /// The reference's `netcode_connect_token_entries_find_or_add`: true for a token not
    /// seen yet (now remembered with `addr`, the oldest forgotten if the history is full)
    /// or seen from `addr` first; false for a token first seen from another address.
    ///
    /// The reference scans a fixed array for the MAC and for the entry with the oldest
    /// time. Entries get their time when added and never again, from a clock that never
    /// goes back, so the one added first is an oldest (the reference may pick another
    /// added at the same instant): a queue in adding order and a map by MAC make the same
    /// decisions in constant time, where a scan of [`MAX_CONNECT_TOKEN_ENTRIES`] on every
    /// valid request would not be cheap.
    fn token_entry_find_or_add(&mut self, addr: SocketAddr, mac: [u8; MAC_BYTES]) -> bool {
        if let Some(first) = self.token_addrs.get(&mac) {
            return *first == addr;
        }
        if self.token_order.len() >= MAX_CONNECT_TOKEN_ENTRIES {
            if let Some(oldest) = self.token_order.pop_front() {
                self.token_addrs.remove(&oldest);
            }
        }
        self.token_order.push_back(mac);
        self.token_addrs.insert(mac, addr);
        true
    }

    /// Connect tokens remembered against reuse (at most [`MAX_CONNECT_TOKEN_ENTRIES`]).
    pub fn remembered_tokens(&self) -> usize {
        self.token_order.len()
    }

    /// Takes (or renews) `addr`'s pending entry, evicting another when the table is full
    /// (see "Pending handshakes" on [`Server`]).
    fn add_mapping(&mut self, addr: SocketAddr, mut mapping: Mapping) {
        let now = self.now;
        if let Some(m) = self.mappings.get_mut(&addr) {
            if !m.expired(now) {
                mapping.order = m.order;
                *m = mapping;
                return;
            }
            self.remove_mapping(addr);
        }
        // Expired entries go first, oldest first (the oldest is the likeliest expired);
        // only then is a live one evicted.
        while self.mappings.len() >= MAX_ENCRYPTION_MAPPINGS {
            let oldest = self.by_order.first_key_value().map(|(_, a)| *a);
            match oldest.and_then(|a| self.mappings.get(&a).map(|m| (a, m.expired(now)))) {
                Some((a, true)) => {
                    self.remove_mapping(a);
                }
                _ => break,
            }
        }
        if self.mappings.len() >= MAX_ENCRYPTION_MAPPINGS {
            self.evict_pending();
        }
        mapping.order = self.mapping_order;
        self.mapping_order += 1;
        self.by_order.insert(mapping.order, addr);
        let n = self.per_source.entry(source_of(addr)).or_default();
        *n += 1;
        if *n == PENDING_SHARE_PER_SOURCE {
            self.crowded_sources += 1;
        }
        self.mappings.insert(addr, mapping);
    }

    /// Forgets `addr`'s pending entry, if any, keeping the indexes in step.
    fn remove_mapping(&mut self, addr: SocketAddr) -> Option<Mapping> {
        let m = self.mappings.remove(&addr)?;
        self.by_order.remove(&m.order);
        let source = source_of(addr);
        if let Some(n) = self.per_source.get_mut(&source) {
            if *n == PENDING_SHARE_PER_SOURCE {
                self.crowded_sources = self.crowded_sources.saturating_sub(1);
            }
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
        Some(m)
    }

    /// Evicts one pending entry: the oldest of the most crowded source if it holds its
    /// share or more, else the oldest of all. The oldest is the first of `by_order`; the
    /// most crowded source takes a scan of the table, but only while some source holds
    /// its share, that is while one host floods from many ports and pays for it.
    fn evict_pending(&mut self) {
        let crowded = self.crowded_sources > 0;
        let victim = if crowded {
            let most = self.per_source.values().copied().max().unwrap_or(0);
            let per_source = &self.per_source;
            self.by_order
                .values()
                .find(|a| per_source.get(&source_of(**a)) == Some(&most))
                .copied()
        } else {
            self.by_order.first_key_value().map(|(_, a)| *a)
        };
        let Some(victim) = victim else { return };
        self.remove_mapping(victim);
        if crowded {
            self.stats.evicted_crowded_source += 1;
        } else {
            self.stats.evicted_oldest += 1;
        }
    }

    fn process_response(
        &mut self,
        from: SocketAddr,
        body: ChallengeBody,
    ) -> Result<(), PacketError> {
        let token =
            ChallengeToken::decrypt(&body.token_data, body.token_sequence, &self.challenge_key)
                .map_err(|_| PacketError::ChallengeDecryptFailed)?;
        if self.replaces(token.client_id, from)? {
            if let Some(old) = self.find_client(token.client_id) {
                // The old address gets the disconnect packets too, should it still listen.
                self.remove_client(old, DisconnectReason::Replaced, true);
            }
        }
        let Some(mapping) = self.mappings.get(&from).cloned() else {
            return Err(PacketError::NoKeyForAddress);
        };
        let free = self.slots.iter().position(Option::is_none);
        let Some(index) = free.filter(|_| self.accepting) else {
            self.stats.denied += 1;
            self.send_global(&Packet::Denied, from, &mapping.send_key);
            return Ok(());
        };
        self.remove_mapping(from);
        self.slots[index] = Some(Slot {
            client_id: token.client_id,
            addr: from,
            send_key: mapping.send_key,
            receive_key: mapping.receive_key,
            timeout_seconds: mapping.timeout_seconds,
            confirmed: false,
            sequence: 0,
            last_send: self.now,
            last_receive: self.now,
            replay: ReplayProtection::new(),
            user_data: Box::new(token.user_data),
            queued_payloads: 0,
        });
        self.by_addr.insert(from, index);
        self.stats.connects += 1;
        self.events.push_back(ServerEvent::Connected {
            client_index: index,
            client_id: token.client_id,
            addr: from,
            user_data: Box::new(token.user_data),
        });
        self.send_keep_alive(index);
        Ok(())
    }

    fn send_keep_alive(&mut self, index: usize) {
        let packet = Packet::KeepAlive {
            client_index: index as u32,
            max_clients: self.config.max_clients as u32,
        };
        self.send_to_slot(index, &packet);
    }

    fn remove_client(&mut self, index: usize, reason: DisconnectReason, send_disconnect: bool) {
        if send_disconnect {
            for _ in 0..NUM_DISCONNECT_PACKETS {
                self.send_to_slot(index, &Packet::Disconnect);
            }
        }
        let Some(slot) = self.slots.get_mut(index).and_then(Option::take) else {
            return;
        };
        self.by_addr.remove(&slot.addr);
        self.remove_mapping(slot.addr);
        self.events.retain(
            |e| !matches!(e, ServerEvent::Payload { client_index, .. } if *client_index == index),
        );
        self.stats.disconnects += 1;
        if reason == DisconnectReason::TimedOut {
            self.stats.timeouts += 1;
        }
        self.events.push_back(ServerEvent::Disconnected {
            client_index: index,
            client_id: slot.client_id,
            addr: slot.addr,
            reason,
        });
    }

    /// Advances time: times out silent clients, expires stale encryption mappings and sends
    /// keep-alives (10 Hz) to clients that got nothing else.
    pub fn update(&mut self, now: Duration) {
        self.now = self.now.max(now);
        let now = self.now;
        for i in 0..self.slots.len() {
            let Some(slot) = &self.slots[i] else { continue };
            if slot.timeout_seconds > 0
                && slot.last_receive + Duration::from_secs(slot.timeout_seconds as u64) <= now
            {
                self.remove_client(i, DisconnectReason::TimedOut, false);
                continue;
            }
            if slot.last_send + PACKET_SEND_INTERVAL <= now {
                self.send_keep_alive(i);
            }
        }
        let expired: Vec<SocketAddr> = self
            .mappings
            .iter()
            .filter(|(_, m)| m.expired(now))
            .map(|(a, _)| *a)
            .collect();
        for a in expired {
            self.remove_mapping(a);
        }
    }

    /// Sends a payload (1 to 1200 bytes) to the client in slot `client_index`. Until the
    /// client confirms, a keep-alive goes first, so it learns its slot.
    pub fn send_payload(&mut self, client_index: usize, payload: &[u8]) -> Result<(), SendError> {
        if payload.is_empty() || payload.len() > crate::MAX_PAYLOAD_BYTES {
            return Err(SendError::PayloadSize(payload.len()));
        }
        let Some(Some(slot)) = self.slots.get(client_index) else {
            return Err(SendError::NotConnected);
        };
        if !slot.confirmed {
            self.send_keep_alive(client_index);
        }
        self.send_to_slot(client_index, &Packet::Payload(payload.to_vec()));
        Ok(())
    }

    /// Disconnects a client: 10 redundant disconnect packets, then its slot is freed.
    pub fn disconnect(&mut self, client_index: usize) -> Result<(), SendError> {
        if !self.is_connected(client_index) {
            return Err(SendError::NotConnected);
        }
        self.remove_client(client_index, DisconnectReason::ServerDisconnected, true);
        Ok(())
    }

    /// Disconnects every client (for a clean shutdown).
    pub fn disconnect_all(&mut self) {
        for i in 0..self.slots.len() {
            if self.is_connected(i) {
                self.remove_client(i, DisconnectReason::ServerDisconnected, true);
            }
        }
    }

    /// The next packet to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        let event = self.events.pop_front()?;
        if let ServerEvent::Payload { client_index, .. } = &event {
            if let Some(Some(slot)) = self.slots.get_mut(*client_index) {
                slot.queued_payloads = slot.queued_payloads.saturating_sub(1);
            }
        }
        Some(event)
    }

    /// Whether slot `client_index` holds a connected client.
    pub fn is_connected(&self, client_index: usize) -> bool {
        matches!(self.slots.get(client_index), Some(Some(_)))
    }

    /// Admits new clients (the default) or denies them as if full (`false`), while the
    /// connected ones play on: a server draining before it exits stops admitting.
    pub fn set_accepting(&mut self, accepting: bool) {
        self.accepting = accepting;
    }

    /// Lets a valid connect token for a client id that is connected from another address
    /// end that connection ([`DisconnectReason::Replaced`]) and take its place, instead of
    /// being refused (`ClientIdAlreadyConnected`, the reference's rule and the default):
    /// a phone that changed networks comes back at once, not after its old connection's
    /// timeout. The token, which only the backend issues, is the proof.
    pub fn set_replace_connected(&mut self, replace: bool) {
        self.replace_connected = replace;
    }

    /// Whether a request for a connected client id from a new address is refused (`Err`)
    /// or replaces the connection (`Ok(true)`); `Ok(false)` when the id is not connected.
    fn replaces(&self, client_id: u64, from: SocketAddr) -> Result<bool, PacketError> {
        let Some(index) = self.find_client(client_id) else {
            return Ok(false);
        };
        let elsewhere = self.slots[index].as_ref().is_some_and(|s| s.addr != from);
        if self.replace_connected && elsewhere {
            Ok(true)
        } else {
            Err(PacketError::ClientIdAlreadyConnected)
        }
    }

    /// Whether new clients are admitted.
    pub fn is_accepting(&self) -> bool {
        self.accepting
    }

    /// Number of connected clients.
    pub fn num_connected(&self) -> usize {
        self.by_addr.len()
    }

    /// The slot of the connected client with this id.
    pub fn find_client(&self, client_id: u64) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.client_id == client_id))
    }

    /// The id of the client in a slot.
    pub fn client_id(&self, client_index: usize) -> Option<u64> {
        self.slots.get(client_index)?.as_ref().map(|s| s.client_id)
    }

    /// The address of the client in a slot.
    pub fn client_addr(&self, client_index: usize) -> Option<SocketAddr> {
        self.slots.get(client_index)?.as_ref().map(|s| s.addr)
    }

    /// The user data from the connect token of the client in a slot.
    pub fn user_data(&self, client_index: usize) -> Option<&[u8; USER_DATA_BYTES]> {
        self.slots
            .get(client_index)?
            .as_ref()
            .map(|s| &*s.user_data)
    }

    /// Slots of connected clients.
    pub fn connected_clients(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|_| i))
    }

    /// Encryption mappings held for clients still in the handshake (at most
    /// [`MAX_ENCRYPTION_MAPPINGS`]).
    pub fn pending_mappings(&self) -> usize {
        self.mappings.len()
    }

    /// Events waiting in [`Server::poll_event`].
    pub fn queued_events(&self) -> usize {
        self.events.len()
    }
}

/// The source a pending entry is charged to: the IPv4 address, or the IPv6 /64 (an
/// IPv4-mapped IPv6 address counts as its IPv4 address); never the port.
fn source_of(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V4(ip) => IpAddr::V4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = ip.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_history_is_fixed_size_and_forgets_the_oldest_first() {
        let addr: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
        let config = ServerConfig {
            protocol_id: 1,
            private_key: [7; 32],
            max_clients: 4,
            public_addresses: vec![addr],
        };
        let mut s = Server::new(config, [9; 32], Duration::ZERO, 0).expect("server");
        let a: SocketAddr = "198.51.100.1:1000".parse().expect("addr");
        let b: SocketAddr = "198.51.100.2:1000".parse().expect("addr");
        let mac = |i: usize| {
            let mut m = [0xAA; MAC_BYTES];
            m[..8].copy_from_slice(&(i as u64).to_le_bytes());
            m
        };
        assert!(s.token_entry_find_or_add(a, mac(0)));
        // Every other token the history holds beside the first: still refused from `b`.
        for i in 1..MAX_CONNECT_TOKEN_ENTRIES {
            s.now += Duration::from_millis(1);
            assert!(s.token_entry_find_or_add(b, mac(i)));
        }
        assert_eq!(s.remembered_tokens(), MAX_CONNECT_TOKEN_ENTRIES);
        assert!(!s.token_entry_find_or_add(b, mac(0)));
        assert!(
            s.token_entry_find_or_add(a, mac(0)),
            "its own address may retry"
        );
        // One more pushes out the oldest, the first, and only it.
        assert!(s.token_entry_find_or_add(b, mac(MAX_CONNECT_TOKEN_ENTRIES)));
        assert_eq!(s.remembered_tokens(), MAX_CONNECT_TOKEN_ENTRIES);
        assert!(!s.token_entry_find_or_add(a, mac(1)));
        assert!(s.token_entry_find_or_add(b, mac(0)), "forgotten: new again");
        // ... which pushed out the second.
        assert!(s.token_entry_find_or_add(a, mac(1)));
        assert_eq!(s.remembered_tokens(), MAX_CONNECT_TOKEN_ENTRIES);
        assert_eq!(s.token_addrs.len(), MAX_CONNECT_TOKEN_ENTRIES);
    }

    #[test]
    fn sources_ignore_ports_and_the_ipv6_interface_id() {
        let a: SocketAddr = "198.51.100.7:1000".parse().expect("addr");
        let b: SocketAddr = "198.51.100.7:2000".parse().expect("addr");
        let c: SocketAddr = "198.51.100.8:1000".parse().expect("addr");
        assert_eq!(source_of(a), source_of(b));
        assert_ne!(source_of(a), source_of(c));
        let d: SocketAddr = "[2001:db8:1:2:aaaa::1]:1000".parse().expect("addr");
        let e: SocketAddr = "[2001:db8:1:2:bbbb::9]:3000".parse().expect("addr");
        let f: SocketAddr = "[2001:db8:1:3::1]:1000".parse().expect("addr");
        assert_eq!(source_of(d), source_of(e));
        assert_ne!(source_of(d), source_of(f));
        let mapped: SocketAddr = "[::ffff:198.51.100.7]:5000".parse().expect("addr");
        assert_eq!(source_of(mapped), source_of(a));
    }
}
