//! A run logged to an MLflow tracking server through its REST API, as AIPerf's exporter logs
//! it with the Python client: the experiment (created when missing), a run named
//! `aiperf-<benchmark id>` (or `--mlflow-run-name`), params from the configuration, every
//! summary statistic as a metric (`time_to_first_token` for the average,
//! `time_to_first_token.p99`, ...), tags, then the artifact files under `exports/` and
//! `plots/` with `mlflow_export.json` describing the upload. A sweep or repeated run adds
//! one parent run that holds the base directory's files; each run is its child.
//!
//! HTTP goes through hyper's pooled client with rustls, as the `/metrics` scrapes do, so no
//! other HTTP stack is built in.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::{RunSummary, default_name, glob};
use crate::config::MlflowOptions;
use crate::export::pyrepr;
use crate::sweep::Ran;

type Https = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// AIPerf's statistic fields, each a metric when the summary has it.
const STAT_FIELDS: [&str; 15] = [
    "avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "min", "max", "std",
    "count", "sum",
];
pub const METADATA_FILE: &str = "mlflow_export.json";
/// Suffixes AIPerf files under `plots/`; everything else goes under `exports/`.
const PLOT_SUFFIXES: [&str; 7] = ["png", "jpg", "jpeg", "svg", "gif", "webp", "html"];
/// The REST API's limits per `log-batch` call and on a param's value.
const MAX_METRICS_PER_BATCH: usize = 1000;
const MAX_PARAMS_OR_TAGS_PER_BATCH: usize = 100;
const MAX_PARAM_VALUE_CHARS: usize = 6000;

/// Logs every run of `ran` (children of one parent run for a sweep or repeated run).
pub fn publish(opts: &MlflowOptions, ran: &Ran, runs: &[RunSummary]) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        let api = Api::new(opts)?;
        let within = |what: &'static str| {
            move |_| {
                format!(
                    "{what}: no answer within {:.0} s (see AIPERF_MLFLOW_EXPORT_TIMEOUT_SECONDS)",
                    opts.timeout.as_secs_f64()
                )
            }
        };
        let experiment = tokio::time::timeout(opts.timeout, api.experiment_id(&opts.experiment))
            .await
            .map_err(within("finding the experiment"))??;
        let parent = match &opts.parent_run_id {
            Some(id) => tokio::time::timeout(opts.timeout, api.check_parent(id, &experiment))
                .await
                .map_err(within("checking --mlflow-parent-run-id"))??,
            None => None,
        };
        let uploads: Vec<Upload> = match ran.multi {
            false => vec![Upload::of_run(
                opts,
                &runs[0],
                opts.run_name.clone(),
                parent,
            )],
            true => {
                // The sweep's base directory names it (its runs have ids, it has none).
                let name = opts.run_name.clone().unwrap_or_else(|| {
                    ran.base
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| default_name(None))
                });
                let sweep = Upload::of_sweep(opts, ran, runs, name.clone(), parent);
                let id = tokio::time::timeout(opts.timeout, api.log(&experiment, &sweep, opts))
                    .await
                    .map_err(within("logging the parent run"))??;
                runs.iter()
                    .map(|r| {
                        let child = format!("{name}/{}", r.label);
                        Upload::of_run(opts, r, Some(child), Some(id.clone()))
                    })
                    .collect()
            }
        };
        for upload in &uploads {
            tokio::time::timeout(opts.timeout, api.log(&experiment, upload, opts))
                .await
                .map_err(within("logging the run"))??;
        }
        Ok(())
    })
}

/// One MLflow run to create: what it logs and which files it uploads.
struct Upload {
    name: String,
    parent: Option<String>,
    benchmark_id: Option<String>,
    metrics: Vec<(String, f64)>,
    params: Vec<(String, String)>,
    tags: Vec<(String, String)>,
    dir: PathBuf,
    /// Directories whose files belong to other runs (a sweep's runs, for its parent).
    skip: Vec<PathBuf>,
}

impl Upload {
    fn of_run(
        opts: &MlflowOptions,
        run: &RunSummary,
        name: Option<String>,
        parent: Option<String>,
    ) -> Upload {
        Upload {
            name: name.unwrap_or_else(|| run.default_name()),
            parent,
            benchmark_id: run.benchmark_id().map(str::to_string),
            metrics: metrics(run),
            params: params(run, &run.dir),
            tags: tags(opts, run),
            dir: run.dir.clone(),
            skip: Vec::new(),
        }
    }

    /// The parent run of a sweep: the first run's configuration and the base directory's
    /// files (aggregates, plots, report), no metrics.
    fn of_sweep(
        opts: &MlflowOptions,
        ran: &Ran,
        runs: &[RunSummary],
        name: String,
        parent: Option<String>,
    ) -> Upload {
        let mut params = params(&runs[0], &ran.base);
        params.retain(|(k, _)| k != "aiperf.cli_command");
        let mut tags = tags(opts, &runs[0]);
        tags.retain(|(k, _)| k != "benchmark_id" && k != "aiperf.was_cancelled");
        Upload {
            name,
            parent,
            benchmark_id: None,
            metrics: Vec::new(),
            params,
            tags,
            dir: ran.base.clone(),
            skip: ran.dirs.clone(),
        }
    }
}

/// Every statistic of every metric: `tag` for the average, `tag.stat` for the others; and
/// `aiperf.completed_requests`, which in AIPerf counts the metric results of the run.
fn metrics(run: &RunSummary) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let mut results = 0;
    for (tag, stats) in run.metrics() {
        results += 1;
        for field in STAT_FIELDS {
            if let Some(v) = stats.get(field).and_then(Value::as_f64) {
                let key = match field {
                    "avg" => tag.clone(),
                    _ => format!("{tag}.{field}"),
                };
                out.push((key, v));
            }
        }
    }
    out.push(("aiperf.completed_requests".into(), results as f64));
    out
}

/// AIPerf's params: endpoint, models, URLs, artifact directory, the profiling phase's load
/// settings and the command line.
fn params(run: &RunSummary, dir: &Path) -> Vec<(String, String)> {
    let cfg = &run.json["input_config"];
    let joined = |items: &Value, field: Option<&str>| {
        let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
        let names: Vec<String> = items
            .iter()
            .map(|v| pyrepr::str(field.map_or(v, |f| &v[f])))
            .collect();
        names.join(",")
    };
    let mut out = vec![
        (
            "endpoint.type".to_string(),
            pyrepr::str(&cfg["endpoint"]["type"]),
        ),
        (
            "endpoint.models".into(),
            joined(&cfg["models"]["items"], Some("name")),
        ),
        (
            "endpoint.urls".into(),
            joined(&cfg["endpoint"]["urls"], None),
        ),
        (
            "output.artifact_directory".into(),
            dir.display().to_string(),
        ),
    ];
    let phases = cfg["phases"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if let Some(phase) = phases.iter().find(|p| p["kind"] == "profiling") {
        out.push(("timing.mode".into(), pyrepr::str(&phase["type"])));
        for (key, field) in [
            ("loadgen.concurrency", "concurrency"),
            ("loadgen.request_rate", "rate"),
            ("loadgen.request_count", "requests"),
            ("loadgen.benchmark_duration", "duration"),
        ] {
            if !phase[field].is_null() {
                out.push((key.into(), pyrepr::str(&phase[field])));
            }
        }
    }
    if let Some(cmd) = run.cli_command() {
        out.push(("aiperf.cli_command".into(), cmd.to_string()));
    }
    // The server refuses a longer value (and with it the whole batch).
    for (_, v) in &mut out {
        if v.chars().count() > MAX_PARAM_VALUE_CHARS {
            *v = v.chars().take(MAX_PARAM_VALUE_CHARS).collect();
        }
    }
    out
}

fn tags(opts: &MlflowOptions, run: &RunSummary) -> Vec<(String, String)> {
    let mut out = vec![
        (
            "aiperf.version".to_string(),
            pyrepr::str(&run.json["aiperf_version"]),
        ),
        (
            "aiperf.was_cancelled".into(),
            (run.json["was_cancelled"] == true).to_string(),
        ),
    ];
    if let Some(id) = run.benchmark_id() {
        out.push(("benchmark_id".into(), id.to_string()));
    }
    for (k, v) in &opts.tags {
        out.retain(|(old, _)| old != k);
        out.push((k.clone(), v.clone()));
    }
    out
}

/// Where AIPerf puts a file in the run's artifact tree: `plots/` or `exports/`, then the
/// file's directory under the artifact directory (a leading `plots/` or `exports/` not
/// repeated).
fn artifact_path(dir: &Path, file: &Path) -> String {
    let suffix = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let base = match suffix {
        Some(s) if PLOT_SUFFIXES.contains(&s.as_str()) => "plots",
        _ => "exports",
    };
    let parent = file
        .strip_prefix(dir)
        .ok()
        .and_then(Path::parent)
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let parent = match parent.first() {
        Some(first) if first == base => &parent[1..],
        _ => &parent[..],
    };
    match parent.is_empty() {
        true => base.to_string(),
        false => format!("{base}/{}", parent.join("/")),
    }
}

/// Why a call did not succeed: the server's error, or no answer.
enum Failure {
    Answered {
        status: u16,
        code: String,
        message: String,
    },
    NoAnswer(String),
}

impl Failure {
    fn code(&self) -> Option<&str> {
        match self {
            Failure::Answered { code, .. } => Some(code),
            Failure::NoAnswer(_) => None,
        }
    }

    fn in_call(self, what: &str) -> String {
        match self {
            Failure::Answered {
                status,
                code,
                message,
            } => format!("{what}: HTTP {status} {code} {message}")
                .trim_end()
                .into(),
            Failure::NoAnswer(why) => format!("{what}: {why}"),
        }
    }
}

struct Api {
    http: Https,
    /// The tracking URI without a trailing `/`.
    base: String,
    auth: Option<HeaderValue>,
}

impl Api {
    fn new(opts: &MlflowOptions) -> Result<Api, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(opts.timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("TLS setup: {e}"))?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Api {
            http: Client::builder(TokioExecutor::new()).build(connector),
            base: opts
                .tracking_uri
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            auth: authorization(opts.userinfo.as_deref()),
        })
    }

    async fn send(&self, request: http::request::Builder, body: Bytes) -> Result<Bytes, Failure> {
        let mut request = request;
        if let Some(auth) = &self.auth {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| Failure::NoAnswer(e.to_string()))?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| Failure::NoAnswer(error_chain(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure::NoAnswer(error_chain(&e)))?
            .to_bytes();
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let error: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        Err(Failure::Answered {
            status,
            code: error["error_code"].as_str().unwrap_or_default().to_string(),
            message: error["message"].as_str().map_or(text, str::to_string),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}/api/2.0/mlflow/{path}", self.base));
        let bytes = match body {
            Some(v) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(&v).expect("JSON values serialize"))
            }
            None => Bytes::new(),
        };
        let answer = self.send(request, bytes).await?;
        Ok(serde_json::from_slice(&answer).unwrap_or(Value::Null))
    }

    /// The experiment's id, created when it does not exist (as `mlflow.set_experiment`).
    async fn experiment_id(&self, name: &str) -> Result<String, String> {
        let path = format!(
            "experiments/get-by-name?experiment_name={}",
            encode(name, false)
        );
        let what = format!("GET {}/api/2.0/mlflow/{path}", self.base);
        for _ in 0..2 {
            match self.call(Method::GET, &path, None).await {
                Ok(v) => {
                    let e = &v["experiment"];
                    if e["lifecycle_stage"] == "deleted" {
                        return Err(format!(
                            "experiment '{name}' is deleted; restore it or give another --mlflow-experiment"
                        ));
                    }
                    return e["experiment_id"]
                        .as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{what}: no experiment id in the answer"));
                }
                Err(f) if f.code() == Some("RESOURCE_DOES_NOT_EXIST") => {
                    let created = self
                        .call(
                            Method::POST,
                            "experiments/create",
                            Some(json!({"name": name})),
                        )
                        .await;
                    match created {
                        Ok(v) => {
                            info!("MLflow: created experiment '{name}'");
                            return Ok(pyrepr::str(&v["experiment_id"]));
                        }
                        // Created meanwhile by another client: look it up again.
                        Err(f) if f.code() == Some("RESOURCE_ALREADY_EXISTS") => continue,
                        Err(f) => return Err(f.in_call("creating the experiment")),
                    }
                }
                Err(f) => return Err(f.in_call(&what)),
            }
        }
        Err(format!(
            "{what}: the experiment '{name}' could not be found or created"
        ))
    }

    /// `--mlflow-parent-run-id` when it exists; a missing parent gives a root run with a
    /// warning (AIPerf's fallback), a parent in another experiment is refused (MLflow's rule).
    async fn check_parent(&self, id: &str, experiment: &str) -> Result<Option<String>, String> {
        let path = format!("runs/get?run_id={}", encode(id, false));
        match self.call(Method::GET, &path, None).await {
            Ok(v) => {
                let theirs = pyrepr::str(&v["run"]["info"]["experiment_id"]);
                if theirs != experiment {
                    return Err(format!(
                        "--mlflow-parent-run-id {id} is in experiment {theirs}, not in this run's experiment {experiment}"
                    ));
                }
                Ok(Some(id.to_string()))
            }
            Err(f) if f.code() == Some("RESOURCE_DOES_NOT_EXIST") => {
                warn!("MLflow: parent run {id} not found; creating a root run instead");
                Ok(None)
            }
            Err(f) => Err(f.in_call("checking --mlflow-parent-run-id")),
        }
    }

    /// Creates the run, logs it, uploads its files and marks it finished; a run that fails
    /// part way is marked failed. Gives the run's id.
    async fn log(
        &self,
        experiment: &str,
        upload: &Upload,
        opts: &MlflowOptions,
    ) -> Result<String, String> {
        let mut tags = vec![json!({"key": "mlflow.runName", "value": upload.name})];
        if let Some(p) = &upload.parent {
            tags.push(json!({"key": "mlflow.parentRunId", "value": p}));
        }
        let created = self
            .call(
                Method::POST,
                "runs/create",
                Some(json!({
                    "experiment_id": experiment,
                    "run_name": upload.name,
                    "start_time": now_ms(),
                    "tags": tags,
                })),
            )
            .await
            .map_err(|f| f.in_call("creating the run"))?;
        let info = &created["run"]["info"];
        let run_id = info["run_id"].as_str().unwrap_or_default().to_string();
        let artifact_uri = info["artifact_uri"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if run_id.is_empty() {
            return Err("creating the run: no run id in the answer".into());
        }
        let logged = self
            .fill(&run_id, &artifact_uri, experiment, upload, opts)
            .await;
        let status = if logged.is_ok() { "FINISHED" } else { "FAILED" };
        let finished = self
            .call(
                Method::POST,
                "runs/update",
                Some(json!({"run_id": run_id, "status": status, "end_time": now_ms()})),
            )
            .await
            .map_err(|f| f.in_call("finishing the run"));
        let artifacts = logged?;
        finished?;
        info!(
            "Uploaded MLflow run '{}' ({run_id}) with {} metrics and {artifacts} artifacts.",
            upload.name,
            upload.metrics.len()
        );
        Ok(run_id)
    }

    /// Logs the values in batches the API takes, then the files and `mlflow_export.json`.
    /// Gives the number of files uploaded.
    async fn fill(
        &self,
        run_id: &str,
        artifact_uri: &str,
        experiment: &str,
        upload: &Upload,
        opts: &MlflowOptions,
    ) -> Result<usize, String> {
        let pairs = |items: &[(String, String)]| -> Vec<Value> {
            items
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect()
        };
        let now = now_ms();
        let mut batches: Vec<Value> = Vec::new();
        for chunk in upload.params.chunks(MAX_PARAMS_OR_TAGS_PER_BATCH) {
            batches.push(json!({"run_id": run_id, "params": pairs(chunk)}));
        }
        for chunk in upload.tags.chunks(MAX_PARAMS_OR_TAGS_PER_BATCH) {
            batches.push(json!({"run_id": run_id, "tags": pairs(chunk)}));
        }
        for chunk in upload.metrics.chunks(MAX_METRICS_PER_BATCH) {
            let metrics: Vec<Value> = chunk
                .iter()
                .map(|(k, v)| json!({"key": k, "value": v, "timestamp": now, "step": 0}))
                .collect();
            batches.push(json!({"run_id": run_id, "metrics": metrics}));
        }
        for batch in batches {
            self.call(Method::POST, "runs/log-batch", Some(batch))
                .await
                .map_err(|f| f.in_call("logging params, tags and metrics"))?;
        }

        let metadata = upload.dir.join(METADATA_FILE);
        let files = glob::collect(&upload.dir, &opts.artifact_globs, |f| {
            f == metadata || upload.skip.iter().any(|d| f.starts_with(d))
        });
        let mut uploaded: Vec<String> = files
            .iter()
            .map(|f| {
                f.strip_prefix(&upload.dir)
                    .unwrap_or(f)
                    .display()
                    .to_string()
            })
            .collect();
        uploaded.push(METADATA_FILE.into());
        let sorted_keys = |items: Vec<&String>| {
            let mut keys: Vec<&String> = items;
            keys.sort();
            keys.dedup();
            json!(keys)
        };
        let record = json!({
            "tracking_uri": opts.tracking_uri.to_string(),
            "experiment": opts.experiment,
            "experiment_id": experiment,
            "run_id": run_id,
            "run_name": upload.name,
            "benchmark_id": upload.benchmark_id,
            "parent_run_id": upload.parent,
            "live_streaming": false,
            "reused_live_run": false,
            "metric_keys": sorted_keys(upload.metrics.iter().map(|(k, _)| k).collect()),
            "param_keys": sorted_keys(upload.params.iter().map(|(k, _)| k).collect()),
            "tag_keys": sorted_keys(upload.tags.iter().map(|(k, _)| k).collect()),
            "uploaded_artifacts": uploaded,
            "exported_at_ns": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
        });
        let text = serde_json::to_string_pretty(&record).expect("JSON values serialize");
        std::fs::write(&metadata, text)
            .map_err(|e| format!("cannot write {}: {e}", metadata.display()))?;
        for file in files.iter().chain([&metadata]) {
            let dest = artifact_path(&upload.dir, file);
            self.upload_file(artifact_uri, &dest, file).await?;
        }
        Ok(files.len() + 1)
    }

    /// One file into the run's artifact store: through the server's artifact proxy
    /// (`mlflow-artifacts:`, what `mlflow server` gives by default), or copied when the store
    /// is a local directory (`file:`), as MLflow's own client does.
    async fn upload_file(&self, artifact_uri: &str, dest: &str, file: &Path) -> Result<(), String> {
        let name = file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        if let Some(rest) = artifact_uri.strip_prefix("mlflow-artifacts:") {
            // `mlflow-artifacts://host:port/path` names a server; the path is what counts.
            let path = match rest.strip_prefix("//") {
                Some(r) => &r[r.find('/').unwrap_or(r.len())..],
                None => rest,
            };
            let uri = format!(
                "{}/api/2.0/mlflow-artifacts/artifacts/{}/{}/{}",
                self.base,
                encode(path.trim_matches('/'), true),
                encode(dest, true),
                encode(&name, false)
            );
            let bytes =
                std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let request = Request::builder()
                .method(Method::PUT)
                .uri(&uri)
                .header(header::CONTENT_TYPE, "application/octet-stream");
            return self
                .send(request, Bytes::from(bytes))
                .await
                .map(|_| ())
                .map_err(|f| f.in_call(&format!("uploading {}", file.display())));
        }
        let local = artifact_uri
            .strip_prefix("file://")
            .or_else(|| artifact_uri.starts_with('/').then_some(artifact_uri));
        let Some(root) = local else {
            return Err(format!(
                "the run's artifact store {artifact_uri} is not reachable from this build; let the tracking server proxy artifacts (`mlflow server` does by default; --artifacts-destination sets where they go)"
            ));
        };
        let dir = Path::new(root).join(dest);
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::copy(file, dir.join(&name)).map(|_| ()))
            .map_err(|e| format!("cannot copy {} into {}: {e}", file.display(), dir.display()))
    }
}

/// Basic authorization from the URI's `user:password`, else MLflow's own variables
/// (`MLFLOW_TRACKING_TOKEN`, `MLFLOW_TRACKING_USERNAME` and `_PASSWORD`).
fn authorization(userinfo: Option<&str>) -> Option<HeaderValue> {
    use base64::Engine;
    let basic = |pair: &str| {
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        HeaderValue::from_str(&format!("Basic {encoded}")).ok()
    };
    if let Some(ui) = userinfo {
        return basic(ui);
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(token) = env("MLFLOW_TRACKING_TOKEN") {
        return HeaderValue::from_str(&format!("Bearer {token}")).ok();
    }
    match (
        env("MLFLOW_TRACKING_USERNAME"),
        env("MLFLOW_TRACKING_PASSWORD"),
    ) {
        (Some(u), Some(p)) => basic(&format!("{u}:{p}")),
        _ => None,
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters (and `/` when `keep_slash`).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An error and its causes, for the one line a user sees ("client error (Connect): tcp
/// connect error: Connection refused (os error 111)").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_paths_follow_aiperf() {
        let dir = Path::new("/a");
        let at = |f: &str| artifact_path(dir, &dir.join(f));
        assert_eq!(at("profile_export_aiperf.json"), "exports");
        assert_eq!(at("plots/ttft.png"), "plots");
        assert_eq!(at("plots/deep/x.svg"), "plots/deep");
        assert_eq!(at("report.html"), "plots");
        assert_eq!(at("agg/summary.csv"), "exports/agg");
        assert_eq!(at("exports/x.json"), "exports");
    }

    #[test]
    fn encoding_keeps_unreserved_characters() {
        assert_eq!(encode("a b/c%", true), "a%20b/c%25");
        assert_eq!(encode("a/b", false), "a%2Fb");
    }
}
