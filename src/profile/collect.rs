//! The collector thread: takes each finished record, computes its metrics, hands its line
//! to the per-record export, advances the progress bars and feeds the failure watch.

use std::sync::Arc;

use anyhow::Context;
use indicatif::ProgressBar;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{error, warn};

use super::control::{FailureWatch, RunControl, StopReason};
use crate::config::ProfileConfig;
use crate::metrics::{Collector, CollectorOptions, GoodputSlo, TemplateOverhead};
use crate::record::{Phase, RequestRecord};
use crate::tokenizer::Tokenizer;

/// Records taken per wake of the collector thread.
const GATHER_LIMIT: usize = 1024;
/// Pause after each batch so that, under load, records arrive while nobody waits for them.
const GATHER_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);
use crate::{export, ui};

/// A running collector: where the phases send records, and the bars it advances.
pub(super) struct Collection {
    pub records: UnboundedSender<RequestRecord>,
    pub warmup_bar: ProgressBar,
    pub profile_bar: ProgressBar,
    thread: std::thread::JoinHandle<Collector>,
}

impl Collection {
    /// Starts the thread, writing `profile_export.jsonl`. It ends when every sender of
    /// `records` is dropped.
    pub fn start(
        cfg: &ProfileConfig,
        goodput: Vec<GoodputSlo>,
        template_overhead: TemplateOverhead,
        tokenizer: Arc<Tokenizer>,
        control: &Arc<RunControl>,
        warmup_requests: u64,
    ) -> anyhow::Result<Collection> {
        let clock = control.ctx.clock;
        let layout = export::LineLayout {
            has_warmup: cfg.warmup_request_count > 0
                || cfg.load.warmup_duration.is_some()
                || cfg.load.warmup.sessions.is_some(),
            http_trace: cfg.export.http_trace,
        };
        let files = export::record_files(&cfg.artifact_dir, &cfg.export, clock, layout)
            .with_context(|| format!("cannot create {}", cfg.export.names.jsonl))?;
        let options = CollectorOptions {
            streaming: cfg.streaming,
            use_server_token_count: cfg.use_server_token_count,
            goodput,
            template_overhead,
            slice_duration_ns: cfg.export.slice_duration_ns,
            no_output_tokens: !cfg.endpoint_type.produces_tokens(),
            no_input_tokens: !cfg.endpoint_type.tokenizes_input(),
        };
        let collector = Collector::new(options, tokenizer, clock, files);
        let mut watch = FailureWatch::new(
            control.clone(),
            cfg.failures.failed_request_threshold,
            cfg.concurrency,
        );
        let warmup_bar = ui::phase_bar(cfg.ui, "Warmup", warmup_requests);
        let profile_bar = ui::phase_bar(cfg.ui, "Profiling", cfg.request_count);
        let control = control.clone();
        let (records, mut rx) = tokio::sync::mpsc::unbounded_channel::<RequestRecord>();
        let (wb, pb) = (warmup_bar.clone(), profile_bar.clone());
        let thread = std::thread::Builder::new()
            .name("collector".into())
            .spawn(move || {
                // Driven from this thread (not a runtime worker), so writing the JSONL never
                // blocks the requests.
                control.handle.block_on(async {
                    let mut collector = collector;
                    let mut batch = Vec::with_capacity(GATHER_LIMIT);
                    while rx.recv_many(&mut batch, GATHER_LIMIT).await > 0 {
                        for record in batch.drain(..) {
                            if control.hurrying() {
                                collector.skip_tokenizer();
                            }
                            if let Err(e) = collector.add(&record) {
                                write_failed(&control, &e);
                            }
                            watch.observe(&record);
                            trace_record(&record);
                            match record.phase {
                                Phase::Warmup => wb.inc(1),
                                Phase::Profiling => pb.inc(1),
                            }
                        }
                        // Let the next records gather instead of being woken by each one: a
                        // waiting receiver costs the sending worker a futex wake per record.
                        std::thread::sleep(GATHER_PAUSE);
                    }
                    if let Err(e) = collector.close_sink() {
                        write_failed(&control, &e);
                    }
                    collector
                })
            })
            .context("cannot start the collector thread")?;
        Ok(Collection {
            records,
            warmup_bar,
            profile_bar,
            thread,
        })
    }

    /// Waits for the last record (every sender must be gone) and returns the collector.
    pub fn finish(self) -> anyhow::Result<Collector> {
        drop(self.records);
        let collector = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the collector thread panicked"))?;
        self.profile_bar.finish_and_clear();
        if collector.untokenized() > 0 {
            warn!(
                "{} records were written without token counts (ISL of later turns, OSL): the run had to end before the tokenizer caught up",
                collector.untokenized()
            );
        }
        Ok(collector)
    }
}

/// One line per finished request at trace level (`-vv`, `--log-level trace`).
fn trace_record(r: &RequestRecord) {
    tracing::trace!(
        "Request {} ({}): HTTP {}, {} response chunks, {:.3} ms{}",
        r.x_request_id,
        r.phase.as_str(),
        r.status.map_or("-".to_string(), |s| s.to_string()),
        r.responses.len(),
        r.end_perf_ns.saturating_sub(r.start_perf_ns) as f64 / 1e6,
        r.error.as_ref().map_or(String::new(), |e| format!(
            ", error {}: {}",
            e.kind, e.message
        ))
    );
}

/// The per-record file cannot be written: stop sending (the statistics still take every
/// record, and the console shows them). The file keeps its whole lines.
fn write_failed(control: &Arc<RunControl>, e: &std::io::Error) {
    error!(
        "Stopping: cannot write profile_export.jsonl: {e}; nothing more will be sent. The file keeps its whole lines; the summary counts every request"
    );
    control.stop(StopReason::WriteFailed);
}
