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
use crate::metrics::live::{LiveBoard, LivePhase, LiveRecorder};
use crate::metrics::{
    Collector, CollectorOptions, GoodputSlo, RecordMetrics, RecordSink, RecordTap, TemplateOverhead,
};
use crate::plot::RECORD_TAGS;
use crate::plot::artifacts::RecordRow;
use crate::plot::streamed::{Row, Rows};
use crate::record::{Phase, RequestRecord};
use crate::report::KeptRecords;
use crate::spill::{Log, Spill, get_varint, put_varint};
use crate::tokenizer::Tokenizer;

/// Records taken per wake of the collector thread.
const GATHER_LIMIT: usize = 1024;
/// Pause after each batch so that, under load, records arrive while nobody waits for them.
const GATHER_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);
/// The longest the live figures go unpublished while no record comes.
const LIVE_REFRESH: std::time::Duration = std::time::Duration::from_millis(250);
use crate::{export, ui};

/// A running collector: where the phases send records, and the bars it advances.
pub(super) struct Collection {
    pub records: UnboundedSender<RequestRecord>,
    pub warmup_bar: ProgressBar,
    pub profile_bar: ProgressBar,
    /// The live figures the dashboard and live exporters read, when one is up.
    pub live: Option<Arc<LiveBoard>>,
    thread: std::thread::JoinHandle<Collector>,
    /// The profiling records' chart rows, kept for the HTML report.
    chart_rows: Option<Arc<Mutex<ChartColumns>>>,
}

/// What else reads each finished record on the collector thread.
pub(super) struct RecordReaders<'a> {
    /// The live OpenTelemetry export (`--otel-url`).
    pub tap: Option<Box<dyn RecordTap>>,
    /// Accuracy mode's grader, beside the per-record files.
    pub grading: Option<&'a crate::accuracy::export::Grading>,
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
        readers: RecordReaders,
    ) -> anyhow::Result<Collection> {
        let RecordReaders { tap, grading } = readers;
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
            let (charted, rows) = ChartRows::around(files);
            files = charted;
            chart_rows = Some(rows);
        }
        if let Some(g) = grading {
            files = Some(
                g.sink(&cfg.artifact_dir, files)
                    .context("cannot create accuracy_export.jsonl")?,
            );
        }
        let options = CollectorOptions {
            streaming: cfg.streaming,
            use_server_token_count: cfg.use_server_token_count,
            goodput,
            template_overhead,
            slice_duration_ns: cfg.export.slice_duration_ns,
            no_output_tokens: !cfg.endpoint_type.produces_tokens(),
            no_input_tokens: !cfg.endpoint_type.tokenizes_input(),
            // Checked before the run (`prepare`): the template is there.
            chat_isl: match cfg.apply_chat_template {
                true => tokenizer
                    .chat_template()?
                    .map(|t| crate::metrics::ChatIsl::new(Arc::new(t))),
                false => None,
            },
        };
        let mut collector = Collector::new(options, tokenizer, clock, files);
        if let Some(tap) = tap {
            collector.tap(tap);
        }
        let live = cfg.wants_live_figures().then(|| {
            let board = Arc::new(LiveBoard::default());
            collector.show_live(LiveRecorder::new(board.clone()));
            board
        });
        // The live view refreshes while no record comes (a slow server): wait at most this.
        let idle_publish = live.as_ref().map(|_| LIVE_REFRESH);
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
                    loop {
                        let got = match idle_publish {
                            None => rx.recv_many(&mut batch, GATHER_LIMIT).await,
                            Some(wait) => {
                                match tokio::time::timeout(
                                    wait,
                                    rx.recv_many(&mut batch, GATHER_LIMIT),
                                )
                                .await
                                {
                                    Ok(n) => n,
                                    Err(_) => {
                                        collector.publish_live(false);
                                        continue;
                                    }
                                }
                            }
                        };
                        if got == 0 {
                            break;
                        }
                        // The bars move once a batch: each `inc` reads the clock and
                        // updates the bar's rate estimate, even when the bar is hidden.
                        let (mut warmup, mut profiling) = (0, 0);
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
                                Phase::Warmup => warmup += 1,
                                Phase::Profiling => profiling += 1,
                            }
                        }
                        for (bar, n) in [(&wb, warmup), (&pb, profiling)] {
                            if n > 0 {
                                bar.inc(n);
                            }
                        }
                        collector.publish_live(false);
                        // Let the next records gather instead of being woken by each one: a
                        // waiting receiver costs the sending worker a futex wake per record.
                        std::thread::sleep(GATHER_PAUSE);
                    }
                    collector.publish_live(true);
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
            live,
            thread,
            chart_rows,
        })
    }

    /// Tells the live view the run entered `phase` at run-clock `at_ns`.
    pub fn show_phase(&self, phase: LivePhase, at_ns: u64) {
        if let Some(board) = &self.live {
            board.set_phase(phase, at_ns);
        }
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

impl ChartRows {
    /// `files` (when there are any) keeping the chart rows, and where they are kept.
    fn around(
        files: Option<Box<dyn RecordSink>>,
    ) -> (Option<Box<dyn RecordSink>>, Arc<Mutex<ChartColumns>>) {
        let rows = Arc::new(Mutex::new(ChartColumns::default()));
        let files = files.map(|files| -> Box<dyn RecordSink> {
            Box::new(ChartRows {
                files,
                rows: rows.clone(),
            })
        });
        (files, rows)
    }
}

/// The collector thread's work on each record of a default streamed chat run (the
/// per-record file and the report's chart rows), without the thread and the run: what the
/// `collector_record` bench times.
pub struct RecordPath {
    collector: Collector,
}

impl RecordPath {
    /// Writes `profile_export.jsonl` in `dir`, counting tokens with `tokenizer`.
    pub fn new(dir: &std::path::Path, tokenizer: Arc<Tokenizer>) -> std::io::Result<RecordPath> {
        let clock = crate::clock::Clock::new();
        let files =
            export::record_files(dir, &export::Options::default(), clock, Default::default())?;
        let (files, _rows) = ChartRows::around(files);
        let options = CollectorOptions {
            streaming: true,
            ..CollectorOptions::default()
        };
        Ok(RecordPath {
            collector: Collector::new(options, tokenizer, clock, files),
        })
    }

    /// Takes one finished record, as the collector thread does (and drops it).
    pub fn add(&mut self, record: RequestRecord) -> std::io::Result<()> {
        self.collector.add(&record)
    }

    /// Flushes the file.
    pub fn close(mut self) -> std::io::Result<()> {
        self.collector.close_sink()
    }
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

/// The charted facts of the profiling records, as the per-record file's lines are written:
/// each a row of about 50 bytes in a log that spills to a temporary file as the run goes,
/// read back as a stream by the report; the few with images are also held whole, with
/// what finds their sizes in `inputs.json`.
pub(super) struct ChartColumns {
    rows: Log,
    with_images: Vec<RecordRow>,
}

const FAILED: u8 = 0x80;
const _: () = assert!(RECORD_TAGS.len() < 8, "a tag's bit would be FAILED's");

impl Default for ChartColumns {
    fn default() -> Self {
        ChartColumns {
            rows: Log::new(&Spill::new()),
            with_images: Vec::new(),
        }
    }
}

impl ChartColumns {
    /// Each row: its start and its end after it (varints), a byte of the tags present and
    /// whether it failed, then the values present in `RECORD_TAGS` order, as their bits.
    fn push(&mut self, record: &RequestRecord, metrics: &RecordMetrics) {
        // RECORD_TAGS as catalogue ids, looked up once.
        static IDS: LazyLock<Vec<MetricId>> = LazyLock::new(|| {
            (RECORD_TAGS.iter())
                .map(|tag| by_tag(tag).expect("the charts read catalogue metrics").id)
                .collect()
        });
        let out = self.rows.tail();
        put_varint(out, u128::from(record.start_wall_ns));
        put_varint(
            out,
            u128::from(record.end_wall_ns.wrapping_sub(record.start_wall_ns)),
        );
        let at = out.len();
        let mut present = if record.error.is_some() { FAILED } else { 0 };
        out.push(0);
        for (i, &id) in IDS.iter().enumerate() {
            if let Some(v) = metrics.display(id) {
                present |= 1 << i;
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        out[at] = present;
        self.rows.end_item();
        if record.input.num_images > 0 {
            let input = &record.input;
            let tags = (RECORD_TAGS.iter().zip(IDS.iter()))
                .filter_map(|(tag, &id)| Some((*tag, metrics.display(id)?)));
            self.with_images.push(RecordRow::new(
                record.start_wall_ns,
                record.end_wall_ns,
                input.conversation_id.clone(),
                u64::from(input.turn_index),
                record.error.is_some(),
                tags,
            ));
        }
    }

    /// The records for the report: these rows as a stream, and those with images.
    pub fn kept(&mut self) -> KeptRecords<'_> {
        let with_images = std::mem::take(&mut self.with_images);
        KeptRecords {
            rows: &*self,
            with_images,
        }
    }
}

impl Rows for ChartColumns {
    fn for_each(&self, f: &mut dyn FnMut(&Row)) {
        let mut reader = self.rows.reader();
        while let Some(bytes) = reader.rest() {
            let (start, a) = get_varint(bytes);
            let (took, b) = get_varint(&bytes[a..]);
            let mut at = a + b;
            let present = bytes[at];
            at += 1;
            let mut values = [None; RECORD_TAGS.len()];
            for (i, v) in values.iter_mut().enumerate() {
                if present & 1 << i != 0 {
                    let raw = bytes[at..at + 8].try_into().expect("8 bytes");
                    *v = Some(f64::from_bits(u64::from_le_bytes(raw)));
                    at += 8;
                }
            }
            reader.advance(at);
            let start = start as u64;
            f(&Row {
                start_ns: start,
                end_ns: start.wrapping_add(took as u64),
                failed: present & FAILED != 0,
                values,
            });
        }
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
        let mut columns = std::mem::take(&mut *rows.lock().unwrap());
        let mut kept = Vec::new();
        columns.for_each(&mut |r| kept.push(*r));
        let read = crate::plot::artifacts::read_run(&dir, "run".into()).unwrap();
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
            assert_eq!(k.values.map(|v| v.map(f64::to_bits)).to_vec(), bits(r));
        }
        assert!(kept[2].failed && !kept[0].failed);
        // Only a request with images is held whole, with what finds them in inputs.json.
        let with_images = columns.kept().with_images;
        assert_eq!(with_images.len(), 1);
        let image_row = &with_images[0];
        assert_eq!(
            (image_row.conversation_id.as_str(), image_row.turn_index),
            ("conv-9", 1)
        );
        assert_eq!(bits(image_row), bits(&read.records[1]));
        assert_eq!(
            image_row.metric("input_sequence_length"),
            None,
            "not a chart's"
        );
        assert!(kept[0].values[1].unwrap().fract() != 0.0);
    }
}
