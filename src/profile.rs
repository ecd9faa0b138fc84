//! `aiperf profile`: build everything, run the phases, collect, export.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::cli::{ProfileArgs, UiType};
use crate::clock::Clock;
use crate::config::{ConfigError, ProfileConfig, redacted_command_line};
use crate::endpoint::{self, BodyOptions};
use crate::export::{self, RunInfo};
use crate::load::{self, LoadContext, SendPlan};
use crate::metrics::{Collector, CollectorOptions};
use crate::record::Phase;
use crate::transport::HttpClient;
use crate::{dataset, mock, tokenizer, ui};

/// How a profile run ended; `main` turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Requests completed and at least one succeeded.
    Success,
    /// The run finished but every request failed.
    AllFailed,
    /// The user pressed Ctrl-C; partial results were written.
    Interrupted,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Bad command line or input: nothing was sent.
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

pub fn run(args: &ProfileArgs, argv: &[String]) -> Result<Outcome, ProfileError> {
    let started = Instant::now();
    let is_terminal = console_is_terminal();
    let mut cfg = ProfileConfig::from_args(args, is_terminal)?;
    let goodput = match &cfg.goodput {
        Some(spec) => crate::metrics::parse_goodput(spec)
            .map_err(|e| ConfigError(format!("--goodput: {e}")))?,
        None => Vec::new(),
    };

    std::fs::create_dir_all(cfg.artifact_dir.join("logs")).with_context(|| {
        format!(
            "cannot create the artifact directory {}",
            cfg.artifact_dir.display()
        )
    })?;
    ui::init_logging(
        cfg.verbose,
        Some(&cfg.artifact_dir.join("logs").join("aiperf.log")),
    )
    .context("cannot create the log file")?;
    info!("Starting AIPerf (Rust) {}", env!("CARGO_PKG_VERSION"));
    if cfg.ui == UiType::Dashboard {
        warn!("The dashboard UI is not available yet; showing a progress bar instead");
    }

    let tok = tokenizer::resolve(&cfg.tokenizer, &cfg.tokenizer_revision)
        .map_err(|e| ConfigError(format!("--tokenizer: '{}': {e:#}", cfg.tokenizer)))?;
    if let Some(w) = &tok.warning {
        warn!("{w}");
    }
    let tokenizer = Arc::new(tok.tokenizer);
    info!("Using tokenizer: {}", tokenizer.name());

    let s = &cfg.synthetic;
    if s.image_batch_size > 0 {
        info!(
            "Generating synthetic images: {} per request, {}x{} px (stddev {}x{}), format {:?}",
            s.image_batch_size,
            s.image_width_mean,
            s.image_height_mean,
            s.image_width_stddev,
            s.image_height_stddev,
            s.image_format
        );
    }
    let t_dataset = Instant::now();
    let dataset = dataset::build(&cfg.synthetic, &cfg.inputs, &tokenizer)?;
    let sampling = dataset.sampling;
    let body_opts = BodyOptions {
        model: cfg.model.clone(),
        streaming: cfg.streaming,
        use_legacy_max_tokens: cfg.use_legacy_max_tokens,
        extra_inputs: cfg.extra_inputs.clone(),
    };
    let conversations =
        endpoint::prepare_dataset(cfg.endpoint_type, dataset, &body_opts).map_err(ConfigError)?;
    let total_sends = cfg.warmup_request_count + cfg.request_count;
    let plan = SendPlan::from_conversations(conversations, sampling, total_sends, cfg.random_seed);
    info!(
        "Dataset ready: {} unique entries in {:.1} ms",
        plan.requests.len(),
        t_dataset.elapsed().as_secs_f64() * 1e3
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let _guard = runtime.enter();

    let mock_server = if cfg.mock_server {
        let server = runtime.block_on(mock::start(default_mock_args()))?;
        info!("Started the built-in mock server at {}", server.url());
        cfg.set_base_url(&server.url())?;
        Some(server)
    } else {
        None
    };

    let client = HttpClient::new(
        cfg.request_uri.clone(),
        cfg.api_key.as_deref(),
        &cfg.headers,
        cfg.request_timeout,
    )?;
    let clock = Clock::new();
    let ctx = Arc::new(LoadContext {
        client,
        clock,
        plan,
        stop: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
    });

    let collector = Collector::new(
        CollectorOptions {
            streaming: cfg.streaming,
            use_server_token_count: cfg.use_server_token_count,
            goodput,
        },
        tokenizer.clone(),
        clock,
        Some(&cfg.artifact_dir.join("profile_export.jsonl")),
    )
    .context("cannot create profile_export.jsonl")?;

    let interrupted = Arc::new(AtomicBool::new(false));
    runtime.spawn(watch_ctrl_c(ctx.clone(), interrupted.clone()));

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let warmup_bar = ui::phase_bar(cfg.ui, "Warmup", cfg.warmup_request_count);
    let profile_bar = ui::phase_bar(cfg.ui, "Profiling", cfg.request_count);
    let (wb, pb) = (warmup_bar.clone(), profile_bar.clone());
    let collector_thread = std::thread::Builder::new()
        .name("collector".into())
        .spawn(move || -> std::io::Result<Collector> {
            let mut collector = collector;
            while let Some(record) = rx.blocking_recv() {
                collector.add(&record)?;
                match record.phase {
                    Phase::Warmup => wb.inc(1),
                    Phase::Profiling => pb.inc(1),
                }
            }
            Ok(collector)
        })
        .context("cannot start the collector thread")?;

    let startup_ms = started.elapsed().as_secs_f64() * 1e3;
    info!("Ready to send after {startup_ms:.1} ms");
    let start_wall_ns = clock.wall_ns(clock.now_ns());
    if cfg.warmup_request_count > 0 {
        info!("Warming up: {} requests", cfg.warmup_request_count);
        runtime.block_on(load::run_closed_loop(
            ctx.clone(),
            Phase::Warmup,
            0,
            cfg.warmup_request_count,
            cfg.concurrency,
            tx.clone(),
        ));
        warmup_bar.finish_and_clear();
    }
    info!(
        "Profiling: {} requests at concurrency {} against {}",
        cfg.request_count,
        cfg.concurrency,
        ctx.client.uri()
    );
    let sent = runtime.block_on(load::run_closed_loop(
        ctx.clone(),
        Phase::Profiling,
        cfg.warmup_request_count,
        cfg.request_count,
        cfg.concurrency,
        tx,
    ));
    let end_wall_ns = clock.wall_ns(clock.now_ns());
    let collector = collector_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the collector thread panicked"))?
        .context("cannot write profile_export.jsonl")?;
    profile_bar.finish_and_clear();
    let was_cancelled = interrupted.load(Ordering::Relaxed);
    if was_cancelled {
        warn!(
            "The profile run was cancelled early. Results shown may be incomplete or inaccurate."
        );
    } else {
        info!("Benchmark completed successfully ({sent} requests sent)");
    }

    let summary = collector
        .finish()
        .context("cannot finish profile_export.jsonl")?;
    let info = RunInfo {
        benchmark_id: crate::ids::uuid4(&mut rand::rng()),
        start_wall_ns,
        end_wall_ns,
        was_cancelled,
        cli_command: redacted_command_line(argv),
        input_config: input_config_json(&cfg),
        random_seed: Some(cfg.random_seed),
        tokenizer: tokenizer.name().to_string(),
        streaming: cfg.streaming,
    };
    write_inputs_json(&cfg.artifact_dir.join("inputs.json"), &ctx.plan)
        .context("cannot write inputs.json")?;
    let console_text = export::render_console(&summary, &info);
    let paths = export::write_summary(&cfg.artifact_dir, &summary, &info, &console_text)
        .context("cannot write the summary exports")?;
    info!("Results saved to: {}", cfg.artifact_dir.display());

    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{console_text}");
    let _ = writeln!(out, "CSV Export: {}", paths.csv.display());
    let _ = writeln!(out, "JSON Export: {}", paths.json.display());
    let _ = writeln!(
        out,
        "Log File: {}",
        cfg.artifact_dir.join("logs").join("aiperf.log").display()
    );
    let _ = out.flush();

    if let Some(server) = mock_server {
        runtime.block_on(server.shutdown());
    }
    runtime.shutdown_background();

    Ok(if was_cancelled {
        Outcome::Interrupted
    } else if !summary_has_success(&summary) {
        Outcome::AllFailed
    } else {
        Outcome::Success
    })
}

fn summary_has_success(summary: &crate::metrics::MetricsSummary) -> bool {
    summary.request_count > 0
}

/// First Ctrl-C: stop sending and let in-flight requests finish. Second: exit at once.
async fn watch_ctrl_c(ctx: Arc<LoadContext>, interrupted: Arc<AtomicBool>) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    interrupted.store(true, Ordering::Relaxed);
    ctx.stop.store(true, Ordering::Relaxed);
    warn!(
        "Stopping: waiting for {} in-flight requests; press Ctrl-C again to quit at once",
        ctx.in_flight.load(Ordering::Relaxed)
    );
    if tokio::signal::ctrl_c().await.is_ok() {
        let _ = std::io::stderr().write_all(b"Interrupted twice: exiting now\n");
        std::process::exit(130);
    }
}

fn console_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

fn default_mock_args() -> mock::MockServerArgs {
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: mock::MockServerArgs,
    }
    Wrapper::parse_from(["mock-server", "--port", "0", "--host", "127.0.0.1"]).args
}

/// The resolved configuration, secrets left out.
fn input_config_json(cfg: &ProfileConfig) -> Value {
    let s = &cfg.synthetic;
    json!({
        "endpoint": {
            "model_names": [cfg.model],
            "type": cfg.endpoint_type.as_str(),
            "url": cfg.request_uri.to_string(),
            "streaming": cfg.streaming,
            "timeout": cfg.request_timeout.as_secs_f64(),
            "api_key": cfg.api_key.as_ref().map(|_| "***"),
            "use_legacy_max_tokens": cfg.use_legacy_max_tokens,
            "use_server_token_count": cfg.use_server_token_count,
        },
        "input": {
            "random_seed": cfg.random_seed,
            "extra": cfg.extra_inputs,
            "headers": cfg.headers.iter().map(|(k, v)| {
                let shown = if crate::config::is_secret_header(k.as_str()) { "***" } else { v.to_str().unwrap_or("") };
                (k.as_str().to_string(), Value::String(shown.to_string()))
            }).collect::<serde_json::Map<String, Value>>(),
            "num_dataset_entries": s.num_entries,
            "prompt": {
                "input_tokens": {"mean": s.isl_mean, "stddev": s.isl_stddev},
                "output_tokens": {"mean": s.osl_mean, "stddev": s.osl_stddev},
            },
            "image": {
                "width": {"mean": s.image_width_mean, "stddev": s.image_width_stddev},
                "height": {"mean": s.image_height_mean, "stddev": s.image_height_stddev},
                "batch_size": s.image_batch_size,
                "format": format!("{:?}", s.image_format).to_lowercase(),
            },
        },
        "tokenizer": {"name": cfg.tokenizer, "revision": cfg.tokenizer_revision},
        "loadgen": {
            "concurrency": cfg.concurrency,
            "request_count": cfg.request_count,
            "warmup_request_count": cfg.warmup_request_count,
        },
        "output": {"artifact_directory": cfg.artifact_dir.display().to_string()},
        "mock_server": cfg.mock_server,
    })
}

/// `inputs.json`: the exact body of each entry, by session. The bodies are written as the
/// bytes that were sent, not re-encoded.
fn write_inputs_json(path: &Path, plan: &SendPlan) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    w.write_all(b"{\n  \"data\": [")?;
    for (i, (req, id)) in plan.requests.iter().zip(&plan.conversation_ids).enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "\n    {{\"session_id\": \"{id}\", \"payloads\": [")?;
        w.write_all(&req.body)?;
        w.write_all(b"]}")?;
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}
