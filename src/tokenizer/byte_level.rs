//! A Hugging Face byte-level BPE tokenizer (GPT-2, Qwen2/2.5/3, Llama 3, DeepSeek V3) in the
//! compact form of `bpe::TokenIndex`, encoding exactly like the `tokenizers`
//! crate with `add_special_tokens = false`.
//!
//! Encoding, as the crate does it: added tokens are split out of the raw text first (those
//! marked `normalized: false`, longest match leftmost), the rest is normalized (NFC or
//! nothing) and split on the `normalized: true` added tokens, then cut by each pre-tokenizer
//! regex in turn (matches and the gaps between them are both pieces), and every piece is
//! merged from single bytes by merge rank: the adjacent pair with the lowest rank first,
//! leftmost on ties. The regexes run on Oniguruma, the crate's engine, so `\s`, `\p{L}` and
//! look-arounds mean the same.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};
use unicode_normalization_alignments::UnicodeNormalization;

use super::token_index::TokenIndex;

/// The pre-tokenizer regex of `ByteLevel` with `use_regex: true` (GPT-2's).
pub const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Everything a byte-level BPE tokenizer is made of: what `tokenizer.json` is parsed into
/// and what the cache file stores.
#[derive(Debug, PartialEq)]
pub struct Spec {
    /// The vocabulary (token bytes in id order).
    pub tokens: TokenIndex,
    /// Merges in rank order: `[left id, right id, merged id]`.
    pub merges: Vec<[u32; 3]>,
    /// The pre-tokenizer's regexes, applied one after the other.
    pub patterns: Vec<String>,
    /// NFC-normalize the text between added tokens.
    pub nfc: bool,
    /// A piece that is itself a token is emitted whole, without merging (Llama 3).
    pub ignore_merges: bool,
    pub added: Vec<AddedToken>,
}

/// A token of the `added_tokens` list (special or not): matched in the text before
/// anything else.
#[derive(Debug, Clone, PartialEq)]
pub struct AddedToken {
    pub id: u32,
    pub content: String,
    /// Matched in the normalized text (its content normalized too) rather than the raw one.
    pub normalized: bool,
}

/// Why a spec does not make an encoder: only a corrupt cache file or a malformed
/// `tokenizer.json` gets here.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("merge {rank} names token {id}, past the vocabulary")]
    MergeOutOfRange { rank: usize, id: u32 },
    #[error("pre-tokenizer regex {pattern:?}: {reason}")]
    Pattern { pattern: String, reason: String },
    #[error("added tokens: {0}")]
    Added(String),
}

/// Merge ranks keyed by the pair of token ids, in an open-addressing table.
struct MergeTable {
    /// `[left, right, merged]` by rank.
    merges: Vec<[u32; 3]>,
    /// Ranks; `EMPTY` marks a free slot. A power of two at least twice the merges.
    slots: Vec<u32>,
    slot_bits: u32,
}

const EMPTY: u32 = u32::MAX;

impl MergeTable {
    fn new(merges: Vec<[u32; 3]>) -> MergeTable {
        let slot_bits = (merges.len().max(1) * 2)
            .next_power_of_two()
            .trailing_zeros();
        let mut table = MergeTable {
            merges,
            slots: vec![EMPTY; 1 << slot_bits],
            slot_bits,
        };
        for rank in 0..table.merges.len() as u32 {
            let [left, right, _] = table.merges[rank as usize];
            // A pair listed twice keeps its later rank, as in the crate's hash map.
            let slot = table.find_slot(left, right);
            table.slots[slot] = rank;
        }
        table
    }

    fn find_slot(&self, left: u32, right: u32) -> usize {
        let key = (u64::from(left) << 32) | u64::from(right);
        let mask = self.slots.len() - 1;
        let mut slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.slot_bits)) as usize;
        loop {
            let rank = self.slots[slot];
            if rank == EMPTY {
                return slot;
            }
            let [l, r, _] = self.merges[rank as usize];
            if l == left && r == right {
                return slot;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// `(rank, merged id)` of the pair, if it merges.
    fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let rank = self.slots[self.find_slot(left, right)];
        (rank != EMPTY).then(|| (rank, self.merges[rank as usize][2]))
    }
}

/// The added tokens and the two automata that find them.
struct AddedTokens {
    /// Sorted by id, for decoding.
    by_id: Vec<(u32, Vec<u8>)>,
    raw: Option<DoubleArrayAhoCorasick<u32>>,
    normalized: Option<DoubleArrayAhoCorasick<u32>>,
}

/// A loaded byte-level BPE tokenizer.
pub struct ByteLevelBpe {
    tokens: TokenIndex,
    merges: MergeTable,
    patterns: Vec<onig::Regex>,
    pattern_texts: Vec<String>,
    nfc: bool,
    ignore_merges: bool,
    added: AddedTokens,
}

impl std::fmt::Debug for ByteLevelBpe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteLevelBpe")
            .field("tokens", &self.tokens.len())
            .field("merges", &self.merges.merges.len())
            .field("patterns", &self.pattern_texts)
            .field("nfc", &self.nfc)
            .finish()
    }
}

impl ByteLevelBpe {
    /// Builds the encoder; checks every id, so a corrupt spec is an error, never a panic later.
    pub fn new(spec: Spec) -> Result<ByteLevelBpe, BuildError> {
        let Spec {
            tokens,
            merges,
            patterns,
            nfc,
            ignore_merges,
            added,
        } = spec;
        let len = tokens.len() as u32;
        for (rank, merge) in merges.iter().enumerate() {
            if let Some(&id) = merge.iter().find(|&&id| id >= len) {
                return Err(BuildError::MergeOutOfRange { rank, id });
            }
        }
        let compiled = patterns
            .iter()
            .map(|p| {
                onig::Regex::new(p).map_err(|e| BuildError::Pattern {
                    pattern: p.clone(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let added_tokens = build_added(&added, nfc)?;
        Ok(ByteLevelBpe {
            tokens,
            merges: MergeTable::new(merges),
            patterns: compiled,
            pattern_texts: patterns,
            nfc,
            ignore_merges,
            added: added_tokens,
        })
    }

    /// Token ids of `text`, added tokens included (`add_special_tokens = false`).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        split_added(self.added.raw.as_ref(), text, &mut out, |segment, out| {
            if self.nfc && !segment.is_ascii() {
                let normalized: String = segment.nfc().map(|(c, _)| c).collect();
                self.encode_normalized(&normalized, out);
            } else {
                self.encode_normalized(segment, out);
            }
        });
        out
    }

    fn encode_normalized(&self, text: &str, out: &mut Vec<u32>) {
        split_added(self.added.normalized.as_ref(), text, out, |segment, out| {
            self.pre_tokenize(0, segment, out)
        });
    }

    /// Cuts `text` with regex `level` (matches and gaps are both pieces) and passes each
    /// piece to the next regex, or merges it after the last.
    fn pre_tokenize(&self, level: usize, text: &str, out: &mut Vec<u32>) {
        let Some(regex) = self.patterns.get(level) else {
            self.merge_piece(text.as_bytes(), out);
            return;
        };
        let mut at = 0;
        for (start, end) in regex.find_iter(text) {
            if start > at {
                self.pre_tokenize(level + 1, &text[at..start], out);
            }
            if end > start {
                self.pre_tokenize(level + 1, &text[start..end], out);
            }
            at = end;
        }
        if at < text.len() {
            self.pre_tokenize(level + 1, &text[at..], out);
        }
    }

    /// Merges one piece from its single bytes, lowest merge rank first (leftmost on ties).
    fn merge_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if piece.len() > super::MAX_MERGE_PIECE {
            for slice in piece.chunks(super::MAX_MERGE_PIECE) {
                self.merge_piece(slice, out);
            }
            return;
        }
        match piece {
            [] => return,
            [byte] => {
                out.push(self.tokens.byte_id(*byte));
                return;
            }
            _ => {}
        }
        if self.ignore_merges
            && let Some(id) = self.tokens.get(piece)
        {
            out.push(id);
            return;
        }
        let n = piece.len();
        // Symbol i covers a run of bytes starting at i; a merge keeps the left symbol.
        let mut ids: Vec<u32> = piece.iter().map(|&b| self.tokens.byte_id(b)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut heap: BinaryHeap<Reverse<(u32, usize, u32)>> = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            if let Some((rank, merged)) = self.merges.get(ids[i], ids[i + 1]) {
                heap.push(Reverse((rank, i, merged)));
            }
        }
        while let Some(Reverse((_, pos, merged))) = heap.pop() {
            let right = next[pos];
            if !alive[pos] || right == n {
                continue;
            }
            // Stale when either side has merged since: the pair then merges into another
            // token (longer bytes) or not at all.
            if self.merges.get(ids[pos], ids[right]).map(|m| m.1) != Some(merged) {
                continue;
            }
            ids[pos] = merged;
            alive[right] = false;
            next[pos] = next[right];
            if next[pos] < n {
                prev[next[pos]] = pos;
            }
            let left = prev[pos];
            if left != usize::MAX
                && let Some((rank, m)) = self.merges.get(ids[left], ids[pos])
            {
                heap.push(Reverse((rank, left, m)));
            }
            if next[pos] < n
                && let Some((rank, m)) = self.merges.get(ids[pos], ids[next[pos]])
            {
                heap.push(Reverse((rank, pos, m)));
            }
        }
        let mut i = 0;
        while i < n {
            out.push(ids[i]);
            i = next[i];
        }
    }

    /// The vocabulary's ids without the added (special) tokens, ascending.
    pub fn ordinary_ids(&self) -> Vec<u32> {
        (0..self.tokens.len() as u32)
            .filter(|id| {
                self.added
                    .by_id
                    .binary_search_by_key(id, |(id, _)| *id)
                    .is_err()
            })
            .collect()
    }

    /// The bytes of `ids` as the ByteLevel decoder gives them; unknown ids are skipped.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if let Ok(i) = self.added.by_id.binary_search_by_key(&id, |(id, _)| *id) {
                out.extend_from_slice(&self.added.by_id[i].1);
            } else if (id as usize) < self.tokens.len() {
                out.extend_from_slice(self.tokens.token(id));
            }
        }
        out
    }
}

/// Splits `text` on the automaton's matches: each match's id goes to `out`, each gap to `rest`.
fn split_added(
    automaton: Option<&DoubleArrayAhoCorasick<u32>>,
    text: &str,
    out: &mut Vec<u32>,
    mut rest: impl FnMut(&str, &mut Vec<u32>),
) {
    let Some(automaton) = automaton else {
        if !text.is_empty() {
            rest(text, out);
        }
        return;
    };
    let mut at = 0;
    for m in automaton.leftmost_find_iter(text) {
        if m.start() > at {
            rest(&text[at..m.start()], out);
        }
        out.push(m.value());
        at = m.end();
    }
    if at < text.len() {
        rest(&text[at..], out);
    }
}

fn build_added(added: &[AddedToken], nfc: bool) -> Result<AddedTokens, BuildError> {
    let mut by_id: Vec<(u32, Vec<u8>)> = added
        .iter()
        .map(|t| (t.id, decoded_bytes(&t.content)))
        .collect();
    by_id.sort_by_key(|(id, _)| *id);
    if by_id.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(BuildError::Added("two added tokens share an id".into()));
    }
    let automaton = |normalized: bool| -> Result<Option<DoubleArrayAhoCorasick<u32>>, BuildError> {
        let patterns: Vec<(String, u32)> = added
            .iter()
            .filter(|t| t.normalized == normalized && !t.content.is_empty())
            .map(|t| {
                let content = if normalized && nfc {
                    t.content.nfc().map(|(c, _)| c).collect()
                } else {
                    t.content.clone()
                };
                (content, t.id)
            })
            .collect();
        if patterns.is_empty() {
            return Ok(None);
        }
        DoubleArrayAhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build_with_values(patterns)
            .map(Some)
            .map_err(|e| BuildError::Added(e.to_string()))
    };
    Ok(AddedTokens {
        by_id,
        raw: automaton(false)?,
        normalized: automaton(true)?,
    })
}

/// GPT-2's byte-to-character table: printable Latin-1 bytes stand for themselves, the
/// other 68 bytes for the characters U+0100 onwards, in byte order.
fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut shifted = 0u32;
    for byte in 0..=255u8 {
        let printable = matches!(byte, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
        table[byte as usize] = if printable {
            char::from(byte)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).expect("U+0100..U+0143 are chars")
        };
    }
    table
}

/// The byte each code point below U+0144 stands for (`byte_chars` reversed); `u16::MAX`
/// where none.
fn code_point_table() -> &'static [u16; 324] {
    static TABLE: std::sync::OnceLock<[u16; 324]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [u16::MAX; 324];
        for (byte, c) in byte_chars().iter().enumerate() {
            table[*c as usize] = byte as u16;
        }
        table
    })
}

/// The byte code point `c` stands for, if any.
fn byte_of(table: &[u16; 324], c: usize) -> Option<u8> {
    table.get(c).and_then(|&b| u8::try_from(b).ok())
}

/// Appends the bytes `token` (in byte-level characters) stands for; false, with nothing
/// appended, when a character is not one of the 256.
pub fn push_token_bytes(token: &str, out: &mut Vec<u8>) -> bool {
    push_token_utf8(token.as_bytes(), out)
}

/// `push_token_bytes` of a token's UTF-8, not checked before: the byte-level characters
/// (U+0021..U+0143) are one or two bytes long, so a longer character or bytes that are not
/// UTF-8 make it false alike (nothing appended). `tokenizer.json`'s tokens are read as
/// bytes this way rather than as `&str`, which serde checks for UTF-8 first (a twelfth of
/// Qwen2's first load).
pub fn push_token_utf8(token: &[u8], out: &mut Vec<u8>) -> bool {
    let table = code_point_table();
    let start = out.len();
    out.reserve(token.len());
    let mut i = 0;
    while let Some(&lead) = token.get(i) {
        let c = if lead < 0x80 {
            i += 1;
            usize::from(lead)
        } else if let (0xc2..0xe0, Some(&next)) = (lead, token.get(i + 1))
            && next & 0xc0 == 0x80
        {
            // Two-byte sequences; 0xc0 and 0xc1 would be overlong.
            i += 2;
            usize::from(lead & 0x1f) << 6 | usize::from(next & 0x3f)
        } else {
            usize::MAX
        };
        match byte_of(table, c) {
            Some(b) => out.push(b),
            None => {
                out.truncate(start);
                return false;
            }
        }
    }
    true
}

/// What the ByteLevel decoder makes of a token's text: its bytes when every character is a
/// byte-level one, else the text's own UTF-8.
fn decoded_bytes(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(text.len());
    if push_token_bytes(text, &mut bytes) {
        bytes
    } else {
        text.as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_matches_gpt2() {
        let table = byte_chars();
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[b'a' as usize], 'a');
        assert_eq!(table[0xad], 'Ń');
        for (byte, c) in table.iter().enumerate() {
            assert_eq!(char_byte(*c), Some(byte as u8));
        }
        assert_eq!(char_byte('€'), None);
    }

    proptest::proptest! {
        /// A token's unchecked bytes read as its checked text does, and bytes that are not
        /// UTF-8 are not byte-level.
        #[test]
        fn token_bytes_read_as_their_text(
            token in {
                use proptest::strategy::Strategy;
                proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::sample::select(byte_chars().to_vec()).prop_map(|c| c.to_string().into_bytes()),
                        proptest::prelude::any::<char>().prop_map(|c| c.to_string().into_bytes()),
                        proptest::collection::vec(proptest::prelude::any::<u8>(), 1..3),
                    ],
                    0..8,
                )
            },
        ) {
            let token = token.concat();
            proptest::prop_assert_eq!(read_unchecked(&token), read_checked(&token), "{:?}", token);
        }
    }

    /// The byte a byte-level character stands for.
    fn char_byte(c: char) -> Option<u8> {
        byte_of(code_point_table(), c as usize)
    }

    /// `push_token_utf8`, and a reading of the checked text char by char: whether each
    /// takes the token and what it leaves in a buffer holding one byte already.
    fn read_unchecked(token: &[u8]) -> (bool, Vec<u8>) {
        let mut out = vec![7];
        (push_token_utf8(token, &mut out), out)
    }
    fn read_checked(token: &[u8]) -> (bool, Vec<u8>) {
        let bytes: Option<Vec<u8>> = std::str::from_utf8(token)
            .ok()
            .and_then(|t| t.chars().map(char_byte).collect());
        match bytes {
            Some(bytes) => (true, [vec![7], bytes].concat()),
            None => (false, vec![7]),
        }
    }

    #[test]
    fn token_bytes_that_are_not_utf8_are_not_byte_level() {
        assert_eq!(read_unchecked("Ġa".as_bytes()), (true, vec![7, b' ', b'a']));
        for token in [
            b"\xc0\xa1".as_slice(),
            b"\xc1\xbf",
            b"a\xc4",
            b"\x80",
            b"\xed\xa0\x80",
            "€".as_bytes(),
            b"a\xc4a",
        ] {
            assert_eq!(read_unchecked(token), (false, vec![7]), "{token:?}");
            assert_eq!(read_unchecked(token), read_checked(token), "{token:?}");
        }
    }

    /// The 256 bytes plus `extra` tokens (given in byte-level characters).
    fn tiny_spec(extra: &[&str], merges: &[(&str, &str)]) -> Spec {
        let mut arena: Vec<u8> = (0..=255u8).collect();
        let mut offsets: Vec<u32> = (0..=256).collect();
        for token in extra {
            assert!(push_token_bytes(token, &mut arena));
            offsets.push(arena.len() as u32);
        }
        let tokens = TokenIndex::new(arena, offsets).unwrap();
        let id = |s: &str| {
            let mut b = Vec::new();
            assert!(push_token_bytes(s, &mut b));
            tokens.get(&b).unwrap()
        };
        let merges = merges
            .iter()
            .map(|(a, b)| [id(a), id(b), id(&format!("{a}{b}"))])
            .collect();
        Spec {
            tokens,
            merges,
            patterns: vec![r"\S+|\s+".into()],
            nfc: false,
            ignore_merges: false,
            added: vec![],
        }
    }

    #[test]
    fn merges_by_pair_rank_not_by_token_id() {
        // "abc" is a token but only "ab" + "c" merges into it: "a" + "bc" stays two.
        let spec = tiny_spec(&["ab", "bc", "abc"], &[("b", "c"), ("ab", "c"), ("a", "b")]);
        let bpe = ByteLevelBpe::new(spec).unwrap();
        assert_eq!(bpe.encode("abc"), vec![u32::from(b'a'), 257]);
        assert_eq!(bpe.encode("abd"), vec![256, u32::from(b'd')]);
        assert_eq!(bpe.decode_bytes(&bpe.encode("abc abd")), b"abc abd");
    }

    #[test]
    fn a_piece_past_the_merge_limit_is_merged_slice_by_slice() {
        let spec = tiny_spec(&["ab"], &[("a", "b")]);
        let bpe = ByteLevelBpe::new(spec).unwrap();
        let limit = crate::tokenizer::MAX_MERGE_PIECE;
        // "abab..." of about 1.5 slices: the whole piece merges as its slices do.
        let word = "ab".repeat(limit / 2) + "x" + &"ab".repeat(limit / 4);
        let mut slices = Vec::new();
        for c in word.as_bytes().chunks(limit) {
            bpe.merge_piece(c, &mut slices);
        }
        let mut whole = Vec::new();
        bpe.merge_piece(word.as_bytes(), &mut whole);
        assert_eq!(whole, slices);
        assert_eq!(whole.len(), limit / 2 + 2 + limit / 4 - 1);
    }

    #[test]
    fn ignore_merges_emits_whole_tokens() {
        let mut spec = tiny_spec(&["ab", "bc", "abc"], &[("b", "c"), ("ab", "c"), ("a", "b")]);
        spec.ignore_merges = true;
        let bpe = ByteLevelBpe::new(spec).unwrap();
        assert_eq!(bpe.encode("abc"), vec![258]);
    }

    #[test]
    fn corrupt_specs_are_errors() {
        let mut spec = tiny_spec(&["ab"], &[("a", "b")]);
        spec.merges[0][2] = 999;
        assert!(matches!(
            ByteLevelBpe::new(spec),
            Err(BuildError::MergeOutOfRange { .. })
        ));
        let mut spec = tiny_spec(&[], &[]);
        spec.patterns = vec!["(".into()];
        assert!(matches!(
            ByteLevelBpe::new(spec),
            Err(BuildError::Pattern { .. })
        ));
    }

    #[test]
    fn added_tokens_split_first_longest_match() {
        let mut spec = tiny_spec(&["ab"], &[("a", "b")]);
        spec.added = vec![
            AddedToken {
                id: 257,
                content: "<|x|>".into(),
                normalized: false,
            },
            AddedToken {
                id: 258,
                content: "<|x|>y".into(),
                normalized: false,
            },
        ];
        let bpe = ByteLevelBpe::new(spec).unwrap();
        assert_eq!(bpe.encode("ab<|x|>ab"), vec![256, 257, 256]);
        assert_eq!(bpe.encode("<|x|>y<|x|>"), vec![258, 257]);
        assert_eq!(bpe.decode_bytes(&[258, 256]), b"<|x|>yab");
    }
}
