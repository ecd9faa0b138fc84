//! Run control: stopping a run early (Ctrl-C or SIGTERM, a dead server, too many failures,
//! an export that cannot be written), the grace period for requests in flight, and waiting
//! for the server before the first send.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use super::Outcome;
use crate::load::LoadContext;
use crate::record::{Phase, RequestRecord};
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

/// `--wait-for-model-timeout`: `Ok(None)` once the server answers, `Ok(Some(Interrupted))`
/// (or `Terminated`) when a signal came first, an error when it never answered.
pub(super) fn wait_for_server(
    control: &RunControl,
    limit: Duration,
    interval: Duration,
) -> anyhow::Result<Option<Outcome>> {
    let ready = control.handle.block_on(wait_for_model(
        &control.ctx.client,
        limit,
        interval,
        control,
    ));
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
            limit.as_secs_f64()
        )),
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
    let uri = &models_uri;
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
