//! Per-request values of one metric from a run's `profile_export.jsonl`, for the
//! distribution convergence criterion (which compares the latest run's values with the
//! earlier runs').

use std::io::BufRead;
use std::path::Path;

use serde_json::Value;

/// The values of metric `tag` over the run's successful profiling requests: lines of the
/// profiling phase without an `error`, their `metrics.<tag>.value` (each element when
/// the value is a list). Lines that are not JSON are skipped, as a run cut short may end
/// with a partial one.
pub fn read_record_values(jsonl: &Path, tag: &str) -> std::io::Result<Vec<f64>> {
    let file = std::fs::File::open(jsonl)?;
    let mut values = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let Ok(record) = serde_json::from_str::<Value>(&line?) else {
            continue;
        };
        let profiling = record["metadata"]["benchmark_phase"] == "profiling";
        let failed = !record.get("error").is_none_or(Value::is_null);
        if !profiling || failed {
            continue;
        }
        match &record["metrics"][tag]["value"] {
            Value::Number(n) => values.extend(n.as_f64()),
            Value::Array(items) => values.extend(items.iter().filter_map(Value::as_f64)),
            _ => {}
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiling_successes_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile_export.jsonl");
        let lines = [
            r#"{"metadata":{"benchmark_phase":"warmup"},"metrics":{"ttft":{"value":1.0}}}"#,
            r#"{"metadata":{"benchmark_phase":"profiling"},"metrics":{"ttft":{"value":2.0}}}"#,
            r#"{"metadata":{"benchmark_phase":"profiling"},"metrics":{"ttft":{"value":3.0}},"error":{"code":500}}"#,
            r#"{"metadata":{"benchmark_phase":"profiling"},"metrics":{"ttft":{"value":[4.0,5.0]}}}"#,
            r#"{"metadata":{"benchmark_phase":"profiling"},"metrics":{"other":{"value":6.0}}}"#,
            r#"{"metadata":{"benchmark_phase":"profiling"},"metrics":{"ttft":{"value":7.0}},"error":null}"#,
            r#"{"metadata":{"benchmark_phase":"profil"#,
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        assert_eq!(
            read_record_values(&path, "ttft").unwrap(),
            [2.0, 4.0, 5.0, 7.0]
        );
        assert!(read_record_values(&dir.path().join("none.jsonl"), "ttft").is_err());
    }
}
