//! `report.html`: written after a run and after a sweep from the real binary against the
//! mock server, self-contained (nothing fetched), holding the run's numbers, and drawn by a
//! real browser (headless Chromium) without script errors and with ink in every chart.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{MockChild, read_json, run_profile, stderr_text};
use serde_json::Value;

const REPORT: &str = "report.html";

fn profile_ok(args: &[&str]) {
    let out = run_profile(args);
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        stderr_text(&out)
    );
}

/// A vision run with some failed requests (for the timeline's error marks).
fn vision_run(mock: &MockChild, dir: &Path, concurrency: &str, requests: &str) {
    let dir = dir.to_str().unwrap();
    profile_ok(&[
        "-m",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--url",
        &mock.url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--image-width-mean",
        "64",
        "--image-height-mean",
        "64",
        "--isl",
        "40",
        "--osl",
        "12",
        "--request-count",
        requests,
        "--concurrency",
        concurrency,
        "--tokenizer",
        "builtin",
        "--no-gpu-telemetry",
        "--artifact-dir",
        dir,
    ]);
}

/// The chart models embedded in a report.
pub(crate) fn embedded_charts(html: &str) -> Vec<Value> {
    let open = "<script type=\"application/json\" id=\"report-data\">";
    let start = html.find(open).expect("the chart data") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&html[start..end]).expect("the chart data is JSON");
    data["charts"].as_array().expect("a chart list").clone()
}

/// The table cells of the row whose first cell is `name`.
fn table_row(html: &str, name: &str) -> Vec<String> {
    let first = format!("<td class=\"txt\">{name}</td>");
    let at = html.find(&first).unwrap_or_else(|| panic!("no row {name}"));
    let row = &html[at..at + html[at..].find("</tr>").unwrap()];
    row.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            c[..c.find("</td>").unwrap()].to_string()
        })
        .collect()
}

/// Nothing in the page loads from elsewhere.
pub(crate) fn assert_self_contained(html: &str) {
    let lower = html.to_lowercase();
    for attr in ["src", "href"] {
        for quote in ["\"", "'", ""] {
            for scheme in ["http:", "https:", "//"] {
                let bad = format!("{attr}={quote}{scheme}");
                assert!(!lower.contains(&bad), "external reference {bad}");
            }
        }
    }
    for bad in ["fetch(", "xmlhttprequest", "@import", "url(http"] {
        assert!(!lower.contains(bad), "{bad} in the report");
    }
}

#[test]
fn run_report_is_self_contained_and_shows_the_runs_numbers() {
    let mock = MockChild::spawn(&["--ttft", "15", "--itl", "2", "--error-rate", "10"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    vision_run(&mock, &dir, "4", "24");
    let html = std::fs::read_to_string(dir.join(REPORT)).expect("report.html after the run");
    assert_self_contained(&html);

    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    // The console table's numbers, two decimals as printed.
    let ttft = &summary["time_to_first_token"];
    let row = table_row(&html, "Time to First Token (ms)");
    let shown: Vec<String> = ["avg", "min", "max", "p99", "p90", "p50", "std"]
        .iter()
        .map(|s| format!("{:.2}", ttft[*s].as_f64().unwrap()))
        .collect();
    assert_eq!(row[1..], shown[..], "TTFT row {row:?}");
    let console = std::fs::read_to_string(dir.join("profile_export_console.txt")).unwrap();
    assert!(console.contains(&shown[5]), "the console shows p50 too");
    // Header facts and configuration.
    assert!(html.contains("<dd>Qwen/Qwen2-VL-2B-Instruct</dd>"));
    assert!(html.contains("<dd>concurrency 4, 24 requests</dd>"), "load");
    let duration = summary["benchmark_duration"]["avg"].as_f64().unwrap();
    assert!(html.contains(&format!("<dd>{duration:.2} s</dd>")));
    assert!(html.contains("--request-count 24"), "command line");
    assert!(html.contains("&quot;connection_reuse&quot;"), "config");

    // The charts are the plot module's default set for this run, with p50 marked at the
    // summary's value on the TTFT distribution.
    let charts = embedded_charts(&html);
    let names: Vec<&str> = charts.iter().filter_map(|c| c["name"].as_str()).collect();
    assert!(names.contains(&"ttft_distribution"), "{names:?}");
    let ttft_chart = charts
        .iter()
        .find(|c| c["name"] == "ttft_distribution")
        .unwrap();
    let p50 = ttft["p50"].as_f64().unwrap();
    let marked = ttft_chart["marks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["on_x"] == true)
        .filter_map(|m| m["value"].as_f64())
        .any(|v| (v - p50).abs() <= 1e-3 * p50);
    assert!(marked, "p50 {p50} in {:#}", ttft_chart["marks"]);

    // Every chart says how many of the run's requests failed.
    let failed = summary["error_request_count"]["avg"].as_f64().unwrap() as u64;
    let ok = summary["request_count"]["avg"].as_f64().unwrap() as u64;
    let line = format!("Run: {} requests, {failed} failed", ok + failed);
    for c in &charts {
        assert_eq!(c["subtitle"], line.as_str(), "{}", c["name"]);
    }

    if let Some(browser) = chromium() {
        let rendered = render(&browser, &dir.join(REPORT), 9000);
        rendered.assert_drawn(charts.len());
        let checked = rendered.assert_readable();
        assert_eq!(checked, charts.len());
        assert_eq!(
            rendered
                .dom
                .matches(&format!("<p class=\"subtitle\">{line}</p>"))
                .count(),
            charts.len(),
            "a subtitle on every chart"
        );
    }
}

/// `aiperf plot` of several runs writes one page comparing them: each run named with its
/// figures, their distributions overlaid (a series per run), drawn without script errors.
#[test]
fn plot_of_several_runs_writes_one_page_comparing_them() {
    let tmp = tempfile::tempdir().unwrap();
    let fast = MockChild::spawn(&["--ttft", "8", "--itl", "1"]);
    let slow = MockChild::spawn(&["--ttft", "30", "--itl", "2", "--error-rate", "20"]);
    vision_run(&fast, &tmp.path().join("fast"), "2", "12");
    vision_run(&slow, &tmp.path().join("slow"), "2", "12");
    let out = tmp.path().join("compared");
    let o = common::run_aiperf_in(
        tmp.path(),
        &["plot", "fast", "slow", "--output", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr_text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Runs compared in"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let html = std::fs::read_to_string(out.join(REPORT)).expect("the comparison page");
    assert_self_contained(&html);
    // A column per run, named by its directory.
    assert!(
        html.contains("<th class=\"num\">fast</th><th class=\"num\">slow</th>"),
        "the runs' columns"
    );
    let mut total = (0, 0);
    for (run, column) in [("fast", 1), ("slow", 2)] {
        let summary = read_json(&tmp.path().join(run).join("profile_export_aiperf.json"));
        let p50 = summary["time_to_first_token"]["p50"].as_f64().unwrap();
        let row = table_row(&html, "Time to first token (ms) p50");
        assert_eq!(row[column], format!("{p50:.2}"), "{run}: {row:?}");
        let failed = summary["error_request_count"]["avg"]
            .as_f64()
            .unwrap_or(0.0) as u64;
        let ok = summary["request_count"]["avg"].as_f64().unwrap() as u64;
        assert_eq!(
            table_row(&html, "Failed requests")[column],
            failed.to_string()
        );
        assert!(
            html.contains(&format!("<dt>{run}</dt>")),
            "{run} in the header"
        );
        total = (total.0 + ok + failed, total.1 + failed);
    }
    assert!(total.1 > 0, "the slow mock failed no request");
    assert!(
        html.contains(&format!(
            "<dd>2 · {} requests, {} failed</dd>",
            total.0, total.1
        )),
        "the runs' requests and failures in the header"
    );
    let charts = embedded_charts(&html);
    for metric in ["ttft", "itl", "request_latency"] {
        for kind in ["histograms", "cdfs"] {
            let name = format!("{metric}_{kind}_compared");
            let chart = charts
                .iter()
                .find(|c| c["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no {name}"));
            let series: Vec<&str> = chart["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap())
                .collect();
            assert_eq!(series.len(), 2, "{name}: {series:?}");
            assert!(series[0].starts_with("fast (") && series[1].starts_with("slow ("));
        }
    }
    if let Some(browser) = chromium() {
        let rendered = render(&browser, &out.join(REPORT), 9000);
        rendered.assert_drawn(charts.len());
        rendered.assert_readable();
    }
}

#[test]
fn no_html_report_leaves_it_out() {
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let d = dir.to_str().unwrap();
    profile_ok(&[
        "-m",
        "m",
        "--url",
        &mock.url,
        "--request-count",
        "4",
        "--tokenizer",
        "builtin",
        "--no-gpu-telemetry",
        "--no-html-report",
        "--artifact-dir",
        d,
    ]);
    assert!(dir.join("profile_export_aiperf.json").is_file());
    assert!(!dir.join(REPORT).exists());
}

#[test]
fn sweep_report_in_the_base_dir_links_every_run() {
    let mock = MockChild::spawn(&["--ttft", "10", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("sweep");
    vision_run(&mock, &base, "1,3", "9");
    let html = std::fs::read_to_string(base.join(REPORT)).expect("the sweep's report.html");
    assert_self_contained(&html);
    assert!(html.contains("<caption>NVIDIA AIPerf | Sweep Summary</caption>"));
    for point in ["concurrency_1", "concurrency_3"] {
        assert!(
            base.join(point).join(REPORT).is_file(),
            "{point}'s own report"
        );
        assert!(
            html.contains(&format!("<a href=\"{point}/{REPORT}\">{point}</a>")),
            "link to {point}"
        );
    }
    // The sweep table's request throughput, as printed.
    let sweep = read_json(&base.join("sweep_aggregate/profile_export_aiperf_sweep.json"));
    let cells = sweep["per_combination_metrics"].as_array().unwrap();
    let rps = cells
        .iter()
        .find(|c| c["parameters"]["concurrency"] == 3)
        .unwrap()["metrics"]["request_throughput"]["avg"]
        .as_f64()
        .unwrap();
    let row = table_row(&html, "3");
    assert!(row.contains(&format!("{rps:.2}")), "{rps:.2} in {row:?}");
    // The header counts the runs' requests and the failed ones.
    let (mut sent, mut failed) = (0, 0);
    for point in ["concurrency_1", "concurrency_3"] {
        let s = read_json(&base.join(point).join("profile_export_aiperf.json"));
        let errors = s["error_request_count"]["avg"].as_f64().unwrap_or(0.0) as u64;
        sent += s["request_count"]["avg"].as_f64().unwrap() as u64 + errors;
        failed += errors;
    }
    let runs = format!("<dd>2 (2 succeeded) · {sent} requests, {failed} failed</dd>");
    assert!(html.contains(&runs), "{runs} in the header");
    let charts = embedded_charts(&html);
    assert!(!charts.is_empty(), "the multi-run charts");
    if let Some(browser) = chromium() {
        render(&browser, &base.join(REPORT), 7000).assert_drawn(charts.len());
    }
}

/// Every kind of series the chart model has (bars, line on a second axis, scatter, failed
/// points, steps, area, labels, error bars, a log axis), from a hand-written fixture
/// swapped into a real report.
#[test]
fn every_series_kind_draws_in_the_browser() {
    let Some(browser) = chromium() else { return };
    let mock = MockChild::spawn(&["--ttft", "5", "--itl", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    vision_run(&mock, &dir, "4", "24");
    let html = std::fs::read_to_string(dir.join(REPORT)).unwrap();
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report_charts.json"),
    )
    .unwrap();
    let charts: Value = serde_json::from_str(&fixture).unwrap();
    let open = "<script type=\"application/json\" id=\"report-data\">";
    let start = html.find(open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let swapped = format!(
        "{}{}{}",
        &html[..start],
        serde_json::json!({ "charts": charts }),
        &html[end..]
    );
    let page = tmp.path().join("fixture.html");
    std::fs::write(&page, swapped).unwrap();
    render(&browser, &page, 3000).assert_drawn(charts.as_array().unwrap().len());
}

/// The browser to draw with: skipped (with a notice) when there is none, unless
/// `AIPERF_REQUIRE_CHROMIUM=1` makes that a failure.
pub(crate) fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        assert!(
            std::env::var("AIPERF_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "AIPERF_REQUIRE_CHROMIUM=1 but no chromium on PATH"
        );
        eprintln!("NOTICE: chromium not found; the browser checks of report.html are skipped");
    }
    found
}

/// What the browser made of a page: its DOM after the scripts ran, its screenshot, and
/// what it logged.
pub(crate) struct Rendered {
    dom: String,
    shot: image::RgbaImage,
    log: String,
}

const WIDTH: u32 = 1280;

pub(crate) fn render(browser: &Path, page: &Path, height: u32) -> Rendered {
    let tmp = tempfile::tempdir().unwrap();
    let shot_path = tmp.path().join("shot.png");
    let url = format!("file://{}", page.display());
    let run = |extra: &[String]| {
        let out = Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=5000",
            ])
            .arg(format!(
                "--user-data-dir={}",
                tmp.path().join("profile").display()
            ))
            .arg(format!("--window-size={WIDTH},{height}"))
            .args(extra)
            .arg(&url)
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let dom = run(&["--dump-dom".to_string()]);
    let shot = run(&[format!("--screenshot={}", shot_path.display())]);
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&dom.stderr),
        String::from_utf8_lossy(&shot.stderr)
    );
    Rendered {
        dom: String::from_utf8_lossy(&dom.stdout).into_owned(),
        shot: image::open(&shot_path).expect("a PNG").to_rgba8(),
        log,
    }
}

/// `&quot;`-escaped attribute text back to what the script wrote.
fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

impl Rendered {
    /// What the page's script noted of each chart's layout (`data-layout`): the data fills
    /// at least half of each axis; the marks' labels sit above the plotting area and clear
    /// of each other; count axes print whole numbers only; each legend sample is dashed as
    /// its line. Returns how many charts it checked.
    pub(crate) fn assert_readable(&self) -> usize {
        let layouts: Vec<Value> = self
            .dom
            .split("data-layout=\"")
            .skip(1)
            .map(|s| serde_json::from_str(&unescape(&s[..s.find('"').unwrap()])).unwrap())
            .collect();
        for (i, l) in layouts.iter().enumerate() {
            for (key, axis) in l["axes"].as_object().unwrap() {
                let len = axis["len"].as_f64().unwrap();
                if let Some(d) = axis["data_px"].as_array() {
                    let span = d[1].as_f64().unwrap() - d[0].as_f64().unwrap();
                    if span >= 1.0 {
                        assert!(
                            span >= 0.5 * len,
                            "chart {i}: {key} data spans {span} of {len}: {l}"
                        );
                    }
                }
                if axis["integer"] == true {
                    let ticks = axis["ticks"].as_array().unwrap();
                    assert!(!ticks.is_empty(), "chart {i}: {key} has no ticks");
                    for t in ticks {
                        let t = t.as_str().unwrap().replace(',', "");
                        assert!(t.parse::<i64>().is_ok(), "chart {i}: {key} tick {t:?}: {l}");
                    }
                }
            }
            let marks = l["marks"].as_array().unwrap();
            let b = |m: &Value, k: usize| m["box"][k].as_f64().unwrap();
            for (j, m) in marks.iter().enumerate() {
                assert!(b(m, 3) <= 0.0, "chart {i}: mark label {m} on the plot");
                for n in &marks[j + 1..] {
                    let apart = b(m, 2) <= b(n, 0)
                        || b(n, 2) <= b(m, 0)
                        || b(m, 3) <= b(n, 1)
                        || b(n, 3) <= b(m, 1);
                    assert!(apart, "chart {i}: mark labels {m} and {n} overlap");
                }
            }
            assert_eq!(
                l["legend_markers"], l["series_dashed"],
                "chart {i}: legend samples drawn as their series"
            );
        }
        layouts.len()
    }

    /// No script error; every chart drawn; in each chart on screen, the plotting area holds
    /// coloured ink (the series; grid, axes and marks are grey).
    pub(crate) fn assert_drawn(&self, charts: usize) {
        let console_errors: Vec<&str> = self
            .log
            .lines()
            .filter(|l| l.contains(":CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
            .collect();
        assert!(console_errors.is_empty(), "{console_errors:#?}");
        assert!(
            !self.dom.contains("data-js-errors=\"1\""),
            "script error on the page"
        );
        assert!(
            self.dom
                .contains(&format!("data-charts-rendered=\"{charts}\"")),
            "{charts} charts drawn"
        );
        let boxes: Vec<[u32; 4]> = self
            .dom
            .split("data-plot-box=\"")
            .skip(1)
            .map(|s| {
                let v: Vec<u32> = s[..s.find('"').unwrap()]
                    .split(',')
                    .map(|n| n.parse().unwrap())
                    .collect();
                [v[0], v[1], v[2], v[3]]
            })
            .collect();
        assert_eq!(boxes.len(), charts);
        let (w, h) = self.shot.dimensions();
        let mut checked = 0;
        for (i, [x, y, bw, bh]) in boxes.iter().copied().enumerate() {
            assert!(
                bw > 100 && bh > 100,
                "chart {i} has a plotting area: {bw}x{bh}"
            );
            if x + bw > w || y + bh > h {
                continue;
            }
            let mut inked = 0;
            let mut colours = std::collections::HashSet::new();
            for py in y..y + bh {
                for px in x..x + bw {
                    let p = self.shot.get_pixel(px, py).0;
                    colours.insert(p);
                    let (hi, lo) = (p[..3].iter().max().unwrap(), p[..3].iter().min().unwrap());
                    if hi - lo > 60 {
                        inked += 1;
                    }
                }
            }
            assert!(colours.len() > 1, "chart {i} is one colour");
            assert!(inked >= 30, "chart {i} has {inked} coloured pixels");
            checked += 1;
        }
        assert!(
            checked >= charts.min(3),
            "only {checked} of {charts} charts on the screenshot; make the window taller"
        );
    }
}

/// A full disk while the page is written leaves no cut page under its name: it is written
/// beside it and renamed, and the run says why there is none.
#[test]
fn a_full_disk_leaves_no_cut_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    // Files may grow to 50 KB (ulimit counts 512-byte blocks): the summary files of five
    // requests fit (about 20 KB each), the page (about 90 KB) does not. Past the limit a
    // write fails with EFBIG (SIGXFSZ ignored), as on a full disk.
    let script = format!(
        "trap '' XFSZ; ulimit -f 100; exec '{}' profile -m m --tokenizer builtin --mock-server \
         --streaming --isl 8 --request-count 5 --artifact-dir '{}'",
        common::BIN,
        dir.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let stderr = stderr_text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("No HTML report"), "{stderr}");
    assert!(dir.join("profile_export_aiperf.json").is_file());
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(REPORT))
        .collect();
    assert!(left.is_empty(), "a cut page was left behind: {left:?}");
}
