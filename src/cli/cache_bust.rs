//! `--cache-bust`: a marker per conversation that keeps a server's prefix cache from sharing
//! work between conversations, or between warmup and profiling.

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Default, Args)]
pub struct CacheBustArgs {
    /// Put a marker in each conversation so the server's prefix cache cannot reuse work:
    /// `system-prefix` / `system-suffix` put `[rid:<hex12>]` (a SHA-256 digest of the run,
    /// the conversation and how often it was used before) at the start / end of the system
    /// message (the first user turn when there is none), `first-turn-prefix` /
    /// `first-turn-suffix` at the start / end of the first user turn; the same marker in
    /// warmup and profiling. `warmup-isolation-system` / `warmup-isolation-first-turn` put
    /// `[warmup]` there in warmup requests only. Synthetic prompts (or the shared system
    /// prompt) are shortened by the marker's tokens. chat, responses and messages only.
    #[arg(long, value_enum, value_name = "TARGET", help_heading = "Prompt")]
    pub cache_bust: Option<CacheBustTarget>,
}

/// `--cache-bust` values (`_` spellings are accepted too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CacheBustTarget {
    /// No marker (the default).
    None,
    SystemPrefix,
    SystemSuffix,
    FirstTurnPrefix,
    FirstTurnSuffix,
    WarmupIsolationSystem,
    WarmupIsolationFirstTurn,
}
