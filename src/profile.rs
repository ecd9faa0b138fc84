//! `aiperf profile`: build everything, run the phases, collect, export.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};
use tracing::{debug, error, info, warn};

use crate::cli::ProfileArgs;
use crate::clock::Clock;
use crate::config::{ConfigError, ProfileConfig, redacted_command_line};
use crate::endpoint::{self, BodyOptions};
use crate::export::{self, RunInfo};
use crate::load::{self, LoadContext, SendPlan};
use crate::metrics::{Collector, CollectorOptions};
use crate::record::{Phase, RequestRecord};
use crate::transport::{CONNECTION_ERROR, HttpClient};
use crate::ui::UiType;
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
    /// The failed share passed `--failed-request-threshold`; the run stopped early.
    ThresholdExceeded,
    /// Every connection was refused; the run stopped early.
    ServerUnreachable,
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
    cfg.warnings.iter().for_each(|w| warn!("{w}"));
    debug!("Resolved configuration: {}", input_config_json(&cfg));
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
    let dataset_bar = ui::DatasetBar::new(cfg.ui);
    let dataset =
        dataset::build_with_progress(&cfg.synthetic, &cfg.inputs, &tokenizer, &dataset_bar);
    dataset_bar.finish();
    let dataset = dataset?;
    let sampling = dataset.sampling;
    let body_opts = BodyOptions {
        model: cfg.model.clone(),
        streaming: cfg.streaming,
        use_legacy_max_tokens: cfg.use_legacy_max_tokens,
        extra_inputs: cfg.extra_inputs.clone(),
    };
    let conversations =
        endpoint::prepare_dataset(cfg.endpoint_type, dataset, &body_opts).map_err(ConfigError)?;
    let warmup_sessions = cfg.load.warmup.sessions.unwrap_or(0);
    let total_sends = cfg.warmup_request_count + warmup_sessions + cfg.request_count;
    let mut plan =
        SendPlan::from_conversations(conversations, sampling, total_sends, cfg.random_seed);
    // Counted in conversations: the requests are every turn of the conversations drawn.
    if let Some(n) = cfg.load.sessions
        && cfg.load.request_count_given.is_none()
    {
        cfg.request_count = plan.turns_of_sessions(warmup_sessions, n);
        info!(
            "Multi-turn: {n} conversations, {} requests",
            cfg.request_count
        );
    }
    let warmup_requests = match cfg.load.warmup.sessions {
        Some(n) => plan.turns_of_sessions(0, n),
        None => cfg.warmup_request_count,
    };
    let schedule = if cfg.load.fixed_schedule {
        if !plan.has_timestamps() {
            return Err(ConfigError(
                "--fixed-schedule: the input file has no timestamp on its entries; add \"timestamp\" (ms) to each, or drop --fixed-schedule".into(),
            )
            .into());
        }
        if cfg
            .load
            .schedule_window
            .rebase_epoch(plan.first_timestamp_ms())
        {
            info!(
                "The input file's timestamps are absolute (epoch ms): the schedule starts at the first one, as with --fixed-schedule-auto-offset"
            );
        }
        let offsets = plan
            .fixed_schedule(&cfg.load.schedule_window)
            .map_err(|e| {
                ConfigError(format!(
                    "--fixed-schedule-start-offset/--fixed-schedule-end-offset: {e}"
                ))
            })?;
        cfg.request_count = plan.fixed_schedule_sends();
        info!(
            "Fixed schedule: {} conversations ({} requests) over {:.3} s",
            offsets.len(),
            cfg.request_count,
            offsets.last().copied().unwrap_or(0) as f64 / 1e9
        );
        Some(Arc::<[u64]>::from(offsets))
    } else {
        None
    };
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
    let control = Arc::new(RunControl {
        ctx: ctx.clone(),
        reason: AtomicU8::new(0),
        grace: cfg.failures.grace_period,
        handle: runtime.handle().clone(),
        flush_now: tokio::sync::Notify::new(),
        collector_state: AtomicU8::new(COLLECTOR_NOT_STARTED),
    });
    runtime.spawn(watch_ctrl_c(control.clone()));

    if let Some(limit) = cfg.failures.wait_for_model {
        let ready = runtime.block_on(wait_for_model(
            &ctx.client,
            limit,
            cfg.failures.wait_for_model_interval,
            &control,
        ));
        if let Err(why) = ready {
            if control.reason() == Some(StopReason::Interrupted) {
                warn!("Interrupted while waiting for the server; nothing was sent");
                return Ok(Outcome::Interrupted);
            }
            return Err(ProfileError::Other(anyhow::anyhow!(
                "--wait-for-model-timeout {}: {why}; nothing was sent",
                limit.as_secs_f64()
            )));
        }
    }

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

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let warmup_bar = ui::phase_bar(cfg.ui, "Warmup", warmup_requests);
    let profile_bar = ui::phase_bar(cfg.ui, "Profiling", cfg.request_count);
    let (wb, pb) = (warmup_bar.clone(), profile_bar.clone());
    let mut watch = FailureWatch::new(
        control.clone(),
        cfg.failures.failed_request_threshold,
        cfg.concurrency,
    );
    let collector_control = control.clone();
    let collector_thread = std::thread::Builder::new()
        .name("collector".into())
        .spawn(move || -> std::io::Result<Collector> {
            let control = collector_control;
            let mut collector = Some(collector);
            control
                .collector_state
                .store(COLLECTOR_RUNNING, Ordering::SeqCst);
            // Driven from this thread (not a runtime worker), so writing the JSONL never
            // blocks the requests.
            let result = control.handle.block_on(async {
                loop {
                    tokio::select! {
                        biased;
                        _ = control.flush_now.notified() => {
                            // Second Ctrl-C: what was received is flushed, then exit.
                            if let Some(c) = collector.take() {
                                let _ = c.finish();
                            }
                            std::process::exit(130);
                        }
                        next = rx.recv() => match next {
                            Some(record) => {
                                if let Some(c) = collector.as_mut() {
                                    c.add(&record)?;
                                }
                                watch.observe(&record);
                                match record.phase {
                                    Phase::Warmup => wb.inc(1),
                                    Phase::Profiling => pb.inc(1),
                                }
                            }
                            None => return Ok(()),
                        }
                    }
                }
            });
            control
                .collector_state
                .store(COLLECTOR_DONE, Ordering::SeqCst);
            result.map(|()| collector.expect("only taken on the way out"))
        })
        .context("cannot start the collector thread")?;

    let startup_ms = started.elapsed().as_secs_f64() * 1e3;
    info!("Ready to send after {startup_ms:.1} ms");
    let start_wall_ns = clock.wall_ns(clock.now_ns());
    let pacing = match (&schedule, cfg.load.rate) {
        (Some(offsets), _) => load::Pacing::Fixed {
            offsets_ns: offsets.clone(),
        },
        (None, Some((rate, pattern))) => load::Pacing::Rate { rate, pattern },
        (None, None) => load::Pacing::ClosedLoop,
    };
    // The closed loop needs its slots; a rate or a schedule is capped only when asked.
    let cap = match pacing {
        load::Pacing::ClosedLoop => Some(cfg.concurrency),
        _ => cfg.load.concurrency_given.then_some(cfg.concurrency),
    };
    let overhead = crate::overhead::OverheadMonitor::start();
    let mut sent = 0;
    let w = &cfg.load.warmup;
    let warmup_on =
        cfg.warmup_request_count > 0 || cfg.load.warmup_duration.is_some() || w.sessions.is_some();
    if !warmup_on && (w.grace.is_some() || w.concurrency.is_some() || w.rate != cfg.load.rate) {
        warn!(
            "--warmup-grace-period/--warmup-concurrency/--warmup-request-rate/--warmup-arrival-pattern apply to a warmup; none was asked for (--warmup-request-count, --warmup-duration or --num-warmup-sessions), so they are ignored"
        );
    }
    if warmup_on {
        match (cfg.load.warmup_duration, w.sessions) {
            (Some(d), _) => info!("Warming up for {:.1} s", d.as_secs_f64()),
            (None, Some(n)) => info!("Warming up: {n} conversations ({warmup_requests} requests)"),
            (None, None) => info!("Warming up: {} requests", cfg.warmup_request_count),
        }
        // The warmup's own rate and concurrency, each falling back to the profiling one.
        let warmup_pacing = match (w.rate, &pacing) {
            (Some((rate, pattern)), _) => load::Pacing::Rate { rate, pattern },
            (None, p) => p.clone(),
        };
        let warmup_cap = match warmup_pacing {
            load::Pacing::ClosedLoop => Some(w.concurrency.unwrap_or(cfg.concurrency)),
            // A rate is capped only when a concurrency was given (as for profiling).
            _ => w
                .concurrency
                .or(cfg.load.concurrency_given.then_some(cfg.concurrency)),
        };
        let warmup = load::PhaseSpec {
            phase: Phase::Warmup,
            first_send: 0,
            count: (cfg.warmup_request_count > 0).then_some(cfg.warmup_request_count),
            sessions: w.sessions,
            duration: cfg.load.warmup_duration,
            // Without --warmup-grace-period, warmup requests in flight are waited for.
            grace: w.grace,
            concurrency: warmup_cap,
            pacing: warmup_pacing,
            cancellation: cfg.load.cancellation,
            seed: cfg.random_seed ^ 0x3a7e_0001,
        };
        let t_phase = Instant::now();
        let warmup_sent = runtime
            .block_on(load::run_phase(ctx.clone(), warmup, tx.clone()))
            .sent;
        debug!(
            "Warmup phase: {warmup_sent} sent in {:.3} s",
            t_phase.elapsed().as_secs_f64()
        );
        sent += warmup_sent;
        warmup_bar.finish_and_clear();
    }
    if !ctx.stop.load(Ordering::Relaxed) {
        let how = match &pacing {
            load::Pacing::ClosedLoop => format!("at concurrency {}", cfg.concurrency),
            load::Pacing::Rate { rate, pattern } => format!(
                "at {rate} requests/sec ({pattern:?}){}",
                cap.map_or(String::new(), |c| format!(", at most {c} in flight"))
            ),
            load::Pacing::Fixed { .. } => "on the input file's fixed schedule".to_string(),
        };
        let mut limits = Vec::new();
        if let Some(n) = cfg.load.count_limit(cfg.request_count) {
            limits.push(format!("{n} requests"));
        }
        if let Some(n) = cfg.load.sessions {
            limits.push(format!("{n} conversations"));
        }
        if let Some(d) = cfg.load.duration {
            limits.push(format!("{:.1} s", d.as_secs_f64()));
        }
        let limit = match limits.is_empty() {
            true => "no limit".to_string(),
            false => limits.join(" or "),
        };
        info!(
            "Profiling: {limit} {how} against {}",
            shown_uri(ctx.client.uri())
        );
    }
    let profiling = load::PhaseSpec {
        phase: Phase::Profiling,
        first_send: sent,
        count: cfg.load.count_limit(cfg.request_count),
        sessions: cfg.load.sessions,
        duration: cfg.load.duration,
        grace: cfg.load.grace,
        concurrency: cap,
        pacing,
        cancellation: cfg.load.cancellation,
        seed: cfg.random_seed,
    };
    let t_phase = Instant::now();
    let result = runtime.block_on(load::run_phase(ctx.clone(), profiling, tx));
    debug!(
        "Profiling phase: {} sent in {:.3} s",
        result.sent,
        t_phase.elapsed().as_secs_f64()
    );
    sent += result.sent;
    let pacing_report = result.pacing;
    let end_wall_ns = clock.wall_ns(clock.now_ns());
    let collector = collector_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the collector thread panicked"))?
        .context("cannot write profile_export.jsonl")?;
    profile_bar.finish_and_clear();
    let overhead = overhead.finish(sent, collector.record_lag());
    crate::overhead::log_report(&overhead);
    let stop_reason = control.reason();
    let was_cancelled = stop_reason.is_some();
    match stop_reason {
        Some(_) => warn!(
            "The profile run was cancelled early ({sent} requests sent). Results shown may be incomplete or inaccurate."
        ),
        None => info!("Benchmark completed ({sent} requests sent)"),
    }

    let summary = collector
        .finish()
        .context("cannot finish profile_export.jsonl")?;
    let failed = summary.error_request_count;
    let finished = failed + summary.request_count;
    if failed > 0 && summary.request_count > 0 {
        let hint = if cfg.failures.failed_request_threshold.is_none() {
            "; --failed-request-threshold makes such a run exit non-zero"
        } else {
            ""
        };
        warn!(
            "{failed} of {finished} requests failed ({:.1}%); see the Error Summary{hint}",
            failed as f64 * 100.0 / finished as f64
        );
    }
    if sent == 0 {
        warn!("No request was sent; no results were written");
    } else {
        let info = RunInfo {
            benchmark_id: crate::ids::uuid4(&mut rand::rng()),
            start_wall_ns,
            end_wall_ns,
            was_cancelled,
            cli_command: redacted_command_line(argv, &cfg.secrets),
            input_config: input_config_json(&cfg),
            random_seed: Some(cfg.random_seed),
            tokenizer: tokenizer.name().to_string(),
            streaming: cfg.streaming,
            load_pacing: pacing_report.as_ref().map(|p| p.to_json()),
            client_overhead: Some(overhead),
        };
        write_inputs_json(&cfg.artifact_dir.join("inputs.json"), &ctx.plan)
            .context("cannot write inputs.json")?;
        let mut console_text = export::render_console(&summary, &info);
        if let Some(p) = &pacing_report {
            info!(
                "Pacing: {} scheduled sends, achieved {} requests/sec (target {}), send lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                p.sends,
                p.achieved_rate.map_or("n/a".into(), |r| format!("{r:.3}")),
                p.target_rate.map_or("n/a".into(), |r| format!("{r}")),
                p.send_lag_p50_ns / 1e6,
                p.send_lag_p99_ns / 1e6,
                p.send_lag_max_ns / 1e6
            );
            if let Some(w) = p.warning() {
                warn!("{w}");
                console_text.push_str(&format!("\nWarning: {w}\n"));
            }
        }
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
    }

    if let Some(server) = mock_server {
        runtime.block_on(server.shutdown());
    }
    runtime.shutdown_background();

    Ok(match stop_reason {
        Some(StopReason::Interrupted) => Outcome::Interrupted,
        Some(StopReason::ThresholdExceeded) => Outcome::ThresholdExceeded,
        Some(StopReason::ServerUnreachable) => Outcome::ServerUnreachable,
        None if !summary_has_success(&summary) => Outcome::AllFailed,
        None => Outcome::Success,
    })
}

fn summary_has_success(summary: &crate::metrics::MetricsSummary) -> bool {
    summary.request_count > 0
}

/// Why a run stopped sending before its count was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Interrupted = 1,
    ThresholdExceeded = 2,
    ServerUnreachable = 3,
}

const COLLECTOR_NOT_STARTED: u8 = 0;
const COLLECTOR_RUNNING: u8 = 1;
const COLLECTOR_DONE: u8 = 2;

/// Shared by the Ctrl-C watcher, the collector and the main thread: stopping a run early.
struct RunControl {
    ctx: Arc<LoadContext>,
    /// 0 while running, else the first `StopReason`.
    reason: AtomicU8,
    grace: Duration,
    handle: tokio::runtime::Handle,
    /// Second Ctrl-C: the collector flushes what it has and exits the process.
    flush_now: tokio::sync::Notify,
    collector_state: AtomicU8,
}

impl RunControl {
    fn reason(&self) -> Option<StopReason> {
        match self.reason.load(Ordering::SeqCst) {
            1 => Some(StopReason::Interrupted),
            2 => Some(StopReason::ThresholdExceeded),
            3 => Some(StopReason::ServerUnreachable),
            _ => None,
        }
    }

    /// Stops sending; requests in flight get the grace period, then are cancelled. Only the
    /// first reason counts; returns false if the run was already stopping.
    fn stop(&self, reason: StopReason) -> bool {
        if self
            .reason
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        self.ctx.stop.store(true, Ordering::SeqCst);
        let ctx = self.ctx.clone();
        let grace = self.grace;
        self.handle.spawn(async move {
            tokio::time::sleep(grace).await;
            let left = ctx.in_flight.load(Ordering::SeqCst);
            if left > 0 {
                warn!(
                    "Grace period of {:.1} s over: cancelling {left} requests still in flight",
                    grace.as_secs_f64()
                );
            }
            ctx.client.cancel_all();
        });
        true
    }
}

/// Watches finished records for a dead server and for too many failures. Each kind of error
/// is logged once, the first time it occurs; the Error Summary has the counts.
struct FailureWatch {
    control: Arc<RunControl>,
    threshold: Option<f64>,
    /// Records needed before the threshold is checked: max(concurrency, 10).
    min_records: u64,
    finished: u64,
    failed: u64,
    any_success: bool,
    connection_errors_in_a_row: u64,
    logged_kinds: std::collections::HashSet<String>,
}

impl FailureWatch {
    fn new(control: Arc<RunControl>, threshold: Option<f64>, concurrency: u64) -> Self {
        FailureWatch {
            control,
            threshold,
            min_records: concurrency.max(10),
            finished: 0,
            failed: 0,
            any_success: false,
            connection_errors_in_a_row: 0,
            logged_kinds: Default::default(),
        }
    }

    fn observe(&mut self, record: &RequestRecord) {
        let Some(err) = &record.error else {
            self.any_success = true;
            self.connection_errors_in_a_row = 0;
            self.count(record.phase, false);
            return;
        };
        if !record.was_cancelled && self.logged_kinds.insert(err.kind.clone()) {
            let uri = shown_uri(self.control.ctx.client.uri());
            if err.kind == CONNECTION_ERROR {
                error!(
                    "Cannot connect to the server at {uri}: {}. Is it running, and is --url right? \
                     (Further failures of this kind are counted in the Error Summary, not logged.)",
                    err.message
                );
            } else {
                warn!(
                    "A request failed: {} {}: {} (further failures of this kind are counted in the Error Summary, not logged)",
                    err.code.map_or("N/A".to_string(), |c| c.to_string()),
                    err.kind,
                    err.message
                );
            }
        }
        if err.kind == CONNECTION_ERROR {
            self.connection_errors_in_a_row += 1;
        } else {
            self.connection_errors_in_a_row = 0;
        }
        if !self.any_success
            && self.connection_errors_in_a_row >= self.min_records
            && self.control.stop(StopReason::ServerUnreachable)
        {
            error!(
                "Stopping: the server at {} refused {} connections in a row and never answered; nothing more will be sent",
                shown_uri(self.control.ctx.client.uri()),
                self.connection_errors_in_a_row
            );
        }
        self.count(record.phase, true);
    }

    fn count(&mut self, phase: Phase, failed: bool) {
        if phase != Phase::Profiling {
            return;
        }
        self.finished += 1;
        self.failed += u64::from(failed);
        let Some(threshold) = self.threshold else {
            return;
        };
        let share = self.failed as f64 / self.finished as f64;
        if self.finished >= self.min_records
            && share > threshold
            && self.control.stop(StopReason::ThresholdExceeded)
        {
            error!(
                "Stopping: {} of {} requests failed ({:.1}%), more than --failed-request-threshold {threshold}",
                self.failed,
                self.finished,
                share * 100.0
            );
        }
    }
}

/// Polls `/v1/models` until the server answers (2xx, or 404/405 from a server without that
/// route), at most `limit`. The error says what the last poll got.
async fn wait_for_model(
    client: &HttpClient,
    limit: Duration,
    interval: Duration,
    control: &RunControl,
) -> Result<(), String> {
    let models_uri = client.models_uri();
    let uri = shown_uri(&models_uri);
    info!(
        "Waiting up to {:.1} s for the server to answer at {uri}",
        limit.as_secs_f64()
    );
    let started = Instant::now();
    let deadline = started + limit;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let last = match client
            .probe(
                models_uri.clone(),
                remaining.max(Duration::from_millis(100)),
            )
            .await
        {
            Ok(status) if (200..300).contains(&status) || status == 404 || status == 405 => {
                info!(
                    "Server ready after {:.1} s (HTTP {status})",
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            Ok(status) => format!("it answered HTTP {status}"),
            Err(e) => e,
        };
        if control.reason().is_some() {
            return Err("interrupted".into());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "the server at {uri} was not ready after {:.1} s (last try: {last})",
                started.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
    }
}

/// First Ctrl-C: stop sending and let in-flight requests finish within the grace period.
/// Second: flush the per-record file and exit at once.
async fn watch_ctrl_c(control: Arc<RunControl>) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    let in_flight = control.ctx.in_flight.load(Ordering::Relaxed);
    if control.stop(StopReason::Interrupted) {
        warn!(
            "Interrupted: no new requests; waiting up to {:.1} s for {in_flight} in flight. Results will be partial. Press Ctrl-C again to quit at once",
            control.grace.as_secs_f64()
        );
    } else {
        // Already stopping for another reason: the user wants out now.
        control.ctx.client.cancel_all();
    }
    if tokio::signal::ctrl_c().await.is_ok() {
        let _ = std::io::stderr().write_all(b"Interrupted twice: exiting now\n");
        if control.collector_state.load(Ordering::SeqCst) == COLLECTOR_RUNNING {
            control.flush_now.notify_one();
            // The collector exits the process once the file is flushed.
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        std::process::exit(130);
    }
}

/// A URI for logs and exports: credentials in it (`user:password@`) become `***`.
fn shown_uri(uri: &http::Uri) -> String {
    let text = uri.to_string();
    match uri.authority().map(|a| a.as_str()) {
        Some(auth) if auth.contains('@') => {
            let host = &auth[auth.rfind('@').map_or(0, |i| i + 1)..];
            text.replacen(auth, &format!("***@{host}"), 1)
        }
        _ => text,
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
            "url": shown_uri(&cfg.request_uri),
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
            "conversation": {
                "num": cfg.load.sessions,
                "turn": {"mean": s.turns.mean, "stddev": s.turns.stddev},
                "turn_delay": {
                    "mean": s.turns.delay_mean_ms,
                    "stddev": s.turns.delay_stddev_ms,
                    "ratio": s.turns.delay_ratio,
                },
            },
        },
        "tokenizer": {"name": cfg.tokenizer, "revision": cfg.tokenizer_revision},
        "loadgen": {
            "concurrency": cfg.concurrency,
            "request_count": cfg.request_count,
            "warmup_request_count": cfg.warmup_request_count,
            "request_rate": cfg.load.rate.map(|(r, _)| r),
            "arrival_pattern": cfg.load.rate.map(|(_, p)| format!("{p:?}").to_lowercase()),
            "fixed_schedule": cfg.load.fixed_schedule,
            "benchmark_duration": cfg.load.duration.map(|d| d.as_secs_f64()),
            "benchmark_grace_period": cfg.load.grace.map(|d| d.as_secs_f64()),
            "warmup_duration": cfg.load.warmup_duration.map(|d| d.as_secs_f64()),
            "num_warmup_sessions": cfg.load.warmup.sessions,
            "warmup_grace_period": cfg.load.warmup.grace.map(|d| d.as_secs_f64()),
            "warmup_concurrency": cfg.load.warmup.concurrency,
            "warmup_request_rate": cfg.load.warmup.rate.map(|(r, _)| r),
            "request_cancellation_rate": cfg.load.cancellation.map(|c| c.share * 100.0),
            "request_cancellation_delay": cfg.load.cancellation.map(|c| c.delay.as_secs_f64()),
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
        // Later turns as AIPerf lists them: each turn's own body, without the history
        // (which holds replies not known before the run).
        let script = &plan.scripts[i];
        for k in 1..script.turns.len() {
            w.write_all(b", ")?;
            w.write_all(&script.turn_body(k, &[]))?;
        }
        w.write_all(b"]}")?;
    }
    w.write_all(b"\n  ]\n}\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_the_url_are_not_shown() {
        let uri: http::Uri = "http://user:pw@host:8000/v1/chat/completions"
            .parse()
            .unwrap();
        assert_eq!(shown_uri(&uri), "http://***@host:8000/v1/chat/completions");
        let plain: http::Uri = "https://h/v1/completions".parse().unwrap();
        assert_eq!(shown_uri(&plain), "https://h/v1/completions");
    }
}
