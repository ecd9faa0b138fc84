//! Prompt shaping applied to a built dataset: a verbatim or synthetic system prompt for
//! every conversation, a synthetic user context per conversation, and a pool of synthetic
//! prefixes that first turns start with (prefix-cache benchmarks).
//!
//! Every text added here counts in the input sequence length: the first turn's count is
//! taken again over everything its request carries (system, context, prompt), joined by
//! single spaces as the record's later turns are counted.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::{Rng, RngExt};

use super::prompt::{Corpus, PromptBuilder};
use super::{Conversation, Dataset, derive_seed};
use crate::tokenizer::Tokenizer;

/// What to add to the prompts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptShaping {
    /// `--system-prompt` / `--system-prompt-file`: sent as written.
    pub system_text: Option<String>,
    /// `--shared-system-prompt-length`: one synthetic system prompt of this many tokens.
    pub shared_system_tokens: Option<usize>,
    /// `--user-context-prompt-length`: a synthetic user message of this many tokens per
    /// conversation.
    pub user_context_tokens: Option<usize>,
    /// `--prompt-prefix-pool-size` / `--prompt-prefix-length`.
    pub prefix_pool: Option<PrefixPool>,
    /// `--prompt-corpus`: the text of synthetic prompts, and of the texts added here.
    pub corpus: Corpus,
}

/// `size` synthetic prefixes of `tokens` tokens each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixPool {
    pub size: usize,
    pub tokens: usize,
}

/// Random streams of their own, so shaping does not change the prompts themselves.
const STREAM_PREFIXES: u64 = 101;
const STREAM_PREFIX_PICK: u64 = 102;
const STREAM_SHARED_SYSTEM: u64 = 103;
const STREAM_USER_CONTEXT: u64 = 104;

/// Tries at a prefixed prompt of the exact length before keeping the closest.
const MAX_PREFIX_FITS: usize = 8;

fn stream(seed: u64, stream: u64, index: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(derive_seed(seed, stream, index))
}

/// Applies `shaping` to every conversation and counts each first turn's input again when
/// its conversation has a system message or a user context (also one from an input file).
pub fn apply(dataset: &mut Dataset, shaping: &PromptShaping, tokenizer: &Tokenizer, seed: u64) {
    let builder = PromptBuilder::for_corpus(tokenizer, shaping.corpus);
    if let Some(pool) = shaping.prefix_pool {
        add_prefixes(&mut dataset.conversations, pool, &builder, tokenizer, seed);
    }
    let shared = shaping.shared_system_tokens.map(|n| {
        builder
            .build(n, &mut stream(seed, STREAM_SHARED_SYSTEM, 0))
            .text
    });
    let system = shaping.system_text.clone().or(shared);
    for (i, conv) in dataset.conversations.iter_mut().enumerate() {
        if let Some(text) = &system {
            conv.system = Some(match conv.system.take() {
                Some(own) => format!("{text}\n\n{own}"),
                None => text.clone(),
            });
        }
        if let Some(n) = shaping.user_context_tokens {
            let mut rng = stream(seed, STREAM_USER_CONTEXT, i as u64);
            conv.context = Some(builder.build(n, &mut rng).text);
        }
        if conv.system.is_some() || conv.context.is_some() {
            recount_first_turn(conv, tokenizer);
        }
    }
}

/// The first turn's input tokens over all its request's text: the system message, the user
/// context and its own texts, joined by single spaces (as the batch counts are taken).
pub(super) fn recount_first_turn(conv: &mut Conversation, tokenizer: &Tokenizer) {
    let Some(first) = conv.turns.first_mut() else {
        return;
    };
    let text = [conv.system.as_deref(), conv.context.as_deref()]
        .into_iter()
        .flatten()
        .chain(std::iter::once(first.text.as_str()))
        .chain(first.extra_texts.iter().map(String::as_str))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    first.input_tokens = tokenizer.count(&text) as u64;
}

/// Builds the pool and starts each conversation's first turn with a prefix drawn from it,
/// keeping the turn at prefix + its own length in tokens.
fn add_prefixes(
    conversations: &mut [Conversation],
    pool: PrefixPool,
    builder: &PromptBuilder<'_>,
    tokenizer: &Tokenizer,
    seed: u64,
) {
    let prefixes: Vec<String> = (0..pool.size as u64)
        .map(|i| {
            builder
                .build(pool.tokens, &mut stream(seed, STREAM_PREFIXES, i))
                .text
        })
        .collect();
    let mut pick = stream(seed, STREAM_PREFIX_PICK, 0);
    for conv in conversations {
        let prefix = &prefixes[pick.random_range(0..prefixes.len())];
        let Some(first) = conv.turns.first_mut() else {
            continue;
        };
        let body = std::mem::take(&mut first.text);
        let target = pool.tokens + tokenizer.count(&body);
        let (text, tokens) = prefixed(prefix, body, target, builder, tokenizer, &mut pick);
        first.text = text;
        first.input_tokens = if first.extra_texts.is_empty() {
            tokens as u64
        } else {
            // A prompt batch: its texts counted together, as the request carries them.
            let mut all = vec![first.text.as_str()];
            all.extend(first.extra_texts.iter().map(String::as_str));
            tokenizer.count(&all.join(" ")) as u64
        };
    }
}

/// `prefix` followed by `body`, or by a new body when the two merge into a different count
/// at the seam (BPE merges across it): the body length is corrected until the whole has
/// `target` tokens. The prefix stays as it is, so every request using it shares its tokens.
fn prefixed(
    prefix: &str,
    body: String,
    target: usize,
    builder: &PromptBuilder<'_>,
    tokenizer: &Tokenizer,
    rng: &mut impl Rng,
) -> (String, usize) {
    let mut text = format!("{prefix}{body}");
    let mut got = tokenizer.count(&text);
    let mut best = (text.clone(), got);
    let mut body_tokens = target.saturating_sub(tokenizer.count(prefix)).max(1);
    for _ in 0..MAX_PREFIX_FITS {
        if got == target {
            return (text, got);
        }
        if got.abs_diff(target) < best.1.abs_diff(target) {
            best = (text.clone(), got);
        }
        body_tokens = (body_tokens + target).saturating_sub(got).max(1);
        text = format!("{prefix}{}", builder.build(body_tokens, rng).text);
        got = tokenizer.count(&text);
    }
    if got.abs_diff(target) < best.1.abs_diff(target) {
        best = (text, got);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Entry, TurnOptions};

    fn dataset(t: &Tokenizer, conversations: usize, turns: u64) -> Dataset {
        let opts = crate::dataset::SyntheticOptions {
            num_entries: conversations,
            isl_mean: 40.0,
            isl_stddev: 0.0,
            osl_mean: None,
            osl_stddev: 0.0,
            image_width_mean: 0.0,
            image_width_stddev: 0.0,
            image_height_mean: 0.0,
            image_height_stddev: 0.0,
            image_format: crate::dataset::ImageFormat::Png,
            image_batch_size: 0,
            seed: Some(5),
            turns: TurnOptions {
                mean: turns,
                ..TurnOptions::default()
            },
            media: Default::default(),
        };
        crate::dataset::build(&opts, &Default::default(), t, &()).unwrap()
    }

    fn first(c: &Conversation) -> &Entry {
        &c.turns[0]
    }

    #[test]
    fn prefixed_first_turns_have_prefix_plus_isl_tokens() {
        let t = Tokenizer::builtin().unwrap();
        let mut d = dataset(&t, 30, 2);
        let pool = PrefixPool {
            size: 3,
            tokens: 50,
        };
        let shaping = PromptShaping {
            prefix_pool: Some(pool),
            ..Default::default()
        };
        apply(&mut d, &shaping, &t, 5);
        let mut used = std::collections::HashSet::new();
        for c in &d.conversations {
            let e = first(c);
            assert_eq!(t.count(&e.text), 90, "{:?}", e.text);
            assert_eq!(e.input_tokens, 90);
            // Later turns are not prefixed.
            assert_eq!(c.turns[1].input_tokens, 40);
            used.insert(e.text.chars().take(60).collect::<String>());
        }
        // Three prefixes, each drawn at least once in 30 conversations.
        assert_eq!(used.len(), 3);
        // Same seed, same dataset.
        let mut again = dataset(&t, 30, 2);
        apply(&mut again, &shaping, &t, 5);
        let texts = |d: &Dataset| -> Vec<String> {
            d.conversations
                .iter()
                .map(|c| first(c).text.clone())
                .collect()
        };
        assert_eq!(texts(&d), texts(&again));
    }

    #[test]
    fn system_prompts_and_contexts_count_in_the_first_turn() {
        let t = Tokenizer::builtin().unwrap();
        let mut d = dataset(&t, 4, 1);
        d.conversations[1].system = Some("From the file.".into());
        let shaping = PromptShaping {
            shared_system_tokens: Some(30),
            user_context_tokens: Some(20),
            ..Default::default()
        };
        apply(&mut d, &shaping, &t, 5);
        let shared = d.conversations[0].system.clone().unwrap();
        assert_eq!(t.count(&shared), 30);
        assert_eq!(
            d.conversations[1].system.as_deref(),
            Some(format!("{shared}\n\nFrom the file.").as_str())
        );
        let mut contexts = std::collections::HashSet::new();
        for c in &d.conversations {
            let context = c.context.clone().unwrap();
            assert_eq!(t.count(&context), 20);
            contexts.insert(context.clone());
            let e = first(c);
            let all = format!("{} {} {}", c.system.as_deref().unwrap(), context, e.text);
            assert_eq!(e.input_tokens, t.count(&all) as u64);
        }
        assert_eq!(contexts.len(), 4, "one context per conversation");
    }
}
