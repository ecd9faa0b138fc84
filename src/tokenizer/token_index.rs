//! Token bytes by id and the id of any token's bytes: the vocabulary of a byte-level BPE,
//! one arena of token bytes with `u32` offsets and an open-addressing table of ids keyed by
//! the bytes. Free of the crate's other modules: `build.rs` includes this file to index the
//! builtin vocabulary at build time.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Marks an empty slot of the rank index.
const EMPTY: u32 = u32::MAX;

/// Token bytes by id, and the id of any token's bytes: the vocabulary of a byte-level BPE.
#[derive(Debug)]
pub struct TokenIndex {
    /// Every token's bytes, in id order.
    arena: Vec<u8>,
    /// Token `r` is `arena[offsets[r]..offsets[r + 1]]`.
    offsets: Vec<u32>,
    /// Open-addressing hash table (linear probing) of ids keyed by their bytes; its length
    /// is a power of two at least twice the vocabulary, so probe runs stay short.
    slots: Vec<u32>,
    /// `log2(slots.len())`.
    slot_bits: u32,
    /// The id of each single byte (all 256 are tokens in a byte-level vocabulary).
    byte_ranks: [u32; 256],
}

/// Why a vocabulary cannot be indexed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum IndexError {
    #[error("token {0} repeats an earlier token")]
    Duplicate(u32),
    #[error("byte {0:#04x} is not a token")]
    MissingByte(u8),
    #[error("token offsets are not increasing or do not end at the arena's end")]
    BadOffsets,
    #[error("vocabulary too large")]
    TooLarge,
    #[error("the probe table does not fit the vocabulary")]
    BadSlots,
}

/// A `.tiktoken` vocabulary that cannot be read, with its line (0: the file as a whole).
#[derive(Debug, thiserror::Error)]
#[error("vocabulary line {line}: {reason}")]
pub struct VocabError {
    pub line: usize,
    pub reason: String,
}

/// Two indexes are equal when they hold the same tokens in the same order.
impl PartialEq for TokenIndex {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl TokenIndex {
    /// Indexes the tokens `arena[offsets[r]..offsets[r + 1]]`; every single byte must be one.
    pub fn new(arena: Vec<u8>, offsets: Vec<u32>) -> Result<TokenIndex, IndexError> {
        let mut index = TokenIndex::shaped(arena, offsets, None)?;
        for rank in 0..index.len() as u32 {
            let (slot, existing) = index.find_slot(index.token(rank));
            if existing.is_some() {
                return Err(IndexError::Duplicate(rank));
            }
            index.slots[slot] = rank;
        }
        index.find_byte_ranks()
    }

    /// Parses and indexes a `.tiktoken` vocabulary: `<base64 token bytes> <rank>` per line,
    /// ranks 0, 1, 2, ... in line order. `build.rs` indexes the builtin vocabulary with it;
    /// in the crate only tests do.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn from_tiktoken(vocab: &str) -> Result<TokenIndex, VocabError> {
        let lines = vocab.lines().filter(|l| !l.is_empty());
        // Base64 is 4 characters per 3 bytes; the line also holds the rank.
        let mut arena = Vec::with_capacity(vocab.len() * 3 / 8);
        let mut offsets = Vec::with_capacity(vocab.len() / 16);
        offsets.push(0u32);
        for (line, text) in lines.enumerate() {
            let err = |reason: String| VocabError {
                line: line + 1,
                reason,
            };
            let (token, rank) = text
                .split_once(' ')
                .ok_or_else(|| err("expected '<base64> <rank>'".into()))?;
            let rank: usize = rank
                .parse()
                .map_err(|e| err(format!("bad rank {rank:?}: {e}")))?;
            if rank != line {
                return Err(err(format!("rank {rank} out of order (expected {line})")));
            }
            STANDARD
                .decode_vec(token, &mut arena)
                .map_err(|e| err(format!("bad base64 {token:?}: {e}")))?;
            let end = u32::try_from(arena.len()).map_err(|_| err("vocabulary too large".into()))?;
            offsets.push(end);
        }
        TokenIndex::new(arena, offsets).map_err(|e| match e {
            IndexError::Duplicate(id) => VocabError {
                line: id as usize + 1,
                reason: "duplicate token".into(),
            },
            other => VocabError {
                line: 0,
                reason: other.to_string(),
            },
        })
    }

    /// The index over `slots`, the table `new` built from the same tokens (as `build.rs`
    /// does for the builtin vocabulary): only its size and ids are checked, not where they
    /// sit. Every single byte must be a token.
    pub fn with_slots(
        arena: Vec<u8>,
        offsets: Vec<u32>,
        slots: Vec<u32>,
    ) -> Result<TokenIndex, IndexError> {
        TokenIndex::shaped(arena, offsets, Some(slots))?.find_byte_ranks()
    }

    /// The probe table (see `with_slots`), which `build.rs` and the tokenizer cache store.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The index's fields with checked offsets and a table of the right size: `slots`, or
    /// an empty one.
    fn shaped(
        mut arena: Vec<u8>,
        mut offsets: Vec<u32>,
        slots: Option<Vec<u32>>,
    ) -> Result<TokenIndex, IndexError> {
        let ends_right = offsets.first() == Some(&0)
            && offsets.last().map(|&e| e as usize) == Some(arena.len())
            && offsets.windows(2).all(|w| w[0] <= w[1]);
        if !ends_right {
            return Err(IndexError::BadOffsets);
        }
        if offsets.len() > (u32::MAX / 4) as usize {
            return Err(IndexError::TooLarge);
        }
        arena.shrink_to_fit();
        offsets.shrink_to_fit();
        let tokens = offsets.len() - 1;
        let slot_bits = (tokens.max(1) * 2).next_power_of_two().trailing_zeros();
        let slots = match slots {
            None => vec![EMPTY; 1 << slot_bits],
            Some(slots)
                if slots.len() == 1 << slot_bits
                    && slots.iter().all(|&r| r == EMPTY || (r as usize) < tokens) =>
            {
                slots
            }
            Some(_) => return Err(IndexError::BadSlots),
        };
        Ok(TokenIndex {
            arena,
            offsets,
            slots,
            slot_bits,
            byte_ranks: [EMPTY; 256],
        })
    }

    /// Looks up the id of each single byte, which a byte-level vocabulary must have.
    fn find_byte_ranks(mut self) -> Result<TokenIndex, IndexError> {
        for byte in 0..=u8::MAX {
            match self.find_slot(&[byte]).1 {
                Some(rank) => self.byte_ranks[usize::from(byte)] = rank,
                None => return Err(IndexError::MissingByte(byte)),
            }
        }
        Ok(self)
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The arena and offsets the index was built from (for the compact cache file).
    pub fn parts(&self) -> (&[u8], &[u32]) {
        (&self.arena, &self.offsets)
    }

    /// The bytes of token `rank` (which must be < `len()`).
    pub fn token(&self, rank: u32) -> &[u8] {
        let r = rank as usize;
        &self.arena[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// The id of the single byte `byte`.
    pub fn byte_id(&self, byte: u8) -> u32 {
        self.byte_ranks[byte as usize]
    }

    /// Probes the index for `bytes`: the slot holding its rank, or the empty slot where
    /// it would go.
    fn find_slot(&self, bytes: &[u8]) -> (usize, Option<u32>) {
        let mask = self.slots.len() - 1;
        let mut slot = (hash(bytes) >> (64 - self.slot_bits)) as usize;
        loop {
            let rank = self.slots[slot];
            if rank == EMPTY {
                return (slot, None);
            }
            if same_bytes(self.token(rank), bytes) {
                return (slot, Some(rank));
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The id of the token spelled by `bytes`, if there is one.
    pub fn get(&self, bytes: &[u8]) -> Option<u32> {
        match bytes {
            [byte] => Some(self.byte_ranks[*byte as usize]),
            _ => self.find_slot(bytes).1,
        }
    }
}

/// Appends `values` as little-endian bytes: how offsets and probe tables are stored (by
/// `build.rs` for the builtin vocabulary, and in the tokenizer cache).
pub fn put_le_u32s(out: &mut Vec<u8>, values: &[u32]) {
    out.reserve(values.len() * 4);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// The values `put_le_u32s` wrote; a trailing partial value is ignored.
pub fn le_u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("four bytes")))
        .collect()
}

/// A fast multiplicative hash of a byte string, eight bytes at a time; the slot is taken
/// from its high bits, which depend on every input bit. Stored probe tables depend on it:
/// a change here must bump `cache::VERSION` (the builtin's is rebuilt with the crate).
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        h = (h.rotate_left(26) ^ word).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h = (h.rotate_left(26) ^ short_le(rest)).wrapping_mul(K);
    }
    h
}

/// The bytes (at most 8) as a little-endian u64 padded with zeros, without the `memcpy`
/// call a copy of a variable length makes: most words are shorter than 8 bytes.
fn short_le(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    debug_assert!(n <= 8);
    let u32_at = |i: usize| u64::from(u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()));
    match n {
        0 => 0,
        // First, middle and last byte (some the same one).
        1..=3 => {
            let byte = |i: usize| u64::from(bytes[i]) << (8 * i);
            byte(0) | byte(n / 2) | byte(n - 1)
        }
        // The first four and the last four bytes, overlapping.
        _ => u32_at(0) | u32_at(n - 4) << (8 * (n - 4)),
    }
}

/// `a == b`, comparing tokens of up to 8 bytes (most) inline rather than through `memcmp`.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 8 {
            short_le(a) == short_le(b)
        } else {
            a == b
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 256 single bytes and two longer tokens.
    fn vocabulary() -> (Vec<u8>, Vec<u32>) {
        let mut arena: Vec<u8> = (0..=u8::MAX).collect();
        arena.extend_from_slice(b"abcd");
        let offsets = (0..=256).chain([258, 260]).collect();
        (arena, offsets)
    }

    #[test]
    fn short_words_load_as_zero_padded_little_endian() {
        assert_eq!(short_le(b""), 0);
        assert_eq!(short_le(b"\x01"), 1);
        assert_eq!(short_le(b" the"), u64::from_le_bytes(*b" the\0\0\0\0"));
        assert_eq!(short_le(b"abcdefgh"), u64::from_le_bytes(*b"abcdefgh"));
        for n in 0..=8 {
            let bytes = &b"\x01\x02\x03\x04\x05\x06\x07\x08"[..n];
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(bytes);
            assert_eq!(short_le(bytes), u64::from_le_bytes(padded), "{n} bytes");
        }
        assert!(same_bytes(b"abc", b"abc") && same_bytes(b"", b""));
        assert!(!same_bytes(b"abc", b"abd") && !same_bytes(b"ab", b"ab\0"));
        let long = b"0123456789abcdef";
        assert!(same_bytes(long, long) && !same_bytes(long, b"0123456789abcdeF"));
    }

    #[test]
    fn an_index_over_its_own_table_finds_every_token() {
        let (arena, offsets) = vocabulary();
        let built = TokenIndex::new(arena.clone(), offsets.clone()).unwrap();
        let again = TokenIndex::with_slots(arena, offsets, built.slots().to_vec()).unwrap();
        for rank in 0..built.len() as u32 {
            assert_eq!(again.get(built.token(rank)), Some(rank));
        }
        assert_eq!(again.get(b"ab"), Some(256));
        assert_eq!(again.get(b"abc"), None);
    }

    #[test]
    fn a_table_of_another_size_or_with_unknown_ids_is_refused() {
        let (arena, offsets) = vocabulary();
        let slots = TokenIndex::new(arena.clone(), offsets.clone())
            .unwrap()
            .slots()
            .to_vec();
        let short = slots[..slots.len() / 2].to_vec();
        let mut unknown = slots.clone();
        *unknown.iter_mut().find(|r| **r != EMPTY).unwrap() = 258;
        let empty = vec![EMPTY; slots.len()];
        for (table, error) in [
            (short, IndexError::BadSlots),
            (unknown, IndexError::BadSlots),
            (empty, IndexError::MissingByte(0)),
        ] {
            let refused = TokenIndex::with_slots(arena.clone(), offsets.clone(), table);
            assert_eq!(refused.unwrap_err(), error);
        }
    }
}
