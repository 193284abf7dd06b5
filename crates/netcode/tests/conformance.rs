//! Known-answer tests against bytes the reference C implementation (mas-bandwidth/netcode)
//! wrote with fixed keys, nonces and timestamps; see `tests/data/README.md`.

use std::net::SocketAddr;

use lagless_netcode::packet::{self, ChallengeBody, RequestPacket};
use lagless_netcode::{
    ChallengeToken, ConnectToken, Packet, PacketError, PrivateConnectToken, TokenParams,
};

const PROTOCOL_ID: u64 = 0x1122_3344_5566_7788;
const CREATE: u64 = 1_700_000_000;
const EXPIRE: u64 = CREATE + 30;
const CLIENT_ID: u64 = 0x0102_0304_0506_0708;

fn seq(start: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| start.wrapping_add(i as u8)).collect()
}
fn key(start: u8) -> [u8; 32] {
    seq(start, 32).try_into().expect("32")
}
fn data(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
fn addresses() -> Vec<SocketAddr> {
    [
        "127.0.0.1:40000",
        "[::1]:40000",
        "[2001:db8:85a3::8a2e:370:7334]:50001",
    ]
    .iter()
    .map(|s| s.parse().expect("address"))
    .collect()
}
fn params() -> TokenParams {
    TokenParams {
        protocol_id: PROTOCOL_ID,
        client_id: CLIENT_ID,
        server_addresses: addresses(),
        expire_seconds: Some(30),
        timeout_seconds: 5,
        user_data: seq(0, 256).try_into().expect("256"),
    }
}
fn nonce() -> [u8; 24] {
    seq(0x40, 24).try_into().expect("24")
}

#[test]
fn connect_token_reads_and_writes_identically() {
    let bytes = data("connect_token.bin");
    let token = ConnectToken::read(&bytes).expect("reference token reads");
    assert_eq!(token.protocol_id, PROTOCOL_ID);
    assert_eq!(token.create_timestamp, CREATE);
    assert_eq!(token.expire_timestamp, EXPIRE);
    assert_eq!(token.timeout_seconds, 5);
    assert_eq!(token.server_addresses, addresses());
    assert_eq!(token.client_to_server_key, key(0x80));
    assert_eq!(token.server_to_client_key, key(0xA0));
    assert_eq!(token.write().expect("write").as_slice(), bytes.as_slice());

    // Generating the same token from the same inputs gives the same 2048 bytes.
    let ours =
        ConnectToken::generate_with(&params(), &key(0x10), CREATE, nonce(), key(0x80), key(0xA0))
            .expect("generate");
    assert_eq!(ours.write().expect("write").as_slice(), bytes.as_slice());
}

#[test]
fn private_token_decrypts_and_encrypts_identically() {
    let token = ConnectToken::read(&data("connect_token.bin")).expect("token");
    let private = PrivateConnectToken::decrypt(
        &token.private_data,
        PROTOCOL_ID,
        EXPIRE,
        &nonce(),
        &key(0x10),
    )
    .expect("decrypts with the private key");
    assert_eq!(private.client_id, CLIENT_ID);
    assert_eq!(private.server_addresses, addresses());
    assert_eq!(private.user_data.to_vec(), seq(0, 256));
    assert_eq!(
        private.write().expect("write").as_slice(),
        data("private_token_plain.bin").as_slice()
    );
    let again = private
        .encrypt(PROTOCOL_ID, EXPIRE, &nonce(), &key(0x10))
        .expect("encrypt");
    assert_eq!(again, token.private_data);
    // Another key, protocol id or expiry: refused.
    assert!(
        PrivateConnectToken::decrypt(
            &token.private_data,
            PROTOCOL_ID,
            EXPIRE,
            &nonce(),
            &key(0x11)
        )
        .is_err()
    );
    assert!(
        PrivateConnectToken::decrypt(
            &token.private_data,
            PROTOCOL_ID + 1,
            EXPIRE,
            &nonce(),
            &key(0x10)
        )
        .is_err()
    );
    assert!(
        PrivateConnectToken::decrypt(
            &token.private_data,
            PROTOCOL_ID,
            EXPIRE + 1,
            &nonce(),
            &key(0x10)
        )
        .is_err()
    );
}

#[test]
fn challenge_token_identical() {
    let bytes: [u8; 300] = data("challenge_token.bin").try_into().expect("300");
    let t = ChallengeToken::decrypt(&bytes, 7, &key(0xC0)).expect("decrypt");
    assert_eq!(t.client_id, CLIENT_ID);
    assert_eq!(t.encrypt(7, &key(0xC0)).expect("encrypt"), bytes);
}

fn check_packet(name: &str, sequence: u64, key: [u8; 32], expected: Packet) {
    let bytes = data(name);
    let got =
        Packet::read(&bytes, &key, PROTOCOL_ID, CREATE).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got, expected, "{name}");
    assert_eq!(
        expected.write(sequence, &key, PROTOCOL_ID).expect("write"),
        bytes,
        "{name}"
    );
    if sequence != 0 || expected.packet_type() != lagless_netcode::PacketType::Request {
        let header = packet::read_header(&bytes);
        if let Ok(h) = header {
            assert_eq!(h.sequence, sequence, "{name}");
        }
    }
}

#[test]
fn packets_identical() {
    let token = ConnectToken::read(&data("connect_token.bin")).expect("token");
    let challenge: [u8; 300] = data("challenge_token.bin").try_into().expect("300");
    let c2s = key(0x80);
    let s2c = key(0xA0);
    check_packet(
        "packet_request.bin",
        0,
        c2s,
        Packet::Request(RequestPacket {
            protocol_id: PROTOCOL_ID,
            expire_timestamp: EXPIRE,
            nonce: nonce(),
            private_data: Box::new(token.private_data),
        }),
    );
    check_packet(
        "packet_denied_s8000000000000000.bin",
        1 << 63,
        s2c,
        Packet::Denied,
    );
    let body = ChallengeBody {
        token_sequence: 7,
        token_data: Box::new(challenge),
    };
    check_packet(
        "packet_challenge_s8000000000000001.bin",
        (1 << 63) + 1,
        s2c,
        Packet::Challenge(body.clone()),
    );
    check_packet("packet_response_s1.bin", 1, c2s, Packet::Response(body));
    check_packet(
        "packet_keepalive_s0.bin",
        0,
        s2c,
        Packet::KeepAlive {
            client_index: 5,
            max_clients: 64,
        },
    );
    check_packet(
        "packet_payload_s1000.bin",
        1000,
        c2s,
        Packet::Payload(seq(0, 100)),
    );
    check_packet(
        "packet_payload1200_s1122334455667788.bin",
        0x1122_3344_5566_7788,
        s2c,
        Packet::Payload(seq(3, 1200)),
    );
    check_packet(
        "packet_disconnect_s10000.bin",
        0x10000,
        c2s,
        Packet::Disconnect,
    );
}

#[test]
fn reference_packets_refused_when_tampered() {
    for name in [
        "packet_keepalive_s0.bin",
        "packet_payload_s1000.bin",
        "packet_disconnect_s10000.bin",
    ] {
        let bytes = data(name);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            let r = Packet::read(&b, &key(0xA0), PROTOCOL_ID, CREATE).and(Packet::read(
                &b,
                &key(0x80),
                PROTOCOL_ID,
                CREATE,
            ));
            assert!(r.is_err(), "{name}: flipping byte {i} was accepted");
        }
    }
    // The request is refused once its token expired.
    assert_eq!(
        packet::read_request(&data("packet_request.bin"), PROTOCOL_ID, EXPIRE),
        Err(PacketError::TokenExpired)
    );
}
