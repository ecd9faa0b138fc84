//! Whether two runs can be compared: the same endpoint type and workload (else an error,
//! unless forced), and warnings for what makes the comparison weaker.

use serde_json::Value;

use super::side::Side;

/// The refusals (empty when the runs are comparable) and the warnings.
#[derive(Debug, Default)]
pub struct Checks {
    pub refusals: Vec<String>,
    pub warnings: Vec<String>,
}

pub fn check(base: &Side, new: &Side) -> Checks {
    let mut c = Checks::default();
    let (b, n) = (
        &base.summary()["input_config"],
        &new.summary()["input_config"],
    );
    let endpoint = |c: &Value| c["endpoint"]["type"].clone();
    if endpoint(b) != endpoint(n) {
        c.refusals.push(format!(
            "the endpoint types differ: {} vs {}",
            endpoint(b),
            endpoint(n)
        ));
    }
    let (wb, wn) = (workload(b), workload(n));
    if wb != wn {
        c.refusals.push(format!(
            "the workloads differ (input_config datasets, streaming or models): {}",
            first_difference("", &wb, &wn).unwrap_or_default()
        ));
    }
    let mut differs = |what: &str, f: &dyn Fn(&Value) -> Value| {
        if f(b) != f(n) {
            c.warnings
                .push(format!("the {what} differs: {} vs {}", f(b), f(n)));
        }
    };
    differs("server", &|c| c["endpoint"]["urls"].clone());
    differs("request count", &|c| profiling_phase(c)["requests"].clone());
    differs("concurrency", &|c| {
        profiling_phase(c)["concurrency"].clone()
    });
    differs("request rate", &|c| profiling_phase(c)["rate"].clone());
    differs("duration", &|c| profiling_phase(c)["duration"].clone());
    // Goodput counts the requests that met its objectives.
    differs("goodput setting (--goodput)", &|c| c["slos"].clone());
    for (name, side) in [("BASE", base), ("NEW", new)] {
        if side.failed() > 0 {
            c.warnings.push(format!(
                "{name} had {} failed request(s) of {}; only successful requests are compared",
                side.failed(),
                side.requests()
            ));
        }
        if side.was_cancelled() {
            c.warnings
                .push(format!("{name} was interrupted; its results are partial"));
        }
    }
    if base.trials.len() != new.trials.len() {
        c.warnings.push(format!(
            "BASE has {} trial(s), NEW {}: intervals are bootstrapped over the pooled requests",
            base.trials.len(),
            new.trials.len()
        ));
    }
    c
}

/// What decides the requests sent: the datasets without their seeds and sizes (a dataset
/// holds at most as many entries as requests are sent: the request count, only warned
/// about), streaming, the models.
fn workload(config: &Value) -> Value {
    let mut datasets = config["datasets"].clone();
    strip_key(&mut datasets, "random_seed");
    strip_key(&mut datasets, "entries");
    serde_json::json!({
        "datasets": datasets,
        "streaming": config["endpoint"]["streaming"],
        "models": config["models"],
    })
}

fn strip_key(v: &mut Value, key: &str) {
    match v {
        Value::Object(m) => {
            m.remove(key);
            m.values_mut().for_each(|x| strip_key(x, key));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip_key(x, key)),
        _ => {}
    }
}

fn profiling_phase(config: &Value) -> &Value {
    let phases = config["phases"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    phases
        .iter()
        .find(|p| p["kind"] == "profiling")
        .unwrap_or(&Value::Null)
}

/// The path and both values of the first place where `a` and `b` differ.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
            keys.map(|k| {
                let at = format!("{path}.{k}");
                let none = Value::Null;
                first_difference(&at, x.get(k).unwrap_or(&none), y.get(k).unwrap_or(&none))
            })
            .find_map(|d| d)
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(&format!("{path}[{i}]"), p, q)),
        _ if a == b => None,
        _ => Some(format!("{} is {a} vs {b}", path.trim_start_matches('.'))),
    }
}
