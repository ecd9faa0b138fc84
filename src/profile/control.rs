//! Run control: stopping a run early (Ctrl-C or SIGTERM, a dead server, too many failures,
//! an export that cannot be written), the grace period for requests in flight, and waiting
//! for the server before the first send.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::{debug, error, info, warn};

use super::Outcome;
use crate::config::{ProfileConfig, ReadinessProbe};
use crate::endpoint::EndpointType;
use crate::load::LoadContext;
use crate::record::{Phase, RequestInput, RequestRecord};
use crate::transport::{CONNECTION_ERROR, HttpClient};

/// Why a run stopped sending before its count was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    Interrupted = 1,
    ThresholdExceeded = 2,
    ServerUnreachable = 3,
    /// The server answered, then refused connection after connection.
    ServerLost = 4,
    /// SIGTERM (`timeout`, docker, Kubernetes, Slurm): handled like Ctrl-C.
    Terminated = 5,
    /// `profile_export.jsonl` could not be written (a full disk, a file size limit).
    WriteFailed = 6,
}

impl StopReason {
    const ALL: [StopReason; 6] = [
        StopReason::Interrupted,
        StopReason::ThresholdExceeded,
        StopReason::ServerUnreachable,
        StopReason::ServerLost,
        StopReason::Terminated,
        StopReason::WriteFailed,
    ];
}

/// Shared by the Ctrl-C watcher, the collector and the main thread: stopping a run early.
pub(super) struct RunControl {
    pub(super) ctx: Arc<LoadContext>,
    /// 0 while running, else the first `StopReason`.
    reason: AtomicU8,
    grace: Duration,
    pub(super) handle: tokio::runtime::Handle,
    /// Set when the run must end now (the grace period is over, or a second signal): the
    /// collector stops tokenizing so that its backlog cannot hold the exit.
    hurry: AtomicBool,
}

impl RunControl {
    /// Control for a run over `ctx`; Ctrl-C and SIGTERM are watched from now on.
    pub(super) fn start(
        ctx: Arc<LoadContext>,
        grace: Duration,
        handle: tokio::runtime::Handle,
    ) -> Arc<Self> {
        let control = Arc::new(RunControl {
            ctx,
            reason: AtomicU8::new(0),
            grace,
            handle: handle.clone(),
            hurry: AtomicBool::new(false),
        });
        handle.spawn(watch_signals(control.clone()));
        control
    }

    pub(super) fn reason(&self) -> Option<StopReason> {
        let code = self.reason.load(Ordering::SeqCst);
        StopReason::ALL.into_iter().find(|r| *r as u8 == code)
    }

    /// True once the run must end now; see `hurry`.
    pub(super) fn hurrying(&self) -> bool {
        self.hurry.load(Ordering::SeqCst)
    }

    /// Ends the run now: requests in flight are cancelled (recorded as 499) and the
    /// collector writes what is left without tokenizing.
    fn end_now(&self) {
        self.hurry.store(true, Ordering::SeqCst);
        self.ctx.client.cancel_all();
    }

    /// Stops sending; requests in flight get the grace period, then are cancelled. Only the
    /// first reason counts; returns false if the run was already stopping.
    pub(super) fn stop(self: &Arc<Self>, reason: StopReason) -> bool {
        if self
            .reason
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        self.ctx.stop.store(true, Ordering::SeqCst);
        let control = self.clone();
        self.handle.spawn(async move {
            tokio::time::sleep(control.grace).await;
            let left = control.ctx.in_flight.load(Ordering::SeqCst);
            if left > 0 {
                warn!(
                    "Grace period of {:.1} s over: cancelling {left} requests still in flight",
                    control.grace.as_secs_f64()
                );
            }
            control.end_now();
        });
        true
    }
}

/// Watches finished records for a dead server and for too many failures. Each kind of error
/// is logged once, the first time it occurs; the Error Summary has the counts.
pub(super) struct FailureWatch {
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
    pub(super) fn new(control: Arc<RunControl>, threshold: Option<f64>, concurrency: u64) -> Self {
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

    pub(super) fn observe(&mut self, record: &RequestRecord) {
        let Some(err) = &record.error else {
            self.any_success = true;
            self.connection_errors_in_a_row = 0;
            self.count(record.phase, false);
            return;
        };
        if !record.was_cancelled && self.logged_kinds.insert(err.kind.clone()) {
            let uri = self.control.ctx.client.uri();
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
        // Refusals in a row mean the server is gone, whether it ever answered or not:
        // sending on would only add thousands of connection errors a second.
        if self.connection_errors_in_a_row >= self.min_records {
            let uri = self.control.ctx.client.uri();
            let n = self.connection_errors_in_a_row;
            if !self.any_success && self.control.stop(StopReason::ServerUnreachable) {
                error!(
                    "Stopping: the server at {uri} refused {n} connections in a row and never answered; nothing more will be sent"
                );
            } else if self.any_success && self.control.stop(StopReason::ServerLost) {
                error!(
                    "Stopping: the server at {uri} stopped answering: it refused {n} connections in a row; nothing more will be sent"
                );
            }
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

/// What `--wait-for-model-timeout` waits for, and for how long.
pub(super) struct Readiness {
    pub(super) probe: ReadinessProbe,
    pub(super) limit: Duration,
    pub(super) interval: Duration,
    /// The model `/v1/models` must list.
    pub(super) model: String,
    /// The one-token request of the inference probe.
    pub(super) request: Bytes,
}

impl Readiness {
    pub(super) fn of(cfg: &ProfileConfig, limit: Duration) -> Readiness {
        Readiness {
            probe: cfg.failures.wait_for_model_mode,
            limit,
            interval: cfg.failures.wait_for_model_interval,
            model: cfg.model.clone(),
            request: readiness_request(cfg),
        }
    }
}

/// A canned request for one token: a short user message (chat) or prompt (completions).
fn readiness_request(cfg: &ProfileConfig) -> Bytes {
    let body = match cfg.endpoint_type {
        EndpointType::Chat => {
            let max = if cfg.use_legacy_max_tokens {
                "max_tokens"
            } else {
                "max_completion_tokens"
            };
            serde_json::json!({
                "model": cfg.model,
                "messages": [{"role": "user", "content": "Hello"}],
                max: 1,
            })
        }
        EndpointType::Completions => serde_json::json!({
            "model": cfg.model,
            "prompt": "Hello",
            "max_tokens": 1,
        }),
        EndpointType::AudioTranscription => {
            return crate::endpoint::audio_transcription::probe_body(&cfg.model);
        }
        EndpointType::Responses => crate::endpoint::responses::probe_body(&cfg.model),
        EndpointType::Messages => crate::endpoint::messages::probe_body(&cfg.model),
        // Non-chat endpoint types: one short text (a raw run's probe is its first body).
        EndpointType::Raw => return Bytes::new(),
        other => {
            return crate::endpoint::probe_body(other, &cfg.model, &cfg.extra_inputs)
                .unwrap_or_default();
        }
    };
    Bytes::from(body.to_string())
}

/// Sent as `X-Request-ID` by the inference readiness probe.
const READINESS_REQUEST_ID: &str = "aiperf-readiness-probe";

/// Waits until the server is ready (`--wait-for-model-timeout`): `None` to go on, or the
/// outcome when a signal came first; an error when it never became ready.
pub(super) fn wait_for_server(
    control: &RunControl,
    readiness: &Readiness,
) -> anyhow::Result<Option<Outcome>> {
    let ready = control
        .handle
        .block_on(wait_until_ready(&control.ctx, readiness, control));
    match ready {
        Ok(()) => Ok(None),
        Err(_) if control.reason() == Some(StopReason::Interrupted) => {
            warn!("Interrupted while waiting for the server; nothing was sent");
            Ok(Some(Outcome::Interrupted))
        }
        Err(_) if control.reason() == Some(StopReason::Terminated) => {
            warn!("Terminated while waiting for the server; nothing was sent");
            Ok(Some(Outcome::Terminated))
        }
        Err(why) => Err(anyhow::anyhow!(
            "--wait-for-model-timeout {}: {why}; nothing was sent",
            readiness.limit.as_secs_f64()
        )),
    }
}

/// Probes the server every `interval` until it passes `readiness.probe`, at most `limit`.
/// The error says what the last probe got.
async fn wait_until_ready(
    ctx: &LoadContext,
    readiness: &Readiness,
    control: &RunControl,
) -> Result<(), String> {
    let what = match readiness.probe {
        ReadinessProbe::Models => "list the model at /v1/models",
        ReadinessProbe::Inference => "answer a one-token request",
        ReadinessProbe::Both => "list the model at /v1/models and answer a one-token request",
    };
    info!(
        "Waiting up to {:.1} s for the server to {what}",
        readiness.limit.as_secs_f64()
    );
    let started = Instant::now();
    let deadline = started + readiness.limit;
    loop {
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        let mut result = Ok(());
        if readiness.probe != ReadinessProbe::Inference {
            result = model_listed(&ctx.client, &readiness.model, remaining).await;
        }
        if result.is_ok() && readiness.probe != ReadinessProbe::Models {
            result = one_token(ctx, &readiness.request, remaining).await;
        }
        let last = match result {
            Ok(()) => {
                info!(
                    "Server ready after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                return Ok(());
            }
            Err(last) => last,
        };
        debug!("Server not ready yet: {last}");
        if control.reason().is_some() {
            return Err("interrupted".into());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "the server at {} was not ready within {:.1} s: it did not {what} (last try: {last})",
                ctx.client.uri(),
                started.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(readiness.interval.min(deadline - now)).await;
    }
}

/// `GET /v1/models` answers 2xx with `model` among its `data[].id`.
async fn model_listed(client: &HttpClient, model: &str, timeout: Duration) -> Result<(), String> {
    let uri = client.models_uri();
    let (status, body) = client
        .probe(http::Method::GET, uri.clone(), timeout)
        .await?;
    if !(200..300).contains(&status) {
        return Err(format!("GET {uri} answered HTTP {status}"));
    }
    let listed: Vec<String> = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("data")?.as_array().map(|models| {
                models
                    .iter()
                    .filter_map(|m| m.get("id")?.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default();
    if listed.iter().any(|id| id == model) {
        Ok(())
    } else {
        Err(format!(
            "GET {uri} does not list {model} (it lists: {})",
            listed.join(", ")
        ))
    }
}

/// The canned one-token request succeeds.
async fn one_token(ctx: &LoadContext, request: &Bytes, timeout: Duration) -> Result<(), String> {
    let input = RequestInput {
        correlation_id: READINESS_REQUEST_ID.into(),
        ..RequestInput::default()
    };
    // An empty probe (raw bodies) sends the run's first body.
    let body = match ctx.plan.requests.first() {
        Some(first) if request.is_empty() => first.body.clone(),
        _ => request.clone(),
    };
    let exchange = ctx.client.exchange(
        &ctx.clock,
        Phase::Warmup,
        input,
        READINESS_REQUEST_ID.into(),
        body,
    );
    let record = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("no answer within {:.1} s", timeout.as_secs_f64()))?;
    match &record.error {
        None => Ok(()),
        Some(e) => Err(format!(
            "a one-token request failed: {}{}: {}",
            e.code.map_or(String::new(), |c| format!("{c} ")),
            e.kind,
            e.message
        )),
    }
}

/// The first Ctrl-C or SIGTERM stops sending and lets in-flight requests finish within the
/// grace period. The second ends the run now: in-flight requests are cancelled, and every
/// record and the summary are still written. A third exits at once.
async fn watch_signals(control: Arc<RunControl>) {
    let Ok(mut signals) = Signals::new() else {
        warn!("Cannot watch Ctrl-C and SIGTERM; stopping the run early will lose its results");
        return;
    };
    let first = signals.next().await;
    let in_flight = control.ctx.in_flight.load(Ordering::Relaxed);
    if control.stop(first) {
        let what = match first {
            StopReason::Terminated => "Terminated (SIGTERM)",
            _ => "Interrupted",
        };
        warn!(
            "{what}: no new requests; waiting up to {:.1} s for {in_flight} in flight. Results will be partial. Press Ctrl-C again to quit at once",
            control.grace.as_secs_f64()
        );
    } else {
        // Already stopping for another reason: the user wants out now.
        control.end_now();
    }
    signals.next().await;
    warn!(
        "Interrupted twice: cancelling the requests in flight and writing the results; press Ctrl-C again to exit without them"
    );
    control.end_now();
    signals.next().await;
    crate::dashboard::restore_terminal();
    std::process::exit(130);
}

/// SIGINT (Ctrl-C) and SIGTERM, as they come.
struct Signals {
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            sigint: signal(SignalKind::interrupt())?,
            sigterm: signal(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) -> StopReason {
        tokio::select! {
            _ = self.sigint.recv() => StopReason::Interrupted,
            _ = self.sigterm.recv() => StopReason::Terminated,
        }
    }
}
