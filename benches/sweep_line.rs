//! CPU time of the end-of-run sweep-line metrics (`sweep_line_metrics`: concurrency, decode,
//! prefill and total token rates, tokens in flight, over the whole run and each time
//! slice) on the spans of a streamed closed-loop run, beside a reference measured in the
//! same run: sorting that run's events once.
//!
//! The run: `BENCH_REQUESTS` (20,000) requests at concurrency `BENCH_CONCURRENCY` (64),
//! each a start, a first token, `BENCH_GAPS` (16) chunk gaps and an end, in whole ns, with
//! seeded jitter (the shape of `aiperf profile` streaming 16 tokens against
//! `aiperf mock-server --fast`); pushed in the order they end, as the collector does. The
//! figures are timed over one window (the whole run) and over the whole run and
//! `BENCH_SLICES` (10) equal slices (`--slice-duration`).
//!
//! The reference: the run's events (each span's start, first token, chunk times and end,
//! as `(time, delta)` pairs) copied into a buffer and sorted by time with
//! `sort_unstable_by(f64::total_cmp)`. Each figure is the thread's CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), the median of `BENCH_ROUNDS` (7) rounds that alternate the
//! two, per request; the ratio to the reference is what to compare across machines and
//! builds. The fingerprint printed hashes every figure's bits: two builds that print the
//! same one computed the same figures.
//!
//! Run: `cargo bench --bench sweep_line`. Without `--bench` (as `cargo test --benches` runs
//! it) one round of 2,000 requests.

use std::hint::black_box;

use aiperf::api::{
    OrderedSpans, Span, SpanOrder, WeightedStats, encode_column_value, sweep_line_metrics,
};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) },
        0
    );
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// splitmix64: a seeded, dependency-free stream of jitter.
struct Jitter(u64);

impl Jitter {
    /// A whole number of ns in `lo..hi`.
    fn ns(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        lo + (z ^ (z >> 31)) % (hi - lo)
    }
}

/// One request: start, first token, end (ns from the run's first start), its chunks' times
/// and their gaps encoded as the collector keeps them.
struct Request {
    start: u64,
    first: u64,
    end: u64,
    chunks: Vec<u64>,
    gaps: Vec<u8>,
}

/// A closed loop: each of `concurrency` slots starts its next request a little after the
/// last one ended. Returned in the order the requests end.
fn closed_loop(requests: usize, concurrency: usize, gaps: usize) -> Vec<Request> {
    let mut jitter = Jitter(1);
    let mut free_at: Vec<u64> = (0..concurrency as u64).map(|i| i * 40_000).collect();
    let mut out = Vec::with_capacity(requests);
    for i in 0..requests {
        let slot = i % concurrency;
        let start = free_at[slot] + jitter.ns(5_000, 30_000);
        let first = start + jitter.ns(200_000, 600_000);
        let (mut bytes, mut chunks) = (Vec::new(), Vec::with_capacity(gaps));
        let mut at = first;
        for _ in 0..gaps {
            let gap = jitter.ns(40_000, 120_000);
            encode_column_value(&mut bytes, gap as f64);
            at += gap;
            chunks.push(at);
        }
        let end = at + jitter.ns(5_000, 20_000);
        free_at[slot] = end;
        out.push(Request {
            start,
            first,
            end,
            chunks,
            gaps: bytes,
        });
    }
    out.sort_by_key(|r| r.end);
    out
}

fn span(r: &Request, osl: f64) -> Span<'_> {
    Span {
        start: r.start as f64,
        generation_start: Some(r.first as f64),
        end: r.end as f64,
        input_tokens: Some(10.0),
        output_tokens: Some(osl),
        chunk_gaps: &r.gaps,
    }
}

fn ordered(requests: &[Request], osl: f64) -> OrderedSpans {
    let mut order = SpanOrder::new();
    for r in requests {
        order.push(&span(r, osl));
    }
    order.finish()
}

/// Every figure's bits, hashed (FNV-1a).
fn fingerprint(all: &[Vec<(aiperf::api::MetricId, WeightedStats)>]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (id, s) in all.iter().flatten() {
        let values = [s.avg, s.min, s.max, s.p50, s.p90, s.p95, s.p99, s.std];
        for word in std::iter::once(*id as u64).chain(values.map(f64::to_bits)) {
            for byte in word.to_le_bytes() {
                h = (h ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    h
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this without it and
    // expects a quick smoke run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("BENCH_REQUESTS", if quick { 2000 } else { 20_000 });
    let rounds = env_usize("BENCH_ROUNDS", if quick { 1 } else { 7 });
    let concurrency = env_usize("BENCH_CONCURRENCY", 64);
    let gaps = env_usize("BENCH_GAPS", 16);
    let slices = env_usize("BENCH_SLICES", 10).max(1);

    let requests = closed_loop(n, concurrency, gaps);
    let spans = ordered(&requests, gaps as f64);
    let last = requests.iter().map(|r| r.end).max().unwrap_or(0) as f64;
    let one = vec![(0.0, last)];
    let step = last / slices as f64;
    let sliced: Vec<(f64, f64)> = std::iter::once((0.0, last))
        .chain((0..slices).map(|i| (i as f64 * step, ((i + 1) as f64 * step).min(last))))
        .collect();
    let events: Vec<(f64, f64)> = requests
        .iter()
        .flat_map(|r| {
            let chunks = r.chunks.iter().map(|&t| (t as f64, 1.0));
            [(r.start as f64, 1.0), (r.first as f64, 1.0)]
                .into_iter()
                .chain(chunks)
                .chain([(r.end as f64, -1.0)])
        })
        .collect();

    // The figures come out the same every time, and look like the run.
    let whole = sweep_line_metrics(&spans, &one);
    let concurrency_avg = whole[0][0].1.avg;
    assert!(
        concurrency_avg > 0.5 * concurrency as f64 && concurrency_avg <= concurrency as f64,
        "effective concurrency {concurrency_avg}"
    );
    let print = fingerprint(&sweep_line_metrics(&spans, &sliced));
    assert_eq!(
        fingerprint(&whole),
        fingerprint(&sweep_line_metrics(&spans, &one))
    );

    let mut buffer = events.clone();
    let mut reference = || {
        let t = thread_cpu_ns();
        buffer.copy_from_slice(&events);
        buffer.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        black_box(&buffer);
        (thread_cpu_ns() - t) as f64 / n as f64 / 1e3
    };
    let sweep = |windows: &[(f64, f64)]| {
        let t = thread_cpu_ns();
        black_box(sweep_line_metrics(&spans, windows));
        (thread_cpu_ns() - t) as f64 / n as f64 / 1e3
    };
    let (mut refs, mut ones, mut slices_us) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always runs on a warmer cache.
        if round % 2 == 0 {
            refs.push(reference());
            ones.push(sweep(&one));
            slices_us.push(sweep(&sliced));
        } else {
            slices_us.push(sweep(&sliced));
            ones.push(sweep(&one));
            refs.push(reference());
        }
    }
    let ratios = |v: &[f64]| median(v.iter().zip(&refs).map(|(a, r)| a / r).collect());
    println!(
        "sweep_line: {n} requests x {gaps} gaps, concurrency {concurrency}, {rounds} rounds; figures {print:016x}"
    );
    println!(
        "  reference (sort {} events once): {:>6.3} us/request (median)",
        events.len(),
        median(refs.clone())
    );
    println!(
        "  one window                     : {:>6.3} us/request, median ratio {:.2}",
        median(ones.clone()),
        ratios(&ones)
    );
    println!(
        "  whole run + {slices} slices           : {:>6.3} us/request, median ratio {:.2}",
        median(slices_us.clone()),
        ratios(&slices_us)
    );
}
