//! Private keys, connect tokens and randomness for the IO layer.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use lagless_netcode::{ConnectToken, Key, TokenParams};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::TransportError;

/// A cryptographic RNG seeded from the operating system.
pub fn os_rng() -> Result<ChaCha20Rng, TransportError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| TransportError::Random(e.to_string()))?;
    Ok(ChaCha20Rng::from_seed(seed))
}

/// 32 random bytes from the operating system.
pub fn random_key() -> Result<Key, TransportError> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| TransportError::Random(e.to_string()))?;
    Ok(key)
}

/// A fresh private key (shared by the backend that issues tokens and the servers).
pub fn generate_private_key() -> Result<Key, TransportError> {
    random_key()
}

/// Writes a private key as a 32-byte file (mode 0600 on Unix).
pub fn write_key_file(path: &Path, key: &Key) -> Result<(), TransportError> {
    let err = |e: std::io::Error| TransportError::KeyFile {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    std::fs::write(path, key).map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

/// Reads a 32-byte private key file.
pub fn read_key_file(path: &Path) -> Result<Key, TransportError> {
    let bytes = std::fs::read(path).map_err(|e| TransportError::KeyFile {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| TransportError::KeyFile {
            path: path.to_owned(),
            reason: format!("expected 32 bytes, found {}", bytes.len()),
        })
}

/// Seconds since the Unix epoch, from the system clock.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Issues a connect token now, as a backend would, with keys and nonce from the OS.
pub fn issue_token(
    private_key: &Key,
    protocol_id: u64,
    client_id: u64,
    servers: Vec<SocketAddr>,
    expire_seconds: u64,
    timeout_seconds: i32,
) -> Result<ConnectToken, TransportError> {
    let user_data = [0; lagless_netcode::USER_DATA_BYTES];
    let times = (expire_seconds, timeout_seconds);
    issue_token_with(
        private_key,
        protocol_id,
        client_id,
        servers,
        times,
        user_data,
    )
}

/// [`issue_token`] with the token's 256 bytes of user data, which only the server reads
/// (`session::match_user_data` names the match a client is to join); `times` are the
/// expiry and the timeout, in seconds.
pub fn issue_token_with(
    private_key: &Key,
    protocol_id: u64,
    client_id: u64,
    servers: Vec<SocketAddr>,
    (expire_seconds, timeout_seconds): (u64, i32),
    user_data: [u8; lagless_netcode::USER_DATA_BYTES],
) -> Result<ConnectToken, TransportError> {
    let mut params = TokenParams::new(protocol_id, client_id, servers);
    params.expire_seconds = Some(expire_seconds);
    params.timeout_seconds = timeout_seconds;
    params.user_data = user_data;
    Ok(ConnectToken::generate(
        &params,
        private_key,
        unix_now(),
        &mut os_rng()?,
    )?)
}

/// Writes a connect token as its standard 2048 bytes.
pub fn write_token_file(path: &Path, token: &ConnectToken) -> Result<(), TransportError> {
    let bytes = token.write()?;
    std::fs::write(path, bytes).map_err(|e| TransportError::KeyFile {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Reads a 2048-byte connect token file (as [`crate::UdpClient::connect`] takes it).
pub fn read_token_file(path: &Path) -> Result<Vec<u8>, TransportError> {
    let bytes = std::fs::read(path).map_err(|e| TransportError::KeyFile {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    ConnectToken::read(&bytes)?;
    Ok(bytes)
}
