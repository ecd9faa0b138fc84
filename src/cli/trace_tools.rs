//! `aiperf analyze-trace` and `aiperf validate` flags.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// ISL/OSL statistics and theoretical prefix-cache hit rates of a mooncake trace.
#[derive(Debug, Clone, Args)]
pub struct AnalyzeTraceArgs {
    /// The mooncake trace (JSONL) to analyze.
    #[arg(value_name = "INPUT_FILE", required_unless_present = "input_file_flag")]
    pub input_file: Option<PathBuf>,

    /// The trace, as a flag instead of the positional argument.
    #[arg(
        long = "input-file",
        value_name = "INPUT_FILE",
        conflicts_with = "input_file"
    )]
    pub input_file_flag: Option<PathBuf>,

    /// Tokens per KV-cache block (per hash id): the context length of a row is its repeated
    /// blocks times this.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub block_size: u64,

    /// Also write the analysis as JSON to this file (its directory is created).
    #[arg(long)]
    pub output_file: Option<PathBuf>,
}

impl AnalyzeTraceArgs {
    pub fn input(&self) -> &std::path::Path {
        self.input_file
            .as_deref()
            .or(self.input_file_flag.as_deref())
            .expect("clap requires one of them")
    }
}

/// What `aiperf validate` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ValidateTarget {
    /// A mooncake trace JSONL file, as `--custom-dataset-type mooncake_trace` reads it.
    MooncakeTrace,
}

/// Checks every line of a benchmark input file and lists each bad one.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// The artifact format (`mooncake-trace`), then the file unless `--input` names it.
    #[arg(value_name = "TARGET [INPUT]", num_args = 0..=2)]
    pub positional: Vec<String>,

    /// The artifact format, as a flag instead of the first positional argument.
    #[arg(long, value_enum)]
    pub target: Option<ValidateTarget>,

    /// The file to validate.
    #[arg(long)]
    pub input: Option<PathBuf>,

    /// Tokens per hash id, as `aiperf profile --isl-block-size` (each row's hash ids must fit
    /// its input_length in blocks of this size). Not an AIPerf flag.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub isl_block_size: u64,
}

impl ValidateArgs {
    /// The target and the file from the flags and the positional arguments; Err says what is
    /// missing or extra.
    pub fn resolve(&self) -> Result<(ValidateTarget, PathBuf), String> {
        let mut rest = self.positional.iter();
        let target = match self.target {
            Some(t) => t,
            None => {
                let Some(name) = rest.next() else {
                    return Err(
                        "give the target to validate: `aiperf validate mooncake-trace --input FILE`"
                            .to_string(),
                    );
                };
                ValidateTarget::from_str(name, true).map_err(|_| {
                    format!("'{name}' is not a target to validate; give mooncake-trace")
                })?
            }
        };
        let input = match &self.input {
            Some(p) => p.clone(),
            None => match rest.next() {
                Some(p) => PathBuf::from(p),
                None => {
                    return Err(
                        "give the file to validate: `aiperf validate mooncake-trace --input FILE`"
                            .to_string(),
                    );
                }
            },
        };
        if let Some(extra) = rest.next() {
            return Err(format!(
                "unexpected argument '{extra}': give one target and one file"
            ));
        }
        Ok((target, input))
    }
}
