//! Run control: stopping a run early (Ctrl-C, a dead server, too many failures), the
//! grace period for requests in flight, and waiting for the server before the first send.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tracing::{error, info, warn};

use super::Outcome;
use crate::config::shown_uri;
use crate::load::LoadContext;
use crate::record::{Phase, RequestRecord};
use crate::transport::{CONNECTION_ERROR, HttpClient};

/// Why a run stopped sending before its count was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    Interrupted = 1,
    ThresholdExceeded = 2,
    ServerUnreachable = 3,
}

pub(super) const COLLECTOR_NOT_STARTED: u8 = 0;
pub(super) const COLLECTOR_RUNNING: u8 = 1;
pub(super) const COLLECTOR_DONE: u8 = 2;

/// Shared by the Ctrl-C watcher, the collector and the main thread: stopping a run early.
pub(super) struct RunControl {
    pub(super) ctx: Arc<LoadContext>,
    /// 0 while running, else the first `StopReason`.
    reason: AtomicU8,
    grace: Duration,
    pub(super) handle: tokio::runtime::Handle,
    /// Second Ctrl-C: the collector flushes what it has and exits the process.
    pub(super) flush_now: tokio::sync::Notify,
    pub(super) collector_state: AtomicU8,
}

impl RunControl {
    /// Control for a run over `ctx`; Ctrl-C is watched from now on.
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
            flush_now: tokio::sync::Notify::new(),
            collector_state: AtomicU8::new(COLLECTOR_NOT_STARTED),
        });
        handle.spawn(watch_ctrl_c(control.clone()));
        control
    }

    pub(super) fn reason(&self) -> Option<StopReason> {
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

/// `--wait-for-model-timeout`: `Ok(None)` once the server answers, `Ok(Some(Interrupted))`
/// when Ctrl-C came first, an error when it never answered.
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
