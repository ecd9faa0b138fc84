//! The writers of a run's artifacts behind one trait: each is made with what it writes
//! from, the run loops over them in order, and each says what it wrote for the listing
//! after the run (hyperfine's `Exporter` is the model).

use std::path::{Path, PathBuf};

/// A file an exporter wrote, and what the listing after the run calls it (`None`: not
/// listed).
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub label: Option<&'static str>,
    pub path: PathBuf,
}

impl Written {
    pub fn listed(label: &'static str, path: PathBuf) -> Written {
        Written {
            label: Some(label),
            path,
        }
    }

    pub fn unlisted(path: PathBuf) -> Written {
        Written { label: None, path }
    }
}

/// One writer of artifacts.
pub trait Exporter {
    /// What it writes, for a message when it fails ("the summary JSON").
    fn what(&self) -> &'static str;

    /// Writes its files into `dir` (which exists).
    fn export(&self, dir: &Path) -> std::io::Result<Vec<Written>>;
}

/// Runs `exporters` in order into `dir`; the files written, or the first failure with what
/// failed.
pub fn export_all(dir: &Path, exporters: &[&dyn Exporter]) -> anyhow::Result<Vec<Written>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for e in exporters {
        written.extend(
            e.export(dir)
                .with_context(|| format!("cannot write {}", e.what()))?,
        );
    }
    Ok(written)
}
