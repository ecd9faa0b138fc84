//! `--rankings-*`: the synthetic queries and passages of the rankings endpoint types.

use clap::Args;

/// Passages per query and token lengths. The defaults are what AIPerf 0.13 sends when
/// these flags are not given: its dataset defaults (10 passages of 128 tokens, a query of
/// 32 tokens), not the 1 and 550 its help shows, which it passes on only for a flag given.
/// Only with --endpoint-type nim_rankings, cohere_rankings or hf_tei_rankings.
#[derive(Debug, Clone, Default, Args)]
pub struct RankingsArgs {
    /// Mean number of passages per ranking request. Default: 10.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Rankings")]
    pub rankings_passages_mean: Option<u64>,

    /// Standard deviation of the number of passages per request. Default: 0.
    #[arg(long, help_heading = "Rankings")]
    pub rankings_passages_stddev: Option<f64>,

    /// Mean length of each passage in tokens. Default: 128.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Rankings")]
    pub rankings_passages_prompt_token_mean: Option<u64>,

    /// Standard deviation of the passage length in tokens. Default: 0.
    #[arg(long, help_heading = "Rankings")]
    pub rankings_passages_prompt_token_stddev: Option<f64>,

    /// Mean length of the query in tokens. Default: 32.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Rankings")]
    pub rankings_query_prompt_token_mean: Option<u64>,

    /// Standard deviation of the query length in tokens. Default: 0.
    #[arg(long, help_heading = "Rankings")]
    pub rankings_query_prompt_token_stddev: Option<f64>,
}
