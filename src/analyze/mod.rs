//! `aiperf analyze`: views drawn from a finished run's artifacts. `swim-lane` draws the
//! run's sessions over time; `turn-messages` lists what each turn sent.

mod swim_draw;
mod swim_lane;
mod turn_messages;

use std::path::{Path, PathBuf};

use crate::cli::analyze::{AnalyzeAction, AnalyzeArgs, SwimLaneArgs, TurnMessagesArgs};

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A bad command line: exit 2.
    #[error("{0}")]
    Usage(String),
    /// Some run directories could not be drawn (each said why): exit 1.
    #[error("{0} of the run directories could not be drawn (see above)")]
    Skipped(usize),
}

pub fn run(args: &AnalyzeArgs) -> Result<(), AnalyzeError> {
    match &args.action {
        AnalyzeAction::SwimLane(a) => swim_lanes(a),
        AnalyzeAction::TurnMessages(a) => turn_messages(a),
    }
}

fn one_dir_only(out: &Option<PathBuf>, dirs: &[PathBuf]) -> Result<(), AnalyzeError> {
    if out.is_some() && dirs.len() > 1 {
        return Err(AnalyzeError::Usage(format!(
            "--out names one file, and {} run directories were given; drop --out (each run gets its own file) or give one directory",
            dirs.len()
        )));
    }
    Ok(())
}

/// Runs `each` for every directory, printing what it saved or why it skipped.
fn each_dir(
    dirs: &[PathBuf],
    mut each: impl FnMut(&Path) -> Result<Vec<String>, String>,
) -> Result<(), AnalyzeError> {
    let mut failed = 0;
    for dir in dirs {
        match each(dir) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("skip {}: {e}", dir.display());
                failed += 1;
            }
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(AnalyzeError::Skipped(n)),
    }
}

fn swim_lanes(a: &SwimLaneArgs) -> Result<(), AnalyzeError> {
    one_dir_only(&a.out, &a.run_dirs)?;
    each_dir(&a.run_dirs, |dir| {
        let lane = swim_lane::read(dir, a.ramp)?;
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| dir.display().to_string());
        let sessions = match lane.subagents() {
            0 => format!("{} sessions", lane.sessions.len()),
            n => format!("{} sessions + {n} subagents", lane.sessions.len() - n),
        };
        let title = format!("{name}  —  {sessions} across {} slots", lane.slots);
        let png = a.out.clone().unwrap_or_else(|| dir.join("swim_lane.png"));
        create_parent(&png)?;
        swim_draw::write_png(&png, &lane, &title, a.concurrency)?;
        let mut saved = vec![format!("saved {}", png.display())];
        if a.html {
            let page = swim_draw::html(&lane, &title, a.concurrency)?;
            let path = match &a.out {
                Some(out) => out.with_extension("html"),
                None => dir.join("swim_lane.html"),
            };
            std::fs::write(&path, page)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            saved.push(format!("saved {}", path.display()));
        }
        Ok(saved)
    })
}

fn create_parent(path: &Path) -> Result<(), String> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => {
            std::fs::create_dir_all(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
        }
        _ => Ok(()),
    }
}

fn turn_messages(a: &TurnMessagesArgs) -> Result<(), AnalyzeError> {
    one_dir_only(&a.out, &a.run_dirs)?;
    let limits = turn_messages::Limits {
        conversations: a.limit_conversations,
        turns: a.max_turns,
        chars: a.content_cap,
    };
    each_dir(&a.run_dirs, |dir| {
        let page = turn_messages::page(dir, limits)?;
        let path = a.out.clone().unwrap_or_else(|| {
            let base = if dir.is_file() {
                dir.parent().unwrap_or(Path::new("."))
            } else {
                dir
            };
            base.join("turn_messages.html")
        });
        create_parent(&path)?;
        std::fs::write(&path, &page)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(vec![format!(
            "saved {} ({} KB)",
            path.display(),
            page.len() / 1024
        )])
    })
}
