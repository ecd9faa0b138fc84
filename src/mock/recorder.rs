//! `--record-requests`: one JSON line per request with the server's own timestamps.
//!
//! Request handling only fills a `RequestTrace` with `Instant`s and sends it over a channel; a
//! background thread converts the instants to wall-clock ns (one anchor + the monotonic
//! clock), serializes and writes through a `BufWriter`. The writer flushes whenever the
//! channel runs empty, so the file is current while the server idles, and once more on stop.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use serde::Serialize;

use crate::clock::Clock;

/// What the server knows about one request when it is done with it.
#[derive(Debug, Clone)]
pub struct RequestTrace {
    pub endpoint: &'static str,
    pub status: u16,
    pub stream: bool,
    /// Empty when the request was rejected before its model was known.
    pub model: String,
    pub x_request_id: Option<String>,
    /// The client's port: requests on one kept-alive connection share it.
    pub peer_port: Option<u16>,
    /// When the whole request body had been read.
    pub received: Instant,
    /// When it got a serving slot (`--max-concurrency`; right after `received` without a
    /// limit); `None` when it was rejected or its client left while it was queued.
    pub admitted: Option<Instant>,
    /// When the first output token's bytes were handed to the connection.
    pub first_token: Option<Instant>,
    /// When the last output token's bytes were handed to the connection.
    pub last_token: Option<Instant>,
    pub text_tokens: u64,
    pub image_tokens: u64,
    pub template_tokens: u64,
    pub image_sizes: Vec<(u32, u32)>,
    /// The chat messages' roles, in order (empty for text completions).
    pub roles: Vec<String>,
    /// Output tokens handed to the connection (fewer than planned if the client left).
    pub output_tokens: u64,
    /// False when the client went away before the response was complete.
    pub completed: bool,
    pub error: Option<String>,
    /// Prompt tokens found in the prefix cache (`--prefix-cache-blocks`); None when off.
    pub cached_tokens: Option<u64>,
}

/// One line of the record file.
#[derive(Debug, Serialize)]
struct RecordLine<'a> {
    endpoint: &'a str,
    status: u16,
    stream: bool,
    model: Option<&'a str>,
    x_request_id: Option<&'a str>,
    peer_port: Option<u16>,
    received_ns: u64,
    admitted_ns: Option<u64>,
    first_token_ns: Option<u64>,
    last_token_ns: Option<u64>,
    prompt_tokens: u64,
    text_tokens: u64,
    image_tokens: u64,
    template_tokens: u64,
    num_images: usize,
    image_sizes: &'a [(u32, u32)],
    roles: &'a [String],
    output_tokens: u64,
    completed: bool,
    error: Option<&'a str>,
    /// Written only when the prefix cache is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    cached_tokens: Option<u64>,
}

enum Msg {
    Trace(Box<RequestTrace>),
    Stop,
}

/// Sending side, cloned into request handling.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Msg>,
}

impl Recorder {
    pub fn record(&self, trace: Box<RequestTrace>) {
        // The writer only goes away at shutdown; a late trace is then dropped.
        let _ = self.tx.send(Msg::Trace(trace));
    }
}

/// Owns the writer thread.
#[derive(Debug)]
pub struct RecorderHandle {
    tx: mpsc::Sender<Msg>,
    thread: JoinHandle<io::Result<()>>,
}

impl RecorderHandle {
    /// Writes everything received so far, flushes and stops the writer. Blocking.
    pub fn finish(self) -> io::Result<()> {
        let _ = self.tx.send(Msg::Stop);
        self.thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("record writer panicked")))
    }
}

/// Creates (truncates) `path` and starts the writer thread.
pub fn spawn(path: &Path, clock: Clock) -> io::Result<(Recorder, RecorderHandle)> {
    let file = File::create(path)?;
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("mock-record-writer".into())
        .spawn(move || write_loop(rx, BufWriter::with_capacity(64 * 1024, file), clock))?;
    Ok((Recorder { tx: tx.clone() }, RecorderHandle { tx, thread }))
}

fn write_loop(rx: mpsc::Receiver<Msg>, mut out: BufWriter<File>, clock: Clock) -> io::Result<()> {
    loop {
        let msg = match rx.try_recv() {
            Ok(msg) => msg,
            Err(mpsc::TryRecvError::Empty) => {
                out.flush()?;
                match rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                }
            }
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        match msg {
            Msg::Trace(t) => write_line(&mut out, &t, &clock)?,
            Msg::Stop => break,
        }
    }
    out.flush()
}

fn write_line(out: &mut impl Write, t: &RequestTrace, clock: &Clock) -> io::Result<()> {
    let wall = |i: Instant| clock.wall_ns(clock.ns_of(i));
    let line = RecordLine {
        endpoint: t.endpoint,
        status: t.status,
        stream: t.stream,
        model: (!t.model.is_empty()).then_some(t.model.as_str()),
        x_request_id: t.x_request_id.as_deref(),
        peer_port: t.peer_port,
        received_ns: wall(t.received),
        admitted_ns: t.admitted.map(wall),
        first_token_ns: t.first_token.map(wall),
        last_token_ns: t.last_token.map(wall),
        prompt_tokens: t.text_tokens + t.image_tokens + t.template_tokens,
        text_tokens: t.text_tokens,
        image_tokens: t.image_tokens,
        template_tokens: t.template_tokens,
        num_images: t.image_sizes.len(),
        image_sizes: &t.image_sizes,
        roles: &t.roles,
        output_tokens: t.output_tokens,
        completed: t.completed,
        error: t.error.as_deref(),
        cached_tokens: t.cached_tokens,
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn writes_one_line_per_trace_with_wall_clock_ns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let clock = Clock::new();
        let (rec, handle) = spawn(&path, clock).unwrap();
        let received = clock.anchor() + Duration::from_millis(5);
        for i in 0..3u64 {
            rec.record(Box::new(RequestTrace {
                endpoint: "chat",
                status: 200,
                stream: true,
                model: "m".into(),
                x_request_id: Some(format!("r{i}")),
                peer_port: None,
                received,
                admitted: Some(received + Duration::from_millis(2)),
                first_token: Some(received + Duration::from_millis(20)),
                last_token: Some(received + Duration::from_millis(30)),
                text_tokens: 3,
                image_tokens: 326,
                template_tokens: 8,
                image_sizes: vec![(512, 512)],
                roles: vec!["user".into()],
                output_tokens: 3,
                completed: true,
                error: None,
                cached_tokens: None,
            }));
        }
        handle.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        let l = &lines[2];
        assert_eq!(l["x_request_id"], "r2");
        assert_eq!(l["prompt_tokens"], 3 + 326 + 8);
        assert_eq!(l["num_images"], 1);
        assert_eq!(l["image_sizes"], serde_json::json!([[512, 512]]));
        let received_ns = l["received_ns"].as_u64().unwrap();
        assert_eq!(received_ns, clock.wall_ns(5_000_000));
        assert_eq!(l["admitted_ns"].as_u64().unwrap() - received_ns, 2_000_000);
        assert_eq!(
            l["first_token_ns"].as_u64().unwrap() - received_ns,
            20_000_000
        );
        assert_eq!(
            l["last_token_ns"].as_u64().unwrap() - received_ns,
            30_000_000
        );
    }
}
