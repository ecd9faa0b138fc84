//! `GET /metrics`: what the mock served, in vLLM's Prometheus names, so a profile run can
//! compare the client's view with the server's own counters and histograms.
//!
//! Counters are bumped when a response's last token has been handed to the connection and
//! before the usage chunk and `[DONE]` go out, so a client that saw the end of a stream
//! always finds it counted. Only responses that completed are counted (as vLLM counts
//! finished requests). vLLM has no image-token counter; `vllm:mm_image_tokens_total` is this
//! mock's own name for the image part of `prompt_tokens`.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::admission::LoadGauges;

/// vLLM's bucket bounds (seconds) for `vllm:time_to_first_token_seconds`.
const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's bucket bounds (seconds) for `vllm:e2e_request_latency_seconds`.
const E2E_BOUNDS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// The KV-cache share shown without `--max-concurrency` is running / this (vLLM's default
/// `max_num_seqs`).
const DEFAULT_SLOTS: u64 = 256;

/// A cumulative histogram with fixed bounds.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative), the last one being `+Inf`.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    fn observe(&mut self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b);
        self.counts[i.unwrap_or(self.bounds.len())] += 1;
        self.sum += v;
    }
}

/// The mock's counters, shared by every handler.
#[derive(Debug)]
pub struct MockMetrics {
    model: String,
    slots: u64,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    image_tokens: AtomicU64,
    successes: AtomicU64,
    ttft: Mutex<Histogram>,
    e2e: Mutex<Histogram>,
}

/// One response on its way out: what to count once its first token and its end are sent.
#[derive(Debug)]
pub struct Served {
    pub received: Instant,
    pub prompt_tokens: u64,
    pub image_tokens: u64,
    pub completion_tokens: u64,
    pub first_token_seen: bool,
}

impl MockMetrics {
    pub fn new(model: &str, max_concurrency: Option<usize>) -> Self {
        MockMetrics {
            model: model.to_string(),
            slots: max_concurrency.map_or(DEFAULT_SLOTS, |k| k as u64),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            image_tokens: AtomicU64::new(0),
            successes: AtomicU64::new(0),
            ttft: Mutex::new(Histogram::new(TTFT_BOUNDS)),
            e2e: Mutex::new(Histogram::new(E2E_BOUNDS)),
        }
    }

    /// The first token of `served` is being handed to the connection now.
    pub fn first_token(&self, served: &mut Served) {
        if !served.first_token_seen {
            served.first_token_seen = true;
            let secs = served.received.elapsed().as_secs_f64();
            self.ttft.lock().expect("ttft lock").observe(secs);
        }
    }

    /// The last token of `served` has been handed to the connection; the end follows.
    pub fn completed(&self, served: &mut Served) {
        self.first_token(served);
        let secs = served.received.elapsed().as_secs_f64();
        self.e2e.lock().expect("e2e lock").observe(secs);
        self.prompt_tokens
            .fetch_add(served.prompt_tokens, Ordering::Relaxed);
        self.image_tokens
            .fetch_add(served.image_tokens, Ordering::Relaxed);
        self.generation_tokens
            .fetch_add(served.completion_tokens, Ordering::Relaxed);
        self.successes.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition in Prometheus text format 0.0.4.
    pub fn render(&self, load: &LoadGauges) -> String {
        let labels = format!("model_name=\"{}\",engine=\"0\"", escape_label(&self.model));
        let mut out = String::new();
        let running = load.running();
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        };
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            running as f64,
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            load.waiting() as f64,
        );
        gauge(
            &mut out,
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            (running as f64 / self.slots as f64).min(1.0),
        );
        let counter = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name}{{{labels}}} {}", v.load(Ordering::Relaxed));
        };
        counter(
            &mut out,
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            &self.prompt_tokens,
        );
        counter(
            &mut out,
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            &self.generation_tokens,
        );
        counter(
            &mut out,
            "vllm:mm_image_tokens_total",
            "Number of prompt tokens charged for images (mock server).",
            &self.image_tokens,
        );
        let _ = writeln!(
            out,
            "# HELP vllm:request_success_total Count of successfully processed requests.\n\
             # TYPE vllm:request_success_total counter"
        );
        let _ = writeln!(
            out,
            "vllm:request_success_total{{{labels},finished_reason=\"length\"}} {}",
            self.successes.load(Ordering::Relaxed)
        );
        let hist = |out: &mut String, name: &str, help: &str, h: &Mutex<Histogram>| {
            let h = h.lock().expect("histogram lock");
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            let mut cumulative = 0;
            for (i, n) in h.counts.iter().enumerate() {
                cumulative += n;
                let le = h
                    .bounds
                    .get(i)
                    .map_or("+Inf".to_string(), |b| format!("{b:?}"));
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_sum{{{labels}}} {:?}", h.sum);
            let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
        };
        hist(
            &mut out,
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &self.ttft,
        );
        hist(
            &mut out,
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            &self.e2e,
        );
        out
    }
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse::{Kind, Value, parse};

    #[test]
    fn exposition_parses_back_with_the_counted_values() {
        let m = MockMetrics::new("org/m\"x", Some(4));
        let mut s = Served {
            received: Instant::now(),
            prompt_tokens: 120,
            image_tokens: 64,
            completion_tokens: 10,
            first_token_seen: false,
        };
        m.completed(&mut s);
        m.completed(&mut Served {
            first_token_seen: false,
            ..s
        });
        let fams = parse(&m.render(&LoadGauges::default()));
        let get = |n: &str| fams.iter().find(|f| f.name == n).expect(n);
        let scalar = |n: &str| match get(n).series[0].value {
            Value::Scalar(v) => v,
            _ => panic!("{n}"),
        };
        assert_eq!(scalar("vllm:prompt_tokens_total"), 240.0);
        assert_eq!(scalar("vllm:mm_image_tokens_total"), 128.0);
        assert_eq!(scalar("vllm:generation_tokens_total"), 20.0);
        assert_eq!(get("vllm:prompt_tokens_total").kind, Kind::Counter);
        assert_eq!(
            get("vllm:num_requests_running").series[0].labels["model_name"],
            "org/m\"x"
        );
        match &get("vllm:time_to_first_token_seconds").series[0].value {
            Value::Histogram { buckets, count, .. } => {
                assert_eq!(*count, 2.0);
                assert_eq!(buckets.first().unwrap(), &("0.001".to_string(), 2.0));
                assert_eq!(buckets.last().unwrap().0, "+Inf");
            }
            v => panic!("{v:?}"),
        }
    }
}
