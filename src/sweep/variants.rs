//! `--variant` scenario sweeps: one point per variant, its command line the base one with
//! each `key=value` set (AIPerf's `ScenarioSweep`). A point is named, and its directory,
//! by the variant's name (`v0`, `v1`, ... when none is given).

use serde_json::Value;

use super::argv;
use super::lists::Variation;
use crate::cli::flags;
use crate::config::multirun::Variant;

/// The points of the variants, in the order given. `first` is the command line (lists
/// already taken out); its `--variant` flags are dropped from each point's.
pub fn variations(first: &[String], variants: &[Variant]) -> Result<Vec<Variation>, String> {
    let variant_arg = argv::find("variant").expect("--variant is a profile flag");
    let base = argv::remove(first, &variant_arg);
    variants
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let mut point = base.clone();
            let mut values = Vec::new();
            for (key, value) in &v.pairs {
                let arg = argv::find(key).ok_or_else(|| {
                    format!(
                        "--variant {:?}: unknown key '{key}'; keys are profile flags without -- (isl, osl, concurrency, request-rate, ...)",
                        v.name
                    )
                })?;
                if let Some(why) = not_per_variant(&arg) {
                    return Err(format!(
                        "--variant {:?}: {key} cannot differ between variants: {why}; give it once, outside the variants",
                        v.name
                    ));
                }
                point = argv::set(&point, &arg, value)
                    .map_err(|e| format!("--variant {:?}: {key}={value}: {e}", v.name))?;
                let path = value_key(&arg);
                if values.iter().any(|(p, _)| *p == path) {
                    return Err(format!(
                        "--variant {:?}: {key} names a flag already set in this variant; give it once",
                        v.name
                    ));
                }
                values.push((path, typed(value)));
            }
            Ok(Variation {
                index,
                values,
                argv: point,
                name: Some(v.name.clone()),
                dir_by_name: true,
            })
        })
        .collect()
}

/// Why a flag cannot be set per variant: the sweep itself sets it for every run, or it
/// shapes the whole sweep rather than one run.
fn not_per_variant(arg: &clap::Arg) -> Option<&'static str> {
    match arg.get_id().as_str() {
        "artifact_dir" => Some("each variant's runs go to a directory named after it"),
        "random_seed" => Some("the sweep derives each run's seed from it"),
        "config" => Some("the config file is read once, for every variant"),
        _ if arg.get_help_heading() == Some("Multi-Run") => {
            Some("it is a Multi-Run flag, read once for the whole sweep")
        }
        _ => None,
    }
}

/// The key a variant's value goes under in `run_config.json` and the sweep aggregate:
/// the flag's config path (`phases.profiling.concurrency`), or its id when it has none.
fn value_key(arg: &clap::Arg) -> &'static str {
    match flags::by_id(arg.get_id().as_str()) {
        Some(f) => f.path.map(|p| p.trim_start_matches('^')).unwrap_or(f.id),
        // Every profile flag has a row (a test of the table checks it).
        None => "unknown",
    }
}

/// A value as AIPerf reads it: a bool, an int, a float, else text.
fn typed(raw: &str) -> Value {
    match raw.to_ascii_lowercase().as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = raw.parse::<i64>() {
        return Value::from(i);
    }
    match raw.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::from(f),
        _ => Value::from(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::multirun::Variant;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn variant(name: &str, pairs: &[(&str, &str)]) -> Variant {
        Variant {
            name: name.into(),
            pairs: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn each_variant_sets_its_flags_on_the_base_command_line() {
        let first = argv(
            "aiperf profile -m m --concurrency 2 --variant small:isl=8 --sweep-variant v1:isl=16",
        );
        let v = variations(
            &first,
            &[
                variant("small", &[("isl", "8"), ("request_rate", "2.5")]),
                variant("v1", &[("concurrency", "16"), ("streaming", "true")]),
            ],
        )
        .unwrap();
        assert_eq!(
            v[0].argv,
            argv(
                "aiperf profile -m m --concurrency 2 --synthetic-input-tokens-mean=8 --request-rate=2.5"
            )
        );
        assert_eq!(
            v[1].argv,
            argv("aiperf profile -m m --concurrency=16 --streaming")
        );
        assert_eq!(
            (v[0].label(), v[0].dir_name()),
            ("small".into(), "small".into())
        );
        assert_eq!(
            v[0].values,
            [
                ("datasets.main.prompts.isl.mean", Value::from(8)),
                ("phases.profiling.rate", Value::from(2.5))
            ]
        );
        assert_eq!(v[1].values[1], ("endpoint.streaming", Value::Bool(true)));
        let e = variations(&first, &[variant("x", &[("no-such", "1")])]).unwrap_err();
        assert!(e.contains("unknown key 'no-such'"), "{e}");
        let e = variations(&first, &[variant("x", &[("streaming", "3")])]).unwrap_err();
        assert!(e.contains("switch"), "{e}");
        for key in ["num-profile-runs", "variant", "artifact-dir", "random_seed"] {
            let e = variations(&first, &[variant("x", &[(key, "2")])]).unwrap_err();
            assert!(e.contains("cannot differ between variants"), "{key}: {e}");
        }
    }

    #[test]
    fn a_name_that_could_leave_the_directory_is_cleaned() {
        let v = variations(
            &argv("aiperf profile"),
            &[variant("../a:b", &[("isl", "1")])],
        )
        .unwrap();
        assert_eq!(v[0].dir_name(), "ab");
        let v = variations(&argv("aiperf profile"), &[variant("..", &[("isl", "1")])]).unwrap();
        assert_eq!(v[0].dir_name(), "variation_0");
    }
}
