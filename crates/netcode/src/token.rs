//! Connect tokens (public and private parts) and challenge tokens.

use std::net::SocketAddr;

use rand::{CryptoRng, RngCore};

use crate::bytes::{Reader, WriteLe};
use crate::crypto::{self, Key};
use crate::error::TokenError;
use crate::{
    CHALLENGE_TOKEN_BYTES, CONNECT_TOKEN_BYTES, CONNECT_TOKEN_NONCE_BYTES,
    CONNECT_TOKEN_PRIVATE_BYTES, KEY_BYTES, MAC_BYTES, MAX_SERVERS_PER_CONNECT, USER_DATA_BYTES,
    VERSION_INFO,
};

/// The decrypted private part of a connect token: what only the backend and the dedicated
/// servers (who share the private key) can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateConnectToken {
    /// Globally unique client id, chosen by the backend.
    pub client_id: u64,
    /// Seconds without packets before either side times out; negative disables the timeout.
    pub timeout_seconds: i32,
    /// The servers this token may connect to (1 to 32), as the servers see themselves.
    pub server_addresses: Vec<SocketAddr>,
    /// Key for packets from the client to the server.
    pub client_to_server_key: Key,
    /// Key for packets from the server to the client.
    pub server_to_client_key: Key,
    /// Application data handed to the server on connect.
    pub user_data: [u8; USER_DATA_BYTES],
}

impl PrivateConnectToken {
    /// Writes the 1024-byte plaintext (zero padded; the last 16 bytes are room for the tag).
    pub fn write(&self) -> Result<[u8; CONNECT_TOKEN_PRIVATE_BYTES], TokenError> {
        check_addresses(&self.server_addresses)?;
        let mut v = Vec::with_capacity(CONNECT_TOKEN_PRIVATE_BYTES);
        v.put_u64(self.client_id);
        v.put_u32(self.timeout_seconds as u32);
        v.put_u32(self.server_addresses.len() as u32);
        for a in &self.server_addresses {
            v.put_address(a);
        }
        v.extend_from_slice(&self.client_to_server_key);
        v.extend_from_slice(&self.server_to_client_key);
        v.extend_from_slice(&self.user_data);
        let mut out = [0u8; CONNECT_TOKEN_PRIVATE_BYTES];
        // At most 8 + 4 + 4 + 32 * 19 + 64 + 256 = 944 <= 1008 bytes: always fits.
        out.get_mut(..v.len())
            .ok_or(TokenError::TooManyAddresses(self.server_addresses.len()))?
            .copy_from_slice(&v);
        Ok(out)
    }

    /// Reads a decrypted 1024-byte private token.
    pub fn read(buf: &[u8]) -> Result<Self, TokenError> {
        if buf.len() < CONNECT_TOKEN_PRIVATE_BYTES - MAC_BYTES {
            return Err(TokenError::WrongSize(buf.len()));
        }
        let mut r = Reader::new(buf);
        let short = TokenError::Truncated;
        let client_id = r.u64().ok_or(short)?;
        let timeout_seconds = r.u32().ok_or(short)? as i32;
        let addresses = read_addresses(&mut r)?;
        let client_to_server_key = r.array().ok_or(short)?;
        let server_to_client_key = r.array().ok_or(short)?;
        let user_data = r.array().ok_or(short)?;
        Ok(Self {
            client_id,
            timeout_seconds,
            server_addresses: addresses,
            client_to_server_key,
            server_to_client_key,
            user_data,
        })
    }

    /// Encrypts this token with XChaCha20-Poly1305 under the shared private key; the associated
    /// data is the version info, the protocol id and the expire timestamp.
    pub fn encrypt(
        &self,
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: &[u8; CONNECT_TOKEN_NONCE_BYTES],
        private_key: &Key,
    ) -> Result<[u8; CONNECT_TOKEN_PRIVATE_BYTES], TokenError> {
        let mut buf = self.write()?;
        let ad = private_token_ad(protocol_id, expire_timestamp);
        if !crypto::seal_x(private_key, nonce, &ad, &mut buf) {
            return Err(TokenError::Crypto);
        }
        Ok(buf)
    }

    /// Decrypts and reads an encrypted private token.
    pub fn decrypt(
        encrypted: &[u8; CONNECT_TOKEN_PRIVATE_BYTES],
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: &[u8; CONNECT_TOKEN_NONCE_BYTES],
        private_key: &Key,
    ) -> Result<Self, TokenError> {
        let mut buf = *encrypted;
        let ad = private_token_ad(protocol_id, expire_timestamp);
        if !crypto::open_x(private_key, nonce, &ad, &mut buf) {
            return Err(TokenError::DecryptFailed);
        }
        Self::read(&buf[..CONNECT_TOKEN_PRIVATE_BYTES - MAC_BYTES])
    }
}

fn private_token_ad(protocol_id: u64, expire_timestamp: u64) -> Vec<u8> {
    let mut ad = Vec::with_capacity(29);
    ad.extend_from_slice(VERSION_INFO);
    ad.put_u64(protocol_id);
    ad.put_u64(expire_timestamp);
    ad
}

fn check_addresses(addresses: &[SocketAddr]) -> Result<(), TokenError> {
    if addresses.is_empty() {
        return Err(TokenError::NoAddresses);
    }
    if addresses.len() > MAX_SERVERS_PER_CONNECT {
        return Err(TokenError::TooManyAddresses(addresses.len()));
    }
    Ok(())
}

fn read_addresses(r: &mut Reader<'_>) -> Result<Vec<SocketAddr>, TokenError> {
    let n = r.u32().ok_or(TokenError::Truncated)?;
    if n == 0 || n as usize > MAX_SERVERS_PER_CONNECT {
        return Err(TokenError::BadAddressCount(n));
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push(r.address().ok_or(TokenError::BadAddress)?);
    }
    Ok(out)
}

/// What a backend needs to issue a connect token.
#[derive(Clone, Debug)]
pub struct TokenParams {
    /// The game's protocol id; servers ignore tokens for other protocol ids.
    pub protocol_id: u64,
    /// Globally unique id of the authenticated client.
    pub client_id: u64,
    /// Public server addresses, in the order the client should try them (1 to 32).
    pub server_addresses: Vec<SocketAddr>,
    /// Seconds from now until the token expires; `None` never expires.
    pub expire_seconds: Option<u64>,
    /// Connection timeout in seconds; negative disables timeouts (development only).
    pub timeout_seconds: i32,
    /// Application data the server receives on connect.
    pub user_data: [u8; USER_DATA_BYTES],
}

impl TokenParams {
    /// Parameters with a 30 s lifetime, a 5 s timeout (the reference's defaults) and zeroed
    /// user data.
    pub fn new(protocol_id: u64, client_id: u64, server_addresses: Vec<SocketAddr>) -> Self {
        Self {
            protocol_id,
            client_id,
            server_addresses,
            expire_seconds: Some(30),
            timeout_seconds: 5,
            user_data: [0; USER_DATA_BYTES],
        }
    }
}

/// A connect token as the client receives it from the backend: the public part it can read
/// (server addresses, packet keys, timeouts) and the encrypted private part it forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectToken {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// Unix time (seconds) when the token was created.
    pub create_timestamp: u64,
    /// Unix time (seconds) when the token expires.
    pub expire_timestamp: u64,
    /// The XChaCha20 nonce of the private part.
    pub nonce: [u8; CONNECT_TOKEN_NONCE_BYTES],
    /// The encrypted private part, 1024 bytes including its 16-byte tag.
    pub private_data: [u8; CONNECT_TOKEN_PRIVATE_BYTES],
    /// Connection timeout in seconds; negative disables it.
    pub timeout_seconds: i32,
    /// Servers to try, in order.
    pub server_addresses: Vec<SocketAddr>,
    /// Key for packets from the client to the server.
    pub client_to_server_key: Key,
    /// Key for packets from the server to the client.
    pub server_to_client_key: Key,
}

impl ConnectToken {
    /// Issues a token as a backend would: fresh packet keys and nonce from `rng`, created at
    /// `now_unix` (seconds since the Unix epoch), encrypted with the servers' private key.
    pub fn generate<R: RngCore + CryptoRng>(
        params: &TokenParams,
        private_key: &Key,
        now_unix: u64,
        rng: &mut R,
    ) -> Result<Self, TokenError> {
        let mut nonce = [0u8; CONNECT_TOKEN_NONCE_BYTES];
        let mut c2s = [0u8; KEY_BYTES];
        let mut s2c = [0u8; KEY_BYTES];
        rng.fill_bytes(&mut nonce);
        rng.fill_bytes(&mut c2s);
        rng.fill_bytes(&mut s2c);
        Self::generate_with(params, private_key, now_unix, nonce, c2s, s2c)
    }

    /// [`ConnectToken::generate`] with the nonce and both packet keys given, for
    /// reproducible tokens (known-answer tests).
    pub fn generate_with(
        params: &TokenParams,
        private_key: &Key,
        now_unix: u64,
        nonce: [u8; CONNECT_TOKEN_NONCE_BYTES],
        client_to_server_key: Key,
        server_to_client_key: Key,
    ) -> Result<Self, TokenError> {
        let private = PrivateConnectToken {
            client_id: params.client_id,
            timeout_seconds: params.timeout_seconds,
            server_addresses: params.server_addresses.clone(),
            client_to_server_key,
            server_to_client_key,
            user_data: params.user_data,
        };
        let expire_timestamp = match params.expire_seconds {
            Some(s) => now_unix.saturating_add(s),
            None => u64::MAX,
        };
        let private_data =
            private.encrypt(params.protocol_id, expire_timestamp, &nonce, private_key)?;
        Ok(Self {
            protocol_id: params.protocol_id,
            create_timestamp: now_unix,
            expire_timestamp,
            nonce,
            private_data,
            timeout_seconds: params.timeout_seconds,
            server_addresses: params.server_addresses.clone(),
            client_to_server_key,
            server_to_client_key,
        })
    }

    /// Writes the standard 2048-byte token.
    pub fn write(&self) -> Result<[u8; CONNECT_TOKEN_BYTES], TokenError> {
        check_addresses(&self.server_addresses)?;
        let mut v = Vec::with_capacity(CONNECT_TOKEN_BYTES);
        v.extend_from_slice(VERSION_INFO);
        v.put_u64(self.protocol_id);
        v.put_u64(self.create_timestamp);
        v.put_u64(self.expire_timestamp);
        v.extend_from_slice(&self.nonce);
        v.extend_from_slice(&self.private_data);
        v.put_u32(self.timeout_seconds as u32);
        v.put_u32(self.server_addresses.len() as u32);
        for a in &self.server_addresses {
            v.put_address(a);
        }
        v.extend_from_slice(&self.client_to_server_key);
        v.extend_from_slice(&self.server_to_client_key);
        let mut out = [0u8; CONNECT_TOKEN_BYTES];
        out.get_mut(..v.len())
            .ok_or(TokenError::TooManyAddresses(self.server_addresses.len()))?
            .copy_from_slice(&v);
        Ok(out)
    }

    /// Reads a 2048-byte token, checking what a client can check: size, version, the number
    /// and types of addresses, and that it was not created after it expires.
    pub fn read(buf: &[u8]) -> Result<Self, TokenError> {
        if buf.len() != CONNECT_TOKEN_BYTES {
            return Err(TokenError::WrongSize(buf.len()));
        }
        let short = TokenError::Truncated;
        let mut r = Reader::new(buf);
        if r.bytes(VERSION_INFO.len()).ok_or(short)? != VERSION_INFO {
            return Err(TokenError::BadVersion);
        }
        let protocol_id = r.u64().ok_or(short)?;
        let create_timestamp = r.u64().ok_or(short)?;
        let expire_timestamp = r.u64().ok_or(short)?;
        if create_timestamp > expire_timestamp {
            return Err(TokenError::CreatedAfterExpiry);
        }
        let nonce = r.array().ok_or(short)?;
        let private_data = r.array().ok_or(short)?;
        let timeout_seconds = r.u32().ok_or(short)? as i32;
        let server_addresses = read_addresses(&mut r)?;
        let client_to_server_key = r.array().ok_or(short)?;
        let server_to_client_key = r.array().ok_or(short)?;
        Ok(Self {
            protocol_id,
            create_timestamp,
            expire_timestamp,
            nonce,
            private_data,
            timeout_seconds,
            server_addresses,
            client_to_server_key,
            server_to_client_key,
        })
    }
}

/// The plaintext of a challenge token: what the server tells itself through the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChallengeToken {
    /// The client id from the connect token.
    pub client_id: u64,
    /// The user data from the connect token.
    pub user_data: [u8; USER_DATA_BYTES],
}

impl ChallengeToken {
    /// Writes and encrypts the 300-byte challenge token (ChaCha20-Poly1305, no associated
    /// data, nonce from `sequence`).
    pub fn encrypt(
        &self,
        sequence: u64,
        key: &Key,
    ) -> Result<[u8; CHALLENGE_TOKEN_BYTES], TokenError> {
        let mut buf = [0u8; CHALLENGE_TOKEN_BYTES];
        buf[..8].copy_from_slice(&self.client_id.to_le_bytes());
        buf[8..8 + USER_DATA_BYTES].copy_from_slice(&self.user_data);
        if !crypto::seal(key, sequence, &[], &mut buf) {
            return Err(TokenError::Crypto);
        }
        Ok(buf)
    }

    /// Decrypts and reads a challenge token.
    pub fn decrypt(
        encrypted: &[u8; CHALLENGE_TOKEN_BYTES],
        sequence: u64,
        key: &Key,
    ) -> Result<Self, TokenError> {
        let mut buf = *encrypted;
        if !crypto::open(key, sequence, &[], &mut buf) {
            return Err(TokenError::DecryptFailed);
        }
        let mut r = Reader::new(&buf);
        let client_id = r.u64().ok_or(TokenError::Truncated)?;
        let user_data = r.array().ok_or(TokenError::Truncated)?;
        Ok(Self {
            client_id,
            user_data,
        })
    }
}
