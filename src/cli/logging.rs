//! AIPerf's log verbosity flags (`-v` stays with the output flags in `mod.rs`).

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Default, Args)]
pub struct LoggingArgs {
    /// Most log detail (the same as --log-level trace): adds one line per finished request.
    /// `-vv` is accepted for it. Like -v, shows a progress bar instead of the dashboard.
    #[arg(long, help_heading = "Output")]
    pub extra_verbose: bool,

    /// Log level; -v and -vv raise it to debug and trace. NOTICE and SUCCESS log as INFO,
    /// CRITICAL as ERROR. Case-insensitive.
    #[arg(long, value_enum, default_value_t = LogLevel::Info, help_heading = "Output")]
    pub log_level: LogLevel,
}

/// `--log-level` values (AIPerf's names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Notice,
    Warning,
    Success,
    Error,
    Critical,
}
