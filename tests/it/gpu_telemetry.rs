//! GPU telemetry from DCGM exporters: a small exporter in the test publishes two GPUs in
//! dcgm-exporter's format, with values that change per scrape, and `aiperf profile` runs
//! against the mock server; the JSONL, the summary JSON and CSV and the console are checked.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::raw_server::{After, RawServer, Reply};
use common::{BIN, MockChild, read_json, read_jsonl};
use serde_json::Value;

/// Energy added per scrape, mJ (1 kJ).
const ENERGY_STEP_MJ: f64 = 1e6;
/// GPU 0's counter at the first scrape, mJ.
const ENERGY_START_MJ: f64 = 5e9;

const GPU0: &str = "gpu=\"0\",UUID=\"GPU-afc3c15a-48a5-d669-0634-191c629f95fa\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"";
const GPU1: &str = "gpu=\"1\",UUID=\"GPU-03a8c3f1-7b2e-11ee-9d41-0242ac120002\",pci_bus_id=\"00000000:2A:00.0\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"";

/// Scrape `n` (from 0): GPU 0 draws 100, 200, 300 W in turn and its energy counter rises
/// by [`ENERGY_STEP_MJ`] per scrape; GPU 1 idles at 50 W.
fn exposition(n: u64) -> String {
    let power0 = 100.0 * (n % 3 + 1) as f64;
    let energy0 = ENERGY_START_MJ + n as f64 * ENERGY_STEP_MJ;
    let fields: [(&str, &str, &str, [f64; 2]); 6] = [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "gauge",
            "SM clock frequency (in MHz).",
            [1980.0, 345.0],
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "gauge",
            "GPU temperature (in C).",
            [40.0 + n as f64, 30.0],
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gauge",
            "Power draw (in W).",
            [power0, 50.0],
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            [energy0, 1e9],
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gauge",
            "GPU utilization (in %).",
            [90.0, 0.0],
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
            [10240.0, 512.0],
        ),
    ];
    let mut text = String::new();
    for (name, kind, help, values) in fields {
        text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        text.push_str(&format!("{name}{{{GPU0}}} {}\n", values[0]));
        text.push_str(&format!("{name}{{{GPU1}}} {}\n", values[1]));
    }
    text
}

fn dcgm_exporter() -> RawServer {
    let scrapes = AtomicU64::new(0);
    RawServer::start(move |req| {
        assert!(req.head.starts_with("get /metrics "), "{}", req.head);
        let body = exposition(scrapes.fetch_add(1, Ordering::SeqCst));
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        Reply::new(vec![head.into_bytes(), body.into_bytes()], After::KeepOpen)
    })
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    dir: std::path::PathBuf,
    elapsed: Duration,
    _tmp: tempfile::TempDir,
}

/// Runs a short profile (about 2 s: 8 requests of ~0.5 s, two at a time) against `mock`;
/// `defaults` replaces the default exporters.
fn profile(mock: &MockChild, defaults: Option<&str>, extra: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let mut cmd = std::process::Command::new(BIN);
    cmd.args([
        "profile",
        "-m",
        "mock-model",
        "--tokenizer",
        "builtin",
        "-u",
        &mock.url,
        "--streaming",
        "--request-count",
        "8",
        "--concurrency",
        "2",
        "--isl",
        "8",
        "--osl",
        "10",
        "--extra-inputs",
        "ignore_eos:true",
        "--artifact-dir",
        dir.to_str().unwrap(),
    ])
    .args(extra)
    .env("HF_HUB_OFFLINE", "1");
    match defaults {
        Some(d) => cmd.env("AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS", d),
        None => cmd.env_remove("AIPERF_GPU_DEFAULT_DCGM_ENDPOINTS"),
    };
    let started = Instant::now();
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
        elapsed: started.elapsed(),
        _tmp: tmp,
    }
}

fn slow_mock() -> MockChild {
    MockChild::spawn(&["--ttft", "100", "--itl", "40"])
}

/// `2026-12-03T16:40:12.123456+00:00` as ns since the epoch.
fn iso_ns(text: &str) -> u64 {
    let (date, time) = text.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let time = time.trim_end_matches("+00:00");
    let (hms, micros) = time.split_once('.').unwrap_or((time, "0"));
    let t: Vec<i64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    // Days since 1970-01-01 for a proleptic Gregorian date.
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2];
    secs as u64 * 1_000_000_000 + micros.parse::<u64>().unwrap() * 1_000
}

#[test]
fn telemetry_from_a_dcgm_exporter_reaches_every_output() {
    let exporter = dcgm_exporter();
    let mock = slow_mock();
    let host_port = exporter.url.trim_start_matches("http://").to_string();
    // A default exporter that refuses: scraped, but never shown.
    let run = profile(
        &mock,
        Some("http://127.0.0.1:1/metrics"),
        &["--gpu-telemetry", &host_port],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let scrapes = exporter.requests().len();
    assert!(scrapes >= 3, "{scrapes} scrapes");

    // One JSONL line per GPU per scrape, in AIPerf's units.
    let lines = read_jsonl(&run.dir.join("gpu_telemetry_export.jsonl"));
    let url = format!("{}/metrics", exporter.url);
    let gpu0: Vec<&Value> = lines.iter().filter(|l| l["gpu_index"] == 0).collect();
    let gpu1: Vec<&Value> = lines.iter().filter(|l| l["gpu_index"] == 1).collect();
    assert_eq!(gpu0.len(), scrapes, "{lines:?}");
    assert_eq!(gpu1.len(), scrapes);
    let first = gpu0[0];
    assert_eq!(first["telemetry_source_url"], url.as_str());
    assert_eq!(
        first["gpu_uuid"],
        "GPU-afc3c15a-48a5-d669-0634-191c629f95fa"
    );
    assert_eq!(first["gpu_model_name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(first["pci_bus_id"], "00000000:18:00.0");
    assert_eq!(first["device"], "nvidia0");
    assert_eq!(first["hostname"], "gpu-node-1");
    let data = &first["telemetry_data"];
    assert_eq!(data["nvidia_power_usage"], 100.0);
    assert_eq!(data["nvidia_energy_consumption"], 5.0); // 5e9 mJ
    assert!((data["nvidia_memory_used"].as_f64().unwrap() - 10.73741824).abs() < 1e-9);
    assert_eq!(data["nvidia_sm_clock"], 1980.0);
    let stamps: Vec<u64> = gpu0
        .iter()
        .map(|l| l["timestamp_ns"].as_u64().unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(now_ns - stamps[0] < 120_000_000_000, "wall-clock stamps");

    // telemetry_data in the summary JSON.
    let json = read_json(&run.dir.join("profile_export_aiperf.json"));
    let t = &json["telemetry_data"];
    assert_eq!(
        t["summary"]["endpoints_configured"],
        serde_json::json!([url])
    );
    assert_eq!(
        t["summary"]["endpoints_successful"],
        serde_json::json!([url])
    );
    let g0 = &t["endpoints"][&host_port]["gpus"]["gpu_0"];
    assert_eq!(g0["gpu_name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(g0["platform"], "nvidia");
    let power = &g0["metrics"]["nvidia_power_usage"];
    assert_eq!(power["unit"], "W");
    let avg = power["avg"].as_f64().unwrap();
    assert!((100.0..=300.0).contains(&avg), "{power}");
    assert!(power["min"].as_f64().unwrap() >= 100.0 && power["max"].as_f64().unwrap() <= 300.0);
    assert!(power["std"].as_f64().unwrap() > 0.0);
    let g1_power = &t["endpoints"][&host_port]["gpus"]["gpu_1"]["metrics"]["nvidia_power_usage"];
    assert_eq!(g1_power["avg"], 50.0);
    assert_eq!(g1_power["std"], 0.0);

    // The energy counter: its rise from the last sample before profiling to the last one.
    let window_start = iso_ns(t["summary"]["start_time"].as_str().unwrap());
    let energies: Vec<(u64, f64)> = gpu0
        .iter()
        .map(|l| {
            (
                l["timestamp_ns"].as_u64().unwrap(),
                l["telemetry_data"]["nvidia_energy_consumption"]
                    .as_f64()
                    .unwrap(),
            )
        })
        .collect();
    let first_in = energies
        .iter()
        .position(|(t, _)| *t >= window_start)
        .unwrap();
    let reference = energies[first_in.saturating_sub(1)].1;
    let expected = energies.last().unwrap().1 - reference;
    let energy = &g0["metrics"]["nvidia_energy_consumption"];
    assert_eq!(energy["unit"], "MJ");
    let got = energy["avg"].as_f64().unwrap();
    assert!(
        (got - expected).abs() < 1e-9,
        "{got} vs {expected}: {energies:?}"
    );
    assert!(got >= 2e-3, "at least two 1 kJ steps in ~2 s: {got}");
    assert!(
        energy.get("p50").is_none(),
        "a counter has only avg: {energy}"
    );

    // The CSV section after two empty rows.
    let csv = std::fs::read_to_string(run.dir.join("profile_export_aiperf.csv")).unwrap();
    let header = "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std,Hostname,Namespace,Pod Name";
    assert!(csv.contains(&format!("\r\n\r\n\r\n{header}\r\n")), "{csv}");
    let power_row = csv
        .lines()
        .find(|l| l.starts_with(&format!("{host_port},0,")) && l.contains("(W)"))
        .unwrap();
    let cells: Vec<&str> = power_row.split(',').collect();
    assert_eq!(
        &cells[..6],
        [
            host_port.as_str(),
            "0",
            "NVIDIA H100 80GB HBM3",
            "GPU-afc3c15a-48a5-d669-0634-191c629f95fa",
            "nvidia",
            "NVIDIA GPU Power Usage (W)"
        ]
    );
    assert_eq!(cells[6], format!("{avg:.2}"));
    assert_eq!(cells[9], "", "no sum");
    assert_eq!(&cells[20..], ["gpu-node-1", "", ""]);
    let energy_row = csv
        .lines()
        .find(|l| l.contains(",0,") && l.contains("NVIDIA Energy Consumption (MJ)"))
        .unwrap();
    assert_eq!(energy_row.split(',').nth(6).unwrap(), format!("{got:.2}"));

    // The console: banner, efficiency, one table per GPU; the quiet default is not listed.
    let out = &run.stdout;
    assert!(
        out.contains("NVIDIA AIPerf | GPU Telemetry Summary"),
        "{out}"
    );
    assert!(out.contains("1/1 telemetry sources reachable"), "{out}");
    assert!(out.contains(&format!("• {host_port} ✔")), "{out}");
    assert!(!out.contains("127.0.0.1:1 "), "{out}");
    assert!(out.contains(&format!("{host_port} | GPU 0 | NVIDIA H100 80GB HBM3")));
    assert!(out.contains(&format!("{host_port} | GPU 1 | NVIDIA H100 80GB HBM3")));
    // GPU 1's counter does not move.
    let joules = got * 1e6;
    let tokens = json["total_output_tokens"]["avg"].as_f64().unwrap();
    assert!(
        out.contains(&format!("Total GPU energy: {}", group(joules))),
        "{out}"
    );
    assert!(out.contains("Output tokens per joule:"), "{out}");
    assert!(
        out.contains(&format!(
            "Energy per output token: {} mJ/token",
            group(joules * 1e3 / tokens)
        )),
        "{out}"
    );
    let gpu0_table = out.split("| GPU 1 |").next().unwrap();
    let row = gpu0_table
        .lines()
        .find(|l| l.contains("NVIDIA GPU Power Usage (W)"))
        .unwrap();
    assert!(row.contains(&format!("{avg:.2}")), "{out}");
    assert!(out.contains("GPU Telemetry: "), "{out}");
    assert!(!run.stderr.contains("127.0.0.1:1"), "{}", run.stderr);
}

/// Python's `f"{v:,.2f}"` for the values this test sees.
fn group(v: f64) -> String {
    let fixed = format!("{v:.2}");
    let (int, frac) = fixed.split_once('.').unwrap();
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out}.{frac}")
}

#[test]
fn no_exporter_anywhere_leaves_no_trace_and_a_named_one_is_reported() {
    let mock = MockChild::spawn(&["--fast"]);
    // The real defaults (localhost:9400 and :9401): nothing listens here.
    let run = profile(&mock, None, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stdout.contains("GPU"), "{}", run.stdout);
    assert!(!run.stderr.contains("GPU"), "{}", run.stderr);
    assert!(!run.dir.join("gpu_telemetry_export.jsonl").exists());
    let json = read_json(&run.dir.join("profile_export_aiperf.json"));
    assert!(json.get("telemetry_data").is_none());
    let csv = std::fs::read_to_string(run.dir.join("profile_export_aiperf.csv")).unwrap();
    assert!(!csv.contains("GPU_Index"));

    // An exporter the user named that does not answer: one warning, no table.
    let run = profile(&mock, Some(""), &["--gpu-telemetry", "http://127.0.0.1:1"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stderr
            .matches("GPU telemetry: no data from http://127.0.0.1:1/metrics")
            .count(),
        1,
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("GPU Telemetry Summary"));
    assert!(!run.dir.join("gpu_telemetry_export.jsonl").exists());

    // One that answers with other metrics: a warning that says so.
    let other = RawServer::start(|_| {
        let body = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n";
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
        Reply::new(
            vec![head.into_bytes(), body.as_bytes().to_vec()],
            After::KeepOpen,
        )
    });
    let run = profile(&mock, Some(""), &["--gpu-telemetry", &other.url]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "GPU telemetry: {}/metrics answered but published no DCGM GPU metrics",
            other.url
        )),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("GPU Telemetry Summary"));
}

#[test]
fn no_gpu_telemetry_scrapes_nothing() {
    let exporter = dcgm_exporter();
    let mock = MockChild::spawn(&["--fast"]);
    let defaults = format!("{}/metrics", exporter.url);
    let run = profile(&mock, Some(&defaults), &["--no-gpu-telemetry"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(exporter.requests().len(), 0);
    assert!(!run.dir.join("gpu_telemetry_export.jsonl").exists());
    assert!(!run.stdout.contains("GPU"));

    // The same defaults without the flag are scraped, under the prefix's file name.
    let run = profile(&mock, Some(&defaults), &["--profile-export-prefix", "run7"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!exporter.requests().is_empty());
    assert!(!read_jsonl(&run.dir.join("run7_gpu_telemetry.jsonl")).is_empty());
    assert!(run.stdout.contains("GPU Telemetry Summary"));
}

#[test]
fn an_exporter_that_never_answers_delays_the_end_by_one_timeout_at_most() {
    // Accepts, reads the request and never answers (for far longer than the run).
    let black_hole = RawServer::start(move |_| {
        std::thread::sleep(Duration::from_secs(60));
        Reply::new(Vec::new(), After::Close)
    });
    let mock = MockChild::spawn(&["--fast"]);
    let defaults = format!("{}/metrics", black_hole.url);
    let baseline = profile(&mock, Some(""), &[]);
    assert_eq!(baseline.code, Some(0), "{}", baseline.stderr);
    let run = profile(&mock, Some(&defaults), &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!black_hole.requests().is_empty());
    // The scrape timeout is 2 s; allow a loaded machine 3 s more.
    let extra = run.elapsed.saturating_sub(baseline.elapsed);
    assert!(extra < Duration::from_secs(5), "{extra:?} longer");
    assert!(!run.stdout.contains("GPU"), "{}", run.stdout);
    assert!(!run.stderr.contains("GPU"), "{}", run.stderr);
}

#[test]
fn unsupported_sources_are_refused_by_name() {
    for (args, says) in [
        (
            vec!["--gpu-telemetry", "pynvml"],
            "--gpu-telemetry pynvml: reading GPUs locally is not supported by this build",
        ),
        (
            vec!["--gpu-telemetry", "dashboard"],
            "--gpu-telemetry dashboard: the live dashboard is not supported by this build",
        ),
        (
            vec!["--gpu-telemetry", "my_metrics.csv"],
            "--gpu-telemetry my_metrics.csv: a custom DCGM metric list is not supported",
        ),
        (
            vec!["--gpu-telemetry", "h:9400", "--no-gpu-telemetry"],
            "--no-gpu-telemetry cannot be combined with --gpu-telemetry",
        ),
    ] {
        let mut all = vec!["-m", "m"];
        all.extend(args);
        let out = common::run_profile(&all);
        let stderr = common::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

#[test]
fn an_energy_counter_that_restarts_is_counted_on_with_one_warning() {
    // GPU 0's energy counter starts again from zero at the fourth scrape (a GPU reset): every
    // scrape still adds 1 kJ.
    let scrapes = AtomicU64::new(0);
    let exporter = RawServer::start(move |_| {
        let n = scrapes.fetch_add(1, Ordering::SeqCst);
        let energy = if n < 3 {
            ENERGY_START_MJ + n as f64 * ENERGY_STEP_MJ
        } else {
            (n - 2) as f64 * ENERGY_STEP_MJ
        };
        let body = format!(
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\nDCGM_FI_DEV_POWER_USAGE{{{GPU0}}} {}\n\
             # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
             DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU0}}} {energy}\n",
            200 + n
        );
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        Reply::new(vec![head.into_bytes(), body.into_bytes()], After::KeepOpen)
    });
    let mock = slow_mock();
    let run = profile(&mock, Some(""), &["--gpu-telemetry", &exporter.url]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("went down"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stderr);
    assert!(
        lines[0].contains("nvidia_energy_consumption"),
        "{}",
        lines[0]
    );
    let summary = read_json(&run.dir.join("profile_export_aiperf.json"));
    let energy = summary["telemetry_data"]["endpoints"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["gpus"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["metrics"]["nvidia_energy_consumption"]["avg"]
        .as_f64();
    // At least the kilojoules (MJ here) of the scrapes in the window, each counted once.
    assert!(energy.is_some_and(|e| e >= 0.002), "{summary}");
    assert!(
        !run.stdout.contains("Total GPU energy: 0.00 J"),
        "{}",
        run.stdout
    );
}
