//! `--mlflow-*` against a real MLflow tracking server (`mlflow server`, sqlite store, proxied
//! artifacts) started by each test, the run read back through the REST API and compared with
//! the run's own files. `.ci/run` installs MLflow in a venv and says where (`AIPERF_MLFLOW`,
//! the `mlflow` executable); without it these tests say so and pass, unless
//! `AIPERF_REQUIRE_MLFLOW=1` (CI), where they fail. The flag checks and the unreachable
//! server need no MLflow.

use crate::common;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{MockChild, Profile, read_json, stderr_text};
use serde_json::{Value, json};

/// The `mlflow` executable, or `None` (after saying why) when it is not here.
fn mlflow_bin() -> Option<PathBuf> {
    match std::env::var_os("AIPERF_MLFLOW") {
        Some(bin) => Some(PathBuf::from(bin)),
        None if std::env::var("AIPERF_REQUIRE_MLFLOW").as_deref() == Ok("1") => {
            panic!("AIPERF_REQUIRE_MLFLOW=1 but AIPERF_MLFLOW (the mlflow executable) is not set")
        }
        None => {
            eprintln!(
                "skipped: no MLflow here (set AIPERF_MLFLOW to an `mlflow` executable; .ci/run installs mlflow==3.17.2)"
            );
            None
        }
    }
}

/// A running `mlflow server` in a directory of its own, killed (with its workers) when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    url: String,
    dir: tempfile::TempDir,
}

/// Where the server keeps artifacts: behind its proxy (`mlflow-artifacts:` URIs, which the
/// client uploads over HTTP), or in a directory it names to the client (`file:` URIs,
/// which the client writes itself, as MLflow's own client does).
#[derive(Clone, Copy)]
enum Artifacts {
    Proxied,
    LocalRoot,
}

impl Server {
    fn start(bin: &Path, artifacts: Artifacts) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new(bin)
            .args(["server", "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--workers", "1"])
            .arg("--backend-store-uri")
            .arg(format!("sqlite:///{}", dir.path().join("db").display()))
            .arg(match artifacts {
                Artifacts::Proxied => "--artifacts-destination",
                Artifacts::LocalRoot => "--default-artifact-root",
            })
            .arg(dir.path().join("art"))
            .current_dir(dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("start mlflow server");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let server = Server {
            child,
            addr,
            url: format!("http://{addr}"),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if TcpStream::connect(addr).is_ok()
                && common::request(addr, "GET", "/health", &[], b"").status == 200
            {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "mlflow server did not answer /health: {}",
                std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn get(&self, path: &str) -> Value {
        let r = common::request(
            self.addr,
            "GET",
            &format!("/api/2.0/mlflow/{path}"),
            &[],
            b"",
        );
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        r.json()
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let r = common::post_json(self.addr, &format!("/api/2.0/mlflow/{path}"), &body);
        assert_eq!(r.status, 200, "POST {path}: {}", r.text());
        r.json()
    }

    fn experiment_id(&self, name: &str) -> String {
        self.get(&format!("experiments/get-by-name?experiment_name={name}"))["experiment"]
            ["experiment_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Every run of the experiment.
    fn runs(&self, experiment: &str) -> Vec<Value> {
        let found = self.post(
            "runs/search",
            json!({"experiment_ids": [experiment], "max_results": 100}),
        );
        found["runs"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The server and its uvicorn workers share the group it leads.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A run's `data.metrics`, `params` or `tags` as a map.
fn pairs(run: &Value, field: &str) -> BTreeMap<String, Value> {
    run["data"][field]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|p| (p["key"].as_str().unwrap().to_string(), p["value"].clone()))
        .collect()
}

/// Every statistic of the summary file: AIPerf's metric keys (`tag` for the average,
/// `tag.stat` for the others) and their values.
fn expected_metrics(summary: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (tag, v) in summary.as_object().unwrap() {
        let Some(stats) = v.as_object().filter(|m| m.contains_key("unit")) else {
            continue;
        };
        for (stat, value) in stats {
            let Some(value) = value.as_f64() else {
                continue;
            };
            let key = match stat.as_str() {
                "avg" => tag.clone(),
                _ => format!("{tag}.{stat}"),
            };
            out.insert(key, value);
        }
    }
    out
}

fn run_with(mock: &MockChild, dir: &Path, extra: &[&str]) -> std::process::Output {
    Profile::new("m")
        .url(&mock.url)
        .artifact_dir(dir)
        .args(&["--streaming", "--isl", "16", "--osl", "8"])
        .args(extra)
        .run()
}

#[test]
fn a_run_is_logged_with_its_params_metrics_tags_and_artifacts() {
    let Some(bin) = mlflow_bin() else { return };
    let server = Server::start(&bin, Artifacts::Proxied);
    let mock = MockChild::spawn(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = run_with(
        &mock,
        &dir,
        &[
            "--request-count",
            "8",
            "--concurrency",
            "2",
            "--mlflow-tracking-uri",
            &server.url,
            "--mlflow-experiment",
            "bench",
            "--mlflow-run-name",
            "first",
            "--mlflow-tag",
            "team:perf,ok:true",
            "--mlflow-tag",
            "gpu:h100",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let summary = read_json(&dir.join("profile_export_aiperf.json"));

    let experiment = server.experiment_id("bench");
    let runs = server.runs(&experiment);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let run = &runs[0];
    assert_eq!(run["info"]["run_name"], "first");
    assert_eq!(run["info"]["status"], "FINISHED");

    // Every statistic of the summary file, with its value, and AIPerf's one extra.
    let mut logged: BTreeMap<String, f64> = pairs(run, "metrics")
        .into_iter()
        .map(|(k, v)| (k, v.as_f64().unwrap()))
        .collect();
    let completed = logged.remove("aiperf.completed_requests").unwrap();
    let expected = expected_metrics(&summary);
    assert_eq!(
        logged.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (k, v) in &expected {
        assert_eq!(logged[k], *v, "{k}");
    }
    assert!(logged.contains_key("time_to_first_token.p99"));
    let metric_results = summary
        .as_object()
        .unwrap()
        .values()
        .filter(|v| v.get("unit").is_some())
        .count();
    assert_eq!(completed, metric_results as f64);

    let params = pairs(run, "params");
    assert_eq!(params["endpoint.type"], "chat");
    assert_eq!(params["endpoint.models"], "m");
    assert_eq!(params["timing.mode"], "concurrency");
    assert_eq!(params["loadgen.concurrency"], "2");
    assert_eq!(params["loadgen.request_count"], "8");
    assert_eq!(
        params["output.artifact_directory"],
        dir.display().to_string()
    );
    assert_eq!(
        params["aiperf.cli_command"],
        summary["run_info"]["cli_command"]
    );

    let tags = pairs(run, "tags");
    assert_eq!(tags["team"], "perf");
    assert_eq!(tags["ok"], "True");
    assert_eq!(tags["gpu"], "h100");
    assert_eq!(tags["benchmark_id"], summary["benchmark_id"]);
    assert_eq!(tags["aiperf.was_cancelled"], "false");
    assert_eq!(tags["aiperf.version"], summary["aiperf_version"]);

    // The files, through the server's artifact proxy, byte for byte.
    let run_id = run["info"]["run_id"].as_str().unwrap();
    let store = run["info"]["artifact_uri"].as_str().unwrap();
    assert!(store.starts_with("mlflow-artifacts:"), "{store}");
    let listed = server.get(&format!("artifacts/list?run_id={run_id}&path=exports"));
    let names: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for name in [
        "exports/profile_export_aiperf.json",
        "exports/profile_export_aiperf.csv",
        "exports/profile_export.jsonl",
        "exports/mlflow_export.json",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    let stored = server
        .dir
        .path()
        .join("art")
        .join(&experiment)
        .join(run_id)
        .join("artifacts/exports/profile_export_aiperf.json");
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        std::fs::read(dir.join("profile_export_aiperf.json")).unwrap()
    );
    let plots = server.get(&format!("artifacts/list?run_id={run_id}&path=plots"));
    assert!(plots.to_string().contains("plots/report.html"), "{plots}");
    let record = read_json(&dir.join("mlflow_export.json"));
    assert_eq!(record["run_id"], run_id);
    assert_eq!(record["experiment"], "bench");

    // A parent that does not exist: a root run, with a warning, named by default.
    let dir2 = tmp.path().join("second");
    let missing = "0123456789abcdef0123456789abcdef";
    let out = run_with(
        &mock,
        &dir2,
        &[
            "--request-count",
            "2",
            "--mlflow-tracking-uri",
            &server.url,
            "--mlflow-experiment",
            "bench",
            "--mlflow-parent-run-id",
            missing,
        ],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "parent run {missing} not found; creating a root run"
        )),
        "{stderr}"
    );
    let id = read_json(&dir2.join("profile_export_aiperf.json"))["benchmark_id"]
        .as_str()
        .unwrap()
        .to_string();
    let runs = server.runs(&experiment);
    let second = runs
        .iter()
        .find(|r| r["info"]["run_id"] != run_id)
        .expect("a second run");
    assert_eq!(second["info"]["run_name"], format!("aiperf-{}", &id[..8]));
    assert!(!pairs(second, "tags").contains_key("mlflow.parentRunId"));
}

/// A sweep is one parent run with a child per run; `--mlflow-parent-run-id` puts the parent
/// under an existing run.
#[test]
fn a_sweep_is_a_parent_run_with_one_child_per_run() {
    let Some(bin) = mlflow_bin() else { return };
    let server = Server::start(&bin, Artifacts::LocalRoot);
    let mock = MockChild::spawn(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("sweep");
    let experiment = server.post("experiments/create", json!({"name": "sweeps"}))["experiment_id"]
        .as_str()
        .unwrap()
        .to_string();
    let outer = server.post(
        "runs/create",
        json!({"experiment_id": experiment, "run_name": "nightly"}),
    )["run"]["info"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run_with(
        &mock,
        &base,
        &[
            "--request-count",
            "4",
            "--concurrency",
            "1,2",
            "--mlflow-tracking-uri",
            &server.url,
            "--mlflow-experiment",
            "sweeps",
            "--mlflow-parent-run-id",
            &outer,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));

    let runs = server.runs(&experiment);
    assert_eq!(
        runs.len(),
        4,
        "nightly, the sweep and its 2 runs: {runs:#?}"
    );
    let parent_of = |r: &Value| pairs(r, "tags").get("mlflow.parentRunId").cloned();
    let sweep: Vec<&Value> = runs
        .iter()
        .filter(|r| parent_of(r).as_ref() == Some(&json!(outer)))
        .collect();
    assert_eq!(sweep.len(), 1, "{runs:#?}");
    assert_eq!(sweep[0]["info"]["run_name"], "sweep");
    let sweep_id = sweep[0]["info"]["run_id"].as_str().unwrap();
    assert!(pairs(sweep[0], "metrics").is_empty());
    let held = server.get(&format!(
        "artifacts/list?run_id={}&path=plots",
        sweep[0]["info"]["run_id"].as_str().unwrap()
    ));
    assert_eq!(
        held["files"].as_array().unwrap().len(),
        1,
        "only the sweep's own report.html: {held}"
    );
    let children: Vec<&Value> = runs
        .iter()
        .filter(|r| parent_of(r).as_ref() == Some(&json!(sweep_id)))
        .collect();
    assert_eq!(children.len(), 2, "{runs:#?}");
    let mut concurrencies = Vec::new();
    for child in children {
        let params = pairs(child, "params");
        let dir = PathBuf::from(params["output.artifact_directory"].as_str().unwrap());
        assert!(dir.starts_with(&base), "{dir:?}");
        let summary = read_json(&dir.join("profile_export_aiperf.json"));
        let metrics = pairs(child, "metrics");
        assert_eq!(metrics["request_count"], summary["request_count"]["avg"]);
        assert_eq!(
            metrics["request_latency.p50"],
            summary["request_latency"]["p50"]
        );
        assert_eq!(
            pairs(child, "tags")["benchmark_id"],
            summary["benchmark_id"]
        );
        // This server names a local directory as the artifact store: the files are there.
        let store = child["info"]["artifact_uri"].as_str().unwrap();
        assert!(
            store.starts_with("file:") || store.starts_with('/'),
            "{store}"
        );
        let stored = server
            .dir
            .path()
            .join("art")
            .join(&experiment)
            .join(child["info"]["run_id"].as_str().unwrap())
            .join("artifacts/exports/profile_export_aiperf.json");
        assert_eq!(
            std::fs::read(&stored).unwrap(),
            std::fs::read(dir.join("profile_export_aiperf.json")).unwrap()
        );
        let label = dir.strip_prefix(&base).unwrap().display().to_string();
        assert_eq!(child["info"]["run_name"], format!("sweep/{label}"));
        concurrencies.push(params["loadgen.concurrency"].as_str().unwrap().to_string());
    }
    concurrencies.sort();
    assert_eq!(concurrencies, ["1", "2"]);
}

/// No server: the results are written, one error line says the upload failed, exit 3.
#[test]
fn an_unreachable_tracking_server_fails_the_upload_not_the_results() {
    let mock = MockChild::spawn(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let uri = format!("http://{closed}");
    let started = Instant::now();
    let out = run_with(
        &mock,
        &dir,
        &["--request-count", "4", "--mlflow-tracking-uri", &uri],
    );
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("MLflow")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with("error: MLflow upload to")
            && errors[0].contains(&closed.to_string())
            && errors[0].contains("refused"),
        "{}",
        errors[0]
    );
    let summary = read_json(&dir.join("profile_export_aiperf.json"));
    assert_eq!(summary["request_count"]["avg"], 4.0);
}

#[test]
fn mlflow_and_wandb_flags_are_checked_before_the_run() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--mlflow-run-name", "x"],
            "require --mlflow-tracking-uri to be set",
        ),
        (
            &["--mlflow-tracking-uri", "file:///tmp/mlruns"],
            "give the tracking server's http:// or https:// URL",
        ),
        (
            &[
                "--mlflow-tracking-uri",
                "http://h:5000",
                "--mlflow-experiment",
                " ",
            ],
            "--mlflow-experiment cannot be empty",
        ),
        (
            &[
                "--mlflow-tracking-uri",
                "http://h:5000",
                "--mlflow-tag",
                "novalue",
            ],
            "'key:value' format",
        ),
        (
            &["--wandb-entity", "e"],
            "require --wandb-project to be set",
        ),
        (&["--wandb-project", " "], "--wandb-project cannot be empty"),
    ];
    for (flags, says) in cases {
        let out = Profile::new("m")
            .url("127.0.0.1:1")
            .args(&["--request-count", "1"])
            .args(flags)
            .run();
        let stderr = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
}
