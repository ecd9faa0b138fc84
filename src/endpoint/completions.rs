//! OpenAI text completions request bodies (`prompt` string, `max_tokens`).

use serde_json::{Map, Value};

use super::{BodyOptions, common_fields};
use crate::dataset::Entry;

/// One text is sent as the `prompt` string, several (a prompt batch or a line's `texts`) as
/// a list; a system text goes first in the first, followed by a space.
pub fn body(entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    let mut prompts: Vec<Value> = std::iter::once(entry.text)
        .chain(entry.extra_texts)
        .filter(|t| !t.is_empty())
        .map(Value::String)
        .collect();
    match (system, prompts.first_mut()) {
        (Some(s), Some(Value::String(first))) => *first = format!("{s} {first}"),
        (Some(s), None) => prompts.push(Value::String(s.to_string())),
        _ => {}
    }
    let prompt = match prompts.len() {
        0 => Value::String(String::new()),
        1 => prompts.pop().expect("one prompt"),
        _ => Value::Array(prompts),
    };
    body.insert("prompt".into(), prompt);
    common_fields(&mut body, opts, "max_tokens", entry.max_output_tokens);
    body
}
