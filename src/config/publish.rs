//! `--mlflow-*` and `--wandb-*`: checked before the run (AIPerf's rules: the secondary flags
//! need the tracking URI or the project, no empty names), used by `publish` after it.

use std::time::Duration;

use http::Uri;
use serde_json::Value;

use super::{ConfigError, config_error};
use crate::cli::publish::PublishArgs;

/// AIPerf's defaults (`MLflowDefaults`).
pub const DEFAULT_EXPERIMENT: &str = "aiperf";
pub const DEFAULT_ARTIFACT_GLOBS: [&str; 10] = [
    "*.json",
    "*.csv",
    "*.jsonl",
    "*.parquet",
    "*_timeslices.*",
    "**/*.png",
    "**/*.jpg",
    "**/*.jpeg",
    "**/*.svg",
    "**/*.html",
];
/// AIPerf bounds each export by `AIPERF_MLFLOW_EXPORT_TIMEOUT_SECONDS` /
/// `AIPERF_WANDB_EXPORT_TIMEOUT_SECONDS` (1 to 600, default 30).
pub const MLFLOW_TIMEOUT_ENV: &str = "AIPERF_MLFLOW_EXPORT_TIMEOUT_SECONDS";
pub const WANDB_TIMEOUT_ENV: &str = "AIPERF_WANDB_EXPORT_TIMEOUT_SECONDS";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a finished run is logged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishOptions {
    pub mlflow: Option<MlflowOptions>,
    pub wandb: Option<WandbOptions>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MlflowOptions {
    /// The tracking server, without credentials (shown in messages and mlflow_export.json).
    pub tracking_uri: Uri,
    /// `user:password` given in the URI, sent as Basic authorization.
    pub userinfo: Option<String>,
    pub experiment: String,
    pub run_name: Option<String>,
    /// In the order given; a later key replaces an earlier one.
    pub tags: Vec<(String, String)>,
    pub parent_run_id: Option<String>,
    pub artifact_globs: Vec<String>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WandbOptions {
    pub project: String,
    pub entity: Option<String>,
    pub run_name: Option<String>,
    pub tags: Vec<String>,
    pub timeout: Duration,
}

impl PublishOptions {
    /// Reads the flags (and the timeout variables from the environment).
    pub fn from_args(a: &PublishArgs) -> Result<PublishOptions, ConfigError> {
        let env = |name: &str| std::env::var(name).ok();
        Ok(PublishOptions {
            mlflow: mlflow(a, env(MLFLOW_TIMEOUT_ENV).as_deref())?,
            wandb: wandb(a, env(WANDB_TIMEOUT_ENV).as_deref())?,
        })
    }
}

fn mlflow(
    a: &PublishArgs,
    timeout_env: Option<&str>,
) -> Result<Option<MlflowOptions>, ConfigError> {
    // Empty globs are refused before a missing URI, as AIPerf does.
    let globs = comma_list(&a.mlflow_artifact_globs);
    if globs.iter().any(String::is_empty) {
        return Err(config_error(
            "--mlflow-artifact-glob entries cannot be empty; give e.g. --mlflow-artifact-glob '*.json'",
        ));
    }
    let Some(uri) = a.mlflow_tracking_uri.as_deref() else {
        let secondary = a.mlflow_experiment.is_some()
            || a.mlflow_run_name.is_some()
            || !a.mlflow_tags.is_empty()
            || a.mlflow_parent_run_id.is_some()
            || !a.mlflow_artifact_globs.is_empty();
        if secondary {
            return Err(config_error(
                "--mlflow-experiment, --mlflow-run-name, --mlflow-tag, --mlflow-artifact-glob, and --mlflow-parent-run-id require --mlflow-tracking-uri to be set.",
            ));
        }
        return Ok(None);
    };
    let (tracking_uri, userinfo) = tracking_uri(uri.trim())?;
    let experiment = match a.mlflow_experiment.as_deref().map(str::trim) {
        None => DEFAULT_EXPERIMENT.to_string(),
        Some("") => {
            return Err(config_error(
                "--mlflow-experiment cannot be empty when --mlflow-tracking-uri is set.",
            ));
        }
        Some(e) => e.to_string(),
    };
    let parent_run_id = a
        .mlflow_parent_run_id
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    Ok(Some(MlflowOptions {
        tracking_uri,
        userinfo,
        experiment,
        run_name: non_empty(a.mlflow_run_name.as_deref()),
        tags: mlflow_tags(&a.mlflow_tags)?,
        parent_run_id,
        artifact_globs: match globs.is_empty() {
            true => DEFAULT_ARTIFACT_GLOBS.map(String::from).to_vec(),
            false => globs,
        },
        timeout: timeout(MLFLOW_TIMEOUT_ENV, timeout_env)?,
    }))
}

/// The server's URL, its credentials taken out. Only the REST API is spoken: the Python
/// client's local stores (`file:`, `sqlite:`, a bare path) and `databricks` are refused.
fn tracking_uri(raw: &str) -> Result<(Uri, Option<String>), ConfigError> {
    if raw.is_empty() {
        return Err(config_error("--mlflow-tracking-uri cannot be empty."));
    }
    let refuse = |why: &str| {
        config_error(format!(
            "--mlflow-tracking-uri {raw}: {why}; give the tracking server's http:// or https:// URL (e.g. http://127.0.0.1:5000)"
        ))
    };
    let (scheme, rest) = raw.split_once("://").ok_or_else(|| {
        refuse("this build talks to a tracking server over its REST API, not to a local store")
    })?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(refuse(&format!(
            "{scheme}: this build talks to a tracking server over its REST API only"
        )));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.to_string()), h),
        None => (None, authority),
    };
    let uri: Uri = format!("{scheme}://{host}{}", path.trim_end_matches('/'))
        .parse()
        .map_err(|e| refuse(&format!("not a URL ({e})")))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(refuse("no host"));
    }
    Ok((uri, userinfo))
}

/// AIPerf's `--mlflow-tag`: `key:value` items (comma-separated) or a JSON object; each value
/// as Python's `str()` of AIPerf's coercion (`true` -> `True`, `1.50` -> `1.5`).
fn mlflow_tags(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut tags: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| {
        let k = k.trim();
        if k.is_empty() {
            return;
        }
        tags.retain(|(old, _)| old != k);
        tags.push((k.to_string(), v));
    };
    for item in items {
        if item.starts_with('{') {
            let obj: serde_json::Map<String, Value> = serde_json::from_str(item).map_err(|e| {
                config_error(format!(
                    "--mlflow-tag {item}: not a JSON object ({e}); give key:value or a JSON object"
                ))
            })?;
            for (k, v) in obj {
                add(&k, crate::export::pyrepr::str(&v));
            }
            continue;
        }
        for pair in item.split(',') {
            let (k, v) = pair.split_once(':').ok_or_else(|| {
                config_error(format!(
                    "--mlflow-tag {item}: each item must be in 'key:value' format, e.g. team:perf"
                ))
            })?;
            add(k, crate::export::pyrepr::str(&coerce(v.trim())));
        }
    }
    Ok(tags)
}

/// AIPerf's `coerce_value`: booleans, None, integers without a leading zero and decimals
/// become those types; anything else stays text.
fn coerce(v: &str) -> Value {
    let lower = v.to_ascii_lowercase();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match lower.as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "none" | "null" => return Value::Null,
        _ => {}
    }
    let unsigned = v.strip_prefix('-').unwrap_or(v);
    if digits(unsigned)
        && (!unsigned.starts_with('0') || unsigned == "0")
        && let Ok(i) = v.parse::<i64>()
    {
        return Value::from(i);
    }
    if v.matches('.').count() == 1
        && digits(&unsigned.replace('.', ""))
        && let Ok(f) = v.parse::<f64>()
    {
        return Value::from(f);
    }
    Value::String(v.to_string())
}

fn wandb(a: &PublishArgs, timeout_env: Option<&str>) -> Result<Option<WandbOptions>, ConfigError> {
    let Some(project) = a.wandb_project.as_deref() else {
        if a.wandb_entity.is_some() || a.wandb_run_name.is_some() || !a.wandb_tags.is_empty() {
            return Err(config_error(
                "--wandb-entity, --wandb-run-name, and --wandb-tag require --wandb-project to be set.",
            ));
        }
        return Ok(None);
    };
    let project = project.trim();
    if project.is_empty() {
        return Err(config_error("--wandb-project cannot be empty."));
    }
    let tags = comma_list(&a.wandb_tags)
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Some(WandbOptions {
        project: project.to_string(),
        entity: non_empty(a.wandb_entity.as_deref()),
        run_name: non_empty(a.wandb_run_name.as_deref()),
        tags,
        timeout: timeout(WANDB_TIMEOUT_ENV, timeout_env)?,
    }))
}

/// Each value split at commas, trimmed (AIPerf's `parse_str_or_list`).
fn comma_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .collect()
}

fn non_empty(v: Option<&str>) -> Option<String> {
    v.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn timeout(name: &str, value: Option<&str>) -> Result<Duration, ConfigError> {
    let Some(raw) = value else {
        return Ok(DEFAULT_TIMEOUT);
    };
    match raw.trim().parse::<f64>() {
        Ok(s) if (1.0..=600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(config_error(format!(
            "{name}={raw}: give a number of seconds from 1 to 600"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> PublishArgs {
        PublishArgs::default()
    }

    #[test]
    fn secondary_flags_need_their_primary() {
        let a = PublishArgs {
            mlflow_run_name: Some("r".into()),
            ..args()
        };
        let e = PublishOptions::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("require --mlflow-tracking-uri"), "{e}");
        let a = PublishArgs {
            wandb_tags: vec!["x".into()],
            ..args()
        };
        let e = PublishOptions::from_args(&a).unwrap_err().to_string();
        assert!(e.contains("require --wandb-project"), "{e}");
        assert_eq!(
            PublishOptions::from_args(&args()).unwrap(),
            PublishOptions::default()
        );
    }

    #[test]
    fn mlflow_defaults_tags_and_uri() {
        let a = PublishArgs {
            mlflow_tracking_uri: Some(" http://u:p@host:5000/ ".into()),
            mlflow_tags: vec![
                "team:perf,ok:true".into(),
                r#"{"n": 2, "team": "x"}"#.into(),
            ],
            ..args()
        };
        let m = mlflow(&a, None).unwrap().unwrap();
        assert_eq!(m.tracking_uri.to_string(), "http://host:5000/");
        assert_eq!(m.userinfo.as_deref(), Some("u:p"));
        assert_eq!(m.experiment, "aiperf");
        assert_eq!(m.artifact_globs.len(), 10);
        assert_eq!(m.timeout, Duration::from_secs(30));
        let tags: Vec<(&str, &str)> = m
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(tags, [("ok", "True"), ("n", "2"), ("team", "x")]);
        for bad in [
            "",
            "file:///tmp/mlruns",
            "sqlite:///db",
            "databricks",
            "http://",
        ] {
            let a = PublishArgs {
                mlflow_tracking_uri: Some(bad.into()),
                ..args()
            };
            assert!(mlflow(&a, None).is_err(), "{bad}");
        }
        assert!(timeout("X", Some("0.5")).is_err());
        assert_eq!(timeout("X", Some("2")).unwrap(), Duration::from_secs(2));
    }

    #[test]
    fn coercion_follows_aiperf() {
        let shown = |v: &str| crate::export::pyrepr::str(&coerce(v));
        assert_eq!(shown("1.50"), "1.5");
        assert_eq!(shown("007"), "007");
        assert_eq!(shown("-3"), "-3");
        assert_eq!(shown("NULL"), "None");
        assert_eq!(shown("a.b"), "a.b");
    }
}
