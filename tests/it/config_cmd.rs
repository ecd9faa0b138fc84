//! `aiperf config init|validate`: every template loads (validate, and a short profile run
//! against the mock), and a bad file gets one line per error with its path in the file.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{BIN, MockChild};

fn aiperf(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn template_names() -> Vec<String> {
    let out = aiperf(&["config", "init", "--list"]);
    assert_eq!(out.status.code(), Some(0));
    text(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn the_templates_are_listed_and_searched() {
    let names = template_names();
    assert_eq!(
        names,
        [
            "minimal",
            "warmup_profiling",
            "latency_test",
            "multimodal_vision"
        ]
    );
    let out = aiperf(&["config", "init", "--list", "--search", "IMAGES"]);
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).starts_with("multimodal_vision "));
}

#[test]
fn every_template_validates_and_runs_against_the_mock() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    for name in template_names() {
        let file = dir.path().join(format!("{name}.yaml"));
        let out = aiperf(&[
            "config",
            "init",
            "--template",
            &name,
            "--model",
            "mock-model",
            "--url",
            &mock.url,
            "-o",
            file.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        let yaml = std::fs::read_to_string(&file).unwrap();
        assert!(yaml.contains("model: \"mock-model\""), "{name}: {yaml}");
        assert!(yaml.starts_with(&format!("# @template {name}\n")), "{name}");

        let out = aiperf(&["config", "validate", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains(": OK"), "{name}");

        // The whole template as profile reads it, with a small run on the command line.
        let artifacts = dir.path().join(format!("out_{name}"));
        let out = aiperf(&[
            "profile",
            "--config",
            file.to_str().unwrap(),
            "--request-count",
            "4",
            "--warmup-request-count",
            "1",
            "--tokenizer",
            "builtin",
            "--ui",
            "none",
            "--artifact-dir",
            artifacts.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        let summary: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(artifacts.join("profile_export_aiperf.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            summary["request_count"]["avg"], 4.0,
            "{name}: {}",
            summary["request_count"]
        );
        if name == "multimodal_vision" {
            // One 512x512 JPEG per request, as the template says.
            assert_eq!(summary["num_images"]["avg"], 1.0, "{name}");
            let images = &summary["input_config"]["datasets"][0]["images"];
            assert_eq!(images["format"], "jpeg", "{images}");
            assert_eq!(images["width"]["mean"], 512.0, "{images}");
        }
    }
}

#[test]
fn init_refuses_unknown_templates_and_existing_files() {
    let out = aiperf(&["config", "init", "--template", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("--template nope: no such template; the templates are minimal, "),
        "{}",
        text(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.yaml");
    std::fs::write(&file, "keep me").unwrap();
    let out = aiperf(&["config", "init", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not overwritten"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // Without --output the template goes to stdout.
    let out = aiperf(&["config", "init"]);
    assert!(text(&out.stdout).starts_with("# @template minimal\n"));
}

fn validate(dir: &Path, yaml: &str) -> (Option<i32>, String, String) {
    let file = dir.join("c.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = aiperf(&["config", "validate", file.to_str().unwrap()]);
    let strip = |s: String| s.replace(&file.display().to_string(), "FILE");
    (
        out.status.code(),
        strip(text(&out.stdout)),
        strip(text(&out.stderr)),
    )
}

#[test]
fn validate_reports_every_error_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = validate(
        dir.path(),
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint: {url: http://h:1, streamin: true}\n  dataset:\n    entries: many\n    prompts: {isl: 100}\n  phases:\n    - {name: profiling, type: concurrency, concurrency: four, requests: 10, rate: fast}\n",
    );
    assert_eq!(code, Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 5, "{stderr}");
    assert!(
        lines[0].starts_with("error: FILE: benchmark.endpoint.streamin: unknown or unsupported key; this build reads "),
        "{stderr}"
    );
    assert!(
        lines
            .contains(&"error: FILE: benchmark.dataset.entries: expected an integer, got \"many\""),
        "{stderr}"
    );
    assert!(
        lines.contains(
            &"error: FILE: benchmark.phases.0.concurrency: expected an integer, got \"four\""
        ),
        "{stderr}"
    );
    assert!(
        lines.contains(&"error: FILE: benchmark.phases.0.rate: expected a number, got \"fast\""),
        "{stderr}"
    );
    assert_eq!(lines[4], "FILE: 4 errors");

    // A value of the right type that its flag refuses: the flag's own reason.
    let (code, _, stderr) = validate(
        dir.path(),
        "benchmark:\n  model: m\n  endpoint: {type: chatt}\n",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: FILE: benchmark.endpoint.type: invalid value 'chatt' for '--endpoint-type"
        ),
        "{stderr}"
    );

    // No model.
    let (code, _, stderr) = validate(dir.path(), "benchmark:\n  endpoint: {url: http://h:1}\n");
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("error: FILE: benchmark.model: missing"),
        "{stderr}"
    );

    // Not YAML.
    let (code, _, stderr) = validate(dir.path(), "benchmark: [1\n");
    assert_eq!(code, Some(1));
    assert!(stderr.contains("not valid YAML"), "{stderr}");

    // Settings that are each fine but not together: profile's own check.
    let (code, _, stderr) = validate(
        dir.path(),
        "benchmark:\n  model: m\n  warmup: {requests: 5, duration: 3}\n",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: FILE: benchmark.warmup.duration: --warmup-duration and --warmup-request-count both end the warmup"),
        "{stderr}"
    );

    // A good file.
    let (code, stdout, _) = validate(
        dir.path(),
        "benchmark:\n  model: m\n  phases: {concurrency: 2}\n",
    );
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout,
        "FILE: OK: `aiperf profile --config FILE` reads every setting\n"
    );

    // A file that cannot be read.
    let out = aiperf(&["config", "validate", "/no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: /no/such/file.yaml: cannot read it"));
}
