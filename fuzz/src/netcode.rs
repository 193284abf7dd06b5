//! Targets for the netcode.io state machines (`lagless-netcode`) and the message channel
//! (`lagless_core::channel`, the transport's reliable channel), with their seeds: a real handshake and traffic
//! recorded with fixed keys, so mutations start from authenticated packets.

use std::net::SocketAddr;
use std::time::Duration;

use lagless_core::channel::MIN_CHANNEL_PACKET_BYTES;
use lagless_netcode::{
    Client, ConnectToken, MAX_PACKET_BYTES, MAX_PAYLOAD_BYTES, Server, ServerConfig, ServerEvent,
    TokenParams,
};
use lagless_transport::reliable::{MAX_MESSAGE_BYTES, ReliableChannel};

use crate::targets::{frame, packets};

const PROTOCOL_ID: u64 = 0x6c61_676c_6573_7321;
const PRIVATE_KEY: [u8; 32] = [1; 32];
const CHALLENGE_KEY: [u8; 32] = [2; 32];
const UNIX: u64 = 1_800_000_000;
const MAX_CLIENTS: usize = 4;

fn server_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 40000))
}
fn client_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 50000))
}
fn stranger_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 9], 50001))
}

fn token() -> Option<ConnectToken> {
    let mut params = TokenParams::new(PROTOCOL_ID, 7, vec![server_addr()]);
    params.expire_seconds = Some(300);
    ConnectToken::generate_with(&params, &PRIVATE_KEY, UNIX, [3; 24], [4; 32], [5; 32]).ok()
}

fn server() -> Option<Server> {
    let config = ServerConfig {
        protocol_id: PROTOCOL_ID,
        private_key: PRIVATE_KEY,
        max_clients: MAX_CLIENTS,
        public_addresses: vec![server_addr()],
    };
    Server::new(config, CHALLENGE_KEY, Duration::ZERO, UNIX).ok()
}

/// A netcode [`Server`] fed arbitrary datagrams (`dt_ms % 8 == 7`: from a stranger,
/// otherwise from the address the seeds' client uses), updating and sending to every
/// connected client in between. Its tables must stay bounded and it must never answer
/// with more than a full packet.
pub fn netcode_server(data: &[u8]) {
    let Some(mut server) = server() else { return };
    let mut now = Duration::ZERO;
    for (dt, packet) in packets(data).take(512) {
        now += Duration::from_millis(u64::from(dt));
        let from = if dt % 8 == 7 {
            stranger_addr()
        } else {
            client_addr()
        };
        let _ = server.handle_packet(now, from, packet);
        server.update(now);
        let clients: Vec<usize> = server.connected_clients().collect();
        for c in clients {
            let _ = server.send_payload(c, &[dt; 3]);
        }
        while let Some(t) = server.poll_transmit() {
            assert!(t.data.len() <= MAX_PACKET_BYTES, "oversized packet");
        }
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Payload { payload, .. } = e {
                assert!((1..=MAX_PAYLOAD_BYTES).contains(&payload.len()));
            }
        }
        assert!(server.num_connected() <= MAX_CLIENTS);
        assert!(server.pending_mappings() <= 4 * MAX_CLIENTS);
    }
}

/// A netcode [`Client`] holding the seeds' token, fed arbitrary datagrams (`dt_ms % 8 ==
/// 7`: from a stranger, otherwise from the server's address), sending payloads while
/// connected.
pub fn netcode_client(data: &[u8]) {
    let Some(token) = token() else { return };
    let mut client = Client::from_token(token, Duration::ZERO);
    let mut now = Duration::ZERO;
    for (dt, packet) in packets(data).take(512) {
        now += Duration::from_millis(u64::from(dt));
        let from = if dt % 8 == 7 {
            stranger_addr()
        } else {
            server_addr()
        };
        let _ = client.handle_packet(now, from, packet);
        client.update(now);
        if client.is_connected() {
            let _ = client.send_payload(&[dt; 5]);
        }
        while let Some(t) = client.poll_transmit() {
            assert!(t.data.len() <= MAX_PACKET_BYTES, "oversized packet");
        }
        while let Some(p) = client.recv() {
            assert!((1..=MAX_PAYLOAD_BYTES).contains(&p.len()));
        }
    }
}

/// A [`ReliableChannel`] (the core's message channel) given arbitrary steps:
/// `dt_ms % 3 == 0` queues the bytes as a message (reliable when `dt_ms` is even,
/// unreliable otherwise), anything else hands them over as a channel packet from the peer;
/// in between it writes one packet within a `dt_ms`-dependent budget (as the sessions do,
/// in the room their packets leave), then polls packets until none is due, and drains
/// messages.
pub fn reliable_channel(data: &[u8]) {
    let mut channel = ReliableChannel::default();
    let mut now = Duration::ZERO;
    for (dt, bytes) in packets(data).take(512) {
        now += Duration::from_millis(u64::from(dt));
        if dt % 3 == 0 {
            let _ = if dt % 2 == 0 {
                channel.send(bytes)
            } else {
                channel.send_unreliable(bytes)
            };
        } else {
            let _ = channel.handle_packet(bytes);
        }
        let budget = MIN_CHANNEL_PACKET_BYTES - 1 + usize::from(dt) * 5;
        if let Some(p) = channel.poll_packet_within(now, budget) {
            assert!(p.len() <= budget, "packet over its budget");
        }
        let mut polled = 0;
        while let Some(p) = channel.poll_packet(now) {
            assert!(p.len() <= lagless_transport::reliable::MAX_PACKET_BYTES);
            polled += 1;
            assert!(polled <= 1024, "the polling loop ran away");
        }
        while let Some(m) = channel.recv() {
            assert!((1..=MAX_MESSAGE_BYTES).contains(&m.len()));
        }
    }
}

/// A recorded handshake and traffic: (client to server, server to client), framed for
/// [`netcode_server`] and [`netcode_client`]. Every tenth server packet is lost in
/// `lossy` so resends appear.
pub(crate) fn netcode_sessions(lossy: bool) -> (Vec<u8>, Vec<u8>) {
    let (Some(token), Some(mut server)) = (token(), server()) else {
        return (Vec::new(), Vec::new());
    };
    let mut client = Client::from_token(token, Duration::ZERO);
    let (mut up, mut down) = (Vec::new(), Vec::new());
    let (mut last_up, mut last_down, mut n_down) = (0u64, 0u64, 0usize);
    for ms in (0..3000u64).step_by(10) {
        let now = Duration::from_millis(ms);
        client.update(now);
        if client.is_connected() && ms % 50 == 0 {
            let _ = client.send_payload(&ms.to_le_bytes());
        }
        if ms == 2500 {
            client.disconnect();
        }
        while let Some(t) = client.poll_transmit() {
            let _ = server.handle_packet(now, client_addr(), &t.data);
            up.push(((ms - last_up).min(250) as u8, t.data));
            last_up = ms;
        }
        server.update(now);
        let clients: Vec<usize> = server.connected_clients().collect();
        for c in clients {
            if ms % 30 == 0 {
                let _ = server.send_payload(c, &[ms as u8; 40]);
            }
        }
        while let Some(t) = server.poll_transmit() {
            n_down += 1;
            if lossy && n_down % 10 == 0 {
                continue;
            }
            let _ = client.handle_packet(now, server_addr(), &t.data);
            down.push(((ms - last_down).min(250) as u8, t.data));
            last_down = ms;
        }
        while server.poll_event().is_some() {}
        while client.recv().is_some() {}
    }
    // Keep dt even so no seed packet is re-routed to the stranger address.
    let even = |v: Vec<(u8, Vec<u8>)>| v.into_iter().map(|(d, p)| (d & !1, p)).collect::<Vec<_>>();
    (frame(&even(up)), frame(&even(down)))
}

/// Channel traffic: a sender's packets (as steps for [`reliable_channel`]), with queued
/// messages in between; the sender's packets carry reliable and unreliable messages.
pub(crate) fn reliable_traffic() -> Vec<u8> {
    let mut sender = ReliableChannel::default();
    let mut steps: Vec<(u8, Vec<u8>)> = Vec::new();
    for i in 0..40u16 {
        let now = Duration::from_millis(u64::from(i) * 40);
        let _ = sender.send(&i.to_le_bytes());
        if i % 3 == 0 {
            let _ = sender.send_unreliable(&[i as u8; 3]);
        }
        if i % 7 == 0 {
            steps.push((30, vec![i as u8; 1 + usize::from(i)]));
        }
        while let Some(p) = sender.poll_packet(now) {
            steps.push((40 - 40 % 3 + 1, p));
        }
    }
    frame(&steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_reach_the_connected_state() {
        let (up, down) = netcode_sessions(false);
        // Replaying the client's packets connects it on a fresh server.
        let mut server = server().expect("server");
        let mut now = Duration::ZERO;
        let mut connected = false;
        for (dt, p) in packets(&up) {
            now += Duration::from_millis(u64::from(dt));
            let _ = server.handle_packet(now, client_addr(), p);
            connected |= server.num_connected() == 1;
        }
        assert!(connected, "replayed seed connects");
        assert!(server.stats().packets_accepted > 10);
        // And the server's packets connect a fresh client.
        let mut client = Client::from_token(token().expect("token"), Duration::ZERO);
        let mut now = Duration::ZERO;
        let mut connected = false;
        for (dt, p) in packets(&down) {
            now += Duration::from_millis(u64::from(dt));
            let _ = client.handle_packet(now, server_addr(), p);
            connected |= client.is_connected();
        }
        assert!(connected, "replayed seed connects the client");
        let mut ch = ReliableChannel::default();
        let mut delivered = 0;
        for (dt, p) in packets(&reliable_traffic()) {
            if dt % 3 != 0 {
                ch.handle_packet(p).expect("valid channel packet");
            }
            while ch.recv().is_some() {
                delivered += 1;
            }
        }
        assert_eq!(delivered, 40 + 14, "40 reliable, 14 unreliable");
    }
}
