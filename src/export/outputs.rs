//! `outputs.json` (`--export-outputs-json`): the text of every response with the ids that
//! tie it to `profile_export.jsonl` and `inputs.json`, and a few of its metrics.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::clock::Clock;
use crate::metrics::{MetricId, RecordMetrics, RecordSink};
use crate::record::{Phase, RequestRecord};

const OUTPUTS_FILE: &str = "outputs.json";
const SCHEMA_VERSION: &str = "1.1";

/// The metrics each entry carries (display units), as AIPerf picks them.
const METRICS: [MetricId; 6] = [
    MetricId::InputSequenceLength,
    MetricId::OutputTokenCount,
    MetricId::OutputSequenceLength,
    MetricId::RequestLatency,
    MetricId::TimeToFirstToken,
    MetricId::InterTokenLatency,
];

/// One entry, kept until the end: the file is sorted by session and turn.
struct Entry {
    phase: Phase,
    session_num: u64,
    turn_index: u32,
    value: Value,
}

/// Collects entries as records finish and writes `outputs.json` at the end.
pub struct OutputsWriter {
    path: std::path::PathBuf,
    clock: Clock,
    entries: Vec<Entry>,
}

impl OutputsWriter {
    pub fn new(dir: &Path, clock: Clock) -> OutputsWriter {
        OutputsWriter {
            path: dir.join(OUTPUTS_FILE),
            clock,
            entries: Vec::new(),
        }
    }
}

impl RecordSink for OutputsWriter {
    fn write(&mut self, record: &RequestRecord, metrics: &RecordMetrics) -> std::io::Result<()> {
        let mut shown = Map::new();
        for id in METRICS {
            if let Some(v) = metrics.get(id) {
                let def = id.def();
                shown.insert(def.tag.into(), json!(v / def.scale));
            }
        }
        let input = &record.input;
        let value = json!({
            "session_num": input.session_num,
            "conversation_id": input.conversation_id,
            "turn_index": input.turn_index,
            "x_request_id": record.x_request_id,
            "benchmark_phase": record.phase.as_str(),
            "request_start_ns": record.start_wall_ns,
            "request_end_ns": self.clock.wall_ns(record.end_perf_ns),
            "metrics": shown,
            "response_text": record.output_text,
        });
        self.entries.push(Entry {
            phase: record.phase,
            session_num: input.session_num,
            turn_index: input.turn_index,
            value,
        });
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.entries.sort_by_key(|e| (e.session_num, e.turn_index));
        let (warmup, data): (Vec<Entry>, Vec<Entry>) = self
            .entries
            .into_iter()
            .partition(|e| e.phase == Phase::Warmup);
        let values = |v: Vec<Entry>| v.into_iter().map(|e| e.value).collect::<Vec<_>>();
        let doc = json!({
            "schema_version": SCHEMA_VERSION,
            "data": values(data),
            "warmup": values(warmup),
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON into memory");
        super::write_atomically(&self.path, &text)
    }
}
