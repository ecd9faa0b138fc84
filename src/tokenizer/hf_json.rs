//! Reads a Hugging Face `tokenizer.json` into a byte-level BPE `Spec`, or says why it is not
//! one we encode exactly (then the `tokenizers` crate loads it).
//!
//! The vocabulary and merges (300k strings for Qwen2) are decoded straight into byte
//! arenas while serde_json parses, without the crate's maps of owned strings; the small
//! parts (normalizer, pre-tokenizer, decoder) go through `serde_json::Value`. The load
//! uses a second core: the vocabulary is indexed on its own thread while serde_json goes on
//! to the merges, and the merges are looked up in halves.

use std::fmt;
use std::thread::{self, JoinHandle};

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::byte_level::{AddedToken, GPT2_PATTERN, Spec, push_token_bytes, push_token_utf8};
use super::token_index::TokenIndex;

/// Why a `tokenizer.json` is left to the `tokenizers` crate.
#[derive(Debug, Clone, PartialEq)]
pub enum NotCompact {
    /// Valid, but something we do not reproduce (the reason names it).
    Unsupported(String),
    /// Not valid JSON of the expected shape: the crate gives the proper error.
    Malformed(String),
}

impl fmt::Display for NotCompact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotCompact::Unsupported(why) => f.write_str(why),
            NotCompact::Malformed(why) => write!(f, "unreadable here: {why}"),
        }
    }
}

fn unsupported<T>(why: impl Into<String>) -> Result<T, NotCompact> {
    Err(NotCompact::Unsupported(why.into()))
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    truncation: Option<Value>,
    #[serde(default)]
    padding: Option<Value>,
    #[serde(default)]
    added_tokens: Vec<AddedJson>,
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    decoder: Option<Value>,
    model: Model,
}

#[derive(Deserialize)]
struct AddedJson {
    id: u32,
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    normalized: bool,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    ignore_merges: bool,
    #[serde(default)]
    vocab: Option<IndexedVocab>,
    #[serde(default)]
    merges: Option<Merges>,
}

/// The vocabulary as parsed: token bytes in file order, with their ids.
#[derive(Default)]
struct Vocab {
    arena: Vec<u8>,
    /// `(id, start, end)` in `arena`.
    entries: Vec<(u32, u32, u32)>,
    /// The first token that is not spelled in byte-level characters.
    not_byte_level: Option<String>,
}

/// The merges as parsed: each pair's left and right bytes back to back in `arena`.
#[derive(Default)]
struct Merges {
    arena: Vec<u8>,
    /// `(start, split, end)`: left is `start..split`, right `split..end`.
    pairs: Vec<(u32, u32, u32)>,
    not_byte_level: Option<String>,
}

/// The vocabulary as it is indexed: a thread started as soon as serde_json has read it
/// builds the token index while the parse goes on to the merges (Qwen2: the index's 9 ms
/// run beside them). Dropped unjoined when the parse fails: the thread ends on its own.
struct IndexedVocab(JoinHandle<Result<TokenIndex, NotCompact>>);

impl IndexedVocab {
    fn join(self) -> Result<TokenIndex, NotCompact> {
        self.0
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl<'de> Deserialize<'de> for IndexedVocab {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<IndexedVocab, D::Error> {
        let vocab = Vocab::deserialize(d)?;
        Ok(IndexedVocab(thread::spawn(move || vocab.index())))
    }
}

impl Vocab {
    /// The token index over this vocabulary, or why it is not one we encode.
    fn index(self) -> Result<TokenIndex, NotCompact> {
        if let Some(token) = self.not_byte_level {
            return unsupported(format!("vocabulary token {token:?} is not byte-level"));
        }
        let (arena, offsets) = vocab_in_id_order(self.entries, &self.arena)?;
        TokenIndex::new(arena, offsets)
            .map_err(|e| NotCompact::Unsupported(format!("vocabulary: {e}")))
    }
}

impl<'de> Deserialize<'de> for Vocab {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Vocab, D::Error> {
        d.deserialize_map(VocabVisitor)
    }
}

struct VocabVisitor;

impl<'de> Visitor<'de> for VocabVisitor {
    type Value = Vocab;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of tokens to ids")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vocab, A::Error> {
        let mut vocab = Vocab {
            arena: Vec::with_capacity(1 << 20),
            entries: Vec::with_capacity(map.size_hint().unwrap_or(1 << 17)),
            not_byte_level: None,
        };
        loop {
            let start = vocab.arena.len() as u32;
            let seed = TokenBytes {
                arena: &mut vocab.arena,
                failed: &mut vocab.not_byte_level,
            };
            if map.next_key_seed(seed)?.is_none() {
                break;
            }
            let id: u32 = map.next_value()?;
            vocab.entries.push((id, start, vocab.arena.len() as u32));
        }
        Ok(vocab)
    }
}

/// Deserializes one string in byte-level characters, appending its bytes to `arena`; a
/// string with other characters is recorded in `failed` (first one only). The string is
/// read as bytes (see `push_token_utf8`).
struct TokenBytes<'a> {
    arena: &'a mut Vec<u8>,
    failed: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for TokenBytes<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for TokenBytes<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token string")
    }
    fn visit_bytes<E: de::Error>(self, s: &[u8]) -> Result<(), E> {
        if !push_token_utf8(s, self.arena) && self.failed.is_none() {
            *self.failed = Some(String::from_utf8_lossy(s).into_owned());
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Merges {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Merges, D::Error> {
        d.deserialize_seq(MergesVisitor)
    }
}

struct MergesVisitor;

impl<'de> Visitor<'de> for MergesVisitor {
    type Value = Merges;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of merges")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merges, A::Error> {
        let mut merges = Merges {
            arena: Vec::with_capacity(1 << 20),
            pairs: Vec::with_capacity(seq.size_hint().unwrap_or(1 << 17)),
            not_byte_level: None,
        };
        loop {
            let start = merges.arena.len() as u32;
            let seed = MergeSeed {
                merges: &mut merges,
            };
            match seq.next_element_seed(seed)? {
                Some(split) => {
                    let end = merges.arena.len() as u32;
                    merges.pairs.push((start, split, end));
                }
                None => break,
            }
        }
        Ok(merges)
    }
}

/// One merge: `"left right"` (the older form) or `["left", "right"]`; gives where the
/// right part starts in the arena.
struct MergeSeed<'a> {
    merges: &'a mut Merges,
}

impl<'de> DeserializeSeed<'de> for MergeSeed<'_> {
    type Value = u32;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u32, D::Error> {
        // A string as bytes (see `push_token_utf8`), or a sequence.
        d.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for MergeSeed<'_> {
    type Value = u32;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a merge: \"left right\" or [\"left\", \"right\"]")
    }
    fn visit_bytes<E: de::Error>(self, s: &[u8]) -> Result<u32, E> {
        let mut parts = s.split(|&b| b == b' ');
        let (Some(left), Some(right), None) = (parts.next(), parts.next(), parts.next()) else {
            let s = String::from_utf8_lossy(s);
            return Err(E::custom(format!("merge {s:?} is not two tokens")));
        };
        Ok(self.push_pair(left, right))
    }
    /// Each token goes straight into the arena (no `String` per token: 300k for Qwen2); a
    /// token that is not byte-level is recorded on its own.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u32, A::Error> {
        let m = self.merges;
        seq.next_element_seed(m.token())?
            .ok_or_else(|| de::Error::custom("empty merge"))?;
        let split = m.arena.len() as u32;
        seq.next_element_seed(m.token())?
            .ok_or_else(|| de::Error::custom("merge with one token"))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom("merge with more than two tokens"));
        }
        Ok(split)
    }
}

impl Merges {
    /// A seed that appends one token's bytes to the arena.
    fn token(&mut self) -> TokenBytes<'_> {
        TokenBytes {
            arena: &mut self.arena,
            failed: &mut self.not_byte_level,
        }
    }
}

impl MergeSeed<'_> {
    fn push_pair(self, left: &[u8], right: &[u8]) -> u32 {
        let m = self.merges;
        let start = m.arena.len();
        let ok = push_token_utf8(left, &mut m.arena);
        let split = m.arena.len() as u32;
        if !(ok && push_token_utf8(right, &mut m.arena)) {
            m.arena.truncate(start);
            if m.not_byte_level.is_none() {
                let [left, right] = [left, right].map(String::from_utf8_lossy);
                m.not_byte_level = Some(format!("{left} {right}"));
            }
            return start as u32;
        }
        split
    }
}

/// Parses `tokenizer.json` bytes into a spec, or says why not.
pub fn parse(json: &[u8]) -> Result<Spec, NotCompact> {
    let file: File =
        serde_json::from_slice(json).map_err(|e| NotCompact::Malformed(e.to_string()))?;
    if file.truncation.is_some() || file.padding.is_some() {
        return unsupported("truncation or padding is set");
    }
    let model = file.model;
    match model.kind.as_deref() {
        None | Some("BPE") => {}
        Some(other) => return unsupported(format!("{other} model")),
    }
    if model.dropout.is_some_and(|d| d != 0.0) {
        return unsupported("BPE dropout");
    }
    if model.byte_fallback {
        return unsupported("byte fallback");
    }
    let affix = |a: &Option<String>| a.as_deref().is_some_and(|s| !s.is_empty());
    if affix(&model.continuing_subword_prefix) || affix(&model.end_of_word_suffix) {
        return unsupported("subword prefix or end-of-word suffix");
    }
    let nfc = normalizer_is_nfc(file.normalizer.as_ref())?;
    let patterns = pre_tokenizer_patterns(file.pre_tokenizer.as_ref())?;
    match file.decoder.as_ref().and_then(|d| d.get("type")?.as_str()) {
        Some("ByteLevel") => {}
        Some(other) => return unsupported(format!("{other} decoder")),
        None => return unsupported("no ByteLevel decoder"),
    }
    let (Some(vocab), Some(merges)) = (model.vocab, model.merges) else {
        return unsupported("BPE model without vocab or merges");
    };
    let tokens = vocab.join()?;
    if let Some(merge) = merges.not_byte_level {
        return unsupported(format!("merge {merge:?} is not byte-level"));
    }
    let merges = resolve_merges(&tokens, &merges.arena, &merges.pairs, MERGE_PIECES)?;
    let added = added_tokens(&tokens, file.added_tokens)?;
    Ok(Spec {
        tokens,
        merges,
        patterns,
        nfc,
        ignore_merges: model.ignore_merges,
        added,
    })
}

fn normalizer_is_nfc(normalizer: Option<&Value>) -> Result<bool, NotCompact> {
    let Some(n) = normalizer.filter(|n| !n.is_null()) else {
        return Ok(false);
    };
    match n.get("type").and_then(Value::as_str) {
        Some("NFC") => Ok(true),
        Some("Sequence") => {
            let inner = n
                .get("normalizers")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            match inner {
                [] => Ok(false),
                [one] => normalizer_is_nfc(Some(one)),
                _ => unsupported("a sequence of normalizers"),
            }
        }
        Some(other) => unsupported(format!("{other} normalizer")),
        None => unsupported("normalizer without a type"),
    }
}

/// The regexes of a `ByteLevel` pre-tokenizer, alone or last in a `Sequence` after
/// `Split`s that isolate their matches.
fn pre_tokenizer_patterns(pre: Option<&Value>) -> Result<Vec<String>, NotCompact> {
    let Some(pre) = pre.filter(|p| !p.is_null()) else {
        return unsupported("no pre-tokenizer");
    };
    let steps: Vec<&Value> = match pre.get("type").and_then(Value::as_str) {
        Some("Sequence") => pre
            .get("pretokenizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        _ => vec![pre],
    };
    let Some((last, splits)) = steps.split_last() else {
        return unsupported("empty pre-tokenizer sequence");
    };
    let mut patterns = Vec::new();
    for split in splits {
        patterns.push(split_pattern(split)?);
    }
    if last.get("type").and_then(Value::as_str) != Some("ByteLevel") {
        return unsupported("pre-tokenizer does not end with ByteLevel");
    }
    let flag =
        |name: &str, default: bool| last.get(name).and_then(Value::as_bool).unwrap_or(default);
    if flag("add_prefix_space", false) {
        return unsupported("ByteLevel add_prefix_space");
    }
    if flag("use_regex", true) {
        patterns.push(GPT2_PATTERN.to_string());
    }
    Ok(patterns)
}

fn split_pattern(step: &Value) -> Result<String, NotCompact> {
    let kind = step.get("type").and_then(Value::as_str).unwrap_or("?");
    if kind != "Split" {
        return unsupported(format!("{kind} pre-tokenizer"));
    }
    if step.get("behavior").and_then(Value::as_str) != Some("Isolated")
        || step.get("invert").and_then(Value::as_bool) != Some(false)
    {
        return unsupported("Split other than isolated, not inverted");
    }
    match step
        .get("pattern")
        .and_then(|p| p.get("Regex"))
        .and_then(Value::as_str)
    {
        Some(regex) => Ok(regex.to_string()),
        None => unsupported("Split on a plain string"),
    }
}

/// Lays the tokens out in id order; the ids must be 0..n with none missing.
fn vocab_in_id_order(
    mut entries: Vec<(u32, u32, u32)>,
    parsed: &[u8],
) -> Result<(Vec<u8>, Vec<u32>), NotCompact> {
    if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
        entries.sort_unstable_by_key(|e| e.0);
    }
    if let Some((i, e)) = entries.iter().enumerate().find(|(i, e)| e.0 as usize != *i) {
        return unsupported(format!(
            "vocabulary ids are not 0..{} (id {} at position {i})",
            entries.len(),
            e.0
        ));
    }
    let mut arena = Vec::with_capacity(parsed.len());
    let mut offsets = Vec::with_capacity(entries.len() + 1);
    offsets.push(0);
    for (_, start, end) in entries {
        arena.extend_from_slice(&parsed[start as usize..end as usize]);
        offsets.push(arena.len() as u32);
    }
    Ok((arena, offsets))
}

/// How many threads look the merges up (each a contiguous piece of the list).
const MERGE_PIECES: usize = 2;
/// Fewer merges than this per piece are looked up on the calling thread alone.
const MERGES_PER_PIECE: usize = 8192;

/// The ids `[left, right, merged]` of each merge, looked up in up to `pieces` contiguous
/// pieces on as many threads (the lookups are independent; each is a few cache misses).
fn resolve_merges(
    tokens: &TokenIndex,
    arena: &[u8],
    pairs: &[(u32, u32, u32)],
    pieces: usize,
) -> Result<Vec<[u32; 3]>, NotCompact> {
    let mut out = vec![[0; 3]; pairs.len()];
    let pieces = pieces.clamp(1, pairs.len() / MERGES_PER_PIECE + 1);
    let per_piece = pairs.len().div_ceil(pieces).max(1);
    let mut work = pairs.chunks(per_piece).zip(out.chunks_mut(per_piece));
    let results: Vec<_> = thread::scope(|s| {
        // The first piece on this thread, the others on their own.
        let first = work.next();
        let others: Vec<_> = work
            .map(|(pairs, out)| s.spawn(move || resolve_piece(tokens, arena, pairs, out)))
            .collect();
        let mut results = vec![first.map_or(Ok(()), |(pairs, out)| {
            resolve_piece(tokens, arena, pairs, out)
        })];
        results.extend(others.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }));
        results
    });
    results.into_iter().collect::<Result<(), _>>()?;
    Ok(out)
}

fn resolve_piece(
    tokens: &TokenIndex,
    arena: &[u8],
    pairs: &[(u32, u32, u32)],
    out: &mut [[u32; 3]],
) -> Result<(), NotCompact> {
    // Vocabularies are usually numbered in merge order: try the id after the last merge's
    // before looking the merged token up.
    let mut guess = u32::MAX;
    for (&(start, split, end), ids) in pairs.iter().zip(out) {
        let bytes = |a: u32, b: u32| &arena[a as usize..b as usize];
        let joined = bytes(start, end);
        guess = guess.wrapping_add(1);
        let merged = if (guess as usize) < tokens.len() && tokens.token(guess) == joined {
            Some(guess)
        } else {
            tokens.get(joined)
        };
        let (Some(left), Some(right), Some(merged)) = (
            tokens.get(bytes(start, split)),
            tokens.get(bytes(split, end)),
            merged,
        ) else {
            return Err(NotCompact::Malformed(format!(
                "merge {:?} uses a token outside the vocabulary",
                String::from_utf8_lossy(joined)
            )));
        };
        *ids = [left, right, merged];
        guess = merged;
    }
    Ok(())
}

/// The added tokens with the ids the crate gives them: a token of the vocabulary keeps its
/// id there, the others are numbered on from the vocabulary (or from the last added id).
fn added_tokens(tokens: &TokenIndex, added: Vec<AddedJson>) -> Result<Vec<AddedToken>, NotCompact> {
    let vocab_len = tokens.len() as u32;
    let mut out: Vec<AddedToken> = Vec::with_capacity(added.len());
    for t in added {
        if t.single_word || t.lstrip || t.rstrip {
            return unsupported(format!(
                "added token {:?} with single_word/lstrip/rstrip",
                t.content
            ));
        }
        if t.content.is_empty() {
            continue;
        }
        if let Some(earlier) = out.iter().find(|a| a.content == t.content) {
            if earlier.id != t.id {
                return unsupported(format!("added token {:?} listed twice", t.content));
            }
            continue;
        }
        let mut bytes = Vec::new();
        let in_vocab = push_token_bytes(&t.content, &mut bytes)
            .then(|| tokens.get(&bytes))
            .flatten();
        let expected = match in_vocab {
            Some(id) => id,
            None => match out.iter().map(|a| a.id).max() {
                Some(max) if max >= vocab_len => max + 1,
                _ => vocab_len,
            },
        };
        if t.id != expected {
            return unsupported(format!(
                "added token {:?} has id {} where {expected} was expected",
                t.content, t.id
            ));
        }
        out.push(AddedToken {
            id: t.id,
            content: t.content,
            normalized: t.normalized,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt2_json() -> Vec<u8> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/gpt2/tokenizer.json"
        );
        std::fs::read(path).unwrap()
    }

    /// The GPT-2 fixture's index and parsed merges (50,000 of them).
    fn gpt2() -> (TokenIndex, Merges) {
        let file: File = serde_json::from_slice(&gpt2_json()).unwrap();
        let tokens = file.model.vocab.unwrap().join().unwrap();
        (tokens, file.model.merges.unwrap())
    }

    #[test]
    fn merges_looked_up_in_pieces_are_the_merges_looked_up_in_one() {
        let (tokens, merges) = gpt2();
        let whole = resolve_merges(&tokens, &merges.arena, &merges.pairs, 1).unwrap();
        assert_eq!(whole.len(), 50_000);
        // GPT-2's first merge is "Ġ" + "t", i.e. the bytes " " and "t".
        let id = |bytes: &[u8]| tokens.get(bytes).unwrap();
        assert_eq!(whole[0], [id(b" "), id(b"t"), id(b" t")]);
        for pieces in [2, 3, 5, 64] {
            let split = resolve_merges(&tokens, &merges.arena, &merges.pairs, pieces).unwrap();
            assert!(split == whole, "{pieces} pieces differ");
        }
    }

    #[test]
    fn a_bad_merge_in_a_later_piece_is_reported() {
        let (tokens, mut merges) = gpt2();
        // The last merge's right part becomes a byte string no token has.
        let (start, split, _) = *merges.pairs.last().unwrap();
        merges.arena.truncate(split as usize);
        merges.arena.extend_from_slice(&[0xff; 9]);
        let end = merges.arena.len() as u32;
        *merges.pairs.last_mut().unwrap() = (start, split, end);
        for pieces in [1, 2, 3] {
            let err = resolve_merges(&tokens, &merges.arena, &merges.pairs, pieces).unwrap_err();
            assert!(
                err.to_string().contains("outside the vocabulary"),
                "{pieces}: {err}"
            );
        }
    }

    #[test]
    fn merges_as_strings_parse_as_pairs_do() {
        let mut json: Value = serde_json::from_slice(&gpt2_json()).unwrap();
        let pairs = json["model"]["merges"].as_array().unwrap().clone();
        assert!(pairs[0].is_array());
        json["model"]["merges"] = pairs
            .iter()
            .map(|p| {
                Value::from(format!(
                    "{} {}",
                    p[0].as_str().unwrap(),
                    p[1].as_str().unwrap()
                ))
            })
            .collect();
        let strings = parse(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert_eq!(strings, parse(&gpt2_json()).unwrap());
        assert_eq!(strings.merges.len(), 50_000);
    }

    #[test]
    fn a_merge_token_that_is_not_byte_level_is_named() {
        let json: Value = serde_json::from_slice(&gpt2_json()).unwrap();
        for (merge, named) in [
            (serde_json::json!(["t", "\u{2581}x"]), "\"\u{2581}x\""),
            (serde_json::json!("t \u{2581}x"), "\"t \u{2581}x\""),
        ] {
            let mut json = json.clone();
            json["model"]["merges"][7] = merge;
            let err = parse(&serde_json::to_vec(&json).unwrap()).err().unwrap();
            assert_eq!(
                err,
                NotCompact::Unsupported(format!("merge {named} is not byte-level"))
            );
        }
        // Unchanged, the fixture parses.
        assert!(parse(&gpt2_json()).is_ok());
    }
}
