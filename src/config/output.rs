//! `--export-level`, `--profile-export-prefix` and the other export flags, checked and
//! turned into the export stage's options.

use super::{ConfigError, config_error};
use crate::cli::output::{ExportLevel, OutputArgs};
use crate::export::{FileNames, Level, Options, prefix_base};

/// `--prometheus-port` and `--prometheus-host`: where the live endpoint listens.
pub fn prometheus_addr(a: &OutputArgs) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    use std::net::ToSocketAddrs;
    let Some(port) = a.prometheus_port else {
        return match &a.prometheus_host {
            Some(_) => Err(config_error(
                "--prometheus-host needs --prometheus-port (the port of the live endpoint)",
            )),
            None => Ok(None),
        };
    };
    let host = a.prometheus_host.as_deref().unwrap_or("127.0.0.1");
    // An IPv6 literal goes in brackets beside a port.
    let joined = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let resolved = joined.to_socket_addrs().ok().and_then(|mut a| a.next());
    resolved.map(Some).ok_or_else(|| {
        config_error(format!(
            "--prometheus-host {host:?}: not an address of this machine (e.g. 127.0.0.1, 0.0.0.0, ::1, localhost)"
        ))
    })
}

pub fn export_options(a: &OutputArgs) -> Result<Options, ConfigError> {
    let level = match a.export_level {
        ExportLevel::Summary => Level::Summary,
        ExportLevel::Records => Level::Records,
        // The records, and each request's bytes beside them (`raw`, filled in by the
        // caller, which knows the headers).
        ExportLevel::Raw => Level::Records,
    };
    let names = match &a.profile_export_prefix {
        None => FileNames::default(),
        Some(prefix) => {
            let base = prefix_base(prefix).ok_or_else(|| {
                config_error(format!(
                    "--profile-export-prefix {prefix:?}: no file name is left once the directory \
                     and a known ending (.json, .csv, _console.txt, ...) are dropped; give a name \
                     such as `run1`"
                ))
            })?;
            if base == "outputs" && a.export_outputs_json {
                return Err(config_error(
                    "--profile-export-prefix outputs: its JSON file would be outputs.json, which \
                     --export-outputs-json writes; choose another prefix",
                ));
            }
            FileNames::with_base(&base)
        }
    };
    if a.export_http_trace && level == Level::Summary {
        return Err(config_error(
            "--export-http-trace adds each request's HTTP stamps to profile_export.jsonl, which \
             --export-level summary does not write; drop one of the two flags",
        ));
    }
    Ok(Options {
        level,
        names,
        outputs_json: a.export_outputs_json,
        http_trace: a.export_http_trace,
        show_trace_timing: a.show_trace_timing,
        slice_duration_ns: a
            .slice_duration
            .as_deref()
            .map(slice_duration_ns)
            .transpose()?,
        // Set from the collector flags in `ProfileConfig::from_args`.
        server_metrics_formats: Default::default(),
        html_report: !a.no_html_report,
        raw: None,
    })
}

/// `--export-level raw`: the headers each raw line shows (the API's and `-H`'s, credentials
/// redacted as AIPerf does) and the session header's name.
pub fn raw_options(
    a: &OutputArgs,
    endpoint_type: crate::endpoint::EndpointType,
    api_key: Option<&str>,
    headers: &[(http::HeaderName, http::HeaderValue)],
    session_header: &http::HeaderName,
) -> Result<Option<crate::export::RawOptions>, ConfigError> {
    if a.export_level != ExportLevel::Raw {
        return Ok(None);
    }
    let sent = endpoint_type
        .request_headers(api_key, headers)
        .map_err(config_error)?;
    let headers = sent
        .iter()
        .map(|(k, v)| {
            let value = match super::redact::is_secret_header(k.as_str()) {
                true => "<redacted>".to_string(),
                false => String::from_utf8_lossy(v.as_bytes()).into_owned(),
            };
            (k.as_str().to_string(), value)
        })
        .collect();
    Ok(Some(crate::export::RawOptions {
        headers,
        session_header: session_header.as_str().to_string(),
    }))
}

/// Shortest window: shorter ones hold too few requests to summarize.
const MIN_SLICE_S: f64 = 0.001;
/// Longest window: a year, the longest run a schedule may span.
const MAX_SLICE_S: f64 = 365.0 * 24.0 * 3600.0;

/// `--slice-duration`: seconds, as a number or with an `s`, `m` or `h` ending.
fn slice_duration_ns(text: &str) -> Result<u64, ConfigError> {
    let t = text.trim();
    let (number, unit) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    let seconds = number.trim().parse::<f64>().ok().map(|v| v * unit);
    match seconds {
        Some(s) if s.is_finite() && (MIN_SLICE_S..=MAX_SLICE_S).contains(&s) => {
            Ok((s * 1e9).round() as u64)
        }
        _ => Err(config_error(format!(
            "--slice-duration {text:?}: give the window length in seconds, from {MIN_SLICE_S} \
             to {MAX_SLICE_S} (a year), as a number or with s, m or h (e.g. 10, 2.5, 30s, 5m)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::slice_duration_ns;

    #[test]
    fn slice_duration_takes_seconds_and_unit_endings() {
        assert_eq!(slice_duration_ns("1").unwrap(), 1_000_000_000);
        assert_eq!(slice_duration_ns("2.5").unwrap(), 2_500_000_000);
        assert_eq!(slice_duration_ns("30s").unwrap(), 30_000_000_000);
        assert_eq!(slice_duration_ns("5m").unwrap(), 300_000_000_000);
        assert_eq!(slice_duration_ns("2h").unwrap(), 7_200_000_000_000);
        for bad in [
            "0",
            "-1",
            "0.0001",
            "nan",
            "inf",
            "1d",
            "",
            "s",
            "400000000",
        ] {
            let err = slice_duration_ns(bad).unwrap_err().to_string();
            assert!(err.contains("--slice-duration"), "{bad}: {err}");
        }
    }
}
