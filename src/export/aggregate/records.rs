//! Per-request values of one metric from a run's `profile_export.jsonl`, for the
//! distribution convergence criterion (which compares the latest run's values with the
//! earlier runs').

use std::path::Path;

use crate::export::record_line::{self, MetricValue};

/// The values of metric `tag` over the run's successful profiling requests: lines of the
/// profiling phase without an `error`, their `metrics.<tag>.value` (each element when
/// the value is a list). Lines that are not JSON are skipped, as a run cut short may end
/// with a partial one.
pub fn read_record_values(jsonl: &Path, tag: &str) -> std::io::Result<Vec<f64>> {
    let mut values = Vec::new();
    record_line::for_each_line(jsonl, |_, text| {
        let Ok(line) = record_line::parse(text) else {
            return Ok::<_, std::io::Error>(());
        };
        let profiling = line.metadata.benchmark_phase.as_str() == Some("profiling");
        if !profiling || line.error.is_some() {
            return Ok(());
        }
        match line.metrics.0.iter().rev().find(|(t, _)| t == tag) {
            Some((_, MetricValue::Number(v))) => values.push(*v),
            Some((_, MetricValue::List(Some(items)))) => values.extend(items),
            _ => {}
        }
        Ok(())
    })?;
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
