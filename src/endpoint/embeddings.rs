//! OpenAI embeddings (`/v1/embeddings`): `{"model", "input": [text, ...]}`, one input per
//! text of the entry (an input file's `texts` list is a batch). The answer's
//! `data[].embedding` vectors are counted, not read; `usage.prompt_tokens` is kept.

use serde_json::{Map, Value};

use super::ParsedEvent;
use crate::dataset::Entry;

/// The body: every non-empty text of the entry, in order. No token limit (embeddings
/// produce no tokens) and no `stream` (the API has none).
pub fn body(entry: Entry, model: &str) -> Map<String, Value> {
    let inputs = std::iter::once(entry.text)
        .chain(entry.extra_texts)
        .filter(|t| !t.is_empty())
        .map(Value::String)
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.to_string()));
    body.insert("input".into(), Value::Array(inputs));
    body
}

/// Reads `data[].embedding`: each vector present counts as one result.
pub fn parse(v: &Value, out: &mut ParsedEvent<'_>) {
    match v.get("data") {
        Some(Value::Array(items)) => {
            out.items = items
                .iter()
                .filter(|i| i.get("embedding").is_some_and(|e| !e.is_null()))
                .count() as u64;
        }
        Some(other) => out.unexpected = Some(format!("'data' is {other}, not a list")),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_counted_not_read() {
        let v: Value = serde_json::from_str(
            r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]},{"object":"embedding","index":1,"embedding":"AAAA"}],"usage":{"prompt_tokens":7,"total_tokens":7}}"#,
        )
        .unwrap();
        let mut e = ParsedEvent::default();
        parse(&v, &mut e);
        assert_eq!(e.items, 2);
        let mut e = ParsedEvent::default();
        parse(&serde_json::json!({"data": 5}), &mut e);
        assert_eq!(e.items, 0);
        assert!(e.unexpected.is_some());
    }
}
