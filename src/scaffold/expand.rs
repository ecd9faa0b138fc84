//! `aiperf config expand FILE`: the points of a config file's sweep, found the way
//! `aiperf profile --config FILE` finds them (the file's lists become comma lists, the
//! command line's sweep expands them), each with its directory name, label, values and,
//! with `--full`, its resolved configuration. Nothing is run.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Outcome, ScaffoldError};
use crate::cli::config_cmd::{ExpandArgs, ExpandFormat};
use crate::cli::{Cli, Command};
use crate::config::multirun::SweepType;

/// One point as printed.
struct Point {
    index: usize,
    dir_name: String,
    label: String,
    values: Map<String, Value>,
    body: Option<Value>,
}

pub fn expand(a: &ExpandArgs) -> Result<Outcome, ScaffoldError> {
    let path = &a.config_file;
    let shown = path.display();
    if let Err(e) = std::fs::read_to_string(path) {
        return Err(ScaffoldError::Input(format!(
            "{shown}: cannot read it ({e})"
        )));
    }
    let problems = match crate::cli::config_file_problems(path) {
        Ok(p) => p,
        Err(e) => vec![e.strip_prefix("--config ").unwrap_or(&e).to_string()],
    };
    if !problems.is_empty() {
        return Ok(invalid(path, &problems));
    }
    if let Some((_, at)) = crate::cli::config_file_places(path)
        .into_iter()
        .find(|(long, _)| long == "--search-recipe")
    {
        return Err(ScaffoldError::Input(format!(
            "{shown}: {at}: a search recipe chooses its points as it runs, so there is no list to show; \
             give sweep.parameters (grid or zip) to preview"
        )));
    }
    let sweep_type = crate::cli::config_file_sweep_type(path);
    let (points, sweep_type) = match points(path, &sweep_type, a.full || a.index.is_some()) {
        Ok(p) => p,
        Err(e) => return Ok(invalid(path, &[e])),
    };
    let total = points.len();
    let shown_points: Vec<Point> = match a.index {
        Some(i) if i >= total => {
            return Err(ScaffoldError::Input(format!(
                "--index {i}: out of range; the sweep has {total} point{} (0 to {})",
                if total == 1 { "" } else { "s" },
                total - 1
            )));
        }
        Some(i) => points.into_iter().skip(i).take(1).collect(),
        None => points,
    };
    let full = a.full || a.index.is_some();
    let text = match a.format {
        ExpandFormat::Text => text(&shown_points, &sweep_type, total, full),
        ExpandFormat::Json => {
            let doc = document(&shown_points, &sweep_type);
            serde_json::to_string_pretty(&doc).expect("plain values") + "\n"
        }
        ExpandFormat::Yaml => {
            let doc = document(&shown_points, &sweep_type);
            serde_saphyr::to_string(&doc).map_err(|e| ScaffoldError::Input(e.to_string()))?
        }
    };
    // A reader that stops early (`| head`) is not an error.
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(Outcome::Done)
}

fn invalid(path: &Path, problems: &[String]) -> Outcome {
    for p in problems {
        eprintln!("error: {}: {p}", path.display());
    }
    Outcome::Invalid
}

/// Every point of the file's sweep (one `base` point when it has none), and the sweep's
/// kind as AIPerf names it.
fn points(path: &Path, sweep_type: &str, full: bool) -> Result<(Vec<Point>, String), String> {
    let argv: Vec<String> = ["aiperf", "profile", "--config"]
        .into_iter()
        .map(String::from)
        .chain([path.display().to_string()])
        .collect();
    let (argv, _) = crate::cli::with_config_sweeps(argv.clone(), &argv);
    let lists = crate::sweep::find_lists(&argv)?;
    let sweep_type = match sweep_type {
        "zip" => SweepType::Zip,
        _ => SweepType::Grid,
    };
    let name = match (lists.is_sweep(), sweep_type) {
        (false, _) => "none",
        (true, SweepType::Zip) => "ZipSweep",
        (true, SweepType::Grid) => "GridSweep",
    };
    let variations = lists
        .variations(sweep_type)
        .map_err(|e| e.replace("--sweep-type zip", "sweep.type zip"))?;
    let bodies: Vec<Option<Value>> = match full {
        true => {
            let args = parse(&lists.first)?;
            crate::sweep::preview(&lists, &args)
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(_, body)| Some(body))
                .collect()
        }
        false => vec![None; variations.len()],
    };
    let mut out = Vec::new();
    for (v, body) in variations.into_iter().zip(bodies) {
        out.push(Point {
            index: v.index,
            dir_name: if lists.is_sweep() {
                v.dir_name()
            } else {
                "base".into()
            },
            label: v.label(),
            values: v.owned_values().into_iter().collect(),
            body,
        });
    }
    Ok((out, name.to_string()))
}

/// The profile flags of `argv`.
fn parse(argv: &[String]) -> Result<crate::cli::ProfileArgs, String> {
    let cli = Cli::parse_with_sources(argv).map_err(|e| {
        let text = e.render().to_string();
        text.lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string()
    })?;
    match cli.command {
        Command::Profile(args) => Ok(*args),
        _ => unreachable!("a profile command line"),
    }
}

fn document(points: &[Point], sweep_type: &str) -> Value {
    let variations: Vec<Value> = points
        .iter()
        .map(|p| {
            let mut v = json!({
                "index": p.index,
                "dir_name": p.dir_name,
                "label": p.label,
                "values": p.values,
            });
            if let Some(body) = &p.body {
                v["benchmark"] = body.clone();
            }
            v
        })
        .collect();
    json!({"sweep_type": sweep_type, "variations": variations})
}

fn text(points: &[Point], sweep_type: &str, total: usize, full: bool) -> String {
    let mut out = match points.len() == total {
        true => format!(
            "Sweep type: {sweep_type} ({total} variation{})\n\n",
            if total == 1 { "" } else { "s" }
        ),
        false => format!(
            "Sweep type: {sweep_type} (showing {} of {total})\n\n",
            points.len()
        ),
    };
    for p in points {
        out += &format!("[{}] dir={}  label={}\n", p.index, p.dir_name, p.label);
        if full && let Some(body) = &p.body {
            let yaml = serde_saphyr::to_string(body).unwrap_or_else(|e| format!("({e})"));
            for line in yaml.trim_end().lines() {
                out += &format!("    {line}\n");
            }
            out.push('\n');
        }
    }
    out
}
