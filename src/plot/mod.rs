//! `aiperf plot`: charts of finished runs. `load` finds and reads the artifacts, `single`
//! and `multi` decide what each chart shows (`chart`), `render` draws them as PNG and SVG.

pub mod artifacts;
pub mod chart;
mod compared;
mod config;
pub mod dashboard;
mod multi;
pub mod render;
mod scale;
mod single;
pub mod streamed;

use std::path::{Path, PathBuf};

pub use artifacts::{PlotError, RunArtifacts, discover};
pub use chart::Chart;
pub use render::Theme;
pub use single::overlaid_cdfs;

/// The per-request metrics the charts read: a caller holding records for them (the report
/// of `aiperf profile`) keeps these and drops the rest.
pub const RECORD_TAGS: &[&str] = &[
    "time_to_first_token",
    "inter_token_latency",
    "request_latency",
    "output_sequence_length",
    "image_token_count",
    // Says whether `inputs.json` is read for the image sizes.
    "num_images",
];

/// The single-run plots drawn by default, in order.
const SINGLE_DEFAULTS: &[&str] = &[
    "ttft_distribution",
    "itl_distribution",
    "request_latency_distribution",
    "request_timeline",
    "ttft_over_time",
    "dispersed_throughput_over_time",
    "image_tokens_by_size",
    "latency_by_image_size",
    "server_requests_over_time",
    "server_kv_cache_over_time",
    "timeslices_ttft",
    "timeslices_itl",
];
/// Single-run plots drawn only when a config names them.
const SINGLE_EXTRAS: &[&str] = &[
    "itl_over_time",
    "latency_over_time",
    "timeslices_latency",
    "timeslices_throughput",
];
const MULTI_DEFAULTS: &[&str] = &[
    "ttft_vs_throughput",
    "pareto_curve_throughput_vs_interactivity",
    "pareto_curve_throughput_vs_latency",
    "latency_vs_load",
    "latency_throughput_uncertainty",
];
/// AIPerf's names for plots drawn here under another name.
const ALIASES: &[(&str, &str)] = &[("ttft_timeline", "request_timeline")];
/// AIPerf's plots that need data this version does not plot (skipped with a warning).
const NOT_DRAWN: &[(&str, &str)] = &[
    (
        "gpu_utilization_and_throughput_over_time",
        "GPU telemetry is not plotted by this version",
    ),
    (
        "pareto_curve_throughput_per_gpu_vs_latency",
        "throughput per GPU needs GPU telemetry, which is not plotted by this version",
    ),
    (
        "pareto_curve_throughput_per_gpu_vs_interactivity",
        "throughput per GPU needs GPU telemetry, which is not plotted by this version",
    ),
];

/// Every plot name a config may use, for the single- or multi-run set.
pub fn known_plot(name: &str, single: bool) -> bool {
    let ours = if single {
        SINGLE_DEFAULTS.contains(&name) || SINGLE_EXTRAS.contains(&name)
    } else {
        MULTI_DEFAULTS.contains(&name)
    };
    ours || ALIASES.iter().any(|(a, _)| *a == name) || NOT_DRAWN.iter().any(|(n, _)| *n == name)
}

/// The charts of the default set that the runs have data for: the single-run set for one
/// run, the multi-run set for several (a sweep or repeated runs).
pub fn default_charts(runs: &[RunArtifacts]) -> Vec<Chart> {
    let names = defaults(runs.len() == 1);
    select(runs, &names, &mut Vec::new())
}

/// The single-run default charts of `run`, whose records (but those with images, which
/// `run` holds) are read from `rows`; each per-request series thinned to about `max`
/// points. The same charts as `default_charts` of the run with every record, thinned.
pub fn default_charts_streamed(
    run: &mut RunArtifacts,
    rows: &dyn streamed::Rows,
    max: usize,
) -> Vec<Chart> {
    let (data, first_start_ns) = streamed::per_record(rows, max);
    run.set_first_start_ns(first_start_ns);
    let all = single::charts_of(run, data);
    select_from(all, &defaults(true), &mut Vec::new())
}

fn defaults(single: bool) -> Vec<String> {
    let list = if single {
        SINGLE_DEFAULTS
    } else {
        MULTI_DEFAULTS
    };
    list.iter().map(|s| s.to_string()).collect()
}

/// Every chart of the set that applies (single- or multi-run), by name, `None` where the
/// runs lack its data.
pub fn candidate_charts(runs: &[RunArtifacts]) -> Vec<(String, Option<Chart>)> {
    match runs {
        [] => Vec::new(),
        [one] => single::charts(one),
        many => multi::charts(many),
    }
}

/// What a chart needs that the runs did not have.
fn missing_reason(name: &str) -> &'static str {
    match name {
        n if n.starts_with("server_") => {
            "no server-metrics scrapes (server_metrics_export.jsonl: profile with --server-metrics-formats json,jsonl)"
        }
        n if n.starts_with("timeslices_") => {
            "no profile_export_aiperf_timeslices.csv (profile with --slice-duration)"
        }
        n if n.contains("image") => "no images in the requests (or inputs.json missing)",
        "latency_throughput_uncertainty" => {
            "no repeated runs (profile_export_aiperf_aggregate.json)"
        }
        "latency_vs_load" => "no concurrency or request rate in the runs' configuration",
        _ => "the runs have no data for it (profile_export.jsonl and profile_export_aiperf.json)",
    }
}

/// The charts named in `names`, in that order; a name without data adds a warning.
fn select(runs: &[RunArtifacts], names: &[String], warnings: &mut Vec<String>) -> Vec<Chart> {
    select_from(candidate_charts(runs), names, warnings)
}

fn select_from(
    mut all: Vec<(String, Option<Chart>)>,
    names: &[String],
    warnings: &mut Vec<String>,
) -> Vec<Chart> {
    let mut out = Vec::new();
    for name in names {
        let ours = ALIASES
            .iter()
            .find(|(a, _)| a == name)
            .map_or(name.as_str(), |(_, o)| o);
        if let Some((_, why)) = NOT_DRAWN.iter().find(|(n, _)| n == name) {
            warnings.push(format!("skipped {name}: {why}"));
            continue;
        }
        match all.iter_mut().find(|(n, _)| n == ours) {
            Some((_, chart @ Some(_))) => out.extend(chart.take()),
            Some((_, None)) => warnings.push(format!("skipped {name}: {}", missing_reason(ours))),
            None => {}
        }
    }
    out
}

/// `aiperf plot`'s choices.
#[derive(Debug, Clone)]
pub struct Options {
    pub paths: Vec<PathBuf>,
    /// Default `<first path>/plots`.
    pub output: Option<PathBuf>,
    pub theme: Theme,
    pub config: Option<PathBuf>,
}

/// What a plot run wrote.
#[derive(Debug, Default)]
pub struct Written {
    pub output: PathBuf,
    /// PNG and SVG files, in chart order.
    pub files: Vec<PathBuf>,
    /// Plots skipped and config keys ignored, one line each.
    pub warnings: Vec<String>,
    pub runs: usize,
    /// The page comparing several runs (`report.html`), when there were several.
    pub page: Option<PathBuf>,
}

pub const SUMMARY_FILE: &str = "summary.txt";
pub const LOG_FILE: &str = "aiperf_plot.log";
/// A plot config kept with the artifacts, read when `--config` is not given.
pub const LOCAL_CONFIG_FILE: &str = ".aiperf-plot-config.yaml";

/// Writes the page comparing several runs (report.html) from their charts; given by the
/// caller, since the page is the report's (which draws with this module).
pub type RunsPage = fn(&Path, &[RunArtifacts], Vec<Chart>) -> Result<PathBuf, String>;

/// Finds the runs, draws the chosen charts into the output directory, and writes
/// `summary.txt` and `aiperf_plot.log` there; with several runs, `runs_page` too.
pub fn run(opts: &Options, runs_page: RunsPage) -> Result<Written, PlotError> {
    // As AIPerf: --config, else a `.aiperf-plot-config.yaml` in the first artifact directory.
    let config_path = opts.config.clone().or_else(|| {
        let beside = opts.paths.first()?.join(LOCAL_CONFIG_FILE);
        beside.is_file().then_some(beside)
    });
    let config = match &config_path {
        Some(path) => config::read(path, known_plot)?,
        None => config::PlotConfig::default(),
    };
    let runs = discover(&opts.paths)?;
    let mut warnings = Vec::new();
    if !config.ignored.is_empty() {
        warnings.push(format!(
            "{}: not used by this version: {}",
            opts.config
                .as_deref()
                .unwrap_or(Path::new("config"))
                .display(),
            config.ignored.join(", ")
        ));
    }
    let single = runs.len() == 1;
    let names = if single {
        config.single_run.clone()
    } else {
        config.multi_run.clone()
    }
    .unwrap_or_else(|| defaults(single));
    let charts = select(&runs, &names, &mut warnings);
    let output = opts
        .output
        .clone()
        .unwrap_or_else(|| opts.paths[0].join("plots"));
    std::fs::create_dir_all(&output).map_err(|source| PlotError::Io {
        path: output.clone(),
        source,
    })?;
    let mut files = Vec::new();
    for chart in &charts {
        files.extend(render::write_chart(&output, chart, opts.theme)?);
    }
    // Several runs: one page with their distributions overlaid and their figures side by
    // side, then the charts drawn above.
    let page = if runs.len() > 1 {
        let mut page_charts = compared::distributions(&runs);
        page_charts.extend(charts);
        let path = runs_page(&output, &runs, page_charts).map_err(|what| PlotError::Render {
            name: crate::export::REPORT_HTML_FILE.into(),
            what,
        })?;
        Some(path)
    } else {
        None
    };
    let written = Written {
        output,
        files,
        warnings,
        runs: runs.len(),
        page,
    };
    write_summary(&written)?;
    Ok(written)
}

/// `summary.txt` in AIPerf's words (the PNGs; each has an SVG beside it), and the log.
fn write_summary(w: &Written) -> Result<(), PlotError> {
    let pngs: Vec<&PathBuf> = w
        .files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
        .collect();
    let mut text = format!(
        "AIPerf Plot Export Summary\n{}\n\nGenerated {} plots:\n\n",
        "=".repeat(50),
        pngs.len()
    );
    for p in &pngs {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        text.push_str(&format!("  - {name}\n"));
    }
    text.push_str(&format!("\nOutput directory: {}\n", w.output.display()));
    let path = w.output.join(SUMMARY_FILE);
    std::fs::write(&path, text).map_err(|source| PlotError::Io { path, source })?;
    let mut log = format!("{} run(s) plotted\n", w.runs);
    for warning in &w.warnings {
        log.push_str(&format!("WARNING {warning}\n"));
    }
    for f in w.files.iter().chain(&w.page) {
        log.push_str(&format!("wrote {}\n", f.display()));
    }
    let path = w.output.join(LOG_FILE);
    std::fs::write(&path, log).map_err(|source| PlotError::Io { path, source })
}

/// numpy's linear-interpolated percentile (`p50` -> 0.5) of `values`.
fn stats_percentile(values: &[f64], p: &str) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let (lo, hi, pos) = percentile_ranks(v.len(), p)?;
    Some(interpolate(v[lo], v[hi], lo, pos))
}

/// The ranks of `n` sorted values that `stats_percentile` interpolates between, and the
/// position between them.
fn percentile_ranks(n: usize, p: &str) -> Option<(usize, usize, f64)> {
    let q: f64 = p.strip_prefix('p')?.parse::<f64>().ok()? / 100.0;
    let last = n.checked_sub(1)?;
    let pos = q * last as f64;
    Some((pos.floor() as usize, pos.ceil() as usize, pos))
}

fn interpolate(at_lo: f64, at_hi: f64, lo: usize, pos: f64) -> f64 {
    at_lo + (at_hi - at_lo) * (pos - lo as f64)
}

impl Options {
    /// `aiperf plot`'s flags; AIPerf's MLflow upload is refused.
    pub fn from_args(a: &crate::cli::plot::PlotArgs) -> Result<Options, PlotError> {
        if a.mlflow_upload {
            return Err(PlotError::Config(
                "--mlflow-upload: uploading to MLflow is not supported; drop the flag and upload the files in --output yourself".into(),
            ));
        }
        Ok(Options {
            paths: a.paths.clone(),
            output: a.output.clone(),
            theme: match a.theme {
                crate::cli::plot::PlotTheme::Light => Theme::Light,
                crate::cli::plot::PlotTheme::Dark => Theme::Dark,
            },
            config: a.config.clone(),
        })
    }
}

impl PlotError {
    /// Bad input (paths, flags, config) is a usage error (exit 2); a failure to draw or
    /// write is 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            PlotError::Render { .. } | PlotError::Io { .. } => 1,
            _ => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chart_built_has_a_known_name() {
        for n in SINGLE_DEFAULTS.iter().chain(SINGLE_EXTRAS) {
            assert!(known_plot(n, true));
        }
        assert!(known_plot("ttft_timeline", true));
        assert!(!known_plot("ttft_distribution", false));
        let run = RunArtifacts::default();
        for (name, _) in single::charts(&run) {
            assert!(known_plot(&name, true), "{name}");
        }
        for (name, _) in multi::charts(&[run.clone(), run]) {
            assert!(known_plot(&name, false), "{name}");
        }
    }

    /// Rows holding only `RECORD_TAGS` draw every chart as rows holding every metric.
    #[test]
    fn record_tags_are_every_metric_the_charts_read() {
        use crate::metrics::catalog::CATALOG;
        let dir = tempfile::tempdir().unwrap();
        let rows = |keep: &dyn Fn(&str) -> bool| -> Vec<artifacts::RecordRow> {
            (0..40u64)
                .map(|i| {
                    let metrics = CATALOG
                        .iter()
                        .enumerate()
                        .map(|(k, d)| (d.tag, ((i * 7 + k as u64 * 3) % 23) as f64 + 0.5))
                        .filter(|(tag, _)| keep(tag));
                    let start = 1_000_000_000 + i * 37_000_000;
                    let mut row = artifacts::RecordRow::new(
                        start,
                        start + 90_000_000 + i * 1_000_000,
                        String::new(),
                        0,
                        i % 9 == 4,
                        metrics,
                    );
                    row.images = vec![(64 + i as u32, 48); (i % 3) as usize];
                    row
                })
                .collect()
        };
        let charts = |records| {
            let run = artifacts::read_run_with(dir.path(), "run".into(), records).unwrap();
            serde_json::to_value(candidate_charts(&[run])).unwrap()
        };
        let all = charts(rows(&|_| true));
        let drawn = all.as_array().unwrap().iter().filter(|c| !c[1].is_null());
        assert!(drawn.count() >= 7, "{all:#}");
        assert_eq!(charts(rows(&|t| RECORD_TAGS.contains(&t))), all);
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        assert_eq!(stats_percentile(&[1.0, 2.0, 3.0, 4.0], "p50"), Some(2.5));
        assert_eq!(stats_percentile(&[], "p50"), None);
    }
}
