//! `aiperf config init|validate`: the bundled template configs, and a config file checked
//! by the same reading and checks as `aiperf profile --config FILE`, with every error named
//! by its path in the file; `expand` lists a file's sweep points.

mod expand;

use std::io::Write;
use std::path::Path;

use crate::cli::config_cmd::{ConfigAction, ConfigArgs, InitArgs};
use crate::cli::{Cli, Command};

/// The bundled templates, by name (AIPerf's names for the same scenarios).
const TEMPLATES: [(&str, &str); 4] = [
    (
        "minimal",
        include_str!("../../assets/config_templates/minimal.yaml"),
    ),
    (
        "warmup_profiling",
        include_str!("../../assets/config_templates/warmup_profiling.yaml"),
    ),
    (
        "latency_test",
        include_str!("../../assets/config_templates/latency_test.yaml"),
    ),
    (
        "multimodal_vision",
        include_str!("../../assets/config_templates/multimodal_vision.yaml"),
    ),
];

#[derive(Debug)]
pub enum ScaffoldError {
    /// Bad command line or unreadable file: exit 2.
    Input(String),
}

/// How a command ended (validate: whether the file had errors).
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `validate` found errors (they were printed): exit 1.
    Invalid,
}

pub fn run(args: &ConfigArgs) -> Result<Outcome, ScaffoldError> {
    match &args.action {
        ConfigAction::Init(a) => init(a).map(|()| Outcome::Done),
        ConfigAction::Validate(a) => validate(&a.config_file),
        ConfigAction::Expand(a) => expand::expand(a),
    }
}

/// A header line `# key: value` of a template.
fn header<'t>(text: &'t str, key: &str) -> &'t str {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# ")?.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or("")
}

fn init(a: &InitArgs) -> Result<(), ScaffoldError> {
    if a.list {
        let word = a.search.as_deref().map(str::to_lowercase);
        for (name, text) in TEMPLATES {
            let (title, description) = (header(text, "title"), header(text, "description"));
            let hay = format!("{name} {title} {description}").to_lowercase();
            if word.as_ref().is_some_and(|w| !hay.contains(w.as_str())) {
                continue;
            }
            println!("{name:<18} {title}: {description}");
        }
        return Ok(());
    }
    if a.search.is_some() {
        return Err(ScaffoldError::Input(
            "--search filters the list: give it with --list".into(),
        ));
    }
    let Some((_, text)) = TEMPLATES.iter().find(|(n, _)| *n == a.template) else {
        let names: Vec<&str> = TEMPLATES.iter().map(|(n, _)| *n).collect();
        return Err(ScaffoldError::Input(format!(
            "--template {}: no such template; the templates are {} (`aiperf config init --list`)",
            a.template,
            names.join(", ")
        )));
    };
    let mut text = text.to_string();
    if let Some(model) = &a.model {
        text = with_value(&text, "model", model)?;
    }
    if let Some(url) = &a.url {
        text = with_value(&text, "url", url)?;
    }
    match &a.output {
        None => {
            print!("{text}");
            Ok(())
        }
        Some(out) => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(out);
            let written = file.and_then(|mut f| f.write_all(text.as_bytes()));
            written.map_err(|e| {
                ScaffoldError::Input(format!(
                    "--output {}: cannot write it ({e}); an existing file is not overwritten",
                    out.display()
                ))
            })?;
            println!(
                "Wrote the {} template to {}; run it with `aiperf profile --config {}`",
                a.template,
                out.display(),
                out.display()
            );
            Ok(())
        }
    }
}

/// The template with the value of its first `key:` line replaced (quoted for YAML).
fn with_value(text: &str, key: &str, value: &str) -> Result<String, ScaffoldError> {
    let quoted = serde_json::Value::String(value.to_string()).to_string();
    let mut done = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let body = line.trim_start();
            match body.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
                Some(rest) if !done && !line.starts_with('#') => {
                    done = true;
                    let indent = &line[..line.len() - body.len()];
                    let comment = rest.find(" #").map_or("", |i| &rest[i..]);
                    format!("{indent}{key}: {quoted}{comment}")
                }
                _ => line.to_string(),
            }
        })
        .collect();
    if !done {
        return Err(ScaffoldError::Input(format!(
            "this template has no {key} to set"
        )));
    }
    Ok(lines.join("\n") + "\n")
}

fn validate(path: &Path) -> Result<Outcome, ScaffoldError> {
    if let Err(e) = std::fs::read_to_string(path) {
        return Err(ScaffoldError::Input(format!(
            "{}: cannot read it ({e})",
            path.display()
        )));
    }
    let shown = path.display();
    let mut problems = match crate::cli::config_file_problems(path) {
        Ok(p) => p,
        // Not YAML: the reader's line names the file already.
        Err(e) => vec![e.strip_prefix("--config ").unwrap_or(&e).to_string()],
    };
    let yaml_ok = problems
        .first()
        .is_none_or(|p| !p.contains(": not valid YAML"));
    if yaml_ok && !crate::cli::config_file_names_model(path) {
        problems.push(
            "benchmark.model: missing; name the model the server serves (benchmark.model or benchmark.models)"
                .into(),
        );
    }
    // Every key read: the settings together go through profile's own checks.
    if problems.is_empty()
        && let Some(e) = profile_check(path)
    {
        problems.push(e);
    }
    if problems.is_empty() {
        println!("{shown}: OK: `aiperf profile --config {shown}` reads every setting");
        return Ok(Outcome::Done);
    }
    for p in &problems {
        eprintln!("error: {shown}: {p}");
    }
    eprintln!(
        "{shown}: {} error{}",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    Ok(Outcome::Invalid)
}

/// The file as `aiperf profile --config FILE` takes it: the flags it becomes and their
/// checks together (a value that only fails with another, such as a rate without a rate
/// mode that takes one).
fn profile_check(path: &Path) -> Option<String> {
    let argv = [
        "aiperf".to_string(),
        "profile".into(),
        "--config".into(),
        path.display().to_string(),
    ];
    let cli = match Cli::parse_with_sources(argv) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            return Some(
                text.lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
                    .to_string(),
            );
        }
    };
    let Command::Profile(args) = cli.command else {
        return None;
    };
    let e = crate::config::ProfileConfig::from_args(&args, false)
        .err()?
        .0;
    // A message about a flag is given the place of the key that set it.
    let long = e.split([':', ' ']).next().unwrap_or("");
    let place = crate::cli::config_file_places(path)
        .into_iter()
        .find(|(l, _)| l == long);
    Some(match place {
        Some((_, at)) => format!("{at}: {e}"),
        None => format!("as profile flags: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_have_a_title_and_description() {
        for (name, text) in TEMPLATES {
            assert!(!header(text, "title").is_empty(), "{name}");
            assert!(!header(text, "description").is_empty(), "{name}");
            assert!(text.contains(&format!("# @template {name}\n")), "{name}");
        }
    }

    #[test]
    fn the_model_and_url_are_set_in_place() {
        let (_, text) = TEMPLATES[0];
        let t = with_value(text, "model", "org/m").unwrap();
        assert!(t.contains("\n  model: \"org/m\"\n"), "{t}");
        let t = with_value(&t, "url", "http://h:1").unwrap();
        assert!(
            t.contains("\n    url: \"http://h:1\" # the path comes"),
            "{t}"
        );
        assert_eq!(t.lines().count(), text.lines().count());
    }
}
