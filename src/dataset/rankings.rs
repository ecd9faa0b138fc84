//! Synthetic reranking requests (`--rankings-*`, for the rankings endpoint types): per
//! entry one query and a number of passages, each a prompt of a sampled token length, as
//! AIPerf's rankings composer makes them. The entry's text is the query and its further
//! texts the passages; its input length counts them all.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand_distr::Normal;

use super::prompt::PromptBuilder;
use super::{
    BuildError, Conversation, Dataset, DatasetSampling, Entry, MAX_INPUT_TOKENS, derive_seed,
    normal, sample_at_least_one,
};
use crate::tokenizer::Tokenizer;

/// `--rankings-*`: passages per query and token lengths (normal, rounded, at least 1).
#[derive(Debug, Clone, PartialEq)]
pub struct RankingsOptions {
    pub passages_mean: f64,
    pub passages_stddev: f64,
    pub passage_tokens_mean: f64,
    pub passage_tokens_stddev: f64,
    pub query_tokens_mean: f64,
    pub query_tokens_stddev: f64,
}

/// Most passages one query gets, whatever the distribution draws.
pub const MAX_PASSAGES: u64 = 100_000;

const STREAM_RANKINGS: u64 = 5;

/// `num_entries` single-turn entries, deterministic for a seed.
pub fn build(
    opts: &RankingsOptions,
    num_entries: usize,
    seed: u64,
    tokenizer: &Tokenizer,
) -> Result<Dataset, BuildError> {
    let passages = normal(
        "passages per query",
        opts.passages_mean,
        opts.passages_stddev,
    )?;
    let passage_tokens = normal(
        "passage tokens",
        opts.passage_tokens_mean,
        opts.passage_tokens_stddev,
    )?;
    let query_tokens = normal(
        "query tokens",
        opts.query_tokens_mean,
        opts.query_tokens_stddev,
    )?;
    let builder = PromptBuilder::new(tokenizer);
    let conversations = (0..num_entries as u64)
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, STREAM_RANKINGS, i));
            let n = sample_at_least_one(&passages, &mut rng).min(MAX_PASSAGES);
            let mut prompt = |dist: &Normal<f64>| {
                let tokens = sample_at_least_one(dist, &mut rng).min(MAX_INPUT_TOKENS);
                builder.build(tokens as usize, &mut rng)
            };
            let query = prompt(&query_tokens);
            let passages: Vec<_> = (0..n).map(|_| prompt(&passage_tokens)).collect();
            let input_tokens =
                (query.tokens + passages.iter().map(|p| p.tokens).sum::<usize>()) as u64;
            let mut entry = Entry::synthetic(query.text, input_tokens, Vec::new(), None);
            entry.extra_texts = passages.into_iter().map(|p| p.text).collect();
            Conversation {
                session_id: None,
                system: None,
                context: None,
                turns: vec![entry],
            }
        })
        .collect();
    Ok(Dataset {
        conversations,
        sampling: DatasetSampling::Sequential,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_passages_have_the_asked_lengths() {
        let tok = Tokenizer::builtin().unwrap();
        let opts = RankingsOptions {
            passages_mean: 3.0,
            passages_stddev: 0.0,
            passage_tokens_mean: 12.0,
            passage_tokens_stddev: 0.0,
            query_tokens_mean: 5.0,
            query_tokens_stddev: 0.0,
        };
        let d = build(&opts, 4, 7, &tok).unwrap();
        assert_eq!(d.conversations.len(), 4);
        for c in &d.conversations {
            let e = &c.turns[0];
            assert_eq!(tok.count(&e.text), 5);
            assert_eq!(e.extra_texts.len(), 3);
            assert!(e.extra_texts.iter().all(|p| tok.count(p) == 12));
            assert_eq!(e.input_tokens, 5 + 3 * 12);
        }
        let again = build(&opts, 4, 7, &tok).unwrap();
        assert_eq!(
            again.conversations[2].turns[0].text,
            d.conversations[2].turns[0].text
        );
    }
}
