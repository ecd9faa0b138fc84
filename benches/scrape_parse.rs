//! Cost of reading one Prometheus exposition (`scrape::parse`), the work each `/metrics` or
//! DCGM scrape does beside the load: vLLM-shaped (1,000 series, mostly histogram buckets with
//! an `engine` label) and N distinct gauges (one label set each, as one series per adapter),
//! against the reference of scanning the same text's lines once in the same run.
//!
//! `BENCH_ROUNDS` (default 7) rounds per shape; the best round is the figure on a busy
//! machine, the median beside it. Without `--bench` (the smoke mode CI runs): one round of
//! the smaller shapes, checking the series counts.
//!
//! Run: `cargo bench --bench scrape_parse`

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use aiperf::api::parse_exposition;

/// vLLM-shaped: `engines` engines, each with 8 histograms (18 buckets, sum and count: 20
/// Prometheus series, one parsed series) and 6 gauges. Returns the text and the parsed
/// series count.
fn vllm(engines: usize) -> (String, usize) {
    let mut t = String::new();
    let mut series = 0;
    for h in 0..8 {
        let name = format!("vllm:histogram_{h}_seconds");
        let _ = writeln!(t, "# HELP {name} A histogram.\n# TYPE {name} histogram");
        for e in 0..engines {
            let l = format!("engine=\"{e}\",model_name=\"Qwen/Qwen2-VL-2B-Instruct\"");
            for b in 0..17 {
                let _ = writeln!(
                    t,
                    "{name}_bucket{{{l},le=\"{}\"}} {}.0",
                    0.001 * (1 << b) as f64,
                    b * 7 + e
                );
            }
            let _ = writeln!(
                t,
                "{name}_bucket{{{l},le=\"+Inf\"}} 999.0\n{name}_sum{{{l}}} 12.5\n{name}_count{{{l}}} 999.0"
            );
            series += 1;
        }
    }
    for g in 0..6 {
        let name = format!("vllm:gauge_{g}");
        let _ = writeln!(t, "# HELP {name} A gauge.\n# TYPE {name} gauge");
        for e in 0..engines {
            let _ = writeln!(
                t,
                "{name}{{engine=\"{e}\",model_name=\"m\"}} {}",
                0.25 * e as f64
            );
            series += 1;
        }
    }
    (t, series)
}

/// `n` gauges of one family, one label set each.
fn gauges(n: usize) -> (String, usize) {
    let mut t = String::from(
        "# HELP adapter_requests Requests per adapter.\n# TYPE adapter_requests gauge\n",
    );
    for i in 0..n {
        let _ = writeln!(
            t,
            "adapter_requests{{adapter=\"lora-{i:05}\",model_name=\"m\"}} {}",
            i % 13
        );
    }
    (t, n)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let rounds: usize = if full {
        std::env::var("BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(7)
    } else {
        1
    };
    let mut shapes = vec![
        ("vLLM-shaped, 6 engines (996 Prometheus series)", vllm(6)),
        ("1,000 gauges", gauges(1_000)),
    ];
    if full {
        shapes.extend([
            ("5,000 gauges", gauges(5_000)),
            ("10,000 gauges", gauges(10_000)),
            ("20,000 gauges", gauges(20_000)),
        ]);
    }
    for (label, (text, series)) in shapes {
        let (mut parse, mut scan) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t0 = Instant::now();
            let families = black_box(parse_exposition(black_box(&text)));
            parse.push(t0.elapsed());
            let got: usize = families.iter().map(|f| f.series.len()).sum();
            assert_eq!(got, series, "{label}: series parsed");
            let t0 = Instant::now();
            black_box(black_box(&text).lines().map(str::len).sum::<usize>());
            scan.push(t0.elapsed());
        }
        let best = |v: &[Duration]| *v.iter().min().unwrap();
        println!(
            "{label}: {series} series, {} KB: parse best {:.2} ms (median {:.2}); line scan {:.3} ms; ratio {:.0}",
            text.len() / 1024,
            best(&parse).as_secs_f64() * 1e3,
            median(parse.clone()).as_secs_f64() * 1e3,
            best(&scan).as_secs_f64() * 1e3,
            best(&parse).as_secs_f64() / best(&scan).as_secs_f64()
        );
    }
}
