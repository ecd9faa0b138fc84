//! A compact byte-pair encoder for OpenAI's o200k_base vocabulary.
//!
//! It encodes and decodes exactly like tiktoken's `encode_ordinary`/`decode_bytes` (tested
//! against tiktoken-rs), with a smaller footprint: every token's bytes live in one arena
//! indexed by rank with `u32` offsets, and an open-addressing table of ranks (keyed by the
//! token bytes) replaces the two hash maps of owned byte vectors (`token_index`). `build.rs`
//! decodes and indexes the vocabulary, so a run only copies the arena, offsets and table
//! out of the binary and compiles the pre-tokenizer: ~7 ms (release), where parsing the
//! base64 text at start-up took ~30 ms and tiktoken-rs's o200k_base ~110 ms and ~45 MB
//! (`examples/tokenizer_footprint.rs` measures the footprints).
//!
//! Encoding: the text is split into pieces by the o200k pre-tokenizer regex, each piece that
//! is a token is emitted as is, and any other piece is merged from single bytes, always
//! merging the adjacent pair whose joined bytes have the lowest rank (leftmost on ties).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;

use fancy_regex::Regex;

use super::token_index::{TokenIndex, VocabError, le_u32s};

/// The o200k_base vocabulary (`assets/o200k_base.tiktoken`, see `assets/README.md` for its
/// origin and licence) as `build.rs` decodes and indexes it: every token's bytes in rank
/// order, where each ends, and the index's probe table (little-endian u32s).
const O200K_ARENA: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.arena"));
const O200K_OFFSETS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.offsets"));
const O200K_SLOTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.slots"));

/// o200k_base's pre-tokenizer: words with an optional leading non-letter and English
/// contractions, digit runs of up to three, punctuation runs, newlines, and whitespace
/// (a whitespace run before a non-space gives its last character to the next piece).
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);

/// o200k_base's special tokens: never produced by `encode`, but `decode` spells them out.
pub const O200K_SPECIAL: [(u32, &str); 2] =
    [(199_999, "<|endoftext|>"), (200_018, "<|endofprompt|>")];

/// Pieces at least this long are merged with a heap (O(n log n)) instead of rescanning all
/// pairs after each merge (O(n^2), but faster for the short pieces of ordinary text).
const HEAP_MERGE_MIN_LEN: usize = 128;

/// A byte-level BPE vocabulary plus its pre-tokenizer, merging by token rank (tiktoken).
pub struct Bpe {
    index: TokenIndex,
    special: Vec<(u32, &'static str)>,
    /// Compiled on first use: o200k splits ASCII text without it (`o200k_ascii_piece_end`),
    /// and compiling its pattern took about 24 M instructions, most of the embedded
    /// tokenizer's start-up.
    pretokenizer: OnceLock<Regex>,
    pattern: &'static str,
    /// The pattern is o200k's, so ASCII text can be split by `o200k_ascii_piece_end`.
    o200k: bool,
}

impl std::fmt::Debug for Bpe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bpe")
            .field("tokens", &self.len())
            .field("arena_bytes", &self.index.parts().0.len())
            .finish()
    }
}

/// Builds o200k_base from the arena, offsets and probe table `build.rs` made of the
/// embedded vocabulary.
pub fn o200k_base() -> Bpe {
    let index = TokenIndex::with_slots(
        O200K_ARENA.to_vec(),
        le_u32s(O200K_OFFSETS),
        le_u32s(O200K_SLOTS),
    )
    .expect("the embedded o200k_base vocabulary is valid");
    Bpe::with_index(index, &O200K_SPECIAL, O200K_PATTERN).expect("o200k's pattern compiles")
}

impl Bpe {
    /// Parses a `.tiktoken` vocabulary whose ranks are 0, 1, 2, ... in line order (the
    /// builtin one is parsed at build time; the tests parse small ones and the file itself).
    #[cfg(test)]
    pub fn from_tiktoken(
        vocab: &str,
        special: &[(u32, &'static str)],
        pattern: &'static str,
    ) -> Result<Bpe, VocabError> {
        Bpe::with_index(TokenIndex::from_tiktoken(vocab)?, special, pattern)
    }

    /// An indexed vocabulary with its special tokens and pre-tokenizer pattern.
    /// Another pattern than o200k's is compiled here, so that a bad one is an error now.
    fn with_index(
        index: TokenIndex,
        special: &[(u32, &'static str)],
        pattern: &'static str,
    ) -> Result<Bpe, VocabError> {
        let o200k = pattern == O200K_PATTERN;
        let pretokenizer = OnceLock::new();
        if !o200k {
            let regex = Regex::new(pattern).map_err(|e| VocabError {
                line: 0,
                reason: format!("bad pattern: {e}"),
            })?;
            let _ = pretokenizer.set(regex);
        }
        Ok(Bpe {
            index,
            special: special.to_vec(),
            pretokenizer,
            pattern,
            o200k,
        })
    }

    fn pretokenizer(&self) -> &Regex {
        self.pretokenizer.get_or_init(|| {
            Regex::new(self.pattern).expect("o200k's pattern compiles (a test compiles it)")
        })
    }

    /// Number of ordinary (non-special) tokens.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    fn token(&self, rank: u32) -> &[u8] {
        self.index.token(rank)
    }

    /// The rank of the token spelled by `bytes`, if there is one.
    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.index.get(bytes)
    }

    /// The bytes of token `id`, special tokens included; None for unknown ids.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        if (id as usize) < self.len() {
            return Some(self.token(id));
        }
        self.special
            .iter()
            .find(|(rank, _)| *rank == id)
            .map(|(_, text)| text.as_bytes())
    }

    /// Token ids of `text`; special tokens' text is encoded as ordinary text.
    pub fn encode_ordinary(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        self.encode_into(text, &mut out);
        out
    }

    /// `encode_ordinary(text).len()`, without keeping the ids: the collector counts every
    /// record's output tokens.
    pub fn count_ordinary(&self, text: &str) -> usize {
        let mut count = Count(0);
        self.encode_into(text, &mut count);
        count.0
    }

    fn encode_into(&self, text: &str, out: &mut impl Ids) {
        if self.o200k && text.is_ascii() {
            let bytes = text.as_bytes();
            let mut at = 0;
            while at < bytes.len() {
                let end = o200k_ascii_piece_end(bytes, at);
                debug_assert!(end > at, "an empty piece at {at} of {text:?}");
                self.encode_piece(&bytes[at..end], out);
                at = end;
            }
            return;
        }
        let mut at = 0;
        while at < text.len() {
            match self.pretokenizer().find_from_pos(text, at) {
                Ok(Some(piece)) if piece.end() > piece.start() => {
                    self.encode_piece(piece.as_str().as_bytes(), out);
                    at = piece.end();
                }
                // Every character matches some alternative, so this happens only when the
                // regex gives up (its backtracking limit): merge the rest as one piece
                // rather than drop it.
                _ => {
                    self.encode_piece(&text.as_bytes()[at..], out);
                    break;
                }
            }
        }
    }

    /// The bytes of `ids` concatenated; unknown ids are skipped.
    pub fn decode_bytes(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if let Some(bytes) = self.token_bytes(id) {
                out.extend_from_slice(bytes);
            }
        }
        out
    }

    fn encode_piece(&self, piece: &[u8], out: &mut impl Ids) {
        if piece.is_empty() {
            return;
        }
        if piece.len() > super::MAX_MERGE_PIECE {
            for slice in piece.chunks(super::MAX_MERGE_PIECE) {
                self.encode_piece(slice, out);
            }
            return;
        }
        if let Some(rank) = self.rank(piece) {
            out.push(rank);
        } else if piece.len() < HEAP_MERGE_MIN_LEN {
            self.merge_by_scan(piece, out);
        } else {
            self.merge_by_heap(piece, out);
        }
    }

    /// The rank of `piece[start..end]`, or `u32::MAX` when that is not a token.
    fn pair_rank(&self, piece: &[u8], start: usize, end: usize) -> u32 {
        self.rank(&piece[start..end]).unwrap_or(u32::MAX)
    }

    /// Merges a short piece: keeps the part boundaries and the rank of each adjacent pair in
    /// two vectors and rescans them for the lowest rank after every merge.
    fn merge_by_scan(&self, piece: &[u8], out: &mut impl Ids) {
        // Part i is piece[bounds[i]..bounds[i + 1]]; pair_ranks[i] joins parts i and i + 1.
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        let mut pair_ranks: Vec<u32> = (0..piece.len() - 1)
            .map(|i| self.pair_rank(piece, i, i + 2))
            .collect();
        loop {
            let mut best = (u32::MAX, 0);
            for (i, &rank) in pair_ranks.iter().enumerate() {
                if rank < best.0 {
                    best = (rank, i);
                }
            }
            let (rank, i) = best;
            if rank == u32::MAX {
                break;
            }
            // Parts i and i + 1 become one: drop the boundary between them.
            bounds.remove(i + 1);
            pair_ranks.remove(i);
            if i < pair_ranks.len() {
                pair_ranks[i] = self.pair_rank(piece, bounds[i], bounds[i + 2]);
            }
            if i > 0 {
                pair_ranks[i - 1] = self.pair_rank(piece, bounds[i - 1], bounds[i + 1]);
            }
        }
        for w in bounds.windows(2) {
            out.push(
                self.rank(&piece[w[0]..w[1]])
                    .expect("merged parts are tokens"),
            );
        }
    }

    /// Merges a long piece: the parts form a linked list and candidate pairs wait in a
    /// min-heap of (rank, start); entries made stale by a neighbouring merge are skipped.
    fn merge_by_heap(&self, piece: &[u8], out: &mut impl Ids) {
        let n = piece.len();
        // For a part starting at s: next[s] is where it ends (the next part's start),
        // prev[s] where the previous part starts, pair[s] the rank of it joined with the next.
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|s| s.wrapping_sub(1)).collect();
        let mut pair: Vec<u32> = (0..n)
            .map(|s| {
                if s + 2 <= n {
                    self.pair_rank(piece, s, s + 2)
                } else {
                    u32::MAX
                }
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<(u32, usize)>> = (0..n)
            .filter(|&s| pair[s] != u32::MAX)
            .map(|s| Reverse((pair[s], s)))
            .collect();
        while let Some(Reverse((rank, s))) = heap.pop() {
            // Stale: s was absorbed into its left neighbour, or its pair changed since.
            if pair[s] != rank {
                continue;
            }
            let right = next[s];
            let end = next[right];
            next[s] = end;
            pair[right] = u32::MAX;
            if end < n {
                prev[end] = s;
                pair[s] = self.pair_rank(piece, s, next[end]);
                if pair[s] != u32::MAX {
                    heap.push(Reverse((pair[s], s)));
                }
            } else {
                pair[s] = u32::MAX;
            }
            if s > 0 {
                let left = prev[s];
                pair[left] = self.pair_rank(piece, left, end);
                if pair[left] != u32::MAX {
                    heap.push(Reverse((pair[left], left)));
                }
            }
        }
        let mut s = 0;
        while s < n {
            out.push(
                self.rank(&piece[s..next[s]])
                    .expect("merged parts are tokens"),
            );
            s = next[s];
        }
    }
}

/// Where an encoding's ids go: kept, or only counted.
trait Ids {
    fn push(&mut self, id: u32);
}

impl Ids for Vec<u32> {
    fn push(&mut self, id: u32) {
        Vec::push(self, id);
    }
}

/// Ids counted, not kept.
struct Count(usize);

impl Ids for Count {
    fn push(&mut self, _: u32) {
        self.0 += 1;
    }
}

/// The end of the piece `O200K_PATTERN` matches at `p` in ASCII text, found without the
/// regex: fancy_regex's backtracking VM was most of an encode, and output tokens are
/// counted for every record. The alternatives in order, as the regex takes them on ASCII
/// (where `\p{Lu}` is A-Z, `\p{Ll}` a-z, `\p{N}` 0-9, and no mark or other letter
/// occurs); the proptests compare every split with tiktoken's.
fn o200k_ascii_piece_end(b: &[u8], p: usize) -> usize {
    let n = b.len();
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let newline = |c: u8| c == b'\r' || c == b'\n';
    let punct = |c: u8| !ws(c) && !c.is_ascii_alphanumeric();
    // Generic rather than `&dyn Fn`: an indirect call per byte was a third of the split.
    fn run(b: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
        from + b[from..].iter().take_while(|&&c| class(c)).count()
    }
    // `(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
    let contraction = |q: usize| {
        if b.get(q) != Some(&b'\'') {
            return q;
        }
        let lower = |i: usize| b.get(q + i).map(u8::to_ascii_lowercase);
        match (lower(1), lower(2)) {
            (Some(b's' | b't' | b'm' | b'd'), _) => q + 2,
            (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => q + 3,
            _ => q,
        }
    };
    // `[^\r\n\p{L}\p{N}]?` then upper case letters, then lower case ones: at least one
    // (the word alternative) or none after at least one upper case (the capitals one).
    let lead = usize::from(!newline(b[p]) && !b[p].is_ascii_alphanumeric());
    let q = p + lead;
    if q < n {
        let upper_end = run(b, q, |c| c.is_ascii_uppercase());
        let lower_end = run(b, upper_end, |c| c.is_ascii_lowercase());
        if lower_end > upper_end || upper_end > q {
            return contraction(lower_end);
        }
    }
    // `\p{N}{1,3}`
    if b[p].is_ascii_digit() {
        return run(b, p, |c| c.is_ascii_digit()).min(p + 3);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let q = p + usize::from(b[p] == b' ');
    if q < n && punct(b[q]) {
        let end = run(b, q, punct);
        return run(b, end, |c| newline(c) || c == b'/');
    }
    // Whitespace: `\s*[\r\n]+` ends after the run's last newline; else `\s+(?!\S)`
    // leaves the run's last character to what follows, or `\s+` takes a lone one.
    let end = run(b, p, ws);
    if let Some(last) = b[p..end].iter().rposition(|&c| newline(c)) {
        return p + last + 1;
    }
    if end < n && end - p >= 2 {
        end - 1
    } else {
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn builtin() -> &'static Bpe {
        crate::tokenizer::builtin_bpe()
    }

    fn reference() -> &'static tiktoken_rs::CoreBPE {
        tiktoken_rs::o200k_base_singleton()
    }

    #[test]
    fn the_embedded_vocabulary_is_the_tiktoken_file_decoded() {
        let file = include_str!("../../assets/o200k_base.tiktoken");
        let parsed = Bpe::from_tiktoken(file, &O200K_SPECIAL, O200K_PATTERN).unwrap();
        assert_eq!(parsed.len(), 199_998);
        assert!(parsed.index == builtin().index);
        assert_eq!(parsed.index.slots(), builtin().index.slots());
    }

    /// Encodes `text` with both encoders, asserts equal ids and that they decode back.
    fn assert_same(text: &str) {
        let ours = builtin().encode_ordinary(text);
        let theirs = reference().encode_ordinary(text);
        assert_eq!(ours, theirs, "ids differ for {text:?}");
        assert_eq!(builtin().decode_bytes(&ours), text.as_bytes());
    }

    /// Hand-picked text the regex and the merges treat differently: scripts, marks, emoji
    /// (multi-codepoint), contractions in both cases, digit runs, whitespace runs before
    /// words and at the end, CRLF, tabs, code and punctuation runs.
    const SAMPLES: &[&str] = &[
        "",
        "Hello world",
        "Hello, World! HELLO world. hello WORLD?",
        "I'm you're they've she'll he'd it's WE'RE THEY'VE I'M Don'T",
        "1 12 123 1234 12345 123456789 3.14159 1,000,000 -42 0x1F 1e-9 ١٢٣٤٥ ⅷ",
        "  leading spaces",
        "trailing spaces   ",
        "a  b   c    d\t\te\n\nf\r\ng\r\n\r\n  h",
        "\n",
        "\n\n\n",
        " \n \n ",
        "\t",
        "   ",
        "x \u{a0}\u{3000}y",
        "naïve café résumé Zürich Ångström façade coöperate",
        "Ελληνικά Русский текст עברית العربية हिन्दी ภาษาไทย 日本語のテキスト 中文文本 한국어",
        "e\u{301}\u{301} a\u{308}o\u{308} \u{300}\u{301}x", // combining marks
        "🎉🚀👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✨✨✨",
        "fn main() { let x: Vec<u32> = (0..10).map(|i| i * 2).collect(); }\n",
        "def f(a, b=2, *args, **kw):\n    return {'a': a, \"b\": [b]}  # comment\n",
        "<div class=\"x\">&amp;&lt;</div> https://example.com/a/b?c=d&e=f#g //path/to/",
        "!!!??? ... --- === +++ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
        "<|endoftext|> <|endofprompt|>",
        "CamelCaseWords and snake_case_words and SCREAMING_CASE and mIxEd",
        "\u{feff}BOM \u{200b}zero\u{200d}width \u{0} nul \u{7f} del",
    ];

    #[test]
    fn encodes_handpicked_text_like_tiktoken() {
        for text in SAMPLES {
            assert_same(text);
        }
        assert_same(&SAMPLES.concat());
    }

    #[test]
    fn encodes_the_prompt_corpus_like_tiktoken() {
        let corpus = crate::dataset::prompt::CORPUS;
        assert!(corpus.len() > 300_000);
        assert_same(corpus);
        // Line by line too: pieces at the start of a text split differently.
        for line in corpus.lines().take(2000) {
            assert_same(line);
        }
    }

    #[test]
    fn encodes_the_mock_words_like_tiktoken() {
        for word in crate::mock::words::WORDS {
            assert_same(word);
            assert_same(&format!(" {word}"));
        }
        assert_same(&crate::mock::words::text(5000));
    }

    /// Pieces of 128 bytes and more go through the heap merge.
    #[test]
    fn encodes_long_pieces_like_tiktoken() {
        assert_same(&"a".repeat(1000));
        assert_same(&"ab".repeat(300));
        assert_same(&"!@#$%^&*()".repeat(40));
        assert_same(&"🎉".repeat(100));
        assert_same(&"日本語".repeat(100));
        assert_same(&" ".repeat(500));
        assert_same(&format!("{}x", " ".repeat(500)));
        let scrambled: String = (0..2000u32)
            .map(|i| char::from(b'a' + ((i * 7919 + i / 3) % 26) as u8))
            .collect();
        assert_same(&scrambled);
        assert_same(&crate::dataset::prompt::CORPUS[..5000].replace([' ', '\n'], ""));
    }

    #[test]
    fn decodes_every_token_like_tiktoken() {
        let bpe = builtin();
        assert_eq!(bpe.len(), 199_998);
        for id in 0..bpe.len() as u32 {
            let ours = bpe.token_bytes(id).unwrap();
            assert_eq!(ours, reference().decode_bytes(&[id]).unwrap(), "token {id}");
            assert_eq!(bpe.rank(ours), Some(id));
        }
        for (id, text) in O200K_SPECIAL {
            assert_eq!(bpe.decode_bytes(&[id]), text.as_bytes());
            assert_eq!(reference().decode_bytes(&[id]).unwrap(), text.as_bytes());
        }
        // Unknown ids are skipped.
        assert_eq!(
            bpe.decode_bytes(&[13225, 199_998, 2375, u32::MAX]),
            b"Hello world"
        );
        assert_eq!(bpe.rank(b"not a single token at all"), None);
    }

    #[test]
    fn a_piece_past_the_merge_limit_is_merged_slice_by_slice() {
        let bpe = builtin();
        let limit = crate::tokenizer::MAX_MERGE_PIECE;
        // One "word" of 2.5 slices: its count is that of its slices.
        let word = "a".repeat(limit * 5 / 2);
        let slices: usize = word
            .as_bytes()
            .chunks(limit)
            .map(|c| bpe.encode_ordinary(std::str::from_utf8(c).unwrap()).len())
            .sum();
        assert_eq!(bpe.encode_ordinary(&word).len(), slices);
        // At the limit it is still one piece, exactly as tiktoken merges it.
        assert_same(&"b".repeat(limit));
    }

    #[test]
    fn heap_and_scan_merges_agree() {
        let bpe = builtin();
        for text in SAMPLES
            .iter()
            .copied()
            .chain(["supercalifragilistic", "ababababab"])
        {
            let piece = text.as_bytes();
            if piece.len() < 2 {
                continue;
            }
            let (mut scan, mut heap) = (Vec::new(), Vec::new());
            bpe.merge_by_scan(piece, &mut scan);
            bpe.merge_by_heap(piece, &mut heap);
            assert_eq!(scan, heap, "{text:?}");
        }
    }

    fn tiny_vocab(extra: &[&[u8]]) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::STANDARD;
        let mut lines = Vec::new();
        for b in 0..=255u8 {
            lines.push(STANDARD.encode([b]));
        }
        for token in extra {
            lines.push(STANDARD.encode(token));
        }
        lines
            .iter()
            .enumerate()
            .map(|(rank, b64)| format!("{b64} {rank}\n"))
            .collect()
    }

    #[test]
    fn merges_lowest_rank_first_and_leftmost_on_ties() {
        // "bc" (257) merges before "ab" (258): "abc" becomes "a" + "bc", which joins to
        // "abc" (259); in "abd" only "ab" is a token.
        let vocab = tiny_vocab(&[b"xx", b"bc", b"ab", b"abc"]);
        let bpe = Bpe::from_tiktoken(&vocab, &[], r"\S+|\s+").unwrap();
        assert_eq!(bpe.encode_ordinary("abc"), vec![259]);
        assert_eq!(bpe.encode_ordinary("abd"), vec![258, u32::from(b'd')]);
        // "xxx": both pairs are "xx"; the left one merges first.
        assert_eq!(bpe.encode_ordinary("xxx"), vec![256, u32::from(b'x')]);
        let long = "x".repeat(301);
        let mut expected = vec![256; 150];
        expected.push(u32::from(b'x'));
        assert_eq!(bpe.encode_ordinary(&long), expected);
    }

    #[test]
    fn malformed_vocabularies_are_rejected() {
        let err = |vocab: &str| {
            Bpe::from_tiktoken(vocab, &[], r"\S+")
                .unwrap_err()
                .to_string()
        };
        assert!(err("YQ== 1\n").contains("line 1"), "{}", err("YQ== 1\n"));
        assert!(err("YQ== 0\n!!!! 1\n").contains("bad base64"));
        assert!(err("YQ==\n").contains("expected"));
        assert!(err("YQ== 0\nYQ== 1\n").contains("duplicate"));
        // Byte-level vocabularies must spell every byte.
        assert!(err("YQ== 0\n").contains("not a token"));
        let mut with_all_bytes = tiny_vocab(&[]);
        with_all_bytes.push_str("YWI= 256\n");
        assert_eq!(
            Bpe::from_tiktoken(&with_all_bytes, &[], r"\S+")
                .unwrap()
                .len(),
            257
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn encodes_random_unicode_like_tiktoken(text in any::<String>()) {
            let ours = builtin().encode_ordinary(&text);
            prop_assert_eq!(&ours, &reference().encode_ordinary(&text));
            prop_assert_eq!(builtin().decode_bytes(&ours), text.as_bytes());
        }

        #[test]
        fn encodes_random_textlike_strings_like_tiktoken(
            text in "([A-Za-z]{1,12}|[0-9]{1,6}|[ \t\r\n]{1,4}|[.,;:!?'\"()/-]{1,3}|'(s|t|re|ve|m|ll|d|S|T|RE)|[éüñßçøÅ]|[α-ω]{1,4}|[日本語中文]{1,3}|🎉|👍🏽|\u{301}){0,60}"
        ) {
            let ours = builtin().encode_ordinary(&text);
            prop_assert_eq!(&ours, &reference().encode_ordinary(&text));
            prop_assert_eq!(builtin().decode_bytes(&ours), text.as_bytes());
        }

        /// ASCII text takes `o200k_ascii_piece_end`: every class it tells apart, each
        /// contraction in mixed case, whitespace runs of every kind, control characters.
        #[test]
        fn encodes_ascii_like_tiktoken(
            text in "([A-Za-z]{1,6}|[0-9]{1,5}|[ \t\r\n\x0b\x0c]{1,4}|'([sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])|[!-/:-@\\[-`{-~]{1,3}|[\x00-\x08\x0e-\x1f\x7f]){0,50}"
        ) {
            prop_assert_eq!(builtin().encode_ordinary(&text), reference().encode_ordinary(&text));
        }

        #[test]
        fn encodes_any_ascii_like_tiktoken(text in "[\x00-\x7f]{0,120}") {
            prop_assert_eq!(builtin().encode_ordinary(&text), reference().encode_ordinary(&text));
        }

        /// The pieces themselves (equal ids can hide a wrong split when no token spans it).
        #[test]
        fn ascii_pieces_are_the_patterns(
            text in "([A-Za-z]{1,6}|[0-9]{1,5}|[ \t\r\n\x0b\x0c]{1,4}|'([sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])|[!-/:-@\\[-`{-~]{1,3}|[\x00-\x08\x0e-\x1f\x7f]){0,50}"
        ) {
            let regex = builtin().pretokenizer();
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            let mut at = 0;
            while at < text.len() {
                let end = o200k_ascii_piece_end(text.as_bytes(), at);
                ours.push(&text[at..end]);
                at = end;
            }
            let mut at = 0;
            while let Ok(Some(m)) = regex.find_from_pos(&text, at) {
                theirs.push(m.as_str());
                at = m.end();
            }
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn encodes_random_long_words_like_tiktoken(text in "[a-z]{100,400}|[!-/:-@]{100,300}") {
            prop_assert_eq!(builtin().encode_ordinary(&text), reference().encode_ordinary(&text));
        }

        /// Counting takes the encoder's path without keeping ids: the same number as
        /// tiktoken's ids, for ASCII (the split by hand), any text (the regex) and long
        /// pieces (the heap merge).
        #[test]
        fn counts_as_many_tokens_as_tiktoken_encodes(
            ascii in "([A-Za-z]{1,6}|[0-9]{1,5}|[ \t\r\n]{1,4}|'([sStT]|[rR][eE])|[!-/:-@]{1,3}){0,50}",
            any in any::<String>(),
            long in "[a-z]{100,400}",
        ) {
            for text in [ascii, any, long] {
                prop_assert_eq!(
                    builtin().count_ordinary(&text),
                    reference().encode_ordinary(&text).len()
                );
            }
        }
    }
}
