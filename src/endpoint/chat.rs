//! OpenAI chat completions request bodies: one user message whose content is the text part
//! followed by the image parts (plain string content when there are no images).

use serde_json::{Map, Value, json};

use super::{BodyOptions, common_fields};
use crate::dataset::Entry;

pub fn body(entry: Entry, opts: &BodyOptions) -> Map<String, Value> {
    let content = if entry.images.is_empty() {
        Value::String(entry.text)
    } else {
        let mut parts = Vec::with_capacity(1 + entry.images.len());
        if !entry.text.is_empty() {
            parts.push(json!({"type": "text", "text": entry.text}));
        }
        for image in entry.images {
            parts.push(json!({"type": "image_url", "image_url": {"url": image.data_url}}));
        }
        Value::Array(parts)
    };
    let mut body = Map::new();
    body.insert(
        "messages".into(),
        json!([{"role": "user", "content": content}]),
    );
    let key = if opts.use_legacy_max_tokens {
        "max_tokens"
    } else {
        "max_completion_tokens"
    };
    common_fields(&mut body, opts, key, entry.max_output_tokens);
    body
}
