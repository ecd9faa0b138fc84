//! AIPerf's plot-config YAML (`--config`), where it maps: the lists of plots to draw
//! (`visualization.single_run_defaults` / `multi_run_defaults`). Other keys are named in
//! one warning.

use std::path::Path;

use serde_json::Value;

use super::artifacts::PlotError;

/// The plot names a config file chose; `None` where it did not say.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PlotConfig {
    pub single_run: Option<Vec<String>>,
    pub multi_run: Option<Vec<String>>,
    /// Keys present in the file that this version does not use (dotted paths).
    pub ignored: Vec<String>,
}

const SINGLE: &str = "single_run_defaults";
const MULTI: &str = "multi_run_defaults";

/// Reads `path`; `known` says whether a plot name exists (for single- or multi-run).
pub fn read(path: &Path, known: impl Fn(&str, bool) -> bool) -> Result<PlotConfig, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlotError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path, known)
}

fn parse(
    text: &str,
    path: &Path,
    known: impl Fn(&str, bool) -> bool,
) -> Result<PlotConfig, PlotError> {
    let bad = |what: String| PlotError::Config(format!("{}: {what}", path.display()));
    let doc: Value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_saphyr::from_str(text).map_err(|e| bad(format!("not valid YAML ({e})")))?
    };
    let mut cfg = PlotConfig::default();
    let Some(top) = doc.as_object() else {
        if doc.is_null() {
            return Ok(cfg);
        }
        return Err(bad("expected a mapping with a `visualization` key".into()));
    };
    for (key, value) in top {
        if key != "visualization" {
            cfg.ignored.push(key.clone());
            continue;
        }
        let Some(vis) = value.as_object() else {
            return Err(bad("`visualization` must be a mapping".into()));
        };
        for (k, v) in vis {
            let single = k == SINGLE;
            if !single && k != MULTI {
                cfg.ignored.push(format!("visualization.{k}"));
                continue;
            }
            let key = format!("visualization.{k}");
            let names: Vec<String> = v
                .as_array()
                .ok_or_else(|| bad(format!("`{key}` must be a list of plot names")))?
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(String::from)
                        .ok_or_else(|| bad(format!("`{key}`: {n} is not a plot name")))
                })
                .collect::<Result<_, _>>()?;
            if let Some(unknown) = names.iter().find(|n| !known(n, single)) {
                return Err(bad(format!(
                    "`{key}` names an unknown plot `{unknown}`; `aiperf plot --help` lists the plot names"
                )));
            }
            if single {
                cfg.single_run = Some(names);
            } else {
                cfg.multi_run = Some(names);
            }
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str, single: bool) -> bool {
        if single {
            name == "ttft_over_time"
        } else {
            name == "ttft_vs_throughput"
        }
    }

    #[test]
    fn lists_are_read_and_other_keys_named() {
        let text = "visualization:\n  single_run_defaults: [ttft_over_time]\n  multi_run_defaults:\n    - ttft_vs_throughput\n  single_run_plots: {}\nsettings:\n  x: 1\n";
        let c = parse(text, Path::new("c.yaml"), known).unwrap();
        assert_eq!(c.single_run, Some(vec!["ttft_over_time".to_string()]));
        assert_eq!(c.multi_run, Some(vec!["ttft_vs_throughput".to_string()]));
        assert_eq!(
            c.ignored,
            vec!["settings", "visualization.single_run_plots"]
        );
    }

    #[test]
    fn unknown_plot_names_the_key() {
        let text = "visualization:\n  multi_run_defaults: [nope]\n";
        let e = parse(text, Path::new("c.yaml"), known)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("visualization.multi_run_defaults") && e.contains("`nope`"),
            "{e}"
        );
    }
}
