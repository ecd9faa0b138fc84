//! One request's raw facts, as observed by the client. Metrics are derived from these later,
//! off the hot path (see `metrics`).

use serde::Serialize;

/// Which part of the run a request belonged to. Warmup records never enter the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Profiling,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Profiling => "profiling",
        }
    }
}

/// What was sent: known before the run, copied onto the record.
#[derive(Debug, Clone, Default)]
pub struct RequestInput {
    /// Index of the conversation this turn belongs to (AIPerf's `session_num` for single-turn).
    pub session_num: u64,
    pub conversation_id: String,
    /// This session's id, sent as `X-Correlation-ID`: one per session, while a dataset
    /// conversation may be replayed by several sessions.
    pub correlation_id: String,
    pub turn_index: u32,
    /// Client-side token count of the prompt text (text parts only; images excluded).
    pub input_tokens: Option<u64>,
    /// For later turns of a conversation, whose history holds replies only known now: the
    /// texts sent, joined by spaces; the collector counts their tokens.
    pub history_text: Option<String>,
    /// Number of image parts in the payload.
    pub num_images: u32,
    /// Output tokens asked for (`max_tokens`), when the request set a limit.
    pub requested_output_tokens: Option<u64>,
    /// Seconds of the request's first audio clip, when it has one of known length.
    pub audio_seconds: Option<f64>,
    /// When the load generator meant to send it, and how long it waited for a slot.
    pub timing: SendTiming,
    /// `--cache-bust`: the marker the request carried and where (for the raw export).
    pub cache_bust: Option<CacheBustTag>,
}

/// A request's cache-bust marker, as AIPerf's raw export names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheBustTag {
    /// The marker's text; none for a profiling request of a warmup-isolation run.
    pub marker: Option<std::sync::Arc<str>>,
    /// `--cache-bust`'s target (`system_prefix`, `first_turn_suffix`, ...).
    pub target: &'static str,
}

/// Scheduling facts of one send, decided by the load generator before the exchange starts.
/// The actual send time is the record's `start_perf_ns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendTiming {
    /// Monotonic ns the send was scheduled for: its arrival time in open-loop and
    /// fixed-schedule runs, the end of its think time for later turns of a conversation.
    /// `None` in a closed loop, where a request goes as soon as a slot frees.
    pub scheduled_perf_ns: Option<u64>,
    /// Time spent waiting for a concurrency slot after the scheduled time (0 when one was free).
    pub slot_wait_ns: u64,
}

/// Where one request's HTTP time went, stamped by the connection (monotonic ns, run clock).
/// Connection stamps are there only when the connection was made for this request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpTiming {
    /// The request went on a connection that already existed (from the pool).
    pub connection_reused: bool,
    pub dns_start_ns: Option<u64>,
    pub dns_end_ns: Option<u64>,
    /// The whole connect (lookup, TCP, TLS) of a new connection.
    pub connect_start_ns: Option<u64>,
    pub connect_end_ns: Option<u64>,
    /// First and last byte of the request written to the socket.
    pub send_start_ns: Option<u64>,
    pub send_end_ns: Option<u64>,
    /// First byte of the response (its status line), first byte of its body, last byte.
    pub headers_ns: Option<u64>,
    pub first_body_ns: Option<u64>,
    pub last_byte_ns: Option<u64>,
    pub bytes_sent: u64,
    /// Socket writes that carried the request.
    pub chunks_sent: u64,
    /// Response bytes as read from the socket (status line and headers included).
    pub bytes_received: u64,
    /// Socket reads that carried the response.
    pub chunks_received: u64,
}

/// One parsed response event with content (text and/or reasoning). Role-only, empty,
/// finish-only and usage-only events are not stored here: they are not tokens. Its texts
/// are appended to the record's `output_text` and `reasoning_text`: one buffer each per
/// record, not two Strings per event (an allocation per token, freed on another thread).
#[derive(Debug, Clone, Copy, Default)]
pub struct ContentResponse {
    /// Monotonic ns (see `Clock`) when the first bytes of this event arrived.
    pub perf_ns: u64,
    /// Bytes of text this event added to the record's `output_text`.
    pub text_len: usize,
    /// Bytes of reasoning this event added to the record's `reasoning_text`.
    pub reasoning_len: usize,
    /// Images the event carried (image generation).
    pub images: u32,
}

/// Token usage as the server reported it (the last non-empty `usage` object of the stream).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
}

/// Why a request failed. `code` is the HTTP status, or AIPerf's codes for client-side
/// failures (499 cancelled, 408 timeout), or `None` for transport errors without a status.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ErrorDetails {
    pub code: Option<u16>,
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// The bytes of one exchange as they went and came, kept only for `--export-level raw`
/// (references to the transport's buffers, no copies on the request path).
#[derive(Debug, Clone, Default)]
pub struct RawExchange {
    /// The request body as sent.
    pub body: bytes::Bytes,
    /// A streamed response's body frames with their arrival times (monotonic ns).
    pub frames: Vec<(u64, bytes::Bytes)>,
    /// Whole (non-streamed) response bodies: their arrival times, bytes and content types.
    /// One, or each answer of a polled job (video generation).
    pub bodies: Vec<(u64, bytes::Bytes, Option<String>)>,
}

/// What a video generation job reported when it completed (SGLang's fields).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VideoJob {
    pub inference_time_s: Option<f64>,
    pub peak_memory_mb: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub phase: Phase,
    pub input: RequestInput,
    /// `X-Request-ID` sent with the request.
    pub x_request_id: String,
    /// Monotonic ns just before the request was written.
    pub start_perf_ns: u64,
    /// Monotonic ns when the connection took the body to write it (after pool checkout or
    /// connect); `None` when it never did.
    pub sent_perf_ns: Option<u64>,
    /// Monotonic ns when the response headers arrived.
    pub ack_perf_ns: Option<u64>,
    /// HTTP phases of the exchange; `None` when no response came on a connection.
    pub http: Option<HttpTiming>,
    /// Monotonic ns when the response ended (last byte, error or cancellation).
    pub end_perf_ns: u64,
    /// Wall-clock ns since the epoch at `start_perf_ns` (AIPerf's `timestamp_ns`).
    pub start_wall_ns: u64,
    /// Wall-clock ns since the epoch at `end_perf_ns`.
    pub end_wall_ns: u64,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// True when the response was an SSE stream.
    pub streamed: bool,
    /// Content-bearing events in arrival order. For a non-streaming response, one entry
    /// stamped when the whole body had been read.
    pub responses: Vec<ContentResponse>,
    /// All content text joined in arrival order, as AIPerf tokenizes it (once, not per
    /// chunk).
    pub output_text: String,
    /// All reasoning text joined.
    pub reasoning_text: String,
    /// Monotonic ns of the last event of any kind (including usage-only), if any arrived.
    pub last_event_perf_ns: Option<u64>,
    pub usage: Option<Usage>,
    pub error: Option<ErrorDetails>,
    pub was_cancelled: bool,
    /// Monotonic ns when the request was cancelled, if it was.
    pub cancellation_perf_ns: Option<u64>,
    /// What went and came on the wire, for `--export-level raw` only.
    pub raw: Option<Box<RawExchange>>,
    /// Video generation: what the completed job reported.
    pub video: Option<VideoJob>,
}

impl RequestRecord {
    /// A record of a request not sent yet: no times, no response, no error.
    pub fn new(phase: Phase, input: RequestInput, x_request_id: String) -> RequestRecord {
        RequestRecord {
            phase,
            input,
            x_request_id,
            start_perf_ns: 0,
            sent_perf_ns: None,
            ack_perf_ns: None,
            http: None,
            end_perf_ns: 0,
            start_wall_ns: 0,
            end_wall_ns: 0,
            status: None,
            streamed: false,
            responses: Vec::new(),
            output_text: String::new(),
            reasoning_text: String::new(),
            last_event_perf_ns: None,
            usage: None,
            error: None,
            was_cancelled: false,
            cancellation_perf_ns: None,
            raw: None,
            video: None,
        }
    }

    pub fn is_valid(&self) -> bool {
        self.error.is_none()
    }

    /// Adds a content event: its stamp and lengths to `responses`, its texts to the
    /// record's buffers.
    pub fn push_response(&mut self, perf_ns: u64, text: &str, reasoning: &str, images: u32) {
        self.output_text.push_str(text);
        self.reasoning_text.push_str(reasoning);
        self.responses.push(ContentResponse {
            perf_ns,
            text_len: text.len(),
            reasoning_len: reasoning.len(),
            images,
        });
    }

    /// When the load generator released the send (AIPerf's credit): its scheduled time
    /// plus any wait for a concurrency slot; in a closed loop the send itself, which goes
    /// the moment a slot frees.
    pub fn issued_perf_ns(&self) -> u64 {
        let t = &self.input.timing;
        t.scheduled_perf_ns
            .map_or(self.start_perf_ns, |at| at + t.slot_wait_ns)
    }

    /// Actual send minus scheduled send, in ns (negative would mean early; never happens
    /// with the precise timer). `None` when the send had no schedule.
    pub fn send_lag_ns(&self) -> Option<i64> {
        self.input
            .timing
            .scheduled_perf_ns
            .map(|s| self.start_perf_ns as i64 - s as i64)
    }
}
