//! `--image-source assets|<directory>` end to end: the real `aiperf` binary against the real
//! mock server, whose image accounting (decoded image headers) confirms the sizes that arrived.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{read_served, run_profile as profile, stderr_text as stderr};
use serde_json::Value;

/// Synthetic vision args at `url`, `n` requests, images of `w` x `h`.
fn args<'a>(url: &'a str, dir: &'a str, n: &'a str, w: &'a str, h: &'a str) -> Vec<&'a str> {
    vec![
        "--model",
        "Qwen/Qwen2-VL-2B-Instruct",
        "--url",
        url,
        "--image-width-mean",
        w,
        "--image-height-mean",
        h,
        "--synthetic-input-tokens-mean",
        "20",
        "--output-tokens-mean",
        "5",
        "--request-count",
        n,
        "--concurrency",
        "2",
        "--tokenizer",
        "builtin",
        "--random-seed",
        "7",
        "--artifact-dir",
        dir,
    ]
}

/// Runs a profile against a fresh recording mock; returns the output and the server records.
fn run_recorded(
    extra: &[&str],
    n: &str,
    w: &str,
    h: &str,
) -> (Output, Vec<Value>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("server.jsonl");
    let mock = common::MockChild::spawn(&["--fast", "--record-requests", rec.to_str().unwrap()]);
    let url = format!("http://{}", mock.addr);
    let dir = tmp.path().join("run");
    let mut a = args(&url, dir.to_str().unwrap(), n, w, h);
    a.extend_from_slice(extra);
    let out = profile(&a);
    mock.terminate();
    let server = read_served(&rec);
    (out, server, tmp)
}

fn write_png(path: &Path, w: u32, h: u32) {
    let pixels = aiperf::api::noise_rgb(w, h, 3);
    let bytes = aiperf::api::encode_rgb(&pixels, w, h, aiperf::api::ImageEncoding::Png).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn assets_arrive_at_the_asked_size_and_are_smaller_than_noise() {
    let (out, server, tmp) = run_recorded(
        &["--image-source", "assets", "--image-format", "jpeg"],
        "6",
        "320",
        "240",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.len(), 6);
    for s in &server {
        assert_eq!(s["image_sizes"], serde_json::json!([[320, 240]]), "{s}");
        assert_eq!(
            s["image_tokens"].as_u64(),
            Some(aiperf::api::qwen2_vl_image_tokens(320, 240))
        );
    }
    let assets_inputs = std::fs::metadata(tmp.path().join("run/inputs.json"))
        .unwrap()
        .len();

    let (out, _, noise_tmp) = run_recorded(&["--image-format", "jpeg"], "6", "320", "240");
    assert!(out.status.success(), "{}", stderr(&out));
    let noise_inputs = std::fs::metadata(noise_tmp.path().join("run/inputs.json"))
        .unwrap()
        .len();
    assert!(
        assets_inputs * 2 < noise_inputs,
        "photos {assets_inputs} B vs noise {noise_inputs} B"
    );
}

#[test]
fn directory_with_a_corrupt_file_skips_it_with_a_warning() {
    let images = tempfile::tempdir().unwrap();
    write_png(&images.path().join("a.png"), 64, 48);
    std::fs::write(images.path().join("b_corrupt.jpg"), b"\xFF\xD8 truncated").unwrap();
    write_png(&images.path().join("c.png"), 30, 90);
    std::fs::write(images.path().join("readme.txt"), "not an image").unwrap();
    let dir = images.path().to_str().unwrap();
    let (out, server, tmp) = run_recorded(
        &[
            "--image-source",
            dir,
            "--image-source-sampling",
            "sequential-cycle",
        ],
        "5",
        "100",
        "60",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(tmp.path().join("run/logs/aiperf.log")).unwrap();
    assert!(
        log.contains("Skipping image 'b_corrupt.jpg'") && log.contains("cannot decode"),
        "{log}"
    );
    assert_eq!(server.len(), 5);
    for s in &server {
        assert_eq!(s["image_sizes"], serde_json::json!([[100, 60]]), "{s}");
        assert!(s["error"].is_null(), "{s}");
    }
}

#[test]
fn same_seed_gives_the_same_bodies() {
    let images = tempfile::tempdir().unwrap();
    for (i, name) in ["x.png", "y.png", "z.png"].iter().enumerate() {
        write_png(&images.path().join(name), 20 + i as u32 * 10, 20);
    }
    let dir = images.path().to_str().unwrap();
    let extra = [
        "--image-source",
        dir,
        "--image-source-sampling",
        "shuffle-cycle",
    ];
    let (a, _, ta) = run_recorded(&extra, "4", "32", "32");
    let (b, _, tb) = run_recorded(&extra, "4", "32", "32");
    assert!(a.status.success() && b.status.success());
    let ia = std::fs::read_to_string(ta.path().join("run/inputs.json")).unwrap();
    let ib = std::fs::read_to_string(tb.path().join("run/inputs.json")).unwrap();
    // Conversation ids are seeded too, so the whole file is identical.
    assert_eq!(ia, ib);
}

#[test]
fn bad_image_sources_exit_2_before_sending() {
    let empty = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let run = run.to_str().unwrap();
    // Nothing listens here: the run must stop before connecting.
    let url = "http://127.0.0.1:9";

    let mut a = args(url, run, "2", "64", "64");
    a.extend_from_slice(&["--image-source", empty.path().to_str().unwrap()]);
    let out = profile(&a);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "error: --image-source: no image files (png, jpg, jpeg, webp, gif, bmp) in '{}'",
            empty.path().display()
        )),
        "{}",
        stderr(&out)
    );

    let missing = empty.path().join("missing");
    let mut a = args(url, run, "2", "64", "64");
    a.extend_from_slice(&["--image-source", missing.to_str().unwrap()]);
    let out = profile(&a);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!(
            "error: --image-source: '{}' is not 'noise', 'assets' or an existing directory",
            missing.display()
        )),
        "{}",
        stderr(&out)
    );

    let mut a = args(url, run, "2", "64", "64");
    a.extend_from_slice(&["--image-source-sampling", "shuffle-cycle"]);
    let out = profile(&a);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error: --image-source-sampling: only random-with-replacement applies to --image-source noise"),
        "{}",
        stderr(&out)
    );
}
