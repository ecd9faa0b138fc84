//! Open-loop pacing: how close the achieved request rate and the send times come to the
//! schedule at 1,000 and 5,000 requests/sec. Runs the real `aiperf profile` (release)
//! against `aiperf mock-server --fast` and reads `load_pacing` from the JSON export.
//!
//! `cargo bench --bench pacing` (optional args: rates, e.g. `-- 1000 5000 10000`; and
//! `--seconds N` per rate, default 5). Without `--bench` (as `cargo test --benches` runs it)
//! a smoke run: 200 req/s for 0.5 s, with whatever build of `aiperf` cargo made.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_aiperf");

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let mut rates: Vec<f64> = Vec::new();
    let mut seconds = if quick { 0.5 } else { 5.0f64 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--seconds" {
            seconds = args
                .next()
                .and_then(|s| s.parse().ok())
                .expect("--seconds N");
        } else if let Ok(r) = a.parse() {
            rates.push(r);
        } // cargo passes --bench; ignore other flags
    }
    if rates.is_empty() {
        rates = if quick {
            vec![200.0]
        } else {
            vec![1000.0, 5000.0]
        };
    }

    let mut mock = Command::new(BIN)
        .args(["mock-server", "--port", "0", "--fast"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mock server");
    let mut line = String::new();
    BufReader::new(mock.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("mock address");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("mock url")
        .to_string();

    println!(
        "{:>8} {:>8} {:>8} {:>12} {:>9} {:>10} {:>10} {:>10} {:>7}",
        "mode",
        "target",
        "sends",
        "achieved",
        "error%",
        "lag p50us",
        "lag p99us",
        "lag maxus",
        "late%"
    );
    for rate in rates {
        for mode in ["constant", "poisson"] {
            let dir = tempfile::tempdir().unwrap();
            let count = (rate * seconds).round() as u64;
            let out = Command::new(BIN)
                .args([
                    "profile",
                    "--model",
                    "m",
                    "--tokenizer",
                    "builtin",
                    "--isl",
                    "10",
                ])
                .args(["--osl", "1", "--url", &url, "--random-seed", "1"])
                .args([
                    "--request-rate",
                    &rate.to_string(),
                    "--request-rate-mode",
                    mode,
                ])
                .args(["--request-count", &count.to_string()])
                .args(["--artifact-dir", dir.path().to_str().unwrap()])
                .output()
                .expect("run aiperf profile");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text =
                std::fs::read_to_string(dir.path().join("profile_export_aiperf.json")).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let p = &v["load_pacing"];
            let achieved = p["achieved_request_rate"].as_f64().unwrap();
            // Against the rate the drawn schedule implies (for Poisson it differs from the
            // target by chance), which is what the pacer is asked to reproduce.
            let scheduled = p["scheduled_request_rate"].as_f64().unwrap();
            let lag = |k: &str| p["send_lag"][k].as_f64().unwrap() * 1e3;
            println!(
                "{:>8} {:>8} {:>8} {:>12.2} {:>9.3} {:>10.1} {:>10.1} {:>10.1} {:>7.3}",
                mode,
                rate,
                p["scheduled_sends"],
                achieved,
                (achieved / scheduled - 1.0) * 100.0,
                lag("p50"),
                lag("p99"),
                lag("max"),
                p["late_send_share"].as_f64().unwrap() * 100.0
            );
        }
    }
    let _ = mock.kill();
    let _ = mock.wait();
}
