//! `aiperf config` flags: `init` (a commented template config), `validate` (a config file
//! checked key by key) and `expand` (a config file's sweep, point by point), as AIPerf's
//! `config` command.

use clap::{Args, Subcommand, ValueEnum};
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
    /// List the runs a config file's sweep makes, as `aiperf profile --config FILE` would
    /// run them, without running any: each point's index, directory name, label and swept
    /// values (`--full`: its whole resolved configuration).
    Expand(ExpandArgs),
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

/// How `config expand` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpandFormat {
    /// One line per point (`--full`: its configuration beneath, as YAML).
    Text,
    Yaml,
    Json,
}

#[derive(Debug, Clone, Args)]
#[command(
    long_about = "List the runs a config file's sweep makes, without running any. A \
sweep is a `sweep:` block (`type: grid` or `zip`, `parameters:` mapping dotted paths such as \
phases.profiling.concurrency or datasets.main.prompts.isl to lists), or a list of numbers at a \
phase's key (`concurrency: [1, 4, 16]`). Each point is shown with the directory `aiperf profile \
--config FILE` gives it, its label and its swept values; --full adds its whole configuration as \
the run would echo it (input_config)."
)]
pub struct ExpandArgs {
    /// The YAML config file.
    #[arg(value_name = "FILE")]
    pub config_file: PathBuf,

    /// Also print each point's whole resolved configuration.
    #[arg(short = 'F', long)]
    pub full: bool,

    /// Only the point at this index (from 0); implies --full.
    #[arg(short = 'i', long)]
    pub index: Option<usize>,

    /// text (one line per point), yaml or json.
    #[arg(short = 'f', long = "format", value_enum, default_value_t = ExpandFormat::Text)]
    pub format: ExpandFormat,
}
