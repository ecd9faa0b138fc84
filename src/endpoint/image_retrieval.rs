//! NVIDIA NIM image retrieval (`/v1/infer`): `{"input": [{"type": "image_url", "url"}]}`,
//! one item per image of the request (inline data URLs), no model field. The answer's
//! `data[]` items are counted; nothing is tokenized either way.

use serde_json::{Map, Value, json};

use super::{EndpointMismatch, EndpointType, ParsedEvent};
use crate::dataset::Entry;

pub fn body(entry: Entry) -> Result<Map<String, Value>, EndpointMismatch> {
    if entry.images.is_empty() {
        return Err(EndpointMismatch::NeedsImages(EndpointType::ImageRetrieval));
    }
    let input: Vec<Value> = entry
        .images
        .into_iter()
        .map(|i| json!({"type": "image_url", "url": i.data_url}))
        .collect();
    let mut body = Map::new();
    body.insert("input".into(), Value::Array(input));
    Ok(body)
}

/// Counts the `data[]` items of the answer.
pub fn parse(v: &Value, out: &mut ParsedEvent<'_>) {
    match v.get("data") {
        Some(Value::Array(items)) => out.items = items.len() as u64,
        Some(other) => out.unexpected = Some(format!("'data' is {other}, not a list")),
        None => {}
    }
}
