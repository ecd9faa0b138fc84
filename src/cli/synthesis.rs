//! `--synthesis-*`: reshaping a mooncake trace (`--custom-dataset-type mooncake_trace`)
//! before it is sent: longer or shorter shared prefixes and prompts, more prefix trees,
//! scaled outputs, a faster or slower clock, length caps.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct SynthesisArgs {
    /// Divide the trace's timestamps by this (2 replays it twice as fast); 0 leaves them.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "RATIO",
        help_heading = "Synthesis"
    )]
    pub synthesis_speedup_ratio: f64,

    /// Stretch (above 1) or cut (below 1) the prefixes rows share: hash ids seen in more
    /// than one row, up to a row's first unshared block.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "X",
        help_heading = "Synthesis"
    )]
    pub synthesis_prefix_len_multiplier: f64,

    /// Spread the rows over this many independent copies of the prefix tree (each row's
    /// blocks moved to a randomly chosen copy, seeded by --random-seed).
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        help_heading = "Synthesis"
    )]
    pub synthesis_prefix_root_multiplier: u32,

    /// Scale each row's own (unshared) part; its blocks get fresh hash ids.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "X",
        help_heading = "Synthesis"
    )]
    pub synthesis_prompt_len_multiplier: f64,

    /// Scale each row's output_length (rounded half to even, at least 1).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "X",
        help_heading = "Synthesis"
    )]
    pub synthesis_output_len_multiplier: f64,

    /// Drop rows whose input_length is above this before anything else.
    #[arg(long, value_name = "TOKENS", help_heading = "Synthesis")]
    pub synthesis_max_isl: Option<u64>,

    /// Cap output_length at this after the other changes.
    #[arg(long, value_name = "TOKENS", help_heading = "Synthesis")]
    pub synthesis_max_osl: Option<u64>,
}
