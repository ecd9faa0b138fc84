//! Token-exact synthetic prompts cut from a bundled public-domain corpus.
//!
//! Only a slice of the corpus around a random line is tokenized for each prompt, so start-up
//! does not pay for tokenizing the whole corpus. A window of exactly `n` tokens is decoded and
//! re-encoded; because BPE merges can differ across the cut, the window is adjusted until the
//! re-encoded text has exactly `n` tokens.

use rand::{Rng, RngExt};

use crate::tokenizer::Tokenizer;

/// Shakespeare (public domain): the Sonnets, All's Well That Ends Well and Antony and
/// Cleopatra, taken from AIPerf's prompt corpus. See `assets/README.md`.
pub const CORPUS: &str = include_str!("../../assets/shakespeare.txt");

/// Extra tokens tokenized past the window, so the cut at the slice end never reaches it.
const SLACK_TOKENS: usize = 16;
/// Window adjustments tried at one position before moving to another.
const MAX_FIXUPS: usize = 10;
/// Positions tried before giving up on an exact count.
const MAX_POSITIONS: usize = 8;

/// Which text synthetic prompts are made of (`--prompt-corpus`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Corpus {
    /// Windows of the bundled Shakespeare.
    #[default]
    Sonnet,
    /// Windows of generated code, shell output, JSON, diffs and tracebacks (`coding`).
    Coding,
    /// Runs of consecutive vocabulary ids (special tokens left out), from a random offset,
    /// as vLLM's random dataset makes them.
    Random,
}

/// Builds prompts of an exact token count for one tokenizer.
pub struct PromptBuilder<'a> {
    tokenizer: &'a Tokenizer,
    corpus: &'a str,
    /// The allowed ids, for the random corpus.
    vocabulary: Option<Vec<u32>>,
}

/// A prompt and its token count (`== n` unless no exact window was found, which the tests
/// show does not happen for the bundled corpus; the count is always the true one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    pub tokens: usize,
}

impl<'a> PromptBuilder<'a> {
    pub fn new(tokenizer: &'a Tokenizer) -> Self {
        Self::with_corpus(tokenizer, CORPUS)
    }

    /// The builder for `--prompt-corpus`.
    pub fn for_corpus(tokenizer: &'a Tokenizer, corpus: Corpus) -> Self {
        match corpus {
            Corpus::Sonnet => Self::new(tokenizer),
            Corpus::Coding => Self::with_corpus(tokenizer, super::coding::corpus()),
            Corpus::Random => {
                let ids = tokenizer.ordinary_ids();
                assert!(!ids.is_empty(), "the tokenizer has no ordinary tokens");
                PromptBuilder {
                    tokenizer,
                    corpus: CORPUS,
                    vocabulary: Some(ids),
                }
            }
        }
    }

    /// `corpus` must not be empty or all whitespace.
    pub fn with_corpus(tokenizer: &'a Tokenizer, corpus: &'a str) -> Self {
        assert!(!corpus.trim().is_empty(), "prompt corpus is empty");
        PromptBuilder {
            tokenizer,
            corpus,
            vocabulary: None,
        }
    }

    /// A prompt of `n` tokens (at least 1) starting at a random line of the corpus (or, for
    /// the random corpus, at a random vocabulary id).
    pub fn build(&self, n: usize, rng: &mut impl Rng) -> Prompt {
        let n = n.max(1);
        let mut best: Option<Prompt> = None;
        for _ in 0..MAX_POSITIONS {
            let candidate = match &self.vocabulary {
                Some(ids) => self.random_run(ids, rng.random_range(0..ids.len()), n),
                None => {
                    let start = self.line_start_at(rng.random_range(0..self.corpus.len()));
                    let tokens = self.tokens_from(start, n + SLACK_TOKENS);
                    self.fit_window(&tokens, n)
                }
            };
            if candidate.tokens == n {
                return candidate;
            }
            let closer = best
                .as_ref()
                .is_none_or(|b| candidate.tokens.abs_diff(n) < b.tokens.abs_diff(n));
            if closer {
                best = Some(candidate);
            }
        }
        best.expect("MAX_POSITIONS > 0")
    }

    /// Decodes `tokens[..take]`, re-encodes it and moves `take` by the difference until the
    /// count is exactly `n`. Returns the closest prompt seen when it cycles or runs out.
    fn fit_window(&self, tokens: &[u32], n: usize) -> Prompt {
        let mut take = n.min(tokens.len());
        let mut tried: Vec<usize> = Vec::with_capacity(MAX_FIXUPS);
        let mut best: Option<Prompt> = None;
        for _ in 0..MAX_FIXUPS {
            tried.push(take);
            let text = self.tokenizer.decode(&tokens[..take]);
            let got = self.tokenizer.count(&text);
            let prompt = Prompt { text, tokens: got };
            if got == n {
                return prompt;
            }
            if best
                .as_ref()
                .is_none_or(|b| got.abs_diff(n) < b.tokens.abs_diff(n))
            {
                best = Some(prompt);
            }
            let next = (take + n).saturating_sub(got);
            if next == 0 || next > tokens.len() || tried.contains(&next) {
                break;
            }
            take = next;
        }
        best.expect("at least one window is tried")
    }

    /// `n` consecutive allowed ids from `start` (wrapping), decoded; the text is encoded
    /// again and cut or topped up with the following ids until it has `n` tokens, since
    /// random neighbours merge differently once decoded.
    fn random_run(&self, ids: &[u32], start: usize, n: usize) -> Prompt {
        let mut next = start;
        let mut take = |k: usize, out: &mut Vec<u32>| {
            for _ in 0..k {
                out.push(ids[next % ids.len()]);
                next += 1;
            }
        };
        let mut tokens = Vec::with_capacity(n + SLACK_TOKENS);
        take(n, &mut tokens);
        let mut best: Option<Prompt> = None;
        for _ in 0..MAX_FIXUPS {
            let text = self.tokenizer.decode(&tokens);
            let mut again = self.tokenizer.encode(&text);
            let prompt = Prompt {
                text,
                tokens: again.len(),
            };
            if prompt.tokens == n {
                return prompt;
            }
            if best
                .as_ref()
                .is_none_or(|b| prompt.tokens.abs_diff(n) < b.tokens.abs_diff(n))
            {
                best = Some(prompt);
            }
            if again.len() > n {
                again.truncate(n);
            } else {
                take(n - again.len(), &mut again);
            }
            tokens = again;
        }
        best.expect("at least one run is tried")
    }

    /// The start of the line at or after byte `pos` (wrapping to the corpus start).
    fn line_start_at(&self, pos: usize) -> usize {
        match self.corpus.as_bytes()[pos..]
            .iter()
            .position(|&b| b == b'\n')
        {
            Some(i) if pos + i + 1 < self.corpus.len() => pos + i + 1,
            _ => 0,
        }
    }

    /// Tokens of the corpus read cyclically from `start`, at least `want` of them.
    fn tokens_from(&self, start: usize, want: usize) -> Vec<u32> {
        // English prose runs at about four characters per token; start a little above that
        // and double until the slice holds enough tokens.
        let mut chars = want * 5 + 64;
        loop {
            let slice = self.cyclic_slice(start, chars);
            let tokens = self.tokenizer.encode(&slice);
            if tokens.len() >= want {
                return tokens;
            }
            chars *= 2;
        }
    }

    /// About `len` bytes of the corpus from `start`, wrapping around (ending on a char boundary).
    fn cyclic_slice(&self, start: usize, len: usize) -> String {
        let mut out = String::with_capacity(len + 4);
        let mut pos = start;
        while out.len() < len {
            let rest = &self.corpus[pos..];
            let mut end = (len - out.len()).min(rest.len());
            while !rest.is_char_boundary(end) {
                end += 1;
            }
            out.push_str(&rest[..end]);
            pos = 0;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::ChaCha8Rng;
    use std::path::Path;

    fn gpt2() -> Tokenizer {
        Tokenizer::from_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2"))
            .unwrap()
    }

    fn assert_exact_lengths(tokenizer: &Tokenizer, seed: u64) {
        let builder = PromptBuilder::new(tokenizer);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..200 {
            let n = rng.random_range(1..=2000usize);
            let prompt = builder.build(n, &mut rng);
            assert_eq!(prompt.tokens, n, "prompt: {:?}", prompt.text);
            assert_eq!(tokenizer.count(&prompt.text), n);
        }
    }

    #[test]
    fn builtin_prompts_are_token_exact() {
        assert_exact_lengths(&Tokenizer::builtin().unwrap(), 7);
    }

    #[test]
    fn hf_prompts_are_token_exact() {
        assert_exact_lengths(&gpt2(), 11);
    }

    /// A byte-level tokenizer that adds a leading space before encoding: decoding a window
    /// and re-encoding it shifts merges at the start, which the adjustment loop must absorb.
    #[test]
    fn prefix_space_tokenizer_prompts_are_token_exact() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2/tokenizer.json");
        let json = std::fs::read_to_string(fixture).unwrap();
        let patched = json.replace("\"add_prefix_space\":false", "\"add_prefix_space\":true");
        assert_ne!(json, patched);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), patched).unwrap();
        let tokenizer = Tokenizer::from_file(dir.path()).unwrap();
        assert_eq!(tokenizer.encode("Hello"), tokenizer.encode(" Hello"));
        let builder = PromptBuilder::new(&tokenizer);
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        for _ in 0..100 {
            let n = rng.random_range(1..=600usize);
            let prompt = builder.build(n, &mut rng);
            assert_eq!(tokenizer.count(&prompt.text), n, "{:?}", prompt.text);
        }
    }

    /// Japanese text costs several byte-level GPT-2 tokens per character, so many windows end
    /// inside a character; its decoded U+FFFD re-encodes to a different count and the window
    /// has to be adjusted.
    #[test]
    fn windows_cut_inside_characters_are_adjusted() {
        let tokenizer = gpt2();
        let corpus =
            "東京は日本の首都です。桜の花が咲いています。\n吾輩は猫である。名前はまだ無い。\n";
        let builder = PromptBuilder::with_corpus(&tokenizer, corpus);
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for n in 1..=120 {
            let prompt = builder.build(n, &mut rng);
            assert_eq!(tokenizer.count(&prompt.text), n, "{:?}", prompt.text);
            assert_eq!(prompt.tokens, n);
        }
    }

    #[test]
    fn random_and_coding_prompts_are_token_exact() {
        for t in [Tokenizer::builtin().unwrap(), gpt2()] {
            for corpus in [Corpus::Random, Corpus::Coding] {
                let builder = PromptBuilder::for_corpus(&t, corpus);
                let mut rng = ChaCha8Rng::seed_from_u64(21);
                for _ in 0..100 {
                    let n = rng.random_range(1..=1500usize);
                    let prompt = builder.build(n, &mut rng);
                    assert_eq!(t.count(&prompt.text), n, "{corpus:?} {:?}", prompt.text);
                    assert_eq!(prompt.tokens, n);
                }
            }
        }
    }

    #[test]
    fn random_prompts_are_consecutive_vocabulary_ids() {
        let t = Tokenizer::builtin().unwrap();
        let builder = PromptBuilder::for_corpus(&t, Corpus::Random);
        let ids = t.ordinary_ids();
        assert_eq!(ids.len(), crate::tokenizer::builtin_bpe().len());
        // Where two neighbouring ids survive decoding and encoding again, the prompt is
        // exactly those two ids' text.
        let start = (1000..2000)
            .find(|&i| t.encode(&t.decode(&ids[i..i + 2])) == ids[i..i + 2])
            .unwrap();
        let p = builder.random_run(&ids, start, 2);
        assert_eq!(
            (p.text.as_str(), p.tokens),
            (t.decode(&ids[start..start + 2]).as_str(), 2)
        );
        // The run wraps around the end of the vocabulary.
        let p = builder.random_run(&ids, ids.len() - 1, 3);
        assert_eq!(p.tokens, 3);
    }

    #[test]
    fn same_rng_state_gives_same_prompt() {
        let t = Tokenizer::builtin().unwrap();
        let builder = PromptBuilder::new(&t);
        let a = builder.build(300, &mut ChaCha8Rng::seed_from_u64(3));
        let b = builder.build(300, &mut ChaCha8Rng::seed_from_u64(3));
        let c = builder.build(300, &mut ChaCha8Rng::seed_from_u64(4));
        assert_eq!(a, b);
        assert_ne!(a.text, c.text);
    }

    #[test]
    fn prompt_is_corpus_text_from_a_line_start() {
        let t = Tokenizer::builtin().unwrap();
        let builder = PromptBuilder::new(&t);
        let prompt = builder.build(40, &mut ChaCha8Rng::seed_from_u64(5));
        let first_line = prompt.text.lines().next().unwrap();
        assert!(
            CORPUS.contains(&format!("\n{first_line}")) || CORPUS.starts_with(first_line),
            "{first_line:?}"
        );
    }

    #[test]
    fn zero_tokens_means_one() {
        let t = Tokenizer::builtin().unwrap();
        let prompt = PromptBuilder::new(&t).build(0, &mut ChaCha8Rng::seed_from_u64(1));
        assert_eq!(prompt.tokens, 1);
        assert_eq!(t.count(&prompt.text), 1);
    }

    #[test]
    fn prompts_longer_than_the_corpus_wrap_around() {
        let t = Tokenizer::builtin().unwrap();
        let corpus = "Shall I compare thee to a summers day\nThou art more lovely\n";
        let builder = PromptBuilder::with_corpus(&t, corpus);
        let prompt = builder.build(500, &mut ChaCha8Rng::seed_from_u64(9));
        assert_eq!(prompt.tokens, 500);
        assert_eq!(t.count(&prompt.text), 500);
        assert!(prompt.text.matches("lovely").count() > 10);
    }

    #[test]
    fn cyclic_slice_wraps_and_respects_length() {
        let t = Tokenizer::builtin().unwrap();
        let builder = PromptBuilder::with_corpus(&t, "ab\ncd\n");
        assert_eq!(builder.cyclic_slice(3, 8), "cd\nab\ncd");
        assert_eq!(builder.line_start_at(1), 3);
        assert_eq!(builder.line_start_at(4), 0);
    }
}
