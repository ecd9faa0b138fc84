//! Command-line definitions: AIPerf's flag names, aliases and defaults.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "aiperf", version, about = "Benchmark OpenAI-compatible inference servers")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the built-in OpenAI-compatible mock server.
    MockServer(crate::mock::MockServerArgs),
}
