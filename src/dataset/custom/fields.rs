//! Reading an input file's lines as JSON objects and their typed fields, each error naming
//! the file, the line and the field.

use super::*;

/// A parsed line and where it came from.
pub(super) type Line<'a> = (At<'a>, Map<String, Value>);

/// Every non-blank line parsed as a JSON object, with its location (read as it comes; see
/// `input_lines`). Stops at the first line that is no JSON object.
pub(super) fn read_jsonl(file: &Path) -> Result<Vec<Line<'_>>, InputError> {
    let mut out = Vec::new();
    let mut first_bad = None;
    for_each_jsonl(file, |at, parsed| match parsed {
        Ok(obj) => {
            out.push((at, obj));
            Next::More
        }
        Err(e) => {
            first_bad = Some(e);
            Next::Stop
        }
    })?;
    match first_bad {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Calls `each` with every non-blank line parsed as a JSON object, or why it is not one,
/// until it says `Stop`. Err only when the file cannot be read as text.
pub(super) fn for_each_jsonl<'a>(
    file: &'a Path,
    mut each: impl FnMut(At<'a>, Result<Map<String, Value>, InputError>) -> Next,
) -> Result<(), InputError> {
    for_each_line(file, |number, line| {
        let at = At { file, line: number };
        if line.trim().is_empty() {
            return Ok(Next::More);
        }
        Ok(each(
            at,
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(obj)) => Ok(obj),
                Ok(_) => Err(at.err("", "each line must be a JSON object")),
                Err(e) => Err(at.err("", format!("malformed JSON: {e}"))),
            },
        ))
    })
}

/// `timestamp` in ms, kept to the millisecond (the schedule's unit); values too large to be
/// milliseconds are refused with a hint.
pub(super) fn timestamp_ms_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
) -> Result<Option<u64>, InputError> {
    if let Some(v) = obj.get("timestamp").and_then(Value::as_f64)
        && v >= MAX_TIMESTAMP_MS as f64
    {
        return Err(at.err(
            &format!("{prefix}timestamp"),
            format!(
                "{v} is not a time in milliseconds (it would be after the year 2286); \
                 give ms since the trace's start or since the epoch (epoch microseconds / 1000, nanoseconds / 1000000)"
            ),
        ));
    }
    Ok(ms_field(at, obj, prefix, "timestamp")?.map(|ms| ms.round() as u64))
}

/// `text` (a string) or `texts` (a list of strings, or of `{"name", "contents": [...]}`
/// groups), never both. Same for `image` / `images`.
pub(super) fn one_or_many(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
    one: &str,
    many: &str,
) -> Result<Vec<String>, InputError> {
    match (obj.get(one), obj.get(many)) {
        (Some(_), Some(_)) => Err(at.err(
            &format!("{prefix}{one}"),
            format!("give either '{one}' or '{many}', not both"),
        )),
        (Some(v), None) => match v {
            Value::String(s) => Ok(vec![s.clone()]),
            _ => Err(at.err(&format!("{prefix}{one}"), "must be a string")),
        },
        (None, Some(v)) => {
            let field = format!("{prefix}{many}");
            let Some(items) = v.as_array() else {
                return Err(at.err(&field, "must be a list"));
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    Value::Object(group) => match group.get("contents").and_then(Value::as_array) {
                        Some(contents) => {
                            for c in contents {
                                match c.as_str() {
                                    Some(s) => out.push(s.to_string()),
                                    None => {
                                        return Err(at.err(
                                            &format!("{field}[{i}].contents"),
                                            "must be a list of strings",
                                        ));
                                    }
                                }
                            }
                        }
                        None => {
                            return Err(at.err(
                                &format!("{field}[{i}]"),
                                "must be a string or {\"name\", \"contents\": [...]}",
                            ));
                        }
                    },
                    _ => return Err(at.err(&format!("{field}[{i}]"), "must be a string")),
                }
            }
            Ok(out)
        }
        (None, None) => Ok(Vec::new()),
    }
}

pub(super) fn str_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<String>, InputError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        // Session ids are often numbers in traces.
        Some(Value::Number(n)) if key == "session_id" => Ok(Some(n.to_string())),
        Some(_) => Err(at.err(&format!("{prefix}{key}"), "must be a string")),
    }
}

/// `output_length`: 1 or more tokens, the rule `--output-tokens-mean` follows too (a
/// request for no output measures nothing, and servers read 0 differently).
pub(super) fn output_length_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
) -> Result<Option<u64>, InputError> {
    match u64_field(at, obj, prefix, "output_length")? {
        Some(n) if n == 0 || n > crate::dataset::MAX_OUTPUT_TOKENS => Err(at.err(
            &format!("{prefix}output_length"),
            format!(
                "{n} is not allowed; give 1 to {} tokens, or leave it out to use --output-tokens-mean",
                crate::dataset::MAX_OUTPUT_TOKENS
            ),
        )),
        n => Ok(n),
    }
}

/// `delay` in ms before the turn is sent, at most a year.
pub(super) fn delay_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
) -> Result<Option<Duration>, InputError> {
    if let Some(v) = obj.get("delay").and_then(Value::as_f64)
        && v > MAX_SPAN_MS as f64
    {
        return Err(at.err(
            &format!("{prefix}delay"),
            format!("{v} is not allowed; give milliseconds from 0 to {MAX_SPAN_MS} (one year)"),
        ));
    }
    Ok(ms_field(at, obj, prefix, "delay")?.map(|ms| Duration::from_secs_f64(ms / 1e3)))
}

pub(super) fn u64_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<u64>, InputError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().or_else(|| {
            // Whole-valued floats (e.g. 1200.0 ms) are accepted.
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e18)
                .map(|f| f as u64)
        }) {
            Some(n) => Ok(Some(n)),
            None => Err(at.err(
                &format!("{prefix}{key}"),
                format!("must be a whole number >= 0, not {v}"),
            )),
        },
    }
}

/// A time in milliseconds: a number >= 0, fractions allowed.
pub(super) fn ms_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Option<f64>, InputError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64().filter(|f| f.is_finite() && *f >= 0.0) {
            Some(ms) => Ok(Some(ms)),
            None => Err(at.err(
                &format!("{prefix}{key}"),
                format!("must be a number of milliseconds >= 0, not {v}"),
            )),
        },
    }
}

pub(super) fn u64_list_field(
    at: At,
    obj: &Map<String, Value>,
    key: &str,
) -> Result<Vec<u64>, InputError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| at.err(key, "must be a list of whole numbers >= 0"))
            })
            .collect(),
        Some(_) => Err(at.err(key, "must be a list of whole numbers >= 0")),
    }
}

pub(super) fn object_field(
    at: At,
    obj: &Map<String, Value>,
    prefix: &str,
    key: &str,
) -> Result<Map<String, Value>, InputError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(at.err(&format!("{prefix}{key}"), "must be a JSON object")),
    }
}
