//! `aiperf analyze` flags: views drawn from a finished run's artifacts (`swim-lane`,
//! `turn-messages`), as AIPerf's `analyze` command.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct AnalyzeArgs {
    #[command(subcommand)]
    pub action: AnalyzeAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum AnalyzeAction {
    /// A swim-lane PNG of a run: one lane per session slot with each request as a bar and
    /// the gaps between a session's turns shaded, and the concurrency over time beneath.
    SwimLane(SwimLaneArgs),
    /// A collapsible HTML view of the messages each turn sent (conversation -> turn ->
    /// message), from a run's raw request export.
    TurnMessages(TurnMessagesArgs),
}

#[derive(Debug, Clone, Args)]
#[command(
    long_about = "Draw a swim-lane PNG for each run directory (its profile_export.jsonl). \
Each session gets a lane; a lane is reused once its session ended (a black tick marks the new \
session). Bars are requests, shaded gaps the delays between a session's turns. The panel beneath \
counts requests in flight and sessions idle between turns. The ramp's end and the benchmark's \
end (from profile_export_aiperf.json) are dashed lines. Writes <run_dir>/swim_lane.png unless \
--out names the file."
)]
pub struct SwimLaneArgs {
    /// Run directories (each holds profile_export.jsonl).
    #[arg(value_name = "RUN_DIRS", required = true, num_args = 1..)]
    pub run_dirs: Vec<PathBuf>,

    /// The PNG to write (one run directory only).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,

    /// Draw this target concurrency as a reference line in the concurrency panel.
    #[arg(short = 'c', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub concurrency: Option<u64>,

    /// The concurrency ramp's length in seconds, for the ramp-done line (instead of the
    /// one read from profile_export_aiperf.json).
    #[arg(long, value_name = "SECONDS", value_parser = non_negative_seconds)]
    pub ramp: Option<f64>,

    /// Also write swim_lane.html (or --out with .html): the chart as SVG and a table of
    /// every session (slot, turns, first start, last end, busy and idle time).
    #[arg(long)]
    pub html: bool,
}

fn non_negative_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds >= 0")),
    }
}

#[derive(Debug, Clone, Args)]
#[command(
    long_about = "Write an HTML page per run directory that lists what each turn sent: \
conversation -> turn -> message, each opened on demand. Reads the raw request export \
(raw_records/*.jsonl or profile_export_raw.jsonl, as AIPerf's --export-level raw writes it; a \
JSONL file may be given directly). Repeated history is stored once. Writes \
<run_dir>/turn_messages.html unless --out names the file."
)]
pub struct TurnMessagesArgs {
    /// Run directories, or raw-record JSONL files.
    #[arg(value_name = "RUN_DIRS", required = true, num_args = 1..)]
    pub run_dirs: Vec<PathBuf>,

    /// The HTML file to write (one run directory only).
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,

    /// Conversations shown (root sessions first, then by first request time).
    #[arg(short = 'n', long, default_value_t = 40)]
    pub limit_conversations: usize,

    /// Turns shown per conversation; the rest are counted.
    #[arg(long, default_value_t = 60)]
    pub max_turns: usize,

    /// Characters kept of each distinct message; a longer one is cut with a note of what
    /// was left out.
    #[arg(long, default_value_t = 8000)]
    pub content_cap: usize,
}
