//! `baseten_trace`: Baseten completion traces in Parquet, replayed as recorded. Rows are
//! read and checked (`read_rows`), sessions sampled (`sample`), timestamps normalised to the
//! first event, compressed (`--replay-speedup`) and reflowed (`--max-idle-gap-cap-seconds`),
//! then grouped into sessions that replay open-loop (each turn at its time, never before the
//! previous reply) or closed-loop (think times after each reply). Each turn sends its own
//! recorded prompt, which already holds the conversation so far.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::time::Duration;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde_json::{Map, json};
use tracing::info;

use super::{CustomOptions, InputError, Synthesis, non_empty};
use crate::dataset::{Conversation, Dataset, DatasetSampling, Entry, OwnRequest, derive_seed};

/// How a Baseten trace is replayed (AIPerf's defaults in `Default`).
#[derive(Debug, Clone, PartialEq)]
pub struct BasetenReplay {
    /// `--replay-speedup`: recorded times are divided by this.
    pub speedup: f64,
    /// `--max-idle-gap-cap-seconds`, in ms of replay time.
    pub idle_gap_cap_ms: Option<f64>,
    /// `--open-loop-replay` (default) / `--no-open-loop-replay`.
    pub open_loop: bool,
    /// `--open-loop-strict`: every row its own one-turn session.
    pub strict: bool,
    /// `--omit-kv-hints`: no `hash_ids` / `block_size` in the bodies.
    pub omit_kv_hints: bool,
    /// `--force-min-tokens` (default): `min_tokens` = the recorded output length.
    pub force_min_tokens: bool,
    /// `--trace-session-sample-ratio`: share of whole sessions kept.
    pub sample_ratio: Option<f64>,
    /// `--fixed-schedule-start-offset` / `--fixed-schedule-end-offset` (ms from the first
    /// event, inclusive): rows outside are dropped before they are grouped, as AIPerf does.
    pub window: (Option<u64>, Option<u64>),
    /// `AIPERF_DATASET_BASETEN_SESSION_COLUMN=poor_man_session_id`: that column groups the
    /// sessions when both exist.
    pub prefer_poor_man: bool,
}

impl Default for BasetenReplay {
    fn default() -> Self {
        BasetenReplay {
            speedup: 1.0,
            idle_gap_cap_ms: None,
            open_loop: true,
            strict: false,
            omit_kv_hints: false,
            force_min_tokens: true,
            sample_ratio: None,
            window: (None, None),
            prefer_poor_man: false,
        }
    }
}

const TIME: &str = "timestamp_start_unix_ms";
const PROVIDED: &str = "provided_session_id";
const POOR_MAN: &str = "poor_man_session_id";
const REQUIRED: [&str; 4] = [TIME, "prompt", "input_tokens", "output_tokens"];
const STREAM_SESSION_SAMPLE: u64 = 13;

/// One checked row of the trace.
#[derive(Debug, Clone)]
struct Row {
    ts: u64,
    prompt: String,
    input_tokens: u64,
    output_tokens: u64,
    hashes: Vec<u64>,
    session: Option<String>,
    e2e_ms: Option<u64>,
    block_size: Option<u64>,
    /// Replay time in ms from the first event (normalised, compressed, reflowed).
    t: f64,
    /// Closed-loop think time before this turn, in ms after the previous reply.
    delay_ms: Option<f64>,
}

/// Whether `path` names a file this loader reads by its suffix.
pub fn is_trace_file(path: &Path) -> bool {
    matches!(suffix(path).as_str(), "parquet" | "arrow" | "ipc")
}

fn suffix(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// The trace file's column names (Parquet only); None when it cannot be read as Parquet.
pub fn parquet_columns(path: &Path) -> Option<Vec<String>> {
    let reader = SerializedFileReader::new(File::open(path).ok()?).ok()?;
    let schema = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema();
    Some(
        schema
            .get_fields()
            .iter()
            .map(|f| f.name().to_string())
            .collect(),
    )
}

/// Loads and arranges the trace.
pub(super) fn load(opts: &CustomOptions, replay: &BasetenReplay) -> Result<Dataset, InputError> {
    let file = opts.path;
    if matches!(suffix(file).as_str(), "arrow" | "ipc") {
        return Err(format!(
            "{}: Arrow IPC traces are not read by this aiperf (its Arrow reader would add a large dependency); convert the trace to Parquet (e.g. pyarrow.parquet.write_table(pyarrow.ipc.open_file(path).read_all(), 'trace.parquet')) and give that file",
            file.display()
        ));
    }
    let (rows, session_key) = read_rows(file, replay.prefer_poor_man)?;
    if rows.is_empty() {
        return Err(super::no_entries(file));
    }
    let first = rows.iter().map(|r| r.ts).min().unwrap_or(0);
    let mut rows = match replay.sample_ratio.filter(|&r| r < 1.0) {
        Some(ratio) => sample(rows, ratio, opts.seed),
        None => rows,
    };
    let (start, end) = replay.window;
    let before = rows.len();
    rows.retain(|r| {
        let t = r.ts - first;
        start.is_none_or(|s| t >= s) && end.is_none_or(|e| t <= e)
    });
    if rows.len() < before {
        info!(
            "Skipped {} trace rows outside the --fixed-schedule-start-offset/--fixed-schedule-end-offset window",
            before - rows.len()
        );
    }
    let s = &opts.synthesis;
    let before = rows.len();
    rows.retain(|r| s.max_isl.is_none_or(|m| r.input_tokens <= m));
    if rows.len() < before {
        info!(
            "Skipped {} trace rows whose input_tokens exceed --synthesis-max-isl",
            before - rows.len()
        );
    }
    if rows.is_empty() {
        return Err(format!(
            "{}: no row is left after the schedule window and --synthesis-max-isl",
            file.display()
        ));
    }
    // Compressed once here; the gap cap and the think times work on replay time.
    for r in &mut rows {
        r.t = (r.ts - first) as f64 / replay.speedup;
    }
    // Closed-loop replay reflows only the session starts, after the think times are taken
    // from the recorded gaps.
    if replay.open_loop
        && let Some(cap) = replay.idle_gap_cap_ms
    {
        let mut all: Vec<&mut Row> = rows.iter_mut().collect();
        reflow_idle_gaps(&mut all, cap);
    }
    let mut sessions = group(rows, session_key.is_some());
    if !replay.open_loop {
        back_pressure(&mut sessions, replay.speedup);
        if let Some(cap) = replay.idle_gap_cap_ms {
            let mut starts: Vec<&mut Row> = sessions.iter_mut().map(|(_, t)| &mut t[0]).collect();
            reflow_idle_gaps(&mut starts, cap);
        }
    } else if replay.strict {
        sessions = sessions
            .into_iter()
            .flat_map(|(id, turns)| {
                turns
                    .into_iter()
                    .enumerate()
                    .map(move |(i, row)| (id.as_ref().map(|id| format!("{id}#{i}")), vec![row]))
            })
            .collect();
    }
    let conversations = sessions
        .into_iter()
        .map(|(session_id, turns)| Conversation {
            session_id,
            system: None,
            context: None,
            turns: turns
                .into_iter()
                .map(|row| entry(opts, replay, s, row))
                .collect(),
        })
        .collect();
    non_empty(file, conversations, DatasetSampling::Sequential)
}

/// One turn: the recorded prompt, `max_tokens` (and `min_tokens`) from the recorded output
/// length, and the KV-cache hints.
fn entry(opts: &CustomOptions, replay: &BasetenReplay, s: &Synthesis, row: Row) -> Entry {
    // Canceled requests record 0 output tokens; a request asks for at least one.
    let recorded = row.output_tokens.max(1);
    let scaled = (recorded as f64 * s.output_len_multiplier).round_ties_even() as u64;
    let output = s.max_osl.map_or(scaled, |m| scaled.min(m)).max(1);
    let mut extra = Map::new();
    if replay.force_min_tokens {
        extra.insert("min_tokens".into(), json!(output));
    }
    if !replay.omit_kv_hints {
        if !row.hashes.is_empty() {
            extra.insert("hash_ids".into(), json!(row.hashes));
        }
        if let Some(b) = row.block_size {
            extra.insert("block_size".into(), json!(b));
        }
    }
    Entry {
        input_tokens: opts.tokenizer.count(&row.prompt) as u64,
        text: row.prompt,
        images: Vec::new(),
        audios: Vec::new(),
        videos: Vec::new(),
        max_output_tokens: Some(output),
        extra_texts: Vec::new(),
        role: None,
        extra,
        timestamp_ms: (row.delay_ms.is_none()).then_some(row.t.round() as u64),
        delay: row
            .delay_ms
            .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0)),
        own: Some(OwnRequest::Prompt),
    }
}

/// Reads and checks every row; also returns the session column used (`provided_session_id`,
/// else `poor_man_session_id`, or the other way round; else none).
fn read_rows(
    file: &Path,
    prefer_poor_man: bool,
) -> Result<(Vec<Row>, Option<&'static str>), InputError> {
    let cannot =
        |e: &dyn std::fmt::Display| format!("{}: cannot read as Parquet: {e}", file.display());
    let reader = SerializedFileReader::new(File::open(file).map_err(|e| cannot(&e))?)
        .map_err(|e| cannot(&e))?;
    let columns: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    if let Some(missing) = REQUIRED.iter().find(|c| !columns.iter().any(|n| n == *c)) {
        return Err(format!(
            "{}: column '{missing}' is missing; a baseten_trace needs {} (it has {})",
            file.display(),
            REQUIRED.join(", "),
            columns.join(", ")
        ));
    }
    let has = |c: &str| columns.iter().any(|n| n == c);
    let order = if prefer_poor_man {
        [POOR_MAN, PROVIDED]
    } else {
        [PROVIDED, POOR_MAN]
    };
    let session_key = order.into_iter().find(|c| has(c));
    let mut rows = Vec::new();
    for (i, row) in reader.into_iter().enumerate() {
        let row = row.map_err(|e| cannot(&e))?;
        let at = |col: &str, what: &str, v: &Field| {
            format!(
                "{}: row {}: column '{col}': {what}, not {v}",
                file.display(),
                i + 1
            )
        };
        let mut r = Row {
            ts: 0,
            prompt: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            hashes: Vec::new(),
            session: None,
            e2e_ms: None,
            block_size: None,
            t: 0.0,
            delay_ms: None,
        };
        for (name, v) in row.get_column_iter() {
            let whole = |what: &str| whole_number(v).ok_or_else(|| at(name, what, v));
            match name.as_str() {
                TIME => r.ts = whole("must be a whole number of ms since the epoch, 0 or more")?,
                "prompt" => match v {
                    Field::Str(s) => r.prompt = s.clone(),
                    _ => return Err(at(name, "must be a string (the prompt sent)", v)),
                },
                "input_tokens" | "output_tokens" => {
                    let n = whole("must be a whole number of tokens, 0 or more")?;
                    if name == "input_tokens" {
                        r.input_tokens = n;
                    } else {
                        r.output_tokens = n;
                    }
                }
                "total_hashes" => {
                    r.hashes = match v {
                        Field::Null => Vec::new(),
                        Field::ListInternal(list) => list
                            .elements()
                            .iter()
                            .map(whole_number)
                            .collect::<Option<_>>()
                            .ok_or_else(|| {
                                at(name, "must be a list of whole numbers 0 or more", v)
                            })?,
                        _ => return Err(at(name, "must be a list of whole numbers 0 or more", v)),
                    }
                }
                "duration_e2e_ms" => r.e2e_ms = optional(v, &whole, "must be whole ms, 0 or more")?,
                "block_size" => {
                    r.block_size =
                        optional(v, &whole, "must be a whole number of tokens, 1 or more")?;
                    if r.block_size == Some(0) {
                        return Err(at(name, "must be a whole number of tokens, 1 or more", v));
                    }
                }
                PROVIDED if session_key == Some(PROVIDED) => {
                    r.session = match v {
                        Field::Null => None,
                        Field::Str(s) => Some(s.clone()),
                        _ => {
                            Some(whole("must be a string or a whole number 0 or more")?.to_string())
                        }
                    }
                }
                POOR_MAN if session_key == Some(POOR_MAN) => {
                    r.session = optional(v, &whole, "must be a whole number 0 or more")?
                        .map(|n| n.to_string());
                }
                _ => {}
            }
        }
        rows.push(r);
    }
    Ok((rows, session_key))
}

/// A nullable whole-number column.
fn optional(
    v: &Field,
    whole: &dyn Fn(&str) -> Result<u64, InputError>,
    what: &str,
) -> Result<Option<u64>, InputError> {
    match v {
        Field::Null => Ok(None),
        _ => whole(what).map(Some),
    }
}

fn whole_number(v: &Field) -> Option<u64> {
    match *v {
        Field::Byte(n) => u64::try_from(n).ok(),
        Field::Short(n) => u64::try_from(n).ok(),
        Field::Int(n) => u64::try_from(n).ok(),
        Field::Long(n) => u64::try_from(n).ok(),
        Field::UByte(n) => Some(n.into()),
        Field::UShort(n) => Some(n.into()),
        Field::UInt(n) => Some(n.into()),
        Field::ULong(n) => Some(n),
        _ => None,
    }
}

/// Keeps whole sessions, each with probability `ratio` in order of their first event (at
/// least one); rows without a session id are kept one by one at the same ratio.
fn sample(rows: Vec<Row>, ratio: f64, seed: u64) -> Vec<Row> {
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(seed, STREAM_SESSION_SAMPLE, 0));
    let mut first: HashMap<&str, u64> = HashMap::new();
    for r in &rows {
        if let Some(s) = &r.session {
            let t = first.entry(s).or_insert(r.ts);
            *t = (*t).min(r.ts);
        }
    }
    let mut order: Vec<(u64, &str)> = first.into_iter().map(|(s, t)| (t, s)).collect();
    order.sort();
    let mut kept: Vec<String> = order
        .iter()
        .filter(|_| rng.random::<f64>() < ratio)
        .map(|(_, s)| s.to_string())
        .collect();
    if kept.is_empty() && !order.is_empty() {
        kept.push(order[rng.random_range(0..order.len())].1.to_string());
    }
    let total = order.len();
    let null_rows = rows.iter().filter(|r| r.session.is_none()).count();
    let keep_null: Vec<bool> = (0..null_rows)
        .map(|_| rng.random::<f64>() < ratio)
        .collect();
    info!(
        "--trace-session-sample-ratio {ratio}: kept {} of {total} sessions and {} of {null_rows} rows without a session",
        kept.len(),
        keep_null.iter().filter(|k| **k).count()
    );
    let kept: std::collections::HashSet<String> = kept.into_iter().collect();
    let mut nulls = keep_null.into_iter();
    rows.into_iter()
        .filter(|r| match &r.session {
            Some(s) => kept.contains(s),
            None => nulls.next().unwrap_or(false),
        })
        .collect()
}

/// Walking the rows in time order, every gap longer than `cap_ms` is shortened to it
/// (whole ms; the earliest row keeps its time; ties keep their order).
fn reflow_idle_gaps(rows: &mut [&mut Row], cap_ms: f64) {
    let cap = cap_ms.ceil();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| rows[a].t.trunc().total_cmp(&rows[b].t.trunc()));
    let mut prev: Option<(f64, f64)> = None;
    for i in order {
        let old = rows[i].t.trunc();
        let new = match prev {
            None => old,
            Some((prev_old, prev_new)) => prev_new + (old - prev_old).min(cap),
        };
        rows[i].t = new;
        prev = Some((old, new));
    }
}

/// Sessions in order of their first event (then id); each session's turns in time order.
/// Rows without an id (or a trace without a session column) are sessions of their own.
fn group(rows: Vec<Row>, by_id: bool) -> Vec<(Option<String>, Vec<Row>)> {
    let mut named: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut out: Vec<(Option<String>, Vec<Row>)> = Vec::new();
    for r in rows {
        match r.session.clone().filter(|_| by_id) {
            Some(id) => named.entry(id).or_default().push(r),
            None => out.push((None, vec![r])),
        }
    }
    out.extend(named.into_iter().map(|(id, rows)| (Some(id), rows)));
    for (_, turns) in &mut out {
        turns.sort_by(|a, b| a.t.total_cmp(&b.t));
    }
    out.sort_by(|a, b| a.1[0].t.total_cmp(&b.1[0].t).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Closed-loop replay: a later turn follows the previous reply after the recorded
/// start-to-start gap minus the previous turn's recorded duration (both in replay time).
fn back_pressure(sessions: &mut [(Option<String>, Vec<Row>)], speedup: f64) {
    for (_, turns) in sessions {
        let mut prev: Option<(f64, f64)> = None;
        for row in turns.iter_mut() {
            let ts = row.t.trunc();
            let e2e = row.e2e_ms.unwrap_or(0) as f64 / speedup;
            if let Some((prev_ts, prev_e2e)) = prev {
                let gap = (ts - prev_ts).max(0.0);
                row.delay_ms = Some((gap - prev_e2e).max(0.0));
            }
            prev = Some((ts, e2e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(session: Option<&str>, ts: u64) -> Row {
        Row {
            ts,
            prompt: String::new(),
            input_tokens: 1,
            output_tokens: 1,
            hashes: Vec::new(),
            session: session.map(str::to_string),
            e2e_ms: None,
            block_size: None,
            t: ts as f64,
            delay_ms: None,
        }
    }

    #[test]
    fn idle_gaps_longer_than_the_cap_are_cut_in_time_order() {
        let mut rows = [
            row(None, 0),
            row(None, 50_000),
            row(None, 10),
            row(None, 50_300),
        ];
        let mut refs: Vec<&mut Row> = rows.iter_mut().collect();
        reflow_idle_gaps(&mut refs, 1000.0);
        let t: Vec<f64> = rows.iter().map(|r| r.t).collect();
        assert_eq!(t, [0.0, 1010.0, 10.0, 1310.0]);
    }

    #[test]
    fn think_time_is_the_gap_minus_the_previous_duration() {
        let mut a = row(Some("a"), 0);
        a.e2e_ms = Some(300);
        let mut b = row(Some("a"), 1000);
        b.e2e_ms = Some(5000);
        let c = row(Some("a"), 2000);
        let mut s = vec![(Some("a".to_string()), vec![a, b, c])];
        back_pressure(&mut s, 2.0);
        let d: Vec<Option<f64>> = s[0].1.iter().map(|r| r.delay_ms).collect();
        // Times are already compressed; the durations are divided here.
        assert_eq!(d, [None, Some(850.0), Some(0.0)]);
    }

    #[test]
    fn sampling_keeps_whole_sessions_and_at_least_one() {
        let rows: Vec<Row> = (0..40)
            .map(|i| row(Some(&format!("s{}", i % 10)), i))
            .collect();
        let kept = sample(rows.clone(), 0.5, 7);
        let mut per: HashMap<String, usize> = HashMap::new();
        for r in &kept {
            *per.entry(r.session.clone().unwrap()).or_default() += 1;
        }
        assert!(per.values().all(|&n| n == 4), "{per:?}");
        assert!(!per.is_empty() && per.len() < 10, "{per:?}");
        assert_eq!(sample(rows, 1e-9, 7).len(), 4);
    }

    /// Two rows: required columns, then optional int64 `provided_session_id`,
    /// `poor_man_session_id` and `block_size` (None = null).
    fn write(path: &Path, cols: [[Option<i64>; 2]; 3]) {
        use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        use std::sync::Arc;
        let schema = "message schema { required int64 timestamp_start_unix_ms; required binary prompt (UTF8); required int64 input_tokens; required int64 output_tokens; optional int64 provided_session_id; optional int64 poor_man_session_id; optional int64 block_size; }";
        let schema = Arc::new(parse_message_type(schema).unwrap());
        let props = Arc::new(WriterProperties::builder().build());
        let mut w = SerializedFileWriter::new(File::create(path).unwrap(), schema, props).unwrap();
        let mut g = w.next_row_group().unwrap();
        let mut i = 0;
        while let Some(mut c) = g.next_column().unwrap() {
            match i {
                1 => {
                    let v = [ByteArray::from("p"), ByteArray::from("q")];
                    c.typed::<ByteArrayType>()
                        .write_batch(&v, None, None)
                        .unwrap();
                }
                0 | 2 | 3 => {
                    let v = if i == 0 { [7, 9] } else { [1, 1] };
                    c.typed::<Int64Type>().write_batch(&v, None, None).unwrap();
                }
                _ => {
                    let col = cols[i - 4];
                    let v: Vec<i64> = col.iter().flatten().copied().collect();
                    let d: Vec<i16> = col.iter().map(|x| x.is_some() as i16).collect();
                    c.typed::<Int64Type>()
                        .write_batch(&v, Some(&d), None)
                        .unwrap();
                }
            }
            c.close().unwrap();
            i += 1;
        }
        g.close().unwrap();
        w.close().unwrap();
    }

    #[test]
    fn integer_session_ids_and_the_preferred_column_group_the_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        write(
            &path,
            [[Some(5), None], [Some(1), Some(1)], [Some(16), None]],
        );
        let (rows, key) = read_rows(&path, false).unwrap();
        assert_eq!(key, Some(PROVIDED));
        let ids: Vec<Option<&str>> = rows.iter().map(|r| r.session.as_deref()).collect();
        assert_eq!(ids, [Some("5"), None]);
        assert_eq!((rows[0].block_size, rows[1].block_size), (Some(16), None));
        let (rows, key) = read_rows(&path, true).unwrap();
        assert_eq!(key, Some(POOR_MAN));
        assert!(rows.iter().all(|r| r.session.as_deref() == Some("1")));

        write(&path, [[None, None], [None, None], [Some(0), None]]);
        let err = read_rows(&path, false).unwrap_err();
        assert!(err.contains("row 1: column 'block_size'"), "{err}");
    }

    #[test]
    fn sessions_are_ordered_by_their_first_event() {
        let rows = vec![
            row(Some("b"), 5),
            row(Some("a"), 9),
            row(None, 1),
            row(Some("b"), 2),
        ];
        let g = group(rows, true);
        let ids: Vec<Option<&str>> = g.iter().map(|(id, _)| id.as_deref()).collect();
        assert_eq!(ids, [None, Some("b"), Some("a")]);
        assert_eq!(g[1].1.iter().map(|r| r.ts).collect::<Vec<_>>(), [2, 5]);
    }
}
