//! OpenAI text completions request bodies (`prompt` string, `max_tokens`).

use serde_json::{Map, Value};

use super::{BodyOptions, common_fields};
use crate::dataset::Entry;

/// Text parts are joined with a space; a system text goes first.
pub fn body(entry: Entry, system: Option<&str>, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    let mut prompt = String::new();
    for t in system
        .map(str::to_string)
        .into_iter()
        .chain(std::iter::once(entry.text))
        .chain(entry.extra_texts)
    {
        if !prompt.is_empty() && !t.is_empty() {
            prompt.push(' ');
        }
        prompt.push_str(&t);
    }
    body.insert("prompt".into(), Value::String(prompt));
    common_fields(&mut body, opts, "max_tokens", entry.max_output_tokens);
    body
}
