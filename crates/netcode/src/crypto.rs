//! The two AEAD primitives netcode.io 1.02 uses, from RustCrypto's `chacha20poly1305`.

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Tag, XChaCha20Poly1305, XNonce};

use crate::{KEY_BYTES, MAC_BYTES};

/// A 32-byte symmetric key (private key, packet keys, challenge key).
pub type Key = [u8; KEY_BYTES];

/// The 12-byte IETF nonce netcode builds from a 64-bit sequence number:
/// four zero bytes, then the sequence little-endian.
pub(crate) fn sequence_nonce(sequence: u64) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&sequence.to_le_bytes());
    nonce
}

/// Encrypts `buf[..len - 16]` in place with ChaCha20-Poly1305 (IETF) and writes the tag into
/// the last 16 bytes. `buf` must be at least 16 bytes long.
pub(crate) fn seal(key: &Key, sequence: u64, ad: &[u8], buf: &mut [u8]) -> bool {
    let Some(split) = buf.len().checked_sub(MAC_BYTES) else {
        return false;
    };
    let (msg, tag_out) = buf.split_at_mut(split);
    let cipher = ChaCha20Poly1305::new(key.into());
    match cipher.encrypt_in_place_detached(&sequence_nonce(sequence).into(), ad, msg) {
        Ok(tag) => {
            tag_out.copy_from_slice(&tag);
            true
        }
        Err(_) => false,
    }
}

/// Decrypts `buf` (ciphertext followed by its 16-byte tag) in place; on success the plaintext
/// is `buf[..len - 16]`.
pub(crate) fn open(key: &Key, sequence: u64, ad: &[u8], buf: &mut [u8]) -> bool {
    let Some(split) = buf.len().checked_sub(MAC_BYTES) else {
        return false;
    };
    let (msg, tag) = buf.split_at_mut(split);
    let tag = Tag::clone_from_slice(tag);
    let cipher = ChaCha20Poly1305::new(key.into());
    cipher
        .decrypt_in_place_detached(&sequence_nonce(sequence).into(), ad, msg, &tag)
        .is_ok()
}

/// XChaCha20-Poly1305 (24-byte nonce) seal, for the private connect token.
pub(crate) fn seal_x(key: &Key, nonce: &[u8; 24], ad: &[u8], buf: &mut [u8]) -> bool {
    let Some(split) = buf.len().checked_sub(MAC_BYTES) else {
        return false;
    };
    let (msg, tag_out) = buf.split_at_mut(split);
    let cipher = XChaCha20Poly1305::new(key.into());
    match cipher.encrypt_in_place_detached(XNonce::from_slice(nonce), ad, msg) {
        Ok(tag) => {
            tag_out.copy_from_slice(&tag);
            true
        }
        Err(_) => false,
    }
}

/// XChaCha20-Poly1305 open, for the private connect token.
pub(crate) fn open_x(key: &Key, nonce: &[u8; 24], ad: &[u8], buf: &mut [u8]) -> bool {
    let Some(split) = buf.len().checked_sub(MAC_BYTES) else {
        return false;
    };
    let (msg, tag) = buf.split_at_mut(split);
    let tag = Tag::clone_from_slice(tag);
    let cipher = XChaCha20Poly1305::new(key.into());
    cipher
        .decrypt_in_place_detached(XNonce::from_slice(nonce), ad, msg, &tag)
        .is_ok()
}
