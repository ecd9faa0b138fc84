//! `profile_export_raw.jsonl` (`--export-level raw`): one line per request with what went
//! and came on the wire, in AIPerf's `RawRecordInfo` layout: the record's `metadata` (as in
//! `profile_export.jsonl`), `start_perf_ns`, `request_headers` (credentials redacted),
//! `status`, `responses` (each SSE message as its fields, or the whole body as text), the
//! `error`, `--cache-bust`'s `cache_bust_marker` and `cache_bust_target`, and the request
//! body as sent (`payload`; a multipart form as inputs.json shows
//! it).
//!
//! The transport only keeps references to the bytes it sent and received; the lines are
//! formatted here, on the collector's thread, and written in batches.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::clock::Clock;
use crate::endpoint::audio_transcription::form_as_json;
use crate::metrics::{RecordMetrics, RecordSink};
use crate::record::{RawExchange, RequestRecord};
use crate::transport::sse::SseFramer;

use super::jsonl::{LineLayout, push_metadata};

/// What every raw line shows of the request's headers.
#[derive(Debug, Clone, Default)]
pub struct RawOptions {
    /// The headers every request carries (their credentials already redacted), in order.
    pub headers: Vec<(String, String)>,
    /// The header that carries each request's session id (`--session-header`).
    pub session_header: String,
}

/// Lines are written to the file in batches of about this many bytes.
const BATCH_BYTES: usize = 1024 * 1024;

pub struct RawWriter {
    file: File,
    buffer: Vec<u8>,
    clock: Clock,
    layout: LineLayout,
    options: RawOptions,
}

impl RawWriter {
    pub fn create_at(
        path: &Path,
        clock: Clock,
        layout: LineLayout,
        options: RawOptions,
    ) -> std::io::Result<RawWriter> {
        Ok(RawWriter {
            file: File::create(path)?,
            buffer: Vec::with_capacity(BATCH_BYTES + 4096),
            clock,
            layout,
            options,
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

impl RecordSink for RawWriter {
    fn write(&mut self, record: &RequestRecord, _metrics: &RecordMetrics) -> std::io::Result<()> {
        format_raw_line(
            record,
            &self.clock,
            self.layout,
            &self.options,
            &mut self.buffer,
        );
        if self.buffer.len() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<()> {
        self.flush()?;
        self.file.sync_data()
    }
}

fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(&mut *out, value).expect("JSON into memory");
}

/// One raw line for `record`.
pub fn format_raw_line(
    record: &RequestRecord,
    clock: &Clock,
    layout: LineLayout,
    options: &RawOptions,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"metadata\":");
    push_metadata(record, clock, layout, out);
    out.extend_from_slice(b",\"start_perf_ns\":");
    push_json(out, &record.start_perf_ns);

    let mut headers = serde_json::Map::new();
    for (k, v) in &options.headers {
        headers.insert(k.clone(), v.clone().into());
    }
    headers.insert("X-Request-ID".into(), record.x_request_id.clone().into());
    if !record.input.correlation_id.is_empty() {
        headers.insert(
            options.session_header.clone(),
            record.input.correlation_id.clone().into(),
        );
    }
    out.extend_from_slice(b",\"request_headers\":");
    push_json(out, &headers);

    if let Some(status) = record.status {
        out.extend_from_slice(b",\"status\":");
        push_json(out, &status);
    }
    out.extend_from_slice(b",\"responses\":[");
    if let Some(raw) = &record.raw {
        push_responses(raw, out);
    }
    out.push(b']');
    if let Some(e) = &record.error {
        out.extend_from_slice(b",\"error\":");
        push_json(
            out,
            &serde_json::json!({"code": e.code, "type": e.kind, "message": e.message}),
        );
    }
    if let Some(tag) = &record.input.cache_bust {
        if let Some(marker) = &tag.marker {
            out.extend_from_slice(b",\"cache_bust_marker\":");
            push_json(out, &**marker);
        }
        out.extend_from_slice(b",\"cache_bust_target\":");
        push_json(out, tag.target);
    }
    // The body as sent: JSON verbatim; a multipart form as inputs.json shows it (each
    // field by name, a file as `{"filename", "content_type", "base64"}`).
    if let Some(raw) = record.raw.as_deref().filter(|r| !r.body.is_empty()) {
        out.extend_from_slice(b",\"payload\":");
        if serde_json::from_slice::<serde::de::IgnoredAny>(&raw.body).is_ok() {
            out.extend_from_slice(&raw.body);
        } else if let Some(form) = form_as_json(&raw.body) {
            push_json(out, &form);
        } else {
            push_json(out, &String::from_utf8_lossy(&raw.body));
        }
    }
    out.extend_from_slice(b"}\n");
}

/// The responses of an exchange: each whole body as `{"perf_ns", "text", "content_type"}`,
/// and each SSE message as `{"perf_ns", "packets": [{"name", "value"}]}` (framed again from
/// the frames as they arrived).
fn push_responses(raw: &RawExchange, out: &mut Vec<u8>) {
    let mut first = true;
    let mut comma = |out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
    };
    for (perf_ns, body, content_type) in &raw.bodies {
        comma(out);
        let mut v = serde_json::json!({
            "perf_ns": perf_ns,
            "text": String::from_utf8_lossy(body),
        });
        if let Some(ct) = content_type {
            v["content_type"] = ct.clone().into();
        }
        push_json(out, &v);
    }
    let mut framer = SseFramer::new();
    let mut on_event = |ev: crate::transport::sse::SseEvent<'_>| {
        let mut packets = Vec::with_capacity(2);
        if let Some(name) = ev.event {
            packets.push(serde_json::json!({"name": "event", "value": name.trim()}));
        }
        packets.push(serde_json::json!({
            "name": "data",
            "value": String::from_utf8_lossy(ev.data).trim(),
        }));
        comma(out);
        push_json(
            out,
            &serde_json::json!({"perf_ns": ev.arrival_ns, "packets": packets}),
        );
    };
    for (arrival, frame) in &raw.frames {
        framer.feed(frame, *arrival, &mut on_event);
    }
    framer.finish(&mut on_event);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Phase, RequestInput};
    use bytes::Bytes;
    use serde_json::{Value, json};

    fn line(record: &RequestRecord) -> Value {
        let mut out = Vec::new();
        let options = RawOptions {
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("authorization".into(), "<redacted>".into()),
            ],
            session_header: "X-Correlation-ID".into(),
        };
        format_raw_line(
            record,
            &Clock::new(),
            LineLayout::default(),
            &options,
            &mut out,
        );
        assert!(out.ends_with(b"}\n") && out.iter().filter(|&&b| b == b'\n').count() == 1);
        serde_json::from_slice(&out).unwrap()
    }

    fn record(raw: RawExchange) -> RequestRecord {
        let input = RequestInput {
            correlation_id: "c-1".into(),
            ..Default::default()
        };
        let mut r = RequestRecord::new(Phase::Profiling, input, "r-1".into());
        r.start_perf_ns = 1_000;
        r.status = Some(200);
        r.raw = Some(Box::new(raw));
        r
    }

    #[test]
    fn a_stream_is_framed_again_into_its_messages_with_their_arrival_times() {
        let r = record(RawExchange {
            body: Bytes::from_static(br#"{"model":"m","stream":true}"#),
            // The second message is split over two frames: it arrived with the first.
            frames: vec![
                (10, Bytes::from_static(b"data: {\"a\":1}\n\ndata: {\"b\"")),
                (
                    20,
                    Bytes::from_static(b":2}\n\nevent: done\ndata: [DONE]\n\n"),
                ),
            ],
            bodies: Vec::new(),
        });
        let v = line(&r);
        assert_eq!(v["start_perf_ns"], 1_000);
        assert_eq!(v["status"], 200);
        assert_eq!(v["payload"], json!({"model": "m", "stream": true}));
        assert_eq!(v["metadata"]["x_request_id"], "r-1");
        assert_eq!(
            v["request_headers"],
            json!({"content-type": "application/json", "authorization": "<redacted>",
                   "X-Request-ID": "r-1", "X-Correlation-ID": "c-1"})
        );
        assert_eq!(
            v["responses"],
            json!([
                {"perf_ns": 10, "packets": [{"name": "data", "value": "{\"a\":1}"}]},
                {"perf_ns": 10, "packets": [{"name": "data", "value": "{\"b\":2}"}]},
                {"perf_ns": 20, "packets": [{"name": "event", "value": "done"},
                                            {"name": "data", "value": "[DONE]"}]},
            ])
        );
        assert!(v.get("error").is_none());
    }

    #[test]
    fn a_whole_body_is_one_text_response_and_an_error_is_kept() {
        let mut r = record(RawExchange {
            body: Bytes::from_static(b"{}"),
            frames: Vec::new(),
            bodies: vec![(
                50,
                Bytes::from_static(b"{\"x\":1}"),
                Some("application/json".into()),
            )],
        });
        r.error = Some(crate::record::ErrorDetails {
            code: Some(500),
            kind: "ServerError".into(),
            message: "boom".into(),
        });
        let v = line(&r);
        assert_eq!(
            v["responses"],
            json!([{"perf_ns": 50, "text": "{\"x\":1}", "content_type": "application/json"}])
        );
        assert_eq!(
            v["error"],
            json!({"code": 500, "type": "ServerError", "message": "boom"})
        );
        assert_eq!(v["payload"], json!({}));
    }
}
