//! Command-line definitions: AIPerf's flag names, aliases and defaults.
//!
//! Parsing only; every cross-flag check lives in `config`.

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

pub use crate::endpoint::EndpointType;

pub mod accuracy;
pub mod analyze;
pub mod cache_bust;
pub mod chat;
pub mod collectors;
pub mod compare;
pub mod config_cmd;
mod config_file;
pub mod control_hooks;
pub mod dataset;
pub mod flags;
pub mod logging;
pub mod media;
pub mod multirun;
pub mod otel;
pub mod output;
pub mod plot;
pub mod prompt;
pub mod public_dataset;
pub mod publish;
pub mod rankings;
pub mod service;
pub mod shard;
pub mod speed_bench;
mod spellings;
pub mod synthesis;
pub mod synthesize;
pub mod trace_tools;

pub use logging::LogLevel;
pub use spellings::find_arg;
pub mod load;

#[derive(Debug, Parser)]
#[command(
    name = "aiperf",
    version,
    about = "Benchmark OpenAI-compatible inference servers (LLM and vision-language models)",
    long_about = "Benchmark OpenAI-compatible inference servers (vLLM, SGLang, TensorRT-LLM, \
Dynamo, llama.cpp, NIM). `aiperf profile` takes NVIDIA AIPerf's flags and writes AIPerf's \
artifacts; `aiperf mock-server` runs a predictable OpenAI-compatible server for trying it out."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The command line's definition, `profile`'s flags with their config paths in `--help`.
/// The `aiperf` command, built once per process and cloned: building clap's ~300
/// arguments took ~7.5 M instructions, and a run parses several times (the config-file
/// pass, the sweep lists, each point).
pub fn command() -> clap::Command {
    static BUILT: std::sync::LazyLock<clap::Command> =
        std::sync::LazyLock::new(|| built(Cli::command()));
    BUILT.clone()
}

/// The command with `--model` optional, for the pass that looks for a config file (which
/// may give the model). A built command's arguments cannot be changed, so it is its own.
fn command_model_optional() -> clap::Command {
    static BUILT: std::sync::LazyLock<clap::Command> = std::sync::LazyLock::new(|| {
        built(Cli::command().mut_subcommand("profile", |p| {
            p.mut_arg("model_names", |a| a.required(false))
        }))
    });
    BUILT.clone()
}

fn built(cmd: clap::Command) -> clap::Command {
    let mut cmd = cmd.mut_subcommand("profile", flags::annotate);
    cmd.build();
    cmd
}

impl Cli {
    /// Parses like `try_parse_from`, and records which `profile` flags were typed: clap's
    /// defaults make a typed default and an untyped flag look the same.
    pub fn parse_with_sources<I, T>(argv: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = command();
        let (argv, overridden) =
            with_config_file(&mut cmd, argv.into_iter().map(Into::into).collect())?;
        let argv: Vec<std::ffi::OsString> = spellings::normalize(&cmd, argv);
        let sub = argv
            .iter()
            .filter_map(|a| a.to_str())
            .find(|a| cmd.find_subcommand(a).is_some())
            .map(str::to_string);
        let matches = cmd
            .try_get_matches_from_mut(argv)
            .map_err(|e| not_supported(&mut cmd, sub.as_deref(), e))?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        if let (Command::Profile(args), Some(("profile", m))) =
            (&mut cli.command, matches.subcommand())
        {
            args.typed_values = m
                .ids()
                .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
                .map(|id| {
                    let raw = m.get_raw(id.as_str()).into_iter().flatten();
                    let raw = raw.map(|v| v.to_string_lossy().into_owned()).collect();
                    (id.to_string(), raw)
                })
                .collect();
            args.config_overridden = overridden;
        }
        Ok(cli)
    }
}

/// Every problem of an AIPerf YAML config file, each with its path in the file: keys this
/// build cannot read and values their flags refuse. `Err` when the file cannot be read or is
/// not YAML. Empty: the file's settings parse as `profile` flags.
pub fn config_file_problems(path: &std::path::Path) -> Result<Vec<String>, String> {
    let cmd = command_model_optional();
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    let read = config_file::read(path, profile)?;
    let mut problems = read.errors;
    problems.extend(config_file::value_errors(&read.settings, &cmd));
    Ok(problems)
}

/// Where each flag the file sets sits in it: (`--long`, `benchmark.path.key`).
pub fn config_file_places(path: &std::path::Path) -> Vec<(String, String)> {
    let cmd = command_model_optional();
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    let Ok(read) = config_file::read(path, profile) else {
        return Vec::new();
    };
    read.settings
        .into_iter()
        .map(|s| {
            let long = s.arg.split('=').next().unwrap_or("").to_string();
            (long, s.at)
        })
        .collect()
}

/// The file's `sweep.type` (`grid` when not given), as `profile --config FILE` takes it.
pub fn config_file_sweep_type(path: &std::path::Path) -> String {
    let cmd = command_model_optional();
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    config_file::read(path, profile)
        .ok()
        .and_then(|read| {
            read.settings
                .iter()
                .find(|s| s.flag.id == "sweep_type")
                .and_then(|s| s.arg.split_once('=').map(|(_, v)| v.to_string()))
        })
        .unwrap_or_else(|| "grid".into())
}

/// True when the file names the model (`benchmark.model` or `models`).
pub fn config_file_names_model(path: &std::path::Path) -> bool {
    let cmd = command_model_optional();
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    config_file::read(path, profile)
        .is_ok_and(|r| r.settings.iter().any(|s| s.flag.id == "model_names"))
}

/// `profile -f FILE` with sweeps in the file: `argv` with each of the file's lists as its
/// flag's comma list right after `profile` (`--concurrency=1,4,16`), where the command
/// line's sweep finds it; and a warning for each list a typed flag overrides. `first` is
/// `argv` with its own lists cut to their first value, for the parse that finds the file.
/// Any problem with the file is left to the parse that reports it.
pub fn with_config_sweeps(argv: Vec<String>, first: &[String]) -> (Vec<String>, Vec<String>) {
    let Some(at) = argv.iter().position(|a| a == "profile") else {
        return (argv, Vec::new());
    };
    if !may_name_file(argv.iter().map(String::as_str)) {
        return (argv, Vec::new());
    }
    let cmd = command_model_optional();
    let typed = spellings::normalize(&cmd, first.iter().map(Into::into).collect());
    let Ok(m) = cmd.clone().try_get_matches_from(typed) else {
        return (argv, Vec::new());
    };
    let Some(("profile", typed)) = m.subcommand() else {
        return (argv, Vec::new());
    };
    let Some(path) = typed.get_one::<PathBuf>("config") else {
        return (argv, Vec::new());
    };
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    let Ok(read) = config_file::read(path, profile) else {
        return (argv, Vec::new());
    };
    let (mut lists, mut warnings) = (Vec::new(), Vec::new());
    for s in read.lists() {
        if typed.value_source(s.flag.id) == Some(ValueSource::CommandLine) {
            let long = s.arg.split('=').next().unwrap_or("");
            warnings.push(format!(
                "--config {}: the command line's {long} overrides the file's sweep over it ({})",
                path.display(),
                s.at
            ));
        } else {
            lists.push(s.arg.clone());
        }
    }
    let mut out = argv[..=at].to_vec();
    out.extend(lists);
    out.extend(argv[at + 1..].iter().cloned());
    (out, warnings)
}

/// True when an argument may name a config file (`--config`, `-f`, or `-f` among
/// combined short flags): a parse costs ~20 M instructions (clap's lookups over ~300
/// arguments), so it is skipped otherwise.
fn may_name_file<'a>(mut argv: impl Iterator<Item = &'a str>) -> bool {
    argv.any(|a| {
        a == "--config"
            || a.starts_with("--config=")
            || (a.starts_with('-') && !a.starts_with("--") && a.contains('f'))
    })
}

/// `profile -f FILE`: the file's settings as arguments right after `profile`, without those
/// whose flag was typed (the command line wins); and the settings left out, for a warning.
fn with_config_file(
    cmd: &mut clap::Command,
    argv: Vec<std::ffi::OsString>,
) -> Result<(Vec<std::ffi::OsString>, Vec<String>), clap::Error> {
    // A first pass finds the file and what was typed, with --model left to the file. It
    // reads the arguments as the final pass will (respelled): a pass that stopped at its
    // first error would miss the flags after it. On an error the final pass reports it.
    if !may_name_file(argv.iter().filter_map(|a| a.to_str())) {
        return Ok((argv, Vec::new()));
    }
    let typed = spellings::normalize(cmd, argv.clone());
    let Ok(first) = command_model_optional().try_get_matches_from(typed) else {
        return Ok((argv, Vec::new()));
    };
    let Some(("profile", typed)) = first.subcommand() else {
        return Ok((argv, Vec::new()));
    };
    let Some(path) = typed.get_one::<PathBuf>("config") else {
        return Ok((argv, Vec::new()));
    };
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    let file_args = match config_file::arguments(path, profile) {
        Ok(args) => args,
        Err(e) => return Err(cmd.error(clap::error::ErrorKind::InvalidValue, e)),
    };
    let profile = cmd
        .find_subcommand("profile")
        .expect("profile is a subcommand");
    let on_command_line = |arg: &String| {
        let long = arg.trim_start_matches('-').split('=').next().unwrap_or("");
        profile
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .is_some_and(|a| {
                typed.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine)
            })
    };
    let (overridden, file_args): (Vec<String>, Vec<String>) =
        file_args.into_iter().partition(on_command_line);
    let at = argv
        .iter()
        .position(|a| a == "profile")
        .expect("the profile subcommand was parsed");
    let mut out = argv[..=at].to_vec();
    out.extend(file_args.into_iter().map(Into::into));
    out.extend(argv[at + 1..].iter().cloned());
    let overridden = match overridden.is_empty() {
        true => Vec::new(),
        false => vec![format!(
            "--config {}: the command line overrides the file's {}",
            path.display(),
            overridden.join(", ")
        )],
    };
    Ok((out, overridden))
}

/// An unknown `--flag` is most likely an AIPerf flag this build lacks: say so, instead of
/// clap's "unexpected argument". A negative number read as a flag (`--concurrency -1`) keeps
/// clap's error, which `main` words itself.
fn not_supported(cmd: &mut clap::Command, sub: Option<&str>, e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = arg.split('=').next().unwrap_or(arg).to_string();
    if !flag.starts_with('-') || flag.parse::<f64>().is_ok() {
        return e;
    }
    let help = sub.map_or("aiperf --help".to_string(), |s| {
        format!("aiperf {s} --help")
    });
    let msg = format!(
        "{flag} is not supported by this build of aiperf; `{help}` lists the flags it takes"
    );
    match sub.and_then(|s| cmd.find_subcommand_mut(s)) {
        Some(sub) => sub.error(ErrorKind::UnknownArgument, msg),
        None => cmd.error(ErrorKind::UnknownArgument, msg),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Profile an inference server (AIPerf-compatible flags).
    Profile(Box<ProfileArgs>),
    /// Run the built-in OpenAI-compatible mock server.
    MockServer(crate::mock::MockServerArgs),
    /// Merge the artifacts of sharded runs (--shard-index/--shard-count) into one run's,
    /// every metric recomputed from the union of the per-request records.
    Merge(shard::MergeArgs),
    /// Kubernetes manifests that run a sharded benchmark as an Indexed Job.
    Kube(shard::KubeArgs),
    /// Draw PNG and SVG charts of finished runs.
    Plot(plot::PlotArgs),
    /// Compare two runs: each metric's change with a confidence interval and a verdict.
    Compare(compare::CompareArgs),
    /// Analyze a mooncake trace: ISL/OSL distributions and theoretical prefix-cache hit
    /// rates.
    AnalyzeTrace(trace_tools::AnalyzeTraceArgs),
    /// Validate a benchmark input file (`mooncake-trace`): every bad line with its
    /// file:line.
    Validate(trace_tools::ValidateArgs),
    /// Chat with a server one message at a time, printing each reply's TTFT, tokens/s,
    /// output tokens and latency (a sanity check before `profile`).
    Chat(chat::ChatArgs),
    /// Config files: a commented template (`init`), a file checked key by key (`validate`).
    Config(config_cmd::ConfigArgs),
    /// A SPEED-Bench matrix (model x category: acceptance length, acceptance rate or
    /// throughput) from the run directories of one `profile` per category.
    SpeedBenchReport(speed_bench::SpeedBenchArgs),
    /// Views of a finished run: a swim-lane chart of its sessions (`swim-lane`), the
    /// messages each turn sent (`turn-messages`).
    Analyze(analyze::AnalyzeArgs),
    /// Synthesize a workload (`agentic-code`) as a mooncake trace with its manifest and
    /// quality report.
    Synthesize(synthesize::SynthesizeArgs),
}

/// `--endpoint-type` takes the endpoint types' own list: their names and help come from
/// the one table in `endpoint`.
impl ValueEnum for EndpointType {
    fn value_variants<'a>() -> &'a [Self] {
        EndpointType::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = self.help().split_whitespace().collect::<Vec<_>>().join(" ");
        Some(clap::builder::PossibleValue::new(self.as_str()).help(help))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UiType {
    /// A full-screen live dashboard (the default in a terminal).
    Dashboard,
    /// A progress bar.
    Simple,
    /// Log lines only.
    None,
}

#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    // ----- Endpoint -----
    /// Model name(s) to send (repeat or comma-separate for several; see
    /// --model-selection-strategy).
    #[arg(short = 'm', long = "model-names", visible_aliases = ["model"], value_delimiter = ',', num_args = 1.., required = true, help_heading = "Endpoint")]
    pub model_names: Vec<String>,

    /// API shape of the endpoint.
    #[arg(long, value_enum, default_value_t = EndpointType::Chat, help_heading = "Endpoint")]
    pub endpoint_type: EndpointType,

    /// Path to request instead of the endpoint type's default (e.g. `/v1/chat/completions`).
    #[arg(long = "custom-endpoint", visible_aliases = ["endpoint"], help_heading = "Endpoint")]
    pub custom_endpoint: Option<String>,

    /// Server URL; `http://` is added when no scheme is given. Repeat it (or give a comma
    /// list) to spread requests over several servers (see --url-strategy).
    #[arg(
        short = 'u',
        long,
        default_value = "localhost:8000",
        value_delimiter = ',',
        help_heading = "Endpoint"
    )]
    pub url: Vec<String>,

    /// Ask for streamed responses (needed for TTFT, ITL and inter-chunk latency); ignored,
    /// with a warning, by endpoint types that answer in one piece.
    #[arg(long, help_heading = "Endpoint")]
    pub streaming: bool,

    /// Seconds before a request is abandoned (includes connecting).
    #[arg(long, default_value_t = 21600.0, help_heading = "Endpoint")]
    pub request_timeout_seconds: f64,

    /// Bytes one response may have; a longer one fails (ResponseTooLargeError) and the rest
    /// of it is not read. Not an AIPerf flag.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Endpoint")]
    pub max_response_bytes: u64,

    /// API key, sent as `Authorization: Bearer <key>`.
    #[arg(long, help_heading = "Endpoint")]
    pub api_key: Option<String>,

    /// Use the server's `usage` counts for ISL/OSL instead of the client tokenizer.
    #[arg(long, help_heading = "Endpoint")]
    pub use_server_token_count: bool,

    /// Send `max_tokens` instead of `max_completion_tokens`.
    #[arg(long, help_heading = "Endpoint")]
    pub use_legacy_max_tokens: bool,

    /// Start the built-in mock server on a free loopback port and profile it (ignores --url).
    #[arg(long, help_heading = "Endpoint")]
    pub mock_server: bool,

    // ----- Input -----
    /// Extra request body fields: `key:value` pairs or a JSON object (repeatable).
    #[arg(long, num_args = 1.., help_heading = "Input")]
    pub extra_inputs: Vec<String>,

    /// Extra HTTP headers: `Name:Value` or a JSON object (repeatable).
    #[arg(short = 'H', long = "header", num_args = 1.., help_heading = "Input")]
    pub headers: Vec<String>,

    /// Seed for everything random (prompts, images, sampling); same seed, same dataset bytes.
    #[arg(long, help_heading = "Input")]
    pub random_seed: Option<u64>,

    /// Number of unique synthetic entries, reused across requests.
    #[arg(long, visible_aliases = ["num-prompts"], default_value_t = 100, help_heading = "Input")]
    pub num_dataset_entries: usize,

    // ----- Tokenizer -----
    /// Tokenizer: Hugging Face id, local tokenizer.json (or its directory), or `builtin`.
    /// Defaults to the model name.
    #[arg(long, help_heading = "Tokenizer")]
    pub tokenizer: Option<String>,

    /// Hugging Face revision of the tokenizer.
    #[arg(long, default_value = "main", help_heading = "Tokenizer")]
    pub tokenizer_revision: String,

    /// Accepted for AIPerf command lines. This build never runs Python code from a
    /// tokenizer repository: it loads only its tokenizer.json, so a tokenizer that exists
    /// only as custom code cannot be used (give another --tokenizer, or `builtin`).
    #[arg(long, help_heading = "Tokenizer")]
    pub tokenizer_trust_remote_code: bool,

    /// Count a chat request's input tokens (ISL) through the tokenizer's chat template
    /// (role headers, end-of-turn markers and the assistant prompt included), as the
    /// server's prompt has them, and shorten synthetic prompts by that wrapping so the
    /// ISL still matches the length asked for. Needs a tokenizer directory with a chat
    /// template (tokenizer_config.json, chat_template.jinja or chat_template.json).
    #[arg(long, help_heading = "Tokenizer")]
    pub apply_chat_template: bool,

    // ----- Prompt -----
    /// Mean number of tokens in the synthetic prompt text. A list (128,1024) sweeps it.
    #[arg(long = "synthetic-input-tokens-mean", visible_aliases = ["prompt-input-tokens-mean", "isl"], default_value_t = 550, value_parser = whole_number, help_heading = "Prompt")]
    pub isl_mean: u64,

    /// Standard deviation of the prompt length in tokens.
    #[arg(long = "synthetic-input-tokens-stddev", visible_aliases = ["prompt-input-tokens-stddev", "isl-stddev"], default_value_t = 0.0, help_heading = "Prompt")]
    pub isl_stddev: f64,

    /// Mean number of output tokens to ask for (sent as max_completion_tokens); unset lets
    /// the server decide. A list (64,256) sweeps it.
    #[arg(long = "output-tokens-mean", visible_aliases = ["prompt-output-tokens-mean", "osl"], value_parser = whole_number, help_heading = "Prompt")]
    pub osl_mean: Option<u64>,

    /// Standard deviation of the output length in tokens.
    #[arg(long = "output-tokens-stddev", visible_aliases = ["prompt-output-tokens-stddev", "osl-stddev"], help_heading = "Prompt")]
    pub osl_stddev: Option<f64>,

    // ----- Image -----
    /// Mean image width in pixels (0 disables images). A list (256,512,1024) sweeps it.
    #[arg(long, default_value_t = 0.0, help_heading = "Image")]
    pub image_width_mean: f64,
    /// Standard deviation of the image width.
    #[arg(long, help_heading = "Image")]
    pub image_width_stddev: Option<f64>,
    /// Mean image height in pixels (0 disables images). A list sweeps it.
    #[arg(long, default_value_t = 0.0, help_heading = "Image")]
    pub image_height_mean: f64,
    /// Standard deviation of the image height.
    #[arg(long, help_heading = "Image")]
    pub image_height_stddev: Option<f64>,
    /// Images per request. A list (1,2,4) sweeps it.
    #[arg(long, visible_aliases = ["batch-size-image"], default_value_t = 1, help_heading = "Image")]
    pub image_batch_size: usize,
    /// Image encoding: `jpeg` (the default; quality 85 with full-resolution colour, as AIPerf
    /// sends), `png`, or `random` (picked per image).
    #[arg(long, value_enum, default_value_t = ImageFormat::Jpeg, help_heading = "Image")]
    pub image_format: ImageFormat,

    // ----- Load -----
    /// Requests kept in flight (closed loop). Default 1. A list (1,4,16,64) runs one profile
    /// per value: a sweep (see Multi-Run).
    #[arg(long, value_parser = whole_number, help_heading = "Load Generator")]
    pub concurrency: Option<u64>,

    /// Requests to send in the profiling phase. Default max(10, 2 x concurrency). A list
    /// sweeps it.
    #[arg(long, visible_aliases = ["num-requests"], value_parser = whole_number, help_heading = "Load Generator")]
    pub request_count: Option<u64>,

    /// Requests to send before profiling; their results are kept out of the metrics.
    #[arg(long, visible_aliases = ["num-warmup-requests"], default_value_t = 0, value_parser = whole_number, help_heading = "Warmup")]
    pub warmup_request_count: u64,

    // ----- Goodput -----
    /// Service-level objectives, e.g. "request_latency:250 inter_token_latency:10"
    /// (values in display units: ms, tokens/sec).
    #[arg(long, help_heading = "Goodput")]
    pub goodput: Option<String>,

    // ----- Output -----
    /// Where artifacts go. When not given, `artifacts/<model>-<endpoint>-concurrency<N>/`.
    #[arg(long = "output-artifact-dir", visible_aliases = ["artifact-dir"], help_heading = "Output")]
    pub artifact_dir: Option<PathBuf>,

    #[command(flatten)]
    pub output: output::OutputArgs,

    #[command(flatten)]
    pub otel: otel::OtelArgs,

    /// Progress display: `dashboard` (full-screen live view; default in a terminal, keys 1-6,
    /// Esc, L, q), `simple` (progress bar; default with -v/-vv), `none` (log lines only;
    /// default when stderr is not a terminal).
    #[arg(long = "ui-type", visible_aliases = ["ui"], value_enum, help_heading = "Output")]
    pub ui_type: Option<UiType>,

    /// More log detail.
    #[arg(short = 'v', long, help_heading = "Output")]
    pub verbose: bool,

    // ----- Input file and image source -----
    /// Where synthetic images come from: `noise` (random pixels), `assets` (bundled photos,
    /// resized), or a directory of image files (png, jpeg, webp, gif, bmp).
    #[arg(long, default_value = "noise", help_heading = "Image")]
    pub image_source: String,

    /// How images of `assets` or a directory are picked (`noise` accepts only the default).
    #[arg(long, value_enum, default_value_t = ImageSampling::RandomWithReplacement, help_heading = "Image")]
    pub image_source_sampling: ImageSampling,

    /// AIPerf's YAML config file (schema 2.0): model, endpoint, synthetic or file dataset,
    /// warmup and profiling phases, artifacts dir and random seed. Flags typed on the command
    /// line win over the file; any other key is refused with its path.
    #[arg(short = 'f', long, value_name = "FILE", help_heading = "Input")]
    pub config: Option<PathBuf>,

    /// A JSONL file (or, for random_pool, a directory) of requests; see --custom-dataset-type.
    #[arg(long, help_heading = "Input")]
    pub input_file: Option<PathBuf>,

    /// Format of --input-file.
    #[arg(long, value_enum, help_heading = "Input")]
    pub custom_dataset_type: Option<CustomDatasetType>,

    /// Tokens per hash_ids block in traces (mooncake default 512).
    #[arg(long = "prompt-input-tokens-block-size", visible_aliases = ["synthetic-input-tokens-block-size", "isl-block-size"], help_heading = "Prompt")]
    pub isl_block_size: Option<usize>,

    #[command(flatten)]
    pub dataset: dataset::DatasetArgs,

    /// `--public-dataset`, `--hf-subset`, `--dataset-filter`.
    #[command(flatten)]
    pub public: public_dataset::PublicDatasetArgs,

    // ----- Failures -----
    /// Before sending, poll the server (`GET /v1/models`) until it answers 2xx, for up to this
    /// many seconds; exit 1 if it never does. 0 skips the check.
    #[arg(long, default_value_t = 0.0, help_heading = "Failures")]
    pub wait_for_model_timeout: f64,

    /// Seconds between readiness polls of --wait-for-model-timeout.
    #[arg(long, default_value_t = 5.0, help_heading = "Failures")]
    pub wait_for_model_interval: f64,

    /// What --wait-for-model-timeout waits for: `models` (GET /v1/models lists the model),
    /// `inference` (a one-token request succeeds) or `both` (models, then inference).
    #[arg(long, value_enum, default_value_t = WaitForModelMode::Inference, help_heading = "Failures")]
    pub wait_for_model_mode: WaitForModelMode,

    /// Stop early and exit 1 when the share of failed requests exceeds this (0-1); checked
    /// once at least max(concurrency, 10) requests have finished. Without it a run exits 0
    /// as long as one request succeeded; the console summary says how many failed.
    #[arg(long, help_heading = "Failures")]
    pub failed_request_threshold: Option<f64>,

    /// Seconds in-flight requests get to finish after Ctrl-C or an early stop; then they are
    /// cancelled (recorded as 499).
    #[arg(long, default_value_t = 30.0, help_heading = "Failures")]
    pub interrupt_grace_period: f64,

    // ----- Load modes -----
    /// Open loop: requests per second, sent on schedule whether or not replies came back
    /// (fractions allowed). With --concurrency as well, the rate is a ceiling on arrivals
    /// and --concurrency a cap on requests in flight. A list (5,10,20) sweeps it.
    #[arg(long, help_heading = "Load Generator")]
    pub request_rate: Option<f64>,

    /// How gaps between arrivals are drawn for --request-rate.
    #[arg(long = "request-rate-mode", visible_aliases = ["arrival-pattern"], value_enum, default_value_t = ArrivalMode::Poisson, help_heading = "Load Generator")]
    pub request_rate_mode: ArrivalMode,

    /// Gamma shape for --request-rate-mode gamma (vLLM's --burstiness): 1 is Poisson, below
    /// 1 burstier, above 1 smoother.
    #[arg(long, visible_aliases = ["vllm-burstiness"], help_heading = "Load Generator")]
    pub arrival_smoothness: Option<f64>,

    /// Replay the input file's `timestamp` (ms) of each entry; implied by a timestamped file.
    #[arg(long, help_heading = "Fixed Schedule")]
    pub fixed_schedule: bool,

    /// Shift the schedule so that the first kept timestamp is sent at once.
    #[arg(long, help_heading = "Fixed Schedule")]
    pub fixed_schedule_auto_offset: bool,

    /// Skip entries with a timestamp before this (ms); the schedule starts here.
    #[arg(long, help_heading = "Fixed Schedule")]
    pub fixed_schedule_start_offset: Option<u64>,

    /// Skip entries with a timestamp after this (ms).
    #[arg(long, help_heading = "Fixed Schedule")]
    pub fixed_schedule_end_offset: Option<u64>,

    /// Stop issuing requests this many seconds after profiling starts. A list sweeps it.
    #[arg(long, help_heading = "Load Generator")]
    pub benchmark_duration: Option<f64>,

    /// After --benchmark-duration: seconds in-flight requests may still finish (and count);
    /// then they are cancelled. `inf` waits for all.
    #[arg(long, default_value_t = 30.0, help_heading = "Load Generator")]
    pub benchmark_grace_period: f64,

    /// Warm up for this many seconds (same load settings) before profiling; its results
    /// are kept out of the metrics.
    #[arg(long, help_heading = "Warmup")]
    pub warmup_duration: Option<f64>,

    /// Percentage (0-100] of requests to cancel --request-cancellation-delay seconds after
    /// they were sent; recorded as code 499.
    #[arg(long, help_heading = "Request Cancellation")]
    pub request_cancellation_rate: Option<f64>,

    /// Seconds after its send that a request chosen by --request-cancellation-rate is
    /// cancelled (0: at once).
    #[arg(long, default_value_t = 0.0, help_heading = "Request Cancellation")]
    pub request_cancellation_delay: f64,

    // ----- Conversation Input (multi-turn sessions) -----
    /// Conversations (sessions) to send; every turn of each is sent. Also a stop condition:
    /// profiling ends when this many sessions have finished (or at --request-count, if
    /// that comes first).
    #[arg(long = "conversation-num", visible_aliases = ["num-conversations", "num-sessions"], value_parser = whole_number, help_heading = "Conversation Input")]
    pub conversation_num: Option<u64>,

    /// Mean number of turns per synthetic conversation (normal distribution, 1 to 10,000).
    #[arg(long = "conversation-turn-mean", visible_aliases = ["session-turns-mean"], default_value_t = 1, help_heading = "Conversation Input")]
    pub conversation_turn_mean: u64,

    /// Standard deviation of the number of turns per synthetic conversation.
    #[arg(long = "conversation-turn-stddev", visible_aliases = ["session-turns-stddev"], default_value_t = 0.0, help_heading = "Conversation Input")]
    pub conversation_turn_stddev: f64,

    /// Mean think time in ms before each later turn, counted from the previous reply.
    #[arg(long = "conversation-turn-delay-mean", visible_aliases = ["session-turn-delay-mean"], default_value_t = 0.0, help_heading = "Conversation Input")]
    pub conversation_turn_delay_mean: f64,

    /// Standard deviation of the think time in ms.
    #[arg(long = "conversation-turn-delay-stddev", visible_aliases = ["session-turn-delay-stddev"], default_value_t = 0.0, help_heading = "Conversation Input")]
    pub conversation_turn_delay_stddev: f64,

    /// Multiplies every sampled think time (0.5 halves them).
    #[arg(long = "conversation-turn-delay-ratio", visible_aliases = ["session-delay-ratio"], default_value_t = 1.0, help_heading = "Conversation Input")]
    pub conversation_turn_delay_ratio: f64,

    // ----- Warmup (more) -----
    /// Warm up with this many conversations (multi-turn) instead of a request count.
    #[arg(long, value_parser = whole_number, help_heading = "Warmup")]
    pub num_warmup_sessions: Option<u64>,

    /// Seconds warmup requests still in flight after --warmup-duration may take before they
    /// are cancelled. Default: wait for all.
    #[arg(long, help_heading = "Warmup")]
    pub warmup_grace_period: Option<f64>,

    /// Concurrency during warmup. Default: --concurrency.
    #[arg(long, help_heading = "Warmup")]
    pub warmup_concurrency: Option<u64>,

    /// Request rate during warmup. Default: --request-rate.
    #[arg(long, help_heading = "Warmup")]
    pub warmup_request_rate: Option<f64>,

    /// Arrival pattern during warmup. Default: --request-rate-mode.
    #[arg(long, value_enum, help_heading = "Warmup")]
    pub warmup_arrival_pattern: Option<ArrivalMode>,

    #[command(flatten)]
    pub logging: logging::LoggingArgs,

    /// Audio and video input.
    #[command(flatten)]
    pub media: media::MediaArgs,

    /// System prompt, shared system prompt, user context and prefix prompt pool.
    #[command(flatten)]
    pub prompt: prompt::PromptArgs,

    #[command(flatten)]
    pub collectors: collectors::CollectorArgs,

    #[command(flatten)]
    pub service: service::ServiceArgs,
    /// Several servers and models, connection reuse, session header, trace knobs.
    #[command(flatten)]
    pub load: load::LoadArgs,

    #[command(flatten)]
    pub control_hooks: control_hooks::ControlHookArgs,

    /// Sweeps, repeated runs and the SLA search.
    #[command(flatten)]
    pub multirun: multirun::MultiRunArgs,

    /// Shards of one plan over several load generators, and a shared start time.
    #[command(flatten)]
    pub shard: shard::ShardArgs,

    /// Synthetic queries and passages for the rankings endpoint types.
    #[command(flatten)]
    pub rankings: rankings::RankingsArgs,

    /// `--cache-bust`: per-conversation prefix-cache markers.
    #[command(flatten)]
    pub cache_bust: cache_bust::CacheBustArgs,

    /// `--accuracy-*`: grading the replies to a benchmark's questions.
    #[command(flatten)]
    pub accuracy: accuracy::AccuracyArgs,

    /// `--synthesis-*`: reshaping a mooncake trace before it is sent.
    #[command(flatten)]
    pub synthesis: synthesis::SynthesisArgs,

    /// `--mlflow-*` and `--wandb-*`: where the finished run is logged.
    #[command(flatten)]
    pub publish: publish::PublishArgs,

    /// After the run (after the whole sweep), draw `aiperf plot`'s charts into
    /// `<artifact dir>/plots`. A plotting failure only warns (see --plot-required).
    #[arg(long, overrides_with = "no_auto_plot", help_heading = "Output")]
    pub auto_plot: bool,

    /// Do not plot after the run (the default).
    #[arg(long, overrides_with = "auto_plot", help_heading = "Output")]
    pub no_auto_plot: bool,

    /// With --auto-plot: a plotting failure fails the run (exit 1) instead of warning.
    #[arg(long, help_heading = "Output")]
    pub plot_required: bool,

    /// The fields given on the command line (by field name) and their values as typed
    /// (each occurrence), set by `Cli::parse_with_sources`.
    #[arg(skip)]
    pub typed_values: Vec<(String, Vec<String>)>,

    /// Settings of the `--config` file that a typed flag overrides (a warning), set by
    /// `Cli::parse_with_sources`.
    #[arg(skip)]
    pub config_overridden: Vec<String>,
}

impl ProfileArgs {
    /// True when the flag of field `id` was typed (even with its default value).
    pub fn typed(&self, id: &str) -> bool {
        self.typed_values.iter().any(|(t, _)| t == id)
    }
}

/// `--request-rate-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArrivalMode {
    /// Even gaps of 1 / rate.
    Constant,
    /// Exponential gaps (a Poisson process).
    Poisson,
    /// Gamma gaps with shape --arrival-smoothness.
    Gamma,
    /// No rate: closed-loop --concurrency (AIPerf's mode when only concurrency is given).
    #[value(name = "concurrency_burst")]
    ConcurrencyBurst,
}

/// `--wait-for-model-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitForModelMode {
    /// `GET /v1/models` answers 2xx and lists the model.
    Models,
    /// A one-token request to the endpoint succeeds.
    Inference,
    /// Models first, then inference.
    Both,
}

/// `--image-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageFormat {
    Png,
    Jpeg,
    /// PNG or JPEG, chosen uniformly per image.
    Random,
}

/// `--image-source-sampling` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImageSampling {
    /// Each pick uniform over all images.
    RandomWithReplacement,
    /// Every image once, in a fresh random order each cycle.
    ShuffleCycle,
    /// Every image in sorted file-name order, wrapping around.
    SequentialCycle,
}

/// `--custom-dataset-type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum CustomDatasetType {
    /// One request per line, sent in file order.
    SingleTurn,
    /// One conversation per line: `{"session_id": ..., "turns": [...]}`.
    MultiTurn,
    /// A file or a directory of files; entries drawn with replacement.
    RandomPool,
    /// Mooncake traces: `input_length` + `hash_ids` (or `text_input`), `output_length`,
    /// `timestamp`.
    MooncakeTrace,
    /// One whole request body (a JSON object) per line, sent as written; with
    /// `--endpoint-type raw` to `--url` as given.
    RawPayload,
    /// Baseten completion traces (Parquet): each row's recorded `prompt` replayed at its
    /// `timestamp_start_unix_ms`, grouped into sessions by `provided_session_id` (else
    /// `poor_man_session_id`); see --replay-speedup and the other replay flags.
    BasetenTrace,
}

/// A clap value parser for counts: a whole number, also in float notation (`1e6`), so that
/// `--request-count 1e12` reaches the range check instead of failing as "invalid digit".
pub fn whole_number(s: &str) -> Result<u64, String> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(n);
    }
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64 => {
            Ok(f as u64)
        }
        _ => Err("give a whole number >= 0, e.g. 100 or 1e6".into()),
    }
}
