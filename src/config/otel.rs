//! `--otel-url`, `--stream`, `--otel-resource-attributes` and `--gen-ai-provider`, checked
//! as AIPerf checks them and turned into the live OpenTelemetry export's options.

use std::time::Duration;

use super::{ConfigError, config_error};
use crate::cli::otel::OtelArgs;

/// What the run pushes to an OTLP/HTTP collector.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelOptions {
    /// The metrics endpoint, ending in `/v1/metrics`.
    pub metrics_url: http::Uri,
    /// Per-request histograms (`--stream metrics`).
    pub metrics: bool,
    /// Per-phase request counters (`--stream timing`).
    pub timing: bool,
    /// `--otel-resource-attributes`, in the order given (a later key wins).
    pub resource_attributes: Vec<(String, String)>,
    pub gen_ai_provider: Option<String>,
    /// Time between pushes (`AIPERF_OTEL_FLUSH_INTERVAL_SECONDS`, AIPerf's 2 s default).
    pub interval: Duration,
    /// Time one push may take (`AIPERF_OTEL_REQUEST_TIMEOUT_SECONDS`, 10 s).
    pub timeout: Duration,
}

/// The options, `None` without `--otel-url` (or with `--stream none`, which `warnings`
/// then tells).
pub fn otel_options(
    a: &OtelArgs,
    warnings: &mut Vec<String>,
) -> Result<Option<OtelOptions>, ConfigError> {
    let Some(url) = &a.otel_url else {
        // The other flags only shape what --otel-url gets: refuse them alone, as AIPerf does.
        let given: Vec<&str> = [
            (!a.stream.is_empty(), "--stream"),
            (
                !a.otel_resource_attributes.is_empty(),
                "--otel-resource-attributes",
            ),
            (a.gen_ai_provider.is_some(), "--gen-ai-provider"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect();
        if given.is_empty() {
            return Ok(None);
        }
        return Err(config_error(format!(
            "{} requires --otel-url to be set; OTel streaming is disabled when no OTLP endpoint is configured",
            given.join(", ")
        )));
    };
    let metrics_url = metrics_url(url)?;
    let (metrics, timing) = stream_domains(&a.stream)?;
    if !metrics && !timing {
        warnings.push(format!(
            "--stream none: nothing is sent to --otel-url {metrics_url}"
        ));
        return Ok(None);
    }
    Ok(Some(OtelOptions {
        metrics_url,
        metrics,
        timing,
        resource_attributes: resource_attributes(&a.otel_resource_attributes)?,
        gen_ai_provider: a.gen_ai_provider.clone(),
        interval: env_seconds("AIPERF_OTEL_FLUSH_INTERVAL_SECONDS", 2.0, 0.1, 60.0)?,
        timeout: env_seconds("AIPERF_OTEL_REQUEST_TIMEOUT_SECONDS", 10.0, 0.1, 300.0)?,
    }))
}

/// `host[:port]` or an http(s) URL, its path made to end in `/v1/metrics`.
fn metrics_url(url: &str) -> Result<http::Uri, ConfigError> {
    let text = url.trim();
    if text.is_empty() {
        return Err(config_error("--otel-url cannot be empty"));
    }
    let full = match text.contains("://") {
        true => text.to_string(),
        false => format!("http://{text}"),
    };
    let bad = |why: &str| config_error(format!("Invalid --otel-url value: {url:?}. {why}"));
    let uri: http::Uri = full
        .parse()
        .map_err(|_| bad("Expected host[:port] or a full URL."))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => {
            return Err(bad(
                "Only http and https schemes are supported. OTLP/gRPC is not supported; use the OTLP/HTTP exporter endpoint.",
            ));
        }
    }
    let Some(authority) = uri.authority().filter(|a| !a.host().is_empty()) else {
        return Err(bad("Expected host[:port] or a full URL."));
    };
    let path = uri.path().trim_end_matches('/');
    let path = match path {
        p if p.ends_with("/v1/metrics") => p.to_string(),
        p => format!("{p}/v1/metrics"),
    };
    let query = uri.query().map_or(String::new(), |q| format!("?{q}"));
    let scheme = uri.scheme_str().unwrap_or("http");
    format!("{scheme}://{authority}{path}{query}")
        .parse()
        .map_err(|_| bad("Expected host[:port] or a full URL."))
}

/// `--stream` values into (metrics, timing); none given is `default`, both.
fn stream_domains(values: &[String]) -> Result<(bool, bool), ConfigError> {
    let domains: Vec<&str> = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if let Some(bad) = domains
        .iter()
        .find(|d| !["default", "metrics", "timing", "none"].contains(d))
    {
        return Err(config_error(format!(
            "Invalid --stream value {bad:?}. Allowed: default, metrics, none, timing"
        )));
    }
    if domains.contains(&"none") {
        return Ok((false, false));
    }
    let default = domains.is_empty() || domains.contains(&"default");
    Ok((
        default || domains.contains(&"metrics"),
        default || domains.contains(&"timing"),
    ))
}

fn resource_attributes(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in items.iter().flat_map(|i| i.split(',')).map(str::trim) {
        if pair.is_empty() {
            continue;
        }
        let bad = |why: &str| {
            config_error(format!(
                "Invalid --otel-resource-attributes entry {pair:?}: {why}"
            ))
        };
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad("expected key=value."))?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(bad("key cannot be empty."));
        }
        if value.is_empty() {
            return Err(bad("value cannot be empty."));
        }
        out.retain(|(k, _)| k != key);
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

pub(super) fn env_seconds(
    name: &str,
    default: f64,
    min: f64,
    max: f64,
) -> Result<Duration, ConfigError> {
    let Ok(text) = std::env::var(name) else {
        return Ok(Duration::from_secs_f64(default));
    };
    match text.trim().parse::<f64>() {
        Ok(s) if (min..=max).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(config_error(format!(
            "{name}={text:?}: give seconds from {min} to {max}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> String {
        metrics_url(s)
            .map(|u| u.to_string())
            .unwrap_or_else(|e| e.0)
    }

    #[test]
    fn the_url_gets_a_scheme_and_the_metrics_path() {
        assert_eq!(url("collector:4318"), "http://collector:4318/v1/metrics");
        assert_eq!(url("http://c:4318/"), "http://c:4318/v1/metrics");
        assert_eq!(url("https://c/otlp"), "https://c/otlp/v1/metrics");
        assert_eq!(url("http://c:4318/v1/metrics"), "http://c:4318/v1/metrics");
        assert!(url("grpc://c:4317").contains("OTLP/gRPC is not supported"));
        assert!(url("http://:4318").contains("Invalid --otel-url"));
        assert!(url(" ").contains("cannot be empty"));
    }

    #[test]
    fn stream_selects_the_domains() {
        let s = |v: &[&str]| stream_domains(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&[]).unwrap(), (true, true));
        assert_eq!(s(&["default"]).unwrap(), (true, true));
        assert_eq!(s(&["metrics"]).unwrap(), (true, false));
        assert_eq!(s(&["timing"]).unwrap(), (false, true));
        assert_eq!(s(&["metrics", "timing"]).unwrap(), (true, true));
        assert_eq!(s(&["none", "metrics"]).unwrap(), (false, false));
        assert!(
            s(&["spans"])
                .unwrap_err()
                .0
                .contains("Invalid --stream value")
        );
    }

    #[test]
    fn resource_attributes_are_key_value_pairs() {
        let a = resource_attributes(&["team=perf, env=ci".into(), "env=prod".into()]).unwrap();
        assert_eq!(
            a,
            [
                ("team".into(), "perf".into()),
                ("env".into(), "prod".into())
            ]
        );
        for bad in ["novalue", "=x", "k="] {
            assert!(resource_attributes(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shaping_flags_need_the_url() {
        let a = OtelArgs {
            gen_ai_provider: Some("openai".into()),
            stream: vec!["metrics".into()],
            ..Default::default()
        };
        let e = otel_options(&a, &mut Vec::new()).unwrap_err().0;
        assert!(
            e.starts_with("--stream, --gen-ai-provider requires --otel-url"),
            "{e}"
        );
        let none = OtelArgs {
            otel_url: Some("c:4318".into()),
            stream: vec!["none".into()],
            ..Default::default()
        };
        let mut warnings = Vec::new();
        assert_eq!(otel_options(&none, &mut warnings).unwrap(), None);
        assert_eq!(warnings.len(), 1);
    }
}
