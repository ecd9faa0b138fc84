//! `profile_export_aiperf.json`: AIPerf's summary schema (version 1.5), keys in AIPerf's order.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use super::RunInfo;
use crate::clock::iso8601_utc;
use crate::metrics::{MetricResult, MetricValue, MetricsSummary};

pub const SCHEMA_VERSION: &str = "1.5";

/// Metric keys AIPerf declares on its export model, in declaration order; they come first.
/// Other metrics follow after the run metadata, as pydantic writes extra fields last.
const DECLARED_METRICS: [&str; 23] = [
    "request_throughput",
    "request_latency",
    "request_count",
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
    "goodput",
    "good_request_count",
    "output_token_count",
    "reasoning_token_count",
    "inter_chunk_latency",
    "total_output_tokens",
    "total_reasoning_tokens",
    "benchmark_duration",
    "total_isl",
    "total_osl",
    "error_request_count",
    "error_isl",
    "total_error_isl",
];

/// A JSON object that keeps its keys in insertion order.
pub(super) struct Object(Vec<(Cow<'static, str>, Node)>);

pub(super) enum Node {
    Value(Value),
    Object(Object),
    Telemetry(super::gpu_telemetry::TelemetryData),
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Value(v) => v.serialize(s),
            Node::Object(o) => o.serialize(s),
            Node::Telemetry(t) => t.serialize(s),
        }
    }
}

impl Object {
    pub(super) fn new() -> Object {
        Object(Vec::new())
    }

    pub(super) fn put_object(&mut self, key: &'static str, value: Object) {
        self.0.push((key.into(), Node::Object(value)));
    }

    pub(super) fn put(&mut self, key: &'static str, value: Value) {
        self.0.push((key.into(), Node::Value(value)));
    }
}

/// `{unit, avg, p1..p99, min, max, std, count, sum}` for record metrics, `{unit, avg}` for
/// the others, in display units.
pub(super) fn metric_object(result: &MetricResult) -> Object {
    let mut o = Object(Vec::new());
    o.put("unit", json!(result.def.unit));
    match result.display() {
        MetricValue::Distribution(s) => {
            o.put("avg", json!(s.avg));
            for (key, v) in ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"]
                .into_iter()
                .zip(s.percentiles)
            {
                o.put(key, json!(v));
            }
            o.put("min", json!(s.min));
            o.put("max", json!(s.max));
            o.put("std", json!(s.std));
            o.put("count", json!(s.count));
            o.put("sum", json!(s.sum));
        }
        MetricValue::Scalar(v) => o.put("avg", json!(v)),
        // Sweep-line metrics carry no count or sum, and only the upper percentiles.
        MetricValue::TimeWeighted(w) => {
            o.put("avg", json!(w.avg));
            for (key, v) in [
                ("p50", w.p50),
                ("p90", w.p90),
                ("p95", w.p95),
                ("p99", w.p99),
            ] {
                o.put(key, json!(v));
            }
            o.put("min", json!(w.min));
            o.put("max", json!(w.max));
            o.put("std", json!(w.std));
        }
    }
    o
}

fn run_info(info: &RunInfo) -> Value {
    json!({
        "benchmark_id": info.benchmark_id,
        "sweep_id": null,
        "random_seed": info.random_seed,
        "trial": 0,
        "variation_label": "base",
        "variation_index": 0,
        "variation_values": {},
        "cli_command": info.cli_command,
    })
}

/// The summary document, pretty-printed with two-space indentation.
pub fn render(summary: &MetricsSummary, info: &RunInfo) -> String {
    let mut doc = Object(Vec::new());
    doc.put("schema_version", json!(SCHEMA_VERSION));
    doc.put("aiperf_version", json!(env!("CARGO_PKG_VERSION")));
    doc.put("benchmark_id", json!(info.benchmark_id));
    for tag in DECLARED_METRICS {
        if let Some(r) = summary.get(tag) {
            doc.put_object(r.def.tag, metric_object(r));
        }
    }
    doc.put("input_config", info.input_config.clone());
    if let Some(t) = &info.gpu_telemetry {
        let data = super::gpu_telemetry::telemetry_data(t);
        doc.0.push(("telemetry_data".into(), Node::Telemetry(data)));
    }
    doc.put("was_cancelled", json!(info.was_cancelled));
    doc.put("is_complete", json!(info.is_complete));
    let errors: Vec<Value> = summary
        .error_summary
        .iter()
        .map(|e| {
            json!({
                "error_details": {
                    "code": e.details.code,
                    "type": e.details.kind,
                    "message": e.details.message,
                },
                "count": e.count,
            })
        })
        .collect();
    doc.put("error_summary", Value::Array(errors));
    doc.put("start_time", json!(iso8601_utc(info.start_wall_ns)));
    doc.put("end_time", json!(iso8601_utc(info.end_wall_ns)));
    doc.put("run_info", run_info(info));
    for r in summary
        .results
        .iter()
        .filter(|r| !DECLARED_METRICS.contains(&r.def.tag))
    {
        doc.put_object(r.def.tag, metric_object(r));
    }
    // Metrics outside the per-record catalogue (accuracy), as AIPerf appends them.
    for m in &info.extra_metrics {
        let value = json!({"unit": m.unit, "avg": m.value, "count": m.count, "sum": m.sum});
        doc.0.push((m.tag.clone().into(), Node::Value(value)));
    }
    // Not in AIPerf's schema: which tokenizer counted the tokens, how the chat template's
    // tokens were taken out of Image Token Count, and how well the requests kept their
    // schedule.
    doc.put("tokenizer", json!(info.tokenizer));
    if let Some(t) = &info.template_overhead {
        doc.put("chat_template_overhead", t.clone());
    }
    if let Some(p) = &info.load_pacing {
        doc.put("load_pacing", p.clone());
    }
    // Not in AIPerf's schema either: what the client itself cost, and whether to trust it.
    if let Some(overhead) = &info.client_overhead {
        doc.put("client_overhead", json!(overhead));
    }
    for (key, value) in &info.extra {
        doc.put(key, value.clone());
    }
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON into memory");
    text.push('\n');
    text
}
