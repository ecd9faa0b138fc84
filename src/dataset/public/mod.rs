//! `--public-dataset`: benchmark datasets from the Hugging Face hub. ShareGPT (its JSON
//! file) and the sets AIPerf reads with its instruction and conversation loaders (one
//! prompt, and for the vision sets one image, per row), from the Parquet files the hub's
//! dataset viewer keeps for every public dataset (`refs/convert/parquet`,
//! `<subset>/<split>/NNNN.parquet`), so one reader serves them all.

pub mod hub;
pub mod rows;

use std::ops::ControlFlow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use self::rows::Cell;
use super::{BuildProgress, Conversation, Dataset, DatasetSampling, EncodedImage, Entry};
use crate::tokenizer::{HubEnv, Tokenizer};

/// How a set's rows become prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// ShareGPT's `conversations`: the first human→gpt pair, the reply's length as the
    /// request's max tokens, pairs outside AIPerf's length limits skipped.
    ShareGpt,
    /// A prompt column and an optional image column.
    Instruction {
        prompt: &'static str,
        image: Option<&'static str>,
    },
    /// MMVU: the question and its lettered choices (vLLM's prompt format), and the video
    /// column's URL (or stored bytes).
    Video {
        question: &'static str,
        choices: &'static str,
        video: &'static str,
    },
    /// A list of messages: the first user (or human) message's text, and an optional
    /// image column.
    Messages {
        column: &'static str,
        content_key: &'static str,
        image: Option<&'static str>,
    },
}

/// One `--public-dataset` name and where its rows come from (AIPerf 0.13's catalog).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub repo: &'static str,
    pub split: &'static str,
    pub subset: Option<&'static str>,
    pub shape: Shape,
}

const SHAREGPT_FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";

const fn text(
    name: &'static str,
    repo: &'static str,
    split: &'static str,
    subset: Option<&'static str>,
    prompt: &'static str,
) -> Spec {
    Spec {
        name,
        repo,
        split,
        subset,
        shape: Shape::Instruction {
            prompt,
            image: None,
        },
    }
}

/// The sets this build reads.
pub const CATALOG: &[Spec] = &[
    Spec {
        name: "sharegpt",
        repo: "anon8231489123/ShareGPT_Vicuna_unfiltered",
        split: "train",
        subset: None,
        shape: Shape::ShareGpt,
    },
    Spec {
        name: "mmstar",
        repo: "Lin-Chen/MMStar",
        split: "val",
        subset: None,
        shape: Shape::Instruction {
            prompt: "question",
            image: Some("image"),
        },
    },
    Spec {
        name: "vision_arena",
        repo: "lmarena-ai/VisionArena-Chat",
        split: "train",
        subset: None,
        shape: Shape::Messages {
            column: "conversation",
            content_key: "content",
            image: Some("images"),
        },
    },
    Spec {
        name: "llava_onevision",
        repo: "lmms-lab/LLaVA-OneVision-Data",
        split: "train",
        subset: Some("sharegpt4o"),
        shape: Shape::Messages {
            column: "conversations",
            content_key: "value",
            image: Some("image"),
        },
    },
    Spec {
        name: "mmvu",
        repo: "yale-nlp/MMVU",
        split: "validation",
        subset: None,
        shape: Shape::Video {
            question: "question",
            choices: "choices",
            video: "video",
        },
    },
    text("aimo", "AI-MO/NuminaMath-TIR", "train", None, "problem"),
    text(
        "aimo_aime",
        "AI-MO/aimo-validation-aime",
        "train",
        None,
        "problem",
    ),
    text(
        "aimo_numina_cot",
        "AI-MO/NuminaMath-CoT",
        "train",
        None,
        "problem",
    ),
    text(
        "aimo_numina_1_5",
        "AI-MO/NuminaMath-1.5",
        "train",
        None,
        "problem",
    ),
    text(
        "spec_al_gsm8k",
        "openai/gsm8k",
        "test",
        Some("main"),
        "question",
    ),
    text(
        "spec_al_math500",
        "HuggingFaceH4/MATH-500",
        "test",
        None,
        "problem",
    ),
    text(
        "spec_al_humaneval",
        "openai/openai_humaneval",
        "test",
        None,
        "prompt",
    ),
    text(
        "spec_al_mbpp",
        "google-research-datasets/mbpp",
        "test",
        Some("full"),
        "text",
    ),
    text(
        "instruct_coder",
        "likaixin/InstructCoder",
        "train",
        None,
        "instruction",
    ),
];

/// AIPerf 0.13's other `--public-dataset` names: refused with the list of those we read.
const NOT_BUILT: &[&str] = &[
    "exgentic_v2",
    "exgentic",
    "spec_bench",
    "spec_al_mtbench",
    "blazedit_5k",
    "blazedit_10k",
    "librispeech",
    "voxpopuli",
    "gigaspeech",
    "ami",
    "spgispeech",
    "weka_hf",
];

/// The names `--public-dataset` takes, comma-separated (for messages and help).
pub fn names() -> String {
    CATALOG
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The set called `name`, or why there is none.
pub fn lookup(name: &str) -> Result<&'static Spec, String> {
    let name = name.trim();
    if let Some(spec) = CATALOG.iter().find(|s| s.name.eq_ignore_ascii_case(name)) {
        return Ok(spec);
    }
    let known = NOT_BUILT.contains(&name) || name.starts_with("semianalysis_cc_traces_weka");
    let what = if known {
        "is an AIPerf dataset this build does not read yet"
    } else {
        "is not a public dataset name"
    };
    Err(format!(
        "--public-dataset {name}: {what}; the ones this build reads are: {}",
        names()
    ))
}

/// `--public-dataset` with `--hf-subset` and `--dataset-filter`.
#[derive(Debug, Clone)]
pub struct PublicOptions {
    pub spec: &'static Spec,
    /// `--hf-subset`; None = the set's own subset.
    pub subset: Option<String>,
    /// `--dataset-filter COLUMN=VALUE`: rows are kept when every column equals its value.
    pub filters: Vec<(String, String)>,
    /// Rows to use at most: as many as can be sent (later requests wrap around).
    pub max_rows: usize,
}

impl PublicOptions {
    /// The subset (dataset config) read: `--hf-subset`, else the set's, else `default`.
    pub fn subset(&self) -> &str {
        self.subset
            .as_deref()
            .or(self.spec.subset)
            .unwrap_or("default")
    }
}

/// Parses one `--dataset-filter` value.
pub fn parse_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!(
            "--dataset-filter '{s}': expected COLUMN=VALUE, e.g. --dataset-filter category=coarse perception"
        )),
    }
}

/// AIPerf's ShareGPT length limits (from vLLM's benchmark): prompts of 4 to 1024 tokens,
/// replies of 4 or more (unless --osl is given), 2048 in all.
const MIN_SEQ: usize = 4;
const MAX_PROMPT: usize = 1024;
const MAX_TOTAL: usize = 2048;

/// Which files of the repository a set reads (by their path in it).
type FileFilter = dyn Fn(&str) -> bool;

/// Rows read, filtered out and skipped (for the log and errors).
struct Counts {
    read: usize,
    filtered_out: usize,
    skipped: usize,
}

/// Builds the dataset of `opts.spec`: finds its files in the hub cache (downloading them
/// the first time) and turns rows into single-turn conversations, in dataset order.
pub fn load(
    opts: &PublicOptions,
    env: &HubEnv,
    tokenizer: &Tokenizer,
    default_output_tokens: Option<u64>,
    progress: &dyn BuildProgress,
) -> Result<Dataset, String> {
    let spec = opts.spec;
    let flag = format!("--public-dataset {}", spec.name);
    let (revision, wanted): (&str, Box<FileFilter>) = match spec.shape {
        Shape::ShareGpt => ("main", Box::new(|name: &str| name == SHAREGPT_FILE)),
        _ => {
            let subset = opts.subset().to_string();
            let split = spec.split.to_string();
            (
                "refs/convert/parquet",
                Box::new(move |name: &str| parquet_of(name, &subset, &split)),
            )
        }
    };
    let mut files = hub::Files::new(env, spec.repo, revision, &*wanted);
    if files.offline_and_missing() {
        return Err(format!(
            "{flag}: HF_HUB_OFFLINE is set and dataset {} ({}) is not in the Hugging Face cache: \
             looked in {} (revision {revision}); run once without HF_HUB_OFFLINE to download it, \
             or set HF_HOME to the cache that holds it",
            spec.repo,
            what_files(spec, opts),
            files.cache_dir().display()
        ));
    }

    // The progress line counts the rows kept toward the most the run can use.
    progress.begin(opts.max_rows as u64);
    let mut entries: Vec<Entry> = Vec::new();
    let mut counts = Counts {
        read: 0,
        filtered_out: 0,
        skipped: 0,
    };
    let mut columns_checked = false;
    let mut failure: Option<String> = None;
    let mut read_files = Vec::new();
    for i in 0.. {
        if entries.len() >= opts.max_rows {
            break;
        }
        let (name, path) = match files.get(i) {
            Ok(Some(file)) => file,
            Ok(None) => break,
            // The hub cannot be reached for more files: the cached rows are enough to run.
            Err(e) if !entries.is_empty() => {
                tracing::warn!("{flag}: {e}; using the {} rows read", entries.len());
                break;
            }
            Err(e) => return Err(format!("{flag}: {e}")),
        };
        tracing::info!("Reading {name} of dataset {}", spec.repo);
        let mut each = |row: Cell| {
            counts.read += 1;
            if !columns_checked {
                columns_checked = true;
                if let Err(e) = check_columns(spec, opts, &row) {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
            }
            if !keep(&row, &opts.filters) {
                counts.filtered_out += 1;
                return ControlFlow::Continue(());
            }
            match entry_of(spec.shape, &row, tokenizer, default_output_tokens) {
                Ok(Some(entry)) => {
                    entries.push(entry);
                    progress.advance();
                }
                Ok(None) => counts.skipped += 1,
                Err(e) => {
                    failure = Some(format!("row {}: {e}", counts.read));
                    return ControlFlow::Break(());
                }
            }
            if entries.len() >= opts.max_rows {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        match spec.shape {
            Shape::ShareGpt => rows::json_array_rows(&path, &mut each),
            _ => rows::parquet_rows(&path, &mut each),
        }
        .map_err(|e| format!("{flag}: {e}"))?;
        if let Some(e) = failure.take() {
            return Err(format!("{flag}: {name}: {e}"));
        }
        read_files.push(name);
    }
    if read_files.is_empty() {
        return Err(format!(
            "{flag}: dataset {} has no {} (looked in {} and on the hub); check --hf-subset",
            spec.repo,
            what_files(spec, opts),
            files.cache_dir().display()
        ));
    }
    if entries.is_empty() {
        return Err(format!(
            "{flag}: none of the {} rows read from {} could be used ({} filtered out by \
             --dataset-filter, {} without a usable prompt)",
            counts.read,
            read_files.join(", "),
            counts.filtered_out,
            counts.skipped
        ));
    }
    tracing::info!(
        "Public dataset {} ({}, subset {}, split {}): {} rows used of {} read from {} ({} filtered out, {} skipped)",
        spec.name,
        spec.repo,
        opts.subset(),
        spec.split,
        entries.len(),
        counts.read,
        read_files.join(", "),
        counts.filtered_out,
        counts.skipped
    );
    Ok(Dataset {
        conversations: entries
            .into_iter()
            .map(|entry| Conversation {
                session_id: None,
                system: None,
                context: None,
                turns: vec![entry],
            })
            .collect(),
        // AIPerf's public loaders prefer sequential sampling.
        sampling: DatasetSampling::Sequential,
    })
}

/// `<subset>/<split>/NNNN.parquet` (or `partial-<split>` when the viewer converted only
/// the first gigabytes of a large split).
fn parquet_of(name: &str, subset: &str, split: &str) -> bool {
    let mut parts = name.split('/');
    let (Some(s), Some(d), Some(f), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    s == subset
        && (d == split || d.strip_prefix("partial-") == Some(split))
        && f.ends_with(".parquet")
}

fn what_files(spec: &Spec, opts: &PublicOptions) -> String {
    match spec.shape {
        Shape::ShareGpt => SHAREGPT_FILE.to_string(),
        _ => format!("{}/{}/*.parquet", opts.subset(), spec.split),
    }
}

/// The set's columns and the filter's columns exist in the first row.
fn check_columns(spec: &Spec, opts: &PublicOptions, row: &Cell) -> Result<(), String> {
    let mut needed: Vec<&str> = match spec.shape {
        Shape::ShareGpt => vec!["conversations"],
        Shape::Instruction { prompt, image } => std::iter::once(prompt).chain(image).collect(),
        Shape::Messages { column, image, .. } => std::iter::once(column).chain(image).collect(),
        Shape::Video {
            question, video, ..
        } => vec![question, video],
    };
    needed.extend(opts.filters.iter().map(|(k, _)| k.as_str()));
    match needed.iter().find(|c| row.get(c).is_none()) {
        Some(missing) => Err(format!(
            "no column '{missing}' (columns: {})",
            row.field_names().join(", ")
        )),
        None => Ok(()),
    }
}

fn keep(row: &Cell, filters: &[(String, String)]) -> bool {
    filters
        .iter()
        .all(|(k, v)| row.get(k).and_then(Cell::scalar).as_deref() == Some(v.as_str()))
}

/// The entry of one row, None when the row has no usable prompt.
fn entry_of(
    shape: Shape,
    row: &Cell,
    tokenizer: &Tokenizer,
    default_output_tokens: Option<u64>,
) -> Result<Option<Entry>, String> {
    let mut videos = Vec::new();
    let (text, image, max_output_tokens) = match shape {
        Shape::ShareGpt => {
            let Some((prompt, reply)) = row.get("conversations").and_then(first_pair) else {
                return Ok(None);
            };
            let (p, r) = (tokenizer.count(prompt), tokenizer.count(reply));
            let valid = (MIN_SEQ..=MAX_PROMPT).contains(&p)
                && (default_output_tokens.is_some() || r >= MIN_SEQ)
                && p + r <= MAX_TOTAL;
            if !valid {
                return Ok(None);
            }
            (prompt.to_string(), None, Some(r as u64))
        }
        Shape::Instruction { prompt, image } => {
            let Some(text) = row.get(prompt).and_then(Cell::scalar) else {
                return Ok(None);
            };
            if text.trim().is_empty() {
                return Ok(None);
            }
            (text, image_of(row, image)?, default_output_tokens)
        }
        Shape::Messages {
            column,
            content_key,
            image,
        } => {
            let Some(text) = row
                .get(column)
                .and_then(|m| first_user_text(m, content_key))
            else {
                return Ok(None);
            };
            (text, image_of(row, image)?, default_output_tokens)
        }
        Shape::Video {
            question,
            choices,
            video,
        } => {
            let Some(text) = mmvu_prompt(row, question, choices) else {
                return Ok(None);
            };
            videos.extend(video_of(row.get(video)));
            (text, None, default_output_tokens)
        }
    };
    let input_tokens = tokenizer.count(&text) as u64;
    let mut entry = Entry::synthetic(
        text,
        input_tokens,
        image.into_iter().collect(),
        max_output_tokens,
    );
    entry.videos = videos;
    Ok(Some(entry))
}

/// ShareGPT's first prompt and reply: with `from` roles, the first `human` message
/// followed by a `gpt` one (both non-empty); without, the first two values.
fn first_pair(conversations: &Cell) -> Option<(&str, &str)> {
    let Cell::List(messages) = conversations else {
        return None;
    };
    fn text(m: &Cell) -> Option<&str> {
        m.get("value")
            .and_then(Cell::as_text)
            .filter(|s| !s.is_empty())
    }
    fn role(m: &Cell) -> Option<&str> {
        m.get("from").and_then(Cell::as_text)
    }
    let uses_roles = messages
        .iter()
        .any(|m| matches!(role(m), Some("human" | "gpt")));
    if !uses_roles {
        return match messages.as_slice() {
            [a, b, ..] => Some((text(a)?, text(b)?)),
            _ => None,
        };
    }
    let turns: Vec<&Cell> = messages
        .iter()
        .filter(|m| matches!(role(m), Some("human" | "gpt")))
        .collect();
    let mut i = 0;
    while i + 1 < turns.len() {
        if role(turns[i]) == Some("human") && role(turns[i + 1]) == Some("gpt") {
            if let (Some(p), Some(r)) = (text(turns[i]), text(turns[i + 1])) {
                return Some((p, r));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    None
}

/// The first user (or human) message's text, `<image>` placeholders removed; the first
/// message's when none has a role. A message wrapped in a list of its own (VisionArena)
/// is unwrapped.
fn first_user_text(messages: &Cell, content_key: &str) -> Option<String> {
    let Cell::List(items) = messages else {
        return None;
    };
    let messages: Vec<&Cell> = items
        .iter()
        .filter_map(|m| match m {
            Cell::List(inner) => inner.first(),
            other => Some(other),
        })
        .filter(|m| matches!(m, Cell::Group(f) if !f.is_empty()))
        .collect();
    let role = |m: &Cell| {
        m.get("role")
            .or_else(|| m.get("from"))
            .and_then(Cell::as_text)
            .map(str::to_ascii_lowercase)
    };
    let chosen = messages
        .iter()
        .find(|m| matches!(role(m).as_deref(), Some("user" | "human")))
        .or(messages.first())?;
    let text = chosen.get(content_key)?.as_text()?.replace("<image>", "");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// MMVU's prompt: the question, then each non-empty choice as `A.text`, space-separated.
fn mmvu_prompt(row: &Cell, question: &str, choices: &str) -> Option<String> {
    let question = row.get(question).and_then(Cell::scalar).unwrap_or_default();
    let listed: Vec<String> = match row.get(choices) {
        Some(Cell::Group(fields)) => fields
            .iter()
            .filter_map(|(k, v)| {
                v.scalar()
                    .filter(|v| !v.is_empty())
                    .map(|v| format!("{k}.{v}"))
            })
            .collect(),
        _ => Vec::new(),
    };
    let prompt = if listed.is_empty() {
        question
    } else {
        format!("{question} {}", listed.join(" "))
            .trim()
            .to_string()
    };
    (!prompt.is_empty()).then_some(prompt)
}

/// A video cell: a URL as it is (a bare path as a `file://` URL, as AIPerf sends it), or
/// stored bytes as a data URL of their type (from the path's extension; MP4 without one).
fn video_of(cell: Option<&Cell>) -> Option<super::video::EncodedVideo> {
    let url = match cell? {
        Cell::Text(v) if v.contains("://") || v.starts_with("data:") => v.clone(),
        Cell::Text(v) if !v.is_empty() => format!("file://{v}"),
        group => {
            let Some(Cell::Bytes(bytes)) = group.get("bytes") else {
                return None;
            };
            let path = group.get("path").and_then(Cell::as_text).unwrap_or("");
            let mime = match path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
                Some(e) if e == "webm" => "video/webm",
                Some(e) if e == "mov" => "video/quicktime",
                _ => "video/mp4",
            };
            let mut url = format!("data:{mime};base64,");
            STANDARD.encode_string(bytes, &mut url);
            url
        }
    };
    Some(super::video::EncodedVideo { url })
}

/// The row's image: a Hugging Face `Image` value (`{bytes, path}`), or the first of a
/// list of them, sent as a data URL of the stored bytes; an http(s) URL as it is.
pub fn image_of(row: &Cell, column: Option<&str>) -> Result<Option<EncodedImage>, String> {
    let Some(column) = column else {
        return Ok(None);
    };
    let Some(cell) = row.get(column) else {
        return Ok(None);
    };
    let candidates: Vec<&Cell> = match cell {
        Cell::List(items) => items.iter().collect(),
        one => vec![one],
    };
    for c in candidates {
        if let Some(Cell::Bytes(bytes)) = c.get("bytes")
            && !bytes.is_empty()
        {
            return encoded(bytes)
                .map(Some)
                .map_err(|e| format!("column '{column}': {e}"));
        }
        let url = c
            .as_text()
            .or_else(|| c.get("path").and_then(Cell::as_text));
        if let Some(url) = url.filter(|u| u.starts_with("http://") || u.starts_with("https://")) {
            return Ok(Some(EncodedImage {
                data_url: url.to_string(),
                width: 0,
                height: 0,
                format: "url",
                uuid: None,
            }));
        }
    }
    Ok(None)
}

/// A data URL of `bytes` with their real type, and the image's size (read from its header).
fn encoded(bytes: &[u8]) -> Result<EncodedImage, String> {
    let format = image::guess_format(bytes).map_err(|e| format!("not an image: {e}"))?;
    let name = crate::dataset::image::sent_format(format)
        .ok_or_else(|| format!("unsupported image format {format:?}"))?;
    let (width, height) = image::ImageReader::with_format(std::io::Cursor::new(bytes), format)
        .into_dimensions()
        .map_err(|e| format!("cannot read the {name} image's size: {e}"))?;
    Ok(EncodedImage {
        data_url: crate::dataset::image::data_url_of(name, bytes),
        width,
        height,
        format: name,
        uuid: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Cell {
        Cell::Text(s.to_string())
    }

    fn group(fields: &[(&str, Cell)]) -> Cell {
        Cell::Group(
            fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn vision_arena_messages_wrapped_in_lists_give_the_first_user_text() {
        // VisionArena: a list of turns, each a list holding one {role, content}.
        let conversation = Cell::List(vec![
            Cell::List(vec![group(&[
                ("role", text("user")),
                ("content", text("  What breed is this dog?  ")),
            ])]),
            Cell::List(vec![group(&[
                ("role", text("assistant")),
                ("content", text("A corgi.")),
            ])]),
        ]);
        assert_eq!(
            first_user_text(&conversation, "content").as_deref(),
            Some("What breed is this dog?")
        );
        // No roles at all: the first message; only a placeholder: nothing.
        let plain = Cell::List(vec![group(&[("value", text("<image>"))])]);
        assert_eq!(first_user_text(&plain, "value"), None);
        let plain = Cell::List(vec![group(&[("value", text("Describe <image> it"))])]);
        assert_eq!(
            first_user_text(&plain, "value").as_deref(),
            Some("Describe  it")
        );
    }

    #[test]
    fn the_first_image_of_a_list_is_sent_as_stored() {
        let mut png = std::io::Cursor::new(Vec::new());
        image::RgbImage::new(3, 2)
            .write_to(&mut png, image::ImageFormat::Png)
            .unwrap();
        let png = png.into_inner();
        let row = group(&[(
            "images",
            Cell::List(vec![
                group(&[("bytes", Cell::Null), ("path", text("x.png"))]),
                group(&[("bytes", Cell::Bytes(png.clone())), ("path", text("y.png"))]),
            ]),
        )]);
        let img = image_of(&row, Some("images")).unwrap().unwrap();
        assert_eq!((img.width, img.height, img.format), (3, 2, "png"));
        assert_eq!(
            img.data_url,
            format!("data:image/png;base64,{}", STANDARD.encode(&png))
        );
        let bad = group(&[("image", group(&[("bytes", Cell::Bytes(b"nope".to_vec()))]))]);
        assert!(
            image_of(&bad, Some("image"))
                .unwrap_err()
                .contains("column 'image'")
        );
    }

    #[test]
    fn sharegpt_pairs_follow_the_roles() {
        let msg = |from: &str, value: &str| group(&[("from", text(from)), ("value", text(value))]);
        let c = Cell::List(vec![
            msg("system", "s"),
            msg("gpt", "orphan"),
            msg("human", ""),
            msg("gpt", "skipped: empty prompt"),
            msg("human", "q"),
            msg("gpt", "a"),
        ]);
        assert_eq!(first_pair(&c), Some(("q", "a")));
        let no_roles = Cell::List(vec![
            group(&[("value", text("p"))]),
            group(&[("value", text("r"))]),
        ]);
        assert_eq!(first_pair(&no_roles), Some(("p", "r")));
        assert_eq!(first_pair(&Cell::List(vec![msg("human", "q")])), None);
    }

    #[test]
    fn mmvu_prompts_list_the_choices_and_videos_pass_through() {
        let row = group(&[
            ("question", text("Which force acts here?")),
            (
                "choices",
                group(&[
                    ("A", text("gravity")),
                    ("B", text("friction")),
                    ("C", text("")),
                    ("D", Cell::Null),
                ]),
            ),
        ]);
        assert_eq!(
            mmvu_prompt(&row, "question", "choices").as_deref(),
            Some("Which force acts here? A.gravity B.friction")
        );
        let url = text("https://example.com/v.mp4");
        assert_eq!(
            video_of(Some(&url)).unwrap().url,
            "https://example.com/v.mp4"
        );
        assert_eq!(
            video_of(Some(&text("v/1.mp4"))).unwrap().url,
            "file://v/1.mp4"
        );
        let stored = group(&[
            ("bytes", Cell::Bytes(b"abc".to_vec())),
            ("path", text("c.webm")),
        ]);
        assert_eq!(
            video_of(Some(&stored)).unwrap().url,
            "data:video/webm;base64,YWJj"
        );
        assert!(video_of(Some(&Cell::Null)).is_none());
    }

    #[test]
    fn files_filters_and_names() {
        assert!(parquet_of("default/val/0000.parquet", "default", "val"));
        assert!(parquet_of(
            "sharegpt4o/partial-train/0003.parquet",
            "sharegpt4o",
            "train"
        ));
        assert!(!parquet_of("default/test/0000.parquet", "default", "val"));
        assert!(!parquet_of("default/val/0000.json", "default", "val"));
        assert!(!parquet_of("val/0000.parquet", "default", "val"));
        assert_eq!(
            parse_filter("category=a=b").unwrap(),
            ("category".into(), "a=b".into())
        );
        assert!(parse_filter("=x").is_err());
        let row = group(&[("n", Cell::Number("2".into())), ("ok", Cell::Bool(true))]);
        assert!(keep(
            &row,
            &[("n".into(), "2".into()), ("ok".into(), "true".into())]
        ));
        assert!(!keep(&row, &[("n".into(), "3".into())]));
        assert_eq!(lookup("MMStar").unwrap().repo, "Lin-Chen/MMStar");
        assert!(
            lookup("librispeech")
                .unwrap_err()
                .contains("does not read yet")
        );
    }
}
