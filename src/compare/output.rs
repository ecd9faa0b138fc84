//! The comparison on the console (a table like the run's own) and in compare.json,
//! compare.csv and compare.html.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::{Value, json};

use super::side::Side;
use super::{Row, Settings};
use crate::export::console::{CONSOLE_WIDTH, format_number};
use crate::export::table::{Justify, Table};
use crate::metrics::catalog::{MetricDef, MetricKind};

/// The rows as a table titled with the settings and `point` (a sweep point's " | name").
pub fn table(rows: &[Row], point: &str, s: &Settings) -> String {
    let title = format!(
        "NVIDIA AIPerf | Compare{point} ({}% confidence, ±{}% threshold)",
        s.confidence * 100.0,
        s.threshold
    );
    let mut t = Table::new(&title)
        .column("Metric", Justify::Left)
        .column("Stat", Justify::Left)
        .column("Base", Justify::Right)
        .column("New", Justify::Right)
        .column("Change", Justify::Right)
        .column("Interval", Justify::Right)
        .column("Verdict", Justify::Left);
    for r in rows {
        let interval = match r.ci {
            Some((lo, hi)) => format!("[{}, {}]", pct(lo), pct(hi)),
            None => "-".to_string(),
        };
        t.row(vec![
            format!("{} ({})", r.def.header, r.def.unit),
            r.stat.to_string(),
            format_number(r.base),
            format_number(r.new),
            pct(r.change_pct),
            interval,
            r.verdict.to_string(),
        ]);
    }
    t.render(CONSOLE_WIDTH)
}

/// The table for stdout: verdicts coloured on a terminal.
pub fn for_stdout(text: &str, rows: &[Row]) -> String {
    match std::io::stdout().is_terminal() {
        true => coloured(text, rows),
        false => text.to_string(),
    }
}

/// `+1.23%`.
fn pct(x: f64) -> String {
    format!("{x:+.2}%")
}

/// Verdicts in green (better) or red (worse). A row's verdict is on its first line, the
/// rows in order, and only the verdict column holds these words.
fn coloured(text: &str, rows: &[Row]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut from = 0;
    for r in rows
        .iter()
        .filter(|r| r.ci.is_some() && r.verdict != "no change")
    {
        let colour = if r.regression { "31" } else { "32" };
        let word = format!(" {} ", r.verdict);
        if let Some(i) = (from..lines.len()).find(|&i| lines[i].contains(&word)) {
            let painted = format!(" \x1b[{colour}m{}\x1b[0m ", r.verdict);
            lines[i] = lines[i].replacen(&word, &painted, 1);
            from = i + 1;
        }
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// compare.json, compare.csv and compare.html (the table and both runs' distributions) in
/// `dir` (created); `table` is the table as printed.
pub fn write_files(
    dir: &Path,
    rows: &[Row],
    base: &Side,
    new: &Side,
    table: &str,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: cannot write it: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(err)?;
    let doc = json!({
        "metrics": rows.iter().map(row_json).collect::<Vec<_>>(),
        "base": side_json(base),
        "new": side_json(new),
    });
    let text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    std::fs::write(dir.join("compare.json"), text + "\n").map_err(err)?;
    std::fs::write(dir.join("compare.csv"), csv(rows)).map_err(err)?;
    let facts = vec![
        ("Base".to_string(), base.dir.display().to_string()),
        ("New".to_string(), new.dir.display().to_string()),
    ];
    let title = format!(
        "aiperf compare: {} vs {}",
        base.dir.display(),
        new.dir.display()
    );
    let page = dir.join("compare.html");
    crate::report::write_comparison(&page, title, facts, table, charts(rows, base, new))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// One chart per per-request metric compared: both runs' distributions overlaid.
fn charts(rows: &[Row], base: &Side, new: &Side) -> Vec<crate::plot::Chart> {
    let mut tags: Vec<&MetricDef> = Vec::new();
    for r in rows.iter().filter(|r| r.def.kind == MetricKind::Record) {
        if !tags.iter().any(|d| d.tag == r.def.tag) {
            tags.push(r.def);
        }
    }
    tags.into_iter()
        .map(|def| {
            let (b, n) = (base.pooled(def.tag), new.pooled(def.tag));
            let sides = [("BASE", b.as_slice()), ("NEW", n.as_slice())];
            crate::plot::overlaid_cdfs(def.tag, def.header, def.unit, &sides)
        })
        .collect()
}

/// A number, or null when it is not finite (a change from 0).
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn row_json(r: &Row) -> Value {
    json!({
        "metric": r.def.tag,
        "stat": r.stat,
        "unit": r.def.unit,
        "base": number(r.base),
        "new": number(r.new),
        "change_pct": number(r.change_pct),
        "ci_low": r.ci.map_or(Value::Null, |c| number(c.0)),
        "ci_high": r.ci.map_or(Value::Null, |c| number(c.1)),
        "verdict": r.verdict,
        "method": r.method.name(),
    })
}

fn side_json(s: &Side) -> Value {
    let config = &s.summary()["input_config"];
    json!({
        "dir": s.dir.display().to_string(),
        "trials": s.trials.len(),
        "requests": s.requests(),
        "failed_requests": s.failed(),
        "was_cancelled": s.was_cancelled(),
        "endpoint_type": config["endpoint"]["type"],
        "urls": config["endpoint"]["urls"],
    })
}

fn csv(rows: &[Row]) -> String {
    let mut out =
        String::from("metric,stat,unit,base,new,change_pct,ci_low,ci_high,verdict,method\n");
    let cell = |x: Option<f64>| {
        x.filter(|x| x.is_finite())
            .map_or(String::new(), |x| x.to_string())
    };
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{}\n",
            r.def.tag,
            r.stat,
            r.def.unit,
            cell(Some(r.base)),
            cell(Some(r.new)),
            cell(Some(r.change_pct)),
            cell(r.ci.map(|c| c.0)),
            cell(r.ci.map(|c| c.1)),
            r.verdict,
            r.method.name()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Method;
    use crate::metrics::catalog::by_tag;

    fn row(tag: &str, verdict: &'static str, regression: bool) -> Row {
        Row {
            def: by_tag(tag).unwrap(),
            stat: "avg",
            base: 1.0,
            new: 1.1,
            change_pct: 10.0,
            ci: Some((5.0, 15.0)),
            verdict,
            regression,
            method: Method::Bootstrap,
        }
    }

    /// Two rows with one word: each gets its own colour (a throughput higher is better, an
    /// error rate higher worse).
    #[test]
    fn each_verdict_is_coloured_as_its_own_row() {
        let rows = [
            row("request_throughput", "higher", false),
            row("request_error_rate", "higher", true),
        ];
        let s = Settings {
            confidence: 0.95,
            threshold: 2.0,
            resamples: 100,
            seed: 0,
        };
        let text = table(&rows, "", &s);
        let painted = coloured(&text, &rows);
        let lines: Vec<&str> = painted.lines().filter(|l| l.contains("higher")).collect();
        assert_eq!(lines.len(), 2, "{painted}");
        assert!(lines[0].contains("\x1b[32mhigher\x1b[0m"), "{}", lines[0]);
        assert!(lines[1].contains("\x1b[31mhigher\x1b[0m"), "{}", lines[1]);
        assert_eq!(painted.lines().count(), text.lines().count());
    }
}
