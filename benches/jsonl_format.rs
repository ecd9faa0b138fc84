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
    Clock, ErrorDetails, Phase, RecordMetrics, RecordOptions, RequestInput, RequestRecord,
    SendTiming, Tokenizer, Usage, format_record_line,
};

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

#[path = "common/derived_line.rs"]
mod derived_line;
use derived_line::derived_line;

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
