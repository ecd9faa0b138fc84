//! `profile_export.jsonl`: one line per request in AIPerf's `MetricRecordInfo` layout.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::LazyLock;

use crate::clock::Clock;
use crate::metrics::catalog::{CATALOG, METRIC_COUNT, MetricDef};
use crate::metrics::{MetricId, RecordMetrics, RecordSink};
use crate::record::{Phase, RequestRecord};

use super::json_text::{WINDOW, push_i64, push_plain, push_str, push_u64, push_value, push_window};

/// AIPerf names the process that sent a request and the one that processed it. Here one
/// process does both, so every record carries the same two names.
pub const WORKER_ID: &str = "worker_0";
pub const RECORD_PROCESSOR_ID: &str = "record_processor_0";

/// Appends record lines to a file in whole lines: lines collect in a buffer that is written
/// out when full, and when a write fails (a full disk, a file size limit) the file is cut
/// back to its last whole line, so a reader never sees half a line.
pub struct JsonlWriter {
    file: File,
    /// Whole lines not yet written to `file`.
    buffer: Vec<u8>,
    /// Bytes of `file` known to be whole lines.
    committed: u64,
    /// The run's clock, to turn record times into wall-clock times.
    clock: Clock,
    layout: LineLayout,
}

/// Lines are written to the file in batches of about this many bytes.
const BATCH_BYTES: usize = 256 * 1024;

impl JsonlWriter {
    /// Creates `profile_export.jsonl` in `dir`.
    #[cfg(test)]
    pub fn create(dir: &Path, clock: Clock) -> std::io::Result<JsonlWriter> {
        std::fs::create_dir_all(dir)?;
        JsonlWriter::create_at(&dir.join(super::JSONL_FILE), clock, LineLayout::default())
    }

    /// Creates the per-record file at `path`, its lines laid out as `layout` says.
    pub fn create_at(
        path: &Path,
        clock: Clock,
        layout: LineLayout,
    ) -> std::io::Result<JsonlWriter> {
        Ok(JsonlWriter {
            file: File::create(path)?,
            buffer: Vec::with_capacity(BATCH_BYTES + 4096),
            committed: 0,
            clock,
            layout,
        })
    }

    /// Writes the buffered lines; on an error the file is cut back to the last whole line.
    fn write_buffer(&mut self) -> std::io::Result<()> {
        if let Err(e) = self.file.write_all(&self.buffer) {
            // Best effort: a device such as /dev/full cannot be cut, but took nothing either.
            let _ = self.file.set_len(self.committed);
            return Err(e);
        }
        self.committed += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl RecordSink for JsonlWriter {
    fn write(&mut self, record: &RequestRecord, metrics: &RecordMetrics) -> std::io::Result<()> {
        // Formatted in place: a line is whole once `format_line` returns, and only whole
        // lines reach the file.
        format_line(record, metrics, &self.clock, self.layout, &mut self.buffer);
        if self.buffer.len() >= BATCH_BYTES {
            self.write_buffer()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.write_buffer()?;
        self.file.sync_data()
    }
}

fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Serializing strings and numbers into a Vec cannot fail.
    serde_json::to_writer(&mut *out, value).expect("JSON into memory");
}

fn push_key(out: &mut Vec<u8>, key: &str) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Each metric's `,"tag":{"value":` and `,"unit":"..."}`, made once: a line writes them
/// as two pieces a metric instead of ten small appends, each copied as a fixed window
/// (`json_text::push_window`).
struct MetricPieces {
    /// The pieces one after the other, with a window's room after the last.
    bytes: Vec<u8>,
    /// Where each metric's head and tail start and end in `bytes`, by metric id.
    heads: Vec<(usize, usize)>,
    tails: Vec<(usize, usize)>,
}

static METRIC_PIECES: LazyLock<MetricPieces> = LazyLock::new(|| {
    let mut pieces = MetricPieces {
        bytes: Vec::new(),
        heads: vec![(0, 0); METRIC_COUNT],
        tails: vec![(0, 0); METRIC_COUNT],
    };
    for def in &CATALOG {
        let out = &mut pieces.bytes;
        let start = out.len();
        out.push(b',');
        push_key(out, def.tag);
        out.extend_from_slice(b"{\"value\":");
        pieces.heads[def.id as usize] = (start, out.len());
        let start = out.len();
        out.extend_from_slice(b",\"unit\":");
        push_plain(out, def.unit);
        out.push(b'}');
        pieces.tails[def.id as usize] = (start, out.len());
    }
    pieces.bytes.extend_from_slice(&[0; WINDOW]);
    // A piece longer than a window is copied as it is (none is today).
    pieces
});

impl MetricPieces {
    fn push(&self, out: &mut Vec<u8>, (start, end): (usize, usize)) {
        if end - start <= WINDOW {
            push_window(out, &self.bytes, start, end);
        } else {
            out.extend_from_slice(&self.bytes[start..end]);
        }
    }
}

/// What a line carries besides the record itself: facts of the run, and which optional
/// blocks are asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineLayout {
    /// The run had a warmup phase, so profiling is the second phase (`phase_index` 1).
    pub has_warmup: bool,
    /// Add the `trace_data` block (`--export-http-trace`).
    pub http_trace: bool,
}

/// `,"key":n` for a number that is there (`key` written with its comma, quotes and
/// colon); nothing for `None`. AIPerf leaves absent fields out of the line rather than
/// writing `null`.
#[inline]
fn push_opt_u64(out: &mut Vec<u8>, key: &'static [u8], value: Option<u64>) {
    if let Some(v) = value {
        out.extend_from_slice(key);
        push_u64(out, v);
    }
}

/// Formats one record as a JSON line (with the trailing newline) into `out`, with the
/// default layout (no warmup phase, no trace block).
pub fn format_record_line(
    record: &RequestRecord,
    metrics: &RecordMetrics,
    clock: &Clock,
    out: &mut Vec<u8>,
) {
    format_line(record, metrics, clock, LineLayout::default(), out)
}

/// The record's `metadata` object (the same in the records and the raw file).
pub(super) fn push_metadata(
    record: &RequestRecord,
    clock: &Clock,
    layout: LineLayout,
    out: &mut Vec<u8>,
) {
    let input = &record.input;
    let timing = &input.timing;
    // Keys as literals with their commas: fixed-size copies.
    out.extend_from_slice(b"{\"session_num\":");
    push_u64(out, input.session_num);
    out.extend_from_slice(b",\"x_request_id\":");
    push_str(out, &record.x_request_id);
    // One id per session (a dataset conversation can be replayed by several sessions).
    out.extend_from_slice(b",\"x_correlation_id\":");
    push_str(out, &input.correlation_id);
    out.extend_from_slice(b",\"conversation_id\":");
    push_str(out, &input.conversation_id);
    out.extend_from_slice(b",\"turn_index\":");
    push_u64(out, u64::from(input.turn_index));
    let issued = match timing.scheduled_perf_ns {
        Some(_) => clock.wall_ns(record.issued_perf_ns()),
        None => record.start_wall_ns,
    };
    out.extend_from_slice(b",\"credit_issued_ns\":");
    push_u64(out, issued);
    out.extend_from_slice(b",\"request_start_ns\":");
    push_u64(out, record.start_wall_ns);
    let wall = |perf_ns: Option<u64>| perf_ns.map(|t| clock.wall_ns(t));
    push_opt_u64(out, b",\"request_sent_ns\":", wall(record.sent_perf_ns));
    push_opt_u64(out, b",\"request_ack_ns\":", wall(record.ack_perf_ns));
    out.extend_from_slice(b",\"request_end_ns\":");
    push_u64(out, record.end_wall_ns);
    out.extend_from_slice(b",\"worker_id\":");
    push_plain(out, WORKER_ID);
    out.extend_from_slice(b",\"record_processor_id\":");
    push_plain(out, RECORD_PROCESSOR_ID);
    out.extend_from_slice(b",\"benchmark_phase\":");
    push_plain(out, record.phase.as_str());
    // The run's phases in order: an optional warmup, then one profiling phase.
    let (phase_index, profiling_index) = match record.phase {
        Phase::Warmup => (0, None),
        Phase::Profiling => (u64::from(layout.has_warmup), Some(0)),
    };
    push_opt_u64(out, b",\"phase_index\":", Some(phase_index));
    push_opt_u64(out, b",\"profiling_index\":", profiling_index);
    out.extend_from_slice(b",\"phase_name\":");
    push_plain(out, record.phase.as_str());
    out.extend_from_slice(b",\"phase_kind\":");
    push_plain(out, record.phase.as_str());
    out.extend_from_slice(match record.was_cancelled {
        true => b",\"was_cancelled\":true",
        false => b",\"was_cancelled\":false",
    });
    push_opt_u64(
        out,
        b",\"cancellation_time_ns\":",
        wall(record.cancellation_perf_ns),
    );
    // Every session is a root: no subagents fork from it.
    out.extend_from_slice(b",\"agent_depth\":0,\"root_correlation_id\":");
    push_str(out, &input.correlation_id);
    // Not in AIPerf's schema: when the send was due, how late it went, and how long it
    // waited for a concurrency slot (0 in a closed loop).
    push_opt_u64(out, b",\"scheduled_ns\":", wall(timing.scheduled_perf_ns));
    if let Some(lag) = record.send_lag_ns() {
        out.extend_from_slice(b",\"send_lag_ns\":");
        push_i64(out, lag);
    }
    push_opt_u64(out, b",\"slot_wait_ns\":", Some(timing.slot_wait_ns));
    // The output length asked for (`--osl`): `aiperf merge` counts OSL mismatches from it.
    push_opt_u64(
        out,
        b",\"requested_output_tokens\":",
        input.requested_output_tokens,
    );
    out.push(b'}');
}

/// Formats one record as a JSON line (with the trailing newline) into `out`.
///
/// Written by hand rather than with `#[derive(Serialize)]` structs on purpose: the derive
/// version (same bytes; `benches/jsonl_format.rs`) took 1.25-1.35x the time per line of a
/// 100-chunk streamed record (2.45-2.90 us against 1.95-2.15 us, same runs), because
/// serde_json escapes every key and the nested serializers are not inlined.
///
/// Metadata keys follow AIPerf's `MetricRecordMetadata` order; fields without a value
/// (an ack that never came, no cancellation, the profiling index of a warmup record) are
/// left out, as are `error` on a success and the DAG/source fields AIPerf only fills for
/// agentic traces (`parent_correlation_id`, `source_*`).
pub fn format_line(
    record: &RequestRecord,
    metrics: &RecordMetrics,
    clock: &Clock,
    layout: LineLayout,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"metadata\":");
    push_metadata(record, clock, layout, out);
    out.extend_from_slice(b",\"metrics\":{");

    let pieces = &*METRIC_PIECES;
    let mut first = true;
    let mut head = |out: &mut Vec<u8>, def: &MetricDef| {
        let (start, end) = pieces.heads[def.id as usize];
        // The first metric has no comma before it.
        pieces.push(out, (start + usize::from(first), end));
        first = false;
    };
    for (def, value) in metrics.display_scalars() {
        head(out, def);
        push_value(out, value, def.integer);
        pieces.push(out, pieces.tails[def.id as usize]);
    }
    if let Some(gaps) = &metrics.inter_chunk_latency {
        let def = MetricId::InterChunkLatency.def();
        head(out, def);
        out.push(b'[');
        for (i, gap) in gaps.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_value(out, gap / def.scale, false);
        }
        out.push(b']');
        pieces.push(out, pieces.tails[def.id as usize]);
    }
    out.push(b'}');
    if layout.http_trace {
        super::trace::push_trace_data(out, record, clock);
    }
    if let Some(e) = &record.error {
        out.extend_from_slice(b",\"error\":{");
        push_key(out, "code");
        push_json(out, &e.code);
        out.push(b',');
        push_key(out, "type");
        push_json(out, &e.kind);
        out.push(b',');
        push_key(out, "message");
        push_json(out, &e.message);
        out.push(b'}');
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record_metrics::tests::{STREAMING, streamed_record};
    use crate::record::ErrorDetails;
    use crate::tokenizer::Tokenizer;
    use serde_json::{Value, json};

    fn line_for(record: &RequestRecord) -> (Value, String) {
        let tokenizer = Tokenizer::builtin().unwrap();
        let opts = STREAMING;
        let m = RecordMetrics::compute(record, &tokenizer, opts);
        let mut out = Vec::new();
        format_record_line(record, &m, &Clock::new(), &mut out);
        let text = String::from_utf8(out).unwrap();
        (serde_json::from_str(&text).unwrap(), text)
    }

    #[test]
    fn valid_record_line_shape() {
        let (v, text) = line_for(&streamed_record(&[21, 26, 31, 41]));
        assert!(text.ends_with("}\n") && text.matches('\n').count() == 1);
        let md = &v["metadata"];
        assert_eq!(md["session_num"], 3);
        assert_eq!(md["x_request_id"], "req-3");
        assert_eq!(md["x_correlation_id"], "session-3");
        assert_eq!(md["conversation_id"], "conv-3");
        assert_eq!(md["turn_index"], 0);
        assert_eq!(md["request_start_ns"], 1_700_000_000_001_000_000u64);
        assert_eq!(md["request_end_ns"], 1_700_000_000_041_000_000u64);
        assert!(md["request_ack_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
        assert_eq!(md["worker_id"], WORKER_ID);
        assert_eq!(md["record_processor_id"], RECORD_PROCESSOR_ID);
        assert_eq!(md["benchmark_phase"], "profiling");
        assert_eq!(md["phase_index"], 0);
        assert_eq!(md["profiling_index"], 0);
        assert_eq!(md["phase_name"], "profiling");
        assert_eq!(md["phase_kind"], "profiling");
        assert_eq!(md["was_cancelled"], false);
        assert_eq!(md["agent_depth"], 0);
        assert_eq!(md["root_correlation_id"], "session-3");
        // A closed-loop send goes when its slot frees: released at its start.
        assert_eq!(md["credit_issued_ns"], md["request_start_ns"]);
        assert_eq!(md["slot_wait_ns"], 0);
        // Left out rather than null: no cancellation, no schedule, body never taken.
        for absent in [
            "cancellation_time_ns",
            "scheduled_ns",
            "send_lag_ns",
            "request_sent_ns",
        ] {
            assert!(md.get(absent).is_none(), "{absent}");
        }
        assert_eq!(md.as_object().unwrap().len(), 20);
        assert!(v.get("error").is_none() && v.get("trace_data").is_none());

        // A scheduled send carries its schedule and its lag.
        let mut late = streamed_record(&[21]);
        late.input.timing = crate::record::SendTiming {
            scheduled_perf_ns: Some(late.start_perf_ns - 250_000),
            slot_wait_ns: 40_000,
        };
        let (lv, _) = line_for(&late);
        assert_eq!(lv["metadata"]["send_lag_ns"], 250_000);
        assert_eq!(lv["metadata"]["slot_wait_ns"], 40_000);
        assert!(lv["metadata"]["scheduled_ns"].as_u64().unwrap() > 1_600_000_000_000_000_000);
        // Released when the slot came: the schedule plus the slot wait.
        assert_eq!(
            lv["metadata"]["credit_issued_ns"].as_u64().unwrap(),
            lv["metadata"]["scheduled_ns"].as_u64().unwrap() + 40_000
        );

        let m = &v["metrics"];
        assert_eq!(
            m["time_to_first_token"],
            json!({"value": 20.0, "unit": "ms"})
        );
        assert_eq!(m["request_latency"], json!({"value": 40.0, "unit": "ms"}));
        assert_eq!(
            m["input_sequence_length"],
            json!({"value": 550, "unit": "tokens"})
        );
        assert_eq!(
            m["output_sequence_length"],
            json!({"value": 4, "unit": "tokens"})
        );
        assert_eq!(
            m["inter_chunk_latency"],
            json!({"value": [5.0, 5.0, 10.0], "unit": "ms"})
        );
        assert_eq!(
            m["output_token_throughput_per_user"]["unit"],
            "tokens/sec/user"
        );
    }

    #[test]
    fn warmup_records_have_no_profiling_index_and_profiling_follows_warmup() {
        let tokenizer = Tokenizer::builtin().unwrap();
        let mut r = streamed_record(&[21]);
        let opts = STREAMING;
        let layout = LineLayout {
            has_warmup: true,
            http_trace: false,
        };
        let line = |r: &RequestRecord| {
            let m = RecordMetrics::compute(r, &tokenizer, opts);
            let mut out = Vec::new();
            format_line(r, &m, &Clock::new(), layout, &mut out);
            serde_json::from_slice::<Value>(&out).unwrap()
        };
        assert_eq!(line(&r)["metadata"]["phase_index"], 1);
        r.phase = Phase::Warmup;
        let md = line(&r)["metadata"].clone();
        assert_eq!(md["phase_index"], 0);
        assert_eq!(md["phase_kind"], "warmup");
        assert!(md.get("profiling_index").is_none());
    }

    #[test]
    fn failed_record_line_carries_error_and_error_isl() {
        let mut r = streamed_record(&[]);
        r.error = Some(ErrorDetails {
            code: Some(499),
            kind: "RequestCancellationError".into(),
            message: "Request was cancelled after 0.000 seconds".into(),
        });
        r.was_cancelled = true;
        r.cancellation_perf_ns = Some(5);
        let (v, _) = line_for(&r);
        assert_eq!(
            v["metrics"],
            json!({"error_isl": {"value": 550, "unit": "tokens"}})
        );
        assert_eq!(
            v["error"],
            json!({"code": 499, "type": "RequestCancellationError",
                   "message": "Request was cancelled after 0.000 seconds"})
        );
        assert_eq!(v["metadata"]["was_cancelled"], true);
        assert!(v["metadata"]["cancellation_time_ns"].is_u64());
    }
}
