//! OpenAI text completions request bodies (`prompt` string, `max_tokens`).

use serde_json::{Map, Value};

use super::{BodyOptions, common_fields};
use crate::dataset::Entry;

pub fn body(entry: Entry, opts: &BodyOptions) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("prompt".into(), Value::String(entry.text));
    common_fields(&mut body, opts, "max_tokens", entry.max_output_tokens);
    body
}
