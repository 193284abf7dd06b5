//! Open-loop script: input as a pure function of the tick.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{BodyState, CubeInput, InputScript};

/// Ticks per independently generated stretch of the pattern. Each epoch has
/// its own ChaCha stream, so any tick is reachable without replaying from 0.
const EPOCH_TICKS: u64 = 1024;
/// Segment lengths in ticks: 0.25 s to 1.5 s at 64 Hz.
const MIN_SEGMENT: u64 = 16;
const MAX_SEGMENT: u64 = 96;
/// Share of segments with no key held.
const IDLE_CHANCE: f64 = 0.2;
/// Share of moving segments that also hold JUMP.
const JUMP_CHANCE: f64 = 0.25;

/// Open-loop input: seeded segments of 16–96 ticks (0.25–1.5 s at 64 Hz),
/// each holding a random key combination or nothing.
///
/// The input depends only on the seed and the tick (never on what the player
/// does or on earlier calls), which makes it the script for determinism tests.
#[derive(Debug, Clone)]
pub struct PatternScript {
    seed: u64,
    /// The epoch `segments` was generated for.
    epoch: Option<u64>,
    /// Start tick and input of each segment of the cached epoch, ascending.
    segments: Vec<(u64, CubeInput)>,
}

impl PatternScript {
    /// A pattern for `seed`.
    pub fn new(seed: u64) -> Self {
        PatternScript {
            seed,
            epoch: None,
            segments: Vec::new(),
        }
    }

    fn generate(&mut self, epoch: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(epoch);
        self.segments.clear();
        let end = (epoch + 1).saturating_mul(EPOCH_TICKS);
        let mut start = epoch.saturating_mul(EPOCH_TICKS);
        while start < end {
            let input = if rng.random_bool(IDLE_CHANCE) {
                CubeInput::NONE
            } else {
                let keys = CubeInput::from_bits(rng.random_range(1..16u8)).unwrap_or_default();
                if rng.random_bool(JUMP_CHANCE) {
                    keys.with(CubeInput::JUMP)
                } else {
                    keys
                }
            };
            self.segments.push((start, input));
            start = start.saturating_add(rng.random_range(MIN_SEGMENT..=MAX_SEGMENT));
        }
        self.epoch = Some(epoch);
    }
}

impl InputScript for PatternScript {
    fn input(&mut self, tick: u64, _observed: Option<&BodyState>) -> CubeInput {
        let epoch = tick / EPOCH_TICKS;
        if self.epoch != Some(epoch) {
            self.generate(epoch);
        }
        let after = self.segments.partition_point(|&(start, _)| start <= tick);
        after
            .checked_sub(1)
            .and_then(|i| self.segments.get(i))
            .map_or(CubeInput::NONE, |&(_, input)| input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_depends_only_on_seed_and_tick() {
        let mut forward = PatternScript::new(7);
        let sequence: Vec<CubeInput> = (0..3000).map(|t| forward.input(t, None)).collect();
        let mut backward = PatternScript::new(7);
        for t in (0..3000).rev() {
            assert_eq!(backward.input(t, None), sequence[t as usize], "tick {t}");
        }
        let mut other = PatternScript::new(8);
        let different = (0..3000).filter(|&t| other.input(t, None) != sequence[t as usize]);
        assert!(different.count() > 1000);
    }

    #[test]
    fn segments_have_the_promised_lengths_and_include_idle() {
        let mut script = PatternScript::new(3);
        let inputs: Vec<CubeInput> = (0..EPOCH_TICKS).map(|t| script.input(t, None)).collect();
        let mut runs = Vec::new();
        let mut start = 0;
        for t in 1..=inputs.len() {
            if t == inputs.len() || inputs[t] != inputs[start] {
                runs.push((inputs[start], t - start));
                start = t;
            }
        }
        // Interior runs are at least one segment long (neighbours may merge).
        for &(_, len) in &runs[..runs.len() - 1] {
            assert!(len as u64 >= MIN_SEGMENT, "{runs:?}");
        }
        assert!(runs.iter().any(|(input, _)| input.is_none()));
        assert!(
            runs.iter()
                .any(|(input, _)| input.contains(CubeInput::JUMP))
        );
        assert!(
            inputs
                .iter()
                .all(|i| CubeInput::from_bits(i.bits()).is_some())
        );
    }

    #[test]
    fn far_ticks_are_cheap_and_valid() {
        let mut script = PatternScript::new(1);
        let _ = script.input(u64::MAX, None);
        let _ = script.input(u64::MAX / 2, None);
    }
}
