//! The validated run configuration. Every cross-flag check lives here, so a bad command line
//! stops before anything is built or sent.

use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};
use serde_json::{Map, Value};

pub use self::collectors::NetworkLatency;
pub use self::control_hooks::{ControlHooks, Posts};
pub use self::gpu_telemetry::GpuTelemetryOptions;
use self::limits::Zero;
pub use self::publish::{DEFAULT_ARTIFACT_GLOBS, MlflowOptions, PublishOptions, WandbOptions};
use crate::cli::ProfileArgs;
use crate::dataset::InputOptions;
use crate::dataset::{MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS, SyntheticOptions};
use crate::endpoint::{EndpointType, ModelSelection};
use crate::transport::ConnectionReuse;
use crate::ui::{LogDetail, UiType};

mod accuracy;
pub mod adaptive;
mod baseten;
mod cache_bust;
pub mod chat;
mod collectors;
mod control_hooks;
mod endpoint;
mod enums;
mod gpu_telemetry;
mod inputs;
pub(crate) mod limits;
mod load;
mod logging;
mod media;
pub mod multirun;
mod non_chat;
mod otel;
mod output;
mod prompt;
mod public_dataset;
mod publish;
pub mod recipes;
mod redact;
mod shard;

use self::endpoint::*;
use self::inputs::*;
pub use self::load::*;
pub use self::otel::OtelOptions;
pub use self::redact::*;
pub use self::shard::{ShardOptions, parse_wall_time};
use crate::dataset::custom::first_record_has_timestamp;
pub use crate::load::{LoadOptions, WarmupOptions};

/// A command-line problem: one line naming the flag, the value and what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The error for one bad flag or flag combination, from its one-line message.
fn config_error(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

#[derive(Debug, Clone)]
pub struct ProfileConfig {
    /// The model sent in every request (the first of `--model-names`).
    pub model: String,
    pub endpoint_type: EndpointType,
    /// Every server's request URI (`--url` repeated): base URL + endpoint path; never empty.
    pub request_uris: Vec<Uri>,
    /// KV-cache reset and profiler requests to the servers besides the load.
    pub control_hooks: ControlHooks,
    /// Every `--model` name, the first being `model`.
    pub models: Vec<String>,
    pub model_selection: ModelSelection,
    pub connection_reuse: ConnectionReuse,
    /// `--session-header`: carries each request's session id.
    pub session_header: HeaderName,
    pub streaming: bool,
    pub request_timeout: Duration,
    /// `--workers-max`: the sender threads (`None`: one per core).
    pub workers_max: Option<usize>,
    pub max_response_bytes: u64,
    pub api_key: Option<String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Merged at top level into every request body.
    pub extra_inputs: Map<String, Value>,
    pub use_server_token_count: bool,
    pub use_legacy_max_tokens: bool,
    pub mock_server: bool,
    pub tokenizer: String,
    pub tokenizer_revision: String,
    /// `--apply-chat-template`: ISL through the tokenizer's chat template.
    pub apply_chat_template: bool,
    /// Video generation: how each job is polled, and whether its video is downloaded.
    pub video_polling: Option<crate::transport::VideoPolling>,
    pub synthetic: SyntheticOptions,
    pub concurrency: u64,
    pub request_count: u64,
    pub warmup_request_count: u64,
    pub goodput: Option<String>,
    /// `--goodput` read into its objectives.
    pub goodput_slos: Vec<crate::metrics::GoodputSlo>,
    pub artifact_dir: PathBuf,
    /// Which export files are written and their names.
    pub export: crate::export::Options,
    pub ui: UiType,
    /// `--prometheus-port` (and host): where the live metrics endpoint listens.
    pub prometheus: Option<std::net::SocketAddr>,
    /// Log level from --log-level, -v and -vv.
    pub log_detail: LogDetail,
    /// The seed actually used (given, or drawn from entropy and recorded).
    pub random_seed: u64,
    /// The typed flags with a place in AIPerf's config, and their values as typed: the
    /// echoed `input_config` shows each at its path.
    pub typed_settings: Vec<(&'static crate::cli::flags::Flag, Vec<String>)>,
    /// Image source, input file and their options.
    pub inputs: InputOptions,
    /// `--accuracy-benchmark`: the benchmark whose questions are sent and graded.
    pub accuracy: Option<crate::accuracy::AccuracyOptions>,

    /// How to handle failures, interruption and an unready server.
    pub failures: FailureOptions,
    /// Load mode, stop conditions, warmup duration and cancellation.
    pub load: LoadOptions,
    /// Secret strings to hide wherever the command line is shown.
    pub secrets: Vec<String>,
    /// Flags accepted but without effect, for the log once it is set up.
    pub warnings: Vec<String>,
    /// Flags accepted that have no effect in this build (one info line each).
    pub accepted_without_effect: Vec<String>,
    /// Scrape the server's Prometheus `/metrics` (None: off).
    pub server_metrics: Option<ScrapeOptions>,
    /// How many of `server_metrics.urls` come first from `--url` (replaced by `set_base_url`).
    pub server_metrics_from_url: usize,
    /// Scrape DCGM exporters for GPU telemetry (None: off).
    pub gpu_telemetry: Option<GpuTelemetryOptions>,
    /// `--network-latency-*`: the round trip subtracted from send-anchored latencies.
    pub network_latency: Option<collectors::NetworkLatency>,
    /// This run's part of a plan shared by several load generators, and its start time.
    pub shard: ShardOptions,
    /// Synthetic queries and passages (rankings endpoint types without an input file).
    pub rankings: Option<crate::dataset::rankings::RankingsOptions>,
    /// Push live metrics to an OpenTelemetry collector (None: off).
    pub otel: Option<OtelOptions>,
}

/// Which Prometheus endpoints a side collector scrapes, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeOptions {
    /// The endpoints, without any credentials they were given with (these URLs are shown).
    pub urls: Vec<String>,
    /// `Authorization: Basic` of each endpoint given as `user:password@...` (by its URL).
    pub auth: Vec<(String, http::HeaderValue)>,
    pub timing: crate::scrape::ScrapeTiming,
}

impl ScrapeOptions {
    /// The `Authorization` header of endpoint `url`, if it was given credentials.
    pub fn auth_of(&self, url: &str) -> Option<http::HeaderValue> {
        self.auth
            .iter()
            .find(|(u, _)| u == url)
            .map(|(_, v)| v.clone())
    }
}

/// What the run does about failures, interruption and a server that is not up yet.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureOptions {
    /// Poll the server until it answers, for at most this long (`None`: do not wait).
    pub wait_for_model: Option<Duration>,
    pub wait_for_model_interval: Duration,
    /// What the wait waits for.
    pub wait_for_model_mode: ReadinessProbe,
    /// Stop early when failed / finished exceeds this share.
    pub failed_request_threshold: Option<f64>,
    /// Time in-flight requests get after Ctrl-C or an early stop.
    pub grace_period: Duration,
}

/// `--wait-for-model-mode`: when the server counts as ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadinessProbe {
    /// `GET /v1/models` answers 2xx and lists the model.
    Models,
    /// A one-token request succeeds.
    Inference,
    /// Models, then inference.
    Both,
}

impl ProfileConfig {
    /// Something shows the run live (the dashboard, the Prometheus endpoint, the
    /// OpenTelemetry timing stream): the collector then keeps live figures and publishes them.
    pub fn wants_live_figures(&self) -> bool {
        self.ui == UiType::Dashboard
            || self.prometheus.is_some()
            || self.otel.as_ref().is_some_and(|o| o.timing)
    }

    /// Validates the parsed flags. `is_terminal` decides the default UI.
    pub fn from_args(a: &ProfileArgs, is_terminal: bool) -> Result<Self, ConfigError> {
        let model = a
            .model_names
            .iter()
            .find(|m| !m.trim().is_empty())
            .cloned()
            .ok_or_else(|| {
                config_error(
                    "--model: a model name is required, e.g. --model Qwen/Qwen2-VL-2B-Instruct",
                )
            })?;

        let endpoint_type = a.endpoint_type;
        if let Some(needs) = endpoint_type.unsupported() {
            return Err(config_error(format!(
                "--endpoint-type {} is not supported by this build of aiperf ({needs}); use another endpoint type",
                endpoint_type.as_str()
            )));
        }
        if a.load.download_video_content && endpoint_type != EndpointType::VideoGeneration {
            return Err(config_error(format!(
                "--download-video-content downloads the videos of --endpoint-type video_generation; \
                 --endpoint-type {} makes none: drop the flag",
                endpoint_type.as_str()
            )));
        }
        let mut warnings = a.config_overridden.clone();
        let streaming = non_chat::streaming(a, endpoint_type, &mut warnings)?;
        // TGI streams from a path of its own.
        let custom_endpoint = a
            .custom_endpoint
            .as_deref()
            .or(endpoint_type.streaming_path().filter(|_| streaming));
        let (request_uris, userinfo) = build_request_uris(&a.url, custom_endpoint, endpoint_type)?;
        let servers = check_servers_and_models(a, endpoint_type, &mut warnings)?;

        let request_timeout = limits::seconds(
            "--request-timeout-seconds",
            a.request_timeout_seconds,
            Zero::Refused,
        )?;

        let concurrency = a.concurrency.unwrap_or(1);
        check_counts(a)?;
        let load = check_load_modes(a, streaming, &mut warnings)?;
        let shard = shard::check_shard(a, &load, concurrency)?;
        if let (true, Some(n)) = (load.fixed_schedule, a.request_count) {
            warnings.push(format!(
                "--request-count {n} is ignored: a fixed schedule sends every entry of the input file in its window"
            ));
        }
        if load.fixed_schedule && a.dataset.dataset_sampling_strategy.is_some() {
            return Err(config_error(
                "--dataset-sampling-strategy cannot be used with a fixed schedule: the timestamps set the order; drop it",
            ));
        }
        let request_count = planned_request_count(&load, concurrency);
        check_rate_span(&load, request_count, &mut warnings)?;
        let turns = check_turns(a)?;

        let osl_stddev = check_token_lengths(a)?;

        let images = check_images(a, endpoint_type)?;
        if a.use_legacy_max_tokens
            && matches!(
                endpoint_type,
                EndpointType::Responses | EndpointType::Messages
            )
        {
            return Err(config_error(format!(
                "--use-legacy-max-tokens: --endpoint-type {} has its own output limit field (max_output_tokens for responses, max_tokens for messages); drop the flag",
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

        let Credentials {
            api_key,
            headers,
            mut secrets,
        } = credentials(a, userinfo.as_ref(), &mut warnings)?;
        // `--mlflow-*` / `--wandb-*` are used after the run (`publish`), checked here so a bad
        // flag stops the run before it starts. The tracking server's password is hidden
        // wherever the command line is shown.
        let publish = PublishOptions::from_args(&a.publish)?;
        if let Some(ui) = publish.mlflow.as_ref().and_then(|m| m.userinfo.as_ref()) {
            secrets.extend(
                ui.split_once(':')
                    .map(|(_, p)| p.to_string())
                    .filter(|p| !p.is_empty()),
            );
        }
        let extra_inputs = parse_extra_inputs(&a.extra_inputs)?;
        let rankings = non_chat::check(a, endpoint_type, &extra_inputs)?;
        let goodput_slos = goodput_slos(a)?;

        let random_seed = a.random_seed.unwrap_or_else(rand::random::<u64>);

        // Only as many entries as can ever be sent are built: the rest would never leave
        // the client, and building them would only delay the first request.
        let warmup_requests = a.warmup_request_count + load.warmup.sessions.unwrap_or(0);
        // Requests are turns: with several turns per conversation, fewer conversations
        // can ever start; counted conversations start at most one per request.
        let conversations_needed = match load.sessions {
            Some(n) => n.min(request_count) + warmup_requests,
            None => (request_count + warmup_requests).div_ceil(turns.mean),
        };
        let num_entries = a
            .num_dataset_entries
            .min(conversations_needed as usize)
            .max(1);

        let seq_dist = prompt::seq_dist(a)?;
        // The lengths --seq-dist overrides draw nothing and set no output limit.
        let (isl_stddev, osl_mean, osl_stddev) = match seq_dist {
            Some(_) => (0.0, None, 0.0),
            None => (a.isl_stddev, a.osl_mean.map(|v| v as f64), osl_stddev),
        };
        let synthetic = SyntheticOptions {
            num_entries,
            isl_mean: a.isl_mean as f64,
            isl_stddev,
            osl_mean,
            osl_stddev,
            image_width_mean: a.image_width_mean,
            image_width_stddev: images.width_stddev,
            image_height_mean: a.image_height_mean,
            image_height_stddev: images.height_stddev,
            image_format: a.image_format.into(),
            image_batch_size: if images.on { a.image_batch_size } else { 0 },
            seed: Some(random_seed),
            turns,
            media: media::media_options(a, endpoint_type)?,
        };

        if a.input_file.is_none() {
            check_dataset_memory(&synthetic)?;
        }
        let public = public_dataset::public_options(
            a,
            &synthetic,
            endpoint_type,
            conversations_needed as usize,
            &mut warnings,
        )?;

        let accuracy = accuracy::accuracy(
            a,
            &synthetic,
            endpoint_type,
            load.fixed_schedule,
            &mut warnings,
        )?;
        let artifact_dir = artifact_dir(a, &model, servers.models.len(), &load, concurrency);

        // As AIPerf: the dashboard in a terminal unless -v/-vv ask for log lines.
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        let ui = match a.ui_type {
            Some(crate::cli::UiType::Dashboard) if !is_terminal || dumb => {
                warnings.push(
                    "--ui-type dashboard needs a terminal (stderr is not one, or TERM=dumb): showing a progress bar instead"
                        .to_string(),
                );
                UiType::Simple
            }
            Some(u) => u.into(),
            None if a.verbose || a.logging.extra_verbose || (is_terminal && dumb) => UiType::Simple,
            None if is_terminal => UiType::Dashboard,
            None => UiType::None,
        };

        let failures = check_failures_and_inputs(a)?;
        let interval_env = std::env::var(collectors::INTERVAL_ENV).ok();
        let (server_metrics, server_metrics_formats) =
            collectors::server_metrics(&a.collectors, &a.url, interval_env.as_deref())?;
        let server_metrics_from_url = {
            let mut seen: Vec<String> = a
                .url
                .iter()
                .map(|u| collectors::server_metrics_url_of(u))
                .collect();
            seen.dedup();
            seen.len()
        };
        let network_latency = collectors::network_latency(&a.collectors)?;
        let prometheus = output::prometheus_addr(&a.output)?;
        let mut export = output::export_options(&a.output)?;
        export.raw = output::raw_options(
            &a.output,
            endpoint_type,
            api_key.as_deref(),
            &headers,
            &servers.session_header,
        )?;
        let otel = otel::otel_options(&a.otel, &mut warnings)?;
        export.server_metrics_formats = server_metrics_formats;
        check_image_flags_used(a, images.on)?;
        warnings.extend(unused_flag_warnings(a, &synthetic.turns));

        let control_hooks = control_hooks::control_hooks(&a.control_hooks, &request_uris)?;
        Ok(ProfileConfig {
            tokenizer: a.tokenizer.clone().unwrap_or_else(|| model.clone()),
            model,
            endpoint_type,
            rankings,
            control_hooks,
            request_uris,
            models: servers.models,
            model_selection: servers.model_selection,
            connection_reuse: servers.connection_reuse,
            session_header: servers.session_header,
            streaming,
            request_timeout,
            workers_max: a.service.workers_max.map(|n| n as usize),
            max_response_bytes: a.max_response_bytes,
            api_key,
            headers,
            secrets,
            extra_inputs,
            use_server_token_count: a.use_server_token_count,
            use_legacy_max_tokens: a.use_legacy_max_tokens,
            mock_server: a.mock_server,
            tokenizer_revision: a.tokenizer_revision.clone(),
            apply_chat_template: endpoint::apply_chat_template(a, endpoint_type)?,
            video_polling: match endpoint_type {
                EndpointType::VideoGeneration => Some(crate::transport::VideoPolling {
                    // AIPerf's setting and bounds.
                    interval: otel::env_seconds(
                        "AIPERF_HTTP_VIDEO_POLL_INTERVAL",
                        0.1,
                        0.001,
                        10.0,
                    )?,
                    download: a.load.download_video_content,
                }),
                _ => None,
            },
            synthetic,
            concurrency,
            request_count,
            warmup_request_count: a.warmup_request_count,
            goodput: a.goodput.clone(),
            goodput_slos,
            artifact_dir,
            export,
            ui,
            prometheus,
            log_detail: logging::log_detail(a),
            accepted_without_effect: logging::accepted_without_effect(a),
            server_metrics,
            server_metrics_from_url,
            gpu_telemetry: gpu_telemetry::gpu_telemetry(a)?,
            network_latency,
            otel,
            random_seed,
            typed_settings: typed_settings(a),
            inputs: InputOptions {
                shaping: prompt::prompt_shaping(a, endpoint_type)?,
                seq_dist,
                prompt_batch_size: prompt::prompt_batch_size(a, endpoint_type)?,
                range_ratio: prompt::range_ratio(a)?,
                public,
                cache_bust: cache_bust::cache_bust(a, endpoint_type)?,
                ..input_options(a)?
            },
            accuracy,

            failures,
            load,
            warnings,
            shard,
        })
    }

    /// Points the run at another base URL (used by `--mock-server`), keeping the path.
    pub fn set_base_url(&mut self, base: &str) -> Result<(), ConfigError> {
        let path = self
            .request_uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        self.request_uris = vec![build_request_uri(base, Some(&path), self.endpoint_type)?];
        // The default scrape endpoints follow the server.
        if let Some(sm) = &mut self.server_metrics {
            let n = self.server_metrics_from_url.min(sm.urls.len());
            sm.urls.drain(..n);
            let url = collectors::server_metrics_url_of(base);
            sm.urls.retain(|u| *u != url);
            sm.urls.insert(0, url);
            self.server_metrics_from_url = 1;
        }
        Ok(())
    }

    /// The first server's request URI.
    pub fn request_uri(&self) -> &Uri {
        &self.request_uris[0]
    }
}

/// Synthetic image sizes: both or neither, for an endpoint type that takes images.
struct ImageSizes {
    on: bool,
    width_stddev: f64,
    height_stddev: f64,
}

/// The synthetic image flags checked together.
fn check_images(a: &ProfileArgs, endpoint_type: EndpointType) -> Result<ImageSizes, ConfigError> {
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
        return Err(config_error(format!(
            "--image-width-mean {} / --image-height-mean {}: give both a width and a height > 0 for images, or neither",
            a.image_width_mean, a.image_height_mean
        )));
    }
    if images_on && !endpoint_type.takes_images() {
        return Err(config_error(format!(
            "--image-width-mean/--image-height-mean: images need --endpoint-type chat, responses, messages, chat_embeddings, nim_embeddings, image_edit or image_retrieval, not {}",
            endpoint_type.as_str()
        )));
    }
    Ok(ImageSizes {
        on: images_on,
        width_stddev,
        height_stddev,
    })
}

/// Requests the run plans for: the count given, or enough ids and order for a run limited by
/// time (more are derived on the fly; the progress bar counts toward it) or by sessions
/// (each conversation's first turn; the run takes the exact number of turns once the plan is
/// drawn).
fn planned_request_count(load: &LoadOptions, concurrency: u64) -> u64 {
    match (load.request_count_given, load.duration) {
        (Some(n), _) => n,
        (None, Some(d)) => match load.rate {
            Some((rate, _)) => ((rate * d.as_secs_f64() * 1.1).ceil() as u64 + 10).min(1_000_000),
            None => 10_000,
        },
        (None, None) => match load.sessions {
            Some(n) => n,
            None => (concurrency * 2).max(10),
        },
    }
}

/// `--isl`/`--osl` and their spreads within bounds; the OSL spread (0 when not given).
fn check_token_lengths(a: &ProfileArgs) -> Result<f64, ConfigError> {
    limits::count(
        "--synthetic-input-tokens-mean/--isl",
        a.isl_mean,
        MAX_INPUT_TOKENS,
        "tokens",
        "",
    )?;
    check_stddev("--synthetic-input-tokens-stddev", a.isl_stddev)?;
    if let Some(osl) = a.osl_mean {
        limits::count(
            "--output-tokens-mean/--osl",
            osl,
            MAX_OUTPUT_TOKENS,
            "tokens",
            " (the longest context window any model offers)",
        )?;
    }
    if a.osl_stddev.is_some() && a.osl_mean.is_none() {
        return Err(config_error(
            "--output-tokens-stddev needs --output-tokens-mean: give a mean as well, or drop the stddev",
        ));
    }
    let osl_stddev = a.osl_stddev.unwrap_or(0.0);
    check_stddev("--output-tokens-stddev", osl_stddev)?;
    Ok(osl_stddev)
}

/// What a request carries to prove who sends it, and what must never be shown.
struct Credentials {
    api_key: Option<String>,
    /// `-H` headers, with `--url`'s credentials as Basic auth.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Every secret string the flags carry, scrape URLs' credentials included.
    secrets: Vec<String>,
}

/// The run's credentials from `--api-key`, `-H` and the credentials inside URLs.
fn credentials(
    a: &ProfileArgs,
    userinfo: Option<&UserInfo>,
    warnings: &mut Vec<String>,
) -> Result<Credentials, ConfigError> {
    let header_pairs = parse_header_pairs(&a.headers)?;
    let mut headers = header_values(&header_pairs)?;
    let api_key = a.api_key.clone().filter(|k| !k.is_empty());
    if let Some(key) = &api_key {
        check_api_key(key)?;
    }
    if let Some(info) = userinfo {
        url_basic_auth(info, api_key.is_some(), &mut headers, warnings)?;
    }
    // The scrape URLs' credentials are secrets too (their URLs are shown without them).
    let scrape_userinfo: Vec<UserInfo> = a
        .collectors
        .server_metrics
        .iter()
        .chain(&a.collectors.gpu_telemetry)
        .flatten()
        .flat_map(|item| item.split(','))
        .filter_map(|item| scrape_credentials(item.trim()).1)
        .collect();
    let all_userinfo: Vec<&UserInfo> = userinfo.into_iter().chain(&scrape_userinfo).collect();
    let secrets = collect_secrets(api_key.as_deref(), &header_pairs, &all_userinfo);
    Ok(Credentials {
        api_key,
        headers,
        secrets,
    })
}

/// `--goodput` read into its objectives (none when not given).
fn goodput_slos(a: &ProfileArgs) -> Result<Vec<crate::metrics::GoodputSlo>, ConfigError> {
    match &a.goodput {
        Some(g) if g.trim().is_empty() => Err(config_error(
            "--goodput: empty; give SLOs like \"request_latency:250 inter_token_latency:10\"",
        )),
        Some(g) => {
            crate::metrics::parse_goodput(g).map_err(|e| config_error(format!("--goodput: {e}")))
        }
        None => Ok(Vec::new()),
    }
}

/// The typed flags that have a place in AIPerf's config, with their values as typed.
fn typed_settings(a: &ProfileArgs) -> Vec<(&'static crate::cli::flags::Flag, Vec<String>)> {
    a.typed_values
        .iter()
        .filter_map(|(id, raw)| {
            let flag = crate::cli::flags::by_id(id)?;
            flag.path.map(|_| (flag, raw.clone()))
        })
        .collect()
}

/// `--artifact-dir`, or AIPerf's default name from the model, endpoint type and load.
fn artifact_dir(
    a: &ProfileArgs,
    model: &str,
    models: usize,
    load: &LoadOptions,
    concurrency: u64,
) -> PathBuf {
    match &a.artifact_dir {
        Some(d) => d.clone(),
        None => PathBuf::from("artifacts").join(format!(
            "{}{}-{}-{}",
            model.replace('/', "_"),
            if models > 1 { "_multi" } else { "" },
            a.endpoint_type.as_str(),
            stimulus_name(load, concurrency)
        )),
    }
}

// The command line's value enums, mapped to the stages' own types.

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::TurnOptions;
    use crate::load::Cancellation;
    use crate::load::schedule::ArrivalPattern;

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
    fn the_prometheus_endpoint_listens_locally_unless_told_otherwise() {
        let addr = |extra: &[&str]| parse(extra).map(|c| c.prometheus.map(|a| a.to_string()));
        assert_eq!(addr(&[]).unwrap(), None);
        assert_eq!(
            addr(&["--prometheus-port", "9400"]).unwrap().as_deref(),
            Some("127.0.0.1:9400")
        );
        let wide = ["--prometheus-port", "9400", "--prometheus-host", "0.0.0.0"];
        assert_eq!(addr(&wide).unwrap().as_deref(), Some("0.0.0.0:9400"));
        let v6 = ["--prometheus-port", "0", "--prometheus-host", "::1"];
        assert_eq!(addr(&v6).unwrap().as_deref(), Some("[::1]:0"));
        let e = addr(&["--prometheus-host", "0.0.0.0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs --prometheus-port"), "{e}");
        let bad = [
            "--prometheus-port",
            "1",
            "--prometheus-host",
            "no such host!",
        ];
        let e = addr(&bad).unwrap_err().to_string();
        assert!(e.contains("--prometheus-host"), "{e}");
    }

    #[test]
    fn defaults_follow_aiperf() {
        let c = parse(&[]).unwrap();
        assert_eq!(
            c.request_uri().to_string(),
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
        assert_eq!(c.request_uri().to_string(), "https://h:1/v1/completions");
        let c = parse(&["-u", "127.0.0.1:9", "--endpoint", "custom/path"]).unwrap();
        assert_eq!(
            c.request_uri().to_string(),
            "http://127.0.0.1:9/custom/path"
        );
        let e = parse(&["-u", "ftp://x"]).unwrap_err().to_string();
        assert!(e.contains("--url") && e.contains("ftp"), "{e}");
        // A query stays after the endpoint path.
        let c = parse(&["-u", "h:1/?q=1"]).unwrap();
        assert_eq!(
            c.request_uri().to_string(),
            "http://h:1/v1/chat/completions?q=1"
        );
        let c = parse(&["-u", "http://h/v1?a=b", "--endpoint", "/v1/x?c=d"]).unwrap();
        assert_eq!(c.request_uri().to_string(), "http://h/v1/x?c=d&a=b");
        let c = parse(&["-u", "[::1]:8000"]).unwrap();
        assert_eq!(c.request_uri().port_u16(), Some(8000));
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
    fn a_slow_rate_is_announced_with_the_length_of_its_run() {
        let c = parse(&["--request-rate", "0.01", "--request-count", "100"]).unwrap();
        assert_eq!(
            c.warnings,
            [
                "--request-rate 0.01: 100 requests take about 2.8 hours to send; the rate is requests per second (--benchmark-duration bounds the run)"
            ]
        );
        for quick in [
            &["--request-rate", "1", "--request-count", "100"][..],
            &["--request-rate", "1e-9", "--benchmark-duration", "60"],
        ] {
            assert!(parse(quick).unwrap().warnings.is_empty(), "{quick:?}");
        }
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
        assert_eq!(
            c.request_uri().to_string(),
            "http://h:9/v1/chat/completions"
        );
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
