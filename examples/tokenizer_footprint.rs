//! Resident memory and build time of the builtin o200k_base tokenizer, against tiktoken-rs's
//! own o200k_base (the encoder the builtin one replaced). One tokenizer per process, so each
//! figure starts from the same baseline:
//!
//! ```sh
//! cargo run --release --example tokenizer_footprint -- builtin
//! cargo run --release --example tokenizer_footprint -- tiktoken
//! cargo run --release --example tokenizer_footprint -- regex     # the pre-tokenizer alone
//! ```

use std::time::Instant;

/// `VmRSS` and `VmHWM` (peak) of this process, in kB.
fn rss_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "builtin".into());
    let text = "The quick brown fox jumps over the lazy dog. 12345 héllo wörld 🎉\n\n  code();";
    let (rss_before, _) = rss_kb();
    let started = Instant::now();
    let ids = match which.as_str() {
        "builtin" => {
            let bpe = aiperf::api::builtin_bpe();
            let built = started.elapsed();
            let ids = bpe.encode_ordinary(text);
            println!("build {:.1} ms", built.as_secs_f64() * 1e3);
            ids
        }
        "tiktoken" => {
            let bpe = tiktoken_rs::o200k_base_singleton();
            let built = started.elapsed();
            let ids = bpe.encode_ordinary(text);
            println!("build {:.1} ms", built.as_secs_f64() * 1e3);
            ids
        }
        "regex" => {
            let re = fancy_regex::Regex::new(aiperf::api::O200K_PATTERN).unwrap();
            let built = started.elapsed();
            let n = re.find_iter(text).count();
            println!("build {:.1} ms", built.as_secs_f64() * 1e3);
            vec![0; n]
        }
        other => panic!("unknown tokenizer {other:?}: builtin or tiktoken"),
    };
    let (rss_after, peak) = rss_kb();
    println!(
        "{which}: {} tokens; RSS before {:.1} MB, after {:.1} MB (+{:.1} MB), peak {:.1} MB",
        ids.len(),
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        (rss_after as f64 - rss_before as f64) / 1024.0,
        peak as f64 / 1024.0
    );
}
