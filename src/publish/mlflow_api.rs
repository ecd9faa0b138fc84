//! The MLflow tracking server's REST API as the uploads use it: JSON calls under
//! `/api/2.0/mlflow/`, files through the artifact proxy, the server's errors kept by code.
//! HTTP goes through hyper's pooled client with rustls, as the `/metrics` scrapes do, so no
//! other HTTP stack is built in.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::config::MlflowOptions;
use crate::export::pyrepr;

type Https = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why a call did not succeed: the server's error, or no answer.
pub enum Failure {
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

    pub fn in_call(self, what: &str) -> String {
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

pub struct Api {
    http: Https,
    /// The tracking URI without a trailing `/`.
    base: String,
    auth: Option<HeaderValue>,
}

impl Api {
    pub fn new(opts: &MlflowOptions) -> Result<Api, String> {
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

    pub async fn call(
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
    pub async fn experiment_id(&self, name: &str) -> Result<String, String> {
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
    pub async fn check_parent(&self, id: &str, experiment: &str) -> Result<Option<String>, String> {
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

    /// One file into the run's artifact store: through the server's artifact proxy
    /// (`mlflow-artifacts:`, what `mlflow server` gives by default), or copied when the store
    /// is a local directory (`file:`), as MLflow's own client does.
    pub async fn upload_file(
        &self,
        artifact_uri: &str,
        dest: &str,
        file: &Path,
    ) -> Result<(), String> {
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

pub fn now_ms() -> u64 {
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
    fn encoding_keeps_unreserved_characters() {
        assert_eq!(encode("a b/c%", true), "a%20b/c%25");
        assert_eq!(encode("a/b", false), "a%2Fb");
    }
}
