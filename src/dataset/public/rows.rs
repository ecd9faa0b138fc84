//! Dataset rows as a small tree of cells, read from Parquet files (the record API: no Arrow
//! build) or from the elements of a JSON array, so one set of rules reads both.

use std::fs::File;
use std::ops::ControlFlow;
use std::path::Path;

use parquet::file::reader::SerializedFileReader;
use parquet::record::Field;

/// One value of a row. Binary columns keep their bytes (images are sent as stored).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Bool(bool),
    /// A number, in its shortest text form (only compared and shown, never computed on).
    Number(String),
    Text(String),
    Bytes(Vec<u8>),
    List(Vec<Cell>),
    /// A struct (or a map with text keys), fields in schema order.
    Group(Vec<(String, Cell)>),
}

impl Cell {
    /// The field `name` of a group.
    pub fn get(&self, name: &str) -> Option<&Cell> {
        match self {
            Cell::Group(fields) => fields.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The value as `--dataset-filter` compares it: text, numbers and booleans as written;
    /// None for nulls, bytes, lists and groups.
    pub fn scalar(&self) -> Option<String> {
        match self {
            Cell::Text(s) => Some(s.clone()),
            Cell::Number(n) => Some(n.clone()),
            Cell::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// The names of a group's fields (for error messages).
    pub fn field_names(&self) -> Vec<&str> {
        match self {
            Cell::Group(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    fn from_field(field: &Field) -> Cell {
        match field {
            Field::Null => Cell::Null,
            Field::Bool(b) => Cell::Bool(*b),
            Field::Byte(n) => Cell::Number(n.to_string()),
            Field::Short(n) => Cell::Number(n.to_string()),
            Field::Int(n) => Cell::Number(n.to_string()),
            Field::Long(n) => Cell::Number(n.to_string()),
            Field::UByte(n) => Cell::Number(n.to_string()),
            Field::UShort(n) => Cell::Number(n.to_string()),
            Field::UInt(n) => Cell::Number(n.to_string()),
            Field::ULong(n) => Cell::Number(n.to_string()),
            Field::Float(n) => Cell::Number(n.to_string()),
            Field::Double(n) => Cell::Number(n.to_string()),
            Field::Str(s) => Cell::Text(s.clone()),
            Field::Bytes(b) => Cell::Bytes(b.data().to_vec()),
            Field::Group(row) => Cell::Group(
                row.get_column_iter()
                    .map(|(k, v)| (k.clone(), Cell::from_field(v)))
                    .collect(),
            ),
            Field::ListInternal(list) => {
                Cell::List(list.elements().iter().map(Cell::from_field).collect())
            }
            Field::MapInternal(map) => Cell::Group(
                map.entries()
                    .iter()
                    .map(|(k, v)| {
                        (
                            Cell::from_field(k).scalar().unwrap_or_default(),
                            Cell::from_field(v),
                        )
                    })
                    .collect(),
            ),
            // Dates, times, decimals, half floats: compared as their display text.
            other => Cell::Text(other.to_string()),
        }
    }

    fn from_json(value: serde_json::Value) -> Cell {
        use serde_json::Value;
        match value {
            Value::Null => Cell::Null,
            Value::Bool(b) => Cell::Bool(b),
            Value::Number(n) => Cell::Number(n.to_string()),
            Value::String(s) => Cell::Text(s),
            Value::Array(items) => Cell::List(items.into_iter().map(Cell::from_json).collect()),
            Value::Object(map) => Cell::Group(
                map.into_iter()
                    .map(|(k, v)| (k, Cell::from_json(v)))
                    .collect(),
            ),
        }
    }
}

/// Calls `each` with every row of the Parquet file at `path`, in order, until it breaks.
/// The error says which file and what was wrong.
pub fn parquet_rows(
    path: &Path,
    mut each: impl FnMut(Cell) -> ControlFlow<()>,
) -> Result<(), String> {
    let cannot = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", path.display());
    let file = File::open(path).map_err(|e| cannot(&e))?;
    let reader = SerializedFileReader::new(file).map_err(|e| cannot(&e))?;
    for row in reader {
        let row = row.map_err(|e| cannot(&e))?;
        let cell = Cell::Group(
            row.get_column_iter()
                .map(|(k, v)| (k.clone(), Cell::from_field(v)))
                .collect(),
        );
        if each(cell).is_break() {
            break;
        }
    }
    Ok(())
}

/// Calls `each` with every element of the JSON array in the file at `path`, in order,
/// until it breaks; the elements after are skipped without being built.
pub fn json_array_rows(
    path: &Path,
    each: impl FnMut(Cell) -> ControlFlow<()>,
) -> Result<(), String> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, SeqAccess, Visitor};

    struct Elements<F>(F);

    impl<'de, F: FnMut(Cell) -> ControlFlow<()>> Visitor<'de> for Elements<F> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON array of objects")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            while let Some(value) = seq.next_element::<serde_json::Value>()? {
                if (self.0)(Cell::from_json(value)).is_break() {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    break;
                }
            }
            Ok(())
        }
    }

    impl<'de, F: FnMut(Cell) -> ControlFlow<()>> DeserializeSeed<'de> for Elements<F> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    let cannot = |e: &dyn std::fmt::Display| format!("cannot read {}: {e}", path.display());
    let file = File::open(path).map_err(|e| cannot(&e))?;
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(file));
    Elements(each)
        .deserialize(&mut de)
        .map_err(|e| cannot(&e))?;
    de.end().map_err(|e| cannot(&e))
}
