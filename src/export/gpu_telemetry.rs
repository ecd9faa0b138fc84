//! GPU telemetry in AIPerf's places: `gpu_telemetry_export.jsonl` (one line per GPU per
//! scrape), `telemetry_data` in the summary JSON, a section at the end of the summary CSV,
//! and one console table per GPU after a short power-efficiency summary.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::console::format_number;
use super::csv::{field, number};
use super::table::{Justify, Table};
use crate::clock::{Clock, iso8601_utc};
use crate::metrics::gpu_telemetry::{EndpointTelemetry, GpuSummary, GpuTelemetry, Summary};
use crate::scrape::dcgm::{GPU_METRICS, GpuIdentity, readings};
use crate::scrape::{ScrapeEvent, ScrapeSink};

/// Every DCGM exporter publishes NVIDIA GPUs.
const PLATFORM: &str = "nvidia";

/// One DCGM exporter's `gpu_telemetry_export.jsonl` lines (one per GPU per changed scrape,
/// scaled units, wall-clock `timestamp_ns`), written beside the artifacts as scrapes come,
/// so a long run holds none of them; [`write_jsonl`] puts the spools together at the end.
pub struct GpuJsonlSpool {
    url: String,
    clock: Clock,
    path: PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    /// The first write error; the file is then given up.
    error: Option<std::io::Error>,
}

impl GpuJsonlSpool {
    /// A spool for exporter `url` at `path` (created at its first GPU reading).
    pub fn new(url: &str, path: PathBuf, clock: Clock) -> GpuJsonlSpool {
        GpuJsonlSpool {
            url: url.to_string(),
            clock,
            path,
            out: None,
            error: None,
        }
    }

    fn append(
        &mut self,
        at_ns: u64,
        gpus: &[crate::scrape::dcgm::GpuReading],
    ) -> std::io::Result<()> {
        let out = match &mut self.out {
            Some(out) => out,
            None => self
                .out
                .insert(std::io::BufWriter::new(std::fs::File::create(&self.path)?)),
        };
        for r in gpus {
            let mut values = serde_json::Map::new();
            for (metric, v) in GPU_METRICS.iter().zip(r.values) {
                if let Some(v) = v {
                    values.insert(metric.key.into(), serde_json::json!(v));
                }
            }
            let g = &r.gpu;
            let line = serde_json::json!({
                "gpu_index": g.index,
                "gpu_uuid": g.uuid,
                "gpu_model_name": g.model_name,
                "pci_bus_id": g.pci_bus_id,
                "device": g.device,
                "hostname": g.hostname,
                "namespace": g.namespace,
                "pod_name": g.pod_name,
                "timestamp_ns": self.clock.wall_ns(at_ns),
                "telemetry_source_url": self.url,
                "telemetry_data": values,
            });
            serde_json::to_writer(&mut *out, &line)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Flushes and closes the spool; its path, `None` when nothing was written.
    pub fn close(&mut self) -> std::io::Result<Option<PathBuf>> {
        if let Some(e) = self.error.take() {
            let _ = std::fs::remove_file(&self.path);
            return Err(e);
        }
        match self.out.take() {
            Some(mut out) => {
                out.flush()?;
                Ok(Some(self.path.clone()))
            }
            None => Ok(None),
        }
    }
}

impl ScrapeSink for GpuJsonlSpool {
    fn scraped(&mut self, s: &ScrapeEvent) {
        if !s.changed || self.error.is_some() {
            return;
        }
        let gpus = readings(&s.families);
        if gpus.is_empty() {
            return;
        }
        if let Err(e) = self.append(s.first_byte_ns, &gpus) {
            self.error = Some(e);
            self.out = None;
        }
    }
}

/// `gpu_telemetry_export.jsonl` from the spooled lines, when there is telemetry.
pub struct GpuTelemetryJsonl<'a> {
    pub names: &'a super::FileNames,
    pub telemetry: bool,
    pub spools: &'a [PathBuf],
}

impl super::Exporter for GpuTelemetryJsonl<'_> {
    fn what(&self) -> &'static str {
        "the GPU telemetry JSONL"
    }

    fn export(&self, dir: &Path) -> std::io::Result<Vec<super::Written>> {
        if !self.telemetry {
            return Ok(Vec::new());
        }
        let path = dir.join(&self.names.gpu_telemetry_jsonl);
        write_jsonl(&path, self.spools)?;
        Ok(vec![super::Written::listed("GPU Telemetry", path)])
    }
}

/// `gpu_telemetry_export.jsonl` from the exporters' spools, one after another (a single
/// spool is renamed into place); the spools are removed.
pub fn write_jsonl(path: &Path, spools: &[PathBuf]) -> std::io::Result<()> {
    if let [one] = spools {
        return std::fs::rename(one, path);
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for spool in spools {
        std::io::copy(&mut std::fs::File::open(spool)?, &mut out)?;
        let _ = std::fs::remove_file(spool);
    }
    out.flush()
}

/// Pairs serialized as a JSON object in their order (serde_json's map would sort them).
#[derive(Debug, Clone)]
struct Ordered<T>(Vec<(String, T)>);

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// `telemetry_data` of `profile_export_aiperf.json`.
#[derive(Debug, Clone, Serialize)]
pub struct TelemetryData {
    summary: TelemetrySummary,
    endpoints: Ordered<EndpointData>,
    error_summary: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
struct TelemetrySummary {
    endpoints_configured: Vec<String>,
    endpoints_successful: Vec<String>,
    start_time: String,
    end_time: String,
}

#[derive(Debug, Clone, Serialize)]
struct EndpointData {
    gpus: Ordered<GpuData>,
}

#[derive(Debug, Clone, Serialize)]
struct GpuData {
    gpu_index: u32,
    gpu_name: Option<String>,
    gpu_uuid: Option<String>,
    platform: &'static str,
    hostname: Option<String>,
    namespace: Option<String>,
    pod_name: Option<String>,
    metrics: Ordered<MetricData>,
}

/// `{unit, avg, min, max, p1..p99, std}` for a gauge, `{unit, avg}` for a counter.
#[derive(Debug, Clone, Serialize)]
struct MetricData {
    unit: &'static str,
    avg: f64,
    #[serde(flatten)]
    spread: Option<Spread>,
}

#[derive(Debug, Clone, Serialize)]
struct Spread {
    min: f64,
    max: f64,
    p1: f64,
    p5: f64,
    p10: f64,
    p25: f64,
    p50: f64,
    p75: f64,
    p90: f64,
    p95: f64,
    p99: f64,
    std: f64,
}

fn metric_data(unit: &'static str, s: &Summary) -> MetricData {
    match s {
        Summary::Counter(rise) => MetricData {
            unit,
            avg: *rise,
            spread: None,
        },
        Summary::Gauge(g) => {
            let p = g.percentiles;
            MetricData {
                unit,
                avg: g.avg,
                spread: Some(Spread {
                    min: g.min,
                    max: g.max,
                    p1: p[0],
                    p5: p[1],
                    p10: p[2],
                    p25: p[3],
                    p50: p[4],
                    p75: p[5],
                    p90: p[6],
                    p95: p[7],
                    p99: p[8],
                    std: g.std,
                }),
            }
        }
    }
}

fn gpu_data(g: &GpuSummary) -> GpuData {
    let id = &g.gpu;
    GpuData {
        gpu_index: id.index,
        gpu_name: id.model_name.clone(),
        gpu_uuid: id.uuid.clone(),
        platform: PLATFORM,
        hostname: id.hostname.clone(),
        namespace: id.namespace.clone(),
        pod_name: id.pod_name.clone(),
        metrics: Ordered(
            g.metrics
                .iter()
                .map(|(m, s)| (m.key.to_string(), metric_data(m.unit, s)))
                .collect(),
        ),
    }
}

/// The `telemetry_data` object.
pub fn telemetry_data(t: &GpuTelemetry) -> TelemetryData {
    let urls = |pick: fn(&EndpointTelemetry) -> bool| {
        t.endpoints
            .iter()
            .filter(|e| pick(e))
            .map(|e| e.url.clone())
            .collect()
    };
    let endpoints = t
        .endpoints
        .iter()
        .filter(|e| e.has_data())
        .map(|e| {
            let gpus = e
                .gpus
                .iter()
                .map(|g| (format!("gpu_{}", g.gpu.index), gpu_data(g)))
                .collect();
            (
                e.host_port().to_string(),
                EndpointData {
                    gpus: Ordered(gpus),
                },
            )
        })
        .collect();
    let error_summary = t
        .endpoints
        .iter()
        .filter(|e| e.failures > 0)
        .map(|e| {
            serde_json::json!({
                "error_details": {
                    "code": null,
                    "type": "TelemetryScrapeError",
                    "message": format!(
                        "{}: {}",
                        e.url,
                        e.first_error.as_deref().unwrap_or("failed")
                    ),
                },
                "count": e.failures,
            })
        })
        .collect();
    TelemetryData {
        summary: TelemetrySummary {
            endpoints_configured: urls(|_| true),
            endpoints_successful: urls(EndpointTelemetry::has_data),
            start_time: iso8601_utc(t.clock.wall_ns(t.window_ns.0)),
            end_time: iso8601_utc(t.clock.wall_ns(t.window_ns.1)),
        },
        endpoints: Ordered(endpoints),
        error_summary,
    }
}

/// `<display> (<unit>)`.
fn label(display: &str, unit: &str) -> String {
    format!("{display} ({unit})")
}

fn csv_cell(v: Option<f64>) -> String {
    v.map_or(String::new(), number)
}

/// The section appended to `profile_export_aiperf.csv`: two empty rows, then one row per
/// GPU metric.
pub fn render_csv(t: &GpuTelemetry) -> String {
    let with_place = t
        .gpus()
        .any(|(_, g)| g.gpu.hostname.is_some() || g.gpu.namespace.is_some());
    let mut out = String::from("\r\n\r\n");
    out.push_str(
        "Endpoint,GPU_Index,GPU_Name,GPU_UUID,Platform,Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std",
    );
    if with_place {
        out.push_str(",Hostname,Namespace,Pod Name");
    }
    out.push_str("\r\n");
    for (e, g) in t.gpus() {
        let id: &GpuIdentity = &g.gpu;
        for (m, s) in &g.metrics {
            let mut cells = vec![
                field(e.host_port()),
                id.index.to_string(),
                field(id.model_name.as_deref().unwrap_or("")),
                field(id.uuid.as_deref().unwrap_or("")),
                PLATFORM.to_string(),
                field(&label(m.display, m.unit)),
            ];
            let stats: [Option<f64>; 14] = match s {
                Summary::Counter(rise) => {
                    let mut row = [None; 14];
                    row[0] = Some(*rise);
                    row
                }
                Summary::Gauge(g) => {
                    let p = g.percentiles.map(Some);
                    [
                        Some(g.avg),
                        Some(g.min),
                        Some(g.max),
                        None,
                        p[0],
                        p[1],
                        p[2],
                        p[3],
                        p[4],
                        p[5],
                        p[6],
                        p[7],
                        p[8],
                        Some(g.std),
                    ]
                }
            };
            cells.extend(stats.into_iter().map(csv_cell));
            if with_place {
                for v in [&id.hostname, &id.namespace, &id.pod_name] {
                    cells.push(field(v.as_deref().unwrap_or("")));
                }
            }
            out.push_str(&cells.join(","));
            out.push_str("\r\n");
        }
    }
    out
}

/// Python's `f"{v:.2e}"` (`1.23e+06`).
fn scientific(v: f64) -> String {
    let text = format!("{v:.2e}");
    match text.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

/// A table cell: `%.2e` from a million up, else two decimals with thousands separators.
fn cell(v: Option<f64>) -> String {
    match v {
        None => "N/A".into(),
        Some(v) if v.is_finite() && v.abs() >= 1e6 => scientific(v),
        Some(v) => format_number(v),
    }
}

/// Centres `line` over `width` columns.
fn centred(line: &str, width: usize) -> String {
    let pad = width.saturating_sub(line.chars().count()) / 2;
    format!("{}{line}\n", " ".repeat(pad))
}

/// The console section: a banner, the power-efficiency lines and one table per GPU.
/// Empty without telemetry data. `output_tokens` is the run's total output token count.
pub fn render_console(t: &GpuTelemetry, output_tokens: Option<f64>, width: usize) -> String {
    if !t.has_data() {
        return String::new();
    }
    let mut out = String::new();
    out.push_str(
        "\nGPU telemetry comes from the DCGM exporters as published; aiperf does not check it.\n",
    );
    let energy = t.total_energy_j();
    let mut efficiency = Vec::new();
    if let Some(j) = energy {
        efficiency.push(format!("Total GPU energy: {} J", format_number(j)));
    }
    if let Some(w) = t.average_power_w() {
        efficiency.push(format!("Average GPU power: {} W", format_number(w)));
    }
    if let (Some(j), Some(tokens)) = (energy, output_tokens)
        && j > 0.0
        && tokens > 0.0
    {
        efficiency.push(format!(
            "Output tokens per joule: {} tokens/J",
            format_number(tokens / j)
        ));
        efficiency.push(format!(
            "Energy per output token: {} mJ/token",
            format_number(j * 1e3 / tokens)
        ));
    }
    if !efficiency.is_empty() {
        out.push_str("GPU Power Efficiency\n");
        for line in efficiency {
            out.push_str(&format!("  {line}\n"));
        }
    }
    let mut first = true;
    for (e, g) in t.gpus() {
        let name = g.gpu.model_name.as_deref().unwrap_or("unknown GPU");
        let mut table = Table::new(&format!("{} | GPU {} | {name}", e.host_port(), g.gpu.index))
            .column("Metric", Justify::Right);
        for column in ["avg", "min", "max", "p99", "p90", "p50", "std"] {
            table = table.column(column, Justify::Right);
        }
        for (m, s) in &g.metrics {
            let values = match s {
                Summary::Counter(rise) => [Some(*rise), None, None, None, None, None, None],
                Summary::Gauge(g) => [
                    Some(g.avg),
                    Some(g.min),
                    Some(g.max),
                    Some(g.percentiles[8]),
                    Some(g.percentiles[6]),
                    Some(g.percentiles[4]),
                    Some(g.std),
                ],
            };
            let mut row = vec![label(m.display, m.unit)];
            row.extend(values.into_iter().map(cell));
            table.row(row);
        }
        let rendered = table.render(width);
        out.push('\n');
        if first {
            first = false;
            // The table's own width, from its top rule (the line after the title).
            let table_width = rendered.lines().nth(1).map_or(width, |l| l.chars().count());
            out.push_str(&centred(
                "NVIDIA AIPerf | GPU Telemetry Summary",
                table_width,
            ));
            let reachable = t.endpoints.iter().filter(|e| e.has_data()).count();
            out.push_str(&centred(
                &format!(
                    "{reachable}/{} telemetry sources reachable",
                    t.endpoints.len()
                ),
                table_width,
            ));
            for e in &t.endpoints {
                let mark = if e.has_data() {
                    "✔"
                } else {
                    "✘ (unreachable)"
                };
                out.push_str(&centred(
                    &format!("• {} {mark}", e.host_port()),
                    table_width,
                ));
            }
            out.push('\n');
        }
        out.push_str(&rendered);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_values_are_written_like_python() {
        assert_eq!(scientific(1_234_567.0), "1.23e+06");
        assert_eq!(scientific(-2.5e12), "-2.50e+12");
        assert_eq!(cell(Some(1_234_567.0)), "1.23e+06");
        assert_eq!(cell(Some(1980.0)), "1,980.00");
        assert_eq!(cell(None), "N/A");
    }
}
