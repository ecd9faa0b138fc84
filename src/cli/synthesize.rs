//! `aiperf synthesize` flags: a synthetic multi-turn workload written as a mooncake trace,
//! as AIPerf's `synthesize` command.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// The workloads `synthesize` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthTarget {
    /// Agentic coding sessions: a long shared prefix (tools and system prompt, a repo's
    /// instructions, the session's files), then turns that add new tokens to a growing
    /// context until it is reset or reaches the context window.
    AgenticCode,
}

#[derive(Debug, Clone, Args)]
#[command(
    long_about = "Synthesize a multi-turn workload as a mooncake trace. For agentic-code, \
each session starts from a layered prefix (L1: tools and system prompt shared by every session; \
L1.5: a repo's context shared within a Zipf-chosen group; L2: the session's own files), then \
each turn adds lognormal new tokens and an output, after an agentic or human delay, until the \
context reaches max_prompt_tokens or a context-scaled reset ends the session. Writes \
<output>/<config>_<N>s_seed<S>_<UTC time>/ with dataset.jsonl (the trace, hash ids per KV \
block, for `aiperf profile --custom-dataset-type mooncake_trace`), manifest.json (seed and the \
whole configuration; a later --config may load it) and quality.json (each distribution \
observed against its target), and checks the trace as `aiperf validate mooncake-trace` does."
)]
pub struct SynthesizeArgs {
    /// The workload.
    #[arg(value_enum, value_name = "TARGET")]
    pub target: SynthTarget,

    /// Sessions to generate.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub num_sessions: u64,

    /// The directory the run directory is made in.
    #[arg(long, default_value = ".")]
    pub output: PathBuf,

    /// The generator's settings: a JSON file (or a manifest.json of an earlier run), or a
    /// bundled name (`default`). Without it, the generator's defaults.
    #[arg(long)]
    pub config: Option<String>,

    /// Seed of every random draw: the same seed and settings give the same trace.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Largest input length (sets max_prompt_tokens, the context window).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_isl: Option<u64>,

    /// Largest output length (sets generation_length.max).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_osl: Option<u64>,
}
