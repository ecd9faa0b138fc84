//! List-valued flags (`--concurrency 1,4,16`): which flags may carry a list, and the
//! command line of each sweep point (every list replaced by one of its values), so that each
//! point is parsed and checked by the same code as a single run.

use serde_json::Value;

use crate::config::multirun::SweepType;

use crate::cli::flags::{FLAGS, Flag, Kind};

/// One list found on the command line.
#[derive(Debug, Clone)]
pub struct ListParam {
    /// Dotted parameter path, e.g. `phases.profiling.concurrency`.
    pub path: &'static str,
    /// The values as typed (trimmed), in order.
    raw: Vec<String>,
    /// The values typed as AIPerf types them (int or float).
    values: Vec<Value>,
    /// Where the value sits in argv, and the `--flag=` prefix when written inline.
    at: usize,
    inline: Option<String>,
}

impl ListParam {
    /// The values as AIPerf types them.
    pub fn values(&self) -> &[Value] {
        &self.values
    }
}

/// The command line with every list found and taken out.
#[derive(Debug, Clone)]
pub struct Lists {
    /// argv with each list replaced by its first value: what single-run flags are parsed from.
    pub first: Vec<String>,
    /// The lists, sorted by parameter path (AIPerf's order).
    pub params: Vec<ListParam>,
}

/// One point of a sweep.
#[derive(Debug, Clone)]
pub struct Variation {
    pub index: usize,
    /// (dotted path, value), sorted by path.
    pub values: Vec<(&'static str, Value)>,
    /// The command line of this point.
    pub argv: Vec<String>,
    /// The label when the point has a name (a `--variant`, a pareto-sweep shape) rather
    /// than being named by its values.
    pub name: Option<String>,
    /// The point's directory is named by `name`, not by its values (a `--variant`).
    pub dir_by_name: bool,
}

impl Variation {
    /// `phases.profiling.concurrency=10, phases.profiling.rate=5.0`.
    pub fn label(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        if self.values.is_empty() {
            return "base".into();
        }
        self.values
            .iter()
            .map(|(p, v)| format!("{p}={}", python_str(v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The (path, value) pairs, owned.
    pub fn owned_values(&self) -> Vec<(String, Value)> {
        self.values
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// `concurrency_10__rate_5.0`: the point's directory name.
    pub fn dir_name(&self) -> String {
        if self.dir_by_name {
            return clean_dir(&self.label(), self.index);
        }
        let name = self
            .values
            .iter()
            .map(|(p, v)| format!("{}_{}", leaf(p), python_str(v)))
            .collect::<Vec<_>>()
            .join("__");
        clean_dir(&name, self.index)
    }
}

/// `name` without what could leave the directory or trip a file system (`..`, `/`, `:`,
/// ...); `variation_<index>` when nothing usable is left.
fn clean_dir(name: &str, index: usize) -> String {
    let clean: String = name
        .replace("..", "")
        .chars()
        .filter(|c| !matches!(c, '/' | '\\' | '<' | '>' | ':' | '"' | '|' | '?' | '*'))
        .collect();
    if clean.chars().all(|c| c == '.') {
        format!("variation_{index}")
    } else {
        clean
    }
}

/// The last segment of a dotted path.
pub fn leaf(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// A value as Python's `str()` prints it (`10`, `5.0`, `0.5`, `1e-05`), as AIPerf names
/// directories and labels.
pub fn python_str(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if v.is_f64() => python_float(f),
        _ => v.to_string(),
    }
}

fn python_float(f: f64) -> String {
    if f == 0.0 || (1e-4..1e16).contains(&f.abs()) {
        let s = format!("{f:?}");
        if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        // Python's repr switches to exponent notation with at least two exponent digits.
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').expect("exponent form");
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        format!("{mantissa}e{sign}{digits:0>2}")
    }
}

/// Finds the lists in a `profile` command line. `Ok` with no params when there are none; an
/// error names the flag and the element that is not a number.
pub fn find(argv: &[String]) -> Result<Lists, String> {
    let cmd = crate::cli::command();
    let Some(profile) = cmd.find_subcommand("profile") else {
        return Ok(Lists {
            first: argv.to_vec(),
            params: Vec::new(),
        });
    };
    let Some(start) = argv.iter().position(|a| a == "profile") else {
        return Ok(Lists {
            first: argv.to_vec(),
            params: Vec::new(),
        });
    };
    // The flags a comma list sweeps, with every spelling of each.
    let longs: Vec<(&Flag, Vec<String>)> = FLAGS
        .iter()
        .filter(|f| f.sweep)
        .filter_map(|f| {
            let arg = profile.get_arguments().find(|a| a.get_id() == f.id)?;
            let mut names: Vec<String> = arg.get_long().map(str::to_string).into_iter().collect();
            names.extend(
                arg.get_all_aliases()
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_string),
            );
            Some((f, names))
        })
        .collect();
    let flag_of = |token: &str| -> Option<&Flag> {
        let name = token.strip_prefix("--")?.replace('_', "-");
        longs
            .iter()
            .find(|(_, names)| names.contains(&name))
            .map(|(f, _)| *f)
    };

    let mut first = argv.to_vec();
    let mut params = Vec::new();
    let mut i = start + 1;
    while i < argv.len() {
        let token = &argv[i];
        if token == "--" {
            break;
        }
        let (flag, inline_value) = match token.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (token.as_str(), None),
        };
        let Some(f) = flag_of(flag) else {
            i += 1;
            continue;
        };
        let (value, at, inline) = match inline_value {
            Some(v) => (v, i, Some(format!("{flag}="))),
            None => match argv.get(i + 1) {
                Some(v) => (v.as_str(), i + 1, None),
                None => break,
            },
        };
        if value.contains(',') {
            let raw: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if raw.is_empty() {
                return Err(format!(
                    "{flag} '{value}': the list has no values; give e.g. {flag} 1,4,16"
                ));
            }
            let values = raw
                .iter()
                .map(|r| typed(f.kind, r).ok_or_else(|| {
                    let want = match f.kind {
                        Kind::Int => "a whole number",
                        _ => "a number",
                    };
                    format!("{flag} '{value}': '{r}' is not {want}; give a comma-separated list such as {flag} 1,4,16")
                }))
                .collect::<Result<Vec<_>, _>>()?;
            first[at] = format!("{}{}", inline.as_deref().unwrap_or(""), raw[0]);
            let path = f.path.expect("a sweepable flag has a config path");
            if params.iter().any(|p: &ListParam| p.path == path) {
                return Err(format!("{flag}: given twice as a list; give one list"));
            }
            params.push(ListParam {
                path,
                raw,
                values,
                at,
                inline,
            });
        }
        i = at + 1;
    }
    // A single value (`10,`) is not a sweep.
    params.retain(|p| p.raw.len() > 1);
    params.sort_by_key(|p| p.path);
    Ok(Lists { first, params })
}

fn typed(kind: Kind, raw: &str) -> Option<Value> {
    match kind {
        Kind::Int => crate::cli::whole_number(raw).ok().map(Value::from),
        _ => raw
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::from),
    }
}

impl Lists {
    /// True when the command line lists more than one point.
    pub fn is_sweep(&self) -> bool {
        !self.params.is_empty()
    }

    /// The sweep points in AIPerf's order: grid = Cartesian product with the last parameter
    /// (by sorted path) varying fastest; zip = the i-th value of each list together.
    pub fn variations(&self, sweep_type: SweepType) -> Result<Vec<Variation>, String> {
        let combos: Vec<Vec<usize>> = match sweep_type {
            _ if self.params.is_empty() => vec![Vec::new()],
            SweepType::Zip if self.params.len() > 1 => {
                let n = self.params[0].raw.len();
                if self.params.iter().any(|p| p.raw.len() != n) {
                    let lens: Vec<String> = self
                        .params
                        .iter()
                        .map(|p| format!("{}: {}", p.path, p.raw.len()))
                        .collect();
                    return Err(format!(
                        "--sweep-type zip: every list must have the same length; got {}",
                        lens.join(", ")
                    ));
                }
                (0..n).map(|i| vec![i; self.params.len()]).collect()
            }
            _ => {
                let mut out = vec![Vec::new()];
                for p in &self.params {
                    out = out
                        .into_iter()
                        .flat_map(|c: Vec<usize>| {
                            (0..p.raw.len()).map(move |i| {
                                let mut c = c.clone();
                                c.push(i);
                                c
                            })
                        })
                        .collect();
                }
                out
            }
        };
        Ok(combos
            .into_iter()
            .enumerate()
            .map(|(index, picks)| {
                let mut argv = self.first.clone();
                let mut values = Vec::new();
                for (p, &k) in self.params.iter().zip(&picks) {
                    argv[p.at] = format!("{}{}", p.inline.as_deref().unwrap_or(""), p.raw[k]);
                    values.push((p.path, p.values[k].clone()));
                }
                Variation {
                    index,
                    values,
                    argv,
                    name: None,
                    dir_by_name: false,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn grid_sorts_by_path_and_varies_the_last_fastest() {
        let lists = find(&argv(
            "aiperf profile -m m --request-rate 5,7 --concurrency=10,20",
        ))
        .unwrap();
        let v = lists.variations(SweepType::Grid).unwrap();
        let labels: Vec<String> = v.iter().map(Variation::dir_name).collect();
        assert_eq!(
            labels,
            [
                "concurrency_10__rate_5.0",
                "concurrency_10__rate_7.0",
                "concurrency_20__rate_5.0",
                "concurrency_20__rate_7.0"
            ]
        );
        assert_eq!(
            v[1].label(),
            "phases.profiling.concurrency=10, phases.profiling.rate=7.0"
        );
        assert_eq!(
            v[3].argv,
            argv("aiperf profile -m m --request-rate 7 --concurrency=20")
        );
        assert_eq!(
            lists.first,
            argv("aiperf profile -m m --request-rate 5 --concurrency=10")
        );
    }

    #[test]
    fn zip_pairs_and_needs_equal_lengths() {
        let lists = find(&argv("aiperf profile --isl 128,256 --osl 64,32")).unwrap();
        let v = lists.variations(SweepType::Zip).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].dir_name(), "mean_128__mean_64");
        assert_eq!(v[1].dir_name(), "mean_256__mean_32");
        assert_eq!(lists.variations(SweepType::Grid).unwrap().len(), 4);
        let uneven = find(&argv("aiperf profile --isl 1,2,3 --osl 64,32")).unwrap();
        let e = uneven.variations(SweepType::Zip).unwrap_err();
        assert!(e.contains("same length"), "{e}");
    }

    #[test]
    fn single_values_and_other_flags_are_not_sweeps() {
        let lists = find(&argv(
            "aiperf profile --concurrency 10, --extra-inputs a:1,b:2 -m a,b",
        ))
        .unwrap();
        assert!(!lists.is_sweep());
        assert_eq!(lists.first[3], "10");
        // Duplicates are kept (AIPerf runs them all).
        let dup = find(&argv("aiperf profile --concurrency 4,8,4")).unwrap();
        assert_eq!(dup.variations(SweepType::Grid).unwrap().len(), 3);
    }

    #[test]
    fn aliases_and_bad_elements() {
        let lists = find(&argv(
            "aiperf profile --num-requests 10,20 --image-batch-size 1,2",
        ))
        .unwrap();
        let paths: Vec<&str> = lists.params.iter().map(|p| p.path).collect();
        assert_eq!(
            paths,
            [
                "datasets.main.images.batch_size",
                "phases.profiling.requests"
            ]
        );
        let e = find(&argv("aiperf profile --concurrency 1,x")).unwrap_err();
        assert!(
            e.contains("--concurrency '1,x': 'x' is not a whole number"),
            "{e}"
        );
    }

    #[test]
    fn python_rendering() {
        assert_eq!(python_str(&Value::from(5.0)), "5.0");
        assert_eq!(python_str(&Value::from(0.5)), "0.5");
        assert_eq!(python_str(&Value::from(1e-5)), "1e-05");
        assert_eq!(python_str(&Value::from(2.5e16)), "2.5e+16");
        assert_eq!(python_str(&Value::from(12u64)), "12");
    }
}
