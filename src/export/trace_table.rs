//! `--show-trace-timing`: the console table of the HTTP timing metrics (`http_req_*`).

use super::console::format_number;
use super::table::{Justify, Table};
use crate::metrics::{MetricValue, MetricsSummary};

/// The rows, in the order of a request's life.
const TAGS: [&str; 14] = [
    "http_req_blocked",
    "http_req_dns_lookup",
    "http_req_connecting",
    "http_req_sending",
    "http_req_waiting",
    "http_req_receiving",
    "http_req_duration",
    "http_req_connection_overhead",
    "http_req_total",
    "http_req_data_sent",
    "http_req_data_received",
    "http_req_chunks_sent",
    "http_req_chunks_received",
    "http_req_connection_reused",
];

/// The table, rendered at `width`; empty when no request had HTTP timing.
pub fn render(summary: &MetricsSummary, width: usize) -> String {
    let mut table = Table::new("NVIDIA AIPerf | HTTP Trace Timing").column("Metric", Justify::Left);
    for stat in ["avg", "min", "max", "p99", "p90", "p50", "std"] {
        table = table.column(stat, Justify::Right);
    }
    for tag in TAGS {
        let Some(result) = summary.get(tag) else {
            continue;
        };
        let MetricValue::Distribution(s) = &result.value else {
            continue;
        };
        let def = result.def;
        let shown = |v: f64| format_number(v / def.scale);
        table.row(vec![
            format!("{} ({})", def.header, def.unit),
            shown(s.avg),
            shown(s.min),
            shown(s.max),
            shown(s.p99()),
            shown(s.p90()),
            shown(s.p50()),
            shown(s.std),
        ]);
    }
    if table.is_empty() {
        return String::new();
    }
    format!("\n{}", table.render(width))
}
