//! `aiperf analyze-trace`: a mooncake trace's input/output length distributions, its shared
//! prefixes and the cache hit rates an infinite prefix cache would see, as AIPerf reports
//! them (a console table, and the same figures as JSON with `--output-file`).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::dataset::custom::TraceRow;
use crate::export::console::{format_count, format_number};
use crate::export::table::{Justify, Table};
use crate::stats::Stats;

/// One metric's distribution, in AIPerf's field order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricStats {
    pub mean: f64,
    pub std_dev: f64,
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub max: f64,
}

impl MetricStats {
    /// numpy's mean, population std, min, 25th/50th/75th percentiles (linear) and max;
    /// None without values.
    fn of(values: impl IntoIterator<Item = f64>) -> Option<MetricStats> {
        let mut values: Vec<f64> = values.into_iter().collect();
        let s = Stats::compute(&mut values)?;
        Some(MetricStats {
            mean: s.avg,
            std_dev: s.std,
            min: s.min,
            p25: s.percentiles[3],
            median: s.percentiles[4],
            p75: s.percentiles[5],
            max: s.max,
        })
    }
}

/// The analysis, with AIPerf's JSON field names and order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub total_requests: usize,
    /// Distinct hash-id prefixes (every leading run of every row's hash ids).
    pub unique_prefixes: usize,
    /// First blocks that start two or more rows.
    pub num_prefix_groups: usize,
    /// Mean of the per-row hit rates (rows with hash ids).
    pub cache_hit_rate: f64,
    pub min_isl: u64,
    pub max_isl: u64,
    pub avg_isl: f64,
    pub min_osl: u64,
    pub max_osl: u64,
    pub avg_osl: f64,
    /// Occurrences of prefixes seen more than once over all prefix occurrences.
    pub prefix_reuse_ratio: f64,
    pub isl_stats: Option<MetricStats>,
    pub osl_stats: Option<MetricStats>,
    pub context_length_stats: Option<MetricStats>,
    pub unique_prompt_length_stats: Option<MetricStats>,
    pub hit_rate_stats: Option<MetricStats>,
}

/// Analyzes the rows of a trace whose hash ids stand for `block_size` tokens each. A row
/// without `input_length` (text, messages or payload) counts as 0 input tokens and one
/// without `output_length` as 0 output tokens, as AIPerf counts them.
pub fn analyze(rows: &[TraceRow], block_size: u64) -> Analysis {
    let isls: Vec<u64> = rows.iter().map(|r| r.input_length.unwrap_or(0)).collect();
    let osls: Vec<u64> = rows.iter().map(|r| r.output_length.unwrap_or(0)).collect();
    let with_ids = || rows.iter().filter(|r| !r.hash_ids.is_empty());

    // Every prefix of every row's hash ids is a node of a trie, counted once per row.
    let mut trie: HashMap<(usize, u64), usize> = HashMap::new();
    let mut prefix_counts: Vec<u64> = Vec::new();
    let mut at_position: HashMap<(usize, u64), u64> = HashMap::new();
    for row in with_ids() {
        let mut node = usize::MAX;
        for (pos, &id) in row.hash_ids.iter().enumerate() {
            let next = prefix_counts.len();
            node = *trie.entry((node, id)).or_insert(next);
            if node == next {
                prefix_counts.push(0);
            }
            prefix_counts[node] += 1;
            *at_position.entry((pos, id)).or_default() += 1;
        }
    }

    // A block is context when the same id sits at the same position in another row; a row
    // made only of such blocks is all context.
    let repeated = |pos: usize, id: u64| at_position.get(&(pos, id)).is_some_and(|&n| n > 1);
    let (mut context, mut unique) = (Vec::new(), Vec::new());
    for (row, &isl) in rows.iter().zip(&isls) {
        let shared = row
            .hash_ids
            .iter()
            .enumerate()
            .filter(|&(pos, &id)| repeated(pos, id))
            .count() as u64;
        let ctx = match row.hash_ids.len() {
            0 => 0,
            n if shared == n as u64 => isl,
            _ => shared * block_size,
        };
        context.push(ctx as f64);
        unique.push(isl as f64 - ctx as f64);
    }

    // An infinite cache: a row hits its leading blocks up to the first never seen before.
    let mut seen: HashSet<u64> = HashSet::new();
    let mut hit_rates = Vec::new();
    for row in with_ids() {
        let ids = &row.hash_ids;
        let hits = ids
            .iter()
            .position(|id| !seen.contains(id))
            .unwrap_or(ids.len());
        hit_rates.push(hits as f64 / ids.len() as f64);
        seen.extend(ids.iter().copied());
    }

    let mut first_blocks: HashMap<u64, usize> = HashMap::new();
    for row in with_ids() {
        *first_blocks.entry(row.hash_ids[0]).or_default() += 1;
    }
    let total_prefixes: u64 = prefix_counts.iter().sum();
    let reused: u64 = prefix_counts.iter().filter(|&&n| n > 1).sum();
    let avg = |v: &[u64]| match v.len() {
        0 => 0.0,
        n => v.iter().sum::<u64>() as f64 / n as f64,
    };
    Analysis {
        total_requests: rows.len(),
        unique_prefixes: prefix_counts.len(),
        num_prefix_groups: first_blocks.values().filter(|&&n| n > 1).count(),
        cache_hit_rate: exact_mean(&hit_rates),
        min_isl: isls.iter().copied().min().unwrap_or(0),
        max_isl: isls.iter().copied().max().unwrap_or(0),
        avg_isl: avg(&isls),
        min_osl: osls.iter().copied().min().unwrap_or(0),
        max_osl: osls.iter().copied().max().unwrap_or(0),
        avg_osl: avg(&osls),
        prefix_reuse_ratio: match total_prefixes {
            0 => 0.0,
            n => reused as f64 / n as f64,
        },
        isl_stats: MetricStats::of(isls.iter().map(|&v| v as f64)),
        osl_stats: MetricStats::of(osls.iter().map(|&v| v as f64)),
        context_length_stats: MetricStats::of(context),
        unique_prompt_length_stats: MetricStats::of(unique),
        hit_rate_stats: MetricStats::of(hit_rates),
    }
}

/// The mean with the sum kept exact until the division (as Python's `statistics.mean`,
/// which AIPerf uses for the overall hit rate); 0 without values.
fn exact_mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    // Shewchuk's partial sums: non-overlapping parts whose sum is exact.
    let mut partials: Vec<f64> = Vec::new();
    for &v in values {
        let mut x = v;
        let mut kept = 0;
        for i in 0..partials.len() {
            let mut y = partials[i];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        partials.truncate(kept);
        partials.push(x);
    }
    partials.iter().sum::<f64>() / values.len() as f64
}

/// Width of the console AIPerf lays the report out for.
const WIDTH: usize = 120;

/// The console report: the counts, then one row of statistics per metric.
pub fn render(a: &Analysis) -> String {
    let mut out = String::from("\nTrace Analysis Report\n");
    out += &format!(
        "Total requests:   {}\n",
        format_count(a.total_requests as u64)
    );
    out += &format!(
        "Unique prefixes:  {}\n",
        format_count(a.unique_prefixes as u64)
    );
    out += &format!(
        "Prefix groups:    {}\n\n",
        format_count(a.num_prefix_groups as u64)
    );
    let mut table = Table::new("Trace Statistics").column("Metric", Justify::Right);
    for header in ["Mean", "Std Dev", "Min", "P25", "Median", "P75", "Max"] {
        table = table.column(header, Justify::Right);
    }
    let metrics = [
        ("Input Length", &a.isl_stats),
        ("Context Length", &a.context_length_stats),
        ("Unique Prompt Length", &a.unique_prompt_length_stats),
        ("Output Length", &a.osl_stats),
        ("Theoretical Hit Rates", &a.hit_rate_stats),
    ];
    for (name, stats) in metrics {
        let cells = match stats {
            Some(s) => [s.mean, s.std_dev, s.min, s.p25, s.median, s.p75, s.max]
                .map(format_number)
                .to_vec(),
            None => vec!["N/A".to_string(); 7],
        };
        table.row(std::iter::once(name.to_string()).chain(cells).collect());
    }
    out += &table.render(WIDTH);
    out.push('\n');
    out
}
