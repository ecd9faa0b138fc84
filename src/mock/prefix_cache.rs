//! An opt-in prefix cache (`--prefix-cache-blocks N`), so a benchmark of prompt prefixes can
//! see reuse: the prompt's tokens are cut into blocks of [`BLOCK_TOKENS`], each block keyed
//! by a hash of itself and every block before it (as vLLM's automatic prefix caching keys
//! its KV blocks), and `usage.prompt_tokens_details.cached_tokens` reports the leading
//! blocks already held. The least recently used block is evicted past N blocks; within one
//! prompt the later blocks count as older.
//!
//! The prompt's tokens are its text parts encoded one by one with the builtin tokenizer and
//! concatenated in message order (images and other parts do not take part). Off by default:
//! the tokenizing and the lock cost nothing then.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::request::{Content, Message, Prompt};
use crate::hash::splitmix64;

/// Tokens per cached block, vLLM's default block size.
pub const BLOCK_TOKENS: usize = 16;

/// The cache of one server.
pub struct PrefixCache {
    capacity: usize,
    state: Mutex<Lru>,
}

/// Blocks by key with their last use, and the keys by last use (oldest first).
#[derive(Default)]
struct Lru {
    tick: u64,
    last_use: HashMap<u64, u64>,
    by_use: BTreeMap<u64, u64>,
}

impl PrefixCache {
    /// A cache of at most `capacity` blocks (at least 1).
    pub fn new(capacity: usize) -> Self {
        PrefixCache {
            capacity: capacity.max(1),
            state: Mutex::new(Lru::default()),
        }
    }

    /// Forgets every block (vLLM's `/reset_prefix_cache`).
    pub fn clear(&self) {
        let mut lru = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *lru = Lru::default();
    }

    /// Looks up the prompt `ids` and stores its blocks: returns how many of its leading
    /// tokens were cached (a multiple of [`BLOCK_TOKENS`]).
    pub fn lookup_and_store(&self, ids: &[u32]) -> u64 {
        let keys = block_keys(ids);
        let mut lru = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let hits = keys
            .iter()
            .take_while(|k| lru.last_use.contains_key(k))
            .count();
        // Tail blocks first, so that a prompt longer than the cache keeps its head (vLLM
        // frees a request's blocks tail first for the same reason).
        for &key in keys.iter().rev() {
            lru.touch(key);
        }
        while lru.last_use.len() > self.capacity {
            lru.evict_oldest();
        }
        (hits * BLOCK_TOKENS) as u64
    }
}

impl Lru {
    fn touch(&mut self, key: u64) {
        self.tick += 1;
        if let Some(old) = self.last_use.insert(key, self.tick) {
            self.by_use.remove(&old);
        }
        self.by_use.insert(self.tick, key);
    }

    fn evict_oldest(&mut self) {
        if let Some((_, key)) = self.by_use.pop_first() {
            self.last_use.remove(&key);
        }
    }
}

/// One key per full block: a hash chained over the blocks so far, so equal blocks after
/// different prefixes differ.
fn block_keys(ids: &[u32]) -> Vec<u64> {
    let mut chain = 0u64;
    ids.chunks_exact(BLOCK_TOKENS)
        .map(|block| {
            for &id in block {
                chain = splitmix64(chain ^ u64::from(id));
            }
            chain
        })
        .collect()
}

/// A chat prompt's token ids: every text (string content or text part), in order.
pub fn chat_ids(messages: &[Message<'_>]) -> Vec<u32> {
    let mut ids = Vec::new();
    for m in messages {
        match &m.content {
            None => {}
            Some(Content::Text(s)) => ids.extend(encode(s)),
            Some(Content::Parts(parts)) => {
                for text in parts.iter().filter_map(|p| p.text.as_deref()) {
                    ids.extend(encode(text));
                }
            }
        }
    }
    ids
}

/// A completions prompt's token ids (a list of prompts is taken as one sequence).
pub fn completion_ids(prompt: &Prompt<'_>) -> Vec<u32> {
    match prompt {
        Prompt::Text(s) => encode(s),
        Prompt::Texts(v) => v.iter().flat_map(|s| encode(s)).collect(),
        Prompt::Ids(ids) => ids.iter().map(|&i| i as u32).collect(),
        Prompt::IdLists(lists) => lists.iter().flatten().map(|&i| i as u32).collect(),
    }
}

fn encode(text: &str) -> Vec<u32> {
    super::request::builtin_tokenizer().encode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(range: std::ops::Range<u32>) -> Vec<u32> {
        range.collect()
    }

    #[test]
    fn leading_full_blocks_seen_before_are_cached() {
        let cache = PrefixCache::new(100);
        assert_eq!(cache.lookup_and_store(&ids(0..40)), 0);
        // Same first 35 tokens: two full blocks (32 tokens) match.
        let mut other = ids(0..35);
        other.extend(1000..1010);
        assert_eq!(cache.lookup_and_store(&other), 32);
        assert_eq!(cache.lookup_and_store(&ids(0..40)), 32);
        // A different first token changes every block key after it.
        let mut shifted = ids(1..41);
        shifted.insert(0, 9999);
        assert_eq!(cache.lookup_and_store(&shifted), 0);
        // Fewer than 16 tokens never cache.
        assert_eq!(cache.lookup_and_store(&ids(0..15)), 0);
    }

    #[test]
    fn least_recently_used_blocks_are_evicted() {
        let cache = PrefixCache::new(2);
        let a = ids(0..32);
        let b = ids(100..132);
        assert_eq!(cache.lookup_and_store(&a), 0);
        assert_eq!(cache.lookup_and_store(&a), 32);
        // b's two blocks push out a's.
        assert_eq!(cache.lookup_and_store(&b), 0);
        assert_eq!(cache.lookup_and_store(&a), 0);
        assert_eq!(cache.lookup_and_store(&a), 32);
        // A prompt longer than the cache keeps its first blocks.
        let long = ids(1000..1080);
        assert_eq!(cache.lookup_and_store(&long), 0);
        assert_eq!(cache.lookup_and_store(&long), 32);
    }
}
