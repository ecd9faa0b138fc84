//! `--public-dataset` end to end: Parquet (and ShareGPT's JSON) files written here into a
//! Hugging Face cache layout in a temporary HF_HOME, the real binary run offline against the
//! recording mock, and the prompts, images and token counts checked where the server saw
//! them; plus a first download from a local stand-in for the hub (HF_ENDPOINT). No test
//! touches the internet.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aiperf::api::Tokenizer;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{MockChild, read_json, read_jsonl, stderr_text};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const PARQUET_REF: &str = "refs/convert/parquet";

/// One leaf column: values (of the present entries) with definition and repetition levels.
enum Leaf {
    Text(Vec<Vec<u8>>, Vec<i16>, Option<Vec<i16>>),
    Int(Vec<i64>, Vec<i16>),
}

/// Writes one row group with `leaves` in schema order, snappy-compressed like the hub's.
fn write_parquet(path: &Path, schema: &str, leaves: Vec<Leaf>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut leaves = leaves.into_iter();
    while let Some(mut column) = group.next_column().unwrap() {
        match leaves.next().expect("a leaf per column") {
            Leaf::Text(values, defs, reps) => {
                let values: Vec<ByteArray> = values.into_iter().map(ByteArray::from).collect();
                column
                    .typed::<ByteArrayType>()
                    .write_batch(&values, Some(&defs), reps.as_deref())
                    .unwrap();
            }
            Leaf::Int(values, defs) => {
                column
                    .typed::<Int64Type>()
                    .write_batch(&values, Some(&defs), None)
                    .unwrap();
            }
        }
        column.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();
}

/// A flat text column, every row present.
fn texts(values: &[&str]) -> Leaf {
    Leaf::Text(
        values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        vec![1; values.len()],
        None,
    )
}

/// A PNG of `w`x`h` (distinct pixels per size, so images differ).
fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x as u8).wrapping_mul(9), (y as u8).wrapping_mul(7), 99])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([x as u8, y as u8, 200]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

/// The snapshot directory of dataset `repo` at `revision` in `home`, its ref written.
fn snapshot(home: &Path, repo: &str, revision: &str) -> PathBuf {
    let dir = home
        .join("hub")
        .join(format!("datasets--{}", repo.replace('/', "--")));
    let ref_file = dir.join("refs").join(revision);
    std::fs::create_dir_all(ref_file.parent().unwrap()).unwrap();
    std::fs::write(&ref_file, COMMIT).unwrap();
    dir.join("snapshots").join(COMMIT)
}

/// MMStar's rows: (index, question, category, image bytes).
fn mmstar_rows() -> Vec<(i64, &'static str, &'static str, Vec<u8>)> {
    vec![
        (
            0,
            "Which animal is shown in the picture?",
            "coarse perception",
            png(20, 10),
        ),
        (
            1,
            "How many red blocks are stacked on the left?",
            "instance reasoning",
            jpeg(16, 24),
        ),
        (
            2,
            "What is the color of the sky in this photo?",
            "coarse perception",
            png(30, 30),
        ),
        (3, "", "coarse perception", png(8, 8)),
    ]
}

const MMSTAR_SCHEMA: &str = "message schema {
    optional int64 index;
    optional binary question (STRING);
    optional group image {
        optional binary bytes;
        optional binary path (STRING);
    }
    optional binary category (STRING);
}";

fn mmstar_leaves() -> Vec<Leaf> {
    let rows = mmstar_rows();
    let n = rows.len();
    vec![
        Leaf::Int(rows.iter().map(|r| r.0).collect(), vec![1; n]),
        texts(&rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        Leaf::Text(rows.iter().map(|r| r.3.clone()).collect(), vec![2; n], None),
        Leaf::Text(
            (0..n).map(|i| format!("{i}.png").into_bytes()).collect(),
            vec![2; n],
            None,
        ),
        texts(&rows.iter().map(|r| r.2).collect::<Vec<_>>()),
    ]
}

/// Writes MMStar's split into `home`'s cache (as the hub's Parquet conversion lays it out).
fn cache_mmstar(home: &Path) {
    let file = snapshot(home, "Lin-Chen/MMStar", PARQUET_REF).join("default/val/0000.parquet");
    write_parquet(&file, MMSTAR_SCHEMA, mmstar_leaves());
}

/// `aiperf profile` against `url` with HF_HOME = `home`, offline unless `endpoint` is given.
fn profile(cwd: &Path, home: &Path, endpoint: Option<&str>, url: &str, extra: &[&str]) -> Output {
    let mut cmd = Command::new(common::BIN);
    cmd.args([
        "profile",
        "--model",
        "m",
        "--url",
        url,
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        "run",
    ])
    .args(extra)
    .current_dir(cwd)
    .env("HF_HOME", home)
    .env_remove("HF_TOKEN")
    .env_remove("HTTP_PROXY")
    .env_remove("http_proxy")
    .env_remove("ALL_PROXY")
    .env_remove("all_proxy");
    match endpoint {
        Some(e) => cmd.env("HF_ENDPOINT", e).env_remove("HF_HUB_OFFLINE"),
        None => cmd.env("HF_HUB_OFFLINE", "1").env_remove("HF_ENDPOINT"),
    };
    cmd.output().unwrap()
}

/// The recording mock; its lines are read after it stops.
struct Recorded {
    mock: MockChild,
    file: PathBuf,
}

impl Recorded {
    fn start(dir: &Path) -> Recorded {
        let file = dir.join("server.jsonl");
        let mock = MockChild::spawn(&[
            "--fast",
            "--chat-template-tokens",
            "0",
            "--record-requests",
            file.to_str().unwrap(),
        ]);
        Recorded { mock, file }
    }

    fn finish(self) -> Vec<Value> {
        self.mock.terminate();
        common::read_served(&self.file)
    }
}

/// Per request in send order: (text, image data URLs, max tokens) from `inputs.json`.
fn sent(run: &Path) -> Vec<(String, Vec<String>, Option<u64>)> {
    read_json(&run.join("inputs.json"))["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let payload = &s["payloads"][0];
            let content = &payload["messages"][0]["content"];
            let (text, images) = match content {
                Value::String(t) => (t.clone(), Vec::new()),
                Value::Array(parts) => (
                    parts
                        .iter()
                        .filter(|p| p["type"] == "text")
                        .map(|p| p["text"].as_str().unwrap().to_string())
                        .collect::<String>(),
                    parts
                        .iter()
                        .filter(|p| p["type"] == "image_url")
                        .map(|p| p["image_url"]["url"].as_str().unwrap().to_string())
                        .collect(),
                ),
                other => panic!("content {other}"),
            };
            (text, images, payload["max_completion_tokens"].as_u64())
        })
        .collect()
}

/// Input sequence lengths of the records, in send order.
fn isl(run: &Path) -> Vec<u64> {
    let mut records = read_jsonl(&run.join("profile_export.jsonl"));
    records.sort_by_key(|r| r["metadata"]["request_start_ns"].as_u64().unwrap());
    records
        .iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            r["metrics"]["input_sequence_length"]["value"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn count(text: &str) -> u64 {
    Tokenizer::builtin().unwrap().count(text) as u64
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!("data:image/{mime};base64,{}", STANDARD.encode(bytes))
}

#[test]
fn mmstar_rows_reach_the_server_with_their_images_from_the_offline_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    cache_mmstar(&home);
    let server = Recorded::start(tmp.path());
    let out = profile(
        tmp.path(),
        &home,
        None,
        &server.mock.url,
        &["--public-dataset", "mmstar", "--request-count", "4"],
    );
    let served = server.finish();
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    // Three usable rows (the fourth has an empty question): the fourth request wraps.
    assert!(
        err.contains(
            "3 rows used of 4 read from default/val/0000.parquet (0 filtered out, 1 skipped)"
        ),
        "{err}"
    );
    let rows = mmstar_rows();
    let expected = [
        (&rows[0], "png"),
        (&rows[1], "jpeg"),
        (&rows[2], "png"),
        (&rows[0], "png"),
    ];
    let run = tmp.path().join("run");
    // inputs.json holds each entry once; the records show the fourth request wrapping.
    let sent = sent(&run);
    assert_eq!(sent.len(), 3);
    for ((text, images, max_tokens), (row, mime)) in sent.iter().zip(expected) {
        assert_eq!(text, row.1);
        assert_eq!(
            images,
            &vec![data_url(mime, &row.3)],
            "the stored bytes, as sent"
        );
        assert_eq!(*max_tokens, None);
    }
    assert_eq!(
        isl(&run),
        expected.iter().map(|(r, _)| count(r.1)).collect::<Vec<_>>()
    );
    // The server decoded each image at its stored size and counted the same text tokens.
    let mut sizes: Vec<Value> = served.iter().map(|l| l["image_sizes"].clone()).collect();
    sizes.sort_by_key(|s| s.to_string());
    let mut want = vec![
        serde_json::json!([[20, 10]]),
        serde_json::json!([[20, 10]]),
        serde_json::json!([[16, 24]]),
        serde_json::json!([[30, 30]]),
    ];
    want.sort_by_key(|s| s.to_string());
    assert_eq!(sizes, want);
    let mut text_tokens: Vec<u64> = served
        .iter()
        .map(|l| l["text_tokens"].as_u64().unwrap())
        .collect();
    text_tokens.sort();
    let mut want: Vec<u64> = expected.iter().map(|(r, _)| count(r.1)).collect();
    want.sort();
    assert_eq!(text_tokens, want);
}

#[test]
fn dataset_filter_keeps_rows_whose_column_equals_the_value() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    cache_mmstar(&home);
    let server = Recorded::start(tmp.path());
    let url = server.mock.url.clone();
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &[
            "--public-dataset",
            "mmstar",
            "--dataset-filter",
            "category=instance reasoning",
            "--request-count",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("1 rows used of 4 read"),
        "{}",
        stderr_text(&out)
    );
    let texts: Vec<String> = sent(&tmp.path().join("run"))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(texts, vec![mmstar_rows()[1].1]);
    assert_eq!(
        isl(&tmp.path().join("run")),
        vec![count(mmstar_rows()[1].1); 2]
    );

    // Numbers compare as written; two filters must both hold.
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &[
            "--public-dataset",
            "mmstar",
            "--dataset-filter",
            "category=coarse perception",
            "--dataset-filter",
            "index=2",
            "--request-count",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let texts: Vec<String> = sent(&tmp.path().join("run"))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(texts, vec![mmstar_rows()[2].1]);
    let summary = read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    assert_eq!(
        summary["input_config"]["datasets"][0],
        serde_json::json!({
            "name": "main",
            "type": "public",
            "dataset": "mmstar",
            "hf_subset": null,
            "filters": ["category=coarse perception", "index=2"],
            "random_seed": summary["input_config"]["datasets"][0]["random_seed"],
        })
    );

    // A column the dataset does not have is an error naming the columns it has.
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &[
            "--public-dataset",
            "mmstar",
            "--dataset-filter",
            "level=easy",
        ],
    );
    server.finish();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_text(&out);
    assert!(
        err.contains("--public-dataset mmstar: default/val/0000.parquet: row 1: no column 'level' (columns: index, question, image, category)")
            || err.contains("no column 'level' (columns: index, question, image, category)"),
        "{err}"
    );

    // A malformed filter is refused before anything runs.
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &["--public-dataset", "mmstar", "--dataset-filter", "category"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("--dataset-filter 'category': expected COLUMN=VALUE"),
        "{}",
        stderr_text(&out)
    );
}

const LLAVA_SCHEMA: &str = "message schema {
    optional binary id (STRING);
    optional group conversations (LIST) {
        repeated group list {
            optional group element {
                optional binary from (STRING);
                optional binary value (STRING);
            }
        }
    }
    optional group image {
        optional binary bytes;
        optional binary path (STRING);
    }
}";

/// One LLaVA-OneVision row: id, messages as (from, value), image bytes.
type LlavaRow<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

/// Writes LLaVA-OneVision rows of one subset.
fn write_llava(file: &Path, rows: &[LlavaRow]) {
    let n = rows.len();
    let mut froms = (Vec::new(), Vec::new(), Vec::new());
    let mut values = (Vec::new(), Vec::new(), Vec::new());
    for (_, messages, _) in rows {
        for (i, (from, value)) in messages.iter().enumerate() {
            let rep = if i == 0 { 0 } else { 1 };
            froms.0.push(from.as_bytes().to_vec());
            froms.1.push(4);
            froms.2.push(rep);
            values.0.push(value.as_bytes().to_vec());
            values.1.push(4);
            values.2.push(rep);
        }
    }
    write_parquet(
        file,
        LLAVA_SCHEMA,
        vec![
            texts(&rows.iter().map(|r| r.0).collect::<Vec<_>>()),
            Leaf::Text(froms.0, froms.1, Some(froms.2)),
            Leaf::Text(values.0, values.1, Some(values.2)),
            Leaf::Text(rows.iter().map(|r| r.2.clone()).collect(), vec![2; n], None),
            Leaf::Text(vec![b"a.png".to_vec(); n], vec![2; n], None),
        ],
    );
}

#[test]
fn hf_subset_picks_the_subset_and_the_first_human_message_is_the_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    let snap = snapshot(&home, "lmms-lab/LLaVA-OneVision-Data", PARQUET_REF);
    let default_image = png(12, 12);
    write_llava(
        &snap.join("sharegpt4o/train/0000.parquet"),
        &[(
            "a",
            vec![
                ("human", "<image>\nWhat is written on the sign?"),
                ("gpt", "It says STOP."),
            ],
            default_image.clone(),
        )],
    );
    let other_image = png(40, 20);
    write_llava(
        &snap.join("CLEVR-Math(MathV360K)/train/0000.parquet"),
        &[(
            "b",
            vec![
                ("system", "You are a careful counter."),
                (
                    "human",
                    "Subtract all red balls. How many objects are left? <image>",
                ),
                ("gpt", "5"),
            ],
            other_image.clone(),
        )],
    );
    let server = Recorded::start(tmp.path());
    let url = server.mock.url.clone();
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &[
            "--public-dataset",
            "llava_onevision",
            "--request-count",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let sent_default = sent(&tmp.path().join("run"));
    assert_eq!(
        sent_default,
        vec![(
            "What is written on the sign?".to_string(),
            vec![data_url("png", &default_image)],
            None
        )]
    );
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &[
            "--public-dataset",
            "llava_onevision",
            "--hf-subset",
            "CLEVR-Math(MathV360K)",
            "--request-count",
            "1",
        ],
    );
    let served = server.finish();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let prompt = "Subtract all red balls. How many objects are left?";
    assert_eq!(
        sent(&tmp.path().join("run")),
        vec![(
            prompt.to_string(),
            vec![data_url("png", &other_image)],
            None
        )]
    );
    assert_eq!(isl(&tmp.path().join("run")), vec![count(prompt)]);
    assert_eq!(
        served.last().unwrap()["image_sizes"],
        serde_json::json!([[40, 20]])
    );
    assert!(
        stderr_text(&out).contains("llava_onevision (lmms-lab/LLaVA-OneVision-Data, subset CLEVR-Math(MathV360K), split train): 1 rows used"),
        "{}",
        stderr_text(&out)
    );

    // A subset that is not there (offline) names what was looked for and where.
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &["--public-dataset", "llava_onevision", "--hf-subset", "nope"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_text(&out);
    assert!(err.contains("HF_HUB_OFFLINE is set and dataset lmms-lab/LLaVA-OneVision-Data (nope/train/*.parquet) is not in the Hugging Face cache"), "{err}");
}

#[test]
fn sharegpt_sends_the_first_pair_with_the_reply_length_as_max_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    let file = snapshot(&home, "anon8231489123/ShareGPT_Vicuna_unfiltered", "main")
        .join("ShareGPT_V3_unfiltered_cleaned_split.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let first = "Explain how a rainbow forms after the rain stops.";
    let first_reply = "Sunlight is refracted, reflected and dispersed inside water droplets.";
    let second = "Write a haiku about autumn leaves falling slowly.";
    let second_reply =
        "Red leaves drift and fall, quiet wind carries them home, the branches rest now.";
    let entries = serde_json::json!([
        {"id": "a", "conversations": [
            {"from": "human", "value": first},
            {"from": "gpt", "value": first_reply},
            {"from": "human", "value": "And a double rainbow?"},
            {"from": "gpt", "value": "Two reflections."}]},
        {"id": "b", "conversations": [
            {"from": "human", "value": "Hi there, how are you doing today?"},
            {"from": "gpt", "value": "Fine."}]},
        {"id": "c", "conversations": [{"from": "human", "value": "Only a question here, no reply."}]},
        {"id": "d", "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": second},
            {"from": "gpt", "value": second_reply}]},
    ]);
    std::fs::write(&file, serde_json::to_string(&entries).unwrap()).unwrap();
    let server = Recorded::start(tmp.path());
    let out = profile(
        tmp.path(),
        &home,
        None,
        &server.mock.url,
        &[
            "--public-dataset",
            "sharegpt",
            "--endpoint-type",
            "chat",
            "--request-count",
            "3",
        ],
    );
    let served = server.finish();
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    // "b" has a reply under 4 tokens and "c" has no reply: skipped as AIPerf does.
    assert!(err.contains("2 rows used of 4 read"), "{err}");
    let want = [
        (first, first_reply),
        (second, second_reply),
        (first, first_reply),
    ];
    let got = sent(&tmp.path().join("run"));
    assert_eq!(
        got,
        want[..2]
            .iter()
            .map(|(p, r)| (p.to_string(), Vec::new(), Some(count(r))))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        isl(&tmp.path().join("run")),
        want.iter().map(|(p, _)| count(p)).collect::<Vec<_>>()
    );
    assert_eq!(served.len(), 3);
}

#[test]
fn offline_and_not_cached_is_an_error_naming_the_dataset_and_the_cache_path() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("empty-hf");
    let out = profile(
        tmp.path(),
        &home,
        None,
        "http://127.0.0.1:9",
        &["--public-dataset", "mmstar"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_text(&out);
    let dir = home.join("hub/datasets--Lin-Chen--MMStar");
    assert!(
        err.contains(&format!(
            "--public-dataset mmstar: HF_HUB_OFFLINE is set and dataset Lin-Chen/MMStar (default/val/*.parquet) is not in the Hugging Face cache: looked in {} (revision refs/convert/parquet)",
            dir.display()
        )),
        "{err}"
    );
}

#[test]
fn names_not_implemented_and_misused_flags_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    let url = "http://127.0.0.1:9";
    let cases: [(&[&str], &str); 6] = [
        (
            &["--public-dataset", "librispeech"],
            "--public-dataset librispeech: is an AIPerf dataset this build does not read yet; the ones this build reads are: sharegpt, mmstar, vision_arena, llava_onevision, mmvu,",
        ),
        (
            &["--public-dataset", "imagenet"],
            "--public-dataset imagenet: is not a public dataset name",
        ),
        (&["--hf-subset", "x"], "--hf-subset needs --public-dataset"),
        (
            &["--dataset-filter", "a=b"],
            "--dataset-filter needs --public-dataset",
        ),
        (
            &[
                "--public-dataset",
                "mmstar",
                "--endpoint-type",
                "completions",
            ],
            "--public-dataset mmstar: its rows carry images or video, which need --endpoint-type chat, not completions",
        ),
        (
            &[
                "--public-dataset",
                "mmstar",
                "--image-width-mean",
                "64",
                "--image-height-mean",
                "64",
            ],
            "synthetic images cannot be used with --public-dataset mmstar",
        ),
    ];
    for (args, want) in cases {
        let out = profile(tmp.path(), &home, None, url, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_text(&out).contains(want),
            "{args:?}: {}",
            stderr_text(&out)
        );
    }
}

/// A stand-in for the hub: the file list of one dataset revision (`/api/...`) and ranged
/// GETs of its files (`/resolve/...`), answered the way hf-hub expects; counts requests.
fn serve_hub(
    files: Vec<(String, Vec<u8>)>,
    api_path: String,
    resolve_prefix: String,
) -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut range: Option<(usize, Option<usize>)> = None;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(r) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                    let (a, b) = r.trim().split_once('-').unwrap();
                    range = Some((a.parse().unwrap(), b.parse().ok()));
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .to_string();
            let response = if path == api_path {
                let siblings: Vec<Value> = files
                    .iter()
                    .map(|(n, _)| serde_json::json!({"rfilename": n}))
                    .collect();
                let body = serde_json::json!({"sha": COMMIT, "siblings": siblings}).to_string();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes()
            } else if let Some((_, body)) = path
                .strip_prefix(&resolve_prefix)
                .and_then(|name| files.iter().find(|(n, _)| n == name))
            {
                let (start, end) = range.unwrap_or((0, None));
                let end = end.unwrap_or(body.len() - 1).min(body.len() - 1);
                let part = &body[start..=end];
                let mut head = format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\n\
                     Content-Range: bytes {start}-{end}/{}\r\nETag: \"etag-{}\"\r\n\
                     X-Repo-Commit: {COMMIT}\r\nConnection: close\r\n\r\n",
                    part.len(),
                    body.len(),
                    body.len()
                )
                .into_bytes();
                head.extend_from_slice(part);
                head
            } else {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            };
            let _ = stream.write_all(&response);
            let _ = stream.flush();
        }
    });
    (port, hits)
}

#[test]
fn first_run_downloads_into_the_standard_cache_and_later_runs_use_it() {
    let tmp = tempfile::tempdir().unwrap();
    // The Parquet file, written once here and served by the stand-in hub.
    let source = tmp.path().join("source.parquet");
    write_parquet(&source, MMSTAR_SCHEMA, mmstar_leaves());
    let body = std::fs::read(&source).unwrap();
    let files = vec![
        ("default/val/0000.parquet".to_string(), body.clone()),
        (
            "default/test/0000.parquet".to_string(),
            b"not read".to_vec(),
        ),
    ];
    let (port, hits) = serve_hub(
        files,
        "/api/datasets/Lin-Chen/MMStar/revision/refs%2Fconvert%2Fparquet".into(),
        "/datasets/Lin-Chen/MMStar/resolve/refs%2Fconvert%2Fparquet/".into(),
    );
    let endpoint = format!("http://127.0.0.1:{port}");
    let home = tmp.path().join("hf");
    let server = Recorded::start(tmp.path());
    let url = server.mock.url.clone();
    let out = profile(
        tmp.path(),
        &home,
        Some(&endpoint),
        &url,
        &["--public-dataset", "mmstar", "--request-count", "3"],
    );
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Downloading default/val/0000.parquet of dataset Lin-Chen/MMStar"),
        "{err}"
    );
    // Reading stops at the rows the run can send.
    assert!(err.contains("3 rows used of 3 read"), "{err}");
    let repo = home.join("hub/datasets--Lin-Chen--MMStar");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/refs/convert/parquet")).unwrap(),
        COMMIT
    );
    let cached = repo
        .join("snapshots")
        .join(COMMIT)
        .join("default/val/0000.parquet");
    assert_eq!(std::fs::read(&cached).unwrap(), body);
    assert!(
        !repo
            .join("snapshots")
            .join(COMMIT)
            .join("default/test")
            .exists()
    );
    let rows = mmstar_rows();
    let texts: Vec<String> = sent(&tmp.path().join("run"))
        .into_iter()
        .map(|s| s.0)
        .collect();
    assert_eq!(texts, vec![rows[0].1, rows[1].1, rows[2].1]);

    // Online again: the cache answers, the hub is not asked.
    let before = hits.load(Ordering::SeqCst);
    let out = profile(
        tmp.path(),
        &home,
        Some(&endpoint),
        &url,
        &["--public-dataset", "mmstar", "--request-count", "2"],
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(!stderr_text(&out).contains("Downloading"));
    assert_eq!(hits.load(Ordering::SeqCst), before);
    // Offline too.
    let out = profile(
        tmp.path(),
        &home,
        None,
        &url,
        &["--public-dataset", "mmstar", "--request-count", "2"],
    );
    server.finish();
    assert!(out.status.success(), "{}", stderr_text(&out));
}

#[test]
fn mmvu_sends_the_question_with_its_choices_and_the_video_url() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    let file =
        snapshot(&home, "yale-nlp/MMVU", PARQUET_REF).join("default/validation/0000.parquet");
    let schema = "message schema {
        optional binary question (STRING);
        optional group choices {
            optional binary A (STRING);
            optional binary B (STRING);
            optional binary C (STRING);
        }
        optional binary video (STRING);
    }";
    write_parquet(
        &file,
        schema,
        vec![
            texts(&["Which law explains the motion?"]),
            // Struct fields: defined at level 2 (the struct, then the field).
            Leaf::Text(vec![b"Newton's first law".to_vec()], vec![2], None),
            Leaf::Text(vec![b"Hooke's law".to_vec()], vec![2], None),
            Leaf::Text(vec![Vec::new()], vec![2], None),
            texts(&["https://example.com/videos/physics_1.mp4"]),
        ],
    );
    let server = Recorded::start(tmp.path());
    let out = profile(
        tmp.path(),
        &home,
        None,
        &server.mock.url,
        &["--public-dataset", "mmvu", "--request-count", "1"],
    );
    server.finish();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let parts =
        read_json(&run.join("inputs.json"))["data"][0]["payloads"][0]["messages"][0]["content"]
            .clone();
    let prompt = "Which law explains the motion? A.Newton's first law B.Hooke's law";
    assert_eq!(
        parts,
        serde_json::json!([
            {"type": "text", "text": prompt},
            {"type": "video_url", "video_url": {"url": "https://example.com/videos/physics_1.mp4"}},
        ])
    );
    assert_eq!(isl(&run), vec![count(prompt)]);
}

#[test]
fn a_system_prompt_leads_every_row_and_synthetic_shaping_flags_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf");
    cache_mmstar(&home);
    let server = Recorded::start(tmp.path());
    let system = "Answer in one word.";
    let out = profile(
        tmp.path(),
        &home,
        None,
        &server.mock.url,
        &[
            "--public-dataset",
            "mmstar",
            "--request-count",
            "3",
            "--system-prompt",
            system,
        ],
    );
    server.finish();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");
    let inputs = read_json(&run.join("inputs.json"));
    let rows = mmstar_rows();
    for (i, s) in inputs["data"].as_array().unwrap().iter().enumerate() {
        let messages = &s["payloads"][0]["messages"];
        assert_eq!(messages[0]["role"], "system", "{messages}");
        assert_eq!(messages[0]["content"], system);
        assert_eq!(messages[1]["role"], "user");
        let question = rows[i].1;
        assert!(messages[1]["content"].to_string().contains(question));
    }
    // The system text counts in the input length, joined to the question by a space.
    assert_eq!(
        isl(&run),
        rows[..3]
            .iter()
            .map(|r| count(&format!("{system} {}", r.1)))
            .collect::<Vec<_>>()
    );
    for flag in [
        &["-b", "2"][..],
        &["--seq-dist", "10,5:100"],
        &[
            "--prompt-prefix-pool-size",
            "2",
            "--prompt-prefix-length",
            "8",
        ],
    ] {
        let mut args = vec!["--public-dataset", "mmstar", "--request-count", "1"];
        args.extend_from_slice(flag);
        let out = profile(tmp.path(), &home, None, "http://127.0.0.1:9", &args);
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let err = stderr_text(&out);
        assert!(
            err.contains("shapes synthetic prompts") && err.contains("--public-dataset mmstar"),
            "{flag:?}: {err}"
        );
    }
}
