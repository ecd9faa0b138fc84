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

/// A config file with a sweep: `config expand` lists its points, and `profile --config`
/// runs exactly those, each in the directory `expand` named.
#[test]
fn expand_lists_the_points_profile_runs() {
    let mock = MockChild::spawn(&["--fast"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.yaml");
    let artifacts = dir.path().join("out");
    let yaml = format!(
        "schemaVersion: \"2.0\"\nrandomSeed: 3\nsweep:\n  type: grid\n  parameters:\n    concurrency: [1, 2]\n    datasets.default.prompts.isl: [16, 32]\nbenchmark:\n  model: mock-model\n  endpoint: {{url: \"{}\", type: chat}}\n  tokenizer: {{name: builtin}}\n  dataset:\n    type: synthetic\n    prompts: {{isl: 512, osl: 4}}\n  phases:\n    - {{name: profiling, type: concurrency, concurrency: 32, requests: 3}}\n  artifacts: {{dir: \"{}\"}}\n",
        mock.url,
        artifacts.display()
    );
    std::fs::write(&file, yaml).unwrap();
    let f = file.to_str().unwrap();

    let out = aiperf(&["config", "expand", f]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let want_dirs = [
        "mean_16__concurrency_1",
        "mean_16__concurrency_2",
        "mean_32__concurrency_1",
        "mean_32__concurrency_2",
    ];
    let mut want = String::from("Sweep type: GridSweep (4 variations)\n\n");
    for (i, d) in want_dirs.iter().enumerate() {
        let (isl, c) = (if i < 2 { 16 } else { 32 }, i % 2 + 1);
        want += &format!(
            "[{i}] dir={d}  label=datasets.main.prompts.isl.mean={isl}, phases.profiling.concurrency={c}\n"
        );
    }
    assert_eq!(text(&out.stdout), want);

    // One point in full, as JSON: the swept values in its resolved configuration, the
    // file's other settings kept.
    let out = aiperf(&["config", "expand", f, "--index", "1", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["sweep_type"], "GridSweep");
    let v = &doc["variations"];
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["index"], 1);
    assert_eq!(v[0]["dir_name"], "mean_16__concurrency_2");
    assert_eq!(
        v[0]["values"],
        serde_json::json!({"datasets.main.prompts.isl.mean": 16, "phases.profiling.concurrency": 2})
    );
    let body = &v[0]["benchmark"];
    assert_eq!(
        body["datasets"][0]["prompts"]["isl"]["mean"], 16.0,
        "{body}"
    );
    assert_eq!(body["datasets"][0]["prompts"]["osl"]["mean"], 4.0, "{body}");
    let profiling = body["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "profiling")
        .unwrap();
    assert_eq!(profiling["concurrency"], 2, "{profiling}");
    assert_eq!(profiling["requests"], 3, "{profiling}");
    // The directory and seed the sweep gives the point: seed 3 + index 1.
    assert_eq!(
        body["artifacts"]["dir"],
        artifacts
            .join("mean_16__concurrency_2")
            .display()
            .to_string()
    );
    assert_eq!(body["random_seed"], 4, "{body}");

    let out = aiperf(&["config", "expand", f, "--index", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--index 4: out of range; the sweep has 4 points (0 to 3)"));

    // profile runs the same four points.
    let out = aiperf(&["profile", "--config", f, "--ui", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (i, d) in want_dirs.iter().enumerate() {
        let summary: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(artifacts.join(d).join("profile_export_aiperf.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(summary["request_count"]["avg"], 3.0, "{d}");
        let cfg = &summary["input_config"];
        assert_eq!(
            cfg["datasets"][0]["prompts"]["isl"]["mean"],
            if i < 2 { 16.0 } else { 32.0 },
            "{d}"
        );
        let profiling = cfg["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "profiling")
            .unwrap();
        assert_eq!(profiling["concurrency"], i % 2 + 1, "{d}");
    }
    assert!(artifacts.join("sweep_aggregate").is_dir());
    // What expand showed for point 1 is what its run echoed.
    let run1: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            artifacts
                .join(want_dirs[1])
                .join("profile_export_aiperf.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(run1["input_config"], doc["variations"][0]["benchmark"]);

    // A typed flag wins over the file's sweep of it, with a warning; the other list stays.
    let typed = dir.path().join("typed");
    let out = aiperf(&[
        "profile",
        "--config",
        f,
        "--ui",
        "none",
        "--concurrency",
        "3",
        "--artifact-dir",
        typed.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("the command line's --concurrency overrides the file's sweep over it (sweep.parameters.concurrency)"),
        "{}",
        text(&out.stderr)
    );
    let mut dirs: Vec<String> = std::fs::read_dir(&typed)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("mean_"))
        .collect();
    dirs.sort();
    assert_eq!(dirs, ["mean_16", "mean_32"]);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(typed.join("mean_32/profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    let profiling = summary["input_config"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "profiling")
        .unwrap()
        .clone();
    assert_eq!(profiling["concurrency"], 3, "{profiling}");
}

/// Lists at a phase's keys sweep too (zip when the sweep block says so); bad sweeps are
/// named by their path.
#[test]
fn phase_lists_sweep_and_bad_sweeps_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    let expand = |yaml: &str, extra: &[&str]| {
        std::fs::write(&file, yaml).unwrap();
        let mut args = vec!["config", "expand", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = aiperf(&args);
        let strip = |s: String| s.replace(&file.display().to_string(), "FILE");
        (
            out.status.code(),
            strip(text(&out.stdout)),
            strip(text(&out.stderr)),
        )
    };
    let (code, stdout, stderr) = expand(
        "sweep: {type: zip}\nbenchmark:\n  model: m\n  phases:\n    - {name: profiling, type: poisson, rate: [2.5, 5], requests: [10, 20]}\n",
        &["--format", "yaml"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    // The sweep block's type pairs the phase's lists.
    assert!(
        stdout.starts_with("sweep_type: ZipSweep\nvariations:\n"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("dir_name:").count(), 2, "{stdout}");
    assert!(
        stdout.contains("dir_name: rate_5.0__requests_20"),
        "{stdout}"
    );

    let (code, stdout, stderr) = expand(
        "sweep: {type: zip, parameters: {rate: [2.5, 5], requests: [10, 20]}}\nbenchmark:\n  model: m\n  phases: {type: poisson, rate: 1}\n",
        &[],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "Sweep type: ZipSweep (2 variations)\n\n[0] dir=rate_2.5__requests_10  label=phases.profiling.rate=2.5, phases.profiling.requests=10\n[1] dir=rate_5.0__requests_20  label=phases.profiling.rate=5.0, phases.profiling.requests=20\n"
    );

    // A search has no fixed points.
    let (code, _, stderr) = expand(
        "sweep: {recipe_name: max-concurrency-under-sla}\nbenchmark: {model: m}\n",
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: FILE: sweep.recipe_name: a search recipe chooses its points as it runs"
        ),
        "{stderr}"
    );

    // No sweep: one base point.
    let (code, stdout, _) = expand("benchmark:\n  model: m\n", &[]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout,
        "Sweep type: none (1 variation)\n\n[0] dir=base  label=base\n"
    );

    for (yaml, want) in [
        (
            "sweep: {parameters: {concurrency: [1, x]}}\nbenchmark: {model: m}\n",
            "error: FILE: sweep.parameters.concurrency.1: a sweep takes numbers, got \"x\"",
        ),
        (
            "sweep: {parameters: {endpoint.timeout: [1, 2]}}\nbenchmark: {model: m}\n",
            "error: FILE: sweep.parameters.endpoint.timeout: this build sweeps only numeric keys: ",
        ),
        (
            "sweep: {parameters: {benchmark.phases.profiling.rate: [1]}}\nbenchmark: {model: m}\n",
            "error: FILE: sweep.parameters.benchmark.phases.profiling.rate: drop the `benchmark.` prefix",
        ),
        (
            "sweep: {type: scenarios, runs: []}\nbenchmark: {model: m}\n",
            "error: FILE: sweep.runs: scenario and sampled",
        ),
        (
            "benchmark:\n  model: m\n  dataset: {prompts: {isl: [1, 2]}}\n",
            "error: FILE: benchmark.dataset.prompts.isl: a list sweeps only at a phase's keys; for this key write it under sweep.parameters (datasets.main.prompts.isl.mean: [...])",
        ),
        (
            "sweep: {type: zip, parameters: {rate: [1, 2], requests: [1, 2, 3]}}\nbenchmark: {model: m}\n",
            "error: FILE: sweep.type zip: every list must have the same length",
        ),
    ] {
        let (code, _, stderr) = expand(yaml, &[]);
        assert_eq!(code, Some(1), "{yaml}: {stderr}");
        assert!(stderr.starts_with(want), "{yaml}: {stderr}");
    }
}
