//! `aiperf profile`, as a short pipeline: prepare (tokenizer, dataset, request bodies) ->
//! run the phases while the collector takes each finished record -> export. Run control
//! (signals, the failure watch, early stops) lives in `control`.

pub mod auto_plot;
mod collect;
mod control;
mod control_hooks;
mod gpu_telemetry;
mod network_probe;
mod observe;
mod phases;
mod prepare;
mod report;
mod server_metrics;
pub mod shard;
mod template_probe;

pub use crate::dataset::input_lines::read_once as read_input_once;
pub use collect::RecordPath;
pub use template_probe::PROBE_REQUEST_ID;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use anyhow::Context;
use tracing::{info, warn};

use self::collect::Collection;
use self::control::RunControl;
use crate::cli::ProfileArgs;
use crate::clock::Clock;
use crate::config::{ConfigError, ProfileConfig};
use crate::dataset::BuildError;
use crate::endpoint::EndpointMismatch;
use crate::load::senders::{SenderThreads, Spawner};
use crate::load::{LoadContext, SendPlan};
use crate::overhead::OverheadMonitor;
use crate::transport::HttpClient;
use crate::ui::UiType;
use crate::{export, mock, ui};

/// How a profile run ended; `main` turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Requests completed and at least one succeeded.
    Success,
    /// The run finished but every request failed.
    AllFailed,
    /// The user pressed Ctrl-C; partial results were written.
    Interrupted,
    /// The failed share passed `--failed-request-threshold`; the run stopped early.
    ThresholdExceeded,
    /// Every connection was refused; the run stopped early.
    ServerUnreachable,
    /// The server answered, then refused connection after connection; the run stopped early.
    ServerLost,
    /// SIGTERM; partial results were written.
    Terminated,
    /// `profile_export.jsonl` could not be written; the run stopped early.
    WriteFailed,
    /// A sweep or repeated run where only one of several runs succeeded (no aggregate).
    TooFewRuns,
}

/// Why a profile run could not run or finish; `main` maps each to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Bad command line: nothing was sent.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The dataset could not be built (bad input file, image directory, ...).
    #[error(transparent)]
    Dataset(#[from] BuildError),
    /// The dataset does not fit the endpoint: nothing was sent.
    #[error(transparent)]
    Endpoint(#[from] EndpointMismatch),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Outcome {
    /// Why a run that did not succeed failed, in a few words (for sweep and multi-run
    /// summaries); `None` for a success.
    pub fn failure(self) -> Option<&'static str> {
        Some(match self {
            Outcome::Success => return None,
            Outcome::AllFailed => "every request failed",
            Outcome::Interrupted => "interrupted (Ctrl-C)",
            Outcome::ThresholdExceeded => {
                "stopped early: failed requests exceeded --failed-request-threshold"
            }
            Outcome::ServerUnreachable => "stopped early: the server refused every connection",
            Outcome::ServerLost => "stopped early: the server stopped answering",
            Outcome::Terminated => "terminated (SIGTERM)",
            Outcome::WriteFailed => "stopped early: profile_export.jsonl could not be written",
            Outcome::TooFewRuns => "only one run succeeded",
        })
    }
}

/// What one run loaded that the next run of a sweep can reuse.
#[derive(Default)]
pub struct Reuse {
    /// The tokenizer, keyed by (--tokenizer, --tokenizer-revision).
    tokenizer: Option<(String, String, Arc<crate::tokenizer::Tokenizer>)>,
    /// The last request bodies built, keyed by every option they are made from.
    dataset: Option<(
        String,
        Vec<crate::endpoint::PreparedConversation>,
        crate::dataset::DatasetSampling,
    )>,
}

/// Where a run writes and what it records of its configuration, before it runs.
pub struct RunFiles {
    pub artifact_dir: std::path::PathBuf,
    /// The summary JSON (`profile_export_aiperf.json` or the prefixed name).
    pub summary_json: std::path::PathBuf,
    /// The per-request records, when the export level writes them.
    pub records_jsonl: Option<std::path::PathBuf>,
    /// The resolved configuration in AIPerf's layout, secrets left out.
    pub input_config: serde_json::Value,
    pub model: String,
}

/// Checks the flags of one run and says where it will write, without running it.
pub fn run_files(args: &ProfileArgs) -> Result<RunFiles, ConfigError> {
    let cfg = ProfileConfig::from_args(args, false)?;
    let names = &cfg.export.names;
    Ok(RunFiles {
        summary_json: cfg.artifact_dir.join(&names.json),
        records_jsonl: (cfg.export.level == export::Level::Records)
            .then(|| cfg.artifact_dir.join(&names.jsonl)),
        input_config: report::input_config_json(&cfg),
        model: cfg.model.clone(),
        artifact_dir: cfg.artifact_dir,
    })
}

pub fn run(args: &ProfileArgs, argv: &[String]) -> Result<Outcome, ProfileError> {
    run_reusing(args, argv, &mut Reuse::default())
}

/// One run; what `reuse` holds from an earlier run of the same process is not loaded again.
pub fn run_reusing(
    args: &ProfileArgs,
    argv: &[String],
    reuse: &mut Reuse,
) -> Result<Outcome, ProfileError> {
    let started = Instant::now();
    let mut cfg = ProfileConfig::from_args(args, console_is_terminal())?;
    let goodput = cfg.goodput_slos.clone();
    start_logging(&cfg)?;
    let prometheus_listener = cfg
        .prometheus
        .map(crate::live_export::prometheus::PrometheusEndpoint::bind)
        .transpose()?;
    let prepared = prepare::prepare(&mut cfg, reuse)?;

    // The run's control, observers and probes; the requests go on the sender threads.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("runtime-worker")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let _guard = runtime.enter();
    let sender_threads = cfg.workers_max.unwrap_or_else(SenderThreads::default_count);
    let senders =
        SenderThreads::start(sender_threads).context("cannot start the sender threads")?;
    info!(
        "Requests go out from {sender_threads} sender thread{}",
        if sender_threads == 1 { "" } else { "s" }
    );
    let mock_server = start_mock_server(&mut cfg)?;
    let grading = prepared
        .questions
        .zip(cfg.accuracy.as_ref())
        .map(|(q, opts)| crate::accuracy::export::Grading::new(q, opts));
    let ctx = load_context(&cfg, prepared.plan, senders.spawner())?;
    let control = RunControl::start(
        ctx.clone(),
        cfg.failures.grace_period,
        runtime.handle().clone(),
    );
    if let Some(limit) = cfg.failures.wait_for_model
        && let Some(outcome) =
            control::wait_for_server(&control, &control::Readiness::of(&cfg, limit))?
    {
        return Ok(outcome);
    }

    // Before anything the run sends can fill the server's cache (the template probe, the
    // warmup).
    if let Some(posts) = &cfg.control_hooks.reset_kv_cache {
        runtime
            .block_on(control_hooks::reset_kv_cache(&ctx.client, posts))
            .map_err(anyhow::Error::msg)?;
    }
    let tokenizer = prepared.tokenizer;
    // The chat-template probe sends a chat body: only the conversational APIs take one.
    let template = if cfg.endpoint_type.is_conversational() {
        runtime.block_on(template_probe::find_overhead(&tokenizer, &ctx))
    } else {
        crate::metrics::template_overhead::TemplateOverhead::NoImages
    };
    let template_json = template.to_json();
    let otel_feed = cfg.otel.as_ref().map(crate::live_export::otel::feed);
    let (tap, otel_feed) = match otel_feed {
        Some((tap, end)) => (tap, Some(end)),
        None => (None, None),
    };
    let collection = Collection::start(
        &cfg,
        goodput,
        template,
        tokenizer.clone(),
        &control,
        prepared.warmup_requests,
        collect::RecordReaders {
            tap: tap.map(|t| Box::new(t) as Box<dyn crate::metrics::RecordTap>),
            grading: grading.as_ref(),
        },
    )?;
    // Serves until the run's results are written (dropped at the end of this function).
    let _prometheus = match (&collection.live, prometheus_listener) {
        (Some(board), Some(listener)) => {
            Some(start_prometheus(&cfg, &ctx, board.clone(), listener)?)
        }
        _ => None,
    };
    let otel = match (&cfg.otel, otel_feed) {
        (Some(opts), Some(end)) => Some(start_otel(opts, &cfg, &ctx, end, &collection)?),
        _ => None,
    };
    info!(
        "Ready to send after {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let observers = {
        let _in_runtime = runtime.enter();
        observe::Observers::start(&cfg, ctx.clock)
    };
    let start = runtime.block_on(shard::prepare(&cfg));
    let dashboard = collection
        .live
        .as_ref()
        .filter(|_| cfg.ui == UiType::Dashboard)
        .and_then(|board| {
            start_dashboard(
                &cfg,
                &ctx,
                board.clone(),
                &observers,
                prepared.warmup_requests,
            )
        });
    let overhead = OverheadMonitor::start(mock_server.is_some());
    let ran = phases::run(
        &runtime,
        &cfg,
        &ctx,
        (prepared.schedule, start.as_ref().and_then(|s| s.at)),
        prepared.warmup_requests,
        &collection,
        &observers,
    );
    let observed = runtime.block_on(observers.finish());
    let (collector, chart_rows) = collection.finish()?;
    if let Some(otel) = otel {
        otel.finish();
    }
    // The console is the user's again before the results print.
    if let Some(d) = dashboard {
        d.finish();
    }
    // A profiler that would not start ended the run before profiling (after the cleanup
    // above).
    let ran = ran?;
    let per_server = ctx.client.requests_per_server();
    if per_server.len() > 1 {
        for (uri, n) in per_server {
            info!("Requests sent to {uri}: {n}");
        }
    }
    let overhead = overhead.finish(ran.sent, collector.record_lag());
    crate::overhead::log_report(&overhead);

    let finished = report::Finished {
        cfg: &cfg,
        argv,
        plan: &ctx.plan,
        tokenizer: tokenizer.name(),
        ran,
        overhead,
        stop_reason: control.reason(),
        resent: ctx.client.resent_requests(),
        found_closed: ctx.client.found_closed_connections(),
        template: template_json,
        observed,
        clock: ctx.clock,
        start,
        chart_rows,
        accuracy: grading,
    };
    let outcome = report::finish(finished, collector)?;
    if let Some(mock) = mock_server {
        mock.shutdown();
    }
    runtime.shutdown_background();
    Ok(outcome)
}

/// The `--mock-server` server, on a runtime of its own whose threads are named
/// [`MOCK_THREAD_NAME`](crate::overhead::MOCK_THREAD_NAME), so the client overhead leaves
/// out what the mock used.
struct InProcessMock {
    runtime: tokio::runtime::Runtime,
    server: mock::MockServer,
}

impl InProcessMock {
    fn shutdown(self) {
        self.runtime.block_on(self.server.shutdown());
        self.runtime.shutdown_background();
    }
}

/// `--mock-server`: starts the built-in server and points the run at it.
fn start_mock_server(cfg: &mut ProfileConfig) -> anyhow::Result<Option<InProcessMock>> {
    if !cfg.mock_server {
        return Ok(None);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name(crate::overhead::MOCK_THREAD_NAME)
        .enable_all()
        .build()
        .context("cannot start the mock server's runtime")?;
    let server = runtime.block_on(mock::start(mock::MockServerArgs::in_process()))?;
    info!("Started the built-in mock server at {}", server.url());
    cfg.set_base_url(&server.url())?;
    Ok(Some(InProcessMock { runtime, server }))
}

/// The HTTP client and the plan, shared by every request of the run.
fn load_context(
    cfg: &ProfileConfig,
    plan: SendPlan,
    spawner: Spawner,
) -> anyhow::Result<Arc<LoadContext>> {
    let headers = cfg
        .endpoint_type
        .request_headers(cfg.api_key.as_deref(), &cfg.headers)
        .map_err(anyhow::Error::msg)?;
    let client = HttpClient::new(cfg.request_uri().clone(), &headers, cfg.request_timeout)?
        .with_response_shape(
            cfg.endpoint_type
                .response_shape(&cfg.extra_inputs)
                .map_err(anyhow::Error::msg)?,
        )
        .with_max_response_bytes(cfg.max_response_bytes)
        .with_raw_capture(cfg.apply_chat_template, cfg.export.raw.is_some())
        .with_video_polling(cfg.video_polling)
        .with_servers(
            cfg.request_uris.clone(),
            cfg.connection_reuse,
            cfg.session_header.clone(),
        );
    Ok(Arc::new(LoadContext {
        client,
        clock: Clock::new(),
        plan,
        stop: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
        spawner,
    }))
}

/// Creates the artifact directory and starts logging to the console and its log file.
fn start_logging(cfg: &ProfileConfig) -> anyhow::Result<()> {
    let log_file = export::log_file(&cfg.artifact_dir);
    std::fs::create_dir_all(log_file.parent().expect("the log is in a directory")).with_context(
        || {
            format!(
                "cannot create the artifact directory {}",
                cfg.artifact_dir.display()
            )
        },
    )?;
    // An earlier run's markers in this directory would say this run's results are there.
    for marker in [export::RESULTS_READY_FILE, export::SHARD_FAILED_FILE] {
        let _ = std::fs::remove_file(cfg.artifact_dir.join(marker));
    }
    ui::init_logging(cfg.log_detail, Some(&log_file)).context("cannot create the log file")?;
    info!("Starting AIPerf (Rust) {}", env!("CARGO_PKG_VERSION"));
    cfg.warnings.iter().for_each(|w| warn!("{w}"));
    if let Some(w) = report::osl_advisory(cfg) {
        warn!("{w}");
    }
    cfg.accepted_without_effect
        .iter()
        .for_each(|l| info!("{l}"));
    tracing::debug!("Resolved configuration: {}", report::input_config_json(cfg));
    Ok(())
}

/// The `--prometheus-port` endpoint over the run's live figures.
fn start_prometheus(
    cfg: &ProfileConfig,
    ctx: &Arc<LoadContext>,
    board: Arc<crate::metrics::live::LiveBoard>,
    listener: std::net::TcpListener,
) -> anyhow::Result<crate::live_export::prometheus::PrometheusEndpoint> {
    let in_flight = {
        let ctx = ctx.clone();
        move || ctx.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    };
    let labels = crate::live_export::prometheus::RunLabels {
        benchmark_id: ctx.plan.benchmark_id.clone(),
        model: cfg.model.clone(),
        endpoint: cfg.endpoint_type.as_str().to_string(),
    };
    crate::live_export::prometheus::PrometheusEndpoint::start(
        listener,
        board,
        Box::new(in_flight),
        labels,
    )
}

/// The live OpenTelemetry export (`--otel-url`), fed by the collector.
fn start_otel(
    opts: &crate::config::OtelOptions,
    cfg: &ProfileConfig,
    ctx: &Arc<LoadContext>,
    feed: crate::live_export::otel::FeedEnd,
    collection: &Collection,
) -> anyhow::Result<crate::live_export::otel::Exporter> {
    let run = crate::live_export::otel::RunInfo {
        benchmark_id: ctx.plan.benchmark_id.clone(),
        model: cfg.model.clone(),
        endpoint_type: cfg.endpoint_type.as_str(),
        urls: cfg.request_uris.iter().map(|u| u.to_string()).collect(),
    };
    let in_flight = {
        let ctx = ctx.clone();
        Arc::new(move || ctx.in_flight.load(std::sync::atomic::Ordering::Relaxed))
    };
    crate::live_export::otel::Exporter::start(
        opts,
        run,
        feed,
        collection.live.clone(),
        in_flight,
        tokio::runtime::Handle::current(),
    )
}

/// The dashboard over the run's live figures; a terminal it cannot take is a warning.
fn start_dashboard(
    cfg: &ProfileConfig,
    ctx: &Arc<LoadContext>,
    board: Arc<crate::metrics::live::LiveBoard>,
    observers: &observe::Observers,
    warmup_requests: u64,
) -> Option<crate::dashboard::Dashboard> {
    let load = if let Some((rate, _)) = cfg.load.rate {
        format!("request rate {rate}")
    } else {
        format!("concurrency {}", cfg.concurrency)
    };
    let in_flight = {
        let ctx = ctx.clone();
        move || ctx.in_flight.load(std::sync::atomic::Ordering::Relaxed)
    };
    let (servers, gpus) = observers.live_views();
    let sources = crate::dashboard::Sources {
        title: format!(
            "NVIDIA AIPerf (Rust) · {} · {} · {load}",
            cfg.model,
            cfg.endpoint_type.as_str()
        ),
        plan: crate::dashboard::Plan {
            warmup_requests,
            profiling_requests: cfg.load.duration.is_none().then_some(cfg.request_count),
            duration_s: cfg.load.duration.map(|d| d.as_secs_f64()),
        },
        board,
        clock: ctx.clock,
        in_flight: Box::new(in_flight),
        servers,
        gpus,
    };
    match crate::dashboard::Dashboard::start(sources) {
        Ok(d) => Some(d),
        Err(e) => {
            warn!("Cannot show the dashboard ({e}); going on without it");
            None
        }
    }
}

fn console_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}
