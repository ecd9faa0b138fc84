//! OpenAI image generation (`/v1/images/generations`): `{"prompt", "model",
//! "response_format": "b64_json", "n": 1}` (override any with `--extra-inputs`). The
//! images of the answer (`data[]` items with `b64_json` or `url`) are counted, not decoded.

use serde_json::{Map, Value, json};

use super::ParsedEvent;
use crate::dataset::Entry;

/// The body: the entry's first text is the prompt.
pub fn body(entry: Entry, model: &str) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("prompt".into(), Value::String(entry.text));
    body.insert("model".into(), json!(model));
    // b64_json: what SGLang's diffusion server supports, and what AIPerf asks for.
    body.insert("response_format".into(), json!("b64_json"));
    body.insert("n".into(), json!(1));
    body
}

/// Counts the images: `data[]` items with an image, or one top-level `b64_json`.
pub fn parse(v: &Value, out: &mut ParsedEvent<'_>) {
    let has_image = |i: &Value| {
        ["b64_json", "url"]
            .iter()
            .any(|k| i.get(k).is_some_and(|x| x.is_string()))
    };
    let n = match v.get("data") {
        Some(Value::Array(items)) => items.iter().filter(|i| has_image(i)).count() as u64,
        Some(other) => {
            out.unexpected = Some(format!("'data' is {other}, not a list"));
            0
        }
        None => u64::from(has_image(v)),
    };
    out.items = n;
    out.images = n;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_counted() {
        let v = json!({"created": 1, "data": [{"b64_json": "iVBO"}, {"url": "http://x/i.png"}, {"revised_prompt": "p"}]});
        let mut e = ParsedEvent::default();
        parse(&v, &mut e);
        assert_eq!((e.items, e.images), (2, 2));
        let mut e = ParsedEvent::default();
        parse(&json!({"b64_json": "iVBO"}), &mut e);
        assert_eq!(e.images, 1);
    }
}
