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

/// What `export_all` wrote, and the exporters that failed with why.
pub struct Exported {
    pub written: Vec<Written>,
    pub failed: Vec<(&'static str, std::io::Error)>,
}

impl Exported {
    /// The first failure as an error (`cannot write <what>: <why>`), if any.
    pub fn first_failure(&self) -> Option<anyhow::Error> {
        let (what, e) = self.failed.first()?;
        Some(anyhow::anyhow!("cannot write {what}: {e}"))
    }
}

/// Runs every exporter into `dir`: one that fails does not keep the others from writing
/// (AIPerf's partial results). Fails only when `dir` cannot be made.
pub fn export_all(dir: &Path, exporters: &[&dyn Exporter]) -> anyhow::Result<Exported> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut done = Exported {
        written: Vec::new(),
        failed: Vec::new(),
    };
    for e in exporters {
        match e.export(dir) {
            Ok(w) => done.written.extend(w),
            Err(err) => done.failed.push((e.what(), err)),
        }
    }
    Ok(done)
}
