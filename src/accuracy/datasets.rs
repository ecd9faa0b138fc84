//! A benchmark's split from the Hugging Face hub cache: the Parquet files of one config and
//! split at `main` (`<config>/<split>-*.parquet`, as `datasets` finds them), read with the
//! `--public-dataset` reader.

use std::ops::ControlFlow;

use crate::dataset::public::hub;
use crate::dataset::public::rows::{self, Cell};
use crate::tokenizer::HubEnv;

/// Where a benchmark's rows are.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub repo: &'a str,
    pub config: &'a str,
    pub split: &'a str,
    /// The split's one file, when the repository names it in its card rather than by the
    /// split (MMStar's `mmstar.parquet`).
    pub file: Option<&'a str>,
    /// `main`, or `refs/convert/parquet` (the hub's Parquet conversion of a repository that
    /// holds other formats).
    pub revision: &'a str,
}

/// Whether `name` (a path in the repository) is a Parquet file of `config`'s `split`:
/// `<config>/<split>-NNNNN-of-NNNNN.parquet`, `<config>/<split>/*.parquet`, or for the
/// `default` config `data/<split>-*.parquet` (and, for its `train` split, a Parquet file at
/// the top of the repository, which `datasets` takes as the train split).
fn is_split_file(name: &str, config: &str, split: &str) -> bool {
    let Some((dir, file)) = name.rsplit_once('/') else {
        return config == "default" && split == "train" && name.ends_with(".parquet");
    };
    if !file.ends_with(".parquet") {
        return false;
    }
    let prefixed = file.starts_with(&format!("{split}-")) || file == format!("{split}.parquet");
    dir == config && prefixed
        || dir == format!("{config}/{split}")
        || config == "default" && dir == "data" && prefixed
}

/// Every row of the split, in file order. `flag` names what asked for it in errors. A
/// repository whose `main` holds no Parquet files for the split (JSON Lines, a loading
/// script) is read from the hub's Parquet conversion of it instead.
pub fn read(env: &HubEnv, src: Source, flag: &str) -> Result<Vec<Cell>, String> {
    match read_at(env, src, flag) {
        Err(e) if src.revision == "main" && src.file.is_none() => {
            let converted = Source {
                revision: "refs/convert/parquet",
                ..src
            };
            read_at(env, converted, flag).map_err(|_| e)
        }
        other => other,
    }
}

fn read_at(env: &HubEnv, src: Source, flag: &str) -> Result<Vec<Cell>, String> {
    let wanted = |name: &str| match src.file {
        Some(file) => name == file,
        None => is_split_file(name, src.config, src.split),
    };
    let mut files = hub::Files::new(env, src.repo, src.revision, &wanted);
    let what = format!(
        "dataset {} (config {}, split {})",
        src.repo, src.config, src.split
    );
    if files.offline_and_missing() {
        return Err(format!(
            "{flag}: HF_HUB_OFFLINE is set and {what} is not in the Hugging Face cache: looked in {} \
             for the {} split's Parquet files (config {}, revision {}); run once without HF_HUB_OFFLINE to download it \
             (or `huggingface-cli download --repo-type dataset {}{}`), or set HF_HOME to the cache \
             that holds it",
            files.cache_dir().display(),
            src.split,
            src.config,
            src.revision,
            src.repo,
            match src.revision {
                "main" => String::new(),
                r => format!(" --revision {r}"),
            }
        ));
    }
    let mut out = Vec::new();
    let mut read_any = false;
    for i in 0.. {
        let (name, path) = match files.get(i) {
            Ok(Some(file)) => file,
            Ok(None) => break,
            // The hub cannot be reached for more: the cached files are the split.
            Err(e) if read_any => {
                tracing::warn!("{flag}: {e}; using the cached files of {what}");
                break;
            }
            Err(e) => return Err(format!("{flag}: {e}")),
        };
        tracing::info!("Reading {name} of dataset {}", src.repo);
        rows::parquet_rows(&path, |row| {
            out.push(row);
            ControlFlow::Continue(())
        })
        .map_err(|e| format!("{flag}: {e}"))?;
        read_any = true;
    }
    if !read_any {
        return Err(format!(
            "{flag}: {what} has no {}/{}-*.parquet (looked in {} and on the hub)",
            src.config,
            src.split,
            files.cache_dir().display()
        ));
    }
    Ok(out)
}

/// The text of column `name`, or an error naming the row and the columns there are.
pub fn text<'a>(row: &'a Cell, name: &str, at: &str) -> Result<&'a str, String> {
    row.get(name).and_then(Cell::as_text).ok_or_else(|| {
        format!(
            "{at}: no text column '{name}' (columns: {})",
            row.field_names().join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_files() {
        assert!(is_split_file(
            "main/test-00000-of-00001.parquet",
            "main",
            "test"
        ));
        assert!(is_split_file("anatomy/dev/0000.parquet", "anatomy", "dev"));
        assert!(is_split_file(
            "data/test-00000-of-00001.parquet",
            "default",
            "test"
        ));
        assert!(!is_split_file(
            "main/train-00000-of-00001.parquet",
            "main",
            "test"
        ));
        assert!(!is_split_file("socratic/test-0.parquet", "main", "test"));
        assert!(!is_split_file("main/test-0.json", "main", "test"));
        assert!(is_split_file(
            "aime_2024_problems.parquet",
            "default",
            "train"
        ));
        assert!(!is_split_file(
            "aime_2024_problems.parquet",
            "default",
            "test"
        ));
    }
}
