//! Hugging Face TGI (`/generate`, `/generate_stream` with --streaming): `{"inputs": TEXT,
//! "parameters": {"max_new_tokens": N, ...--extra-inputs}}`, the entry's texts joined by
//! spaces; an input line's own `extra` goes at top level. Whole answers are
//! `{"generated_text"}` (or a list of them); each streamed event carries one `token.text`
//! (the final event's `generated_text` repeats the whole text and is not read).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{BodyOptions, ParsedEvent, lenient};
use crate::dataset::Entry;

pub fn body(mut entry: Entry, opts: &BodyOptions) -> Map<String, Value> {
    let inputs = std::iter::once(std::mem::take(&mut entry.text))
        .chain(std::mem::take(&mut entry.extra_texts))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut parameters = Map::new();
    if let Some(n) = entry.max_output_tokens {
        parameters.insert("max_new_tokens".into(), Value::from(n));
    }
    for (k, v) in &opts.extra_inputs {
        parameters.insert(k.clone(), v.clone());
    }
    let mut body = Map::new();
    body.insert("inputs".into(), Value::String(inputs));
    body.insert("parameters".into(), Value::Object(parameters));
    for (k, v) in std::mem::take(&mut entry.extra) {
        body.insert(k, v);
    }
    body
}

/// A stream event (`token.text`; the last one, with `generated_text`, ends the stream) or
/// a whole answer (`generated_text`).
pub fn parse(data: &[u8]) -> Result<ParsedEvent<'static>, serde_json::Error> {
    let v: Value = serde_json::from_slice(data)?;
    let mut out = lenient(&v);
    out.text = None;
    out.reasoning = None;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| Cow::Owned(s.to_string()));
    out.text = match &v {
        Value::Object(o) if o.contains_key("token") => {
            text(v.get("token").and_then(|t| t.get("text")))
        }
        Value::Object(_) => text(v.get("generated_text")),
        Value::Array(list) => text(list.first().and_then(|f| f.get("generated_text"))),
        _ => None,
    };
    out.end = v.get("token").is_some() && v.get("generated_text").is_some_and(Value::is_string);
    Ok(out)
}
