//! Reading a run's artifacts back: the summary JSON and the per-record JSONL, as written by
//! `json` and `jsonl` (what `aiperf merge` works from).

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

use crate::record::ErrorDetails;

/// One line of `profile_export.jsonl`, as far as the statistics need it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRecord {
    pub warmup: bool,
    pub start_wall_ns: u64,
    pub end_wall_ns: u64,
    pub error: Option<ErrorDetails>,
    pub requested_output_tokens: Option<u64>,
    /// When the send was due (wall ns), for scheduled sends.
    pub scheduled_ns: Option<u64>,
    pub slot_wait_ns: u64,
    /// Metric tag and value in the file's (display) units; inter-chunk latency apart.
    pub metrics: Vec<(String, f64)>,
    pub inter_chunk_latency: Option<Vec<f64>>,
}

/// The summary JSON (`profile_export_aiperf.json`) as a JSON value.
pub fn read_summary(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// Every line of a per-record file; a bad line is an error naming `file:line`.
pub fn read_records(path: &Path) -> Result<Vec<ReadRecord>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let at = || format!("{}:{}", path.display(), i + 1);
        let line = line.map_err(|e| format!("{}: {e}", at()))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(&line).map_err(|e| format!("{}: not JSON: {e}", at()))?;
        out.push(parse_record(&v).map_err(|e| format!("{}: {e}", at()))?);
    }
    Ok(out)
}

fn parse_record(v: &Value) -> Result<ReadRecord, String> {
    let md = v.get("metadata").ok_or("no metadata")?;
    let u64_of = |key: &str| md.get(key).and_then(Value::as_u64);
    let need = |key: &str| u64_of(key).ok_or(format!("metadata.{key} is missing"));
    let mut metrics = Vec::new();
    let mut inter_chunk_latency = None;
    if let Some(m) = v.get("metrics").and_then(Value::as_object) {
        for (tag, entry) in m {
            match entry.get("value") {
                Some(Value::Array(gaps)) => {
                    let gaps: Option<Vec<f64>> = gaps.iter().map(Value::as_f64).collect();
                    inter_chunk_latency = Some(gaps.ok_or(format!("metrics.{tag}: not numbers"))?);
                }
                Some(x) => {
                    let x = x
                        .as_f64()
                        .ok_or(format!("metrics.{tag}.value is not a number"))?;
                    metrics.push((tag.clone(), x));
                }
                None => return Err(format!("metrics.{tag} has no value")),
            }
        }
    }
    let error = v.get("error").map(|e| ErrorDetails {
        code: e
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok()),
        kind: e
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    });
    Ok(ReadRecord {
        warmup: md.get("benchmark_phase").and_then(Value::as_str) == Some("warmup"),
        start_wall_ns: need("request_start_ns")?,
        end_wall_ns: need("request_end_ns")?,
        error,
        requested_output_tokens: u64_of("requested_output_tokens"),
        scheduled_ns: u64_of("scheduled_ns"),
        slot_wait_ns: u64_of("slot_wait_ns").unwrap_or(0),
        metrics,
        inter_chunk_latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::metrics::{RecordMetrics, RecordOptions};
    use crate::tokenizer::Tokenizer;

    #[test]
    fn a_written_line_reads_back() {
        let mut record = crate::metrics::record_metrics::tests::streamed_record(&[21, 26, 31]);
        record.input.requested_output_tokens = Some(3);
        let opts = RecordOptions {
            streaming: true,
            ..RecordOptions::default()
        };
        let m = RecordMetrics::compute(&record, &Tokenizer::builtin().unwrap(), opts);
        let mut line = Vec::new();
        super::super::jsonl::format_record_line(&record, &m, &Clock::new(), &mut line);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, [line.clone(), line].concat()).unwrap();
        let read = read_records(&path).unwrap();
        assert_eq!(read.len(), 2);
        let r = &read[0];
        assert_eq!(r.start_wall_ns, record.start_wall_ns);
        assert_eq!(r.requested_output_tokens, Some(3));
        assert!(!r.warmup && r.error.is_none());
        assert_eq!(r.inter_chunk_latency, Some(vec![5.0, 5.0]));
        let ttft = r.metrics.iter().find(|(t, _)| t == "time_to_first_token");
        assert_eq!(ttft.map(|(_, v)| *v), Some(20.0));
        std::fs::write(&path, "{\"metadata\":{}}\n").unwrap();
        let e = read_records(&path).unwrap_err();
        assert!(
            e.ends_with("r.jsonl:1: metadata.request_start_ns is missing"),
            "{e}"
        );
    }
}
