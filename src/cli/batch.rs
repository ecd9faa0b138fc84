//! `--prompt-batch-size`: texts per request.

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct BatchArgs {
    /// Synthetic texts per request: an embeddings request embeds N inputs, a chat request
    /// has N text parts, a completions prompt joins N texts. Default: 1.
    #[arg(
        short = 'b',
        long = "prompt-batch-size",
        visible_aliases = ["batch-size-text", "batch-size"],
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Prompt"
    )]
    pub prompt_batch_size: Option<u64>,
}
