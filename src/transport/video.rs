//! Video generation (`--endpoint-type video_generation`), a job API: the form is POSTed
//! (`/v1/videos`), the job is polled (`GET /v1/videos/{id}`) every `interval` until it is
//! `completed` or `failed`, and with `--download-video-content` its video is fetched (the
//! job's `url`, else `GET /v1/videos/{id}/content`). One record covers the whole job: its
//! responses are the submit answer and the completed job, the latter stamped when the
//! download ended when there is one, so that request latency includes the download as
//! AIPerf's `--download-video-content` describes. The overall `--request-timeout-seconds`
//! and cancellation cover every step.

use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Method, StatusCode, Uri};
use http_body_util::BodyExt;
use serde_json::Value;

use super::HttpClient;
use super::request_body::{RequestBody, TakenAt};
use super::response::{SendError, Wire, collect_body, http_error, transport_error};
use crate::clock::Clock;
use crate::record::{ErrorDetails, RequestRecord, VideoJob};

/// How a video job is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoPolling {
    /// Between polls (AIPerf's `AIPERF_HTTP_VIDEO_POLL_INTERVAL`, 0.1 s by default).
    pub interval: Duration,
    /// `--download-video-content`: fetch the video once the job completes.
    pub download: bool,
}

/// A job's status values (OpenAI's and SGLang's).
const COMPLETED: &str = "completed";
const FAILED: &str = "failed";

/// One GET's answer: status, body, content type and when the body had arrived.
struct Answer {
    status: StatusCode,
    body: Bytes,
    /// The body's length (also when it was not kept).
    len: u64,
    content_type: Option<String>,
    at: u64,
}

fn video_error(kind: &str, code: u16, message: String) -> ErrorDetails {
    ErrorDetails {
        code: Some(code),
        kind: kind.into(),
        message,
    }
}

impl HttpClient {
    /// Submits the job in `body`, polls it to its end and, if asked, downloads the video.
    pub(super) async fn run_video(
        &self,
        polling: VideoPolling,
        clock: &Clock,
        body: Bytes,
        taken: &TakenAt,
        record: &mut RequestRecord,
        wire: &mut Wire,
    ) {
        let response = match self.send(clock, body, taken, record, wire).await {
            Ok(r) => r,
            Err(e) => {
                record.error = Some(transport_error(&e));
                return;
            }
        };
        record.ack_perf_ns = Some(clock.now_ns());
        let status = response.status();
        let content_type = content_type(response.headers());
        let mut incoming = response.into_body();
        let submitted = match collect_body(&mut incoming, self.max_response_bytes).await {
            Ok(b) => b,
            Err(e) => {
                record.error = Some(e.details());
                return;
            }
        };
        wire.ended = true;
        let at = clock.now_ns();
        record.status = Some(status.as_u16());
        self.keep_body(record, at, &submitted, content_type);
        if !status.is_success() {
            record.error = Some(http_error(status, &submitted));
            return;
        }
        // The submit's connection is free again: the polls may use it.
        let server = wire.conn.as_ref().map_or(0, |c| c.server());
        if let Some(conn) = wire.conn.take().filter(|_| !wire.closes) {
            self.pool.give_back(conn);
        }
        let job: Value = serde_json::from_slice(&submitted).unwrap_or(Value::Null);
        let Some(id) = job.get("id").and_then(Value::as_str).map(str::to_string) else {
            let message = format!(
                "No job ID returned: {}",
                String::from_utf8_lossy(&submitted)
            );
            record.error = Some(video_error("VideoGenerationError", 500, message));
            return;
        };
        record.push_response(at, "", "", 0);

        let target = &self.servers.targets[server];
        let poll_path = format!("{}/{id}", target.origin.path().trim_end_matches('/'));
        let done = loop {
            let answer = match self
                .get(server, &poll_path, clock, record, Keep::Body)
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    record.error = Some(e);
                    return;
                }
            };
            self.keep_body(record, answer.at, &answer.body, answer.content_type);
            if !answer.status.is_success() {
                record.error = Some(http_error(answer.status, &answer.body));
                return;
            }
            let data: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
            match data.get("status").and_then(Value::as_str) {
                Some(COMPLETED) => break (answer.at, data),
                Some(FAILED) => {
                    let message = match data.get("error") {
                        Some(Value::Object(e)) => e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("Unknown error")
                            .to_string(),
                        Some(Value::String(s)) => s.clone(),
                        Some(other) if !other.is_null() => other.to_string(),
                        _ => "Unknown error".into(),
                    };
                    let message = format!("Video generation failed: {message}");
                    record.error = Some(video_error("VideoGenerationError", 500, message));
                    return;
                }
                _ => tokio::time::sleep(polling.interval).await,
            }
        };
        let (mut end, data) = done;
        record.video = Some(VideoJob {
            inference_time_s: data.get("inference_time_s").and_then(Value::as_f64),
            peak_memory_mb: data.get("peak_memory_mb").and_then(Value::as_f64),
        });
        if polling.download {
            let path = data
                .get("url")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
                .map_or_else(|| format!("{poll_path}/content"), str::to_string);
            let answer = match self.get(server, &path, clock, record, Keep::Length).await {
                Ok(a) => a,
                Err(e) => {
                    let message = format!("Failed to download video {id}: {}", e.message);
                    record.error = Some(video_error(
                        "VideoDownloadError",
                        e.code.unwrap_or(500),
                        message,
                    ));
                    return;
                }
            };
            if !answer.status.is_success() {
                let e = http_error(answer.status, &answer.body);
                let message = format!("Failed to download video {id}: {}", e.message);
                let code = answer.status.as_u16();
                record.error = Some(video_error("VideoDownloadError", code, message));
                return;
            }
            if answer.len == 0 {
                let message = format!("No content returned for video {id}");
                record.error = Some(video_error("VideoDownloadError", 500, message));
                return;
            }
            end = answer.at;
        }
        record.push_response(end, "", "", 0);
    }

    /// `--export-level raw`: each answer of the job (not the video) with its time.
    fn keep_body(
        &self,
        record: &mut RequestRecord,
        at: u64,
        body: &Bytes,
        content_type: Option<String>,
    ) {
        if let Some(raw) = record.raw.as_mut().filter(|_| self.keep_responses) {
            raw.bodies.push((at, body.clone(), content_type));
        }
    }

    /// A GET of `path_and_query` (or of an absolute URL on the same server) with the run's
    /// headers and the record's ids, its whole body read.
    async fn get(
        &self,
        server: usize,
        path: &str,
        clock: &Clock,
        record: &RequestRecord,
        keep: Keep,
    ) -> Result<Answer, ErrorDetails> {
        let target = &self.servers.targets[server];
        let uri: Uri = path
            .parse()
            .map_err(|e| video_error("VideoGenerationError", 500, format!("{path}: {e}")))?;
        let origin: Uri = match uri.path_and_query() {
            Some(p) if uri.scheme().is_some() => p.as_str().parse().expect("a path parses"),
            _ => uri,
        };
        let mut request = self.request(target, clock, Bytes::new(), &TakenAt::default(), record);
        *request.method_mut() = Method::GET;
        *request.uri_mut() = origin;
        let mut conn = self
            .pool
            .take(server, target)
            .await
            .map_err(|e| transport_error(&SendError::Connect(e)))?;
        let request: http::Request<RequestBody> = request;
        let response = conn
            .sender
            .send_request(request)
            .await
            .map_err(|e| transport_error(&SendError::Send(e)))?;
        let status = response.status();
        let content_type = content_type(response.headers());
        let closes = response
            .headers()
            .get(http::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        let mut incoming = response.into_body();
        // An error's body is kept: it says why.
        let keep = if status.is_success() {
            keep
        } else {
            Keep::Body
        };
        let (body, len) = match keep {
            Keep::Body => {
                let b = collect_body(&mut incoming, self.max_response_bytes)
                    .await
                    .map_err(|e| e.details())?;
                let len = b.len() as u64;
                (b, len)
            }
            Keep::Length => (Bytes::new(), drain(&mut incoming).await?),
        };
        if !closes {
            self.pool.give_back(conn);
        }
        Ok(Answer {
            status,
            body,
            len,
            content_type,
            at: clock.now_ns(),
        })
    }
}

/// What a GET keeps of its body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The whole body (a job's JSON).
    Body,
    /// Only its length: a video is read to its end, never held.
    Length,
}

/// Reads `body` to its end; its length.
async fn drain(body: &mut hyper::body::Incoming) -> Result<u64, ErrorDetails> {
    let mut len = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| super::response::stream_error(&e))?;
        len += frame.data_ref().map_or(0, |d| d.len() as u64);
    }
    Ok(len)
}

fn content_type(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
}
