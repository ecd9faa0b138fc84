//! Cost of formatting one `profile_export.jsonl` line: the library's formatter against a
//! copy of the hand-written formatter it replaced (one `push_key`/`push_json` pair per
//! field), measured in the same run. Both must produce the same bytes for every record.
//!
//! Records are streamed chat records of `BENCH_CHUNKS` content chunks (default 100), so the
//! line carries the inter-chunk latency list; every 10th has a schedule (open loop) and
//! every 50th failed (error object, `error_isl` only). `BENCH_RECORDS` (2000) records are
//! formatted per round, `BENCH_ROUNDS` (15) rounds alternate the two formatters; the median
//! ns/record is reported.
//!
//! Run: `cargo bench --bench jsonl_format`

use std::hint::black_box;
use std::time::Instant;

use aiperf::clock::Clock;
use aiperf::export::jsonl::{RECORD_PROCESSOR_ID, WORKER_ID, format_record_line};
use aiperf::metrics::{MetricId, RecordMetrics, RecordOptions};
use aiperf::record::{
    ContentResponse, ErrorDetails, Phase, RequestInput, RequestRecord, SendTiming, Usage,
};
use aiperf::tokenizer::Tokenizer;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Record `i`: times jittered per record so the numbers differ from line to line.
fn record(i: u64, chunks: u64) -> RequestRecord {
    let input = RequestInput {
        session_num: i,
        conversation_id: format!("conv-{i}"),
        correlation_id: format!("session-{i}-3f2a9c1e"),
        turn_index: 0,
        input_tokens: Some(550),
        requested_output_tokens: Some(chunks),
        timing: SendTiming {
            scheduled_perf_ns: (i % 10 == 0).then(|| i * 1_000_000),
            slot_wait_ns: if i % 10 == 0 { 1_234 } else { 0 },
        },
        ..RequestInput::default()
    };
    let mut r = RequestRecord::new(Phase::Profiling, input, format!("req-{i}-8d41b7f0"));
    let start = i * 1_000_000 + 17_321 * (i % 7);
    r.start_perf_ns = start;
    r.sent_perf_ns = Some(start + 41_003);
    r.ack_perf_ns = Some(start + 20_118_765);
    r.start_wall_ns = 1_765_000_000_000_000_000 + start;
    r.status = Some(200);
    r.streamed = true;
    if i % 50 == 49 {
        r.error = Some(ErrorDetails {
            code: Some(499),
            kind: "RequestCancellationError".into(),
            message: "Request was cancelled after 0.020 seconds".into(),
        });
        r.was_cancelled = true;
        r.cancellation_perf_ns = Some(start + 20_000_000);
        r.end_perf_ns = start + 20_000_000;
    } else {
        let mut t = start + 20_118_765;
        for c in 0..chunks {
            t += 4_900_000 + (c * 7919 + i * 104_729) % 300_000;
            r.responses.push(ContentResponse {
                perf_ns: t,
                text: " the".into(),
                reasoning: String::new(),
            });
        }
        r.last_event_perf_ns = Some(t + 50_000);
        r.end_perf_ns = t + 60_000;
        r.usage = Some(Usage {
            prompt_tokens: Some(550),
            completion_tokens: Some(chunks),
            total_tokens: Some(550 + chunks),
            reasoning_tokens: None,
        });
    }
    r.end_wall_ns = 1_765_000_000_000_000_000 + r.end_perf_ns;
    r
}

// The hand-written formatter as it was before the serde derive, kept as the reference.

fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(&mut *out, value).expect("JSON into memory");
}

fn push_key(out: &mut Vec<u8>, key: &str) {
    out.push(b'"');
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

fn push_value(out: &mut Vec<u8>, value: f64, integer: bool) {
    if integer && value.fract() == 0.0 && value.abs() < 9.0e15 {
        push_json(out, &(value as i64));
    } else {
        push_json(out, &value);
    }
}

fn hand_written_line(
    record: &RequestRecord,
    metrics: &RecordMetrics,
    clock: &Clock,
    out: &mut Vec<u8>,
) {
    let input = &record.input;
    out.extend_from_slice(b"{\"metadata\":{");
    push_key(out, "session_num");
    push_json(out, &input.session_num);
    out.push(b',');
    push_key(out, "x_request_id");
    push_json(out, &record.x_request_id);
    out.push(b',');
    push_key(out, "x_correlation_id");
    push_json(out, &input.correlation_id);
    out.push(b',');
    push_key(out, "conversation_id");
    push_json(out, &input.conversation_id);
    out.push(b',');
    push_key(out, "turn_index");
    push_json(out, &input.turn_index);
    out.push(b',');
    push_key(out, "request_start_ns");
    push_json(out, &record.start_wall_ns);
    out.push(b',');
    push_key(out, "request_sent_ns");
    push_json(out, &record.sent_perf_ns.map(|t| clock.wall_ns(t)));
    out.push(b',');
    push_key(out, "request_ack_ns");
    push_json(out, &record.ack_perf_ns.map(|t| clock.wall_ns(t)));
    out.push(b',');
    push_key(out, "request_end_ns");
    push_json(out, &record.end_wall_ns);
    out.push(b',');
    push_key(out, "worker_id");
    push_json(out, WORKER_ID);
    out.push(b',');
    push_key(out, "record_processor_id");
    push_json(out, RECORD_PROCESSOR_ID);
    out.push(b',');
    push_key(out, "benchmark_phase");
    push_json(out, record.phase.as_str());
    out.push(b',');
    push_key(out, "was_cancelled");
    push_json(out, &record.was_cancelled);
    out.push(b',');
    push_key(out, "cancellation_time_ns");
    push_json(out, &record.cancellation_perf_ns.map(|t| clock.wall_ns(t)));
    let timing = &input.timing;
    out.push(b',');
    push_key(out, "scheduled_ns");
    push_json(out, &timing.scheduled_perf_ns.map(|t| clock.wall_ns(t)));
    out.push(b',');
    push_key(out, "send_lag_ns");
    push_json(out, &record.send_lag_ns());
    out.push(b',');
    push_key(out, "slot_wait_ns");
    push_json(out, &timing.slot_wait_ns);
    out.extend_from_slice(b"},\"metrics\":{");

    let mut first = true;
    let mut separator = |out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
    };
    for (id, value) in metrics.scalars() {
        let def = id.def();
        separator(out);
        push_key(out, def.tag);
        out.extend_from_slice(b"{\"value\":");
        push_value(out, value / def.scale, def.integer);
        out.extend_from_slice(b",\"unit\":");
        push_json(out, def.unit);
        out.push(b'}');
    }
    if let Some(gaps) = &metrics.inter_chunk_latency {
        let def = MetricId::InterChunkLatency.def();
        separator(out);
        push_key(out, def.tag);
        out.extend_from_slice(b"{\"value\":[");
        for (i, gap) in gaps.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_value(out, gap / def.scale, false);
        }
        out.extend_from_slice(b"],\"unit\":");
        push_json(out, def.unit);
        out.push(b'}');
    }
    out.extend_from_slice(b"},\"error\":");
    match &record.error {
        None => out.extend_from_slice(b"null"),
        Some(e) => {
            out.push(b'{');
            push_key(out, "code");
            push_json(out, &e.code);
            out.push(b',');
            push_key(out, "type");
            push_json(out, &e.kind);
            out.push(b',');
            push_key(out, "message");
            push_json(out, &e.message);
            out.push(b'}');
        }
    }
    out.extend_from_slice(b"}\n");
}

type Formatter = fn(&RequestRecord, &RecordMetrics, &Clock, &mut Vec<u8>);

/// Formats every record once, reusing one line buffer as the JSONL writer does; returns
/// ns per record.
fn time_round(f: Formatter, records: &[(RequestRecord, RecordMetrics)], clock: &Clock) -> f64 {
    let mut line = Vec::with_capacity(1024);
    let mut bytes = 0;
    let t = Instant::now();
    for (r, m) in records {
        line.clear();
        f(black_box(r), black_box(m), clock, &mut line);
        bytes += black_box(&line).len();
    }
    let ns = t.elapsed().as_nanos() as f64 / records.len() as f64;
    black_box(bytes);
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("BENCH_RECORDS", if quick { 200 } else { 2000 });
    let rounds = env_usize("BENCH_ROUNDS", if quick { 1 } else { 15 });
    let chunks = env_usize("BENCH_CHUNKS", 100) as u64;

    let tokenizer = Tokenizer::builtin().unwrap();
    let opts = RecordOptions {
        streaming: true,
        use_server_token_count: false,
    };
    let records: Vec<(RequestRecord, RecordMetrics)> = (0..n as u64)
        .map(|i| {
            let r = record(i, chunks);
            let m = RecordMetrics::compute(&r, &tokenizer, opts);
            (r, m)
        })
        .collect();
    let clock = Clock::new();

    // Same bytes from both, for every record.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut total_bytes = 0;
    for (r, m) in &records {
        a.clear();
        b.clear();
        format_record_line(r, m, &clock, &mut a);
        hand_written_line(r, m, &clock, &mut b);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "formatters disagree"
        );
        total_bytes += b.len();
    }
    let line_bytes = total_bytes / n;

    let (mut lib, mut reference) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer cache.
        if round % 2 == 0 {
            lib.push(time_round(format_record_line, &records, &clock));
            reference.push(time_round(hand_written_line, &records, &clock));
        } else {
            reference.push(time_round(hand_written_line, &records, &clock));
            lib.push(time_round(format_record_line, &records, &clock));
        }
    }
    let (l, r) = (median(lib.clone()), median(reference.clone()));
    println!(
        "jsonl_format: {n} records x {chunks} chunks (mean line {line_bytes} bytes), {rounds} rounds (median)"
    );
    println!("  export::jsonl::format_record_line: {l:>7.0} ns/record  (rounds: {lib:.0?})");
    println!("  hand-written reference           : {r:>7.0} ns/record  (rounds: {reference:.0?})");
    println!("  ratio library/reference: {:.3}", l / r);
}
