//! `mooncake_trace` rows: each row checked once (`trace_row`) for the loader and for
//! `aiperf validate` (`check_mooncake_file`), its own request (`messages` or `payload`), and
//! the rule that a session's rows are all of one kind.

use super::*;

/// A `mooncake_trace` row, checked as `--input-file` checks it.
#[derive(Debug)]
pub struct TraceRow {
    pub session_id: Option<String>,
    /// Tokens of a synthetic prompt; None for a `text_input`, `messages` or `payload` row.
    pub input_length: Option<u64>,
    pub hash_ids: Vec<u64>,
    pub text_input: Option<String>,
    pub output_length: Option<u64>,
    pub timestamp_ms: Option<u64>,
    pub delay: Option<Duration>,
    pub extra: Map<String, Value>,
    pub own: Option<OwnRequest>,
}

/// Checks one trace row: its fields' types and ranges, that it gives one kind of input, that
/// its hash ids fit its input length in blocks of `block_size` tokens, and that its session's
/// rows are all of one kind (`modes` holds what earlier rows said).
pub(super) fn trace_row(
    at: At,
    obj: &Map<String, Value>,
    blocks: Blocks,
    modes: &mut SessionModes,
) -> Result<TraceRow, InputError> {
    let session_id = str_field(at, obj, "", "session_id")?;
    let mut extra = object_field(at, obj, "", "extra")?;
    let own = trace_own_request(at, obj)?;
    modes.check(at, session_id.as_deref(), own.as_ref(), obj, &mut extra)?;
    let (mut input_length, mut hash_ids, mut text_input) = (None, Vec::new(), None);
    match (obj.get("text_input"), obj.get("input_length")) {
        _ if own.is_some() => {
            if let Some(other) = ["text_input", "input_length"]
                .into_iter()
                .find(|f| obj.contains_key(*f))
            {
                return Err(at.err(
                    other,
                    "give one of messages, payload or input_length/text_input",
                ));
            }
        }
        (Some(_), Some(_)) => {
            return Err(at.err(
                "text_input",
                "give either text_input or input_length, not both",
            ));
        }
        (Some(_), None) => {
            let text = str_field(at, obj, "", "text_input")?.unwrap_or_default();
            if text.is_empty() {
                return Err(at.err("text_input", "is empty"));
            }
            text_input = Some(text);
        }
        (None, Some(_)) => {
            let len = u64_field(at, obj, "", "input_length")?.unwrap_or(0);
            if len == 0 || len > crate::dataset::MAX_INPUT_TOKENS {
                return Err(at.err(
                    "input_length",
                    format!(
                        "{len} is not allowed; give 1 to {} tokens",
                        crate::dataset::MAX_INPUT_TOKENS
                    ),
                ));
            }
            hash_ids = u64_list_field(at, obj, "hash_ids")?;
            check_blocks_fit(at, len, hash_ids.len(), blocks)?;
            input_length = Some(len);
        }
        (None, None) => {
            return Err(at.err(
                "",
                "no content; give input_length, text_input, messages or payload",
            ));
        }
    }
    Ok(TraceRow {
        session_id,
        input_length,
        hash_ids,
        text_input,
        output_length: output_length_field(at, obj, "")?,
        timestamp_ms: timestamp_ms_field(at, obj, "")?,
        delay: delay_field(at, obj, "")?,
        extra,
        own,
    })
}

/// A trace's block size: tokens per hash id, and the flag that sets it.
#[derive(Debug, Clone, Copy)]
pub struct Blocks {
    pub size: usize,
    pub flag: &'static str,
}

/// Every hash id but the last stands for `blocks.size` tokens, the last for the rest: 1 to
/// `blocks.size` of them.
fn check_blocks_fit(at: At, len: u64, ids: usize, blocks: Blocks) -> Result<(), InputError> {
    let Blocks {
        size: block_size,
        flag,
    } = blocks;
    if ids == 0 {
        return Ok(());
    }
    let last = len as i64 - ((ids - 1) * block_size) as i64;
    if last <= 0 || last as usize > block_size {
        return Err(at.err(
            "hash_ids",
            format!(
                "{ids} ids do not fit input_length {len} with blocks of {block_size} tokens \
                 (the last block would have {last}); check {flag}"
            ),
        ));
    }
    Ok(())
}

/// A whole `mooncake_trace` file checked row by row, going on past bad rows.
#[derive(Debug, Default)]
pub struct TraceCheck {
    /// Non-blank lines.
    pub lines: usize,
    /// The good rows, in file order.
    pub rows: Vec<TraceRow>,
    /// Each bad line's first problem (`file:line: field 'f': what`), then the file's own
    /// (no rows; a schedule longer than a year).
    pub problems: Vec<InputError>,
    /// Fields `--input-file` ignores, and the `file:line` of the first.
    pub unknown_fields: Vec<String>,
    pub first_unknown: Option<String>,
}

/// Reads a `mooncake_trace` file as `--input-file` with `--custom-dataset-type
/// mooncake_trace` reads it, but reports every bad line instead of stopping at the first.
/// Err when the file cannot be read at all (missing, not text).
pub fn check_mooncake_file(file: &Path, blocks: Blocks) -> Result<TraceCheck, InputError> {
    let mut check = TraceCheck::default();
    let mut modes = SessionModes::default();
    let mut unknown = BTreeSet::new();
    let mut stamps = Vec::new();
    for_each_jsonl(file, |at, parsed| {
        check.lines += 1;
        let row = parsed.and_then(|obj| {
            for key in obj
                .keys()
                .filter(|k| !MOONCAKE_FIELDS.contains(&k.as_str()))
            {
                check
                    .first_unknown
                    .get_or_insert_with(|| format!("{}:{}", at.file.display(), at.line));
                unknown.insert(key.clone());
            }
            trace_row(at, &obj, blocks, &mut modes)
        });
        match row {
            Ok(row) => {
                if let Some(t) = row.timestamp_ms {
                    stamps.push((at.line, t));
                }
                check.rows.push(row);
            }
            Err(e) => check.problems.push(e),
        }
        Next::More
    })?;
    if check.lines == 0 {
        check.problems.push(no_entries(file));
    }
    if let Err(e) = check_schedule_span(file, &stamps) {
        check.problems.push(e);
    }
    check.unknown_fields = unknown.into_iter().collect();
    Ok(check)
}

/// A trace row's `payload` (a whole request body, alone) or `messages`.
fn trace_own_request(at: At, obj: &Map<String, Value>) -> Result<Option<OwnRequest>, InputError> {
    let Some(payload) = obj.get("payload").filter(|v| !v.is_null()) else {
        return Ok(trace_messages(at, obj)?.map(OwnRequest::Messages));
    };
    let Some(payload) = payload.as_object().filter(|p| !p.is_empty()) else {
        return Err(at.err(
            "payload",
            "must be a request body object, e.g. {\"model\": \"m\", \"messages\": [...]}",
        ));
    };
    for other in ["messages", "tools", "message_mode"] {
        if obj.get(other).is_some_and(|v| !v.is_null()) {
            return Err(at.err(
                other,
                "does not go with payload: the payload is the whole body; put it inside the payload",
            ));
        }
    }
    Ok(Some(OwnRequest::Payload(payload.clone())))
}

/// The texts a row's own request sends: its messages' (a payload's `messages`, or its
/// `prompt`).
pub(in crate::dataset) fn own_text(own: &OwnRequest) -> String {
    match own {
        OwnRequest::Messages(m) => messages_text(&m.list),
        OwnRequest::Payload(p) => match (p.get("messages"), p.get("prompt")) {
            (Some(Value::Array(list)), _) => messages_text(list),
            (_, Some(Value::String(prompt))) => prompt.clone(),
            _ => String::new(),
        },
        OwnRequest::Prompt => String::new(),
    }
}

/// A trace row's `messages` (with `message_mode`, and `tools` only beside them), checked:
/// a non-empty list of objects, each with a string `role`.
fn trace_messages(at: At, obj: &Map<String, Value>) -> Result<Option<ChatMessages>, InputError> {
    let delta = match obj.get("message_mode") {
        None | Some(Value::Null) => false,
        Some(Value::String(m)) if m == "history" => false,
        Some(Value::String(m)) if m == "delta" => true,
        Some(other) => {
            return Err(at.err(
                "message_mode",
                format!("{other} is not a mode; give \"history\" or \"delta\""),
            ));
        }
    };
    let Some(list) = obj.get("messages").filter(|v| !v.is_null()) else {
        if delta {
            return Err(at.err("message_mode", "needs a messages list on the same line"));
        }
        if obj.get("tools").is_some_and(|v| !v.is_null()) {
            return Err(at.err("tools", "needs a messages list on the same line"));
        }
        return Ok(None);
    };
    let Some(list) = list.as_array().filter(|l| !l.is_empty()) else {
        return Err(at.err(
            "messages",
            "must be a non-empty list of message objects, e.g. [{\"role\": \"user\", \"content\": \"Hi\"}]",
        ));
    };
    for (i, m) in list.iter().enumerate() {
        if !m.get("role").is_some_and(Value::is_string) {
            return Err(at.err(
                &format!("messages[{i}]"),
                "must be an object with a string 'role' (system, user, assistant or tool)",
            ));
        }
        match m.get("content") {
            None | Some(Value::Null | Value::String(_) | Value::Array(_)) => {}
            Some(_) => {
                return Err(at.err(
                    &format!("messages[{i}].content"),
                    "must be a string or a list of content parts",
                ));
            }
        }
    }
    if let Some(tools) = obj.get("tools").filter(|v| !v.is_null())
        && !tools.is_array()
    {
        return Err(at.err("tools", "must be a list of tool definitions"));
    }
    Ok(Some(ChatMessages {
        list: list.clone(),
        delta,
    }))
}

/// The texts of a messages list joined by spaces (string contents and `text` parts): what
/// its input length counts.
fn messages_text(messages: &[Value]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for m in messages {
        match m.get("content") {
            Some(Value::String(s)) => parts.push(s),
            Some(Value::Array(items)) => parts.extend(
                items
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str)),
            ),
            _ => {}
        }
    }
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// How a trace row makes its request; the rows of a session all make theirs one way.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RowKind {
    /// `input_length` or `text_input`.
    Prompt,
    /// `messages`, sent verbatim.
    History,
    /// `messages` added to the live conversation.
    Delta,
    Payload,
}

impl RowKind {
    fn of(own: Option<&OwnRequest>) -> RowKind {
        match own {
            None | Some(OwnRequest::Prompt) => RowKind::Prompt,
            Some(OwnRequest::Messages(m)) if m.delta => RowKind::Delta,
            Some(OwnRequest::Messages(_)) => RowKind::History,
            Some(OwnRequest::Payload(_)) => RowKind::Payload,
        }
    }

    fn name(self) -> &'static str {
        match self {
            RowKind::Prompt => "an input_length/text_input row",
            RowKind::History => "a messages row (message_mode history)",
            RowKind::Delta => "a messages row (message_mode delta)",
            RowKind::Payload => "a payload row",
        }
    }
}

/// Per session: how its first row made its request (a session may not mix kinds), and the
/// tools its delta rows last declared, which later delta rows inherit.
#[derive(Default)]
pub(super) struct SessionModes {
    by_id: HashMap<String, (RowKind, usize, Option<Value>)>,
}

impl SessionModes {
    /// Checks the row's mode against its session's and puts the row's `tools` (or, for a
    /// delta row without them, the session's last ones) into its body fields.
    fn check(
        &mut self,
        at: At,
        session_id: Option<&str>,
        own: Option<&OwnRequest>,
        obj: &Map<String, Value>,
        extra: &mut Map<String, Value>,
    ) -> Result<(), InputError> {
        let kind = RowKind::of(own);
        let delta = kind == RowKind::Delta;
        if delta && extra.contains_key("messages") {
            return Err(at.err(
                "extra",
                "may not hold 'messages' in a delta session: it would replace the conversation",
            ));
        }
        let own_tools = obj.get("tools").filter(|v| !v.is_null()).cloned();
        let tools = match session_id {
            None => own_tools,
            Some(id) => {
                let seen = self
                    .by_id
                    .entry(id.to_string())
                    .or_insert((kind, at.line, None));
                if seen.0 != kind {
                    let field = match (kind, seen.0) {
                        (RowKind::History | RowKind::Delta, RowKind::History | RowKind::Delta) => {
                            "message_mode"
                        }
                        _ => "session_id",
                    };
                    return Err(at.err(
                        field,
                        format!(
                            "this is {} but line {} of session '{id}' is {}; the rows of a session must all be of one kind (and one message_mode)",
                            kind.name(),
                            seen.1,
                            seen.0.name()
                        ),
                    ));
                }
                if own_tools.is_some() {
                    seen.2 = own_tools.clone();
                }
                if delta { seen.2.clone() } else { own_tools }
            }
        };
        if let Some(tools) = tools {
            // The row's own `extra` still wins, as for every other body field.
            extra.entry("tools").or_insert(tools);
        }
        Ok(())
    }
}
