//! Golden files of the scraped-metrics exports: a recorded sequence of `/metrics` and DCGM
//! expositions (made here, deterministic) with fixed scrape times and phase windows, run
//! through the whole summary and export path. The files in `tests/fixtures/scrape-golden/`
//! hold what the exports must be; `AIPERF_BLESS=1 cargo test --lib scrape_golden` rewrites
//! them after an intended change.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::json;

use crate::clock::Clock;
use crate::metrics::MetricsSummary;
use crate::metrics::server_metrics::Window;

const MS: u64 = 1_000_000;
/// The wall clock of run-clock 0 in the golden files.
const ANCHOR_WALL_NS: u64 = 1_780_000_000_000_000_000;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scrape-golden")
}

/// Compares `text` with the golden file `name` (or writes it with `AIPERF_BLESS=1`).
fn check(name: &str, text: &str) {
    let path = golden_dir().join(name);
    if std::env::var("AIPERF_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (AIPERF_BLESS=1 writes it)", path.display()));
    if want != text {
        let line = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(text.lines().count()));
        panic!(
            "{name} differs from its golden file at line {}:\n  golden: {:?}\n  now:    {:?}",
            line + 1,
            want.lines().nth(line),
            text.lines().nth(line)
        );
    }
}

/// One scrape: when it was sent, when its first byte and its end came (run-clock ns), and
/// the exposition it returned.
pub(crate) struct Recorded {
    pub sent_ns: u64,
    pub first_byte_ns: u64,
    pub done_ns: u64,
    pub text: String,
}

/// A scrape whose first byte came 5 ms after `ms` (so the boundary scrapes at 245 and 645
/// fall exactly on the phase starts).
fn at(ms: u64, text: String) -> Recorded {
    let first_byte_ns = (ms + 5) * MS;
    Recorded {
        sent_ns: first_byte_ns - 3 * MS / 10,
        first_byte_ns,
        done_ns: first_byte_ns + MS / 5 + ms % 7 * 1000,
        text,
    }
}

/// A vLLM-shaped exposition at step `k`: gauges (whole and fractional), counters, two
/// histograms with an `engine` label, an info gauge, a summary, an untyped sample, an
/// OpenMetrics `_created` line and a family that appears half way.
fn vllm(k: u64) -> String {
    let mut t = String::new();
    let l = "engine=\"0\",model_name=\"m\"";
    let _ = writeln!(
        t,
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{l}}} {}",
        k % 5
    );
    let _ = writeln!(
        t,
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{l}}} {}",
        0.013 * k as f64 + 0.001
    );
    let _ = writeln!(
        t,
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{l}}} {}",
        (k * 7) % 3
    );
    let _ = writeln!(
        t,
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{l}}} {}.0\n\
         vllm:prompt_tokens_created{{{l}}} 1.7e9",
        100 * k * k
    );
    let _ = writeln!(
        t,
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{l}}} {}.0",
        37 * k
    );
    for (name, help, scale) in [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            1.0,
        ),
        (
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            10.0,
        ),
    ] {
        let _ = writeln!(t, "# HELP {name} {help}\n# TYPE {name} histogram");
        let bounds = [0.01, 0.05, 0.1, 0.5];
        let mut cum = 0;
        for (i, le) in bounds.iter().enumerate() {
            cum += k * (i as u64 + 1) + (k * k) % (i as u64 + 2);
            let _ = writeln!(t, "{name}_bucket{{{l},le=\"{}\"}} {cum}.0", le * scale);
        }
        cum += k / 3;
        let _ = writeln!(t, "{name}_bucket{{{l},le=\"+Inf\"}} {cum}.0");
        let _ = writeln!(t, "{name}_sum{{{l}}} {}", cum as f64 * 0.031 * scale);
        let _ = writeln!(t, "{name}_count{{{l}}} {cum}.0");
    }
    let _ = writeln!(
        t,
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\"}} 1.0"
    );
    if k >= 8 {
        let _ = writeln!(
            t,
            "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n\
             # TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{{{l}}} {}.0",
            k - 8
        );
    }
    let _ = writeln!(
        t,
        "# HELP rpc_latency_seconds RPC latency.\n# TYPE rpc_latency_seconds summary\n\
         rpc_latency_seconds{{quantile=\"0.5\"}} 0.2\nrpc_latency_seconds_sum {k}\n\
         rpc_latency_seconds_count {k}"
    );
    let _ = writeln!(t, "process_open_fds {}", 40 + k % 3);
    let _ = writeln!(
        t,
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9"
    );
    t
}

/// An SGLang-shaped exposition that repeats itself every other step (a server that
/// refreshes its values slower than it is scraped).
fn sglang(k: u64) -> String {
    let k = k / 2;
    format!(
        "# HELP sglang:num_running_reqs The number of running requests.\n\
         # TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{model_name=\"m\"}} {}\n\
         # HELP sglang:token_usage The token usage.\n# TYPE sglang:token_usage gauge\n\
         sglang:token_usage{{model_name=\"m\"}} {}\n\
         # HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n\
         # TYPE sglang:prompt_tokens_total counter\n\
         sglang:prompt_tokens_total{{model_name=\"m\"}} {}.0\n",
        k % 4,
        k as f64 / 64.0,
        k * 50
    )
}

/// The scrapes of the two endpoints: every 100 ms from 0 to 1.5 s, and a boundary scrape
/// just before each phase starts.
pub(crate) fn server_sequence() -> Vec<(String, Vec<Recorded>)> {
    let times: Vec<u64> = {
        let mut t: Vec<u64> = (0..=15).map(|i| i * 100).collect();
        t.extend([245, 645]);
        t.sort_unstable();
        t
    };
    let seq = |f: fn(u64) -> String| {
        times
            .iter()
            .enumerate()
            .map(|(k, ms)| at(*ms, f(k as u64)))
            .collect::<Vec<_>>()
    };
    vec![
        ("http://vllm:8000/metrics".to_string(), seq(vllm)),
        ("http://sglang:30000/metrics".to_string(), seq(sglang)),
    ]
}

pub(crate) const WARMUP: Window = Window {
    start_ns: 250 * MS,
    end_ns: 640 * MS,
};
pub(crate) const PROFILING: Window = Window {
    start_ns: 650 * MS,
    end_ns: 1310 * MS,
};

/// A DCGM exposition of two GPUs at step `k`, repeating every third step (the exporter's
/// refresh is slower than the scrapes).
fn dcgm(k: u64) -> String {
    let k = k / 3 * 3;
    let mut t = String::new();
    for (name, kind, help) in [
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
        ),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
        ),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ] {
        let _ = writeln!(t, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for gpu in 0..2u64 {
            let labels = format!(
                "gpu=\"{gpu}\",UUID=\"GPU-{gpu}abc\",pci_bus_id=\"00000000:0{gpu}:00.0\",\
                 device=\"nvidia{gpu}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node1\""
            );
            let v = match name {
                "DCGM_FI_DEV_POWER_USAGE" => 100.0 + 17.5 * k as f64 + gpu as f64 * 3.25,
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => (1_000_000 + 150_000 * k * k) as f64,
                "DCGM_FI_DEV_GPU_UTIL" => ((k * 13 + gpu * 5) % 100) as f64,
                "DCGM_FI_DEV_FB_USED" => (40_000 + 512 * k) as f64,
                _ => (40 + k % 9 + gpu) as f64,
            };
            let _ = writeln!(t, "{name}{{{labels}}} {v}");
        }
    }
    t
}

pub(crate) fn gpu_sequence() -> Vec<(String, Vec<Recorded>)> {
    let seq = (0..=15).map(|k| at(k * 100, dcgm(k))).collect();
    vec![("http://node1:9400/metrics".to_string(), seq)]
}

fn fixed_clock() -> Clock {
    Clock::fixed(ANCHOR_WALL_NS)
}

fn empty_client_summary() -> MetricsSummary {
    MetricsSummary {
        results: Vec::new(),
        error_summary: Vec::new(),
        request_count: 0,
        error_request_count: 0,
        benchmark_duration_ns: 0,
        osl_mismatch_count: 0,
        osl_mismatch_examples: Vec::new(),
        timeslices: Vec::new(),
    }
}

#[test]
fn server_metrics_exports_of_a_recorded_sequence_match_the_golden_files() {
    let out = super::scrape_golden_driver::server_exports(
        &server_sequence(),
        Some(WARMUP),
        PROFILING,
        fixed_clock(),
        json!({"endpoint": {"urls": ["http://vllm:8000"]}}),
        &empty_client_summary(),
    );
    check("server_metrics_export.json", &out.json);
    check("server_metrics_export.csv", &out.csv);
    check("server_metrics_export.jsonl", &out.jsonl);
    check("server_metrics_console.txt", &out.console);
}

#[test]
fn gpu_telemetry_exports_of_a_recorded_sequence_match_the_golden_files() {
    let out = super::scrape_golden_driver::gpu_exports(
        &gpu_sequence(),
        (PROFILING.start_ns, PROFILING.end_ns),
        fixed_clock(),
    );
    check("gpu_telemetry_export.jsonl", &out.jsonl);
    check("gpu_telemetry_data.json", &out.json);
    check("gpu_telemetry.csv", &out.csv);
    check("gpu_telemetry_console.txt", &out.console);
}
