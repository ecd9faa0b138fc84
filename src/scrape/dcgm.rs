//! DCGM exporter metrics as AIPerf's GPU telemetry: which `DCGM_FI_*` field feeds which
//! key, the unit it is shown in and the factor from DCGM's unit, and the GPU's identity from
//! the labels dcgm-exporter puts on every series.

use std::collections::BTreeMap;

use super::parse::{Family, Value};

/// One GPU telemetry metric and the DCGM field it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuMetric {
    /// AIPerf's key (`nvidia_power_usage`).
    pub key: &'static str,
    /// AIPerf's display name.
    pub display: &'static str,
    /// The unit after scaling.
    pub unit: &'static str,
    /// The DCGM field (the Prometheus metric name, without a `_total` suffix).
    pub field: &'static str,
    /// DCGM's unit times this is `unit`.
    pub scale: f64,
    /// A running total: summarised as its rise over the window, not as a distribution.
    pub counter: bool,
}

const fn gauge(
    key: &'static str,
    display: &'static str,
    unit: &'static str,
    field: &'static str,
    scale: f64,
) -> GpuMetric {
    GpuMetric {
        key,
        display,
        unit,
        field,
        scale,
        counter: false,
    }
}

const fn counter(
    key: &'static str,
    display: &'static str,
    unit: &'static str,
    field: &'static str,
    scale: f64,
) -> GpuMetric {
    GpuMetric {
        counter: true,
        ..gauge(key, display, unit, field, scale)
    }
}

/// AIPerf's DCGM metrics in its order, then the SM clock (not in AIPerf; added here because
/// a throttled clock explains a slow run).
pub const GPU_METRICS: [GpuMetric; 12] = [
    gauge(
        "nvidia_power_usage",
        "NVIDIA GPU Power Usage",
        "W",
        "DCGM_FI_DEV_POWER_USAGE",
        1.0,
    ),
    // mJ -> MJ.
    counter(
        "nvidia_energy_consumption",
        "NVIDIA Energy Consumption",
        "MJ",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        1e-9,
    ),
    gauge(
        "nvidia_gpu_utilization",
        "NVIDIA GPU Utilization",
        "%",
        "DCGM_FI_DEV_GPU_UTIL",
        1.0,
    ),
    // MiB -> GB.
    gauge(
        "nvidia_memory_used",
        "NVIDIA GPU Memory Used",
        "GB",
        "DCGM_FI_DEV_FB_USED",
        1.048576e-3,
    ),
    gauge(
        "nvidia_temperature",
        "NVIDIA GPU Temperature",
        "°C",
        "DCGM_FI_DEV_GPU_TEMP",
        1.0,
    ),
    gauge(
        "nvidia_memory_utilization",
        "NVIDIA Memory Utilization",
        "%",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        1.0,
    ),
    // A ratio (0-1) -> %.
    gauge(
        "nvidia_sm_utilization",
        "NVIDIA SM Utilization",
        "%",
        "DCGM_FI_PROF_SM_ACTIVE",
        100.0,
    ),
    gauge(
        "nvidia_decoder_utilization",
        "NVIDIA Decoder Utilization",
        "%",
        "DCGM_FI_DEV_DEC_UTIL",
        1.0,
    ),
    gauge(
        "nvidia_encoder_utilization",
        "NVIDIA Encoder Utilization",
        "%",
        "DCGM_FI_DEV_ENC_UTIL",
        1.0,
    ),
    counter(
        "nvidia_xid_errors",
        "NVIDIA XID Errors",
        "count",
        "DCGM_FI_DEV_XID_ERRORS",
        1.0,
    ),
    // ns -> us.
    counter(
        "nvidia_power_violation",
        "NVIDIA Power Violation",
        "us",
        "DCGM_FI_DEV_POWER_VIOLATION",
        1e-3,
    ),
    gauge(
        "nvidia_sm_clock",
        "NVIDIA SM Clock Frequency",
        "MHz",
        "DCGM_FI_DEV_SM_CLOCK",
        1.0,
    ),
];

/// Which GPU a series is about, from dcgm-exporter's labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuIdentity {
    /// The `gpu` label: the device index on its host.
    pub index: u32,
    pub uuid: Option<String>,
    pub model_name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub device: Option<String>,
    pub hostname: Option<String>,
    /// Kubernetes namespace and pod of the workload using the GPU, when the exporter maps them.
    pub namespace: Option<String>,
    pub pod_name: Option<String>,
}

/// One GPU's values in one scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReading {
    pub gpu: GpuIdentity,
    /// Scaled values, by position in [`GPU_METRICS`]; `None` when the exporter did not
    /// publish that field.
    pub values: [Option<f64>; GPU_METRICS.len()],
}

/// The GPUs in one exposition, by index. Series without an integer `gpu` label and
/// non-finite samples are left out; a GPU's identity gathers the labels of all its series.
pub fn readings(families: &[Family]) -> Vec<GpuReading> {
    let mut gpus: BTreeMap<u32, GpuReading> = BTreeMap::new();
    for family in families {
        let base = family.name.strip_suffix("_total").unwrap_or(&family.name);
        let metric = GPU_METRICS.iter().position(|m| m.field == base);
        for series in &family.series {
            let Some(index) = series.labels.get("gpu").and_then(|g| g.parse::<u32>().ok()) else {
                continue;
            };
            let reading = gpus.entry(index).or_insert_with(|| GpuReading {
                gpu: GpuIdentity {
                    index,
                    ..GpuIdentity::default()
                },
                values: [None; GPU_METRICS.len()],
            });
            fill_identity(&mut reading.gpu, &series.labels);
            if let (Some(i), Value::Scalar(v)) = (metric, &series.value)
                && v.is_finite()
            {
                reading.values[i] = Some(v * GPU_METRICS[i].scale);
            }
        }
    }
    gpus.into_values().collect()
}

/// Fills what the GPU's identity still lacks from one series' labels.
fn fill_identity(gpu: &mut GpuIdentity, labels: &BTreeMap<String, String>) {
    let get = |k: &str| labels.get(k).filter(|v| !v.is_empty()).cloned();
    let fill = |slot: &mut Option<String>, value: Option<String>| {
        if slot.is_none() {
            *slot = value;
        }
    };
    fill(&mut gpu.uuid, get("UUID"));
    fill(&mut gpu.model_name, get("modelName"));
    fill(&mut gpu.pci_bus_id, get("pci_bus_id"));
    fill(&mut gpu.device, get("device"));
    // Newer exporters spell it in lower case.
    fill(
        &mut gpu.hostname,
        get("Hostname").or_else(|| get("hostname")),
    );
    fill(&mut gpu.namespace, get("namespace"));
    fill(&mut gpu.pod_name, get("pod"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::parse::{Kind, parse};

    fn value(r: &GpuReading, key: &str) -> Option<f64> {
        let i = GPU_METRICS.iter().position(|m| m.key == key).unwrap();
        r.values[i]
    }

    #[test]
    fn the_fixture_exposition_parses_with_types_and_help() {
        let text = include_str!("../../tests/fixtures/dcgm/two_gpus.txt");
        let families = parse(text);
        let energy = families
            .iter()
            .find(|f| f.name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            .unwrap();
        assert_eq!(energy.kind, Kind::Counter);
        assert_eq!(energy.help, "Total energy consumption since boot (in mJ).");
        assert_eq!(energy.series.len(), 2);
        assert_eq!(
            energy.series[0].labels["modelName"],
            "NVIDIA H100 80GB HBM3"
        );
        let power = families
            .iter()
            .find(|f| f.name == "DCGM_FI_DEV_POWER_USAGE")
            .unwrap();
        assert_eq!(power.kind, Kind::Gauge);
    }

    #[test]
    fn fields_map_to_aiperf_keys_in_aiperf_units() {
        let text = include_str!("../../tests/fixtures/dcgm/two_gpus.txt");
        let gpus = readings(&parse(text));
        assert_eq!(gpus.len(), 2);
        let g0 = &gpus[0];
        assert_eq!(
            g0.gpu,
            GpuIdentity {
                index: 0,
                uuid: Some("GPU-afc3c15a-48a5-d669-0634-191c629f95fa".into()),
                model_name: Some("NVIDIA H100 80GB HBM3".into()),
                pci_bus_id: Some("00000000:18:00.0".into()),
                device: Some("nvidia0".into()),
                hostname: Some("gpu-node-1".into()),
                namespace: None,
                pod_name: None,
            }
        );
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-9 * b.abs().max(1.0);
        assert!(close(value(g0, "nvidia_power_usage"), 348.69));
        // 245112830416 mJ = 245.112830416 MJ.
        assert!(close(value(g0, "nvidia_energy_consumption"), 245.112830416));
        // 72621 MiB = 76.148... GB.
        assert!(close(
            value(g0, "nvidia_memory_used"),
            72621.0 * 1.048576e-3
        ));
        assert!(close(value(g0, "nvidia_sm_utilization"), 51.25));
        // 1.5e6 ns = 1500 us.
        assert!(close(value(g0, "nvidia_power_violation"), 1500.0));
        assert!(close(value(g0, "nvidia_temperature"), 39.0));
        assert!(close(value(g0, "nvidia_gpu_utilization"), 66.0));
        assert!(close(value(g0, "nvidia_memory_utilization"), 29.0));
        assert!(close(value(g0, "nvidia_decoder_utilization"), 12.0));
        assert!(close(value(g0, "nvidia_encoder_utilization"), 0.0));
        assert!(close(value(g0, "nvidia_sm_clock"), 1980.0));
        assert!(close(value(&gpus[1], "nvidia_xid_errors"), 43.0));
        assert_eq!(gpus[1].gpu.device.as_deref(), Some("nvidia1"));
    }

    #[test]
    fn counters_with_total_suffix_pod_labels_and_odd_series() {
        let text = "\
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total{gpu=\"3\",hostname=\"n2\",namespace=\"llm\",pod=\"vllm-0\"} 2000000000
DCGM_FI_DEV_POWER_USAGE{gpu=\"3\"} NaN
DCGM_FI_DEV_POWER_USAGE{gpu=\"all\"} 10
DCGM_FI_DEV_GPU_TEMP 40
";
        let gpus = readings(&parse(text));
        assert_eq!(gpus.len(), 1, "{gpus:?}");
        let g = &gpus[0];
        assert_eq!(g.gpu.index, 3);
        assert_eq!(g.gpu.hostname.as_deref(), Some("n2"));
        assert_eq!(g.gpu.namespace.as_deref(), Some("llm"));
        assert_eq!(g.gpu.pod_name.as_deref(), Some("vllm-0"));
        assert_eq!(value(g, "nvidia_energy_consumption"), Some(2.0));
        assert_eq!(value(g, "nvidia_power_usage"), None);
    }
}
