//! `POST /rag/api/prompt` in the SOLIDO RAG shape.
//!
//! Request: `{"query": [texts], "filters": {...}, "inference_model": MODEL}`; prompt usage is
//! the query texts' tokens. Whole answer: `{"content", "sources"}`; with `"stream": true` in
//! the body, one `data: {"content": WORD}` event per token, then `[DONE]`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::request::{GenerationParams, PromptStats, text_tokens};
use super::response::{Api, ChunkWriter};
use super::words;

pub fn parse_request(
    bytes: &[u8],
) -> Result<(Option<String>, PromptStats, GenerationParams), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("JSON decode error: {e}"))?;
    let query = v
        .get("query")
        .and_then(Value::as_array)
        .ok_or("query: Field required (a list of strings)")?;
    let mut stats = PromptStats {
        roles: vec!["user".into()],
        ..PromptStats::default()
    };
    for q in query {
        stats.text_tokens += text_tokens(q.as_str().ok_or("query: a list of strings")?);
    }
    let model = v
        .get("inference_model")
        .and_then(Value::as_str)
        .map(str::to_string);
    let generation = GenerationParams {
        stream: v.get("stream").and_then(Value::as_bool),
        ..GenerationParams::default()
    };
    Ok((model, stats, generation))
}

pub fn writer() -> ChunkWriter {
    ChunkWriter::events(
        Api::Solido,
        Bytes::new(),
        Bytes::from_static(b"data: {\"content\":\""),
        b"\"}\n\n",
        None,
    )
}

/// A whole answer with one made-up source.
pub fn full_body(tokens: u64) -> Bytes {
    let body = json!({
        "content": words::text(tokens),
        "sources": [{"title": "SDE User Guide", "page": 1}],
    });
    Bytes::from(body.to_string())
}
