//! AIPerf's YAML config file (`-f`/`--config`, schema 2.0): each key with a row in the flag
//! table (`flags::FLAGS`) becomes that flag's argument, placed before the typed ones, so a
//! flag typed on the command line wins. Any other key is refused with its path and the keys
//! that may sit there.
//!
//! Sweeps: a list of numbers at a sweepable key of a phase (`concurrency: [1, 4, 16]`), or
//! under `sweep.parameters` (`{concurrency: [1, 4], datasets.main.prompts.isl: [128, 512]}`),
//! becomes that flag's comma list (`--concurrency=1,4,16`), which the command line's sweep
//! reads; a list overrides the same key's single value.

use serde_json::{Map, Value};
use std::path::Path;

use super::flags::{self, Flag, Kind};

/// `--flag=value` arguments (or a bare `--flag` for a switch) for the file's settings;
/// `profile` is the `profile` command, whose flags the rows name.
pub fn arguments(path: &Path, profile: &clap::Command) -> Result<Vec<String>, String> {
    let read = read(path, profile)?;
    match read.errors.first() {
        Some(e) => Err(format!("--config {}: {e}", path.display())),
        None => Ok(read.singles().map(|s| s.arg.clone()).collect()),
    }
}

/// One setting of the file: the argument it becomes, and where it sits in the file.
#[derive(Debug, Clone)]
pub struct Setting {
    pub arg: String,
    /// The key's path in the file (`benchmark.phases.0.concurrency`).
    pub at: String,
    pub flag: &'static Flag,
    /// A sweep: the values of the list (`arg` holds them comma-joined).
    pub list: Option<Vec<String>>,
}

/// What a file holds: its settings, and every key that could not be read (`path: why`).
#[derive(Debug, Default)]
pub struct Read {
    pub settings: Vec<Setting>,
    pub errors: Vec<String>,
}

impl Read {
    /// The swept settings (lists), one per flag: `sweep.parameters` wins over a phase's list.
    pub fn lists(&self) -> Vec<&Setting> {
        let mut out: Vec<&Setting> = Vec::new();
        for s in self.settings.iter().filter(|s| s.list.is_some()) {
            match out.iter_mut().find(|o| o.flag.id == s.flag.id) {
                Some(o) if s.at.starts_with("sweep.") => *o = s,
                Some(_) => {}
                None => out.push(s),
            }
        }
        out
    }

    /// The single-valued settings, without those a list sweeps.
    pub fn singles(&self) -> impl Iterator<Item = &Setting> {
        let swept: Vec<&str> = self.lists().iter().map(|s| s.flag.id).collect();
        self.settings
            .iter()
            .filter(move |s| s.list.is_none() && !swept.contains(&s.flag.id))
    }
}

/// Reads the file through every key, collecting each key's error rather than stopping at
/// the first. `Err` when the file cannot be read or is not YAML.
pub fn read(path: &Path, profile: &clap::Command) -> Result<Read, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--config {}: cannot read it: {e}", path.display()))?;
    let root: Value = serde_saphyr::from_str(&text)
        .map_err(|e| format!("--config {}: not valid YAML: {e}", path.display()))?;
    let mut reader = Reader {
        profile,
        out: Read::default(),
    };
    let result = reader.root(&root);
    reader.keep(result);
    Ok(reader.out)
}

/// Each setting's value checked as its flag's parser checks it, one setting at a time, so
/// that every bad value is named by its path in the file (`benchmark.phases.0.concurrency:
/// expected an integer, got "four"`). `cmd` is the `aiperf` command with `--model` optional.
pub fn value_errors(settings: &[Setting], cmd: &clap::Command) -> Vec<String> {
    let mut errors = Vec::new();
    let args = settings.iter().flat_map(|s| {
        let one = |arg: String| (s, arg);
        match &s.list {
            None => vec![one(s.arg.clone())],
            Some(values) => {
                let long = s.arg.split('=').next().unwrap_or("");
                values.iter().map(|v| one(format!("{long}={v}"))).collect()
            }
        }
    });
    for (s, arg) in args {
        let argv = vec!["aiperf".into(), "profile".into(), arg.clone().into()];
        let argv = super::spellings::normalize(cmd, argv);
        let Err(e) = cmd.clone().try_get_matches_from(argv) else {
            continue;
        };
        use clap::error::ErrorKind;
        if !matches!(
            e.kind(),
            ErrorKind::InvalidValue | ErrorKind::ValueValidation
        ) {
            continue;
        }
        let value = arg.split_once('=').map_or("", |(_, v)| v);
        let expected = match s.flag.kind {
            Kind::Int if value.trim().parse::<f64>().is_err() => Some("an integer"),
            Kind::Float if value.trim().parse::<f64>().is_err() => Some("a number"),
            _ => None,
        };
        errors.push(match expected {
            Some(what) => format!("{}: expected {what}, got \"{value}\"", s.at),
            None => format!("{}: {}", s.at, clap_reason(&e)),
        });
    }
    errors
}

/// clap's message without its `error: ` and usage lines, on one line.
fn clap_reason(e: &clap::Error) -> String {
    let text = e.render().to_string();
    text.lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ")
}

/// AIPerf's bare names for a phase's sweep keys (`concurrency` is
/// `phases.profiling.concurrency`).
const SWEEP_ALIASES: [&str; 7] = [
    "concurrency",
    "prefill_concurrency",
    "rate",
    "requests",
    "duration",
    "sessions",
    "users",
];

/// The flag a `sweep.parameters` path sweeps: AIPerf's bare names, any dataset name for
/// the one dataset, `isl` for `isl.mean`. Only flags whose comma list sweeps.
fn sweep_flag(path: &str, at: &str) -> Result<&'static Flag, String> {
    if path.starts_with("benchmark.") {
        return Err(format!(
            "{at}: drop the `benchmark.` prefix; paths are under the benchmark block (e.g. phases.profiling.rate)"
        ));
    }
    let mut full = match path {
        p if SWEEP_ALIASES.contains(&p) => format!("phases.profiling.{p}"),
        p => p.to_string(),
    };
    if let Some(rest) = full.strip_prefix("datasets.")
        && let Some((_, tail)) = rest.split_once('.')
    {
        full = format!("datasets.main.{tail}");
    }
    let f = flags::by_path(&full).or_else(|| {
        SHORTHANDS
            .iter()
            .find_map(|main| flags::by_path(&format!("{full}.{main}")))
    });
    match f {
        Some(f) if f.sweep => Ok(f),
        _ => {
            let mut known: Vec<&str> = flags::FLAGS
                .iter()
                .filter(|f| f.sweep)
                .filter_map(|f| f.path)
                .collect();
            known.sort_unstable();
            Err(format!(
                "{at}: this build sweeps only numeric keys: {}",
                known.join(", ")
            ))
        }
    }
}

struct Reader<'c> {
    profile: &'c clap::Command,
    out: Read,
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

fn unknown(at: &str, known: &[&str]) -> String {
    format!(
        "{at}: unknown or unsupported key; this build reads {} here",
        known.join(", ")
    )
}

/// Other spellings AIPerf's loader accepts, by config path.
const ALIASES: [(&str, &str); 3] = [
    ("endpoint.url", "endpoint.urls"),
    ("gpu_telemetry.url", "gpu_telemetry.urls"),
    ("server_metrics.url", "server_metrics.urls"),
];

/// A bare value where a mapping goes is its main key: `isl: 512` is `isl.mean: 512`,
/// `gpu_telemetry: URL` is `gpu_telemetry.urls`, `concurrency_ramp: 30` its duration.
const SHORTHANDS: [&str; 3] = ["mean", "urls", "duration"];

/// Keys read by the reader itself, not through a flag row.
const DATASET_KEYS: [&str; 2] = ["name", "type"];
const PHASE_KEYS: [&str; 3] = ["name", "kind", "exclude_from_results"];

impl Reader<'_> {
    fn root(&mut self, root: &Value) -> Result<(), String> {
        for (key, at, v) in entries(root, "")? {
            match key.as_str() {
                "schema_version" => match scalar(v, &at)?.as_str() {
                    "2.0" | "2" => {}
                    other => {
                        return Err(format!(
                            "{at}: schema version {other} is not supported; this build reads \"2.0\""
                        ));
                    }
                },
                "benchmark" => {
                    let r = self.benchmark(v, &at);
                    self.keep(r);
                }
                "sweep" => {
                    let r = self.sweep(v, &at);
                    self.keep(r);
                }
                _ => {
                    let top: Vec<&str> = flags::keys_under("")
                        .into_iter()
                        .filter_map(|k| k.strip_prefix('^'))
                        .collect();
                    if !top.contains(&key.as_str()) {
                        let mut known = vec!["schema_version", "benchmark"];
                        known.extend(top);
                        self.out.errors.push(unknown(&at, &known));
                        continue;
                    }
                    let r = self.walk(v, &at, &format!("^{key}"));
                    self.keep(r);
                }
            }
        }
        Ok(())
    }

    fn benchmark(&mut self, b: &Value, at: &str) -> Result<(), String> {
        for (key, at, v) in entries(b, at)? {
            let r = match key.as_str() {
                "model" | "models" => self.models(v, &at),
                "dataset" => self.dataset(v, &at),
                "datasets" => match v.as_array().map(Vec::as_slice) {
                    Some([one]) => self.dataset(one, &format!("{at}.0")),
                    _ => Err(format!("{at}: give a list of one dataset")),
                },
                "phases" => self.phases(v, &at),
                "warmup" | "profiling" => self.phase(v, &at, &key),
                _ => self.key(
                    v,
                    &at,
                    "",
                    &key,
                    &["model", "dataset", "warmup", "profiling"],
                ),
            };
            self.keep(r);
        }
        Ok(())
    }

    /// `model: m`, `models: [a, b]`, `models: [{name: a}]` or `models: {strategy, items}`.
    fn models(&mut self, v: &Value, at: &str) -> Result<(), String> {
        let names = flags::by_path("models.items").expect("a row for models.items");
        match v {
            Value::Object(_) => {
                for (key, at, v) in entries(v, at)? {
                    let r = match key.as_str() {
                        "items" => self.models(v, &at),
                        _ => self.key(v, &at, "models", &key, &[]),
                    };
                    self.keep(r);
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let at = format!("{at}.{i}");
                    let name = match item.get("name") {
                        Some(name) => scalar(name, &format!("{at}.name"))?,
                        None => scalar(item, &at)?,
                    };
                    self.push(names, Some(&name), &at);
                }
                Ok(())
            }
            _ => self.flag(names, v, at),
        }
    }

    fn dataset(&mut self, d: &Value, at: &str) -> Result<(), String> {
        for (key, at, v) in entries(d, at)? {
            match key.as_str() {
                "name" => {}
                "type" => match scalar(v, &at)?.as_str() {
                    "synthetic" | "file" | "public" => {}
                    other => {
                        return Err(format!(
                            "{at}: dataset type {other} is not supported; this build reads synthetic, file or public"
                        ));
                    }
                },
                _ => {
                    let r = self.key(v, &at, "datasets.main", &key, &DATASET_KEYS);
                    self.keep(r);
                }
            }
        }
        Ok(())
    }

    /// A list of phases named `warmup`/`profiling`, or one flat mapping (the profiling
    /// phase).
    fn phases(&mut self, p: &Value, at: &str) -> Result<(), String> {
        let Some(list) = p.as_array() else {
            return self.phase(p, at, "profiling");
        };
        for (i, phase) in list.iter().enumerate() {
            let at = format!("{at}.{i}");
            let name = phase.get("name").and_then(Value::as_str).unwrap_or("");
            let kind = phase.get("kind").and_then(Value::as_str).unwrap_or(name);
            let r = match kind {
                "warmup" | "profiling" => self.phase(phase, &at, kind),
                _ => Err(format!(
                    "{at}: this build runs one warmup and one profiling phase; name the phase warmup or profiling"
                )),
            };
            self.keep(r);
        }
        Ok(())
    }

    fn phase(&mut self, p: &Value, at: &str, name: &str) -> Result<(), String> {
        let prefix = format!("phases.{name}");
        for (key, at, v) in entries(p, at)? {
            let r = self.phase_key(v, &at, &prefix, &key);
            self.keep(r);
        }
        Ok(())
    }

    fn phase_key(&mut self, v: &Value, at: &str, prefix: &str, key: &str) -> Result<(), String> {
        match key {
            "name" | "kind" | "exclude_from_results" => Ok(()),
            // The phase type is its arrival pattern, or `concurrency` for none.
            "type" => match scalar(v, at)?.as_str() {
                "concurrency" => Ok(()),
                "poisson" | "constant" | "gamma" => self.key(v, at, prefix, "type", &PHASE_KEYS),
                other => Err(format!(
                    "{at}: phase type {other} is not supported; this build reads concurrency, poisson, constant or gamma"
                )),
            },
            _ => self.key(v, at, prefix, key, &PHASE_KEYS),
        }
    }

    /// Key `key` (at file path `at`) under config path `prefix`: a flag's row, or a mapping
    /// of them; `extra` names the keys the caller reads itself, for the error.
    fn key(
        &mut self,
        v: &Value,
        at: &str,
        prefix: &str,
        key: &str,
        extra: &[&str],
    ) -> Result<(), String> {
        let mut path = if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        };
        if let Some((_, to)) = ALIASES.iter().find(|(from, _)| *from == path) {
            path = to.to_string();
        }
        let last = path.rsplit('.').next().unwrap_or(&path);
        let known = flags::keys_under(prefix);
        if !known.contains(&last) {
            let mut known: Vec<&str> = known.into_iter().filter(|k| !k.starts_with('^')).collect();
            known.extend(extra);
            known.sort_unstable();
            return Err(unknown(at, &known));
        }
        self.walk(v, at, &path)
    }

    /// The value at config path `path`: a flag's own, a `mean` given as a bare number
    /// (`isl: 512`), or a mapping of further keys.
    fn walk(&mut self, v: &Value, at: &str, path: &str) -> Result<(), String> {
        if let Some(f) = flags::by_path(path) {
            return self.flag(f, v, at);
        }
        if !v.is_object()
            && let Some(f) = SHORTHANDS
                .iter()
                .find_map(|main| flags::by_path(&format!("{path}.{main}")))
        {
            return self.flag(f, v, at);
        }
        for (key, at, v) in entries(v, at)? {
            let r = self.key(v, &at, path, &key, &[]);
            self.keep(r);
        }
        Ok(())
    }

    /// A key's error is kept and the reading goes on with the next key.
    fn keep(&mut self, result: Result<(), String>) {
        if let Err(e) = result {
            self.out.errors.push(e);
        }
    }

    fn long(&self, f: &Flag) -> &str {
        self.profile
            .get_arguments()
            .find(|a| a.get_id() == f.id)
            .and_then(|a| a.get_long())
            .expect("every row names a flag with a long name")
    }

    /// `--flag=value`, or `--flag` alone, from the key at `at`.
    fn push(&mut self, f: &'static Flag, value: Option<&str>, at: &str) {
        let long = self.long(f).to_string();
        let arg = match value {
            Some(value) => format!("--{long}={value}"),
            None => format!("--{long}"),
        };
        self.out.settings.push(Setting {
            arg,
            at: at.to_string(),
            flag: f,
            list: None,
        });
    }

    /// `--flag=v1,v2,...` from the list at `at`: a sweep over `f`.
    fn push_list(&mut self, f: &'static Flag, items: &[Value], at: &str) -> Result<(), String> {
        if items.is_empty() {
            return Err(format!("{at}: the list is empty; give the values to sweep"));
        }
        let values = items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Number(n) => Ok(n.to_string()),
                _ => Err(format!("{at}.{i}: a sweep takes numbers, got {item}")),
            })
            .collect::<Result<Vec<String>, String>>()?;
        let long = self.long(f).to_string();
        self.out.settings.push(Setting {
            arg: format!("--{long}={}", values.join(",")),
            at: at.to_string(),
            flag: f,
            list: Some(values),
        });
        Ok(())
    }

    /// `sweep:`: `parameters` (grid or zip lists by dotted path) and the rows under
    /// `^sweep` (type, cooldown_seconds, same_seed, ...).
    fn sweep(&mut self, v: &Value, at: &str) -> Result<(), String> {
        for (key, at, v) in entries(v, at)? {
            let r = match key.as_str() {
                "parameters" => self.sweep_parameters(v, &at),
                "runs" | "dimensions" | "samples" => Err(format!(
                    "{at}: scenario and sampled (sobol, latin_hypercube) sweeps are not supported by this build; \
                     use sweep.type grid or zip with sweep.parameters"
                )),
                _ => self.key(v, &at, "^sweep", &key, &["parameters"]),
            };
            self.keep(r);
        }
        Ok(())
    }

    fn sweep_parameters(&mut self, v: &Value, at: &str) -> Result<(), String> {
        let map = v
            .as_object()
            .ok_or_else(|| format!("{at}: expected a mapping of dotted paths to lists"))?;
        for (path, values) in map {
            let at = format!("{at}.{path}");
            let r = sweep_flag(path, &at).and_then(|f| match values {
                Value::Array(items) => self.push_list(f, items, &at),
                _ => Err(format!("{at}: give a list of values to sweep")),
            });
            self.keep(r);
        }
        Ok(())
    }

    fn flag(&mut self, f: &'static Flag, v: &Value, at: &str) -> Result<(), String> {
        match f.kind {
            Kind::Switch | Kind::Off => {
                let Value::Bool(on) = v else {
                    return Err(format!("{at}: give true or false"));
                };
                // `--x` when true; an off switch (`--no-x`) when false.
                if *on == (f.kind == Kind::Switch) {
                    self.push(f, None, at);
                }
            }
            Kind::List => match v {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let item = scalar(item, &format!("{at}.{i}"))?;
                        self.push(f, Some(&item), at);
                    }
                }
                Value::Object(_) => {
                    for (key, at, item) in entries(v, at)? {
                        let item = scalar(item, &at)?;
                        self.push(f, Some(&format!("{key}:{item}")), &at);
                    }
                }
                _ => {
                    let item = scalar(v, at)?;
                    self.push(f, Some(&item), at);
                }
            },
            // `slos: {request_latency: 250, ...}`: `--goodput "request_latency:250 ..."`.
            Kind::Text if v.is_object() => {
                let pairs = entries(v, at)?
                    .into_iter()
                    .map(|(key, at, item)| Ok(format!("{key}:{}", scalar(item, &at)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                self.push(f, Some(&pairs.join(" ")), at);
            }
            // AIPerf sweeps a list only at a phase's keys; elsewhere `sweep.parameters`.
            Kind::Int | Kind::Float if v.is_array() => {
                let items = v.as_array().expect("an array");
                match f.path {
                    Some(p) if f.sweep && p.starts_with("phases.") => {
                        self.push_list(f, items, at)?
                    }
                    Some(p) if f.sweep => {
                        return Err(format!(
                            "{at}: a list sweeps only at a phase's keys; for this key write it under sweep.parameters ({p}: [...])"
                        ));
                    }
                    _ => {
                        return Err(format!(
                            "{at}: give a single value (this key cannot be swept)"
                        ));
                    }
                }
            }
            Kind::Int | Kind::Float | Kind::Text => {
                let value = scalar(v, at)?;
                self.push(f, Some(&value), at);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(yaml: &str) -> Result<Vec<String>, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, yaml).unwrap();
        let cmd = crate::cli::command();
        let profile = cmd.find_subcommand("profile").unwrap();
        arguments(&file, profile).map_err(|e| e.replace(&file.display().to_string(), "FILE"))
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
            "--synthetic-input-tokens-mean=100",
            "--synthetic-input-tokens-stddev=5",
            "--output-tokens-mean=20",
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
            [
                "--cache-bust=warmup_isolation_first_turn",
                "--synthetic-input-tokens-mean=64"
            ]
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
        assert!(e.starts_with("--config FILE: benchmark.endpoint.urll: unknown or unsupported key; this build reads api_key, "), "{e}");
        assert!(e.contains(", urls, "), "{e}");
        let e = args_of("sweep: {parameters: {x: [1, 2]}}\n").unwrap_err();
        assert!(
            e.contains(": sweep.parameters.x: this build sweeps only numeric keys: "),
            "{e}"
        );
        let e = args_of("swep: {type: grid}\n").unwrap_err();
        assert!(
            e.contains(
                ": swep: unknown or unsupported key; this build reads schema_version, benchmark, "
            ),
            "{e}"
        );
        let e =
            args_of("benchmark:\n  phases:\n    - {name: profiling, concurency: 8}\n").unwrap_err();
        assert!(e.contains("benchmark.phases.0.concurency: unknown"), "{e}");
        let e = args_of("benchmark:\n  model: ${MODEL}\n").unwrap_err();
        assert!(e.contains("benchmark.model: variable substitution"), "{e}");
        let e = args_of("benchmark: [1\n").unwrap_err();
        assert!(e.contains("not valid YAML"), "{e}");
    }

    /// The YAML that holds `value` at config path `path`, as a user would write it.
    fn yaml_at(path: &str, value: &Value) -> String {
        let keys: Vec<&str> = match path.strip_prefix('^') {
            Some(top) => top.split('.').collect(),
            None => std::iter::once("benchmark")
                .chain(path.split('.'))
                .collect(),
        };
        // The file spells the one dataset `dataset:` and a phase by its name.
        let keys: Vec<&str> = match keys.as_slice() {
            ["benchmark", "datasets", "main", rest @ ..] => {
                [&["benchmark", "dataset"], rest].concat()
            }
            ["benchmark", "phases", phase, rest @ ..] => [&["benchmark", phase], rest].concat(),
            _ => keys,
        };
        let mut tree = value.clone();
        for key in keys.iter().rev() {
            tree = serde_json::json!({ *key: tree });
        }
        tree.to_string()
    }

    /// Every row with a path: a file holding a value there sets that flag to that value,
    /// as the command line would.
    #[test]
    fn every_path_reaches_its_flag() {
        for f in flags::FLAGS {
            let Some(path) = f.path else { continue };
            let value = flags::testing::accepted_sample(f);
            let args = args_of(&yaml_at(path, &value)).unwrap_or_else(|e| panic!("{path}: {e}"));
            let m = flags::testing::profile_matches(f, &args)
                .unwrap_or_else(|e| panic!("{path} -> {args:?}: {e}"));
            let source = m.value_source(f.id);
            assert_eq!(
                source,
                Some(clap::parser::ValueSource::CommandLine),
                "{path} -> {args:?}"
            );
            let got: Vec<String> = m
                .get_raw(f.id)
                .into_iter()
                .flatten()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            if !value.is_boolean() {
                assert_eq!(got, flags::testing::raw(&value), "{path} -> {args:?}");
            }
        }
    }
}
