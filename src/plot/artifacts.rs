//! Finds run directories under the given paths (AIPerf's run discovery) and reads what the
//! plots need from their artifacts: the summary (or the confidence aggregate), the
//! per-request records, the time slices and the server-metrics scrapes.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::export::record_line::{self, MetricValue, RecordLine};
use crate::export::{
    AGGREGATE_JSON_FILE, FileNames, INPUTS_FILE, JSON_FILE, JSONL_FILE, TIMESLICES_CSV_FILE,
};
use crate::metrics::MetricId;

/// Why plotting could not go on.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error(
        "{0}: no such file or directory; pass an artifact directory written by `aiperf profile`"
    )]
    Missing(PathBuf),
    #[error(
        "no run found under {0}: a run directory holds profile_export.jsonl and profile_export_aiperf.json \
         (or profile_export_aiperf_aggregate.json); pass the artifact directory of a finished `aiperf profile`"
    )]
    NoRuns(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {what}")]
    Parse {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error(
        "{path}: no request records, though {JSON_FILE} beside it counts {counted} requests; the file is empty or cut (a full disk, a failed copy): restore it or profile again"
    )]
    NoRecords { path: PathBuf, counted: u64 },
    #[error("{0}")]
    Config(String),
    #[error("drawing {name}: {what}")]
    Render { name: String, what: String },
}

/// One request of `profile_export.jsonl` (profiling phase only).
#[derive(Debug, Clone, Default)]
pub struct RecordRow {
    pub start_ns: u64,
    pub end_ns: u64,
    pub conversation_id: String,
    pub turn_index: u64,
    pub failed: bool,
    /// Scalar metrics in the file's display units (ms, tokens, ...). A long run keeps
    /// every record's until the charts are drawn (a map of tag strings took 3 KB per
    /// record), so the catalogue's are a bit per metric id present and the values in id
    /// order; any other tag is kept by name.
    metric_ids: u128,
    metric_values: Box<[f64]>,
    other_metrics: Box<[(Box<str>, f64)]>,
    /// Width x height of each image the request carried (from `inputs.json`).
    pub images: Vec<(u32, u32)>,
}

impl RecordRow {
    /// A profiling request's row; `metrics` are (tag or resolved key, value) in the
    /// per-record file's display units (a repeated tag keeps its last value, as a JSON
    /// object reads).
    pub fn new<'a, K: Into<MetricKey<'a>>>(
        start_ns: u64,
        end_ns: u64,
        conversation_id: String,
        turn_index: u64,
        failed: bool,
        metrics: impl Iterator<Item = (K, f64)>,
    ) -> RecordRow {
        let (metric_ids, metric_values, other_metrics) = compact_metrics(metrics);
        RecordRow {
            start_ns,
            end_ns,
            conversation_id,
            turn_index,
            failed,
            metric_ids,
            metric_values,
            other_metrics,
            images: Vec::new(),
        }
    }

    /// Every metric as (tag, value), sorted by tag.
    #[cfg(test)]
    fn metric_pairs(&self) -> Vec<(String, f64)> {
        let ids = (0..128u32).filter(|i| self.metric_ids & (1u128 << i) != 0);
        let mut pairs: Vec<(String, f64)> = ids
            .zip(self.metric_values.iter())
            .map(|(i, &v)| {
                let def = crate::metrics::catalog::CATALOG
                    .iter()
                    .find(|d| d.id as u32 == i);
                (def.expect("a catalogue id").tag.to_string(), v)
            })
            .chain(self.other_metrics.iter().map(|(t, v)| (t.to_string(), *v)))
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs
    }

    /// The metric `tag` names (charts resolve their tags once: `metric_of`).
    #[cfg(test)]
    pub fn metric(&self, tag: &str) -> Option<f64> {
        self.metric_of(MetricKey::new(tag))
    }

    /// The metric `key` names; a chart resolves its tags once and reads every row with
    /// them (looking the tag up per row was a fifth of the report's instructions).
    pub fn metric_of(&self, key: MetricKey<'_>) -> Option<f64> {
        match key.id {
            Some(id) => {
                let bit = 1u128 << id;
                (self.metric_ids & bit != 0).then(|| {
                    let below = self.metric_ids & (bit - 1);
                    self.metric_values[below.count_ones() as usize]
                })
            }
            None => self
                .other_metrics
                .iter()
                .find(|m| &*m.0 == key.tag)
                .map(|m| m.1),
        }
    }
}

/// A metric tag resolved to its place in [`RecordRow`]'s compact set, for reading many rows.
#[derive(Debug, Clone, Copy)]
pub struct MetricKey<'a> {
    tag: &'a str,
    /// The catalogue id when it has a bit in the set; other tags are kept by name.
    id: Option<u32>,
}

impl<'a> MetricKey<'a> {
    pub fn new(tag: &'a str) -> Self {
        let id = catalogue_id(tag)
            .filter(|&id| id_bit(id).is_some())
            .map(|id| id as u32);
        MetricKey { tag, id }
    }
}

impl<'a> From<&'a str> for MetricKey<'a> {
    fn from(tag: &'a str) -> Self {
        MetricKey::new(tag)
    }
}

/// The bit of a catalogue metric in [`RecordRow`]'s set (ids past 127 are kept by name).
fn id_bit(id: MetricId) -> Option<u128> {
    1u128.checked_shl(id as u32)
}

/// The catalogue metric with this tag (a hash look-up: it runs per record and metric).
fn catalogue_id(tag: &str) -> Option<MetricId> {
    static BY_TAG: std::sync::LazyLock<HashMap<&'static str, MetricId>> =
        std::sync::LazyLock::new(|| {
            crate::metrics::catalog::CATALOG
                .iter()
                .map(|d| (d.tag, d.id))
                .collect()
        });
    BY_TAG.get(tag).copied()
}

/// One row of `profile_export_aiperf_timeslices.csv`.
#[derive(Debug, Clone)]
pub struct TimesliceRow {
    pub index: usize,
    pub metric: String,
    pub unit: String,
    pub stat: String,
    pub value: f64,
}

/// One scrape's value of a server-metrics gauge or counter, summed over its label sets.
#[derive(Debug, Clone, Copy)]
pub struct ServerSample {
    pub wall_ns: u64,
    pub sum: f64,
    /// How many label sets were summed (to average a ratio such as the KV-cache usage).
    pub series: usize,
}

/// What a run's load was, for labelling it in multi-run plots.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPoint {
    /// `concurrency` or `request_rate`.
    pub name: String,
    pub value: f64,
}

/// Requests sent and failed, as a chart's subtitle and a report's header show them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Requests {
    pub total: u64,
    pub failed: u64,
}

impl Requests {
    /// Requests of a summary (`profile_export_aiperf.json`): `request_count` counts those
    /// that succeeded, `error_request_count` those that failed.
    pub fn of_summary(summary: &Value) -> Option<Requests> {
        let ok = summary["request_count"]["avg"].as_f64()?;
        let failed = summary["error_request_count"]["avg"]
            .as_f64()
            .unwrap_or(0.0);
        Some(Requests {
            total: (ok + failed).round() as u64,
            failed: failed.round() as u64,
        })
    }

    /// The sum over runs.
    pub fn sum(all: impl Iterator<Item = Requests>) -> Requests {
        all.fold(Requests::default(), |a, b| Requests {
            total: a.total + b.total,
            failed: a.failed + b.failed,
        })
    }

    /// E.g. `36 requests, 6 failed`.
    pub fn text(&self) -> String {
        let noun = if self.total == 1 {
            "request"
        } else {
            "requests"
        };
        format!("{} {noun}, {} failed", self.total, self.failed)
    }
}

/// Everything read from one run directory.
#[derive(Debug, Clone, Default)]
pub struct RunArtifacts {
    pub dir: PathBuf,
    /// The directory relative to the path it was found under (its name if it is that path).
    pub label: String,
    /// `profile_export_aiperf.json`, when present.
    pub summary: Option<Value>,
    /// `profile_export_aiperf_aggregate.json` (repeated runs), when present.
    pub aggregate: Option<Value>,
    pub records: Vec<RecordRow>,
    pub timeslices: Vec<TimesliceRow>,
    /// Server-metrics families over time (from `server_metrics_export.jsonl`).
    pub server: BTreeMap<String, Vec<ServerSample>>,
    pub load: Option<LoadPoint>,
    /// The wall time the run's first request was sent (the time axes' zero), found once:
    /// the charts convert every point against it.
    first_start_ns: Option<u64>,
}

impl RunArtifacts {
    /// A run-level statistic, e.g. (`time_to_first_token`, `p50`): from the summary, or the
    /// mean across trials from the aggregate.
    pub fn stat(&self, tag: &str, stat: &str) -> Option<f64> {
        if let Some(v) = self.summary.as_ref().and_then(|s| s[tag][stat].as_f64()) {
            return Some(v);
        }
        let m = &self.aggregate.as_ref()?["metrics"][format!("{tag}_{stat}")];
        m["mean"].as_f64()
    }

    /// The confidence interval of a run-level statistic across repeated runs.
    pub fn ci(&self, tag: &str, stat: &str) -> Option<(f64, f64)> {
        let m = &self.aggregate.as_ref()?["metrics"][format!("{tag}_{stat}")];
        Some((m["ci_low"].as_f64()?, m["ci_high"].as_f64()?))
    }

    /// How many requests the run sent and how many of them failed, from the summary (or the
    /// mean across trials).
    pub fn requests(&self) -> Option<Requests> {
        let ok = self.stat("request_count", "avg")?;
        let failed = self.stat("error_request_count", "avg").unwrap_or(0.0);
        Some(Requests {
            total: (ok + failed).round() as u64,
            failed: failed.round() as u64,
        })
    }

    /// The wall time the run's first request was sent.
    pub fn first_start_ns(&self) -> Option<u64> {
        self.first_start_ns
    }

    /// Sets the first request's start, of records that `records` does not all hold.
    pub fn set_first_start_ns(&mut self, first_start_ns: Option<u64>) {
        self.first_start_ns = first_start_ns;
    }
}

/// Finds the run directories under `paths` (searched recursively) and reads them. A run
/// directory holds `profile_export.jsonl` and `profile_export_aiperf.json`, or the
/// confidence aggregate of repeated runs; `profile_runs/` is skipped where an `aggregate/`
/// sits beside it (the aggregate stands for those runs).
pub fn discover(paths: &[PathBuf]) -> Result<Vec<RunArtifacts>, PlotError> {
    let mut runs = Vec::new();
    for root in paths {
        if !root.exists() {
            return Err(PlotError::Missing(root.clone()));
        }
        let mut dirs = Vec::new();
        find_run_dirs(root, &mut dirs)?;
        for dir in dirs {
            let label = match dir.strip_prefix(root) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
                _ => own_label(&dir),
            };
            runs.push(read_run(&dir, label)?);
        }
    }
    if let [only] = runs.as_slice()
        && let Some(trials) = trials_of(only)?
    {
        runs = trials;
    }
    if runs.is_empty() {
        let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(PlotError::NoRuns(list.join(", ")));
    }
    // Multi-run plots read left to right by load.
    runs.sort_by(|a, b| {
        let la = a.load.as_ref().map(|l| l.value).unwrap_or(f64::NAN);
        let lb = b.load.as_ref().map(|l| l.value).unwrap_or(f64::NAN);
        la.total_cmp(&lb).then_with(|| a.label.cmp(&b.label))
    });
    Ok(runs)
}

/// The label of a run found at the very path it was looked for under: its name.
pub fn own_label(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Repeated runs of one configuration leave a single aggregate, which has no per-request
/// data to plot: its trials (`profile_runs/` beside it) are plotted side by side instead.
fn trials_of(run: &RunArtifacts) -> Result<Option<Vec<RunArtifacts>>, PlotError> {
    if !run.records.is_empty() || run.aggregate.is_none() {
        return Ok(None);
    }
    let Some(base) = run.dir.parent() else {
        return Ok(None);
    };
    let trials_dir = base.join("profile_runs");
    if !trials_dir.is_dir() {
        return Ok(None);
    }
    let mut dirs = Vec::new();
    find_run_dirs(&trials_dir, &mut dirs)?;
    if dirs.len() < 2 {
        return Ok(None);
    }
    let mut trials = Vec::new();
    for dir in dirs {
        let label = dir
            .strip_prefix(base)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| dir.display().to_string());
        trials.push(read_run(&dir, label)?);
    }
    Ok(Some(trials))
}

fn is_run_dir(dir: &Path) -> bool {
    (dir.join(JSONL_FILE).is_file() && dir.join(JSON_FILE).is_file())
        || (dir.join(AGGREGATE_JSON_FILE).is_file() && !shadows_single_run(dir))
}

/// An aggregate of one successful run only repeats that run's directory (sweeps with one
/// trial write one per cell).
fn shadows_single_run(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(AGGREGATE_JSON_FILE)) else {
        return false;
    };
    let Ok(doc) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let meta = &doc["metadata"];
    meta["single_run"].as_bool() == Some(true)
        || meta["num_successful_runs"].as_u64().is_some_and(|n| n < 2)
}

fn find_run_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PlotError> {
    if is_run_dir(dir) {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let io = |source| PlotError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    let has_aggregate = dir.join("aggregate").is_dir();
    for sub in subdirs {
        let name = sub.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "profile_runs" && has_aggregate {
            continue;
        }
        find_run_dirs(&sub, out)?;
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Option<Value>, PlotError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(PlotError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| PlotError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            what: format!("not valid JSON ({e})"),
        })
}

/// Reads one run directory.
pub fn read_run(dir: &Path, label: String) -> Result<RunArtifacts, PlotError> {
    let path = dir.join(JSONL_FILE);
    let run = read_run_with(dir, label, read_records(&path)?)?;
    // An emptied records file would plot as a run without requests, with no chart at all.
    let counted = run.summary.as_ref().map_or(0.0, |s| {
        ["request_count", "error_request_count"]
            .iter()
            .filter_map(|tag| s[tag]["avg"].as_f64())
            .sum()
    });
    if run.records.is_empty() && counted > 0.0 && path.is_file() {
        return Err(PlotError::NoRecords {
            path,
            counted: counted as u64,
        });
    }
    Ok(run)
}

/// Reads one run directory whose profiling records are already at hand (`aiperf
/// profile` keeps them as it writes `profile_export.jsonl`, rather than reading it back).
pub fn read_run_with(
    dir: &Path,
    label: String,
    mut records: Vec<RecordRow>,
) -> Result<RunArtifacts, PlotError> {
    let summary = read_json(&dir.join(JSON_FILE))?;
    let aggregate = read_json(&dir.join(AGGREGATE_JSON_FILE))?;
    let images = MetricKey::new("num_images");
    if records
        .iter()
        .any(|r| r.metric_of(images).unwrap_or(0.0) > 0.0)
    {
        attach_image_sizes(&dir.join(INPUTS_FILE), &mut records);
    }
    let timeslices = read_timeslices(&dir.join(TIMESLICES_CSV_FILE))?;
    let server_file = format!("{}.jsonl", FileNames::default().server_metrics);
    let server = read_server_metrics(&dir.join(server_file))?;
    let config = summary
        .as_ref()
        .map(|s| &s["input_config"])
        .filter(|c| !c.is_null());
    let load = config
        .and_then(load_from_config)
        .or_else(|| aggregate.as_ref().and_then(load_from_aggregate))
        .or_else(|| load_from_path(dir));
    let first_start_ns = records.iter().map(|r| r.start_ns).min();
    Ok(RunArtifacts {
        dir: dir.to_path_buf(),
        label,
        summary,
        aggregate,
        records,
        timeslices,
        server,
        load,
        first_start_ns,
    })
}

fn read_records(path: &Path) -> Result<Vec<RecordRow>, PlotError> {
    let mut rows = Vec::new();
    for_each_line(path, "record", |line| {
        rows.extend(record_row(&record_line::parse(line)?));
        Ok(())
    })?;
    Ok(rows)
}

/// `RecordRow`'s metric fields: ids present, their values in id order, other tags by name.
type CompactMetrics = (u128, Box<[f64]>, Box<[(Box<str>, f64)]>);

/// A record's metrics in `RecordRow`'s compact form; a repeated tag keeps its last value,
/// as a JSON object reads.
fn compact_metrics<'a, K: Into<MetricKey<'a>>>(
    pairs: impl Iterator<Item = (K, f64)>,
) -> CompactMetrics {
    let mut metrics: Vec<(u32, f64)> = Vec::new();
    let mut other_metrics: Vec<(Box<str>, f64)> = Vec::new();
    for (key, value) in pairs {
        let key = key.into();
        match key.id {
            Some(id) => match metrics.iter_mut().find(|m| m.0 == id) {
                Some(m) => m.1 = value,
                None => metrics.push((id, value)),
            },
            None => match other_metrics.iter_mut().find(|m| &*m.0 == key.tag) {
                Some(m) => m.1 = value,
                None => other_metrics.push((key.tag.into(), value)),
            },
        }
    }
    metrics.sort_unstable_by_key(|m| m.0);
    let metric_ids = metrics.iter().fold(0u128, |ids, m| ids | 1 << m.0);
    (
        metric_ids,
        metrics.iter().map(|m| m.1).collect(),
        other_metrics.into(),
    )
}

/// A record of the profiling phase as a row; `None` for the other phases.
fn record_row(line: &RecordLine) -> Option<RecordRow> {
    if !line.is_profiling() {
        return None;
    }
    let meta = &line.metadata;
    let metrics = line.metrics.0.iter().filter_map(|(tag, v)| match v {
        MetricValue::Number(x) => Some((&**tag, *x)),
        _ => None,
    });
    Some(RecordRow::new(
        meta.request_start_ns.as_u64().unwrap_or(0),
        meta.request_end_ns.as_u64().unwrap_or(0),
        meta.conversation_id.as_str().unwrap_or("").to_string(),
        meta.turn_index.as_u64().unwrap_or(0),
        line.error.is_some(),
        metrics,
    ))
}

/// Calls `each` with every non-blank line of a JSON-lines file; a missing file has no
/// lines, a line that is not JSON is an error naming the file, the line and `what` it is.
fn for_each_json_line(
    path: &Path,
    what: &str,
    mut each: impl FnMut(Value),
) -> Result<(), PlotError> {
    for_each_line(path, what, |line| {
        each(serde_json::from_str(line)?);
        Ok(())
    })
}

/// `for_each_json_line` with the line's text: `each` parses it, and its error is reported
/// with the file, the line and `what` it is.
fn for_each_line(
    path: &Path,
    what: &str,
    mut each: impl FnMut(&str) -> Result<(), serde_json::Error>,
) -> Result<(), PlotError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(PlotError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|source| PlotError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        // Without its line end, as `lines()` gives it (error positions stay on line 1).
        let text = line.strip_suffix('\n').unwrap_or(&line);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.trim().is_empty() {
            continue;
        }
        each(text).map_err(|e| PlotError::Parse {
            path: path.to_path_buf(),
            line: number,
            what: format!("not a JSON {what} ({e})"),
        })?;
    }
}

/// Image sizes come from the request bodies in `inputs.json` (a session's payloads are its
/// turns in order); an unreadable file only leaves them out. The file is read as a
/// stream and each data URL is reduced to its size as it is parsed: the bodies of a run
/// with many images are hundreds of MB, held twice (text and tree) when read whole.
fn attach_image_sizes(path: &Path, records: &mut [RecordRow]) {
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let Ok(doc) = serde_json::from_reader::<_, inputs::File>(std::io::BufReader::new(file)) else {
        return;
    };
    let mut sizes: HashMap<(&str, u64), &[(u32, u32)]> = HashMap::new();
    for session in &doc.data {
        for (turn, payload) in session.payloads.iter().enumerate() {
            // The turn's own images are in its last message (earlier ones are history).
            let dims = payload.messages.last().map_or(&[][..], |m| &m.content[..]);
            sizes.insert((&session.session_id, turn as u64), dims);
        }
    }
    for r in records.iter_mut() {
        if let Some(d) = sizes.get(&(r.conversation_id.as_str(), r.turn_index)) {
            r.images = d.to_vec();
        }
    }
}

/// What the plots read of `inputs.json`: the image sizes of every message.
mod inputs {
    use serde::Deserialize;
    use serde::de::{Deserializer, SeqAccess, Visitor};

    #[derive(Deserialize)]
    pub struct File {
        #[serde(default)]
        pub data: Vec<Session>,
    }

    #[derive(Deserialize)]
    pub struct Session {
        #[serde(default)]
        pub session_id: String,
        #[serde(default)]
        pub payloads: Vec<Payload>,
    }

    #[derive(Deserialize)]
    pub struct Payload {
        #[serde(default)]
        pub messages: Vec<Message>,
    }

    #[derive(Deserialize)]
    pub struct Message {
        /// Width x height of each image part (text content has none).
        #[serde(default, deserialize_with = "image_sizes")]
        pub content: Vec<(u32, u32)>,
    }

    #[derive(Deserialize)]
    struct Part {
        #[serde(default)]
        image_url: Option<ImageUrl>,
    }

    #[derive(Deserialize)]
    struct ImageUrl {
        #[serde(default, deserialize_with = "data_url_size")]
        url: Option<(u32, u32)>,
    }

    fn image_sizes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u32, u32)>, D::Error> {
        struct Content;
        impl<'de> Visitor<'de> for Content {
            type Value = Vec<(u32, u32)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("message content (text or parts)")
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut parts: A) -> Result<Self::Value, A::Error> {
                let mut sizes = Vec::new();
                while let Some(part) = parts.next_element::<Part>()? {
                    sizes.extend(part.image_url.and_then(|u| u.url));
                }
                Ok(sizes)
            }
        }
        d.deserialize_any(Content)
    }

    fn data_url_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
        struct Url;
        impl Visitor<'_> for Url {
            type Value = Option<(u32, u32)>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an image URL")
            }
            fn visit_str<E>(self, url: &str) -> Result<Self::Value, E> {
                Ok(crate::dataset::data_url::image_size(url).ok())
            }
        }
        d.deserialize_str(Url)
    }
}

/// Splits one CSV line (fields may be double-quoted, with `""` for a quote).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().expect("one field").push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            _ => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

fn read_timeslices(path: &Path) -> Result<Vec<TimesliceRow>, PlotError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PlotError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    // Columns by the header's names: AIPerf 0.13 (and this tool) write the slice bounds
    // after the index, earlier versions did not.
    let mut lines = text.lines().map(|l| csv_fields(l.trim_end_matches('\r')));
    let header = lines.next().unwrap_or_default();
    let column = |name: &str| header.iter().position(|h| h == name);
    let (Some(i), Some(m), Some(u), Some(st), Some(v)) = (
        column("Timeslice"),
        column("Metric"),
        column("Unit"),
        column("Stat"),
        column("Value"),
    ) else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    for f in lines {
        if f.len() < header.len() {
            continue;
        }
        let (Ok(index), Ok(value)) = (f[i].parse::<usize>(), f[v].parse::<f64>()) else {
            continue;
        };
        rows.push(TimesliceRow {
            index,
            metric: f[m].clone(),
            unit: f[u].clone(),
            stat: f[st].clone(),
            value,
        });
    }
    Ok(rows)
}

fn read_server_metrics(path: &Path) -> Result<BTreeMap<String, Vec<ServerSample>>, PlotError> {
    let mut out: BTreeMap<String, Vec<ServerSample>> = BTreeMap::new();
    for_each_json_line(path, "scrape", |v| {
        if v["benchmark_phase"].as_str() == Some("warmup") {
            return;
        }
        let Some(wall_ns) = v["timestamp_ns"].as_u64() else {
            return;
        };
        for (family, series) in v["metrics"].as_object().into_iter().flatten() {
            let values: Vec<f64> = series
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["value"].as_f64())
                .collect();
            if values.is_empty() {
                continue;
            }
            out.entry(family.clone()).or_default().push(ServerSample {
                wall_ns,
                sum: values.iter().sum(),
                series: values.len(),
            });
        }
    })?;
    for samples in out.values_mut() {
        samples.sort_by_key(|s| s.wall_ns);
    }
    Ok(out)
}

/// The profiling phase's concurrency or request rate: ours (`phases`) or AIPerf's
/// (`loadgen`) `input_config`.
fn load_from_config(config: &Value) -> Option<LoadPoint> {
    let phase = config["phases"]
        .as_array()
        .and_then(|p| p.iter().find(|ph| ph["kind"] == "profiling"));
    let candidates = [
        phase.map(|p| ("concurrency", &p["concurrency"])),
        phase.map(|p| ("request_rate", &p["rate"])),
        Some(("concurrency", &config["loadgen"]["concurrency"])),
        Some(("request_rate", &config["loadgen"]["request_rate"])),
    ];
    candidates.into_iter().flatten().find_map(|(name, v)| {
        Some(LoadPoint {
            name: name.into(),
            value: v.as_f64()?,
        })
    })
}

/// A sweep cell's aggregate names its point in `variation_values`.
fn load_from_aggregate(doc: &Value) -> Option<LoadPoint> {
    let values = doc["metadata"]["variation_values"].as_object()?;
    for (path, v) in values {
        let leaf = path.rsplit('.').next().unwrap_or(path);
        let name = match leaf {
            "concurrency" => "concurrency",
            "rate" | "request_rate" => "request_rate",
            _ => continue,
        };
        if let Some(value) = v.as_f64() {
            return Some(LoadPoint {
                name: name.into(),
                value,
            });
        }
    }
    None
}

/// `concurrency8`, `concurrency_8`, `request_rate5.0` in a directory name.
fn load_from_path(dir: &Path) -> Option<LoadPoint> {
    for part in dir.iter().rev().filter_map(|p| p.to_str()) {
        for piece in part.split('-') {
            for name in ["concurrency", "request_rate"] {
                if let Some(rest) = piece.strip_prefix(name)
                    && let Ok(value) = rest.trim_start_matches('_').parse::<f64>()
                {
                    return Some(LoadPoint {
                        name: name.into(),
                        value,
                    });
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_keep_every_metric_value_and_skip_warmup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.jsonl");
        let line = |phase: &str, metrics: &str| {
            format!(
                r#"{{"metadata":{{"benchmark_phase":"{phase}","request_start_ns":5,"request_end_ns":9,"conversation_id":"c","turn_index":1}},"metrics":{metrics},"error":null}}"#
            )
        };
        let text = [
            line("warmup", r#"{"request_latency":{"value":1.0}}"#),
            line(
                "profiling",
                r#"{"request_latency":{"value":12.345678901},"output_sequence_length":{"value":16},"time_to_first_token":{"value":0.1},"not_in_the_catalogue":{"value":-2.5}}"#,
            ),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let rows = read_records(&path).unwrap();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.metric("request_latency"), Some(12.345678901));
        assert_eq!(r.metric("output_sequence_length"), Some(16.0));
        assert_eq!(r.metric("time_to_first_token"), Some(0.1));
        assert_eq!(r.metric("not_in_the_catalogue"), Some(-2.5));
        assert_eq!(r.metric("inter_token_latency"), None);
        assert_eq!((r.start_ns, r.end_ns, r.turn_index), (5, 9, 1));
    }

    #[test]
    fn csv_fields_handle_quotes() {
        assert_eq!(
            csv_fields(r#"0,"A, ""b""",ms,avg,1.5"#),
            vec!["0", "A, \"b\"", "ms", "avg", "1.5"]
        );
    }

    /// The row a record line gives when read as a `serde_json::Value`: the reference the
    /// shared line reader is held to.
    fn value_row(v: &Value) -> Option<RecordRow> {
        let meta = &v["metadata"];
        if meta["benchmark_phase"]
            .as_str()
            .is_some_and(|p| p != "profiling")
        {
            return None;
        }
        let metrics = v["metrics"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(tag, m)| Some((tag.as_str(), m["value"].as_f64()?)));
        Some(RecordRow::new(
            meta["request_start_ns"].as_u64().unwrap_or(0),
            meta["request_end_ns"].as_u64().unwrap_or(0),
            meta["conversation_id"].as_str().unwrap_or("").to_string(),
            meta["turn_index"].as_u64().unwrap_or(0),
            !v.get("error").is_none_or(Value::is_null),
            metrics,
        ))
    }

    /// The shared line reader gives the row the `Value` read gives.
    #[test]
    fn record_rows_equal_the_value_rows() {
        let lines = [
            r#"{"metadata":{"benchmark_phase":"profiling","request_start_ns":5,"request_end_ns":9,"conversation_id":"c\"1","turn_index":2},"metrics":{"a":{"value":1.5,"unit":"ms"},"b":{"value":[1,2],"unit":"ms"},"c":{"value":3},"d":{"value":null},"e":{"value":{"x":1}},"f":{"value":"s"},"g":{"unit":"ms"},"h":{"value":-4}},"error":null}"#,
            r#"{"metadata":{"benchmark_phase":"warmup"},"metrics":{}}"#,
            r#"{"metadata":{"request_start_ns":null},"error":{"code":500}}"#,
            r#"{"metadata":{"request_start_ns":1.5,"turn_index":"x"},"metrics":{"a":{"value":2}}}"#,
            r#"{"metrics":{"a":5}}"#,
            r#"{"metadata":[],"metrics":[],"error":"x"}"#,
        ];
        let key = |r: &RecordRow| {
            let mut m = r.metric_pairs();
            m.sort_by(|a, b| a.0.cmp(&b.0));
            (
                r.start_ns,
                r.end_ns,
                r.conversation_id.clone(),
                r.turn_index,
                r.failed,
                m,
            )
        };
        for line in lines {
            let by_value = value_row(&serde_json::from_str(line).unwrap());
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.jsonl");
            std::fs::write(&path, format!("{line}\r\n\n")).unwrap();
            let read = read_records(&path).unwrap();
            assert_eq!(
                read.iter().map(key).collect::<Vec<_>>(),
                by_value.iter().map(key).collect::<Vec<_>>(),
                "{line}"
            );
        }
        let row = record_row(&record_line::parse(lines[0]).unwrap()).unwrap();
        assert_eq!(row.conversation_id, "c\"1");
        assert_eq!(
            (row.metric("a"), row.metric("c"), row.metric("h")),
            (Some(1.5), Some(3.0), Some(-4.0))
        );
        assert_eq!(row.metric_pairs().len(), 3);
        assert!(!row.failed);
        let failed = record_row(&record_line::parse(lines[2]).unwrap()).unwrap();
        assert!(failed.failed);
        // An escaped tag is read too; a repeated tag reads its last.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let line = r#"{"metrics":{"a\u0062":{"value":1},"a":{"value":2},"a":{"value":3}}}"#;
        std::fs::write(&path, format!("{line}\n{line}\n")).unwrap();
        let rows = read_records(&path).unwrap();
        assert_eq!(
            (rows[0].metric("ab"), rows[0].metric("a")),
            (Some(1.0), Some(3.0))
        );
    }

    #[test]
    fn a_bad_record_line_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "{\"metrics\":{}}\n\n{\"metadata\": [\n").unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(
            e.ends_with(":3: not a JSON record (EOF while parsing a list at line 1 column 14)"),
            "{e}"
        );
    }

    #[test]
    fn load_is_read_from_directory_names() {
        let l = load_from_path(Path::new("a/m-openai-chat-concurrency8")).unwrap();
        assert_eq!((l.name.as_str(), l.value), ("concurrency", 8.0));
        let l = load_from_path(Path::new("x/concurrency_4/run")).unwrap();
        assert_eq!(l.value, 4.0);
        assert!(load_from_path(Path::new("x/y")).is_none());
    }
}
