//! State that is not computed twice: snapshots of the model state after token prefixes, kept in
//! an LRU bounded in bytes, and the prefill that restores the longest cached prefix of a prompt.
//!
//! A hybrid model cannot shorten a state to an earlier position the way a transformer truncates
//! its KV cache: the delta-net state exists only at the positions where it was saved. So the
//! prefill stops at message boundaries (where a later conversation that repeats the messages
//! renders the same tokens) and keeps a snapshot at each.

use crate::model::{Engine, ModelError, Snapshot};

struct Entry {
    tokens: Vec<u32>,
    snapshot: Snapshot,
    last_use: u64,
}

/// Snapshots keyed by the tokens that produced them, least recently used dropped first.
pub struct PrefixCache {
    budget_bytes: usize,
    entries: Vec<Entry>,
    clock: u64,
}

impl PrefixCache {
    pub fn new(budget_bytes: usize) -> PrefixCache {
        PrefixCache {
            budget_bytes,
            entries: Vec::new(),
            clock: 0,
        }
    }

    pub fn budget_bytes(&self) -> usize {
        self.budget_bytes
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn used_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.snapshot.bytes()).sum()
    }

    /// The longest cached state whose tokens begin `tokens` and leave at least one of them to
    /// feed (the next token's logits come from feeding it).
    pub fn longest_prefix_of(&mut self, tokens: &[u32]) -> Option<(&[u32], &Snapshot)> {
        self.clock += 1;
        let best = self
            .entries
            .iter_mut()
            .filter(|e| e.tokens.len() < tokens.len() && tokens.starts_with(&e.tokens))
            .max_by_key(|e| e.tokens.len())?;
        best.last_use = self.clock;
        Some((&best.tokens, &best.snapshot))
    }

    /// Keeps `snapshot` as the state after `tokens`, dropping the least recently used entries
    /// to stay within the budget; a snapshot larger than the whole budget is not kept.
    pub fn insert(&mut self, tokens: Vec<u32>, snapshot: Snapshot) {
        if snapshot.bytes() > self.budget_bytes || tokens.is_empty() {
            return;
        }
        self.clock += 1;
        self.entries.retain(|e| e.tokens != tokens);
        while self.used_bytes() + snapshot.bytes() > self.budget_bytes {
            let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_use)
            else {
                break;
            };
            self.entries.swap_remove(oldest);
        }
        self.entries.push(Entry {
            tokens,
            snapshot,
            last_use: self.clock,
        });
    }

    /// The state kept or used last (for `--prompt-cache`: the one worth saving).
    pub fn most_recent(&self) -> Option<(&[u32], &Snapshot)> {
        self.entries
            .iter()
            .max_by_key(|e| e.last_use)
            .map(|e| (e.tokens.as_slice(), &e.snapshot))
    }

    /// Whether a state after exactly `tokens` is kept.
    pub fn contains(&self, tokens: &[u32]) -> bool {
        self.entries.iter().any(|e| e.tokens == tokens)
    }
}

/// Where [`prefill_boundaries`] left the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefilled {
    /// Prompt tokens whose state came from the cache.
    pub cached: usize,
    /// The engine's position: the prompt tokens fed so far (at least `cached`, less than the
    /// prompt's length).
    pub position: usize,
}

/// Restores the longest cached prefix of `prompt` (or starts empty), then feeds the prompt up
/// to each of `boundaries` (token counts, in any order) past that point and short of its end,
/// keeping a snapshot at each. The rest of the prompt, at least one token, is the caller's to
/// feed, so that its logits are the caller's too.
pub fn prefill_boundaries(
    engine: &mut dyn Engine,
    cache: &mut PrefixCache,
    prompt: &[u32],
    boundaries: &[usize],
) -> Result<Prefilled, ModelError> {
    if prompt.is_empty() {
        return Err(ModelError::EmptyInput);
    }
    let cached = match cache.longest_prefix_of(prompt) {
        Some((tokens, snapshot)) => {
            let cached = tokens.len();
            engine.restore(snapshot)?;
            cached
        }
        None => {
            engine.reset();
            0
        }
    };
    let mut stops: Vec<usize> = boundaries
        .iter()
        .copied()
        .filter(|&b| b > cached && b < prompt.len())
        .collect();
    stops.sort_unstable();
    stops.dedup();
    let mut position = cached;
    for stop in stops {
        engine.eval(&prompt[position..stop], false)?;
        position = stop;
        if cache.budget_bytes() > 0 && !cache.contains(&prompt[..stop]) {
            cache.insert(prompt[..stop].to_vec(), engine.snapshot()?);
        }
    }
    Ok(Prefilled { cached, position })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{load_engine, BackendKind};
    use std::sync::Arc;

    fn engine() -> Box<dyn Engine> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny-f32.gguf");
        let file = Arc::new(crate::gguf::GgufFile::open(path).unwrap());
        load_engine(file, BackendKind::Cpu, 1, 64).unwrap()
    }

    #[test]
    fn the_longest_prefix_is_restored_and_the_rest_fed() {
        let mut engine = engine();
        let mut cache = PrefixCache::new(usize::MAX);
        let prompt: Vec<u32> = (10..30).collect();
        let first = prefill_boundaries(engine.as_mut(), &mut cache, &prompt, &[4, 9, 20]).unwrap();
        assert_eq!(
            first,
            Prefilled {
                cached: 0,
                position: 9
            }
        );
        assert_eq!(cache.len(), 2);
        let cold = engine.eval(&prompt[9..], false).unwrap();

        let mut longer = prompt.clone();
        longer.extend([40, 41]);
        let second = prefill_boundaries(engine.as_mut(), &mut cache, &longer, &[4, 9]).unwrap();
        assert_eq!(
            second,
            Prefilled {
                cached: 9,
                position: 9
            }
        );
        assert_eq!(engine.eval(&prompt[9..], false).unwrap(), cold);

        // A prompt that departs from the cached tokens before the first boundary starts empty.
        let other: Vec<u32> = (11..30).collect();
        let third = prefill_boundaries(engine.as_mut(), &mut cache, &other, &[]).unwrap();
        assert_eq!(
            third,
            Prefilled {
                cached: 0,
                position: 0
            }
        );
    }

    #[test]
    fn the_least_recently_used_snapshot_goes_first() {
        let mut engine = engine();
        engine.eval(&[1, 2, 3], false).unwrap();
        let snapshot = engine.snapshot().unwrap();
        let mut cache = PrefixCache::new(2 * snapshot.bytes());
        cache.insert(vec![1], snapshot.clone());
        cache.insert(vec![2], snapshot.clone());
        assert!(cache.longest_prefix_of(&[1, 5]).is_some());
        cache.insert(vec![3], snapshot.clone());
        assert!(cache.contains(&[1]) && cache.contains(&[3]) && !cache.contains(&[2]));
        assert_eq!(cache.used_bytes(), 2 * snapshot.bytes());

        let mut tiny = PrefixCache::new(snapshot.bytes() - 1);
        tiny.insert(vec![1], snapshot);
        assert!(tiny.is_empty());
    }
}
