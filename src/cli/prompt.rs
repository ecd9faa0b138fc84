//! Prompt shaping flags (AIPerf's system prompt, shared system prompt, user context and
//! prefix prompt pool).

use clap::Args;
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
}
