//! AIPerf's YAML config file (`-f`/`--config`, schema 2.0): the keys that have a flag in
//! this build become command-line arguments placed before the typed ones, so a flag typed on
//! the command line wins. Any other key is refused with its path.

use serde_json::{Map, Value};
use std::path::Path;

/// `--flag=value` arguments (or a bare `--flag` for a true switch) for the file's settings.
pub fn arguments(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--config {}: cannot read it: {e}", path.display()))?;
    let root: Value = serde_saphyr::from_str(&text)
        .map_err(|e| format!("--config {}: not valid YAML: {e}", path.display()))?;
    let mut out = Args::default();
    read_root(&root, &mut out).map_err(|e| format!("--config {}: {e}", path.display()))?;
    Ok(out.0)
}

#[derive(Default)]
struct Args(Vec<String>);

impl Args {
    fn value(&mut self, flag: &str, v: &Value, at: &str) -> Result<(), String> {
        let text = scalar(v, at)?;
        self.0.push(format!("--{flag}={text}"));
        Ok(())
    }

    fn switch(&mut self, flag: &str, v: &Value, at: &str) -> Result<(), String> {
        match v {
            Value::Bool(true) => self.0.push(format!("--{flag}")),
            Value::Bool(false) => {}
            _ => return Err(format!("{at}: give true or false")),
        }
        Ok(())
    }
}

/// A number or string as it would be typed; `${VAR}` and `{{ }}` templating is refused.
fn scalar(v: &Value, at: &str) -> Result<String, String> {
    match v {
        Value::String(s) if s.contains("${") || s.contains("{{") => Err(format!(
            "{at}: variable substitution ({s}) is not supported by this build; write the value"
        )),
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(format!("{at}: give a single value")),
    }
}

/// `keyName` and `key_name` are the same key.
fn snake(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The entries of mapping `v` at `at` as (snake_case key, path, value); anything else is an
/// error.
fn entries<'a>(v: &'a Value, at: &str) -> Result<Vec<(String, String, &'a Value)>, String> {
    let map: &Map<String, Value> = v
        .as_object()
        .ok_or_else(|| format!("{}: expected a mapping", display(at)))?;
    Ok(map
        .iter()
        .map(|(k, v)| {
            let path = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            (snake(k), path, v)
        })
        .collect())
}

fn display(at: &str) -> &str {
    if at.is_empty() { "the file" } else { at }
}

fn unknown(path: &str, known: &str) -> String {
    format!("{path}: unknown or unsupported key; this build reads {known} here")
}

fn read_root(root: &Value, out: &mut Args) -> Result<(), String> {
    for (key, path, v) in entries(root, "")? {
        match key.as_str() {
            "schema_version" => match scalar(v, &path)?.as_str() {
                "2.0" | "2" => {}
                other => {
                    return Err(format!(
                        "{path}: schema version {other} is not supported; this build reads \"2.0\""
                    ));
                }
            },
            "random_seed" => out.value("random-seed", v, &path)?,
            "benchmark" => read_benchmark(v, &path, out)?,
            _ => return Err(unknown(&path, "schemaVersion, random_seed, benchmark")),
        }
    }
    Ok(())
}

fn read_benchmark(b: &Value, at: &str, out: &mut Args) -> Result<(), String> {
    for (key, path, v) in entries(b, at)? {
        match key.as_str() {
            "model" => out.value("model-names", v, &path)?,
            "models" => {
                let names = v
                    .as_array()
                    .ok_or_else(|| format!("{path}: give a list of model names"))?
                    .iter()
                    .map(|m| scalar(m, &path))
                    .collect::<Result<Vec<_>, _>>()?;
                out.0.push(format!("--model-names={}", names.join(",")));
            }
            "endpoint" => read_endpoint(v, &path, out)?,
            "dataset" => read_dataset(v, &path, out)?,
            "phases" => read_phases(v, &path, out)?,
            "artifacts" => {
                for (key, path, v) in entries(v, &path)? {
                    match key.as_str() {
                        "dir" => out.value("output-artifact-dir", v, &path)?,
                        _ => return Err(unknown(&path, "dir")),
                    }
                }
            }
            _ => {
                return Err(unknown(
                    &path,
                    "model, models, endpoint, dataset, phases, artifacts",
                ));
            }
        }
    }
    Ok(())
}

fn read_endpoint(e: &Value, at: &str, out: &mut Args) -> Result<(), String> {
    for (key, path, v) in entries(e, at)? {
        match key.as_str() {
            "url" => out.value("url", v, &path)?,
            "type" => out.value("endpoint-type", v, &path)?,
            "streaming" => out.switch("streaming", v, &path)?,
            "api_key" => out.value("api-key", v, &path)?,
            "timeout" => out.value("request-timeout-seconds", v, &path)?,
            _ => return Err(unknown(&path, "url, type, streaming, api_key, timeout")),
        }
    }
    Ok(())
}

fn read_dataset(d: &Value, at: &str, out: &mut Args) -> Result<(), String> {
    for (key, path, v) in entries(d, at)? {
        match key.as_str() {
            "type" => match scalar(v, &path)?.as_str() {
                "synthetic" | "file" => {}
                other => {
                    return Err(format!(
                        "{path}: dataset type {other} is not supported; this build reads synthetic or file"
                    ));
                }
            },
            "entries" => out.value("num-dataset-entries", v, &path)?,
            "path" => out.value("input-file", v, &path)?,
            "format" => out.value("custom-dataset-type", v, &path)?,
            "prompts" => {
                for (key, path, v) in entries(v, &path)? {
                    match key.as_str() {
                        "isl" => mean_stddev(v, &path, "isl", out)?,
                        "osl" => mean_stddev(v, &path, "osl", out)?,
                        "cache_bust" => {
                            for (key, path, v) in entries(v, &path)? {
                                match key.as_str() {
                                    "target" => out.value("cache-bust", v, &path)?,
                                    _ => return Err(unknown(&path, "target")),
                                }
                            }
                        }
                        _ => return Err(unknown(&path, "isl, osl, cache_bust")),
                    }
                }
            }
            _ => return Err(unknown(&path, "type, entries, path, format, prompts")),
        }
    }
    Ok(())
}

/// `isl: 512` or `isl: {mean: 512, stddev: 10}`.
fn mean_stddev(v: &Value, at: &str, flag: &str, out: &mut Args) -> Result<(), String> {
    if !v.is_object() {
        return out.value(flag, v, at);
    }
    for (key, path, v) in entries(v, at)? {
        match key.as_str() {
            "mean" => out.value(flag, v, &path)?,
            "stddev" => out.value(&format!("{flag}-stddev"), v, &path)?,
            _ => return Err(unknown(&path, "mean, stddev")),
        }
    }
    Ok(())
}

/// A flat mapping is the profiling phase; a list holds phases named `warmup`/`profiling`.
fn read_phases(p: &Value, at: &str, out: &mut Args) -> Result<(), String> {
    let Some(list) = p.as_array() else {
        return read_phase(p, at, false, out);
    };
    for (i, phase) in list.iter().enumerate() {
        let path = format!("{at}.{i}");
        let name = phase.get("name").and_then(Value::as_str).unwrap_or("");
        let kind = phase.get("kind").and_then(Value::as_str).unwrap_or(name);
        match kind {
            "warmup" => read_phase(phase, &path, true, out)?,
            "profiling" => read_phase(phase, &path, false, out)?,
            _ => {
                return Err(format!(
                    "{path}: this build runs one warmup and one profiling phase; name the phase warmup or profiling"
                ));
            }
        }
    }
    Ok(())
}

fn read_phase(p: &Value, at: &str, warmup: bool, out: &mut Args) -> Result<(), String> {
    let flag = |profiling: &'static str, warm: &'static str| if warmup { warm } else { profiling };
    for (key, path, v) in entries(p, at)? {
        match key.as_str() {
            "name" | "kind" => {}
            "exclude_from_results" if warmup => {}
            "type" => match scalar(v, &path)?.as_str() {
                "concurrency" => {}
                mode @ ("poisson" | "constant" | "gamma") => out.0.push(format!(
                    "--{}={mode}",
                    flag("request-rate-mode", "warmup-arrival-pattern")
                )),
                other => {
                    return Err(format!(
                        "{path}: phase type {other} is not supported; this build reads concurrency, poisson, constant or gamma"
                    ));
                }
            },
            "concurrency" => out.value(flag("concurrency", "warmup-concurrency"), v, &path)?,
            "requests" => out.value(flag("request-count", "warmup-request-count"), v, &path)?,
            "duration" => out.value(flag("benchmark-duration", "warmup-duration"), v, &path)?,
            "rate" => out.value(flag("request-rate", "warmup-request-rate"), v, &path)?,
            "grace_period" => out.value(
                flag("benchmark-grace-period", "warmup-grace-period"),
                v,
                &path,
            )?,
            "sessions" => out.value(flag("conversation-num", "num-warmup-sessions"), v, &path)?,
            "smoothness" if !warmup => out.value("arrival-smoothness", v, &path)?,
            _ => {
                return Err(unknown(
                    &path,
                    "name, kind, type, concurrency, requests, duration, rate, grace_period, sessions, smoothness (profiling), exclude_from_results (warmup)",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(yaml: &str) -> Result<Vec<String>, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, yaml).unwrap();
        arguments(&file).map_err(|e| e.replace(&file.display().to_string(), "FILE"))
    }

    #[test]
    fn keys_become_flags() {
        let args = args_of(
            "schemaVersion: \"2.0\"\nrandom_seed: 7\nbenchmark:\n  model: Qwen/Qwen2-VL-2B-Instruct\n  endpoint: {url: http://h:8000, type: chat, streaming: true}\n  dataset:\n    type: synthetic\n    entries: 50\n    prompts: {isl: {mean: 100, stddev: 5}, osl: 20}\n  phases:\n    - {name: warmup, type: concurrency, concurrency: 2, requests: 4, exclude_from_results: true}\n    - {name: profiling, type: poisson, rate: 3.5, requests: 30, gracePeriod: 10}\n  artifacts: {dir: out}\n",
        )
        .unwrap();
        // Key order does not matter: each flag is given once.
        let mut args = args;
        args.sort();
        let mut want = [
            "--random-seed=7",
            "--model-names=Qwen/Qwen2-VL-2B-Instruct",
            "--url=http://h:8000",
            "--endpoint-type=chat",
            "--streaming",
            "--num-dataset-entries=50",
            "--isl=100",
            "--isl-stddev=5",
            "--osl=20",
            "--warmup-concurrency=2",
            "--warmup-request-count=4",
            "--request-rate-mode=poisson",
            "--request-rate=3.5",
            "--request-count=30",
            "--benchmark-grace-period=10",
            "--output-artifact-dir=out",
        ];
        want.sort();
        assert_eq!(args, want);
    }

    #[test]
    fn cache_bust_target_becomes_the_flag() {
        let args = args_of(
            "benchmark:\n  dataset:\n    prompts: {isl: 64, cache_bust: {target: warmup_isolation_first_turn}}\n",
        )
        .unwrap();
        assert_eq!(
            args,
            ["--cache-bust=warmup_isolation_first_turn", "--isl=64"]
        );
    }

    #[test]
    fn a_flat_phase_is_the_profiling_phase() {
        let args =
            args_of("benchmark:\n  phases: {type: concurrency, concurrency: 8, requests: 100}\n")
                .unwrap();
        assert_eq!(args, ["--concurrency=8", "--request-count=100"]);
    }

    #[test]
    fn unknown_keys_are_refused_with_their_path() {
        let e = args_of("benchmark:\n  endpoint: {url: x, urll: y}\n").unwrap_err();
        assert!(e.starts_with("--config FILE: benchmark.endpoint.urll: unknown or unsupported key; this build reads url, type"), "{e}");
        let e = args_of("sweep: {type: grid}\n").unwrap_err();
        assert!(e.contains(": sweep: unknown or unsupported key"), "{e}");
        let e =
            args_of("benchmark:\n  phases:\n    - {name: profiling, concurency: 8}\n").unwrap_err();
        assert!(e.contains("benchmark.phases.0.concurency: unknown"), "{e}");
        let e = args_of("benchmark:\n  model: ${MODEL}\n").unwrap_err();
        assert!(e.contains("benchmark.model: variable substitution"), "{e}");
        let e = args_of("benchmark: [1\n").unwrap_err();
        assert!(e.contains("not valid YAML"), "{e}");
    }
}
