//! Image Token Count end to end: the real `aiperf` binary against a mock server whose prompt
//! usage includes chat-template tokens. The metric must show the images' tokens only, both
//! when the overhead is measured with a server probe (builtin tokenizer, no template) and
//! when it is rendered from the tokenizer's chat template.

use crate::common;

use std::path::Path;

use aiperf::api::PROBE_REQUEST_ID;
use aiperf::api::qwen2_vl_image_tokens;
use common::{MockChild, read_json, read_jsonl, run_aiperf_in, stderr_text};
use serde_json::json;

/// A 1x1 PNG.
const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAusB9WlLaY4AAAAASUVORK5CYII=";

/// Image Token Count of every record in `run/profile_export.jsonl`.
fn image_token_counts(run: &Path) -> Vec<f64> {
    read_jsonl(&run.join("profile_export.jsonl"))
        .iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            r["metrics"]["image_token_count"]["value"]
                .as_f64()
                .unwrap_or_else(|| panic!("no image_token_count in {r}"))
        })
        .collect()
}

/// A fast mock charging `template_tokens` per message, recording what it received into
/// `dir/server.jsonl`.
fn recording_mock(dir: &Path, template_tokens: u32) -> (MockChild, std::path::PathBuf) {
    let rec = dir.join("server.jsonl");
    let mock = MockChild::spawn(&[
        "--fast",
        "--chat-template-tokens",
        &template_tokens.to_string(),
        "--record-requests",
        rec.to_str().unwrap(),
    ]);
    (mock, rec)
}

#[test]
fn a_server_probe_takes_the_template_tokens_out() {
    let tmp = tempfile::tempdir().unwrap();
    let (mock, rec) = recording_mock(tmp.path(), 8);
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "Qwen/Qwen2-VL-2B-Instruct",
            "--tokenizer",
            "builtin",
            "--url",
            &mock.url,
            "--image-width-mean",
            "512",
            "--image-height-mean",
            "512",
            "--synthetic-input-tokens-mean",
            "100",
            "--output-tokens-mean",
            "10",
            "--streaming",
            "--request-count",
            "8",
            "--concurrency",
            "2",
            "--artifact-dir",
            "run",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");

    // The server charged 100 text + 326 image + 8 template tokens; the metric shows 326.
    let counts = image_token_counts(&run);
    assert_eq!(counts.len(), 8);
    for c in counts {
        assert_eq!(c, qwen2_vl_image_tokens(512, 512) as f64);
    }
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    assert_eq!(
        summary["chat_template_overhead"],
        json!({"method": "server_probe", "tokens": {"min": 8, "max": 8}})
    );
    let log = std::fs::read_to_string(run.join("logs/aiperf.log")).unwrap();
    assert!(
        log.contains("subtracting the chat template's overhead, 8 tokens per request (measured with a text-only probe request to the server)"),
        "{log}"
    );

    // The probe went first: same text, no image, one output token, not streamed.
    let server = read_jsonl(&rec);
    assert_eq!(server.len(), 1 + 8);
    let probe = &server[0];
    assert_eq!(probe["x_request_id"], PROBE_REQUEST_ID, "{probe}");
    assert_eq!(probe["num_images"], 0);
    assert_eq!(probe["template_tokens"], 8);
    assert_eq!(probe["output_tokens"], 1);
    assert_eq!(probe["stream"], false);
    assert!(
        server[1..]
            .iter()
            .all(|s| s["x_request_id"] != PROBE_REQUEST_ID)
    );
}

/// A tokenizer directory: the GPT-2 fixture plus ChatML's markers, and a ChatML template
/// with no default system message.
fn chatml_tokenizer(dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut t = tokenizers::Tokenizer::from_file(fixtures.join("gpt2/tokenizer.json")).unwrap();
    t.add_special_tokens([
        tokenizers::AddedToken::from("<|im_start|>", true),
        tokenizers::AddedToken::from("<|im_end|>", true),
    ])
    .unwrap();
    t.save(dir.join("tokenizer.json"), false).unwrap();
    let template = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n\
        {% if message['content'] is string %}{{ message['content'] }}\
        {% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}\
        {% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}{% endfor %}{% endif %}<|im_end|>\n\
        {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    let config = json!({"eos_token": "<|im_end|>", "chat_template": template});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
}

#[test]
fn the_tokenizers_chat_template_takes_the_template_tokens_out() {
    let tmp = tempfile::tempdir().unwrap();
    let tokenizer_dir = tmp.path().join("tokenizer");
    std::fs::create_dir(&tokenizer_dir).unwrap();
    chatml_tokenizer(&tokenizer_dir);
    // Words GPT-2 and the mock's o200k_base count alike, so only the template differs.
    let prompts = [
        "What is in the picture?",
        "Write a caption for this photo.",
        "Tell me what you see.",
    ];
    let lines: String = prompts
        .iter()
        .map(|p| {
            format!(
                "{}\n",
                json!({"text": p, "image": PIXEL, "output_length": 4})
            )
        })
        .collect();
    std::fs::write(tmp.path().join("inputs.jsonl"), lines).unwrap();

    // With GPT-2's tokens the ChatML template adds 9 to one message: <|im_start|> user \n,
    // <|im_end|> \n, and <|im_start|> ass istant \n.
    let (mock, rec) = recording_mock(tmp.path(), 9);
    let out = run_aiperf_in(
        tmp.path(),
        &[
            "profile",
            "--model",
            "m",
            "--tokenizer",
            tokenizer_dir.to_str().unwrap(),
            "--url",
            &mock.url,
            "--input-file",
            "inputs.jsonl",
            "--custom-dataset-type",
            "single_turn",
            "--request-count",
            "3",
            "--artifact-dir",
            "run",
        ],
    );
    mock.terminate();
    assert!(out.status.success(), "{}", stderr_text(&out));
    let run = tmp.path().join("run");

    let counts = image_token_counts(&run);
    assert_eq!(counts, vec![qwen2_vl_image_tokens(1, 1) as f64; 3]);
    let summary = read_json(&run.join("profile_export_aiperf.json"));
    let overhead = &summary["chat_template_overhead"];
    assert_eq!(overhead["method"], "chat_template", "{overhead}");
    assert_eq!(overhead["tokens"], json!({"min": 9, "max": 9}));
    let source = overhead["source"].as_str().unwrap();
    assert!(source.ends_with("tokenizer_config.json"), "{source}");

    // No probe was needed, and the client's text count is the server's.
    let server = read_jsonl(&rec);
    assert_eq!(server.len(), 3);
    let isl: f64 = read_jsonl(&run.join("profile_export.jsonl"))
        .iter()
        .map(|r| {
            r["metrics"]["input_sequence_length"]["value"]
                .as_f64()
                .unwrap()
        })
        .sum();
    let text_tokens: u64 = server
        .iter()
        .map(|s| s["text_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(isl, text_tokens as f64);
}
