//! The validated run configuration. Every cross-flag check lives here, so a bad command line
//! stops before anything is built or sent.

use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};
use serde_json::{Map, Value};

use crate::cli::{self, ArrivalMode, ProfileArgs};
use crate::config_limits::{self as limits, Zero};
use crate::dataset::custom::CustomDatasetType;
use crate::dataset::source::{ImageSampling, ImageSource};
use crate::dataset::{ImageFormat, InputOptions};
use crate::dataset::{MAX_IMAGE_SIDE, MAX_INPUT_TOKENS, SyntheticOptions, TurnOptions};
use crate::endpoint::EndpointType;
use crate::load::schedule::ArrivalPattern;
use crate::load::{Cancellation, ScheduleWindow};
use crate::ui::UiType;

/// A command-line problem: one line naming the flag, the value and what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn bad(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

#[derive(Debug, Clone)]
pub struct ProfileConfig {
    /// The model sent in every request (the first of `--model-names`).
    pub model: String,
    pub endpoint_type: EndpointType,
    /// Full request URI: base URL + endpoint path.
    pub request_uri: Uri,
    pub streaming: bool,
    pub request_timeout: Duration,
    pub api_key: Option<String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Merged at top level into every request body.
    pub extra_inputs: Map<String, Value>,
    pub use_server_token_count: bool,
    pub use_legacy_max_tokens: bool,
    pub mock_server: bool,
    pub tokenizer: String,
    pub tokenizer_revision: String,
    pub synthetic: SyntheticOptions,
    pub concurrency: u64,
    pub request_count: u64,
    pub warmup_request_count: u64,
    pub goodput: Option<String>,
    pub artifact_dir: PathBuf,
    pub ui: UiType,
    pub verbose: bool,
    /// The seed actually used (given, or drawn from entropy and recorded).
    pub random_seed: u64,
    pub random_seed_given: bool,
    /// Image source, input file and their options.
    pub inputs: InputOptions,

    /// How to handle failures, interruption and an unready server.
    pub failures: FailureOptions,
    /// Load mode, stop conditions, warmup duration and cancellation.
    pub load: LoadOptions,
    /// Secret strings to hide wherever the command line is shown.
    pub secrets: Vec<String>,
    /// Flags accepted but without effect, for the log once it is set up.
    pub warnings: Vec<String>,
}

/// How requests are timed and when a phase stops.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// `--request-rate` and its gaps; `None` is the closed loop.
    pub rate: Option<(f64, ArrivalPattern)>,
    /// `--concurrency` was given (with a rate or a schedule it is a cap; else unlimited).
    pub concurrency_given: bool,
    /// `--fixed-schedule` was given (a timestamped input file implies it too).
    pub fixed_schedule: bool,
    pub schedule_window: ScheduleWindow,
    /// `--request-count` as given.
    pub request_count_given: Option<u64>,
    /// Profiling stops issuing after this long.
    pub duration: Option<Duration>,
    /// In-flight requests after the duration; `None` waits for all.
    pub grace: Option<Duration>,
    pub warmup_duration: Option<Duration>,
    pub cancellation: Option<Cancellation>,
    /// `--conversation-num`: profiling stops after this many conversations.
    pub sessions: Option<u64>,
    /// Warmup settings that differ from profiling.
    pub warmup: WarmupOptions,
}

/// `--num-warmup-sessions`, `--warmup-grace-period` and the warmup's own load settings
/// (each falls back to the profiling value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WarmupOptions {
    pub sessions: Option<u64>,
    /// After `--warmup-duration`: how long warmup requests in flight may finish; `None`
    /// waits for all.
    pub grace: Option<Duration>,
    pub concurrency: Option<u64>,
    /// The warmup's request rate and arrival pattern.
    pub rate: Option<(f64, ArrivalPattern)>,
}

impl LoadOptions {
    /// The profiling phase's request limit: none when only the duration limits it.
    pub fn count_limit(&self, request_count: u64) -> Option<u64> {
        match (self.request_count_given, self.duration, self.sessions) {
            (Some(n), _, _) => Some(n),
            (None, None, None) => Some(request_count),
            (None, _, _) => None,
        }
    }
}

/// What the run does about failures, interruption and a server that is not up yet.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureOptions {
    /// Poll the server until it answers, for at most this long (`None`: do not wait).
    pub wait_for_model: Option<Duration>,
    pub wait_for_model_interval: Duration,
    /// Stop early when failed / finished exceeds this share.
    pub failed_request_threshold: Option<f64>,
    /// Time in-flight requests get after Ctrl-C or an early stop.
    pub grace_period: Duration,
}

impl ProfileConfig {
    /// Validates the parsed flags. `is_terminal` decides the default UI.
    pub fn from_args(a: &ProfileArgs, is_terminal: bool) -> Result<Self, ConfigError> {
        let model = a
            .model_names
            .iter()
            .find(|m| !m.trim().is_empty())
            .cloned()
            .ok_or_else(|| {
                bad("--model: a model name is required, e.g. --model Qwen/Qwen2-VL-2B-Instruct")
            })?;

        let endpoint_type = EndpointType::from(a.endpoint_type);
        let request_uri = build_request_uri(&a.url, a.custom_endpoint.as_deref(), endpoint_type)?;
        let (request_uri, userinfo) = split_userinfo(request_uri)?;
        let mut warnings = Vec::new();

        let request_timeout = limits::seconds(
            "--request-timeout-seconds",
            a.request_timeout_seconds,
            Zero::Refused,
        )?;

        let concurrency = a.concurrency.unwrap_or(1);
        check_counts(a)?;
        let load = check_load_modes(a)?;
        let request_count = match (a.request_count, load.duration) {
            (Some(n), _) => n,
            // Limited by time only: ids and order for this many are drawn up front (more
            // are derived on the fly), and the progress bar counts toward it.
            (None, Some(d)) => match load.rate {
                Some((rate, _)) => {
                    ((rate * d.as_secs_f64() * 1.1).ceil() as u64 + 10).min(1_000_000)
                }
                None => 10_000,
            },
            // Sessions ≤ sends: enough ids and order for every conversation's first turn;
            // the run replaces it with the exact number of turns once the plan is drawn.
            (None, None) => match load.sessions {
                Some(n) => n,
                None => (concurrency * 2).max(10),
            },
        };
        let turns = check_turns(a)?;

        limits::count(
            "--synthetic-input-tokens-mean/--isl",
            a.isl_mean,
            MAX_INPUT_TOKENS,
            "tokens",
            "",
        )?;
        check_stddev("--synthetic-input-tokens-stddev", a.isl_stddev)?;
        if let Some(osl) = a.osl_mean
            && osl == 0
        {
            return Err(bad(
                "--output-tokens-mean: 0 is not allowed; give 1 or more tokens",
            ));
        }
        if a.osl_stddev.is_some() && a.osl_mean.is_none() {
            return Err(bad(
                "--output-tokens-stddev needs --output-tokens-mean: give a mean as well, or drop the stddev",
            ));
        }
        let osl_stddev = a.osl_stddev.unwrap_or(0.0);
        check_stddev("--output-tokens-stddev", osl_stddev)?;

        check_image_size(a)?;
        let width_stddev = a.image_width_stddev.unwrap_or(0.0);
        let height_stddev = a.image_height_stddev.unwrap_or(0.0);
        check_stddev("--image-width-stddev", width_stddev)?;
        check_stddev("--image-height-stddev", height_stddev)?;
        let images_on = a.image_width_mean > 0.0 || a.image_height_mean > 0.0;
        if images_on
            && a.image_batch_size > 0
            && (a.image_width_mean == 0.0 || a.image_height_mean == 0.0)
        {
            return Err(bad(format!(
                "--image-width-mean {} / --image-height-mean {}: give both a width and a height > 0 for images, or neither",
                a.image_width_mean, a.image_height_mean
            )));
        }
        if images_on && endpoint_type != EndpointType::Chat {
            return Err(bad(format!(
                "--image-width-mean/--image-height-mean: images need --endpoint-type chat, not {}",
                endpoint_type.as_str()
            )));
        }
        limits::count(
            "--num-dataset-entries",
            a.num_dataset_entries as u64,
            limits::MAX_REQUESTS,
            "entries",
            "",
        )?;

        let header_pairs = parse_header_pairs(&a.headers)?;
        let mut headers = header_values(&header_pairs)?;
        let api_key = a.api_key.clone().filter(|k| !k.is_empty());
        if let Some(info) = &userinfo {
            url_basic_auth(info, api_key.is_some(), &mut headers, &mut warnings)?;
        }
        let secrets = collect_secrets(api_key.as_deref(), &header_pairs, userinfo.as_ref());
        let extra_inputs = parse_extra_inputs(&a.extra_inputs)?;
        if let Some(g) = &a.goodput
            && g.trim().is_empty()
        {
            return Err(bad(
                "--goodput: empty; give SLOs like \"request_latency:250 inter_token_latency:10\"",
            ));
        }

        let (random_seed, random_seed_given) = match a.random_seed {
            Some(s) => (s, true),
            None => (rand::random::<u64>(), false),
        };

        // Only as many entries as can ever be sent are built: the rest would never leave
        // the client, and building them would only delay the first request.
        let total_requests =
            request_count + a.warmup_request_count + load.warmup.sessions.unwrap_or(0);
        // Requests are turns: with several turns per conversation, fewer conversations
        // can ever start (unless conversations are what is counted).
        let conversations_needed = match load.sessions {
            Some(_) => total_requests,
            None => total_requests.div_ceil(turns.mean),
        };
        let num_entries = a
            .num_dataset_entries
            .min(conversations_needed as usize)
            .max(1);

        let synthetic = SyntheticOptions {
            num_entries,
            isl_mean: a.isl_mean as f64,
            isl_stddev: a.isl_stddev,
            osl_mean: a.osl_mean.map(|v| v as f64),
            osl_stddev,
            image_width_mean: a.image_width_mean,
            image_width_stddev: width_stddev,
            image_height_mean: a.image_height_mean,
            image_height_stddev: height_stddev,
            image_format: a.image_format.into(),
            image_batch_size: if images_on { a.image_batch_size } else { 0 },
            seed: Some(random_seed),
            turns,
        };

        if a.input_file.is_none() {
            check_dataset_memory(&synthetic)?;
        }

        let artifact_dir = match &a.artifact_dir {
            Some(d) => d.clone(),
            None => PathBuf::from("artifacts").join(format!(
                "{}-{}-{}",
                model.replace('/', "_"),
                endpoint_type.as_str(),
                stimulus_name(&load, concurrency)
            )),
        };

        let ui = match a.ui_type {
            Some(u) => u.into(),
            None if a.verbose || is_terminal => UiType::Simple,
            None => UiType::None,
        };

        let failures = check_failures_and_inputs(a)?;
        check_image_flags_used(a, images_on)?;
        warnings.extend(unused_flag_warnings(a, &synthetic.turns));

        Ok(ProfileConfig {
            tokenizer: a.tokenizer.clone().unwrap_or_else(|| model.clone()),
            model,
            endpoint_type,
            request_uri,
            streaming: a.streaming,
            request_timeout,
            api_key,
            headers,
            secrets,
            extra_inputs,
            use_server_token_count: a.use_server_token_count,
            use_legacy_max_tokens: a.use_legacy_max_tokens,
            mock_server: a.mock_server,
            tokenizer_revision: a.tokenizer_revision.clone(),
            synthetic,
            concurrency,
            request_count,
            warmup_request_count: a.warmup_request_count,
            goodput: a.goodput.clone(),
            artifact_dir,
            ui,
            verbose: a.verbose,
            random_seed,
            random_seed_given,
            inputs: input_options(a)?,

            failures,
            load,
            warnings,
        })
    }

    /// Points the run at another base URL (used by `--mock-server`), keeping the path.
    pub fn set_base_url(&mut self, base: &str) -> Result<(), ConfigError> {
        let path = self
            .request_uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        self.request_uri = build_request_uri(base, Some(&path), self.endpoint_type)?;
        Ok(())
    }
}

/// `--fixed-schedule-*` shape a fixed schedule: without one (`--fixed-schedule` or a
/// timestamped input file) they would do nothing.
fn check_schedule_flags_used(a: &ProfileArgs, fixed_schedule: bool) -> Result<(), ConfigError> {
    let given = [
        ("--fixed-schedule-auto-offset", a.fixed_schedule_auto_offset),
        (
            "--fixed-schedule-start-offset",
            a.fixed_schedule_start_offset.is_some(),
        ),
        (
            "--fixed-schedule-end-offset",
            a.fixed_schedule_end_offset.is_some(),
        ),
    ];
    match given.iter().find(|(_, g)| *g) {
        Some((flag, _)) if !fixed_schedule => Err(bad(format!(
            "{flag} applies to a fixed schedule only; add --fixed-schedule with a timestamped --input-file, or drop it"
        ))),
        _ => Ok(()),
    }
}

/// Image flags while synthetic images are off (both sizes 0) would do nothing.
fn check_image_flags_used(a: &ProfileArgs, images_on: bool) -> Result<(), ConfigError> {
    if images_on || a.input_file.is_some() {
        return Ok(());
    }
    let given = ["image_format", "image_source", "image_source_sampling"];
    match given.iter().find(|id| a.typed(id)) {
        Some(id) => Err(bad(format!(
            "--{}: images are off because --image-width-mean and --image-height-mean are 0; give both sizes > 0, or drop it",
            id.replace('_', "-")
        ))),
        None => Ok(()),
    }
}

/// Flags AIPerf accepts that have no effect in this combination: a warning each, and the
/// run goes on.
fn unused_flag_warnings(a: &ProfileArgs, turns: &TurnOptions) -> Vec<String> {
    let mut out = Vec::new();
    if a.typed("wait_for_model_interval") && a.wait_for_model_timeout == 0.0 {
        out.push("--wait-for-model-interval is ignored: it is the poll interval of --wait-for-model-timeout, which is not set".to_string());
    }
    if a.input_file.is_some() {
        let synthetic = [
            ("isl_mean", "--synthetic-input-tokens-mean/--isl"),
            ("isl_stddev", "--synthetic-input-tokens-stddev/--isl-stddev"),
            ("osl_stddev", "--output-tokens-stddev/--osl-stddev"),
            ("num_dataset_entries", "--num-dataset-entries"),
        ];
        for (id, flag) in synthetic {
            if a.typed(id) {
                out.push(format!(
                    "{flag} is ignored: it shapes synthetic prompts, and the requests come from --input-file"
                ));
            }
        }
    }
    let mooncake = a.custom_dataset_type == Some(cli::CustomDatasetType::MooncakeTrace);
    if a.isl_block_size.is_some() && !mooncake {
        out.push("--isl-block-size is ignored: it sizes the hash_ids blocks of --custom-dataset-type mooncake_trace only".to_string());
    }
    let one_turn = turns.mean == 1 && turns.stddev == 0.0;
    let delays = [
        "conversation_turn_delay_mean",
        "conversation_turn_delay_stddev",
        "conversation_turn_delay_ratio",
    ];
    if one_turn && delays.iter().any(|id| a.typed(id)) {
        out.push("--conversation-turn-delay-* is ignored: think times come before later turns, and every conversation has one turn (raise --conversation-turn-mean)".to_string());
    }
    out
}

/// Request, conversation and concurrency counts: 1 or more, and few enough to plan in
/// memory.
fn check_counts(a: &ProfileArgs) -> Result<(), ConfigError> {
    let longer = "; for longer runs use --benchmark-duration";
    let requests = limits::MAX_REQUESTS;
    if let Some(c) = a.concurrency {
        limits::count(
            "--concurrency",
            c,
            limits::MAX_CONCURRENCY,
            "requests in flight",
            "",
        )?;
    }
    if let Some(n) = a.request_count {
        limits::count("--request-count", n, requests, "requests", longer)?;
    }
    if a.warmup_request_count > 0 {
        limits::count(
            "--warmup-request-count",
            a.warmup_request_count,
            requests,
            "requests",
            "",
        )?;
    }
    if let Some(n) = a.conversation_num
        && n > 0
    {
        limits::count("--conversation-num", n, requests, "conversations", longer)?;
    }
    if let Some(n) = a.num_warmup_sessions
        && n > 0
    {
        limits::count("--num-warmup-sessions", n, requests, "conversations", "")?;
    }
    Ok(())
}

/// Image sides from 0 (off) to `MAX_IMAGE_SIDE`, and at most `MAX_IMAGE_PIXELS` each.
fn check_image_size(a: &ProfileArgs) -> Result<(), ConfigError> {
    let max = f64::from(MAX_IMAGE_SIDE);
    for (flag, v) in [
        ("--image-width-mean", a.image_width_mean),
        ("--image-height-mean", a.image_height_mean),
    ] {
        if !(v.is_finite() && (0.0..=max).contains(&v)) {
            return Err(bad(format!(
                "{flag}: {v} is not allowed; give a width/height in pixels from 0 to {MAX_IMAGE_SIDE} (0 disables images)"
            )));
        }
    }
    let pixels = a.image_width_mean * a.image_height_mean;
    if pixels > limits::MAX_IMAGE_PIXELS as f64 {
        return Err(bad(format!(
            "--image-width-mean {} x --image-height-mean {}: {pixels} pixels per image is not allowed; give at most {} (e.g. 8192 x 8192)",
            a.image_width_mean,
            a.image_height_mean,
            limits::MAX_IMAGE_PIXELS
        )));
    }
    Ok(())
}

/// Estimates the memory the synthetic dataset takes once built (each prompt and image is
/// held twice: as built and inside its request body) and refuses a dataset that would not
/// fit in the memory available, instead of aborting halfway through building it.
fn check_dataset_memory(s: &SyntheticOptions) -> Result<(), ConfigError> {
    let Some(available) = limits::available_memory() else {
        return Ok(());
    };
    // About 4 bytes of text a token; noise images barely compress (3 bytes a pixel, then
    // base64 adds a third).
    let text = s.isl_mean * 4.0;
    let image = s.image_width_mean * s.image_height_mean * 3.0 * 4.0 / 3.0;
    let per_turn = 2.0 * (text + s.image_batch_size as f64 * image);
    let total = per_turn * s.turns.mean as f64 * s.num_entries as f64;
    if total > available as f64 {
        return Err(bad(format!(
            "--num-dataset-entries {} x --image-batch-size {} x --image-width-mean {} x --image-height-mean {} (and --isl {}): the synthetic dataset would take about {}, more than the {} of memory available; lower the image size, --image-batch-size, --num-dataset-entries or --isl",
            s.num_entries,
            s.image_batch_size,
            s.image_width_mean,
            s.image_height_mean,
            s.isl_mean,
            limits::gib(total),
            limits::gib(available as f64)
        )));
    }
    Ok(())
}

/// `--image-source*`, `--input-file`, `--custom-dataset-type`, `--isl-block-size`.
fn input_options(a: &ProfileArgs) -> Result<InputOptions, ConfigError> {
    let image_source = ImageSource::parse(a.image_source.trim());
    let image_sampling = ImageSampling::from(a.image_source_sampling);
    match &image_source {
        ImageSource::Noise if image_sampling != ImageSampling::RandomWithReplacement => {
            return Err(bad(
                "--image-source-sampling: only random-with-replacement applies to --image-source noise; \
                 use --image-source assets or a directory to pick images in cycles",
            ));
        }
        ImageSource::Directory(d) if !d.is_dir() => {
            return Err(bad(format!(
                "--image-source: '{}' is not 'noise', 'assets' or an existing directory",
                d.display()
            )));
        }
        _ => {}
    }
    if a.isl_block_size == Some(0) {
        return Err(bad(
            "--isl-block-size: 0 is not allowed; give 1 or more tokens",
        ));
    }
    let input_file = match (
        &a.input_file,
        a.custom_dataset_type.map(CustomDatasetType::from),
    ) {
        (None, None) => None,
        (None, Some(t)) => {
            return Err(bad(format!(
                "--custom-dataset-type {} needs --input-file",
                t.as_str()
            )));
        }
        (Some(p), kind) => {
            let kind = kind.unwrap_or(CustomDatasetType::SingleTurn);
            if !p.exists() {
                return Err(bad(format!(
                    "--input-file: '{}' does not exist",
                    p.display()
                )));
            }
            if p.is_dir() && kind != CustomDatasetType::RandomPool {
                return Err(bad(format!(
                    "--input-file: '{}' is a directory; only --custom-dataset-type random_pool reads a directory",
                    p.display()
                )));
            }
            // Synthetic media shapes have no meaning for entries read from a file.
            let synthetic_flags = [
                ("--image-width-mean", a.image_width_mean != 0.0),
                ("--image-height-mean", a.image_height_mean != 0.0),
                ("--image-width-stddev", a.image_width_stddev.is_some()),
                ("--image-height-stddev", a.image_height_stddev.is_some()),
                ("--image-source", image_source != ImageSource::Noise),
                ("--image-format", a.typed("image_format")),
                (
                    "--image-source-sampling",
                    image_sampling != ImageSampling::RandomWithReplacement,
                ),
            ];
            if let Some((flag, _)) = synthetic_flags.iter().find(|(_, given)| *given) {
                return Err(bad(format!(
                    "{flag} applies to synthetic data only and cannot be used with --input-file; \
                     images come from the input file"
                )));
            }
            Some((p.clone(), kind))
        }
    };
    Ok(InputOptions {
        image_source,
        image_sampling,
        input_file,
        isl_block_size: a.isl_block_size,
    })
}

/// The failure-handling flags, and input combinations that would otherwise be silently
/// ignored (image settings while images are off).
fn check_failures_and_inputs(a: &ProfileArgs) -> Result<FailureOptions, ConfigError> {
    let wait = limits::seconds(
        "--wait-for-model-timeout",
        a.wait_for_model_timeout,
        Zero::Allowed,
    )?;
    let interval = limits::seconds(
        "--wait-for-model-interval",
        a.wait_for_model_interval,
        Zero::Refused,
    )?;
    let grace = limits::seconds(
        "--interrupt-grace-period",
        a.interrupt_grace_period,
        Zero::Allowed,
    )?;
    if let Some(t) = a.failed_request_threshold
        && !(t.is_finite() && (0.0..=1.0).contains(&t))
    {
        return Err(bad(format!(
            "--failed-request-threshold: {t} is not allowed; give a share of failed requests from 0 to 1 (e.g. 0.1)"
        )));
    }

    let images_on = a.image_width_mean > 0.0 || a.image_height_mean > 0.0;
    if !images_on && a.image_batch_size > 1 {
        return Err(bad(format!(
            "--image-batch-size {}: images are off because --image-width-mean and --image-height-mean are 0; give both sizes > 0, or drop --image-batch-size",
            a.image_batch_size
        )));
    }
    for (flag, stddev, mean_flag, mean) in [
        (
            "--image-width-stddev",
            a.image_width_stddev,
            "--image-width-mean",
            a.image_width_mean,
        ),
        (
            "--image-height-stddev",
            a.image_height_stddev,
            "--image-height-mean",
            a.image_height_mean,
        ),
    ] {
        if let Some(sd) = stddev
            && sd > 0.0
            && mean == 0.0
        {
            return Err(bad(format!(
                "{flag} {sd} needs {mean_flag}: give a mean > 0 as well, or drop the stddev"
            )));
        }
    }

    Ok(FailureOptions {
        wait_for_model: (!wait.is_zero()).then_some(wait),
        wait_for_model_interval: interval,
        failed_request_threshold: a.failed_request_threshold,
        grace_period: grace,
    })
}

/// The artifact directory's stimulus part, as AIPerf names it: `concurrency<N>`,
/// `request_rate<R>`, `concurrency<N>-request_rate<R>` or `fixed_schedule`.
pub fn stimulus_name(load: &LoadOptions, concurrency: u64) -> String {
    if load.fixed_schedule {
        return "fixed_schedule".into();
    }
    match (load.rate, load.concurrency_given) {
        (Some((r, _)), true) => format!("concurrency{concurrency}-request_rate{}", python_float(r)),
        (Some((r, _)), false) => format!("request_rate{}", python_float(r)),
        (None, _) => format!("concurrency{concurrency}"),
    }
}

/// A float as Python's `repr` writes it for ordinary values: `5.0`, `0.5`, `2.25`.
fn python_float(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// True when the first non-empty line of a JSONL file has a `timestamp` (top level, or on
/// the first of its `turns`). Unreadable files say no; reading them fails later with a
/// better message.
fn first_record_has_timestamp(path: &std::path::Path) -> bool {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let Some(line) = std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .find(|l| !l.trim().is_empty())
    else {
        return false;
    };
    // A UTF-8 byte-order mark is not part of the JSON.
    let line = line.trim_start_matches('\u{feff}');
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
        return false;
    };
    let first_turn = obj
        .get("turns")
        .and_then(|t| t.get(0))
        .and_then(|t| t.get("timestamp"));
    obj.get("timestamp")
        .or(first_turn)
        .is_some_and(|t| !t.is_null())
}

/// Load mode, stop-condition, warmup-duration and cancellation flags.
fn check_load_modes(a: &ProfileArgs) -> Result<LoadOptions, ConfigError> {
    let rate = match a.request_rate {
        None => None,
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(bad(format!(
                "--request-rate: {r} is not allowed; give requests per second > 0 (e.g. 5 or 0.5)"
            )));
        }
        Some(r) => Some(r),
    };
    let pattern = match (a.request_rate_mode, a.arrival_smoothness) {
        (_, Some(s)) if !(s.is_finite() && s > 0.0) => {
            return Err(bad(format!(
                "--arrival-smoothness: {s} is not allowed; give a gamma shape > 0 (1 is Poisson)"
            )));
        }
        (ArrivalMode::Gamma, s) => ArrivalPattern::Gamma {
            shape: s.unwrap_or(1.0),
        },
        (_, Some(_)) => {
            return Err(bad(
                "--arrival-smoothness applies to --request-rate-mode gamma only; add --request-rate-mode gamma or drop it",
            ));
        }
        (ArrivalMode::Constant, None) => ArrivalPattern::Constant,
        (ArrivalMode::Poisson, None) => ArrivalPattern::Poisson,
    };
    if rate.is_none() && a.request_rate_mode != ArrivalMode::Poisson {
        return Err(bad(
            "--request-rate-mode needs --request-rate: give a rate, or drop the mode",
        ));
    }
    let schedule_window = ScheduleWindow {
        auto_offset: a.fixed_schedule_auto_offset,
        start_ms: a.fixed_schedule_start_offset,
        end_ms: a.fixed_schedule_end_offset,
    };
    if let (Some(s), Some(e)) = (schedule_window.start_ms, schedule_window.end_ms)
        && s > e
    {
        return Err(bad(format!(
            "--fixed-schedule-start-offset {s} is after --fixed-schedule-end-offset {e}; give start <= end"
        )));
    }
    if a.fixed_schedule_auto_offset && a.fixed_schedule_start_offset.is_some() {
        return Err(bad(
            "--fixed-schedule-auto-offset and --fixed-schedule-start-offset both set where the schedule starts; give one",
        ));
    }
    // AIPerf's rule: a timestamp on the first record of the input file means a replay.
    let fixed_schedule = a.fixed_schedule
        || a.input_file
            .as_deref()
            .is_some_and(first_record_has_timestamp);
    let why = if a.fixed_schedule {
        "--fixed-schedule"
    } else {
        "the input file's timestamps (a fixed schedule)"
    };
    if fixed_schedule {
        if a.input_file.is_none() {
            return Err(bad(
                "--fixed-schedule needs --input-file with a timestamp on each entry",
            ));
        }
        if rate.is_some() {
            return Err(bad(format!(
                "--request-rate cannot be used with {why}: the file's timestamps set the send times"
            )));
        }
        if let Some(n) = a.request_count {
            return Err(bad(format!(
                "--request-count {n} cannot be used with {why}: the schedule sends every entry in its window"
            )));
        }
    }
    check_schedule_flags_used(a, fixed_schedule)?;
    let duration = a
        .benchmark_duration
        .map(|d| limits::seconds("--benchmark-duration", d, Zero::Refused))
        .transpose()?;
    if duration.is_none() && a.typed("benchmark_grace_period") {
        return Err(bad(format!(
            "--benchmark-grace-period {} applies to --benchmark-duration only (it is how long requests in flight may finish after it); add --benchmark-duration or drop it",
            a.benchmark_grace_period
        )));
    }
    let grace = limits::grace_seconds("--benchmark-grace-period", a.benchmark_grace_period)?;
    let warmup_duration = a
        .warmup_duration
        .map(|d| limits::seconds("--warmup-duration", d, Zero::Refused))
        .transpose()?;
    if let Some(g) = a.warmup_grace_period
        && warmup_duration.is_none()
    {
        return Err(bad(format!(
            "--warmup-grace-period {g} applies to --warmup-duration only (a counted warmup waits for all its requests); add --warmup-duration or drop it"
        )));
    }
    if warmup_duration.is_some() && a.warmup_request_count > 0 {
        return Err(bad(
            "--warmup-duration and --warmup-request-count both end the warmup; give one",
        ));
    }
    if fixed_schedule && (warmup_duration.is_some() || a.warmup_request_count > 0) {
        return Err(bad(format!(
            "--warmup-request-count/--warmup-duration cannot be used with {why}: a replayed trace has no warmup"
        )));
    }
    let cancellation = match a.request_cancellation_rate {
        None if a.typed("request_cancellation_delay") => {
            return Err(bad(format!(
                "--request-cancellation-delay {} needs --request-cancellation-rate: give the share of requests to cancel, or drop the delay",
                a.request_cancellation_delay
            )));
        }
        None => None,
        Some(p) if !(p.is_finite() && p > 0.0 && p <= 100.0) => {
            return Err(bad(format!(
                "--request-cancellation-rate: {p} is not allowed; give a percentage in (0, 100]"
            )));
        }
        Some(p) => {
            let delay = limits::seconds(
                "--request-cancellation-delay",
                a.request_cancellation_delay,
                Zero::Allowed,
            )?;
            Some(Cancellation {
                share: p / 100.0,
                delay,
            })
        }
    };
    if a.conversation_num == Some(0) {
        return Err(bad(
            "--conversation-num: 0 is not allowed; give 1 or more conversations",
        ));
    }
    if let (Some(s), Some(n)) = (a.conversation_num, a.request_count) {
        return Err(bad(format!(
            "--conversation-num {s} and --request-count {n} both stop profiling; give one (conversations for multi-turn, requests otherwise)"
        )));
    }
    if fixed_schedule && a.conversation_num.is_some() {
        return Err(bad(format!(
            "--conversation-num cannot be used with {why}: the schedule sends every conversation in its window"
        )));
    }
    let warmup = check_warmup(a, rate.map(|r| (r, pattern)))?;
    if fixed_schedule && warmup != WarmupOptions::default() {
        return Err(bad(format!(
            "--num-warmup-sessions/--warmup-*: cannot be used with {why}: a replayed trace has no warmup"
        )));
    }
    Ok(LoadOptions {
        rate: rate.map(|r| (r, pattern)),
        concurrency_given: a.concurrency.is_some(),
        fixed_schedule,
        schedule_window,
        request_count_given: a.request_count,
        duration,
        grace,
        warmup_duration,
        cancellation,
        sessions: a.conversation_num,
        warmup,
    })
}

/// The warmup's own stop condition, grace period and load settings.
fn check_warmup(
    a: &ProfileArgs,
    rate: Option<(f64, ArrivalPattern)>,
) -> Result<WarmupOptions, ConfigError> {
    if a.num_warmup_sessions == Some(0) {
        return Err(bad(
            "--num-warmup-sessions: 0 is not allowed; give 1 or more, or drop it for no warmup",
        ));
    }
    if a.num_warmup_sessions.is_some() && a.warmup_request_count > 0 {
        return Err(bad(
            "--num-warmup-sessions and --warmup-request-count both end the warmup; give one",
        ));
    }
    let grace = match a.warmup_grace_period {
        None => None,
        Some(g) => limits::grace_seconds("--warmup-grace-period", g)?,
    };
    if a.warmup_concurrency == Some(0) {
        return Err(bad(
            "--warmup-concurrency: 0 is not allowed; give 1 or more requests in flight",
        ));
    }
    let warmup_rate = match a.warmup_request_rate {
        Some(r) if !(r.is_finite() && r > 0.0) => {
            return Err(bad(format!(
                "--warmup-request-rate: {r} is not allowed; give requests per second > 0"
            )));
        }
        given => given.or(rate.map(|(r, _)| r)),
    };
    let pattern = match a.warmup_arrival_pattern {
        Some(ArrivalMode::Constant) => Some(ArrivalPattern::Constant),
        Some(ArrivalMode::Poisson) => Some(ArrivalPattern::Poisson),
        Some(ArrivalMode::Gamma) => Some(ArrivalPattern::Gamma {
            shape: a.arrival_smoothness.unwrap_or(1.0),
        }),
        None => None,
    };
    if pattern.is_some() && warmup_rate.is_none() {
        return Err(bad(
            "--warmup-arrival-pattern needs a rate: give --warmup-request-rate or --request-rate",
        ));
    }
    Ok(WarmupOptions {
        sessions: a.num_warmup_sessions,
        grace,
        concurrency: a.warmup_concurrency,
        rate: warmup_rate.map(|r| {
            let main = rate.map(|(_, p)| p).unwrap_or(ArrivalPattern::Poisson);
            (r, pattern.unwrap_or(main))
        }),
    })
}

/// `--conversation-turn-delay-ratio` above this would stretch a think time past any run.
const MAX_DELAY_RATIO: f64 = 1000.0;

/// `--conversation-turn-*`: the shape of synthetic conversations.
fn check_turns(a: &ProfileArgs) -> Result<TurnOptions, ConfigError> {
    if a.conversation_turn_mean == 0 {
        return Err(bad(
            "--conversation-turn-mean: 0 is not allowed; give 1 or more turns per conversation",
        ));
    }
    check_stddev("--conversation-turn-stddev", a.conversation_turn_stddev)?;
    let delay = limits::millis(
        "--conversation-turn-delay-mean",
        a.conversation_turn_delay_mean,
    )?;
    limits::millis(
        "--conversation-turn-delay-stddev",
        a.conversation_turn_delay_stddev,
    )?;
    // Bounded too: it multiplies every think time.
    let ratio = a.conversation_turn_delay_ratio;
    if !(ratio.is_finite() && ratio > 0.0 && ratio <= MAX_DELAY_RATIO) {
        return Err(bad(format!(
            "--conversation-turn-delay-ratio: {ratio} is not allowed; give a multiplier > 0 and at most {MAX_DELAY_RATIO} (1 keeps the delays)"
        )));
    }
    let turns = TurnOptions {
        mean: a.conversation_turn_mean,
        stddev: a.conversation_turn_stddev,
        delay_mean_ms: delay,
        delay_stddev_ms: a.conversation_turn_delay_stddev,
        delay_ratio: ratio,
    };
    if a.input_file.is_some() && turns != TurnOptions::default() {
        return Err(bad(
            "--conversation-turn-*: these shape synthetic conversations; with --input-file the file's sessions give the turns and their \"delay\"",
        ));
    }
    Ok(turns)
}

fn check_stddev(flag: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(bad(format!(
            "{flag}: {v} is not allowed; give a number >= 0"
        )))
    }
}

/// `localhost:8000` -> `http://localhost:8000/v1/chat/completions`. A base URL that already
/// ends in `/v1` is not doubled.
fn build_request_uri(
    url: &str,
    custom_endpoint: Option<&str>,
    endpoint: EndpointType,
) -> Result<Uri, ConfigError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(bad(
            "--url: empty; give a server address such as localhost:8000",
        ));
    }
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let (base, query) = split_query(&with_scheme, url)?;
    let base = base.trim_end_matches('/');
    let path = custom_endpoint.unwrap_or(endpoint.default_path());
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let path = if base.ends_with("/v1") && path.starts_with("/v1/") {
        path[3..].to_string()
    } else {
        path
    };
    // The URL's query goes after the endpoint path (joined to one the endpoint may have).
    let full = match query {
        None => format!("{base}{path}"),
        Some(q) if path.contains('?') => format!("{base}{path}&{q}"),
        Some(q) => format!("{base}{path}?{q}"),
    };
    let uri: Uri = full.parse().map_err(|e| {
        bad(format!(
            "--url: '{url}' is not a valid URL ({e}); give e.g. http://localhost:8000"
        ))
    })?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        other => {
            return Err(bad(format!(
                "--url: scheme '{}' is not supported; use http:// or https://",
                other.unwrap_or("")
            )));
        }
    }
    if uri.host().is_none() {
        return Err(bad(format!(
            "--url: '{url}' has no host; give e.g. localhost:8000"
        )));
    }
    check_port(&uri, url)?;
    Ok(uri)
}

/// `http://h/base?q=1` -> (`http://h/base`, `q=1`). A fragment is refused: it is never
/// sent, so it can only be a typo.
fn split_query<'a>(
    with_scheme: &'a str,
    url: &str,
) -> Result<(&'a str, Option<&'a str>), ConfigError> {
    if with_scheme.contains('#') {
        return Err(bad(format!(
            "--url: '{url}' has a fragment ('#...'), which is never sent to a server; drop it"
        )));
    }
    Ok(match with_scheme.split_once('?') {
        Some((base, q)) => (base, (!q.is_empty()).then_some(q)),
        None => (with_scheme, None),
    })
}

/// A port in the URL must be a number from 1 to 65535: otherwise the client would fall back
/// to the scheme's default port and benchmark another server.
fn check_port(uri: &Uri, url: &str) -> Result<(), ConfigError> {
    let Some(authority) = uri.authority() else {
        return Ok(());
    };
    let host_port = authority.as_str().rsplit('@').next().unwrap_or("");
    // `[::1]:8000`: the port follows the bracket.
    let port = match host_port.rfind(']') {
        Some(i) => host_port[i + 1..].strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, p)| p),
    };
    match port {
        None => Ok(()),
        Some(p) if p.parse::<u16>().is_ok_and(|n| n > 0) => Ok(()),
        Some(p) => Err(bad(format!(
            "--url: port '{p}' in '{url}' is not allowed; give a port from 1 to 65535, e.g. localhost:8000"
        ))),
    }
}

/// `-H Name:Value` or a JSON object of headers, as (name, value) text pairs (trimmed).
fn parse_header_pairs(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for item in items {
        if item.trim_start().starts_with('{') {
            let obj: Map<String, Value> = serde_json::from_str(item).map_err(|e| {
                bad(format!(
                    "--header: '{}' is not a JSON object ({e}); give Name:Value or {{\"Name\": \"Value\"}}",
                    redact_json_headers(item)
                ))
            })?;
            out.extend(obj.into_iter().map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_string()),
            }));
        } else {
            let (k, v) = item.split_once(':').ok_or_else(|| {
                bad(format!(
                    "--header: '{}' has no ':'; give Name:Value",
                    redact_header_arg(item)
                ))
            })?;
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(out)
}

fn header_values(
    pairs: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| bad(format!("--header: '{k}' is not a valid header name")))?;
        let mut value = HeaderValue::from_str(v).map_err(|_| {
            bad(format!(
                "--header: the value for '{k}' is not a valid header value"
            ))
        })?;
        value.set_sensitive(is_secret_header(k));
        out.push((name, value));
    }
    Ok(out)
}

/// `user:password@` from `--url`, as typed and percent-decoded.
#[derive(Debug, Clone)]
struct UserInfo {
    raw: String,
    raw_password: Option<String>,
    user: String,
    password: String,
}

/// Takes the credentials out of the request URI: they travel as HTTP Basic auth, never in
/// the URI (which is logged and exported).
fn split_userinfo(uri: Uri) -> Result<(Uri, Option<UserInfo>), ConfigError> {
    let Some(auth) = uri.authority().map(|a| a.as_str().to_string()) else {
        return Ok((uri, None));
    };
    let Some(at) = auth.rfind('@') else {
        return Ok((uri, None));
    };
    let raw = auth[..at].to_string();
    let (raw_user, raw_password) = match raw.split_once(':') {
        Some((u, p)) => (u, Some(p.to_string())),
        None => (raw.as_str(), None),
    };
    let decode = |s: &str| {
        percent_decode(s).ok_or_else(|| {
            bad("--url: the user name or password is not valid percent-encoded UTF-8; encode special characters as %XX")
        })
    };
    let info = UserInfo {
        user: decode(raw_user)?,
        password: decode(raw_password.as_deref().unwrap_or(""))?,
        raw_password,
        raw,
    };
    let mut parts = uri.into_parts();
    parts.authority = Some(auth[at + 1..].parse().map_err(|_| {
        bad("--url: no host after the credentials; give e.g. http://user:pass@host:8000")
    })?);
    let uri = Uri::from_parts(parts).map_err(|e| bad(format!("--url: {e}")))?;
    Ok((uri, Some(info)))
}

/// `%41` -> `A`; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Credentials in `--url` become `Authorization: Basic base64(user:password)`, unless
/// `--api-key` or an `Authorization` header says otherwise (then a warning says they are
/// not sent).
fn url_basic_auth(
    info: &UserInfo,
    api_key_given: bool,
    headers: &mut Vec<(HeaderName, HeaderValue)>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let explicit = headers
        .iter()
        .any(|(k, _)| k == http::header::AUTHORIZATION);
    if api_key_given || explicit {
        let by = if explicit {
            "-H Authorization"
        } else {
            "--api-key"
        };
        warnings.push(format!(
            "--url: the user name and password in the URL are not sent: {by} sets the Authorization header"
        ));
        return Ok(());
    }
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", info.user, info.password));
    let mut value = HeaderValue::from_str(&format!("Basic {token}"))
        .map_err(|_| bad("--url: the credentials cannot be sent in a header"))?;
    value.set_sensitive(true);
    headers.push((http::header::AUTHORIZATION, value));
    Ok(())
}

/// `--extra-inputs key:value` (value parsed as JSON when it is valid JSON, else a string), or
/// a JSON object.
fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ConfigError> {
    let mut out = Map::new();
    for item in items {
        if item.trim_start().starts_with('{') {
            let obj: Map<String, Value> = serde_json::from_str(item).map_err(|e| {
                bad(format!(
                    "--extra-inputs: '{item}' is not a JSON object ({e}); give key:value or a JSON object"
                ))
            })?;
            out.extend(obj);
        } else {
            let (k, v) = item.split_once(':').ok_or_else(|| {
                bad(format!(
                    "--extra-inputs: '{item}' is not key:value or a JSON object; e.g. ignore_eos:true"
                ))
            })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(bad(format!(
                    "--extra-inputs: '{item}' has an empty key; give key:value"
                )));
            }
            let v = v.trim();
            let value =
                serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::String(v.to_string()));
            out.insert(k.to_string(), value);
        }
    }
    Ok(out)
}

fn redact_header_arg(item: &str) -> String {
    match item.split_once(':') {
        Some((k, _)) if is_secret_header(k) => format!("{k}:***"),
        _ => item.to_string(),
    }
}

/// Headers whose values are credentials: never shown in the command line, logs or exports.
/// Broad on purpose: hiding a harmless value costs nothing, showing a token does.
pub fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    ["auth", "cookie", "key", "token", "secret", "password"]
        .iter()
        .any(|w| n.contains(w))
}

/// Every secret string the parsed flags carry: the API key, each secret header's value and
/// the URL's credentials (as typed and percent-decoded). The command line is redacted from
/// these values, so no spelling of a flag lets one through.
fn collect_secrets(
    api_key: Option<&str>,
    headers: &[(String, String)],
    userinfo: Option<&UserInfo>,
) -> Vec<String> {
    let mut out: Vec<String> = api_key.map(str::to_string).into_iter().collect();
    for (name, value) in headers {
        if is_secret_header(name) {
            out.push(value.clone());
        }
    }
    if let Some(u) = userinfo {
        out.extend([u.raw.clone(), u.password.clone()]);
        out.extend(u.raw_password.clone());
    }
    out.retain(|s| !s.trim().is_empty());
    // Longest first, so a secret that contains another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The command line as typed, shell-quoted, with every occurrence of a secret replaced by
/// `***`. A JSON object in an argument (the `-H '{"Authorization": ...}'` form) has its
/// secret headers' values replaced too, whatever escapes spell them.
pub fn redacted_command_line(args: &[String], secrets: &[String]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    for (i, arg) in args.iter().enumerate() {
        let shown = if i == 0 {
            "aiperf".to_string()
        } else {
            let mut shown = redact_json_headers(arg);
            for s in secrets {
                shown = shown.replace(s.as_str(), "***");
            }
            shown
        };
        out.push(shell_quote(&shown));
    }
    out.join(" ")
}

/// `{"Authorization": "Bearer x"}` (alone or after a flag, e.g. `--header={...}`) with
/// the values of secret headers replaced by `***`; other arguments unchanged.
fn redact_json_headers(arg: &str) -> String {
    let Some(start) = arg.find('{') else {
        return arg.to_string();
    };
    let Ok(mut obj) = serde_json::from_str::<Map<String, Value>>(&arg[start..]) else {
        return arg.to_string();
    };
    let mut changed = false;
    for (k, v) in obj.iter_mut() {
        if is_secret_header(k) {
            *v = Value::String("***".into());
            changed = true;
        }
    }
    if !changed {
        return arg.to_string();
    }
    format!("{}{}", &arg[..start], Value::Object(obj))
}

fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

// The command line's value enums, mapped to the stages' own types.

impl From<cli::EndpointType> for EndpointType {
    fn from(v: cli::EndpointType) -> Self {
        match v {
            cli::EndpointType::Chat => EndpointType::Chat,
            cli::EndpointType::Completions => EndpointType::Completions,
        }
    }
}

impl From<cli::UiType> for UiType {
    fn from(v: cli::UiType) -> Self {
        match v {
            cli::UiType::Dashboard => UiType::Dashboard,
            cli::UiType::Simple => UiType::Simple,
            cli::UiType::None => UiType::None,
        }
    }
}

impl From<cli::ImageFormat> for ImageFormat {
    fn from(v: cli::ImageFormat) -> Self {
        match v {
            cli::ImageFormat::Png => ImageFormat::Png,
            cli::ImageFormat::Jpeg => ImageFormat::Jpeg,
            cli::ImageFormat::Random => ImageFormat::Random,
        }
    }
}

impl From<cli::ImageSampling> for ImageSampling {
    fn from(v: cli::ImageSampling) -> Self {
        match v {
            cli::ImageSampling::RandomWithReplacement => ImageSampling::RandomWithReplacement,
            cli::ImageSampling::ShuffleCycle => ImageSampling::ShuffleCycle,
            cli::ImageSampling::SequentialCycle => ImageSampling::SequentialCycle,
        }
    }
}

impl From<cli::CustomDatasetType> for CustomDatasetType {
    fn from(v: cli::CustomDatasetType) -> Self {
        match v {
            cli::CustomDatasetType::SingleTurn => CustomDatasetType::SingleTurn,
            cli::CustomDatasetType::MultiTurn => CustomDatasetType::MultiTurn,
            cli::CustomDatasetType::RandomPool => CustomDatasetType::RandomPool,
            cli::CustomDatasetType::MooncakeTrace => CustomDatasetType::MooncakeTrace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<ProfileConfig, ConfigError> {
        let mut argv = vec!["aiperf", "profile", "-m", "org/model"];
        argv.extend_from_slice(extra);
        let cli = crate::cli::Cli::parse_with_sources(argv).expect("clap parse");
        match cli.command {
            crate::cli::Command::Profile(a) => ProfileConfig::from_args(&a, false),
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_follow_aiperf() {
        let c = parse(&[]).unwrap();
        assert_eq!(
            c.request_uri.to_string(),
            "http://localhost:8000/v1/chat/completions"
        );
        assert_eq!(c.concurrency, 1);
        assert_eq!(c.request_count, 10);
        assert_eq!(c.synthetic.isl_mean, 550.0);
        assert_eq!(c.synthetic.image_batch_size, 0);
        assert_eq!(c.tokenizer, "org/model");
        assert_eq!(
            c.artifact_dir,
            PathBuf::from("artifacts/org_model-chat-concurrency1")
        );
        assert_eq!(c.ui, UiType::None);
        assert_eq!(c.request_timeout, Duration::from_secs(21600));
    }

    #[test]
    fn request_count_defaults_to_twice_concurrency() {
        assert_eq!(parse(&["--concurrency", "8"]).unwrap().request_count, 16);
    }

    #[test]
    fn url_forms() {
        let c = parse(&["--url", "https://h:1/v1/", "--endpoint-type", "completions"]).unwrap();
        assert_eq!(c.request_uri.to_string(), "https://h:1/v1/completions");
        let c = parse(&["-u", "127.0.0.1:9", "--endpoint", "custom/path"]).unwrap();
        assert_eq!(c.request_uri.to_string(), "http://127.0.0.1:9/custom/path");
        let e = parse(&["-u", "ftp://x"]).unwrap_err().to_string();
        assert!(e.contains("--url") && e.contains("ftp"), "{e}");
        // A query stays after the endpoint path.
        let c = parse(&["-u", "h:1/?q=1"]).unwrap();
        assert_eq!(
            c.request_uri.to_string(),
            "http://h:1/v1/chat/completions?q=1"
        );
        let c = parse(&["-u", "http://h/v1?a=b", "--endpoint", "/v1/x?c=d"]).unwrap();
        assert_eq!(c.request_uri.to_string(), "http://h/v1/x?c=d&a=b");
        let c = parse(&["-u", "[::1]:8000"]).unwrap();
        assert_eq!(c.request_uri.port_u16(), Some(8000));
        for bad_port in ["127.0.0.1:99999", "host:abc", "h:0", "[::1]:70000"] {
            let e = parse(&["-u", bad_port]).unwrap_err().to_string();
            assert!(e.contains("1 to 65535"), "{bad_port}: {e}");
        }
    }

    #[test]
    fn extra_inputs_and_headers() {
        let c = parse(&[
            "--extra-inputs",
            "ignore_eos:true",
            "--extra-inputs",
            "min_tokens:5",
            "--extra-inputs",
            "note:hello world",
            "--extra-inputs",
            r#"{"temperature": 0.5}"#,
            "-H",
            "X-A: b",
        ])
        .unwrap();
        assert_eq!(c.extra_inputs["ignore_eos"], Value::Bool(true));
        assert_eq!(c.extra_inputs["min_tokens"], Value::from(5));
        assert_eq!(c.extra_inputs["note"], Value::from("hello world"));
        assert_eq!(c.extra_inputs["temperature"], Value::from(0.5));
        assert_eq!(c.headers[0].0.as_str(), "x-a");
        assert_eq!(c.headers[0].1, "b");
        let e = parse(&["--extra-inputs", "novalue"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--extra-inputs: 'novalue'"), "{e}");
    }

    #[test]
    fn contradictions_are_rejected_with_the_flag_named() {
        let cases: &[(&[&str], &str)] = &[
            (&["--concurrency", "0"], "--concurrency"),
            (&["--request-count", "0"], "--request-count"),
            (&["--output-tokens-stddev", "3"], "--output-tokens-stddev"),
            (&["--image-width-mean", "100"], "--image-width-mean"),
            (&["--isl", "0"], "--synthetic-input-tokens-mean"),
            (
                &["--request-timeout-seconds", "0"],
                "--request-timeout-seconds",
            ),
            (&["--num-dataset-entries", "0"], "--num-dataset-entries"),
        ];
        for (args, flag) in cases {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn artifact_directory_names_the_stimulus_as_aiperf_does() {
        let dir = |args: &[&str]| parse(args).unwrap().artifact_dir;
        assert_eq!(
            dir(&["--request-rate", "5"]),
            PathBuf::from("artifacts/org_model-chat-request_rate5.0")
        );
        assert_eq!(
            dir(&["--request-rate", "2.5", "--concurrency", "4"]),
            PathBuf::from("artifacts/org_model-chat-concurrency4-request_rate2.5")
        );
        assert_eq!(
            dir(&["--concurrency", "3"]),
            PathBuf::from("artifacts/org_model-chat-concurrency3")
        );
    }

    #[test]
    fn load_mode_flags() {
        let c = parse(&[
            "--request-rate",
            "10",
            "--request-rate-mode",
            "gamma",
            "--arrival-smoothness",
            "2",
        ])
        .unwrap();
        assert_eq!(
            c.load.rate,
            Some((10.0, ArrivalPattern::Gamma { shape: 2.0 }))
        );
        assert!(!c.load.concurrency_given);
        // Time-limited: no request limit, ids drawn for the expected sends plus a margin.
        let c = parse(&["--request-rate", "10", "--benchmark-duration", "3"]).unwrap();
        assert_eq!(c.load.count_limit(c.request_count), None);
        assert_eq!(c.request_count, 43);
        assert_eq!(c.load.grace, Some(Duration::from_secs(30)));
        let c = parse(&[
            "--benchmark-duration",
            "3",
            "--benchmark-grace-period",
            "inf",
        ])
        .unwrap();
        assert_eq!(c.load.grace, None);
        let c = parse(&[
            "--request-cancellation-rate",
            "25",
            "--request-cancellation-delay",
            "0.5",
        ])
        .unwrap();
        assert_eq!(
            c.load.cancellation,
            Some(Cancellation {
                share: 0.25,
                delay: Duration::from_millis(500)
            })
        );
        let cases: &[(&[&str], &str)] = &[
            (&["--request-rate", "0"], "--request-rate"),
            (&["--request-rate", "NaN"], "--request-rate"),
            (&["--arrival-smoothness", "2"], "--arrival-smoothness"),
            (&["--request-rate-mode", "constant"], "--request-rate-mode"),
            (&["--benchmark-grace-period=-1"], "--benchmark-grace-period"),
            (
                &["--warmup-duration", "1", "--warmup-request-count", "2"],
                "--warmup-duration",
            ),
            (
                &["--request-cancellation-rate", "0"],
                "--request-cancellation-rate",
            ),
        ];
        for (args, flag) in cases {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn conversation_and_warmup_flags() {
        // AIPerf's aliases reach the same fields.
        let c = parse(&[
            "--num-sessions",
            "6",
            "--session-turns-mean",
            "3",
            "--session-turns-stddev",
            "1",
            "--session-turn-delay-mean",
            "200",
            "--session-turn-delay-stddev",
            "50",
            "--session-delay-ratio",
            "0.5",
        ])
        .unwrap();
        assert_eq!(c.load.sessions, Some(6));
        assert_eq!(
            c.synthetic.turns,
            TurnOptions {
                mean: 3,
                stddev: 1.0,
                delay_mean_ms: 200.0,
                delay_stddev_ms: 50.0,
                delay_ratio: 0.5,
            }
        );
        // Counted in conversations: no request limit unless one is given.
        assert_eq!(c.load.count_limit(c.request_count), None);
        assert_eq!(c.synthetic.num_entries, 6);
        let c = parse(&["--conversation-num", "6", "--benchmark-duration", "4"]).unwrap();
        assert_eq!(c.load.count_limit(c.request_count), None);
        assert_eq!(c.load.sessions, Some(6));

        let c = parse(&[
            "--concurrency",
            "4",
            "--request-rate",
            "10",
            "--num-warmup-sessions",
            "2",
            "--warmup-duration",
            "3",
            "--warmup-grace-period",
            "1.5",
            "--warmup-concurrency",
            "1",
            "--warmup-arrival-pattern",
            "constant",
        ])
        .unwrap();
        let w = &c.load.warmup;
        assert_eq!(w.sessions, Some(2));
        assert_eq!(w.grace, Some(Duration::from_millis(1500)));
        assert_eq!(w.concurrency, Some(1));
        // The warmup keeps the profiling rate but takes its own arrival pattern.
        assert_eq!(w.rate, Some((10.0, ArrivalPattern::Constant)));
        let w = parse(&["--warmup-request-rate", "5"]).unwrap().load.warmup;
        assert_eq!(w.rate, Some((5.0, ArrivalPattern::Poisson)));
        assert_eq!(parse(&[]).unwrap().load.warmup, WarmupOptions::default());

        let cases: &[(&[&str], &str)] = &[
            (&["--conversation-num", "0"], "--conversation-num"),
            (
                &["--conversation-num", "3", "--request-count", "9"],
                "--conversation-num",
            ),
            (
                &["--conversation-turn-mean", "0"],
                "--conversation-turn-mean",
            ),
            (
                &["--conversation-turn-stddev=-1"],
                "--conversation-turn-stddev",
            ),
            (
                &["--conversation-turn-delay-mean=-5"],
                "--conversation-turn-delay-mean",
            ),
            (
                &["--conversation-turn-delay-ratio", "0"],
                "--conversation-turn-delay-ratio",
            ),
            (
                &["--num-warmup-sessions", "2", "--warmup-request-count", "2"],
                "--num-warmup-sessions",
            ),
            (&["--warmup-concurrency", "0"], "--warmup-concurrency"),
            (&["--warmup-request-rate", "0"], "--warmup-request-rate"),
            (
                &["--warmup-arrival-pattern", "constant"],
                "--warmup-arrival-pattern",
            ),
            (&["--warmup-grace-period=-1"], "--warmup-grace-period"),
            (
                &["--input-file", "x.jsonl", "--conversation-turn-mean", "3"],
                "--conversation-turn-",
            ),
        ];
        for (args, flag) in cases {
            let e = parse(args).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn images_on_only_with_both_sizes() {
        let c = parse(&["--image-width-mean", "512", "--image-height-mean", "256"]).unwrap();
        assert_eq!(c.synthetic.image_batch_size, 1);
        assert_eq!(c.synthetic.image_width_mean, 512.0);
    }

    #[test]
    fn secrets_are_redacted_from_the_command_line() {
        let argv: Vec<String> = [
            "target/aiperf",
            "profile",
            "--api-key",
            "sk-123",
            "-H",
            "Authorization: Bearer x",
            "X-Plain: 1",
            "-HCookie: c=1",
            r#"--header={"X-Api-Key": "k\u0041y"}"#,
            "--url",
            "http://me:p%40ss@h:9",
            "--model",
            "a b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = parse(&argv[2..].iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        let line = redacted_command_line(&argv, &c.secrets);
        for leak in ["sk-", "Bearer", "c=1", "kAy", "u0041", "me:", "p%40ss"] {
            assert!(!line.contains(leak), "{leak} in {line}");
        }
        assert_eq!(
            line,
            "aiperf profile --api-key '***' -H 'Authorization: ***' 'X-Plain: 1' '-HCookie: ***' \
             '--header={\"X-Api-Key\":\"***\"}' --url 'http://***@h:9' --model 'a b'"
        );
    }

    #[test]
    fn url_credentials_become_basic_auth_and_leave_the_uri() {
        let c = parse(&["--url", "http://me:p%40ss@h:9"]).unwrap();
        assert_eq!(c.request_uri.to_string(), "http://h:9/v1/chat/completions");
        let auth = c
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap();
        // base64("me:p@ss")
        assert_eq!(auth.1, "Basic bWU6cEBzcw==");
        // An explicit Authorization wins; the URL's credentials are not sent.
        let c = parse(&["--url", "http://me:pw@h:9", "-H", "Authorization: Bearer t"]).unwrap();
        assert_eq!(c.headers.len(), 1);
        assert_eq!(c.headers[0].1, "Bearer t");
        assert_eq!(c.warnings.len(), 1);
    }
}
