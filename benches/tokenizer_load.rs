//! Load time, memory and ids of a `tokenizer.json`: the `tokenizers` crate against our compact
//! byte-level BPE, first load (parsing the JSON) and later loads (from the cache file).
//!
//! `TOKENIZER_JSON=/path/to/tokenizer.json cargo bench --bench tokenizer_load` (defaults to
//! the small GPT-2 fixture). Each load runs in a fresh child process, so its resident
//! memory is its own: the figures are the median of `BENCH_ROUNDS` (5) children.
//! `cargo test --benches` runs one round on the fixture.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use aiperf::api::Tokenizer;

const MODE_VAR: &str = "TOKENIZER_LOAD_MODE";

/// `VmRSS` or `VmHWM` of this process, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// One load in this (child) process: prints `ms peak_delta_kib rss_delta_kib how`.
fn child(mode: &str, file: &Path, cache: &Path) {
    let before = status_kib("VmRSS:");
    let started = Instant::now();
    // Both kept alive until the memory is read.
    let (crate_one, ours, how) = match mode {
        "crate" => {
            let t = tokenizers::Tokenizer::from_file(file).expect("crate loads it");
            (Some(t), None, "tokenizers crate".to_string())
        }
        "compact" => {
            let t = Tokenizer::from_file_cached(file, Some(cache)).expect("loads");
            let how = t.how().unwrap_or("?").to_string();
            (None, Some(t), how)
        }
        other => panic!("unknown mode {other}"),
    };
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let peak = status_kib("VmHWM:").saturating_sub(before);
    let rss = status_kib("VmRSS:").saturating_sub(before);
    println!("{ms:.2} {peak} {rss} {how}");
    std::hint::black_box((crate_one, ours));
}

struct Load {
    ms: f64,
    peak_kib: u64,
    rss_kib: u64,
    how: String,
}

fn spawn(mode: &str, file: &Path, cache: &Path) -> Load {
    let out = Command::new(std::env::current_exe().unwrap())
        .env(MODE_VAR, mode)
        .env("TOKENIZER_JSON", file)
        .env("TOKENIZER_CACHE_DIR", cache)
        .output()
        .expect("run child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text.lines().last().expect("child prints a line");
    let mut parts = line.splitn(4, ' ');
    let mut next = || parts.next().expect("4 fields");
    Load {
        ms: next().parse().unwrap(),
        peak_kib: next().parse().unwrap(),
        rss_kib: next().parse().unwrap(),
        how: next().to_string(),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn report(label: &str, loads: &[Load]) {
    let ms = median(loads.iter().map(|l| l.ms).collect());
    let peak = median(loads.iter().map(|l| l.peak_kib as f64).collect()) / 1024.0;
    let rss = median(loads.iter().map(|l| l.rss_kib as f64).collect()) / 1024.0;
    println!(
        "{label:<22} {ms:>8.1} ms  peak +{peak:>5.1} MB  resident +{rss:>5.1} MB  ({})",
        loads[0].how
    );
}

/// Text the ids are compared on: prose, code, CJK, emoji, numbers, whitespace, specials.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "Hello world! It's 2024 and we've got 1,234,567 tokens.",
        "fn main() {\n    println!(\"{}\", 42);\n}\n\n",
        "日本語のテキスト、中文文本，한국어 문장. Русский текст. العربية",
        "🎉🚀👍🏽 👨‍👩‍👧‍👦   spaces\t\ttabs\r\nCRLF  ",
        "<|im_start|>user\nDescribe the image.<|im_end|>\n<|im_start|>assistant\n",
        "cafe\u{301} café naïve Zürich",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let words: Vec<&str> = (0..4000).map(aiperf::api::mock_word).collect();
    texts.push(words.join(" "));
    texts
}

fn main() {
    let file = std::env::var_os("TOKENIZER_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2/tokenizer.json")
        });
    if let Ok(mode) = std::env::var(MODE_VAR) {
        let cache = PathBuf::from(std::env::var_os("TOKENIZER_CACHE_DIR").expect("cache dir"));
        child(&mode, &file, &cache);
        return;
    }
    let full = std::env::args().any(|a| a == "--bench");
    let rounds: usize = if full {
        std::env::var("BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(5)
    } else {
        1
    };
    println!("{}: {rounds} round(s) per figure", file.display());

    let crate_loads: Vec<Load> = (0..rounds)
        .map(|_| spawn("crate", &file, Path::new("/nonexistent")))
        .collect();
    report("tokenizers crate", &crate_loads);
    let cold: Vec<Load> = (0..rounds)
        .map(|_| {
            // A fresh cache directory each time: the first load parses the JSON.
            let cache = tempfile::tempdir().unwrap();
            spawn("compact", &file, cache.path())
        })
        .collect();
    report("compact, first load", &cold);
    let cache = tempfile::tempdir().unwrap();
    spawn("compact", &file, cache.path());
    let warm: Vec<Load> = (0..rounds)
        .map(|_| spawn("compact", &file, cache.path()))
        .collect();
    report("compact, from cache", &warm);
    assert!(warm[0].how.contains("from cache"), "{}", warm[0].how);

    // Ids: the crate's against ours on the same texts.
    let theirs = tokenizers::Tokenizer::from_file(&file).unwrap();
    let ours = Tokenizer::from_file_cached(&file, Some(cache.path())).unwrap();
    let mut tokens = 0;
    for text in texts() {
        let want = theirs
            .encode(text.as_str(), false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(ours.encode(&text), want, "ids differ for {text:?}");
        tokens += want.len();
    }
    println!("ids identical on {} texts ({tokens} tokens)", texts().len());
}
