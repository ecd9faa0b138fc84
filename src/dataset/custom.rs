//! `--input-file` loaders: `single_turn`, `multi_turn`, `random_pool` and `mooncake_trace`
//! JSONL files. Everything is read, checked and encoded before the run; a problem is reported
//! as one line naming the file, the line and the field, and nothing is sent. `fields` reads
//! typed fields with their location, `trace` checks mooncake rows, `synthesis` reshapes them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde_json::{Map, Value};
use tracing::warn;

use super::input_lines::{Next, for_each_line};
use super::media;
use super::prompt::PromptBuilder;
use super::{
    ChatMessages, Conversation, Dataset, DatasetSampling, EncodedImage, Entry, OwnRequest,
    derive_seed,
};
use crate::tokenizer::Tokenizer;

mod baseten;
mod fields;
mod synthesis;
mod trace;
pub use baseten::{BasetenReplay, is_trace_file, parquet_columns};
use fields::*;
pub use synthesis::Synthesis;
pub(super) use trace::own_text;
use trace::*;
pub use trace::{Blocks, TraceCheck, TraceRow, check_mooncake_file};

/// `--custom-dataset-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomDatasetType {
    /// One request per line, sent in file order.
    SingleTurn,
    /// One conversation per line: `{"session_id": ..., "turns": [...]}`.
    MultiTurn,
    /// A file or a directory of files; entries drawn with replacement.
    RandomPool,
    /// Mooncake traces: `input_length` + `hash_ids` (or `text_input`, `messages` or a whole
    /// `payload`), `output_length`, `timestamp`.
    MooncakeTrace,
    /// One whole request body per line, sent as written.
    RawPayload,
    /// Baseten completion traces (Parquet): recorded prompts replayed at their times.
    BasetenTrace,
}

impl CustomDatasetType {
    pub fn as_str(self) -> &'static str {
        match self {
            CustomDatasetType::SingleTurn => "single_turn",
            CustomDatasetType::MultiTurn => "multi_turn",
            CustomDatasetType::RandomPool => "random_pool",
            CustomDatasetType::MooncakeTrace => "mooncake_trace",
            CustomDatasetType::RawPayload => "raw_payload",
            CustomDatasetType::BasetenTrace => "baseten_trace",
        }
    }
}

/// Mooncake's hash block size when `--isl-block-size` is not given.
pub const MOONCAKE_BLOCK_SIZE: usize = 512;

/// What the loaders need beyond the file.
pub struct CustomOptions<'a> {
    pub path: &'a Path,
    pub kind: CustomDatasetType,
    pub tokenizer: &'a Tokenizer,
    /// Output length for entries without `output_length` (`--output-tokens-mean`).
    pub default_output_tokens: Option<u64>,
    /// `--isl-block-size`; None = the format's default.
    pub block_size: Option<usize>,
    /// Requests drawn up front from a directory of several random_pool files.
    pub pool_draws: usize,
    pub seed: u64,
    /// `--synthesis-*`: how a mooncake trace is reshaped before it is sent.
    pub synthesis: Synthesis,
    /// `--replay-speedup` and the other knobs of a `baseten_trace` replay.
    pub baseten: BasetenReplay,
}

/// A bad input file: `file:line: field: problem`.
pub type InputError = String;

/// Loads the whole dataset.
pub fn load(opts: &CustomOptions) -> Result<Dataset, InputError> {
    let mut loader = Loader {
        opts,
        image_cache: HashMap::new(),
        block_cache: HashMap::new(),
        timestamps: Vec::new(),
        unknown: BTreeSet::new(),
        first_unknown: None,
    };
    let dataset = match opts.kind {
        CustomDatasetType::SingleTurn => loader.single_turn(),
        CustomDatasetType::MultiTurn => loader.multi_turn(),
        CustomDatasetType::RandomPool => loader.random_pool(),
        CustomDatasetType::MooncakeTrace => loader.mooncake(),
        CustomDatasetType::RawPayload => super::raw_payload::load(opts.path, opts.tokenizer),
        // Its timestamps are normalised to the first event: no span check on raw values.
        CustomDatasetType::BasetenTrace => return baseten::load(opts, &opts.baseten),
    };
    // Also when the file is refused: a misspelt field is often why.
    if let Some(at) = &loader.first_unknown {
        let names: Vec<&str> = loader.unknown.iter().map(String::as_str).collect();
        warn!(
            "Ignoring unknown field(s) of the input file: {} (first at {at})",
            names.join(", ")
        );
    }
    let dataset = dataset?;
    check_schedule_span(opts.path, &loader.timestamps)?;
    Ok(dataset)
}

/// Timestamps above this (ms, 1973-03-03) are absolute epoch times, not offsets from the
/// trace's start: the schedule then starts at the first one, as with
/// `--fixed-schedule-auto-offset`.
pub const EPOCH_MS_AFTER: u64 = 100_000_000_000;

/// No millisecond time this large is a date before the year 2286: such values are epoch
/// microseconds or nanoseconds, and would overflow once converted to ns.
const MAX_TIMESTAMP_MS: u64 = 10_000_000_000_000;

/// Longest schedule and longest think time, in ms (one year): beyond is a units mistake.
const MAX_SPAN_MS: u64 = 365 * 86_400_000;

/// Refuses a schedule spanning more than a year from its start (0, or the first timestamp
/// when they are absolute), naming the first line past it.
fn check_schedule_span(file: &Path, stamps: &[(usize, u64)]) -> Result<(), InputError> {
    let Some(first) = stamps.iter().map(|&(_, t)| t).min() else {
        return Ok(());
    };
    let (base, from) = if first > EPOCH_MS_AFTER {
        (first, format!("the first timestamp ({first})"))
    } else {
        (0, "the trace's start (0)".to_string())
    };
    match stamps.iter().find(|&&(_, t)| t - base > MAX_SPAN_MS) {
        None => Ok(()),
        Some(&(line, t)) => Err(At { file, line }.err(
            "timestamp",
            format!(
                "{t} is {:.0} days after {from}; a schedule may span at most 365 days: give timestamps in milliseconds",
                (t - base) as f64 / 86_400_000.0
            ),
        )),
    }
}

const SINGLE_TURN_FIELDS: &[&str] = &[
    "type",
    "image_uuids",
    "text",
    "texts",
    "image",
    "images",
    "audio",
    "audios",
    "video",
    "videos",
    "output_length",
    "timestamp",
    "delay",
    "role",
    "session_id",
    "extra",
];
const POOL_FIELDS: &[&str] = &[
    "type",
    "image_uuids",
    "text",
    "texts",
    "image",
    "images",
    "audio",
    "audios",
    "video",
    "videos",
    "output_length",
    "role",
    "extra",
];
const MULTI_TURN_FIELDS: &[&str] = &["type", "session_id", "turns"];
const MOONCAKE_FIELDS: &[&str] = &[
    "type",
    "timestamp",
    "input_length",
    "output_length",
    "hash_ids",
    "text_input",
    "delay",
    "session_id",
    "extra",
    "messages",
    "message_mode",
    "tools",
    "payload",
];

/// Where a problem is: file, line and (optionally) field.
#[derive(Clone, Copy)]
struct At<'a> {
    file: &'a Path,
    line: usize,
}

impl At<'_> {
    fn err(&self, field: &str, msg: impl std::fmt::Display) -> InputError {
        if field.is_empty() {
            format!("{}:{}: {msg}", self.file.display(), self.line)
        } else {
            format!(
                "{}:{}: field '{field}': {msg}",
                self.file.display(),
                self.line
            )
        }
    }
}

struct Loader<'a> {
    opts: &'a CustomOptions<'a>,
    /// Local image files already read, by path as written.
    image_cache: HashMap<PathBuf, EncodedImage>,
    /// Mooncake blocks by (hash id, tokens, is the last block), so equal hash ids give
    /// equal text.
    block_cache: HashMap<(u64, usize, bool), String>,
    /// Every timestamp read, with its line, for the schedule's span check.
    timestamps: Vec<(usize, u64)>,
    /// Fields no loader knows (other tools' fields): ignored, named once in a warning.
    unknown: BTreeSet<String>,
    /// `file:line` of the first unknown field.
    first_unknown: Option<String>,
}

impl Loader<'_> {
    /// Remembers the fields of `obj` outside `allowed`, which are then ignored.
    fn note_unknown(&mut self, at: At, obj: &Map<String, Value>, prefix: &str, allowed: &[&str]) {
        for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
            if self.first_unknown.is_none() {
                self.first_unknown = Some(format!("{}:{}", at.file.display(), at.line));
            }
            self.unknown.insert(format!("{prefix}{key}"));
        }
    }

    fn single_turn(&mut self) -> Result<Dataset, InputError> {
        let file = self.opts.path;
        let mut sessions = Sessions::default();
        for (at, obj) in read_jsonl(file)? {
            let entry = self.turn(at, &obj, "", SINGLE_TURN_FIELDS)?;
            sessions.add(str_field(at, &obj, "", "session_id")?, entry);
        }
        non_empty(file, sessions.conversations, DatasetSampling::Sequential)
    }

    fn random_pool(&mut self) -> Result<Dataset, InputError> {
        let root = self.opts.path;
        let files = if root.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(root)
                .map_err(|e| format!("{}: cannot read the directory: {e}", root.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            files
        } else {
            vec![root.to_path_buf()]
        };
        let mut pools = Vec::with_capacity(files.len());
        for file in &files {
            let mut pool = Vec::new();
            for (at, obj) in read_jsonl(file)? {
                pool.push(self.turn(at, &obj, "", POOL_FIELDS)?);
            }
            if pool.is_empty() {
                return Err(format!("{}: no entries in the file", file.display()));
            }
            pools.push(pool);
        }
        let entries = match pools.len() {
            0 => Vec::new(),
            1 => pools.pop().expect("one pool"),
            // Several files (e.g. queries and passages): each request takes one entry of
            // every file, drawn with replacement, in file-name order.
            _ => {
                let seed = derive_seed(self.opts.seed, STREAM_POOL_DRAW, 0);
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                (0..self.opts.pool_draws.max(1))
                    .map(|_| {
                        let picks = pools
                            .iter()
                            .map(|p| p[rng.random_range(0..p.len())].clone());
                        merge_entries(picks)
                    })
                    .collect()
            }
        };
        let conversations = entries
            .into_iter()
            .map(|entry| Conversation {
                session_id: None,
                system: None,
                context: None,
                turns: vec![entry],
            })
            .collect();
        non_empty(root, conversations, DatasetSampling::Random)
    }

    fn multi_turn(&mut self) -> Result<Dataset, InputError> {
        let file = self.opts.path;
        let mut conversations = Vec::new();
        for (at, obj) in read_jsonl(file)? {
            self.note_unknown(at, &obj, "", MULTI_TURN_FIELDS);
            let session_id = str_field(at, &obj, "", "session_id")?;
            let Some(turns) = obj.get("turns") else {
                return Err(at.err("turns", "missing; give a list of turns"));
            };
            let Some(turns) = turns.as_array() else {
                return Err(at.err("turns", "must be a list of turn objects"));
            };
            let mut system = None;
            let mut entries = Vec::with_capacity(turns.len());
            for (i, turn) in turns.iter().enumerate() {
                let prefix = format!("turns[{i}].");
                let Some(t) = turn.as_object() else {
                    return Err(at.err(&format!("turns[{i}]"), "must be an object"));
                };
                let entry = self.turn(at, t, &prefix, SINGLE_TURN_FIELDS)?;
                // A leading text-only system turn becomes the conversation's system message.
                if i == 0 && entry.role.as_deref() == Some("system") && entry.images.is_empty() {
                    let mut texts = vec![entry.text];
                    texts.extend(entry.extra_texts);
                    system = Some(texts.join("\n"));
                    continue;
                }
                entries.push(entry);
            }
            if entries.is_empty() {
                return Err(at.err("turns", "no user turn; give at least one turn with content"));
            }
            conversations.push(Conversation {
                session_id,
                system,
                context: None,
                turns: entries,
            });
        }
        non_empty(file, conversations, DatasetSampling::Sequential)
    }

    fn mooncake(&mut self) -> Result<Dataset, InputError> {
        let file = self.opts.path;
        let block_size = self.opts.block_size.unwrap_or(MOONCAKE_BLOCK_SIZE);
        let mut sessions = Sessions::default();
        let mut modes = SessionModes::default();
        let blocks = Blocks {
            size: block_size,
            flag: "--isl-block-size",
        };
        let rows = read_jsonl(file)?;
        let rows = synthesis::apply(rows, &self.opts.synthesis, block_size, self.opts.seed);
        for (at, obj) in rows {
            self.note_unknown(at, &obj, "", MOONCAKE_FIELDS);
            let row = trace_row(at, &obj, blocks, &mut modes)?;
            if let Some(t) = row.timestamp_ms {
                self.timestamps.push((at.line, t));
            }
            let text = match (&row.own, row.input_length, row.text_input) {
                (Some(own), _, _) => own_text(own),
                (None, Some(len), _) => {
                    self.trace_prompt(at, len as usize, &row.hash_ids, block_size)
                }
                (None, None, text) => text.unwrap_or_default(),
            };
            let entry = Entry {
                input_tokens: self.opts.tokenizer.count(&text) as u64,
                text,
                images: Vec::new(),
                audios: Vec::new(),
                videos: Vec::new(),
                max_output_tokens: row.output_length.or(self.opts.default_output_tokens),
                extra_texts: Vec::new(),
                role: None,
                extra: row.extra,
                timestamp_ms: row.timestamp_ms,
                delay: row.delay,
                own: row.own,
            };
            sessions.add(row.session_id, entry);
        }
        non_empty(file, sessions.conversations, DatasetSampling::Sequential)
    }

    /// A prompt of `len` tokens made of one cached block per hash id: every block but the
    /// last has `block_size` tokens, the last the remainder. Without hash ids, a fresh prompt.
    fn trace_prompt(&mut self, at: At, len: usize, hash_ids: &[u64], block_size: usize) -> String {
        let builder = PromptBuilder::new(self.opts.tokenizer);
        if hash_ids.is_empty() {
            let seed = derive_seed(self.opts.seed, STREAM_TRACE_PROMPT, at.line as u64);
            return builder
                .build(len, &mut ChaCha8Rng::seed_from_u64(seed))
                .text;
        }
        // `trace_row` checked that the ids fit the length.
        let full_blocks = hash_ids.len() - 1;
        let last = len - full_blocks * block_size;
        // Every block but the last is cached by hash id and ends with a newline, so words do
        // not merge across blocks and equal hash ids give an equal prefix. A block and its
        // newline take `block_size` tokens: the newline is one token of the block.
        let seed = self.opts.seed;
        let mut prefix = String::new();
        for &id in &hash_ids[..full_blocks] {
            let block = self
                .block_cache
                .entry((id, block_size, false))
                .or_insert_with(|| {
                    let mut rng =
                        ChaCha8Rng::seed_from_u64(derive_seed(seed, STREAM_HASH_BLOCK, id));
                    let body = block_size.saturating_sub(1).max(1);
                    let mut text = builder.build(body, &mut rng).text;
                    if block_size > 1 {
                        text.push('\n');
                    }
                    text
                });
            prefix.push_str(block);
        }
        // The last block is sized so that the whole prompt re-tokenizes to exactly `len`
        // (a newline can merge with the token before it, so the prefix may be a token short
        // or long): its target moves by the difference until the count matches.
        let last_id = hash_ids[full_blocks];
        let mut target = last;
        let mut best: Option<(usize, String)> = None;
        let mut tried = Vec::new();
        while !tried.contains(&target) && tried.len() < 8 {
            tried.push(target);
            let block = self
                .block_cache
                .entry((last_id, target, true))
                .or_insert_with(|| {
                    let mut rng =
                        ChaCha8Rng::seed_from_u64(derive_seed(seed, STREAM_HASH_BLOCK, last_id));
                    builder.build(target, &mut rng).text
                });
            let text = format!("{prefix}{block}");
            let got = self.opts.tokenizer.count(&text);
            if got == len {
                return text;
            }
            if best.as_ref().is_none_or(|(d, _)| got.abs_diff(len) < *d) {
                best = Some((got.abs_diff(len), text));
            }
            match (target + len).checked_sub(got) {
                Some(next) if next >= 1 => target = next,
                _ => break,
            }
        }
        best.expect("one prompt was tried").1
    }

    /// `timestamp` in ms, remembered for the schedule's span check.
    fn timestamp_field(
        &mut self,
        at: At,
        obj: &Map<String, Value>,
        prefix: &str,
    ) -> Result<Option<u64>, InputError> {
        let t = timestamp_ms_field(at, obj, prefix)?;
        if let Some(t) = t {
            self.timestamps.push((at.line, t));
        }
        Ok(t)
    }

    /// One request's fields (a single_turn line, a multi_turn turn, a pool entry).
    fn turn(
        &mut self,
        at: At,
        obj: &Map<String, Value>,
        prefix: &str,
        allowed: &[&str],
    ) -> Result<Entry, InputError> {
        self.note_unknown(at, obj, prefix, allowed);
        let texts = one_or_many(at, obj, prefix, "text", "texts")?;
        let images = one_or_many(at, obj, prefix, "image", "images")?;
        let (timestamp, delay) = (
            self.timestamp_field(at, obj, prefix)?,
            delay_field(at, obj, prefix)?,
        );
        if timestamp.is_some() && delay.is_some() {
            return Err(at.err(
                &format!("{prefix}delay"),
                "give either timestamp or delay, not both",
            ));
        }
        let texts: Vec<String> = texts.into_iter().filter(|t| !t.is_empty()).collect();
        let audios = one_or_many(at, obj, prefix, "audio", "audios")?;
        let videos = one_or_many(at, obj, prefix, "video", "videos")?;
        // `image_uuids` alone: references to images the server has cached, sent without data.
        let uuid_only = images.is_empty()
            && obj
                .get("image_uuids")
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty());
        if texts.is_empty()
            && images.is_empty()
            && !uuid_only
            && audios.is_empty()
            && videos.is_empty()
        {
            return Err(at.err(
                "",
                format!(
                    "{prefix}no content; give text, texts, image, images, audio(s) or video(s)"
                ),
            ));
        }
        let field = |one: &str, many: &str, i: usize| {
            if obj.contains_key(many) {
                format!("{prefix}{many}[{i}]")
            } else {
                format!("{prefix}{one}")
            }
        };
        let mut audio_clips = Vec::with_capacity(audios.len());
        for (i, a) in audios.iter().enumerate() {
            let path = self.resolve(Path::new(a));
            audio_clips.push(
                media::audio_from_input(a, &path)
                    .map_err(|e| at.err(&field("audio", "audios", i), e))?,
            );
        }
        let mut video_clips = Vec::with_capacity(videos.len());
        for (i, v) in videos.iter().enumerate() {
            let path = self.resolve(Path::new(v));
            video_clips.push(
                media::video_from_input(v, &path)
                    .map_err(|e| at.err(&field("video", "videos", i), e))?,
            );
        }
        let mut encoded = Vec::with_capacity(images.len());
        for (i, image) in images.iter().enumerate() {
            let field = if obj.contains_key("images") {
                format!("{prefix}images[{i}]")
            } else {
                format!("{prefix}image")
            };
            encoded.push(self.image(at, &field, image)?);
        }
        if uuid_only {
            let n = obj["image_uuids"].as_array().map_or(0, Vec::len);
            encoded.extend((0..n).map(|_| EncodedImage {
                data_url: String::new(),
                width: 0,
                height: 0,
                format: "unknown",
                uuid: None,
            }));
        }
        if let Some(uuids) = obj.get("image_uuids").filter(|v| !v.is_null()) {
            let field = format!("{prefix}image_uuids");
            let uuids: Vec<&str> = match uuids.as_array() {
                Some(list) => list.iter().filter_map(Value::as_str).collect(),
                None => Vec::new(),
            };
            if uuids.len() != encoded.len()
                || uuids.len() != obj["image_uuids"].as_array().map_or(0, Vec::len)
            {
                return Err(at.err(
                    &field,
                    format!("must be a list of {} strings, one per image", encoded.len()),
                ));
            }
            if uuids.iter().any(|u| u.is_empty()) {
                return Err(at.err(&field, "ids must not be empty strings"));
            }
            for (img, id) in encoded.iter_mut().zip(uuids) {
                img.uuid = Some(id.to_string());
            }
        }
        let input_tokens = texts
            .iter()
            .map(|t| self.opts.tokenizer.count(t) as u64)
            .sum();
        let mut texts = texts.into_iter();
        Ok(Entry {
            text: texts.next().unwrap_or_default(),
            extra_texts: texts.collect(),
            input_tokens,
            images: encoded,
            audios: audio_clips,
            videos: video_clips,
            max_output_tokens: output_length_field(at, obj, prefix)?
                .or(self.opts.default_output_tokens),
            role: str_field(at, obj, prefix, "role")?,
            extra: object_field(at, obj, prefix, "extra")?,
            timestamp_ms: timestamp,
            delay,
            own: None,
        })
    }

    /// An image reference: data URLs and http(s) URLs are sent as they are; anything else is
    /// a local file, read and sent as a base64 data URL of its real type.
    fn image(&mut self, at: At, field: &str, value: &str) -> Result<EncodedImage, InputError> {
        if let Some(rest) = value.strip_prefix("data:") {
            let format = rest
                .split([';', ','])
                .next()
                .and_then(|mime| mime.strip_prefix("image/"))
                .map_or("unknown", static_format);
            let (width, height) = check_data_url(at, field, value)?;
            return Ok(EncodedImage {
                data_url: value.to_string(),
                width,
                height,
                format,
                uuid: None,
            });
        }
        if value.starts_with("http://") || value.starts_with("https://") {
            return Ok(EncodedImage {
                data_url: value.to_string(),
                width: 0,
                height: 0,
                format: "url",
                uuid: None,
            });
        }
        let path = self.resolve(Path::new(value));
        if let Some(img) = self.image_cache.get(&path) {
            return Ok(img.clone());
        }
        if !path.exists() {
            return Err(at.err(field, format!("image file '{value}' does not exist")));
        }
        let img = super::image::file_image(&path, value).map_err(|e| at.err(field, e))?;
        self.image_cache.insert(path, img.clone());
        Ok(img)
    }

    /// A relative image path is looked up from the working directory, then next to the
    /// input file.
    fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() || p.exists() {
            return p.to_path_buf();
        }
        let base = if self.opts.path.is_dir() {
            self.opts.path
        } else {
            self.opts.path.parent().unwrap_or(Path::new("."))
        };
        let beside = base.join(p);
        if beside.exists() {
            beside
        } else {
            p.to_path_buf()
        }
    }
}

/// A data URL is checked as a file is: base64 that decodes to an image whose size can be
/// read. Returns the image's width and height.
fn check_data_url(at: At, field: &str, url: &str) -> Result<(u32, u32), InputError> {
    use super::data_url::{DataUrlError, image_size};
    image_size(url).map_err(|e| {
        let why = match e {
            DataUrlError::NotBase64DataUrl => {
                "data URL is not base64; give data:image/<type>;base64,<data>".to_string()
            }
            DataUrlError::BadBase64(e) => format!("data URL has invalid base64: {e}"),
            DataUrlError::UnknownFormat => {
                "data URL does not hold a readable image (png, jpeg, webp, gif, bmp)".to_string()
            }
        };
        at.err(field, why)
    })
}

const STREAM_TRACE_PROMPT: u64 = 10;
const STREAM_HASH_BLOCK: u64 = 11;
const STREAM_POOL_DRAW: u64 = 12;

fn static_format(s: &str) -> &'static str {
    match s {
        "png" => "png",
        "jpeg" | "jpg" => "jpeg",
        "webp" => "webp",
        "gif" => "gif",
        "bmp" => "bmp",
        _ => "unknown",
    }
}

fn non_empty(
    path: &Path,
    conversations: Vec<Conversation>,
    sampling: DatasetSampling,
) -> Result<Dataset, InputError> {
    if conversations.is_empty() {
        return Err(no_entries(path));
    }
    Ok(Dataset {
        conversations,
        sampling,
    })
}

fn no_entries(path: &Path) -> InputError {
    format!("{}: no entries in the file", path.display())
}

/// Conversations in file order: rows of one session are its turns, in file order; a row
/// without a session id is a conversation of its own.
#[derive(Default)]
struct Sessions {
    conversations: Vec<Conversation>,
    by_id: HashMap<String, usize>,
}

impl Sessions {
    fn add(&mut self, session_id: Option<String>, entry: Entry) {
        if let Some(&c) = session_id.as_ref().and_then(|id| self.by_id.get(id)) {
            self.conversations[c].turns.push(entry);
            return;
        }
        if let Some(id) = &session_id {
            self.by_id.insert(id.clone(), self.conversations.len());
        }
        self.conversations.push(Conversation {
            session_id,
            system: None,
            context: None,
            turns: vec![entry],
        });
    }
}

/// `--uuid-and-strip`: within each conversation, an image whose `uuid` an earlier turn sent
/// with its data goes with an empty url, so the server takes it from its cache. Repeats
/// inside one turn keep their data: the server fills its cache only after the request.
pub fn strip_repeated_images(dataset: &mut Dataset) {
    for conversation in &mut dataset.conversations {
        let mut sent: HashSet<String> = HashSet::new();
        for turn in &mut conversation.turns {
            let mut new = Vec::new();
            for image in &mut turn.images {
                let Some(uuid) = &image.uuid else { continue };
                if sent.contains(uuid) {
                    image.data_url.clear();
                } else if !image.data_url.is_empty() {
                    new.push(uuid.clone());
                }
            }
            sent.extend(new);
        }
    }
}

/// One request made of several pool entries: their texts and images in order, the first
/// output length and role given, their extra fields merged (later files win).
fn merge_entries(entries: impl Iterator<Item = Entry>) -> Entry {
    let mut merged: Option<Entry> = None;
    for e in entries {
        let Some(m) = merged.as_mut() else {
            merged = Some(e);
            continue;
        };
        for t in std::iter::once(e.text).chain(e.extra_texts) {
            if m.text.is_empty() {
                m.text = t;
            } else if !t.is_empty() {
                m.extra_texts.push(t);
            }
        }
        m.input_tokens += e.input_tokens;
        m.images.extend(e.images);
        m.audios.extend(e.audios);
        m.videos.extend(e.videos);
        m.max_output_tokens = m.max_output_tokens.or(e.max_output_tokens);
        m.role = m.role.take().or(e.role);
        m.extra.extend(e.extra);
    }
    merged.expect("at least one pool")
}

/// True when the first non-empty line of a JSONL file has a `timestamp` (top level, or on
/// the first of its `turns`). Unreadable files say no; reading them fails later with a
/// better message.
pub fn first_record_has_timestamp(path: &std::path::Path) -> bool {
    // A Baseten trace's timestamps are a column.
    if suffix_is(path, "parquet") {
        return parquet_columns(path)
            .is_some_and(|c| c.iter().any(|n| n == "timestamp_start_unix_ms"));
    }
    let mut first = None;
    let _ = for_each_line(path, |_, line| {
        if line.trim().is_empty() {
            return Ok(Next::More);
        }
        first = serde_json::from_str::<Value>(line).ok();
        Ok(Next::Stop)
    });
    let Some(Value::Object(obj)) = first else {
        return false;
    };
    let first_turn = obj
        .get("turns")
        .and_then(|t| t.get(0))
        .and_then(|t| t.get("timestamp"));
    obj.get("timestamp")
        .or(first_turn)
        .is_some_and(|t| !t.is_null())
}

fn suffix_is(path: &Path, ext: &str) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_file(content: &str, kind: CustomDatasetType, tokenizer: &Tokenizer) -> Dataset {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input.jsonl");
        std::fs::write(&path, content).unwrap();
        load(&CustomOptions {
            path: &path,
            kind,
            tokenizer,
            default_output_tokens: None,
            block_size: None,
            pool_draws: 10,
            seed: 5,
            synthesis: Synthesis::default(),
            baseten: BasetenReplay::default(),
        })
        .unwrap()
    }

    /// Trace rows of 600 and 1000 tokens over 512-token blocks, sharing their first block.
    const TRACE: &str = "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]}\n\
        {\"timestamp\": 5, \"input_length\": 1000, \"output_length\": 2, \"hash_ids\": [1, 3]}\n\
        {\"timestamp\": 9, \"input_length\": 1536, \"output_length\": 2, \"hash_ids\": [1, 4, 5]}\n\
        {\"timestamp\": 9, \"input_length\": 513, \"output_length\": 2, \"hash_ids\": [6, 7]}\n";

    fn check_trace_lengths(tokenizer: &Tokenizer) {
        let dataset = load_file(TRACE, CustomDatasetType::MooncakeTrace, tokenizer);
        let turns: Vec<&Entry> = dataset.conversations.iter().map(|c| &c.turns[0]).collect();
        for (turn, want) in turns.iter().zip([600, 1000, 1536, 513]) {
            assert_eq!(tokenizer.count(&turn.text), want, "{}", tokenizer.name());
            assert_eq!(turn.input_tokens, want as u64);
        }
        // Hash id 1 is the same 512-token text at the start of the first three prompts.
        let common = |a: &Entry, b: &Entry| {
            let same = a.text.bytes().zip(b.text.bytes());
            same.take_while(|(x, y)| x == y).count()
        };
        assert!(common(turns[0], turns[1]) > 1000);
        assert!(common(turns[0], turns[2]) > 1000);
        assert!(common(turns[0], turns[3]) < 200);
    }

    #[test]
    fn hash_id_prompts_have_exactly_the_trace_length_with_the_builtin_tokenizer() {
        check_trace_lengths(&Tokenizer::builtin().unwrap());
    }

    #[test]
    fn hash_id_prompts_have_exactly_the_trace_length_with_a_tokenizer_json() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2");
        check_trace_lengths(&Tokenizer::from_file(&dir).unwrap());
    }
}
