//! The video generation job API (OpenAI's `/v1/videos`, as SGLang serves it):
//! `POST /v1/videos` (a multipart form or JSON with `prompt`, `model`, optional `size` and
//! `seconds`) starts a job and answers it `queued`; `GET /v1/videos/{id}` shows it
//! `in_progress` (with `progress`) until `--ttft` + 10 x `--itl` ms have passed, then
//! `completed` with SGLang's `inference_time_s` and `peak_memory_mb`;
//! `GET /v1/videos/{id}/content` returns the "video" (`video/mp4`, 64 KiB per second of
//! video). A prompt containing `fail-video` makes the job end `failed`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Bytes of "video" per second of it.
const BYTES_PER_SECOND: usize = 64 * 1024;
/// What every completed job reports as its peak GPU memory.
pub const PEAK_MEMORY_MB: f64 = 2048.5;
/// Jobs kept at most; the oldest half goes when it is reached.
const MAX_JOBS: usize = 65_536;

#[derive(Debug, Clone)]
struct Job {
    created: Instant,
    created_unix: u64,
    model: String,
    size: String,
    seconds: String,
    fail: bool,
}

/// The jobs started, by id.
#[derive(Debug, Default)]
pub struct VideoJobs {
    jobs: Mutex<HashMap<String, Job>>,
    next: std::sync::atomic::AtomicU64,
}

/// An answer: HTTP status and the JSON body, or the video's bytes.
pub enum Answer {
    Json(u16, Value),
    Video(Vec<u8>),
}

impl VideoJobs {
    /// `POST /v1/videos`.
    pub fn submit(
        &self,
        content_type: &str,
        body: &[u8],
        default_model: &str,
        now_unix: u64,
    ) -> Answer {
        let fields = match read_fields(content_type, body) {
            Ok(f) => f,
            Err(e) => return error(400, &e),
        };
        let Some(prompt) = fields.get("prompt").filter(|p| !p.is_empty()) else {
            return error(400, "'prompt' is required");
        };
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("video_{n:08x}");
        let job = Job {
            created: Instant::now(),
            created_unix: now_unix,
            model: fields
                .get("model")
                .cloned()
                .unwrap_or_else(|| default_model.to_string()),
            size: fields
                .get("size")
                .cloned()
                .unwrap_or_else(|| "1280x720".into()),
            seconds: fields.get("seconds").cloned().unwrap_or_else(|| "4".into()),
            fail: prompt.contains("fail-video"),
        };
        let answer = job_json(&id, &job, "queued", 0);
        let mut jobs = self.jobs.lock().expect("not poisoned");
        if jobs.len() >= MAX_JOBS {
            let mut ages: Vec<Instant> = jobs.values().map(|j| j.created).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            jobs.retain(|_, j| j.created > cut);
        }
        jobs.insert(id, job);
        Answer::Json(200, answer)
    }

    /// `GET /v1/videos/{id}`: the job takes `duration` from its start.
    pub fn status(&self, id: &str, duration: Duration) -> Answer {
        let Some(job) = self.job(id) else {
            return error(404, &format!("video '{id}' not found"));
        };
        let elapsed = job.created.elapsed();
        if elapsed < duration {
            let pct = (elapsed.as_secs_f64() / duration.as_secs_f64() * 100.0) as u64;
            return Answer::Json(200, job_json(id, &job, "in_progress", pct.min(99)));
        }
        if job.fail {
            let mut v = job_json(id, &job, "failed", 100);
            v["error"] = json!({"code": "generation_failed", "message": "the prompt asked the mock to fail"});
            return Answer::Json(200, v);
        }
        let mut v = job_json(id, &job, "completed", 100);
        v["completed_at"] = json!(job.created_unix + duration.as_secs());
        v["inference_time_s"] = json!(duration.as_secs_f64());
        v["peak_memory_mb"] = json!(PEAK_MEMORY_MB);
        Answer::Json(200, v)
    }

    /// `GET /v1/videos/{id}/content`: only a completed job has one.
    pub fn content(&self, id: &str, duration: Duration) -> Answer {
        let Some(job) = self.job(id) else {
            return error(404, &format!("video '{id}' not found"));
        };
        if job.fail || job.created.elapsed() < duration {
            return error(400, &format!("video '{id}' is not completed"));
        }
        let seconds: f64 = job.seconds.parse().unwrap_or(4.0);
        let len = (seconds.max(0.0) * BYTES_PER_SECOND as f64) as usize;
        Answer::Video((0..len).map(|i| (i % 251) as u8).collect())
    }

    fn job(&self, id: &str) -> Option<Job> {
        self.jobs.lock().expect("not poisoned").get(id).cloned()
    }
}

fn job_json(id: &str, job: &Job, status: &str, progress: u64) -> Value {
    json!({
        "id": id,
        "object": "video",
        "model": job.model,
        "status": status,
        "progress": progress,
        "created_at": job.created_unix,
        "size": job.size,
        "seconds": job.seconds,
        "quality": "standard",
    })
}

fn error(status: u16, message: &str) -> Answer {
    Answer::Json(
        status,
        json!({"error": {"message": message, "type": "BadRequestError", "code": status}}),
    )
}

/// The request's fields: a multipart form's text fields, or a JSON object's values.
fn read_fields(content_type: &str, body: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    if content_type.starts_with("multipart/form-data") {
        for p in super::audio::form_parts(content_type, body)? {
            if p.filename.is_none() {
                out.insert(
                    p.name.to_string(),
                    String::from_utf8_lossy(p.data).into_owned(),
                );
            }
        }
        return Ok(out);
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
    let obj = v.as_object().ok_or("the body must be a JSON object")?;
    for (k, v) in obj {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.insert(k.clone(), text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(a: Answer) -> (u16, Value) {
        match a {
            Answer::Json(s, v) => (s, v),
            Answer::Video(_) => panic!("not JSON"),
        }
    }

    #[test]
    fn a_job_is_queued_runs_and_completes_with_its_video() {
        let jobs = VideoJobs::default();
        let (status, v) = json(jobs.submit(
            "application/json",
            br#"{"prompt": "a cat", "model": "wan", "seconds": 2}"#,
            "m",
            100,
        ));
        assert_eq!((status, v["status"].as_str()), (200, Some("queued")));
        assert_eq!(v["seconds"], "2");
        let id = v["id"].as_str().unwrap().to_string();
        let long = Duration::from_secs(3600);
        let (_, v) = json(jobs.status(&id, long));
        assert_eq!(v["status"], "in_progress");
        assert_eq!(json(jobs.content(&id, long)).0, 400);
        let (_, v) = json(jobs.status(&id, Duration::ZERO));
        assert_eq!(v["status"], "completed");
        assert_eq!(v["peak_memory_mb"], PEAK_MEMORY_MB);
        match jobs.content(&id, Duration::ZERO) {
            Answer::Video(b) => assert_eq!(b.len(), 2 * BYTES_PER_SECOND),
            Answer::Json(..) => panic!("a video"),
        }
        assert_eq!(json(jobs.status("nope", Duration::ZERO)).0, 404);
        assert_eq!(json(jobs.submit("application/json", b"{}", "m", 0)).0, 400);
        let (_, v) = json(jobs.submit("application/json", br#"{"prompt": "fail-video"}"#, "m", 0));
        let (_, v) = json(jobs.status(v["id"].as_str().unwrap(), Duration::ZERO));
        assert_eq!(v["status"], "failed");
    }
}
