//! The aggregate files of repeated runs and sweeps, built from real run summaries.
//!
//! `tests/fixtures/aggregate/profile_export_aiperf.json` was written by this binary (a
//! streaming vision run against the mock server); the runs here are copies of it with known
//! values. The files' key structure and CSV sections are compared with fixtures written
//! by hand from the reference (`*.keys`, `*.skeleton`); the values are checked against
//! statistics computed here. One test aggregates two live runs of the binary.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aiperf::api::{
    ConfidenceAggregate, NO_METRICS, RunOutcome, STAT_KEYS, SweepAggregate, SweepCell,
    VariationMeta, best_configurations_console, confidence_console, distributions_match,
    read_record_values, read_run_metrics, sweep_table, write_confidence_aggregate,
    write_sweep_aggregate,
};
use serde::Deserialize;
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aggregate")
        .join(name)
}

/// A fixture's lines without its `# ` comment header.
fn fixture_lines(name: &str) -> Vec<String> {
    let path = fixture_path(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with("# "))
        .map(str::to_string)
        .collect()
}

/// The summary a real run wrote.
fn base_summary() -> Value {
    let text = std::fs::read_to_string(fixture_path("profile_export_aiperf.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The real summary with every metric statistic but `count` multiplied by `factor`.
fn scaled(factor: f64) -> Value {
    let mut doc = base_summary();
    for (_, metric) in doc.as_object_mut().unwrap() {
        let Some(obj) = metric.as_object_mut().filter(|o| o.contains_key("unit")) else {
            continue;
        };
        for (stat, v) in obj.iter_mut() {
            if let (Some(x), false) = (v.as_f64(), stat == "count") {
                *v = json!(x * factor);
            }
        }
    }
    doc
}

/// A base-summary figure, e.g. `figure("time_to_first_token", "p99")`.
fn figure(tag: &str, stat: &str) -> f64 {
    base_summary()[tag][stat].as_f64().unwrap()
}

/// Writes `summary` as run `label`'s `profile_export_aiperf.json` and reads it back the way
/// the run driver does.
fn outcome(dir: &Path, label: &str, summary: Option<&Value>) -> RunOutcome {
    let run_dir = dir.join(label);
    std::fs::create_dir_all(&run_dir).unwrap();
    let path = run_dir.join("profile_export_aiperf.json");
    if let Some(summary) = summary {
        std::fs::write(&path, serde_json::to_string_pretty(summary).unwrap()).unwrap();
    }
    RunOutcome {
        label: label.into(),
        result: read_run_metrics(&path),
    }
}

/// A summary in which every request failed.
fn all_failed(errors: u64) -> Value {
    let mut doc = base_summary();
    doc["request_count"] = json!({"unit": "requests", "avg": 0.0});
    doc["error_request_count"] = json!({"unit": "requests", "avg": errors as f64});
    doc
}

/// A JSON document with its objects' keys in file order.
enum Node {
    Leaf,
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_str<E>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Leaf)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Node>()? {
                    pairs.push((k, v));
                }
                Ok(Node::Object(pairs))
            }
        }
        d.deserialize_any(NodeVisitor)
    }
}

/// Every object's key paths in file order (`*` for the keys of a `metrics` object, `[]`
/// for list elements).
fn objects(node: &Node, path: &str, out: &mut Vec<Vec<String>>) {
    match node {
        Node::Leaf => {}
        Node::Array(items) => {
            for item in items {
                objects(item, &format!("{path}[]"), out);
            }
        }
        Node::Object(pairs) => {
            let wildcard = path == "metrics" || path.ends_with(".metrics");
            let mut keys = Vec::new();
            for (k, v) in pairs {
                let name = if wildcard { "*" } else { k.as_str() };
                let child = if path.is_empty() {
                    name.to_string()
                } else {
                    format!("{path}.{name}")
                };
                objects(v, &child, out);
                keys.push(child);
            }
            out.push(keys);
        }
    }
}

/// The file has exactly the fixture's key paths, and every object lists its keys in the
/// fixture's order.
fn assert_key_structure(json_text: &str, fixture: &str) {
    let want = fixture_lines(fixture);
    let doc: Node = serde_json::from_str(json_text).unwrap();
    let mut objs = Vec::new();
    objects(&doc, "", &mut objs);
    let got: BTreeSet<&String> = objs.iter().flatten().collect();
    let expected: BTreeSet<&String> = want.iter().collect();
    assert_eq!(got, expected, "{fixture}: key paths differ\n{json_text}");
    for keys in &objs {
        let at: Vec<usize> = keys
            .iter()
            .map(|k| want.iter().position(|w| w == k).unwrap())
            .collect();
        let mut dedup = at.clone();
        dedup.dedup();
        assert!(
            dedup.windows(2).all(|w| w[0] < w[1]),
            "{fixture}: keys out of order: {keys:?}"
        );
    }
}

/// A CSV's skeleton: the first line, or `<header>` when it has digits; the rows up to the
/// first blank line as `rows`; then each line as it is without digits, else its first field
/// and `,...`.
fn csv_skeleton(text: &str, rows: &str) -> Vec<String> {
    assert!(text.ends_with("\r\n") && !text.contains("\n\n"));
    let lines: Vec<&str> = text.trim_end_matches("\r\n").split("\r\n").collect();
    let has_digit = |l: &str| l.chars().any(|c| c.is_ascii_digit());
    let mut out = vec![if has_digit(lines[0]) {
        "<header>".to_string()
    } else {
        lines[0].to_string()
    }];
    let blank = lines.iter().position(|l| l.is_empty()).unwrap();
    assert!(blank > 1, "no rows under the header");
    out.push(rows.to_string());
    for l in &lines[blank..] {
        out.push(if has_digit(l) {
            format!("{},...", l.split(',').next().unwrap())
        } else {
            l.to_string()
        });
    }
    out
}

fn read(path: &Path) -> (String, Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let v = serde_json::from_str(&text).unwrap();
    (text, v)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn confidence_aggregate_of_three_runs_leaves_failures_out() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = vec![
        outcome(tmp.path(), "run_0001", Some(&scaled(1.0))),
        outcome(tmp.path(), "run_0002", None),
        outcome(tmp.path(), "run_0003", Some(&scaled(1.2))),
        outcome(tmp.path(), "run_0004", Some(&scaled(1.1))),
        outcome(tmp.path(), "run_0005", Some(&all_failed(5))),
    ];
    let agg = ConfidenceAggregate {
        runs: &runs,
        confidence_level: 0.95,
        cooldown_seconds: 2.5,
        variation: None,
    };
    let dir = tmp.path().join("aggregate");
    write_confidence_aggregate(&dir, &agg).unwrap();

    let (text, v) = read(&dir.join("profile_export_aiperf_aggregate.json"));
    assert_key_structure(&text, "confidence.json.keys");
    let meta = &v["metadata"];
    assert_eq!(meta["aggregation_type"], "confidence");
    assert_eq!(meta["num_profile_runs"], 5);
    assert_eq!(meta["num_successful_runs"], 3);
    assert_eq!(
        meta["failed_runs"],
        json!([{"label": "run_0002", "error": NO_METRICS},
               {"label": "run_0005", "error": "All 5 requests failed"}])
    );
    assert_eq!(
        meta["run_labels"],
        json!(["run_0001", "run_0003", "run_0004"])
    );
    assert_eq!(meta["confidence_level"], 0.95);
    assert_eq!(meta["cooldown_seconds"], 2.5);

    // Every <metric>_<stat> of the runs, and nothing else (count is not a STAT_KEY).
    let base = base_summary();
    let mut want = BTreeSet::new();
    for (tag, m) in base.as_object().unwrap() {
        for stat in STAT_KEYS {
            if m.get("unit").is_some() && m.get(stat).is_some() {
                want.insert(format!("{tag}_{stat}"));
            }
        }
    }
    let metrics = v["metrics"].as_object().unwrap();
    let got: BTreeSet<String> = metrics.keys().cloned().collect();
    assert_eq!(got, want);
    assert!(metrics.contains_key("time_to_first_token_p99"));
    assert!(!metrics.contains_key("time_to_first_token_count"));

    // Runs at 1.0, 1.2 and 1.1 times the base: mean 1.1x, sample std 0.1x.
    for (tag, stat) in [
        ("request_throughput", "avg"),
        ("time_to_first_token", "p99"),
        ("request_latency", "avg"),
        ("inter_token_latency", "p50"),
    ] {
        let x = figure(tag, stat);
        let m = &metrics[&format!("{tag}_{stat}")];
        let f = |k: &str| m[k].as_f64().unwrap();
        assert!(close(f("mean"), 1.1 * x), "{tag}_{stat}: {m}");
        assert!(close(f("std"), 0.1 * x), "{tag}_{stat}: {m}");
        assert!(close(f("min"), x) && close(f("max"), 1.2 * x), "{m}");
        assert!(close(f("se"), 0.1 * x / 3f64.sqrt()));
        assert!(close(f("cv"), 0.1 / 1.1));
        assert!(close(f("t_critical"), 4.302652729911275));
        for run_value in [x, 1.2 * x, 1.1 * x] {
            assert!(f("ci_low") <= run_value && run_value <= f("ci_high"), "{m}");
        }
        assert_eq!(m["unit"], base[tag]["unit"]);
    }

    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf_aggregate.csv")).unwrap();
    assert_eq!(
        csv_skeleton(&csv, "<metric rows>"),
        fixture_lines("confidence.csv.skeleton")
    );
    let tp = metrics["request_throughput_avg"].clone();
    let row = csv
        .lines()
        .find(|l| l.starts_with("request_throughput_avg,"))
        .unwrap();
    let cells: Vec<&str> = row.split(',').collect();
    assert_eq!(cells[1], format!("{:.2}", tp["mean"].as_f64().unwrap()));
    assert_eq!(cells[5], format!("{:.4}", tp["cv"].as_f64().unwrap()));
    assert_eq!(cells[9], "4.3027");
    assert_eq!(cells[10], "requests/sec");
    assert!(csv.contains("\r\nRun Labels,\"['run_0001', 'run_0003', 'run_0004']\"\r\n"));
    assert!(csv.contains("\r\nCooldown Seconds,2.5\r\n"));
    assert_eq!(
        csv.lines().filter(|l| l.contains(',')).count(),
        metrics.len() + 7
    );

    let console = confidence_console(&agg);
    assert!(console.starts_with("All runs complete: 3/5 successful\n"));
    assert!(console.contains("  - run_0005: All 5 requests failed\n"));
    for block in [
        "Request Throughput (Avg):",
        "Time To First Token (Avg):",
        "Inter Token Latency (Avg):",
        "Request Latency (Avg):",
    ] {
        assert!(console.contains(block), "{block}\n{console}");
    }
    let ci = format!(
        "  95% CI: [{:.4}, {:.4}] requests/sec\n",
        tp["ci_low"].as_f64().unwrap(),
        tp["ci_high"].as_f64().unwrap()
    );
    assert!(console.contains(&ci), "{console}");
}

#[test]
fn one_successful_run_gives_the_point_form() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = vec![
        outcome(tmp.path(), "trial_0001", Some(&all_failed(8))),
        outcome(tmp.path(), "trial_0002", Some(&scaled(1.0))),
    ];
    let agg = ConfidenceAggregate {
        runs: &runs,
        confidence_level: 0.9,
        cooldown_seconds: 0.0,
        variation: Some(VariationMeta {
            label: "phases.profiling.concurrency=4".into(),
            values: vec![("phases.profiling.concurrency".into(), json!(4))],
            sweep_mode: "repeated".into(),
            model: Some("Qwen/Qwen2-VL-2B-Instruct".into()),
        }),
    };
    let dir = tmp.path().join("aggregate/concurrency_4");
    write_confidence_aggregate(&dir, &agg).unwrap();
    let (text, v) = read(&dir.join("profile_export_aiperf_aggregate.json"));
    assert_key_structure(&text, "confidence_single_variation.json.keys");
    assert_eq!(v["metadata"]["single_run"], true);
    assert_eq!(
        v["metadata"]["variation_values"],
        json!({"phases.profiling.concurrency": 4})
    );
    assert_eq!(v["metadata"]["run_labels"], json!(["trial_0002"]));
    let x = figure("time_to_first_token", "p99");
    assert_eq!(
        v["metrics"]["time_to_first_token_p99"],
        json!({"mean": x, "std": 0.0, "min": x, "max": x, "cv": 0.0, "se": 0.0,
               "ci_low": x, "ci_high": x, "t_critical": null, "unit": "ms"})
    );
    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf_aggregate.csv")).unwrap();
    assert_eq!(
        csv_skeleton(&csv, "<metric rows>"),
        fixture_lines("confidence_single_variation.csv.skeleton")
    );
    assert!(csv.ends_with(
        "\r\nVariation Label,phases.profiling.concurrency=4\r\n\
         Variation Values,{'phases.profiling.concurrency': 4}\r\n\
         Sweep Mode,repeated\r\nModel,Qwen/Qwen2-VL-2B-Instruct\r\n"
    ));
    let row = csv
        .lines()
        .find(|l| l.starts_with("time_to_first_token_p99,"))
        .unwrap();
    assert_eq!(
        row,
        format!(
            "time_to_first_token_p99,{x:.2},0.00,{x:.2},{x:.2},0.0000,0.0000,{x:.2},{x:.2},,ms"
        )
    );

    // Nothing to aggregate without a successful run.
    let failed = [runs[0].clone()];
    let none = ConfidenceAggregate {
        runs: &failed,
        ..agg
    };
    let empty = tmp.path().join("none");
    assert!(write_confidence_aggregate(&empty, &none).is_err());
    assert!(!empty.exists());
}

/// The base summary with a given request throughput and TTFT p99.
fn cell_run(dir: &Path, label: &str, throughput: f64, ttft_p99: f64) -> RunOutcome {
    let mut doc = base_summary();
    doc["request_throughput"]["avg"] = json!(throughput);
    doc["time_to_first_token"]["p99"] = json!(ttft_p99);
    outcome(dir, label, Some(&doc))
}

fn concurrency(c: i64) -> Vec<(String, Value)> {
    vec![("phases.profiling.concurrency".into(), json!(c))]
}

/// Checks the header of the sweep CSV: the parameter, then mean/std/min/max/cv of each
/// metric key in sorted order.
fn assert_sweep_header(csv: &str, keys: &BTreeSet<String>) {
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(header[0], "concurrency");
    let mut want = vec!["concurrency".to_string()];
    for key in keys {
        for stat in ["mean", "std", "min", "max", "cv"] {
            want.push(format!("{key}_{stat}"));
        }
    }
    assert_eq!(header, want);
}

#[test]
fn single_trial_sweep_ranks_its_variations() {
    let tmp = tempfile::tempdir().unwrap();
    let cells = vec![
        SweepCell {
            values: concurrency(1),
            runs: vec![cell_run(tmp.path(), "concurrency_1", 10.0, 20.0)],
        },
        SweepCell {
            values: concurrency(2),
            runs: vec![cell_run(tmp.path(), "concurrency_2", 18.0, 30.0)],
        },
        SweepCell {
            values: concurrency(4),
            runs: vec![cell_run(tmp.path(), "concurrency_4", 17.0, 45.0)],
        },
        SweepCell {
            values: concurrency(8),
            runs: vec![outcome(tmp.path(), "concurrency_8", None)],
        },
    ];
    let agg = SweepAggregate {
        cells: &cells,
        sweep_mode: "repeated".into(),
        confidence_level: 0.95,
        failed_runs: vec![("concurrency_8".into(), NO_METRICS.into())],
    };
    let dir = tmp.path().join("sweep_aggregate");
    write_sweep_aggregate(&dir, &agg).unwrap();
    let (text, v) = read(&dir.join("profile_export_aiperf_sweep.json"));
    assert_key_structure(&text, "sweep_single_trial.json.keys");
    assert_eq!(v["aggregation_type"], "sweep");
    assert_eq!(v["num_profile_runs"], 4);
    assert_eq!(v["num_successful_runs"], 3);
    assert_eq!(
        v["failed_runs"],
        json!([{"label": "concurrency_8", "error": NO_METRICS}])
    );
    assert_eq!(
        v["metadata"],
        json!({"sweep_parameters": [{"name": "concurrency", "values": [1, 2, 4, 8]}],
               "num_combinations": 4, "sweep_mode": "repeated", "confidence_level": 0.95,
               "num_trials_per_value": 1, "aggregation_type": "sweep"})
    );
    let cells_json = v["per_combination_metrics"].as_array().unwrap();
    assert_eq!(cells_json.len(), 3);
    let first = &cells_json[0]["metrics"];
    assert_eq!(cells_json[0]["parameters"], json!({"concurrency": 1}));
    // Keyed by metric tag: every metric of the run, its avg as mean, no spread.
    let base = base_summary();
    let tags: BTreeSet<String> = base
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, m)| m.get("unit").is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let got: BTreeSet<String> = first.as_object().unwrap().keys().cloned().collect();
    assert_eq!(got, tags);
    let ttft = &first["time_to_first_token"];
    assert_eq!(ttft["mean"], base["time_to_first_token"]["avg"]);
    assert_eq!(ttft["p99"], 20.0);
    assert_eq!(ttft["count"], base["time_to_first_token"]["count"]);
    assert_eq!(
        (ttft["std"].as_f64(), ttft["cv"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    assert_eq!(first["request_throughput"]["mean"], 10.0);
    // Ranked from the tag-keyed figures (AIPerf 0.13 would leave both empty).
    assert_eq!(
        v["best_configurations"],
        json!({
            "best_throughput": {"parameters": {"concurrency": 2}, "metric": 18.0,
                                "unit": "requests/sec"},
            "best_latency_p99": {"parameters": {"concurrency": 1}, "metric": 20.0, "unit": "ms"}
        })
    );
    assert_eq!(
        v["pareto_optimal"],
        json!([{"concurrency": 1}, {"concurrency": 2}])
    );

    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf_sweep.csv")).unwrap();
    assert_eq!(
        csv_skeleton(&csv, "<cell rows>"),
        fixture_lines("sweep.csv.skeleton")
    );
    assert_sweep_header(&csv, &tags);
    assert!(csv.contains("\r\nBest Throughput,2,18.00,requests/sec\r\n"));
    assert!(csv.contains("\r\nBest Latency P99,1,20.00,ms\r\n"));
    assert!(csv.contains("\r\nNumber of Combinations,4\r\n"));
    assert!(csv.contains("\r\nNumber of Profile Runs,4\r\nNumber of Successful Runs,3\r\n"));

    assert_eq!(
        best_configurations_console(&agg),
        "\nBest Configurations:\n  Best throughput: concurrency=2 (18.00 requests/sec)\n  \
         Best latency (p99): concurrency=1 (20.00 ms, time_to_first_token p99)\n  \
         Pareto optimal points: [{'concurrency': 1}, {'concurrency': 2}]\n"
    );
    let table = sweep_table(&agg);
    // One row per variation (a long failure text wraps onto a second line).
    let rows: Vec<Vec<String>> = table
        .lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| {
            l.split('│')
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|cells| !cells[1].is_empty())
        .collect();
    assert_eq!(rows.len(), 4, "{table}");
    let pareto: Vec<&str> = rows.iter().map(|r| r[r.len() - 3].as_str()).collect();
    assert_eq!(pareto, ["*", "*", "", ""], "{table}");
    assert_eq!(rows[1][2], "18.00");
    assert_eq!(rows[1][5], "30.00");
    assert_eq!(rows[3][2], "failed");
    assert!(
        NO_METRICS.starts_with(&rows[3][rows[3].len() - 2]),
        "{table}"
    );
}

#[test]
fn multi_trial_sweep_keys_cells_by_metric_and_stat() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cells = vec![
        SweepCell {
            values: concurrency(1),
            runs: vec![
                cell_run(d, "t1_c1", 10.0, 20.0),
                cell_run(d, "t2_c1", 11.0, 22.0),
                cell_run(d, "t3_c1", 12.0, 24.0),
            ],
        },
        SweepCell {
            values: concurrency(2),
            runs: vec![
                cell_run(d, "t1_c2", 19.0, 40.0),
                outcome(d, "t2_c2", Some(&all_failed(3))),
                cell_run(d, "t3_c2", 21.0, 44.0),
            ],
        },
    ];
    let agg = SweepAggregate {
        cells: &cells,
        sweep_mode: "independent".into(),
        confidence_level: 0.95,
        failed_runs: vec![("t2_c2".into(), "All 3 requests failed".into())],
    };
    let dir = tmp.path().join("sweep_aggregate");
    write_sweep_aggregate(&dir, &agg).unwrap();
    let (text, v) = read(&dir.join("profile_export_aiperf_sweep.json"));
    assert_key_structure(&text, "sweep_multi_trial.json.keys");
    assert_eq!(v["num_profile_runs"], 6);
    assert_eq!(v["num_successful_runs"], 5);
    assert_eq!(v["metadata"]["num_trials_per_value"], 3);
    assert_eq!(v["metadata"]["sweep_mode"], "independent");
    let c1 = &v["per_combination_metrics"][0]["metrics"];
    assert!(c1.get("request_throughput").is_none());
    let tp = &c1["request_throughput_avg"];
    assert_eq!(tp["mean"], 11.0);
    assert_eq!(tp["std"], 1.0);
    assert!(tp["ci_low"].as_f64().unwrap() < 10.0 && tp["ci_high"].as_f64().unwrap() > 12.0);
    let c2 = &v["per_combination_metrics"][1]["metrics"];
    assert_eq!(c2["time_to_first_token_p99"]["mean"], 42.0);
    assert_eq!(c2["time_to_first_token_p99"]["min"], 40.0);
    assert_eq!(
        v["best_configurations"]["best_throughput"],
        json!({"parameters": {"concurrency": 2}, "metric": 20.0, "unit": "requests/sec"})
    );
    assert_eq!(
        v["best_configurations"]["best_latency_p99"]["metric"],
        json!(22.0)
    );
    assert_eq!(
        v["pareto_optimal"],
        json!([{"concurrency": 1}, {"concurrency": 2}])
    );

    let csv = std::fs::read_to_string(dir.join("profile_export_aiperf_sweep.csv")).unwrap();
    assert_eq!(
        csv_skeleton(&csv, "<cell rows>"),
        fixture_lines("sweep.csv.skeleton")
    );
    let keys: BTreeSet<String> = c1.as_object().unwrap().keys().cloned().collect();
    assert!(keys.contains("time_to_first_token_p99"));
    assert_sweep_header(&csv, &keys);

    // The table shows means across the successful trials and their count.
    let table = sweep_table(&agg);
    let cells: Vec<&str> = table
        .lines()
        .map(|l| l.split('│').map(str::trim).collect::<Vec<_>>())
        .find(|c| c.get(1) == Some(&"2"))
        .unwrap();
    assert_eq!((cells[2], cells[5]), ("20.00", "42.00"), "{table}");
    assert_eq!(cells[cells.len() - 3], "2/3");
}

#[test]
fn aggregates_two_live_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = common::MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let mut runs = Vec::new();
    for (i, count) in [(1, "6"), (2, "10")] {
        let dir = tmp.path().join(format!("profile_runs/run_000{i}"));
        let out = common::run_profile(&[
            "--model",
            "m",
            "--url",
            &mock.url,
            "--streaming",
            "--synthetic-input-tokens-mean",
            "20",
            "--output-tokens-mean",
            "8",
            "--request-count",
            count,
            "--concurrency",
            "2",
            "--tokenizer",
            "builtin",
            "--artifact-dir",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", common::stderr_text(&out));
        runs.push(RunOutcome {
            label: format!("run_000{i}"),
            result: read_run_metrics(&dir.join("profile_export_aiperf.json")),
        });
    }
    let counts: Vec<f64> = runs
        .iter()
        .map(|r| r.result.as_ref().unwrap()["request_count"].stats["avg"])
        .collect();
    assert_eq!(counts, [6.0, 10.0]);
    // A third run that left no summary.
    runs.push(outcome(tmp.path(), "run_0003", None));
    let agg = ConfidenceAggregate {
        runs: &runs,
        confidence_level: 0.95,
        cooldown_seconds: 0.0,
        variation: None,
    };
    let dir = tmp.path().join("aggregate");
    write_confidence_aggregate(&dir, &agg).unwrap();
    let (text, v) = read(&dir.join("profile_export_aiperf_aggregate.json"));
    assert_key_structure(&text, "confidence.json.keys");
    let rc = &v["metrics"]["request_count_avg"];
    assert_eq!(
        (rc["mean"].as_f64(), rc["min"].as_f64()),
        (Some(8.0), Some(6.0))
    );
    // std of (6, 10) with ddof=1 is 2*sqrt(2); t(0.975, 1) = 12.7062.
    assert!(close(rc["std"].as_f64().unwrap(), 8f64.sqrt()));
    assert!(close(
        rc["t_critical"].as_f64().unwrap(),
        12.706204736174698
    ));
    assert_eq!(v["metadata"]["failed_runs"][0]["label"], "run_0003");
    let ttft: Vec<f64> = runs[..2]
        .iter()
        .map(|r| r.result.as_ref().unwrap()["time_to_first_token"].stats["p50"])
        .collect();
    let m = v["metrics"]["time_to_first_token_p50"]["mean"]
        .as_f64()
        .unwrap();
    assert!(close(m, (ttft[0] + ttft[1]) / 2.0), "{m} {ttft:?}");
    assert!(ttft.iter().all(|t| *t >= 5.0), "{ttft:?}");

    // The distribution criterion reads per-request values from each run's JSONL: every
    // request got 8 output tokens, so the two runs' lengths match; their input lengths (20
    // tokens) do not match their output lengths. (TTFT, 5 ms at the mock plus the client's
    // own time, was compared here once and came out near 8 often enough to match.)
    let jsonl = |i: usize| {
        tmp.path()
            .join(format!("profile_runs/run_000{i}/profile_export.jsonl"))
    };
    let osl1 = read_record_values(&jsonl(1), "output_sequence_length").unwrap();
    let osl2 = read_record_values(&jsonl(2), "output_sequence_length").unwrap();
    assert_eq!((osl1.len(), osl2.len()), (6, 10));
    assert!(
        osl1.iter().chain(&osl2).all(|v| *v == 8.0),
        "{osl1:?} {osl2:?}"
    );
    assert!(distributions_match(&osl1, &osl2, 0.05));
    let isl2 = read_record_values(&jsonl(2), "input_sequence_length").unwrap();
    assert_eq!(isl2.len(), 10);
    assert!(isl2.iter().all(|v| *v >= 15.0), "{isl2:?}");
    assert!(!distributions_match(&osl1, &isl2, 0.05));
}
