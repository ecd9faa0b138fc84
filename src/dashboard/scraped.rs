//! The headline figures of a server's `/metrics` and of DCGM exporters, for the dashboard:
//! the few gauges a user watches live, under the names vLLM, SGLang and llama.cpp give them.

use crate::scrape::dcgm::{self, GPU_METRICS};
use crate::scrape::engines::{KV_CACHE, RUNNING, TTFT, WAITING};
use crate::scrape::{Family, Value};

use super::view::{GpuView, ServerView};

fn family<'a>(families: &'a [Family], names: &[&str]) -> Option<&'a Family> {
    names
        .iter()
        .find_map(|n| families.iter().find(|f| f.name == *n))
}

/// The sum over a family's series (e.g. one per model or engine), or the mean for a ratio.
fn scalar(families: &[Family], names: &[&str], mean: bool) -> Option<f64> {
    let f = family(families, names)?;
    let values: Vec<f64> = f
        .series
        .iter()
        .filter_map(|s| match s.value {
            Value::Scalar(v) if v.is_finite() => Some(v),
            _ => None,
        })
        .collect();
    let sum: f64 = values.iter().sum();
    match (values.len(), mean) {
        (0, _) => None,
        (n, true) => Some(sum / n as f64),
        (_, false) => Some(sum),
    }
}

/// A histogram family's (sum, count) over its series.
fn histogram_totals(families: &[Family], names: &[&str]) -> Option<(f64, f64)> {
    let f = family(families, names)?;
    let mut totals = None;
    for s in &f.series {
        if let Value::Histogram { sum, count, .. } = &s.value {
            let (a, b) = totals.get_or_insert((0.0, 0.0));
            *a += sum;
            *b += count;
        }
    }
    totals
}

/// A server endpoint's headline figures from its latest scrape; its TTFT is the mean of the
/// requests that got their first token between the previous scrape and the latest.
pub fn server_view(
    url: &str,
    previous: Option<&[Family]>,
    latest: Option<&[Family]>,
) -> ServerView {
    let Some(latest) = latest else {
        return ServerView {
            url: url.to_string(),
            ..ServerView::default()
        };
    };
    let ttft_ns = match (
        previous.and_then(|p| histogram_totals(p, TTFT)),
        histogram_totals(latest, TTFT),
    ) {
        (Some((s0, c0)), Some((s1, c1))) if c1 > c0 => Some((s1 - s0) / (c1 - c0) * 1e9),
        _ => None,
    };
    ServerView {
        url: url.to_string(),
        running: scalar(latest, RUNNING, false),
        waiting: scalar(latest, WAITING, false),
        kv_cache: scalar(latest, KV_CACHE, true),
        ttft_ns,
    }
}

/// Each GPU's latest readings.
pub fn gpu_views(families: &[Family]) -> Vec<GpuView> {
    let index = |key: &str| GPU_METRICS.iter().position(|m| m.key == key);
    let value = |r: &dcgm::GpuReading, key: &str| index(key).and_then(|i| r.values[i]);
    dcgm::readings(families)
        .iter()
        .map(|r| GpuView {
            name: match &r.gpu.model_name {
                Some(model) => format!("GPU{} {model}", r.gpu.index),
                None => format!("GPU{}", r.gpu.index),
            },
            power_w: value(r, "nvidia_power_usage"),
            utilization_pct: value(r, "nvidia_gpu_utilization"),
            memory_used_gb: value(r, "nvidia_memory_used"),
            temperature_c: value(r, "nvidia_temperature"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse::parse;

    #[test]
    fn vllm_gauges_and_the_ttft_between_two_scrapes() {
        let before = parse(
            "# TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",engine=\"0\"} 10\n\
             vllm:time_to_first_token_seconds_sum{engine=\"0\"} 0.2\n\
             vllm:time_to_first_token_seconds_count{engine=\"0\"} 10\n",
        );
        let after = parse(
            "# TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{engine=\"0\"} 3\n\
             vllm:num_requests_running{engine=\"1\"} 2\n\
             # TYPE vllm:num_requests_waiting gauge\n\
             vllm:num_requests_waiting{engine=\"0\"} 7\n\
             # TYPE vllm:kv_cache_usage_perc gauge\n\
             vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\n\
             vllm:kv_cache_usage_perc{engine=\"1\"} 0.4\n\
             # TYPE vllm:time_to_first_token_seconds histogram\n\
             vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",engine=\"0\"} 14\n\
             vllm:time_to_first_token_seconds_sum{engine=\"0\"} 0.3\n\
             vllm:time_to_first_token_seconds_count{engine=\"0\"} 14\n",
        );
        let v = server_view("u", Some(&before), Some(&after));
        assert_eq!(v.running, Some(5.0));
        assert_eq!(v.waiting, Some(7.0));
        assert!((v.kv_cache.unwrap() - 0.3).abs() < 1e-12);
        // 4 requests took 0.1 s together.
        assert!((v.ttft_ns.unwrap() - 25e6).abs() < 1.0);
        let first = server_view("u", None, Some(&after));
        assert_eq!(first.ttft_ns, None, "one scrape gives no interval");
        assert_eq!(server_view("u", None, None).running, None);
    }

    #[test]
    fn llama_cpp_names_are_read_too() {
        let f = parse(
            "llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\nllamacpp:kv_cache_usage_ratio 0.5\n",
        );
        let v = server_view("u", None, Some(&f));
        assert_eq!(
            (v.running, v.waiting, v.kv_cache),
            (Some(2.0), Some(1.0), Some(0.5))
        );
    }

    #[test]
    fn dcgm_readings_per_gpu() {
        let f = parse(
            "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",modelName=\"NVIDIA H100\"} 250.5\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",modelName=\"NVIDIA H100\"} 93\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 100\n",
        );
        let gpus = gpu_views(&f);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "GPU0 NVIDIA H100");
        assert_eq!(gpus[0].power_w, Some(250.5));
        assert_eq!(gpus[0].utilization_pct, Some(93.0));
        assert_eq!(gpus[1].utilization_pct, None);
    }
}
