//! CPU time of the collector thread's work on one record (`api::RecordPath`: metrics,
//! output-token count, the `profile_export.jsonl` line and its write, the statistics'
//! columns and logs, the report's chart row, dropping the record) for records shaped like
//! those of the client CPU run (`benches/client_cpu.rs`: streamed chat, 16 output tokens
//! of the mock's words, ISL 10, usage, HTTP stamps, UUID ids).
//!
//! The reference, measured in the same run on the same records: formatting each record's
//! line with serde_json from `#[derive(Serialize)]` structs (`common/derived_line.rs`),
//! which no change to the crate's per-record path moves. Each round builds `BENCH_RECORDS`
//! (5,000) fresh records, then times both on them by the thread's CPU time (user + system:
//! the file's writes are included, and their share printed), alternating which goes
//! first; `BENCH_ROUNDS` (9) rounds, medians printed, and the median of the rounds' ratios.
//! The first round also checks that the file holds the reference's lines byte for byte.
//!
//! Run: `cargo bench --bench collector_record`

use std::hint::black_box;
use std::sync::Arc;

use aiperf::api::{
    Clock, HttpTiming, Phase, RecordMetrics, RecordOptions, RecordPath, RequestInput,
    RequestRecord, Tokenizer, Usage, mock_word,
};

#[path = "common/derived_line.rs"]
mod derived_line;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This thread's CPU time so far, ns: all of it (exact, `CLOCK_THREAD_CPUTIME_ID`), and
/// its system part (`getrusage`, which splits it by the scheduler's ticks: only a share
/// over many records means something).
fn thread_cpu_ns() -> (u64, u64) {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) },
        0
    );
    // SAFETY: an all-zero rusage is a valid value, and getrusage only writes to it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
        0
    );
    let system =
        usage.ru_stime.tv_sec as u64 * 1_000_000_000 + usage.ru_stime.tv_usec as u64 * 1_000;
    (t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64, system)
}

/// CPU ns since `start` (a `thread_cpu_ns`): all of it, and its system part.
fn since(start: (u64, u64)) -> (u64, u64) {
    let now = thread_cpu_ns();
    (now.0 - start.0, now.1 - start.1)
}

/// A UUID-shaped id (36 characters), as the client sends.
fn uuid(seed: u64) -> String {
    let h = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995_2f3a_9c71;
    let l = h.rotate_left(29).wrapping_mul(0xff51_afd7_ed55_8ccd);
    let hex = format!("{h:016x}{l:016x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// Record `i` of the run, its times jittered so that the numbers differ from line to line.
fn record(i: u64) -> RequestRecord {
    let input = RequestInput {
        session_num: i % 64,
        conversation_id: uuid(3 * i),
        correlation_id: uuid(3 * i + 1),
        turn_index: 0,
        input_tokens: Some(10),
        requested_output_tokens: Some(16),
        ..RequestInput::default()
    };
    let mut r = RequestRecord::new(Phase::Profiling, input, uuid(3 * i + 2));
    let start = 1_000_000_000 + i * 60_000 + 1_733 * (i % 11);
    r.start_perf_ns = start;
    r.sent_perf_ns = Some(start + 4_811 + i % 97);
    r.ack_perf_ns = Some(start + 312_559 + 13 * (i % 89));
    r.http = Some(HttpTiming {
        connection_reused: true,
        send_start_ns: Some(start + 5_002),
        send_end_ns: Some(start + 11_462),
        headers_ns: Some(start + 312_559),
        first_body_ns: Some(start + 312_601),
        bytes_sent: 442,
        chunks_sent: 1,
        bytes_received: 4_315,
        chunks_received: 1 + i % 3,
        ..HttpTiming::default()
    });
    r.start_wall_ns = 1_765_000_000_000_000_000 + start;
    r.status = Some(200);
    r.streamed = true;
    // Chunks arrive in pairs: a gap of tens to hundreds of us, then one of about 0.5 us.
    let mut t = start + 2_700_000 + (i * 7_919) % 90_000;
    for c in 0..16u64 {
        if c > 0 {
            t += match c % 2 {
                1 => 20_000 + (c * 104_729 + i * 7_907) % 260_000,
                _ => 430 + (c * 31 + i * 17) % 540,
            };
        }
        r.push_response(t, mock_word(c), "", 0);
    }
    r.last_event_perf_ns = Some(t + 45_000);
    r.end_perf_ns = t + 50_000;
    r.end_wall_ns = 1_765_000_000_000_000_000 + r.end_perf_ns;
    if let Some(http) = &mut r.http {
        http.last_byte_ns = Some(r.end_perf_ns);
    }
    r.usage = Some(Usage {
        prompt_tokens: Some(18),
        completion_tokens: Some(16),
        total_tokens: Some(34),
        reasoning_tokens: None,
    });
    r
}

/// CPU ns per record of the collector's work on `records` (consumed, as the thread does).
/// Also the round's CPU ns with their system part, and the file written.
fn time_collector(
    records: Vec<RequestRecord>,
    tokenizer: &Arc<Tokenizer>,
) -> (f64, (u64, u64), Vec<u8>) {
    let n = records.len();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut path = RecordPath::new(dir.path(), tokenizer.clone()).expect("the record files");
    let start = thread_cpu_ns();
    for r in records {
        path.add(black_box(r)).expect("the line is written");
    }
    let cpu = since(start);
    path.close().expect("the file is flushed");
    let file = std::fs::read(dir.path().join("profile_export.jsonl")).expect("the file");
    (cpu.0 as f64 / n as f64, cpu, file)
}

/// CPU ns per record of the reference: each line from the derived serializer, into one
/// buffer that is cleared per record.
fn time_reference(records: &[(RequestRecord, RecordMetrics)], clock: &Clock) -> f64 {
    let mut line = Vec::with_capacity(4096);
    let mut bytes = 0;
    let start = thread_cpu_ns();
    for (r, m) in records {
        line.clear();
        derived_line::derived_line(black_box(r), black_box(m), clock, &mut line);
        bytes += black_box(&line).len();
    }
    black_box(bytes);
    since(start).0 as f64 / records.len() as f64
}

/// The JSONL text with the wall-clock times taken from the clock's anchor (sent and ack)
/// left out: they depend on when each `Clock` was made.
fn normalized(jsonl: &[u8]) -> String {
    let mut text = String::from_utf8(jsonl.to_vec()).expect("UTF-8");
    for key in ["\"request_sent_ns\":", "\"request_ack_ns\":"] {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(key) {
            out.push_str(&rest[..at + key.len()]);
            rest = rest[at + key.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        }
        out.push_str(rest);
        text = out;
    }
    text
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("BENCH_RECORDS", if quick { 300 } else { 5000 }) as u64;
    let rounds = env_usize("BENCH_ROUNDS", if quick { 1 } else { 9 });
    let tokenizer = Arc::new(Tokenizer::builtin().expect("the builtin tokenizer"));
    let clock = Clock::new();
    let opts = RecordOptions {
        streaming: true,
        ..RecordOptions::default()
    };

    // The records are what the run writes: 16 tokens counted, one line each.
    let sample = record(7);
    let m = RecordMetrics::compute(&sample, &tokenizer, opts);
    assert_eq!(
        m.get(aiperf::api::MetricId::OutputSequenceLength),
        Some(16.0)
    );

    let (mut ours, mut reference, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // The collector's CPU ns and their system part, over every round.
    let mut cpu = (0, 0);
    for round in 0..rounds {
        let records: Vec<RequestRecord> = (0..n).map(record).collect();
        let with_metrics: Vec<(RequestRecord, RecordMetrics)> = (0..n)
            .map(|i| {
                let r = record(i);
                let m = RecordMetrics::compute(&r, &tokenizer, opts);
                (r, m)
            })
            .collect();
        let ((c, round_cpu, file), r) = if round % 2 == 0 {
            let c = time_collector(records, &tokenizer);
            (c, time_reference(&with_metrics, &clock))
        } else {
            let r = time_reference(&with_metrics, &clock);
            (time_collector(records, &tokenizer), r)
        };
        // The file holds the reference's lines, byte for byte (their clocks differ by the
        // wall-clock anchor, which only `request_sent_ns` and `request_ack_ns` read).
        if round == 0 {
            let mut lines = Vec::new();
            for (r, m) in &with_metrics {
                derived_line::derived_line(r, m, &Clock::new(), &mut lines);
            }
            assert_eq!(
                normalized(&file),
                normalized(&lines),
                "the collector's file is not the reference's lines"
            );
        }
        ours.push(c);
        cpu = (cpu.0 + round_cpu.0, cpu.1 + round_cpu.1);
        reference.push(r);
        ratios.push(c / r);
    }
    println!(
        "collector_record: {n} records x {rounds} rounds (RequestRecord {} bytes, RecordMetrics {} bytes)",
        std::mem::size_of::<RequestRecord>(),
        std::mem::size_of::<RecordMetrics>()
    );
    println!(
        "  collector per record   : median {:>6.0} ns CPU (system: {:.0}% over all rounds)",
        median(ours),
        cpu.1 as f64 / cpu.0 as f64 * 100.0
    );
    println!(
        "  reference (serde line) : median {:>6.0} ns CPU",
        median(reference)
    );
    println!(
        "  ratio collector/reference: median of rounds {:.3}",
        median(ratios)
    );
}
