//! One line of `profile_export.jsonl` as every reader takes it: `aiperf merge` (strict: a
//! bad value is an error naming it), the plots and the HTML report, and the convergence
//! test of repeated runs (both lenient). The line is read without a `Value` tree, strings
//! borrowed from it where they have no escapes; every field may be missing or of another
//! type than written, and each reader decides what that means.

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A field as read: absent (or `null`), a whole non-negative number, another number, or
/// anything else.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Field {
    #[default]
    Missing,
    U64(u64),
    F64(f64),
    Other,
}

impl Field {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Field::U64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_f64(self) -> Option<f64> {
        match self {
            Field::U64(v) => Some(v as f64),
            Field::F64(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Field {
    /// As the JSON spelled it (serde_json's number formatting), for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Missing => f.write_str("null"),
            Field::U64(v) => write!(f, "{v}"),
            Field::F64(v) => write!(f, "{}", serde_json::Value::from(*v)),
            Field::Other => f.write_str("(not a number)"),
        }
    }
}

/// Reads any JSON value into a `Field`, skipping what is not a number.
struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Field, E> {
        Ok(Field::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Field, E> {
        Ok(Field::F64(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Field, E> {
        Ok(Field::F64(v))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Field, E> {
        Ok(Field::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Field, E> {
        Ok(Field::Other)
    }
    fn visit_unit<E>(self) -> Result<Field, E> {
        Ok(Field::Missing)
    }
    fn visit_none<E>(self) -> Result<Field, E> {
        Ok(Field::Missing)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

/// A string field, borrowed from the line unless it has escapes; anything but a string
/// reads as `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_unit<E>(self) -> Result<Text<'a>, E> {
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Text<'_> {
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// The `metadata` fields the readers use.
#[derive(Debug, Default, Deserialize)]
pub struct LineMeta<'a> {
    #[serde(default, borrow)]
    pub benchmark_phase: Text<'a>,
    #[serde(default, borrow)]
    pub x_request_id: Text<'a>,
    #[serde(default, borrow)]
    pub conversation_id: Text<'a>,
    #[serde(default)]
    pub turn_index: Field,
    #[serde(default)]
    pub request_start_ns: Field,
    #[serde(default)]
    pub request_end_ns: Field,
    #[serde(default)]
    pub scheduled_ns: Field,
    #[serde(default)]
    pub slot_wait_ns: Field,
    #[serde(default)]
    pub requested_output_tokens: Field,
    /// The session instance (a conversation can be replayed by several sessions).
    #[serde(default, borrow)]
    pub x_correlation_id: Text<'a>,
    /// The depth-0 session of the agent tree this request belongs to.
    #[serde(default, borrow)]
    pub root_correlation_id: Text<'a>,
    #[serde(default, borrow)]
    pub parent_correlation_id: Text<'a>,
    #[serde(default)]
    pub agent_depth: Field,
    #[serde(default)]
    pub was_cancelled: Flag,
}

/// A boolean field; anything but `true`/`false` reads as `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flag(pub Option<bool>);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(Flag(v.as_bool()))
    }
}

/// One metric's `value`: a number, a list (the inter-chunk latencies: `None` when an
/// element is not a number), absent, or something else.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MetricValue {
    #[default]
    Missing,
    Number(f64),
    List(Option<Vec<f64>>),
    Other,
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MetricValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a metric value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<MetricValue, E> {
                Ok(MetricValue::Number(v))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_unit<E>(self) -> Result<MetricValue, E> {
                Ok(MetricValue::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MetricValue, A::Error> {
                let mut values = Some(Vec::with_capacity(seq.size_hint().unwrap_or(16)));
                while let Some(f) = seq.next_element::<Field>()? {
                    match (f.as_f64(), &mut values) {
                        (Some(v), Some(list)) => list.push(v),
                        _ => values = None,
                    }
                }
                Ok(MetricValue::List(values))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MetricValue::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// `metrics`: each tag (borrowed from the line unless escaped) and its `value`, in the
/// line's order; anything but an object reads as no metrics.
#[derive(Debug, Default)]
pub struct LineMetrics<'a>(pub Vec<(Cow<'a, str>, MetricValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for LineMetrics<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Entry {
            #[serde(default)]
            value: MetricValue,
        }
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = LineMetrics<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of metrics")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineMetrics<'a>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(32));
                while let Some(tag) = map.next_key::<Text<'a>>()? {
                    let value = match map.next_value::<Field2<Entry>>()?.0 {
                        Some(entry) => entry.value,
                        None => MetricValue::Missing,
                    };
                    out.push((tag.0.unwrap_or_default(), value));
                }
                Ok(LineMetrics(out))
            }
            fn visit_unit<E>(self) -> Result<LineMetrics<'a>, E> {
                Ok(LineMetrics::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LineMetrics<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LineMetrics::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A `T` read from an object, or `None` for any other JSON value.
struct Field2<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field2<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Field2<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field2<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Field2(Some(t)))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_unit<E>(self) -> Result<Field2<T>, E> {
                Ok(Field2(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field2<T>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Field2(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The `error` object's fields (`type` renamed: a keyword).
#[derive(Debug, Default, Deserialize)]
pub struct LineError<'a> {
    #[serde(default)]
    pub code: Field,
    #[serde(default, borrow, rename = "type")]
    pub kind: Text<'a>,
    #[serde(default, borrow)]
    pub message: Text<'a>,
}

/// One line. `error` is `Some` when the line has a non-null `error` (its fields as far as
/// it is an object).
#[derive(Debug, Default)]
pub struct RecordLine<'a> {
    pub metadata: LineMeta<'a>,
    pub metrics: LineMetrics<'a>,
    pub error: Option<LineError<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RecordLine<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire<'a> {
            #[serde(default, borrow)]
            metadata: Field2<LineMeta<'a>>,
            #[serde(default, borrow)]
            metrics: LineMetrics<'a>,
            #[serde(default)]
            error: ErrorField<'a>,
        }
        let w = Wire::deserialize(d)?;
        Ok(RecordLine {
            metadata: w.metadata.0.unwrap_or_default(),
            metrics: w.metrics,
            error: w.error.0,
        })
    }
}

impl<T> Default for Field2<T> {
    fn default() -> Self {
        Field2(None)
    }
}

/// `error`: `None` when absent or null; any other value is an error (its fields when it is
/// an object).
#[derive(Default)]
struct ErrorField<'a>(Option<LineError<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for ErrorField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = ErrorField<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error object")
            }
            fn visit_unit<E>(self) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ErrorField<'a>, A::Error> {
                LineError::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|e| ErrorField(Some(e)))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(Some(LineError::default())))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(Some(LineError::default())))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(Some(LineError::default())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(Some(LineError::default())))
            }
            fn visit_str<E>(self, _: &str) -> Result<ErrorField<'a>, E> {
                Ok(ErrorField(Some(LineError::default())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ErrorField<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ErrorField(Some(LineError::default())))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl RecordLine<'_> {
    /// The line belongs to the profiling phase (or says no phase, as a line written before
    /// phases were recorded).
    pub fn is_profiling(&self) -> bool {
        self.metadata
            .benchmark_phase
            .as_str()
            .is_none_or(|p| p == "profiling")
    }

    pub fn is_warmup(&self) -> bool {
        self.metadata.benchmark_phase.as_str() == Some("warmup")
    }
}

/// Parses one line.
pub fn parse(line: &str) -> Result<RecordLine<'_>, serde_json::Error> {
    serde_json::from_str(line)
}

/// Calls `each(line_number, text)` for every non-blank line of `path` (without its line
/// end); stops at the first error `each` or the reading gives.
pub fn for_each_line<E: From<std::io::Error>>(
    path: &Path,
    mut each: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), E> {
    let mut reader = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        number += 1;
        let text = line.strip_suffix('\n').unwrap_or(&line);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if !text.trim().is_empty() {
            each(number, text)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_shape_of_each_field_reads() {
        let line = r#"{"metadata":{"benchmark_phase":"profiling","x_request_id":"r\u0031","request_start_ns":1780000000000000000,"request_end_ns":1e308,"turn_index":"x","slot_wait_ns":null},"metrics":{"ttft":{"value":20.5,"unit":"ms"},"icl":{"value":[1,2.5]},"bad":{"value":[1,"x"]},"s":{"value":"text"},"none":{"unit":"ms"},"n":3},"error":null}"#;
        let r = parse(line).unwrap();
        assert!(r.is_profiling() && !r.is_warmup());
        assert_eq!(r.metadata.x_request_id.as_str(), Some("r1"));
        assert_eq!(
            r.metadata.request_start_ns,
            Field::U64(1_780_000_000_000_000_000)
        );
        assert_eq!(r.metadata.request_end_ns, Field::F64(1e308));
        assert_eq!(r.metadata.request_end_ns.to_string(), "1e+308");
        assert_eq!(r.metadata.turn_index, Field::Other);
        assert_eq!(r.metadata.slot_wait_ns, Field::Missing);
        let m: Vec<(&str, &MetricValue)> = r.metrics.0.iter().map(|(t, v)| (&**t, v)).collect();
        assert_eq!(
            m,
            [
                ("ttft", &MetricValue::Number(20.5)),
                ("icl", &MetricValue::List(Some(vec![1.0, 2.5]))),
                ("bad", &MetricValue::List(None)),
                ("s", &MetricValue::Other),
                ("none", &MetricValue::Missing),
                ("n", &MetricValue::Missing),
            ]
        );
        assert!(r.error.is_none());
        let failed =
            parse(r#"{"metadata":{"benchmark_phase":"warmup"},"error":{"code":500,"type":"E","message":"m"}}"#)
                .unwrap();
        let e = failed.error.unwrap();
        assert_eq!(
            (e.code, e.kind.as_str(), e.message.as_str()),
            (Field::U64(500), Some("E"), Some("m"))
        );
        assert!(failed.metadata.benchmark_phase.as_str() == Some("warmup"));
        assert!(parse(r#"{"error":"boom"}"#).unwrap().error.is_some());
        assert!(parse("{}").unwrap().is_profiling());
        assert!(parse("not json").is_err());
    }
}
