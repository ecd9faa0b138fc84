//! The collector thread: takes each finished record, computes its metrics, hands its line
//! to the per-record export, advances the progress bars and feeds the failure watch.

use std::sync::{Arc, LazyLock, Mutex};

use anyhow::Context;
use indicatif::ProgressBar;
use tokio::sync::mpsc::UnboundedSender;
use tracing::{error, warn};

use super::control::{FailureWatch, RunControl, StopReason};
use crate::config::ProfileConfig;
use crate::metrics::MetricId;
use crate::metrics::catalog::by_tag;
use crate::metrics::{
    Collector, CollectorOptions, GoodputSlo, RecordMetrics, RecordSink, TemplateOverhead,
};
use crate::plot::RECORD_TAGS;
use crate::plot::load::{MetricKey, RecordRow};
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
    /// The profiling records' chart rows, kept for the HTML report.
    chart_rows: Option<Arc<Mutex<ChartColumns>>>,
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
        let mut files = export::record_files(&cfg.artifact_dir, &cfg.export, clock, layout)
            .with_context(|| format!("cannot create {}", cfg.export.names.jsonl))?;
        // The report charts the records of profile_export.jsonl: keep them as they are
        // written rather than read the file back.
        let mut chart_rows = None;
        if cfg.export.html_report && cfg.export.level == export::Level::Records {
            let rows = Arc::new(Mutex::new(ChartColumns::default()));
            files = files.map(|files| -> Box<dyn RecordSink> {
                Box::new(ChartRows {
                    files,
                    rows: rows.clone(),
                })
            });
            chart_rows = Some(rows);
        }
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
            chart_rows,
        })
    }

    /// Waits for the last record (every sender must be gone) and returns the collector,
    /// with what the report charts of the profiling records when it will be written.
    pub fn finish(self) -> anyhow::Result<(Collector, Option<ChartColumns>)> {
        drop(self.records);
        let collector = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the collector thread panicked"))?;
        let chart_rows = self
            .chart_rows
            .map(|rows| std::mem::take(&mut *rows.lock().unwrap_or_else(|e| e.into_inner())));
        self.profile_bar.finish_and_clear();
        if collector.untokenized() > 0 {
            warn!(
                "{} records were written without token counts (ISL of later turns, OSL): the run had to end before the tokenizer caught up",
                collector.untokenized()
            );
        }
        Ok((collector, chart_rows))
    }
}

/// The per-record files' sink, keeping what the report charts of each profiling record
/// as its line is written (reading the file back took a tenth of a short run's CPU).
struct ChartRows {
    files: Box<dyn RecordSink>,
    rows: Arc<Mutex<ChartColumns>>,
}

impl RecordSink for ChartRows {
    fn write(&mut self, record: &RequestRecord, metrics: &RecordMetrics) -> std::io::Result<()> {
        self.files.write(record, metrics)?;
        if record.phase == Phase::Profiling {
            self.rows
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(record, metrics);
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> std::io::Result<()> {
        self.files.finish()
    }
}

/// The charted facts of the profiling records, column by column: about 50 bytes a
/// request while the run goes on (a `RecordRow` takes about 170), made into rows once the
/// collector is done.
#[derive(Default)]
pub(super) struct ChartColumns {
    start_ns: Vec<u64>,
    end_ns: Vec<u64>,
    /// Bit `i`: the request has `plot::RECORD_TAGS[i]`; the top bit: it failed.
    present: Vec<u8>,
    /// The values present, request by request, in `RECORD_TAGS` order.
    values: Vec<f64>,
    /// (request, conversation, turn) of each request with images: what finds their sizes
    /// in `inputs.json`.
    with_images: Vec<(usize, String, u32)>,
}

const FAILED: u8 = 0x80;
const _: () = assert!(RECORD_TAGS.len() < 8, "a tag's bit would be FAILED's");

impl ChartColumns {
    fn push(&mut self, record: &RequestRecord, metrics: &RecordMetrics) {
        // RECORD_TAGS as catalogue ids, looked up once.
        static IDS: LazyLock<Vec<MetricId>> = LazyLock::new(|| {
            (RECORD_TAGS.iter())
                .map(|tag| by_tag(tag).expect("the charts read catalogue metrics").id)
                .collect()
        });
        let mut present = if record.error.is_some() { FAILED } else { 0 };
        for (i, &id) in IDS.iter().enumerate() {
            if let Some(v) = metrics.display(id) {
                present |= 1 << i;
                self.values.push(v);
            }
        }
        if record.input.num_images > 0 {
            let input = &record.input;
            let at = self.start_ns.len();
            self.with_images
                .push((at, input.conversation_id.clone(), input.turn_index));
        }
        self.start_ns.push(record.start_wall_ns);
        self.end_ns.push(record.end_wall_ns);
        self.present.push(present);
    }

    /// The rows: made after the collector's statistics, whose memory is gone by then.
    pub fn into_rows(self) -> Vec<RecordRow> {
        // Resolved once, not per row.
        let keys: Vec<MetricKey> = RECORD_TAGS.iter().map(|t| MetricKey::new(t)).collect();
        let mut values = self.values.into_iter();
        let mut rows: Vec<RecordRow> = (self.present.iter())
            .zip(self.start_ns.iter().zip(&self.end_ns))
            .map(|(&present, (&start, &end))| {
                let tags = (keys.iter().enumerate())
                    .filter(|(i, _)| present & 1 << i != 0)
                    .map(|(_, &key)| (key, values.next().expect("a value per bit")));
                RecordRow::new(start, end, String::new(), 0, present & FAILED != 0, tags)
            })
            .collect();
        for (at, conversation_id, turn) in self.with_images {
            rows[at].conversation_id = conversation_id;
            rows[at].turn_index = u64::from(turn);
        }
        rows
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::metrics::record_metrics::tests::{STREAMING, streamed_record};
    use crate::record::ErrorDetails;

    /// The rows kept for the report are the rows read back from the file written beside
    /// them: same requests, same metric values to the bit, warmup left out.
    #[test]
    fn kept_rows_are_the_rows_the_file_reads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let options = export::Options::default();
        let files = export::record_files(&dir, &options, Clock::new(), Default::default())
            .unwrap()
            .expect("the JSONL is written");
        let rows = Arc::new(Mutex::new(ChartColumns::default()));
        let mut sink: Box<dyn RecordSink> = Box::new(ChartRows {
            files,
            rows: rows.clone(),
        });
        let tokenizer = Tokenizer::builtin().unwrap();
        let opts = STREAMING;
        let mut second_turn = streamed_record(&[7, 9, 30, 31, 33]);
        second_turn.input.turn_index = 1;
        second_turn.input.conversation_id = "conv-9".into();
        second_turn.input.num_images = 1;
        let mut failed = streamed_record(&[3]);
        failed.error = Some(ErrorDetails {
            code: Some(500),
            kind: "Internal Server Error".into(),
            message: "boom".into(),
        });
        let mut warmup = streamed_record(&[5, 6]);
        warmup.phase = Phase::Warmup;
        for record in [
            streamed_record(&[21, 26, 31, 41]),
            warmup,
            second_turn,
            failed,
        ] {
            let metrics = RecordMetrics::compute(&record, &tokenizer, opts);
            sink.write(&record, &metrics).unwrap();
        }
        sink.finish().unwrap();
        let kept = std::mem::take(&mut *rows.lock().unwrap()).into_rows();
        let read = crate::plot::load::read_run(&dir, "run".into()).unwrap();
        assert_eq!(kept.len(), 3, "profiling records only");
        assert_eq!(read.records.len(), 3);
        let bits = |r: &RecordRow| {
            crate::plot::RECORD_TAGS
                .iter()
                .map(|t| r.metric(t).map(f64::to_bits))
                .collect::<Vec<_>>()
        };
        for (k, r) in kept.iter().zip(&read.records) {
            assert_eq!(
                (k.start_ns, k.end_ns, k.failed),
                (r.start_ns, r.end_ns, r.failed)
            );
            assert_eq!(bits(k), bits(r));
            assert_eq!(k.metric("input_sequence_length"), None, "not a chart's");
        }
        assert!(kept[2].failed && !kept[0].failed);
        // Only a request with images keeps what finds them in inputs.json.
        assert_eq!(
            (kept[1].conversation_id.as_str(), kept[1].turn_index),
            ("conv-9", 1)
        );
        assert_eq!(kept[0].conversation_id, "");
        assert!(kept[0].metric("inter_token_latency").unwrap().fract() != 0.0);
    }
}
