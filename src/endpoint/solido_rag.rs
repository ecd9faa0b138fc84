//! SOLIDO RAG (`/rag/api/prompt`): `{"query": [texts], "filters": {"family": "Solido",
//! "tool": "SDE"}, "inference_model": MODEL}` (no output limit). The answer's `content` is
//! the text, whole or one piece per SSE event; its `sources` are not read.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{ParsedEvent, lenient};
use crate::dataset::Entry;

pub fn body(entry: Entry, model: &str) -> Map<String, Value> {
    let query: Vec<Value> = std::iter::once(entry.text)
        .chain(entry.extra_texts)
        .filter(|t| !t.is_empty())
        .map(Value::String)
        .collect();
    let mut body = Map::new();
    body.insert("query".into(), Value::Array(query));
    body.insert("filters".into(), json!({"family": "Solido", "tool": "SDE"}));
    body.insert("inference_model".into(), Value::String(model.to_string()));
    body
}

/// One answer or stream event: its `content` string, plus usage and errors if any.
pub fn parse(data: &[u8]) -> Result<ParsedEvent<'static>, serde_json::Error> {
    let v: Value = serde_json::from_slice(data)?;
    let mut out = lenient(&v);
    out.text = None;
    out.reasoning = None;
    match v.get("content") {
        Some(Value::String(s)) => out.text = Some(Cow::Owned(s.clone())),
        Some(Value::Null) | None => {}
        Some(other) => out.unexpected = Some(format!("'content' is {other}, not a string")),
    }
    Ok(out)
}
