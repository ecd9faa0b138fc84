//! Cost of formatting one `profile_export.jsonl` line: the library's hand-written formatter
//! (one key/value write per field) against the same line from borrowed `#[derive(Serialize)]`
//! structs, measured in the same run. Both must produce the same bytes for every record.
//! The derive version is what `export::jsonl` would use if it were not slower; see the note
//! on `format_record_line`.
//!
//! Records are streamed chat records of `BENCH_CHUNKS` content chunks (default 100), so the
//! line carries the inter-chunk latency list; every 10th has a schedule (open loop) and
//! every 50th failed (error object, `error_isl` only). `BENCH_RECORDS` (2000) records are
//! formatted per round, `BENCH_ROUNDS` (15) rounds alternate the two formatters. The best
//! round is the figure to compare on a busy machine (other processes only add time); the
//! median is printed next to it.
//!
//! Run: `cargo bench --bench jsonl_format`

use std::hint::black_box;
use std::time::Instant;

use aiperf::api::{
    Clock, ErrorDetails, MetricId, Phase, RECORD_PROCESSOR_ID, RecordMetrics, RecordOptions,
    RequestInput, RequestRecord, SendTiming, Tokenizer, Usage, WORKER_ID, format_record_line,
};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Record `i`: times jittered per record so the numbers differ from line to line.
fn record(i: u64, chunks: u64) -> RequestRecord {
    let scheduled = i.is_multiple_of(10);
    let input = RequestInput {
        session_num: i,
        conversation_id: format!("conv-{i}"),
        correlation_id: format!("session-{i}-3f2a9c1e"),
        turn_index: 0,
        input_tokens: Some(550),
        timing: SendTiming {
            scheduled_perf_ns: scheduled.then(|| i * 1_000_000),
            slot_wait_ns: if scheduled { 1_234 } else { 0 },
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
            r.push_response(t, " the", "", 0);
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

// The candidate: the same line from borrowed `#[derive(Serialize)]` structs.

/// One line of `profile_export.jsonl`. This struct and the ones below borrow from the
/// record; their field order is the key order of the line, and a `None` is left out, as in
/// AIPerf 0.13's records.
#[derive(Serialize)]
struct Line<'a> {
    metadata: Metadata<'a>,
    metrics: Metrics<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorDetails>,
}

/// AIPerf's metadata order; fields without a value are left out.
#[derive(Serialize)]
struct Metadata<'a> {
    session_num: u64,
    x_request_id: &'a str,
    /// One id per session (a dataset conversation can be replayed by several sessions).
    x_correlation_id: &'a str,
    conversation_id: &'a str,
    turn_index: u32,
    credit_issued_ns: u64,
    request_start_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sent_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_ack_ns: Option<u64>,
    request_end_ns: u64,
    worker_id: &'static str,
    record_processor_id: &'static str,
    benchmark_phase: &'static str,
    phase_index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    profiling_index: Option<u32>,
    phase_name: &'static str,
    phase_kind: &'static str,
    was_cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancellation_time_ns: Option<u64>,
    agent_depth: u32,
    root_correlation_id: &'a str,
    // Not in AIPerf's schema: when the send was due, how late it went, and how long it
    // waited for a concurrency slot (0 in a closed loop).
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduled_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    send_lag_ns: Option<i64>,
    slot_wait_ns: u64,
}

/// The record's metrics keyed by tag: scalars in catalogue order, then the inter-chunk
/// latency list. Written by hand because the keys are the metrics present.
struct Metrics<'a>(&'a RecordMetrics);

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (id, value) in self.0.scalars() {
            let def = id.def();
            let value = MetricValue::new(value / def.scale, def.integer);
            map.serialize_entry(
                def.tag,
                &Metric {
                    value,
                    unit: def.unit,
                },
            )?;
        }
        if let Some(gaps) = &self.0.inter_chunk_latency {
            let def = MetricId::InterChunkLatency.def();
            let value = Gaps {
                gaps,
                scale: def.scale,
            };
            map.serialize_entry(
                def.tag,
                &Metric {
                    value,
                    unit: def.unit,
                },
            )?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct Metric<V> {
    value: V,
    unit: &'static str,
}

/// A metric value in display units: whole-number metrics as integers, others as floats.
#[derive(Serialize)]
#[serde(untagged)]
enum MetricValue {
    Integer(i64),
    Float(f64),
}

impl MetricValue {
    fn new(value: f64, integer: bool) -> MetricValue {
        if integer && value.fract() == 0.0 && value.abs() < 9.0e15 {
            MetricValue::Integer(value as i64)
        } else {
            MetricValue::Float(value)
        }
    }
}

/// Inter-chunk gaps (base units) written in display units, as floats.
struct Gaps<'a> {
    gaps: &'a [f64],
    scale: f64,
}

impl Serialize for Gaps<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.gaps.iter().map(|gap| gap / self.scale))
    }
}

fn derived_line(record: &RequestRecord, metrics: &RecordMetrics, clock: &Clock, out: &mut Vec<u8>) {
    let input = &record.input;
    let wall = |perf_ns: Option<u64>| perf_ns.map(|t| clock.wall_ns(t));
    let line = Line {
        metadata: Metadata {
            session_num: input.session_num,
            x_request_id: &record.x_request_id,
            x_correlation_id: &input.correlation_id,
            conversation_id: &input.conversation_id,
            turn_index: input.turn_index,
            credit_issued_ns: match input.timing.scheduled_perf_ns {
                Some(at) => clock.wall_ns(at + input.timing.slot_wait_ns),
                None => record.start_wall_ns,
            },
            request_start_ns: record.start_wall_ns,
            request_sent_ns: wall(record.sent_perf_ns),
            request_ack_ns: wall(record.ack_perf_ns),
            request_end_ns: record.end_wall_ns,
            worker_id: WORKER_ID,
            record_processor_id: RECORD_PROCESSOR_ID,
            benchmark_phase: record.phase.as_str(),
            // No warmup in these records: profiling is the first phase.
            phase_index: 0,
            profiling_index: Some(0),
            phase_name: record.phase.as_str(),
            phase_kind: record.phase.as_str(),
            was_cancelled: record.was_cancelled,
            cancellation_time_ns: wall(record.cancellation_perf_ns),
            agent_depth: 0,
            root_correlation_id: &input.correlation_id,
            scheduled_ns: wall(input.timing.scheduled_perf_ns),
            send_lag_ns: record.send_lag_ns(),
            slot_wait_ns: input.timing.slot_wait_ns,
        },
        metrics: Metrics(metrics),
        error: record.error.as_ref(),
    };
    // Serializing into memory cannot fail: no I/O, and every map key is a string.
    serde_json::to_writer(&mut *out, &line).expect("JSON into memory");
    out.push(b'\n');
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

/// (best, median) of the rounds.
fn best_and_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
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
        template_tokens: None,
        skip_tokenizer: false,
        no_output_tokens: false,
        no_input_tokens: false,
        templated_isl: None,
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
        derived_line(r, m, &clock, &mut b);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "formatters disagree"
        );
        total_bytes += b.len();
    }
    let line_bytes = total_bytes / n;

    let (mut lib, mut derived) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer cache.
        if round % 2 == 0 {
            lib.push(time_round(format_record_line, &records, &clock));
            derived.push(time_round(derived_line, &records, &clock));
        } else {
            derived.push(time_round(derived_line, &records, &clock));
            lib.push(time_round(format_record_line, &records, &clock));
        }
    }
    let (l, lm) = best_and_median(lib);
    let (d, dm) = best_and_median(derived);
    println!(
        "jsonl_format: {n} records x {chunks} chunks (mean line {line_bytes} bytes), {rounds} rounds"
    );
    println!("  export::jsonl (hand-written): best {l:>6.0} ns/record, median {lm:>6.0}");
    println!("  serde derive                : best {d:>6.0} ns/record, median {dm:>6.0}");
    println!(
        "  ratio derive/hand-written: best {:.3}, median {:.3}",
        d / l,
        dm / lm
    );
}
