//! Prompt shaping flags (AIPerf's system prompt, shared system prompt, user context and
//! prefix prompt pool).

use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Default, Args)]
pub struct PromptArgs {
    /// System prompt sent verbatim with every conversation: the leading `system` message of
    /// chat requests (before any system text of the input file, joined by a blank line);
    /// completions put it first in `prompt`, followed by a space. It counts in the input
    /// sequence length; --isl still sizes only the user text.
    #[arg(long, value_name = "TEXT", help_heading = "Prompt")]
    pub system_prompt: Option<String>,

    /// Like --system-prompt, with the text read from a UTF-8 file once at start.
    #[arg(long, value_name = "PATH", help_heading = "Prompt")]
    pub system_prompt_file: Option<PathBuf>,

    /// One synthetic system prompt of N tokens, generated once and sent as the system
    /// message of every conversation (adds N tokens to each input sequence length).
    #[arg(long, value_name = "N", help_heading = "Prefix Prompt")]
    pub shared_system_prompt_length: Option<u64>,

    /// A synthetic context of N tokens per conversation, sent as a user message after the
    /// system message and before the turns (in every turn's history). Needs
    /// --num-dataset-entries.
    #[arg(long, value_name = "N", help_heading = "Prefix Prompt")]
    pub user_context_prompt_length: Option<u64>,

    /// Number of synthetic prefixes of --prompt-prefix-length tokens; the first turn of each
    /// conversation starts with one of them, picked at random (reproducible with
    /// --random-seed). For prefix-cache benchmarks. 0 = off.
    #[arg(long, visible_aliases = ["prefix-prompt-pool-size", "num-prefix-prompts"], value_name = "P", default_value_t = 0, help_heading = "Prefix Prompt")]
    pub prompt_prefix_pool_size: u64,

    /// Tokens per prefix of --prompt-prefix-pool-size; added to --isl (a first turn has
    /// prefix + ISL tokens).
    #[arg(long, visible_aliases = ["prefix-prompt-length"], value_name = "L", default_value_t = 0, help_heading = "Prefix Prompt")]
    pub prompt_prefix_length: u64,

    /// Input/output length pairs drawn per turn by probability (percentages summing to
    /// 100), in place of --isl/--osl: "256,128:60;512,256:40"; a length may be
    /// "MEAN|STDDEV" (normal, rounded, at least 1); also "[(256,128):60,(512,256):40]" or
    /// {"pairs": [{"isl": 256, "osl": 128, "prob": 60, "isl_stddev": 0, "osl_stddev": 0}]}.
    #[arg(long, visible_aliases = ["sequence-distribution"], value_name = "PAIRS", help_heading = "Input Sequence Length (ISL)")]
    pub seq_dist: Option<String>,

    /// Synthetic texts per request, each of --isl tokens (drawn for each text with
    /// --isl-stddev): completions send `prompt` as a list of them, chat one text part
    /// each in the user message. The input sequence length counts them all.
    #[arg(short = 'b', long, visible_aliases = ["batch-size-text", "batch-size"], value_name = "N", default_value_t = 1, help_heading = "Prompt")]
    pub prompt_batch_size: u64,

    /// Text the synthetic prompts are cut from: `sonnet` (Shakespeare, the default),
    /// `coding` (generated code, shell output, JSON, diffs and tracebacks) or `random`
    /// (runs of consecutive vocabulary ids from a random offset, special tokens left out,
    /// as vLLM's random dataset). Prompts keep their exact --isl; --random-seed makes them
    /// reproducible. Synthetic prompts only (not with --input-file or --public-dataset).
    #[arg(long, value_enum, help_heading = "Prompt")]
    pub prompt_corpus: Option<PromptCorpus>,

    /// Draw each input and output length uniformly from [floor(L x (1 - R)), ceil(L x (1 +
    /// R))] around --isl and --osl (both needed), as vLLM's random dataset does, instead of
    /// a normal spread; 0 <= R < 1. Not with --seq-dist or the stddev flags.
    #[arg(long, value_name = "R", help_heading = "Input Sequence Length (ISL)")]
    pub random_range_ratio: Option<f64>,
}

/// `--prompt-corpus` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PromptCorpus {
    Sonnet,
    Coding,
    Random,
}
