//! The response half: one parser for the OpenAI response shapes (chat chunks, chat
//! completions, text completions), a typed read with a plain byte scan in front of it for
//! the common chunks, and a lenient read for anything else.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::record::Usage;

/// What one response event (an SSE `data:` payload, or a whole non-streamed body) carried.
#[derive(Debug, Default, PartialEq)]
pub struct ParsedEvent<'a> {
    pub text: Option<Cow<'a, str>>,
    pub reasoning: Option<Cow<'a, str>>,
    /// Boxed: a stream carries it once (every chunk only with vLLM's continuous usage
    /// stats, where the small allocation is little next to that chunk's scan), and inline
    /// it made every event 184 bytes, past what the compiler moves without `memcpy` calls.
    pub usage: Option<Box<Usage>>,
    /// An error object sent inside the stream (`{"error": {...}}`).
    pub error: Option<String>,
    /// Why some of the payload was skipped: a field of an unexpected type (e.g. `content: 5`
    /// or `choices: null`); what had the expected shape was still taken.
    pub unexpected: Option<String>,
    /// The stream's closing event (`response.completed`, `message_stop`): like `[DONE]`.
    pub end: bool,
    /// Results that are not text: embedding vectors, ranked passages, images.
    pub items: u64,
    /// Generated images among `items`.
    pub images: u64,
}

// Events are returned by value through several calls a chunk; up to 128 bytes the
// compiler moves them with a few register stores instead of a `memcpy` call.
const _: () = assert!(std::mem::size_of::<ParsedEvent>() <= 128);

impl ParsedEvent<'_> {
    /// True when the event carries text or reasoning (a token-bearing event), or results
    /// that are not text.
    pub fn has_content(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.reasoning.as_deref().is_some_and(|t| !t.is_empty())
            || self.items > 0
    }
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(default, borrow)]
    choices: FirstChoice<'a>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    /// A transcription's whole answer (`{"text": ...}`, no choices).
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// `choices`, keeping only the first (all are type-checked, as a `Vec` would be, so a
/// malformed later choice still sends the payload to `lenient`): no allocation per chunk.
#[derive(Default)]
struct FirstChoice<'a>(Option<WireChoice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Choices<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Choices<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<FirstChoice<'a>, A::Error> {
                let first = seq.next_element::<WireChoice<'a>>()?;
                while seq.next_element::<WireChoice<'a>>()?.is_some() {}
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_seq(Choices(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    message: Option<WireMessage<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    reasoning_tokens: Option<u64>,
}

/// Parses one OpenAI response payload. Only the fields the metrics need are read. Valid
/// JSON of an unexpected shape is not an error: what has the expected shape is taken (see
/// `lenient`). Only invalid JSON is.
pub fn parse_event(data: &[u8]) -> Result<ParsedEvent<'_>, serde_json::Error> {
    if let Some(event) = plain::scan(data) {
        return Ok(event);
    }
    typed_or_lenient(data)
}

/// `parse_event` for the next payload of a stream whose earlier ones left `lead`.
pub fn parse_event_after<'a>(
    data: &'a [u8],
    lead: &mut StreamLead,
) -> Result<ParsedEvent<'a>, serde_json::Error> {
    if let Some(event) = plain::scan_after(data, lead) {
        return Ok(event);
    }
    typed_or_lenient(data)
}

pub use plain::StreamLead;

/// serde's typed read of a payload, or, for valid JSON of another shape, `lenient`'s.
fn typed_or_lenient(data: &[u8]) -> Result<ParsedEvent<'_>, serde_json::Error> {
    match serde_json::from_slice::<WireEvent<'_>>(data) {
        Ok(wire) => Ok(from_wire(wire)),
        Err(e) if e.is_data() => {
            let value: Value = serde_json::from_slice(data)?;
            let mut out = lenient(&value);
            out.unexpected = Some(e.to_string());
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

mod plain;

/// The typed fast path's result.
fn from_wire(wire: WireEvent<'_>) -> ParsedEvent<'_> {
    let mut out = ParsedEvent::default();
    if let Some(choice) = wire.choices.0 {
        let msg = choice.delta.or(choice.message);
        if let Some(m) = msg {
            out.text = m.content;
            out.reasoning = m.reasoning_content.or(m.reasoning);
        }
        if out.text.is_none() {
            out.text = choice.text;
        }
    }
    if out.text.is_none() {
        out.text = wire.text;
    }
    out.usage = wire.usage.map(|u| {
        Box::new(Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        })
    });
    out.error = wire.error.as_ref().and_then(error_message);
    out
}

/// The message of an `error` field (its `message`, or the whole value), unless null.
pub(super) fn error_message(e: &Value) -> Option<String> {
    match e {
        Value::Null => None,
        Value::Object(o) => Some(
            o.get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string()),
        ),
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The slow path for payloads the typed parse rejected: each field is read on its own and
/// skipped when its type is wrong; token counts sent as strings (`"12"`) are read as
/// numbers.
pub(super) fn lenient(v: &Value) -> ParsedEvent<'static> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| Cow::Owned(s.to_string()));
    let mut out = ParsedEvent::default();
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    if let Some(choice) = choice {
        let msg = [choice.get("delta"), choice.get("message")]
            .into_iter()
            .flatten()
            .find(|m| m.is_object());
        if let Some(m) = msg {
            out.text = text(m.get("content"));
            out.reasoning = text(m.get("reasoning_content")).or_else(|| text(m.get("reasoning")));
        }
        if out.text.is_none() {
            out.text = text(choice.get("text"));
        }
    }
    if out.text.is_none() {
        out.text = text(v.get("text"));
    }
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let count = |v: Option<&Value>| match v? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let details = u.get("completion_tokens_details");
        out.usage = Some(Box::new(Usage {
            prompt_tokens: count(u.get("prompt_tokens")),
            completion_tokens: count(u.get("completion_tokens")),
            total_tokens: count(u.get("total_tokens")),
            reasoning_tokens: count(details.and_then(|d| d.get("reasoning_tokens"))),
        }));
    }
    out.error = v.get("error").and_then(error_message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_chunk_with_content() {
        let e = parse_event(br#"{"id":"x","choices":[{"index":0,"delta":{"content":" the"},"finish_reason":null}]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some(" the"));
        assert!(e.has_content());
        assert_eq!(e.usage, None);
    }

    #[test]
    fn role_only_and_usage_only_chunks_have_no_content() {
        let role =
            parse_event(br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#).unwrap();
        assert!(!role.has_content());
        let usage = parse_event(
            br#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        )
        .unwrap();
        assert!(!usage.has_content());
        assert_eq!(
            usage.usage.as_deref(),
            Some(&Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(3),
                total_tokens: Some(13),
                reasoning_tokens: Some(1)
            })
        );
    }

    #[test]
    fn unexpected_shapes_keep_what_fits() {
        // Token counts as strings: read as numbers; the content still counts.
        let e = parse_event(
            br#"{"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":"7","completion_tokens":2,"total_tokens":null}}"#,
        )
        .unwrap();
        assert_eq!(e.text.as_deref(), Some("hi"));
        let u = e.usage.as_deref().unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (Some(7), Some(2), None)
        );
        assert!(
            e.unexpected.as_deref().unwrap().contains("invalid type"),
            "{e:?}"
        );
        // `choices: null` and `content: 5`: nothing usable, but not an error.
        for data in [
            br#"{"choices":null}"#.as_slice(),
            br#"{"choices":[{"delta":{"content":5}}]}"#,
            br#"{"choices":[{"message":"x"}]}"#,
            br#"[1,2]"#,
        ] {
            let e = parse_event(data).unwrap();
            assert!(
                !e.has_content() && e.usage.is_none() && e.error.is_none(),
                "{e:?}"
            );
            assert!(e.unexpected.is_some(), "{e:?}");
        }
        // Reasoning of the right type next to content of the wrong one is kept.
        let e = parse_event(br#"{"choices":[{"delta":{"content":[],"reasoning_content":"r"}}]}"#)
            .unwrap();
        assert_eq!((e.text, e.reasoning.as_deref()), (None, Some("r")));
        // The typed path notes nothing.
        assert_eq!(parse_event(br#"{"choices":[]}"#).unwrap().unexpected, None);
    }

    #[test]
    fn only_the_first_choice_is_read_but_every_choice_is_checked() {
        let e =
            parse_event(br#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}"#)
                .unwrap();
        assert_eq!((e.text.as_deref(), e.unexpected), (Some("a"), None));
        // A later choice of the wrong type sends the payload to the lenient read, which
        // still takes the first.
        let e = parse_event(br#"{"choices":[{"delta":{"content":"a"}},5]}"#).unwrap();
        assert_eq!(e.text.as_deref(), Some("a"));
        assert_eq!(
            e.unexpected.as_deref(),
            Some("invalid type: integer `5`, expected struct WireChoice at line 1 column 39")
        );
        let e = parse_event(br#"{"choices":null}"#).unwrap();
        assert_eq!(
            e.unexpected.as_deref(),
            Some("invalid type: null, expected a sequence at line 1 column 15")
        );
    }

    #[test]
    fn reasoning_escapes_completions_and_errors() {
        let r =
            parse_event(br#"{"choices":[{"delta":{"reasoning_content":"hm\n\"q\""}}]}"#).unwrap();
        assert_eq!(r.reasoning.as_deref(), Some("hm\n\"q\""));
        assert!(r.has_content());
        let c = parse_event(br#"{"choices":[{"text":"abc","index":0}]}"#).unwrap();
        assert_eq!(c.text.as_deref(), Some("abc"));
        let m = parse_event(br#"{"choices":[{"message":{"role":"assistant","content":"full"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#).unwrap();
        assert_eq!(m.text.as_deref(), Some("full"));
        let err = parse_event(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert_eq!(err.error.as_deref(), Some("boom"));
        assert!(parse_event(b"{not json").is_err());
    }

    /// serde's typed read of `data`, as `parse_event` took it before the plain scan.
    fn typed(data: &[u8]) -> Option<ParsedEvent<'_>> {
        serde_json::from_slice::<WireEvent<'_>>(data)
            .ok()
            .map(from_wire)
    }

    #[test]
    fn the_plain_scan_takes_common_chunks_as_serde_does() {
        for data in [
            br#"{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1796452627,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#.as_slice(),
            br#"{"id":"c","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#,
            br#" {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"completion_tokens_details":{"reasoning_tokens":1}}} "#,
            br#"{"choices":[{"message":{"role":"assistant","content":"full","tool_calls":[]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":null}}"#,
            br#"{"choices":[{"text":"abc","index":0,"logprobs":{"a":[1.5e3,-2,true,false]}}],"error":null}"#,
            br#"{"choices":[{"delta":{"reasoning":"r","content":null}},{"delta":{}}],"text":"t"}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"é 日本\"}}]}".as_bytes(),
        ] {
            let fast = plain::scan(data);
            assert!(fast.is_some(), "{}", String::from_utf8_lossy(data));
            assert_eq!(fast, typed(data), "{}", String::from_utf8_lossy(data));
        }
        // Left to serde: escapes, other types, repeated fields, a non-null error, bad JSON.
        for data in [
            br#"{"choices":[{"delta":{"content":"a\nb"}}]}"#.as_slice(),
            br#"{"choices":[{"delta":{"content":5}}]}"#,
            br#"{"choices":null}"#,
            br#"{"choices":[],"choices":[]}"#,
            br#"{"error":{"message":"boom"}}"#,
            br#"{"usage":{"prompt_tokens":"7"}}"#,
            br#"{"usage":{"prompt_tokens":1.0}}"#,
            br#"{"usage":{"prompt_tokens":18446744073709551616}}"#,
            br#"{"choices":[],}"#,
            br#"{"id":01}"#,
            br#"[1,2]"#,
            b"{not json",
        ] {
            assert!(
                plain::scan(data).is_none(),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }

    #[test]
    fn a_stream_scans_the_fields_its_chunks_repeat_once() {
        let lead = r#"{"id":"chatcmpl-5","object":"chat.completion.chunk","created":1796452627,"model":"m","#;
        let first = format!(
            r#"{lead}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}}}}]}}"#
        );
        let mut stream = StreamLead::default();
        let scanned = plain::scan_after(first.as_bytes(), &mut stream);
        assert!(scanned.is_some());
        assert_eq!(scanned, plain::scan(first.as_bytes()));
        assert_eq!(stream.lead_bytes(), lead.as_bytes());
        // Later chunks go on after the lead and read as they do alone; what the scan
        // leaves to serde still goes there.
        for rest in [
            r#""choices":[{"index":0,"delta":{"content":" the"}}]}"#,
            r#""choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#,
            r#""choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#""choices":[{"delta":{"content":5}}]}"#,
            r#""choices":[],}"#,
            r#""choices":[]} x"#,
            r#""choices":[],"id":"other"}"#,
        ] {
            let data = format!("{lead}{rest}");
            let alone = plain::scan(data.as_bytes());
            assert_eq!(
                plain::scan_after(data.as_bytes(), &mut stream),
                alone,
                "{data}"
            );
            assert_eq!(
                parse_event_after(data.as_bytes(), &mut stream).ok(),
                parse_event(data.as_bytes()).ok(),
                "{data}"
            );
            assert_eq!(stream.lead_bytes(), lead.as_bytes());
        }
        // A chunk that starts otherwise is scanned whole and leaves its own lead; one whose
        // first field is read leaves none.
        let other = br#"{"id":"chatcmpl-6","choices":[{"delta":{"content":"x"}}]}"#;
        assert_eq!(plain::scan_after(other, &mut stream), plain::scan(other));
        assert_eq!(stream.lead_bytes(), br#"{"id":"chatcmpl-6","#);
        let bare = br#"{"choices":[{"delta":{"content":"x"}}],"id":"chatcmpl-6"}"#;
        assert_eq!(plain::scan_after(bare, &mut stream), plain::scan(bare));
        assert!(stream.lead_bytes().is_empty());
    }

    #[test]
    fn a_chunk_that_differs_only_in_its_text_reads_through_the_hole() {
        let lead = br#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","#;
        let chunk = |middle: &[u8]| {
            let mut data = lead.to_vec();
            data.extend_from_slice(br#""choices":[{"index":0,"delta":{"content":""#);
            data.extend_from_slice(middle);
            data.extend_from_slice(br#""},"finish_reason":null}]}"#);
            data
        };
        let read_as_alone = |data: &[u8], stream: &mut StreamLead| {
            assert_eq!(
                plain::scan_after(data, stream),
                plain::scan(data),
                "{}",
                String::from_utf8_lossy(data)
            );
        };
        let mut stream = StreamLead::default();
        // A chunk with its text leaves the hole; one without (role only) none.
        let role = [
            lead.as_slice(),
            br#""choices":[{"delta":{"role":"assistant"}}]}"#,
        ]
        .concat();
        read_as_alone(&role, &mut stream);
        assert!(!stream.has_hole());
        read_as_alone(&chunk(b" the"), &mut stream);
        assert!(stream.has_hole());
        // Other texts, plain or not, and strings that end early or carry the suffix: each
        // reads as it does alone.
        for middle in [
            b"".as_slice(),
            b" quick",
            "\u{e9}\u{4e2d}\u{1f600}".as_bytes(),
            b"\xff",
            b"\xe4\xb8",
            br#"a\"b"#,
            b"a\\nb",
            b"a\nb",
            br#"x"},"finish_reason":null}]}"#,
            br#"x"},"finish_reason":null}]}""#,
            br#"x","role":"assistant"#,
            br#"""#,
        ] {
            read_as_alone(&chunk(middle), &mut stream);
            assert_eq!(stream.lead_bytes(), lead);
        }
        // Reasoning fills a hole as content does, and usage read beside a text comes back.
        for rest in [
            br#""choices":[{"delta":{"reasoning_content":"hm"}}]}"#.as_slice(),
            br#""choices":[{"delta":{"reasoning_content":"so"}}]}"#,
            br#""choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":3}}"#,
            br#""choices":[{"delta":{"content":"bc"}}],"usage":{"prompt_tokens":3}}"#,
            br#""choices":[{"delta":{"content":"bc"}}],"usage":{"prompt_tokens":4}}"#,
        ] {
            read_as_alone(&[lead.as_slice(), rest].concat(), &mut stream);
            assert!(stream.has_hole());
        }
        // Two texts leave no hole.
        let both = br#""choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#;
        read_as_alone(&[lead.as_slice(), both].concat(), &mut stream);
        assert!(stream.has_hole(), "the hole before stays");
        let whole = br#"{"choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#;
        read_as_alone(whole, &mut stream);
        assert!(!stream.has_hole());
    }

    /// Up to `max` bytes as a string's may be: mostly printable ASCII, some bytes of
    /// non-ASCII characters (or not UTF-8 at all), and the bytes that end a plain run.
    fn string_bytes(max: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            proptest::prop_oneof![
                12 => 0x20u8..0x7f,
                4 => 0x80u8..=0xff,
                1 => proptest::prelude::Just(b'"'),
                1 => proptest::prelude::Just(b'\\'),
                1 => 0u8..0x20,
            ],
            0..max,
        )
    }

    /// A JSON-like text from pieces of chat chunks: often well-formed, sometimes not.
    fn chunkish() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("choices"),
            Just("delta"),
            Just("message"),
            Just("content"),
            Just("reasoning"),
            Just("reasoning_content"),
            Just("text"),
            Just("usage"),
            Just("prompt_tokens"),
            Just("completion_tokens"),
            Just("total_tokens"),
            Just("completion_tokens_details"),
            Just("reasoning_tokens"),
            Just("error"),
            Just("id"),
            Just("index"),
        ];
        let leaf = prop_oneof![
            Just("null"),
            Just("true"),
            Just("false"),
            Just("0"),
            Just("7"),
            Just("-3"),
            Just("1.5"),
            Just("2e3"),
            Just("01"),
            Just("18446744073709551615"),
            Just("18446744073709551616"),
            Just("\"\""),
            Just("\" the\""),
            Just("\"a\\nb\""),
            Just("\"\\u00e9\""),
            Just("\"é\""),
            Just("\"\\q\""),
        ]
        .prop_map(str::to_string);
        let value = leaf.prop_recursive(5, 48, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec((key.clone(), inner, any::<bool>()), 0..4).prop_map(
                    |v| {
                        let fields: Vec<String> = v
                            .into_iter()
                            .map(|(k, v, sp)| {
                                if sp {
                                    format!(" \"{k}\" :\n{v} ")
                                } else {
                                    format!("\"{k}\":{v}")
                                }
                            })
                            .collect();
                        format!("{{{}}}", fields.join(","))
                    }
                ),
            ]
        });
        (value, any::<u16>(), 0u8..4).prop_map(|(text, at, cut)| {
            let mut bytes = text.into_bytes();
            let at = at as usize % (bytes.len() + 1);
            match cut {
                0 if at < bytes.len() => {
                    bytes.remove(at);
                }
                1 => bytes.insert(at, b','),
                _ => {}
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// The word-at-a-time run end is the first stop byte, as a byte loop finds it.
        #[test]
        fn plain_runs_end_at_the_first_stop_byte(
            bytes in string_bytes(40),
            at in 0usize..8,
        ) {
            let at = at.min(bytes.len());
            let expected = bytes[at..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .map_or(bytes.len(), |i| at + i);
            proptest::prop_assert_eq!(plain::plain_run_end(&bytes, at), expected);
        }

        /// Whatever the plain scan takes, serde's typed read takes too, with the same result.
        #[test]
        fn the_plain_scan_agrees_with_serde(text in chunkish()) {
            let data = text.as_bytes();
            if let Some(fast) = plain::scan(data) {
                proptest::prop_assert_eq!(Some(fast), typed(data), "{}", text);
            }
        }

        /// A stream's payloads, after the same skipped fields or not, read the same after
        /// the earlier ones' lead as alone.
        #[test]
        fn payloads_after_a_lead_read_as_alone(
            fields in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["id", "object", "created", "usage", "text", "error"]),
                    proptest::sample::select(vec!["\"x\"", "7", "17", "null", "1.5", "\"a\\nb\"", "{}"]),
                ),
                0..4,
            ),
            tails in proptest::collection::vec(chunkish(), 1..5),
        ) {
            let lead: String = fields.iter().map(|(k, v)| format!("\"{k}\":{v},")).collect();
            let mut stream = StreamLead::default();
            for tail in &tails {
                let data = format!("{{{lead}{}", tail.strip_prefix('{').unwrap_or(tail));
                let alone = plain::scan(data.as_bytes());
                proptest::prop_assert_eq!(plain::scan_after(data.as_bytes(), &mut stream), alone, "{}", data);
            }
        }

        /// Payloads that differ from the one before only in one string read through its
        /// hole as they do alone, whatever bytes fill it.
        #[test]
        fn payloads_read_through_a_hole_as_alone(
            tail in chunkish(),
            fills in proptest::collection::vec(string_bytes(12), 1..8),
        ) {
            // The hole: where the tail's one text lies, when the scan reads one, or a text
            // put in front of the tail.
            let tail = tail.into_bytes();
            let text = plain::scan(&tail).and_then(|e| match (e.text, e.reasoning) {
                (Some(t), None) | (None, Some(t)) => Some((t.as_ptr() as usize, t.len())),
                _ => None,
            });
            let (before, after) = match text {
                Some((at, len)) => {
                    let start = at - tail.as_ptr() as usize;
                    (tail[..start].to_vec(), tail[start + len..].to_vec())
                }
                None => (
                    br#"{"text":""#.to_vec(),
                    [br#"","x":"#.as_slice(), &tail, b"}"].concat(),
                ),
            };
            let mut stream = StreamLead::default();
            for fill in &fills {
                let data = [before.as_slice(), fill, &after].concat();
                let alone = plain::scan(&data);
                proptest::prop_assert_eq!(
                    plain::scan_after(&data, &mut stream),
                    alone,
                    "{}",
                    String::from_utf8_lossy(&data)
                );
            }
        }

        /// Well-formed chunks with plain values are taken by the scan itself.
        #[test]
        fn plain_chunks_are_scanned(
            content in proptest::option::of("[ a-z]{0,8}"),
            reasoning in proptest::option::of("[a-z]{0,3}"),
            usage in proptest::option::of((0u64..1000, proptest::prelude::any::<u64>())),
            message in proptest::prelude::any::<bool>(),
        ) {
            let q = |t: &Option<String>| t.as_ref().map_or("null".to_string(), |t| format!("\"{t}\""));
            let usage = usage.map_or("null".to_string(), |(p, c)| {
                format!("{{\"prompt_tokens\":{p},\"completion_tokens\":{c},\"total_tokens\":null}}")
            });
            let text = format!(
                "{{\"id\":\"x\",\"choices\":[{{\"index\":0,\"{}\":{{\"content\":{},\"reasoning_content\":{}}},\"finish_reason\":null}}],\"usage\":{usage}}}",
                if message { "message" } else { "delta" },
                q(&content),
                q(&reasoning),
            );
            let fast = plain::scan(text.as_bytes());
            proptest::prop_assert!(fast.is_some(), "{}", text);
            proptest::prop_assert_eq!(fast, typed(text.as_bytes()), "{}", text);
        }
    }
}
