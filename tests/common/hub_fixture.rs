//! Hugging Face hub cache fixtures: Parquet files written in the cache layout
//! (`hub/datasets--<owner>--<name>/snapshots/<commit>/...`, the `main` ref pointing at it),
//! with generated PNG images, for the tests that read a dataset offline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

pub const COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// One leaf column: values with definition and repetition levels.
pub enum Leaf {
    Text(Vec<String>, Vec<i16>, Option<Vec<i16>>),
    Bytes(Vec<Vec<u8>>, Vec<i16>),
    Int(Vec<i64>),
}

pub fn write_parquet(path: &Path, schema: &str, leaves: Vec<Leaf>) {
    write_parquet_schema(path, parse_message_type(schema).unwrap(), leaves);
}

/// Optional text columns named `names` (which the schema parser cannot spell with spaces).
pub fn text_schema(names: &[&str]) -> parquet::schema::types::Type {
    use parquet::basic::{LogicalType, Repetition, Type as Physical};
    use parquet::schema::types::Type;
    let fields = names
        .iter()
        .map(|n| {
            Arc::new(
                Type::primitive_type_builder(n, Physical::BYTE_ARRAY)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(Some(LogicalType::String))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .unwrap()
}

pub fn write_parquet_schema(path: &Path, schema: parquet::schema::types::Type, leaves: Vec<Leaf>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let schema = Arc::new(schema);
    let props = Arc::new(WriterProperties::builder().build());
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut leaves = leaves.into_iter();
    while let Some(mut column) = group.next_column().unwrap() {
        match leaves.next().expect("a leaf per column") {
            Leaf::Text(values, defs, reps) => {
                let values: Vec<ByteArray> = values
                    .into_iter()
                    .map(|v| ByteArray::from(v.into_bytes()))
                    .collect();
                column
                    .typed::<ByteArrayType>()
                    .write_batch(&values, Some(&defs), reps.as_deref())
                    .unwrap();
            }
            Leaf::Bytes(values, defs) => {
                let values: Vec<ByteArray> = values.into_iter().map(ByteArray::from).collect();
                column
                    .typed::<ByteArrayType>()
                    .write_batch(&values, Some(&defs), None)
                    .unwrap();
            }
            Leaf::Int(values) => {
                let defs = vec![1; values.len()];
                column
                    .typed::<Int64Type>()
                    .write_batch(&values, Some(&defs), None)
                    .unwrap();
            }
        }
        column.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();
}

pub fn texts(values: &[&str]) -> Leaf {
    Leaf::Text(
        values.iter().map(|v| v.to_string()).collect(),
        vec![1; values.len()],
        None,
    )
}

/// The snapshot of dataset `repo` at `main` in `home`'s hub cache, its ref written.
pub fn snapshot(home: &Path, repo: &str) -> PathBuf {
    let dir = home
        .join("hub")
        .join(format!("datasets--{}", repo.replace('/', "--")));
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(dir.join("refs").join("main"), COMMIT).unwrap();
    dir.join("snapshots").join(COMMIT)
}

pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([x as u8 * 9, y as u8 * 7, 99]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// A list-of-strings column (`optional group (LIST) { repeated group list { optional
/// binary element } }`), one list of at least one item per row.
pub fn text_lists(rows: &[Vec<&str>]) -> Leaf {
    let (mut values, mut defs, mut reps) = (Vec::new(), Vec::new(), Vec::new());
    for row in rows {
        assert!(!row.is_empty(), "a list of at least one item");
        for (i, v) in row.iter().enumerate() {
            values.push(v.to_string());
            defs.push(3);
            reps.push(i16::from(i > 0));
        }
    }
    Leaf::Text(values, defs, Some(reps))
}

/// The two leaves of a Hugging Face `Image` column (`optional group { optional binary bytes;
/// optional binary path (STRING); }`), null where a row has no image.
pub fn image_leaves(images: &[Option<Vec<u8>>]) -> [Leaf; 2] {
    let defs: Vec<i16> = images
        .iter()
        .map(|i| if i.is_some() { 2 } else { 0 })
        .collect();
    let bytes: Vec<Vec<u8>> = images.iter().flatten().cloned().collect();
    let paths = vec!["x.png".to_string(); bytes.len()];
    [
        Leaf::Bytes(bytes, defs.clone()),
        Leaf::Text(paths, defs, None),
    ]
}
