//! Reading a run's artifacts back: the summary JSON and the per-record JSONL, as written by
//! `json` and `jsonl` (what `aiperf merge` works from).

use std::path::Path;

use serde_json::Value;

use super::record_line::{self, Field, MetricValue, RecordLine};
use crate::record::ErrorDetails;

/// One line of `profile_export.jsonl`, as far as the statistics need it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRecord {
    /// Line number in its file (1-based), for messages.
    pub line: usize,
    /// `metadata.x_request_id`, when the line has one.
    pub request_id: Option<String>,
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
    let mut out = Vec::new();
    let read = record_line::for_each_line(path, |number, text| {
        let at = || format!("{}:{number}", path.display());
        let line = record_line::parse(text).map_err(|e| format!("{}: not JSON: {e}", at()))?;
        let mut record = parse_record(&line).map_err(|e| format!("{}: {e}", at()))?;
        record.line = number;
        out.push(record);
        Ok::<_, ReadError>(())
    });
    read.map_err(|e| match e {
        ReadError::Io(e) => format!("{}: cannot read it: {e}", path.display()),
        ReadError::Line(e) => e,
    })?;
    Ok(out)
}

/// Why `read_records` stopped.
enum ReadError {
    Io(std::io::Error),
    Line(String),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl From<String> for ReadError {
    fn from(e: String) -> Self {
        ReadError::Line(e)
    }
}

/// Wall-clock times a record may carry: 2000-01-01 to 2100-01-01, in ns since the epoch.
/// Anything else (u64::MAX, 1e308) is a damaged or foreign file, not a time.
const WALL_NS: std::ops::RangeInclusive<u64> = 946_684_800_000_000_000..=4_102_444_800_000_000_000;

const YEAR_NS: u64 = 365 * 86_400 * 1_000_000_000;

/// Largest magnitude a metric value may have in its display unit (ms, tokens, tokens/s):
/// 1e15 ms is 30,000 years. Beyond it a value is not a measurement and would distort every
/// statistic of the merge.
const MAX_METRIC: f64 = 1e15;

fn parse_record(line: &RecordLine) -> Result<ReadRecord, String> {
    let md = &line.metadata;
    let time = |key: &str, x: Field| -> Result<Option<u64>, String> {
        match x {
            Field::Missing => Ok(None),
            Field::U64(ns) if WALL_NS.contains(&ns) => Ok(Some(ns)),
            _ => Err(format!(
                "metadata.{key} {x} is not a time between 2000 and 2100 in ns since the epoch; the file is damaged or not aiperf's"
            )),
        }
    };
    let need = |key: &str, x: Field| time(key, x)?.ok_or(format!("metadata.{key} is missing"));
    let check = |tag: &str, x: f64| {
        if x.abs() <= MAX_METRIC {
            Ok(x)
        } else {
            Err(format!(
                "metrics.{tag}: {x:e} is not a plausible value (more than {MAX_METRIC:e}); the file is damaged or not aiperf's"
            ))
        }
    };
    // By tag, a repeated one keeping its last value, as a JSON object reads.
    let mut metrics = std::collections::BTreeMap::new();
    let mut inter_chunk_latency = None;
    for (tag, value) in &line.metrics.0 {
        match value {
            MetricValue::List(gaps) => {
                let gaps = gaps.clone().ok_or(format!("metrics.{tag}: not numbers"))?;
                for &g in &gaps {
                    check(tag, g)?;
                }
                inter_chunk_latency = Some(gaps);
            }
            MetricValue::Number(x) => {
                metrics.insert(tag.to_string(), check(tag, *x)?);
            }
            MetricValue::Other => return Err(format!("metrics.{tag}.value is not a number")),
            MetricValue::Missing => return Err(format!("metrics.{tag} has no value")),
        }
    }
    let error = line.error.as_ref().map(|e| ErrorDetails {
        code: e.code.as_u64().and_then(|c| u16::try_from(c).ok()),
        kind: e.kind.as_str().unwrap_or_default().to_string(),
        message: e.message.as_str().unwrap_or_default().to_string(),
    });
    let start_wall_ns = need("request_start_ns", md.request_start_ns)?;
    let end_wall_ns = need("request_end_ns", md.request_end_ns)?;
    if !(start_wall_ns..=start_wall_ns + YEAR_NS).contains(&end_wall_ns) {
        return Err(format!(
            "metadata.request_end_ns {end_wall_ns} is not within a year after request_start_ns {start_wall_ns}"
        ));
    }
    let slot_wait_ns = md.slot_wait_ns.as_u64().unwrap_or(0);
    if slot_wait_ns > YEAR_NS {
        return Err(format!(
            "metadata.slot_wait_ns {slot_wait_ns} is more than a year; the file is damaged or not aiperf's"
        ));
    }
    Ok(ReadRecord {
        line: 0,
        request_id: md.x_request_id.as_str().map(str::to_string),
        warmup: line.is_warmup(),
        start_wall_ns,
        end_wall_ns,
        error,
        requested_output_tokens: md.requested_output_tokens.as_u64(),
        scheduled_ns: time("scheduled_ns", md.scheduled_ns)?,
        slot_wait_ns,
        metrics: metrics.into_iter().collect(),
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
