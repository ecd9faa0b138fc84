//! `--prompt-batch-size B`: every synthetic turn carries B independent texts. The extra
//! texts have the turn's length (or, with an ISL stddev, a length drawn for each), and the
//! turn's input tokens count all of them joined by single spaces.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use super::prompt::{Corpus, PromptBuilder};
use super::{
    BuildError, Entry, MAX_INPUT_TOKENS, SyntheticOptions, derive_seed, normal, sample_at_least_one,
};
use crate::tokenizer::Tokenizer;

/// Its own random stream, so batches do not change the first texts.
const STREAM_BATCH: u64 = 6;

pub fn add_texts(
    entries: &mut [Entry],
    batch_size: usize,
    opts: &SyntheticOptions,
    tokenizer: &Tokenizer,
    corpus: Corpus,
    seed: u64,
) -> Result<(), BuildError> {
    if batch_size <= 1 {
        return Ok(());
    }
    let isl = normal("input tokens", opts.isl_mean, opts.isl_stddev)?;
    let builder = PromptBuilder::for_corpus(tokenizer, corpus);
    for (i, entry) in entries.iter_mut().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, STREAM_BATCH, i as u64));
        for _ in 1..batch_size {
            let n = if opts.isl_stddev > 0.0 {
                sample_at_least_one(&isl, &mut rng).min(MAX_INPUT_TOKENS)
            } else {
                entry.input_tokens
            };
            let text = builder.build(n as usize, &mut rng).text;
            entry.extra_texts.push(text);
        }
        let all: Vec<&str> = std::iter::once(entry.text.as_str())
            .chain(entry.extra_texts.iter().map(String::as_str))
            .collect();
        entry.input_tokens = tokenizer.count(&all.join(" ")) as u64;
    }
    Ok(())
}
