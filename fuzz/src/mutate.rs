//! A tiny seeded mutator, so the smoke test needs no fuzzing engine: random inputs and
//! mutations of valid encodings (bit flips, byte changes, truncation, insertion,
//! deletion, duplication, splicing).

/// SplitMix64: a small, seedable, good-enough generator. Same seed, same inputs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A random byte, biased toward the values decoders treat specially.
    pub fn byte(&mut self) -> u8 {
        const SPECIAL: [u8; 8] = [0, 1, 0x7f, 0x80, 0xff, 0x49, 0x53, 0xfe];
        if self.below(4) == 0 {
            SPECIAL[self.below(SPECIAL.len())]
        } else {
            self.next_u64() as u8
        }
    }
}

/// `len` random bytes.
pub fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.byte()).collect()
}

/// A copy of `input` with one to four random mutations; `other` is spliced from.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.byte();
            }
            2 => out.truncate(rng.below(out.len() + 1)),
            3 => {
                let at = rng.below(out.len() + 1);
                let n = 1 + rng.below(8);
                let bytes = random_bytes(rng, n);
                out.splice(at..at, bytes);
            }
            4 if !out.is_empty() => {
                let at = rng.below(out.len());
                let n = (1 + rng.below(8)).min(out.len() - at);
                out.drain(at..at + n);
            }
            5 if !out.is_empty() => {
                let at = rng.below(out.len());
                let n = (1 + rng.below(16)).min(out.len() - at);
                let chunk = out[at..at + n].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, chunk);
            }
            6 if !other.is_empty() => {
                let at = rng.below(out.len() + 1);
                let from = rng.below(other.len());
                let n = (1 + rng.below(32)).min(other.len() - from);
                out.truncate(at);
                out.extend_from_slice(&other[from..from + n]);
            }
            _ if !out.is_empty() => {
                // Overwrite a little-endian u16/u32 with an edge value.
                let at = rng.below(out.len());
                let edge: [u8; 4] = match rng.below(4) {
                    0 => [0; 4],
                    1 => [0xff; 4],
                    2 => 0x8000_0000u32.to_le_bytes(),
                    _ => 0x7fffu32.to_le_bytes(),
                };
                for (o, e) in out[at..].iter_mut().zip(edge.iter().take(1 + rng.below(4))) {
                    *o = *e;
                }
            }
            _ => out.push(rng.byte()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_mutating() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        let input = vec![1u8; 32];
        let changed = (0..100)
            .filter(|_| mutate(&mut r, &input, &[2; 8]) != input)
            .count();
        assert!(changed > 80, "{changed}");
        // Mutating nothing never panics.
        for _ in 0..100 {
            let _ = mutate(&mut r, &[], &[]);
        }
    }
}
