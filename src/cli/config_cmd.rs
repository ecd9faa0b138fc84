//! `aiperf config` flags: `init` (a commented template config) and `validate` (a config
//! file checked key by key), as AIPerf's `config` command.

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ConfigAction {
    /// Print a commented template config (`--list` lists them), or write it with --output.
    /// Every template loads with `aiperf profile --config FILE`.
    Init(InitArgs),
    /// Check a config file as `aiperf profile --config FILE` reads it: every key that
    /// cannot be read and every bad value, each with its path in the file. Exit 0 when the
    /// file is good, 1 when it has errors, 2 when it cannot be read.
    Validate(ValidateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct InitArgs {
    /// The template (see --list).
    #[arg(short = 't', long, default_value = "minimal")]
    pub template: String,

    /// List the templates and exit.
    #[arg(short = 'l', long = "list")]
    pub list: bool,

    /// Only templates whose name, title or description contains this word (with --list).
    #[arg(short = 's', long)]
    pub search: Option<String>,

    /// The model name written into the template.
    #[arg(short = 'm', long)]
    pub model: Option<String>,

    /// The server URL written into the template.
    #[arg(short = 'u', long)]
    pub url: Option<String>,

    /// Write the template to this file instead of stdout (an existing file is not
    /// overwritten).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// The YAML config file.
    #[arg(value_name = "FILE")]
    pub config_file: PathBuf,
}
