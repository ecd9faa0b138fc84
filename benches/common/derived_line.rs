//! One `profile_export.jsonl` line from borrowed `#[derive(Serialize)]` structs: the same
//! bytes as `export::jsonl`'s hand-written formatter, through serde_json's generic
//! serializer. `jsonl_format` times it against the library's formatter; `collector_record`
//! times the collector's whole per-record work against it (a reference that no change to
//! the crate's own path moves).

use aiperf::api::{
    Clock, ErrorDetails, MetricId, RECORD_PROCESSOR_ID, RecordMetrics, RequestRecord, WORKER_ID,
};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// One line of `profile_export.jsonl`. This struct and the ones below borrow from the
/// record; their field order is the key order of the line, and a `None` is left out, as in
/// AIPerf 0.13's records.
#[derive(Serialize)]
struct Line<'a> {
    metadata: Metadata<'a>,
    metrics: Metrics<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorDetails>,
}

/// AIPerf's metadata order; fields without a value are left out.
#[derive(Serialize)]
struct Metadata<'a> {
    session_num: u64,
    x_request_id: &'a str,
    /// One id per session (a dataset conversation can be replayed by several sessions).
    x_correlation_id: &'a str,
    conversation_id: &'a str,
    turn_index: u32,
    credit_issued_ns: u64,
    request_start_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sent_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_ack_ns: Option<u64>,
    request_end_ns: u64,
    worker_id: &'static str,
    record_processor_id: &'static str,
    benchmark_phase: &'static str,
    phase_index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    profiling_index: Option<u32>,
    phase_name: &'static str,
    phase_kind: &'static str,
    was_cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancellation_time_ns: Option<u64>,
    agent_depth: u32,
    root_correlation_id: &'a str,
    // Not in AIPerf's schema: when the send was due, how late it went, and how long it
    // waited for a concurrency slot (0 in a closed loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduled_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    send_lag_ns: Option<i64>,
    slot_wait_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_output_tokens: Option<u64>,
}

/// The record's metrics keyed by tag: scalars in catalogue order, then the inter-chunk
/// latency list. Written by hand because the keys are the metrics present.
struct Metrics<'a>(&'a RecordMetrics);

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (id, value) in self.0.scalars() {
            let def = id.def();
            let value = MetricValue::new(value / def.scale, def.integer);
            map.serialize_entry(
                def.tag,
                &Metric {
                    value,
                    unit: def.unit,
                },
            )?;
        }
        if let Some(gaps) = &self.0.inter_chunk_latency {
            let def = MetricId::InterChunkLatency.def();
            let value = Gaps {
                gaps,
                scale: def.scale,
            };
            map.serialize_entry(
                def.tag,
                &Metric {
                    value,
                    unit: def.unit,
                },
            )?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Metric<V> {
    value: V,
    unit: &'static str,
}

/// A metric value in display units: whole-number metrics as integers, others as floats.
#[derive(Serialize)]
#[serde(untagged)]
enum MetricValue {
    Integer(i64),
    Float(f64),
}

impl MetricValue {
    fn new(value: f64, integer: bool) -> MetricValue {
        if integer && value.fract() == 0.0 && value.abs() < 9.0e15 {
            MetricValue::Integer(value as i64)
        } else {
            MetricValue::Float(value)
        }
    }
}

/// Inter-chunk gaps (base units) written in display units, as floats.
struct Gaps<'a> {
    gaps: &'a [f64],
    scale: f64,
}

impl Serialize for Gaps<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.gaps.iter().map(|gap| gap / self.scale))
    }
}

pub fn derived_line(
    record: &RequestRecord,
    metrics: &RecordMetrics,
    clock: &Clock,
    out: &mut Vec<u8>,
) {
    let input = &record.input;
    let wall = |perf_ns: Option<u64>| perf_ns.map(|t| clock.wall_ns(t));
    let line = Line {
        metadata: Metadata {
            session_num: input.session_num,
            x_request_id: &record.x_request_id,
            x_correlation_id: &input.correlation_id,
            conversation_id: &input.conversation_id,
            turn_index: input.turn_index,
            credit_issued_ns: match input.timing.scheduled_perf_ns {
                Some(at) => clock.wall_ns(at + input.timing.slot_wait_ns),
                None => record.start_wall_ns,
            },
            request_start_ns: record.start_wall_ns,
            request_sent_ns: wall(record.sent_perf_ns),
            request_ack_ns: wall(record.ack_perf_ns),
            request_end_ns: record.end_wall_ns,
            worker_id: WORKER_ID,
            record_processor_id: RECORD_PROCESSOR_ID,
            benchmark_phase: record.phase.as_str(),
            // No warmup in these records: profiling is the first phase.
            phase_index: 0,
            profiling_index: Some(0),
            phase_name: record.phase.as_str(),
            phase_kind: record.phase.as_str(),
            was_cancelled: record.was_cancelled,
            cancellation_time_ns: wall(record.cancellation_perf_ns),
            agent_depth: 0,
            root_correlation_id: &input.correlation_id,
            scheduled_ns: wall(input.timing.scheduled_perf_ns),
            send_lag_ns: record.send_lag_ns(),
            slot_wait_ns: input.timing.slot_wait_ns,
            requested_output_tokens: input.requested_output_tokens,
        },
        metrics: Metrics(metrics),
        error: record.error.as_ref(),
    };
    // Serializing into memory cannot fail: no I/O, and every map key is a string.
    serde_json::to_writer(&mut *out, &line).expect("JSON into memory");
    out.push(b'\n');
}
