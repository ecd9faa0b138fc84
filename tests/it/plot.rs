//! `aiperf plot` end to end: runs recorded against the built-in mock (one vision run with
//! server metrics and time slices; a 3-point sweep with 2 trials each), plotted by the real
//! binary; every file decoded, and values read back from the SVGs checked against the
//! summary JSON.

use crate::common;
use crate::common::Profile;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::Value;

/// The recorded runs, made once per test binary.
struct Fixtures {
    _tmp: tempfile::TempDir,
    single: PathBuf,
    sweep: PathBuf,
}

fn profile(dir: &Path, out: &str, args: &[&str]) {
    let o = Profile::new("Qwen/Qwen2-VL-2B-Instruct")
        .args(&["--streaming", "--mock-server", "--isl", "40", "--osl", "20"])
        .artifact_dir(out)
        .args(args)
        .run_in(dir);
    assert!(o.status.success(), "{}", stderr_text(&o));
}

fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        profile(
            tmp.path(),
            "single",
            &[
                "--request-count",
                "40",
                "--concurrency",
                "4",
                "--image-width-mean",
                "320",
                "--image-height-mean",
                "320",
                "--image-width-stddev",
                "120",
                "--image-height-stddev",
                "120",
                "--server-metrics-formats",
                "json,jsonl",
                "--slice-duration",
                "0.5",
            ],
        );
        profile(
            tmp.path(),
            "sweep",
            &[
                "--request-count",
                "8",
                "--concurrency",
                "1,2,4",
                "--num-profile-runs",
                "2",
            ],
        );
        Fixtures {
            single: tmp.path().join("single"),
            sweep: tmp.path().join("sweep"),
            _tmp: tmp,
        }
    })
}

/// `aiperf plot <args>` in `cwd`; asserts success.
fn plot(cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["plot"];
    all.extend_from_slice(args);
    let o = run_aiperf_in(cwd, &all);
    assert!(o.status.success(), "{}", stderr_text(&o));
    o
}

/// The PNG decodes at 1600x800 and is not blank: many pixels differ from the background
/// and the luminance varies.
fn check_png(path: &Path) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    assert_eq!(img.dimensions(), (1600, 800), "{}", path.display());
    let bg = *img.get_pixel(0, 0);
    let drawn = img.pixels().filter(|p| **p != bg).count();
    assert!(
        drawn > 1600 * 800 / 100,
        "{}: only {drawn} pixels drawn",
        path.display()
    );
    let lum: Vec<f64> = img
        .pixels()
        .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
        .collect();
    let mean = lum.iter().sum::<f64>() / lum.len() as f64;
    let var = lum.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lum.len() as f64;
    assert!(var > 50.0, "{}: luminance variance {var}", path.display());
}

/// A parsed SVG: its axes layout note and its drawn elements.
struct Svg {
    text: String,
}

impl Svg {
    fn open(path: &Path) -> Svg {
        let text = std::fs::read_to_string(path).unwrap();
        roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
        Svg { text }
    }

    fn doc(&self) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(&self.text).unwrap()
    }

    fn layout(&self) -> Value {
        let doc = self.doc();
        let note = doc
            .descendants()
            .find(|n| n.attribute("id") == Some("aiperf-plot-layout"))
            .expect("layout note");
        serde_json::from_str(note.text().unwrap()).unwrap()
    }

    fn count(&self, tag: &str) -> usize {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == tag)
            .count()
    }

    fn color_of(&self, series: &str) -> String {
        let layout = self.layout();
        let s = layout["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == series)
            .unwrap_or_else(|| panic!("no series {series}: {layout}"));
        s["color"].as_str().unwrap().to_string()
    }

    /// The longest polyline stroked in `color` (the legend's sample is a short one).
    fn polyline(&self, color: &str) -> Vec<(f64, f64)> {
        let doc = self.doc();
        doc.descendants()
            .filter(|n| n.tag_name().name() == "polyline" && n.attribute("stroke") == Some(color))
            .map(|n| {
                n.attribute("points")
                    .unwrap()
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse().unwrap(), y.parse().unwrap())
                    })
                    .collect::<Vec<(f64, f64)>>()
            })
            .max_by_key(Vec::len)
            .unwrap_or_default()
    }

    /// Centres of the circles filled in `color`.
    fn circles(&self, color: &str) -> Vec<(f64, f64)> {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == "circle" && n.attribute("fill") == Some(color))
            .map(|n| {
                let f = |a| n.attribute(a).unwrap().parse::<f64>().unwrap();
                (f("cx"), f("cy"))
            })
            .collect()
    }

    fn texts(&self) -> Vec<String> {
        self.doc()
            .descendants()
            .filter(|n| n.tag_name().name() == "text")
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect()
    }
}

/// Data value of pixel `px` on `axis` (`{"range": [a, b], "px": [p, q]}`).
fn value(axis: &Value, px: f64) -> f64 {
    let r = |i| axis["range"][i].as_f64().unwrap();
    let p = |i| axis["px"][i].as_f64().unwrap();
    r(0) + (px - p(0)) / (p(1) - p(0)) * (r(1) - r(0))
}

/// Data units per pixel on `axis`.
fn per_px(axis: &Value) -> f64 {
    (value(axis, 1.0) - value(axis, 0.0)).abs()
}

const SINGLE_DEFAULTS: &[&str] = &[
    "ttft_distribution",
    "itl_distribution",
    "request_latency_distribution",
    "request_timeline",
    "ttft_over_time",
    "dispersed_throughput_over_time",
    "image_tokens_by_size",
    "latency_by_image_size",
    "server_requests_over_time",
    "server_kv_cache_over_time",
    "timeslices_ttft",
    "timeslices_itl",
];

#[test]
fn a_vision_run_with_server_metrics_gets_every_single_run_plot() {
    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    let o = plot(
        Path::new("."),
        &[
            f.single.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    assert!(stderr_text(&o).is_empty(), "{}", stderr_text(&o));
    for name in SINGLE_DEFAULTS {
        check_png(&out.path().join(format!("{name}.png")));
        let svg = Svg::open(&out.path().join(format!("{name}.svg")));
        let drawn = ["polyline", "rect", "circle", "polygon"]
            .iter()
            .map(|t| svg.count(t))
            .sum::<usize>();
        assert!(drawn > 10, "{name}: {drawn} elements");
    }
    let summary = std::fs::read_to_string(out.path().join("summary.txt")).unwrap();
    assert!(
        summary.starts_with("AIPerf Plot Export Summary\n"),
        "{summary}"
    );
    assert!(summary.contains(&format!("Generated {} plots:", SINGLE_DEFAULTS.len())));
    assert!(summary.contains("  - ttft_distribution.png\n"), "{summary}");
    assert!(summary.contains(&format!("Output directory: {}", out.path().display())));
}

#[test]
fn the_cdf_crosses_one_half_at_the_runs_own_median() {
    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    plot(
        Path::new("."),
        &[
            f.single.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    let summary = read_json(&f.single.join("profile_export_aiperf.json"));
    for (name, tag) in [
        ("ttft_distribution", "time_to_first_token"),
        ("itl_distribution", "inter_token_latency"),
        ("request_latency_distribution", "request_latency"),
    ] {
        let svg = Svg::open(&out.path().join(format!("{name}.svg")));
        let layout = svg.layout();
        let cdf = svg.polyline(&svg.color_of("Cumulative share (CDF)"));
        assert!(cdf.len() >= 20, "{name}: {} points", cdf.len());
        let pts: Vec<(f64, f64)> = cdf
            .iter()
            .map(|&(x, y)| (value(&layout["x"], x), value(&layout["y2"], y)))
            .collect();
        let i = pts.iter().position(|p| p.1 >= 0.5).unwrap();
        let (a, b) = (pts[i - 1], pts[i]);
        let median = a.0 + (0.5 - a.1) / (b.1 - a.1) * (b.0 - a.0);
        let p50 = summary[tag]["p50"].as_f64().unwrap();
        let tol = 3.0 * per_px(&layout["x"]) + 0.002 * p50;
        assert!(
            (median - p50).abs() <= tol,
            "{name}: CDF median {median} vs p50 {p50} (tolerance {tol})"
        );
        // The CDF ends at the largest value; the x axis fits the values (not from 0).
        let min = summary[tag]["min"].as_f64().unwrap();
        let x0 = layout["x"]["range"][0].as_f64().unwrap();
        assert!(
            x0 > 0.0 && x0 <= min,
            "{name}: axis from {x0}, values from {min}"
        );
        let max = summary[tag]["max"].as_f64().unwrap();
        let last = pts.last().unwrap();
        assert!(
            (last.0 - max).abs() <= tol && (last.1 - 1.0).abs() < 0.01,
            "{name}: {last:?}"
        );
        // The p50 mark is labelled with the JSON's value.
        assert!(
            svg.texts().contains(&format!("p50 {p50:.1} ms")),
            "{name}: {:?}",
            svg.texts()
        );
    }
}

#[test]
fn the_timeline_has_one_point_per_request_at_its_latency() {
    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    plot(
        Path::new("."),
        &[
            f.single.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    let svg = Svg::open(&out.path().join("request_timeline.svg"));
    let layout = svg.layout();
    // One circle per request, plus the legend's sample.
    let circles = svg.circles(&svg.color_of("Request latency"));
    assert_eq!(circles.len(), 40 + 1);
    let mut drawn: Vec<f64> = circles[..40]
        .iter()
        .map(|c| value(&layout["y"], c.1))
        .collect();
    drawn.sort_by(f64::total_cmp);
    let mut latencies: Vec<f64> = read_jsonl(&f.single.join("profile_export.jsonl"))
        .iter()
        .map(|r| r["metrics"]["request_latency"]["value"].as_f64().unwrap())
        .collect();
    latencies.sort_by(f64::total_cmp);
    let tol = 1.5 * per_px(&layout["y"]);
    for (d, l) in drawn.iter().zip(&latencies) {
        assert!((d - l).abs() <= tol, "{d} vs {l}");
    }
}

#[test]
fn server_running_requests_reach_the_concurrency() {
    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    plot(
        Path::new("."),
        &[
            f.single.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    let svg = Svg::open(&out.path().join("server_requests_over_time.svg"));
    let layout = svg.layout();
    let running = svg.polyline(&svg.color_of("Server: requests running"));
    let max = running
        .iter()
        .map(|p| value(&layout["y"], p.1))
        .fold(0.0, f64::max);
    // Four requests in flight at a time: the server sees at most four running, and at
    // least one while the run goes on.
    assert!((1.0 - 0.05..=4.05).contains(&max), "running max {max}");
    // TTFT shares the time axis on the right, its axis fitted to its values.
    assert_fills_its_axes("server_requests_over_time", &layout);
}

#[test]
fn a_sweep_with_repeats_gets_the_multi_run_plots_with_its_values() {
    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    plot(
        Path::new("."),
        &[
            f.sweep.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    for name in [
        "ttft_vs_throughput",
        "pareto_curve_throughput_vs_interactivity",
        "pareto_curve_throughput_vs_latency",
        "latency_vs_load",
        "latency_throughput_uncertainty",
    ] {
        check_png(&out.path().join(format!("{name}.png")));
        Svg::open(&out.path().join(format!("{name}.svg")));
    }
    // Each point sits at its cell's mean throughput across trials, labelled by its load.
    let svg = Svg::open(&out.path().join("pareto_curve_throughput_vs_latency.svg"));
    let layout = svg.layout();
    let texts = svg.texts();
    for c in ["c=1", "c=2", "c=4"] {
        assert!(texts.iter().any(|t| t == c), "{c} missing: {texts:?}");
    }
    let drawn: Vec<(f64, f64)> = svg
        .circles(&svg.color_of("Runs"))
        .iter()
        .map(|p| (value(&layout["x"], p.0), value(&layout["y"], p.1)))
        .collect();
    // Three runs plus the legend's sample.
    assert_eq!(drawn.len(), 4, "{drawn:?}");
    let (px_x, px_y) = (per_px(&layout["x"]), per_px(&layout["y"]));
    for c in [1, 2, 4] {
        let agg = read_json(&f.sweep.join(format!(
            "aggregate/concurrency_{c}/profile_export_aiperf_aggregate.json"
        )));
        let want = (
            agg["metrics"]["request_latency_avg"]["mean"]
                .as_f64()
                .unwrap(),
            agg["metrics"]["output_token_throughput_avg"]["mean"]
                .as_f64()
                .unwrap(),
        );
        let near = drawn
            .iter()
            .any(|d| (d.0 - want.0).abs() <= 2.0 * px_x && (d.1 - want.1).abs() <= 2.0 * px_y);
        assert!(near, "c={c}: no point at {want:?} in {drawn:?}");
    }
    // Repeated runs: error bars from the aggregate's confidence interval.
    let unc =
        std::fs::read_to_string(out.path().join("latency_throughput_uncertainty.svg")).unwrap();
    assert!(
        unc.matches("<polyline").count() >= 3 * 3,
        "error bars missing"
    );
}

/// Each axis with data of some span has that data across at least half its length.
fn assert_fills_its_axes(name: &str, layout: &Value) {
    for key in ["x", "y", "y2"] {
        let axis = &layout[key];
        let Some(data) = axis["data_px"].as_array() else {
            continue;
        };
        let px = |v: &Value, i: usize| v[i].as_f64().unwrap();
        let data_len = (px(&axis["data_px"], 1) - px(&axis["data_px"], 0)).abs();
        let axis_len = (px(&axis["px"], 1) - px(&axis["px"], 0)).abs();
        if data_len < 1.0 {
            continue; // one value: nothing to spread
        }
        assert!(
            data_len >= 0.5 * axis_len,
            "{name}: {key} data spans {data_len} of {axis_len} px ({data:?}, {axis})"
        );
    }
}

/// Boxes `[left, top, right, bottom]` that share no pixel.
fn disjoint(a: &[i64], b: &[i64]) -> bool {
    a[2] <= b[0] || b[2] <= a[0] || a[3] <= b[1] || b[3] <= a[1]
}

/// The checks a reader's eye makes, on the layout note of each chart drawn: the data fills
/// its axes, no placed text overlaps another or the plotting area, count axes print whole
/// numbers, each legend sample is dashed as its line, and the subtitle counts the failed
/// requests. Returns how many dashed legend samples it checked.
fn assert_readable(name: &str, svg: &Svg, subtitle: &str) -> usize {
    let layout = svg.layout();
    assert_fills_its_axes(name, &layout);
    let boxes: Vec<(String, Vec<i64>)> = layout["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let b = l["box"].as_array().unwrap();
            (
                format!("{} {}", l["kind"], l["text"]),
                b.iter().map(|v| v.as_i64().unwrap()).collect(),
            )
        })
        .collect();
    let plot: Vec<i64> = layout["plot"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    for (i, (a, ab)) in boxes.iter().enumerate() {
        assert!(
            disjoint(ab, &plot),
            "{name}: {a} {ab:?} on the plot {plot:?}"
        );
        for (b, bb) in &boxes[i + 1..] {
            assert!(disjoint(ab, bb), "{name}: {a} {ab:?} overlaps {b} {bb:?}");
        }
    }
    for key in ["x", "y", "y2"] {
        let axis = &layout[key];
        if axis["integer"] != true {
            continue;
        }
        let ticks = axis["ticks"].as_array().unwrap();
        assert!(!ticks.is_empty(), "{name}: {key} has no ticks");
        for t in ticks {
            let t = t.as_str().unwrap();
            assert!(
                t.parse::<i64>().is_ok(),
                "{name}: {key} tick {t:?} on a count axis"
            );
        }
    }
    let subtitles: Vec<&Value> = layout["labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "subtitle")
        .collect();
    assert!(
        subtitles
            .iter()
            .any(|l| l["text"].as_str().unwrap().contains(subtitle)),
        "{name}: no subtitle {subtitle:?} in {subtitles:?}"
    );
    // A dashed series' legend sample is drawn in dashes too.
    let doc = svg.doc();
    let mut dashed = 0;
    for s in layout["series"].as_array().unwrap() {
        if s["dashed"] != true {
            continue;
        }
        let Some(entry) = boxes
            .iter()
            .find(|(k, _)| k == &format!("\"legend\" {}", s["name"]))
        else {
            panic!("{name}: no legend entry for {s}");
        };
        let inside = |p: &(f64, f64)| {
            let b = &entry.1;
            p.0 >= b[0] as f64 && p.0 <= b[2] as f64 && p.1 >= b[1] as f64 && p.1 <= b[3] as f64
        };
        let pieces = doc
            .descendants()
            .filter(|n| {
                n.tag_name().name() == "polyline" && n.attribute("stroke") == s["color"].as_str()
            })
            .filter(|n| {
                n.attribute("points").unwrap().split_whitespace().all(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    inside(&(x.parse().unwrap(), y.parse().unwrap()))
                })
            })
            .count();
        assert!(
            pieces >= 2,
            "{name}: legend of dashed {} in {pieces} piece(s)",
            s["name"]
        );
        dashed += 1;
    }
    dashed
}

/// Every default chart, of a run where some requests failed and of a sweep, passes the
/// reader's checks.
#[test]
fn every_default_chart_is_readable_and_counts_failed_requests() {
    let mock = common::MockChild::spawn(&[
        "--ttft",
        "22",
        "--itl",
        "3",
        "--ttft-jitter-cv",
        "0.05",
        "--error-rate",
        "15",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let o = Profile::new("Qwen/Qwen2-VL-2B-Instruct")
        .url(&mock.url)
        .args(&[
            "--streaming",
            "--isl",
            "40",
            "--osl",
            "20",
            "--request-count",
            "40",
            "--concurrency",
            "4",
            "--image-width-mean",
            "320",
            "--image-height-mean",
            "320",
            "--image-width-stddev",
            "120",
            "--image-height-stddev",
            "120",
            "--server-metrics-formats",
            "json,jsonl",
            "--slice-duration",
            "0.25",
        ])
        .artifact_dir("run")
        .run_in(tmp.path());
    assert!(o.status.success(), "{}", stderr_text(&o));
    let run = tmp.path().join("run");
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    let failed = summary["error_request_count"]["avg"].as_f64().unwrap() as u64;
    let ok = summary["request_count"]["avg"].as_f64().unwrap() as u64;
    assert!(failed > 0, "the mock failed no request");
    plot(tmp.path(), &["run"]);
    let line = format!("{} requests, {failed} failed", ok + failed);
    for name in SINGLE_DEFAULTS {
        let svg = Svg::open(&run.join(format!("plots/{name}.svg")));
        assert_readable(name, &svg, &line);
    }
    let mut dashed = 0;

    let f = fixtures();
    let out = tempfile::tempdir().unwrap();
    plot(
        Path::new("."),
        &[
            f.sweep.to_str().unwrap(),
            "--output",
            out.path().to_str().unwrap(),
        ],
    );
    for name in [
        "ttft_vs_throughput",
        "pareto_curve_throughput_vs_interactivity",
        "pareto_curve_throughput_vs_latency",
        "latency_vs_load",
        "latency_throughput_uncertainty",
    ] {
        let svg = Svg::open(&out.path().join(format!("{name}.svg")));
        dashed += assert_readable(name, &svg, "3 runs: ");
    }
    assert!(dashed > 0, "no dashed series among the multi-run charts");
}

/// An AIPerf-style artifacts tree (same file names, AIPerf's `input_config` shape).
fn aiperf_layout(root: &Path, from: &Path) {
    for (dir, c) in [
        ("org_m-openai-chat-concurrency4", 4),
        ("org_m-openai-chat-concurrency8", 8),
    ] {
        let d = root.join("artifacts").join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(
            from.join("profile_export.jsonl"),
            d.join("profile_export.jsonl"),
        )
        .unwrap();
        let mut summary = read_json(&from.join("profile_export_aiperf.json"));
        summary["input_config"] = serde_json::json!({
            "endpoint": {"model_names": ["org/m"], "type": "chat", "streaming": true},
            "loadgen": {"concurrency": c}
        });
        for stat in ["avg", "p50", "p99"] {
            let v = summary["output_token_throughput"][stat]
                .as_f64()
                .unwrap_or(100.0);
            summary["output_token_throughput"][stat] = (v * c as f64 / 4.0).into();
        }
        std::fs::write(
            d.join("profile_export_aiperf.json"),
            serde_json::to_string_pretty(&summary).unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn an_aiperf_artifacts_tree_is_found_from_the_default_path() {
    let f = fixtures();
    let cwd = tempfile::tempdir().unwrap();
    aiperf_layout(cwd.path(), &f.single);
    let o = plot(cwd.path(), &[]);
    let plots = cwd.path().join("artifacts/plots");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("from 2 run(s)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let svg = Svg::open(&plots.join("ttft_vs_throughput.svg"));
    let texts = svg.texts();
    assert!(
        texts.iter().any(|t| t == "c=4") && texts.iter().any(|t| t == "c=8"),
        "{texts:?}"
    );
    check_png(&plots.join("latency_vs_load.png"));
    // Without repeated runs there is no uncertainty plot, and a warning says why.
    assert!(!plots.join("latency_throughput_uncertainty.png").exists());
    assert!(
        stderr_text(&o).contains("skipped latency_throughput_uncertainty"),
        "{}",
        stderr_text(&o)
    );
}

#[test]
fn bad_input_is_refused_with_what_to_do() {
    let cwd = tempfile::tempdir().unwrap();
    let missing = run_aiperf_in(cwd.path(), &["plot", "no/such/dir"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr_text(&missing).contains("no/such/dir"),
        "{}",
        stderr_text(&missing)
    );

    std::fs::create_dir(cwd.path().join("empty")).unwrap();
    let empty = run_aiperf_in(cwd.path(), &["plot", "empty"]);
    assert_eq!(empty.status.code(), Some(2));
    assert!(
        stderr_text(&empty).contains("no run found under empty"),
        "{}",
        stderr_text(&empty)
    );

    let o = run_aiperf_in(cwd.path(), &["plot", "empty", "--mlflow-upload"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr_text(&o);
    assert!(
        err.contains("--mlflow-upload") && err.contains("not supported"),
        "{err}"
    );
    // The dashboard's address flags mean nothing without it.
    let o = run_aiperf_in(cwd.path(), &["plot", "empty", "--port", "9000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr_text(&o).contains("--dashboard"),
        "{}",
        stderr_text(&o)
    );
}

/// `GET path` on `addr`: the status line, the headers and the body.
fn http_get(addr: &str, path: &str) -> (String, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
    (
        status.to_string(),
        headers.to_lowercase(),
        raw[split + 4..].to_vec(),
    )
}

#[test]
fn the_dashboard_serves_every_chart_until_stopped() {
    use std::io::BufRead;
    let f = fixtures();
    let cwd = tempfile::tempdir().unwrap();
    let out = cwd.path().join("out");
    let mut child = std::process::Command::new(common::BIN)
        .args(["plot", f.single.to_str().unwrap(), "--output"])
        .arg(&out)
        .args(["--dashboard", "--port", "0"])
        .current_dir(cwd.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut addr = None;
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("Dashboard at http://") {
            addr = Some(rest.split('/').next().unwrap().to_string());
            break;
        }
    }
    let addr = addr.expect("the dashboard's address on stdout");
    let (status, headers, body) = http_get(&addr, "/");
    assert!(status.contains("200"), "{status}");
    assert!(headers.contains("text/html"), "{headers}");
    let page = String::from_utf8(body).unwrap();
    let svgs = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "svg")
        })
        .count();
    assert!(svgs >= 5, "{svgs} charts");
    // Every chart drawn is on the page, and each one is served.
    assert_eq!(page.matches("<img src=\"/files/").count(), svgs, "{page}");
    let first = page
        .split("<img src=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let (status, headers, body) = http_get(&addr, first);
    assert!(status.contains("200"), "{first}: {status}");
    assert!(headers.contains("image/svg+xml"), "{headers}");
    assert!(String::from_utf8_lossy(&body).contains("<svg"), "{first}");
    // Nothing outside the output directory.
    let (status, _, _) = http_get(&addr, "/files/..%2Fsingle");
    assert!(status.contains("404"), "{status}");
    // SIGTERM stops it cleanly.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let code = child.wait().unwrap();
    assert!(code.success(), "{code:?}");
}

#[test]
fn a_plot_config_chooses_the_plots_and_names_what_it_ignores() {
    let f = fixtures();
    let cwd = tempfile::tempdir().unwrap();
    let cfg = cwd.path().join("plot.yaml");
    std::fs::write(
        &cfg,
        "visualization:\n  single_run_defaults:\n    - ttft_timeline\n    - latency_over_time\n  single_run_plots: {}\nsettings:\n  server_metrics_downsampling: {enabled: true}\n",
    )
    .unwrap();
    let out = cwd.path().join("out");
    let o = plot(
        cwd.path(),
        &[
            f.single.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--theme",
            "dark",
        ],
    );
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".png"))
        .collect();
    files.sort();
    assert_eq!(files, ["latency_over_time.png", "request_timeline.png"]);
    let err = stderr_text(&o);
    assert!(
        err.contains("settings") && err.contains("visualization.single_run_plots"),
        "{err}"
    );
    // The dark theme: a dark background.
    let img = image::open(out.join("request_timeline.png"))
        .unwrap()
        .to_rgb8();
    let bg = img.get_pixel(0, 0);
    assert!(bg[0] < 60 && bg[1] < 60 && bg[2] < 60, "{bg:?}");

    std::fs::write(
        &cfg,
        "visualization:\n  multi_run_defaults: [ttft_vs_nothing]\n",
    )
    .unwrap();
    let bad = run_aiperf_in(
        cwd.path(),
        &["plot", f.single.to_str().unwrap(), "--config", "plot.yaml"],
    );
    assert_eq!(bad.status.code(), Some(2));
    let err = stderr_text(&bad);
    assert!(
        err.contains("visualization.multi_run_defaults") && err.contains("ttft_vs_nothing"),
        "{err}"
    );
}

#[test]
fn auto_plot_draws_after_the_run_and_only_when_asked() {
    let cwd = tempfile::tempdir().unwrap();
    profile(cwd.path(), "with", &["--request-count", "6", "--auto-plot"]);
    check_png(&cwd.path().join("with/plots/ttft_distribution.png"));
    assert!(cwd.path().join("with/plots/summary.txt").is_file());
    profile(cwd.path(), "without", &["--request-count", "6"]);
    assert!(
        cwd.path()
            .join("without/profile_export_aiperf.json")
            .is_file()
    );
    assert!(!cwd.path().join("without/plots").exists());
    profile(
        cwd.path(),
        "off",
        &["--request-count", "6", "--auto-plot", "--no-auto-plot"],
    );
    assert!(!cwd.path().join("off/plots").exists());
}

/// A plot that cannot be drawn (a file where `plots/` goes) warns; with --plot-required it
/// fails the run, exit 1, the results still written.
#[test]
fn a_plot_that_fails_warns_or_with_plot_required_fails_the_run() {
    let cwd = tempfile::tempdir().unwrap();
    let run = |out: &str, extra: &[&str]| {
        std::fs::create_dir_all(cwd.path().join(out)).unwrap();
        std::fs::write(cwd.path().join(out).join("plots"), "in the way").unwrap();
        Profile::new("Qwen/Qwen2-VL-2B-Instruct")
            .args(&["--streaming", "--mock-server", "--request-count", "4"])
            .artifact_dir(out)
            .args(&["--auto-plot"])
            .args(extra)
            .run_in(cwd.path())
    };
    let warned = run("warned", &[]);
    let err = stderr_text(&warned);
    assert!(warned.status.success(), "{err}");
    assert!(err.contains("--auto-plot: plotting failed"), "{err}");
    let failed = run("failed", &["--plot-required"]);
    let err = stderr_text(&failed);
    assert_eq!(failed.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: --auto-plot with --plot-required: plotting failed"),
        "{err}"
    );
    assert!(
        cwd.path()
            .join("failed/profile_export_aiperf.json")
            .is_file()
    );
    let summary = common::read_json(&cwd.path().join("failed/profile_export_aiperf.json"));
    assert_eq!(summary["input_config"]["artifacts"]["plot_required"], true);
}

#[test]
fn auto_plot_after_a_sweep_covers_every_point_and_repeats_plot_their_trials() {
    let cwd = tempfile::tempdir().unwrap();
    profile(
        cwd.path(),
        "sweep",
        &[
            "--request-count",
            "4",
            "--concurrency",
            "1,2",
            "--auto-plot",
        ],
    );
    let plots = cwd.path().join("sweep/plots");
    check_png(&plots.join("ttft_vs_throughput.png"));
    let page = std::fs::read_to_string(plots.join("report.html")).expect("the runs compared");
    assert!(page.contains("<dt>concurrency_1</dt>") && page.contains("<dt>concurrency_2</dt>"));
    let texts = Svg::open(&plots.join("ttft_vs_throughput.svg")).texts();
    assert!(
        texts.iter().any(|t| t == "c=1") && texts.iter().any(|t| t == "c=2"),
        "{texts:?}"
    );

    // Repeated runs of one configuration: one aggregate, so its trials are compared.
    profile(
        cwd.path(),
        "repeats",
        &["--request-count", "4", "--num-profile-runs", "2"],
    );
    let o = plot(cwd.path(), &["repeats"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("from 2 run(s)"));
    let texts = Svg::open(&cwd.path().join("repeats/plots/ttft_vs_throughput.svg")).texts();
    assert!(
        texts.iter().any(|t| t == "run_0001") && texts.iter().any(|t| t == "run_0002"),
        "{texts:?}"
    );
}

#[test]
fn failed_requests_are_crosses_on_the_timeline_and_a_local_config_is_read() {
    let f = fixtures();
    let cwd = tempfile::tempdir().unwrap();
    let run = cwd.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for name in ["profile_export.jsonl", "profile_export_aiperf.json"] {
        std::fs::copy(f.single.join(name), run.join(name)).unwrap();
    }
    // Two failed requests, as AIPerf writes them: an error and no latency metrics.
    let mut lines = std::fs::read_to_string(run.join("profile_export.jsonl")).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    for i in 0..2u64 {
        let mut failed = first.clone();
        failed["metrics"] = serde_json::json!({});
        failed["error"] =
            serde_json::json!({"code": 500, "type": "Internal Server Error", "message": "boom"});
        let start = first["metadata"]["request_start_ns"].as_u64().unwrap() + i * 1_000_000;
        failed["metadata"]["request_start_ns"] = start.into();
        failed["metadata"]["request_end_ns"] = (start + 50_000_000).into();
        lines.push_str(&format!("{failed}\n"));
    }
    std::fs::write(run.join("profile_export.jsonl"), lines).unwrap();
    std::fs::write(
        run.join(".aiperf-plot-config.yaml"),
        "visualization:\n  single_run_defaults: [request_timeline]\n",
    )
    .unwrap();
    plot(cwd.path(), &["run"]);
    let pngs: Vec<_> = std::fs::read_dir(run.join("plots"))
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.ends_with(".png").then_some(n)
        })
        .collect();
    assert_eq!(pngs, ["request_timeline.png"]);
    let svg = Svg::open(&run.join("plots/request_timeline.svg"));
    let layout = svg.layout();
    let color = svg.color_of("Failed request (time to error)");
    let strokes: Vec<f64> = svg
        .doc()
        .descendants()
        .filter(|n| n.tag_name().name() == "polyline" && n.attribute("stroke") == Some(&color))
        .map(|n| {
            // A stroke's middle is the cross's centre.
            let ys: Vec<f64> = n
                .attribute("points")
                .unwrap()
                .split_whitespace()
                .map(|p| p.split_once(',').unwrap().1.parse::<f64>().unwrap())
                .collect();
            ys.iter().sum::<f64>() / ys.len() as f64
        })
        .collect();
    // Two strokes per cross: two failures and the legend's sample.
    assert_eq!(strokes.len(), 6, "{strokes:?}");
    // Each failure sits at its 50 ms to the error.
    let at_50ms = strokes
        .iter()
        .filter(|&&y| (value(&layout["y"], y) - 50.0).abs() <= 2.0 * per_px(&layout["y"]))
        .count();
    assert_eq!(at_50ms, 4, "{strokes:?}");
}

/// A copy of the run in `from` whose every record has `values[i % len]` as its time to
/// first token.
fn with_ttft(from: &Path, to: &Path, values: &[f64]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let lines: Vec<String> = read_jsonl(&from.join("profile_export.jsonl"))
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r["metrics"]["time_to_first_token"]["value"] = values[i % values.len()].into();
            format!("{r}\n")
        })
        .collect();
    std::fs::write(to.join("profile_export.jsonl"), lines.concat()).unwrap();
}

/// Runs `aiperf plot <dir>`; fails if it is still running after `limit`.
fn plot_within(dir: &Path, limit: std::time::Duration) -> std::process::Output {
    let mut child = std::process::Command::new(common::BIN)
        .args(["plot", dir.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            child.kill().unwrap();
            panic!("{}: still plotting after {limit:?}", dir.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Any finite value gives finite axes and ends: 200 records of 1e308 used to spin for
/// ever in the tick search (the padded axis overflowed to infinity).
#[test]
fn extreme_values_plot_quickly_and_an_emptied_records_file_is_refused() {
    let mock = common::MockChild::spawn(&["--fast"]);
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let o = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "-m",
            "m",
            "--tokenizer",
            "builtin",
            "--streaming",
            "--url",
            &mock.url,
            "--isl",
            "8",
            "--osl",
            "4",
            "--request-count",
            "200",
            "--concurrency",
            "8",
            "--no-server-metrics",
            "--artifact-dir",
            "run",
        ],
    );
    assert!(o.status.success(), "{}", stderr_text(&o));
    let cases: &[(&str, &[f64])] = &[
        ("all_1e308", &[1e308]),
        ("all_max", &[f64::MAX]),
        (
            "tiny_and_huge",
            &[5e-324, 1e-300, 0.0, 12.5, 1e300, f64::MAX],
        ),
        ("near_equal", &[1000.0, 1000.0 + 1e-10]),
    ];
    for (name, values) in cases {
        let dir = tmp.path().join(name);
        with_ttft(&run, &dir, values);
        let o = plot_within(&dir, std::time::Duration::from_secs(60));
        assert!(o.status.success(), "{name}: {}", stderr_text(&o));
        for chart in ["ttft_distribution", "request_timeline", "ttft_over_time"] {
            check_png(&dir.join("plots").join(format!("{chart}.png")));
        }
    }

    // No records beside a summary that counts 200: exit 2 naming the file, no charts.
    let emptied = tmp.path().join("emptied");
    with_ttft(&run, &emptied, &[1.0]);
    std::fs::write(emptied.join("profile_export.jsonl"), "").unwrap();
    let o = plot_within(&emptied, std::time::Duration::from_secs(60));
    let err = stderr_text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("profile_export.jsonl: no request records")
            && err.contains("counts 200 requests"),
        "{err}"
    );
    assert!(!emptied.join("plots").join("ttft_distribution.png").exists());
}
