//! `--reset-kv-cache*`, `--server-profiler*` and `--transport`: the control requests a run
//! sends besides its load, resolved to one URL per server origin.

use std::time::Duration;

use http::Uri;

use super::*;
use crate::cli::control_hooks::ControlHookArgs;

const DEFAULT_RESET_PATH: &str = "/reset_prefix_cache";
const DEFAULT_PROFILER_START_PATH: &str = "/start_profile";
const DEFAULT_PROFILER_STOP_PATH: &str = "/stop_profile";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The control requests of a run (AIPerf's endpoint control hooks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControlHooks {
    /// POSTed once before the run, one per server origin.
    pub reset_kv_cache: Option<Posts>,
    /// POSTed before and after the profiling phase.
    pub profiler: Option<(Posts, Posts)>,
}

/// One control request to each server.
#[derive(Debug, Clone, PartialEq)]
pub struct Posts {
    pub uris: Vec<Uri>,
    pub timeout: Duration,
}

pub(super) fn control_hooks(
    a: &ControlHookArgs,
    servers: &[Uri],
) -> Result<ControlHooks, ConfigError> {
    let origins = origins(servers);
    let posts = |flag: &str, path: Option<&str>, default: &str, timeout: Duration| {
        let path = path.unwrap_or(default);
        if path.contains("://") || !path.starts_with('/') {
            return Err(config_error(format!(
                "{flag} {path}: give a path from the server's origin, starting with / (e.g. {default})"
            )));
        }
        let uris = origins
            .iter()
            .map(|o| {
                format!("{o}{path}")
                    .parse::<Uri>()
                    .map_err(|e| config_error(format!("{flag} {path}: not a URL path ({e})")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Posts { uris, timeout })
    };
    let reset_on = a.reset_kv_cache
        || a.reset_kv_cache_path.is_some()
        || a.reset_kv_cache_timeout_seconds.is_some();
    let reset_kv_cache = match reset_on {
        false => None,
        true => Some(posts(
            "--reset-kv-cache-path",
            a.reset_kv_cache_path.as_deref(),
            DEFAULT_RESET_PATH,
            timeout(
                "--reset-kv-cache-timeout-seconds",
                a.reset_kv_cache_timeout_seconds,
            )?,
        )?),
    };
    let profiler_on = a.server_profiler
        || a.server_profiler_start_path.is_some()
        || a.server_profiler_stop_path.is_some()
        || a.server_profiler_timeout_seconds.is_some();
    let profiler = match profiler_on {
        false => None,
        true => {
            let t = timeout(
                "--server-profiler-timeout-seconds",
                a.server_profiler_timeout_seconds,
            )?;
            Some((
                posts(
                    "--server-profiler-start-path",
                    a.server_profiler_start_path.as_deref(),
                    DEFAULT_PROFILER_START_PATH,
                    t,
                )?,
                posts(
                    "--server-profiler-stop-path",
                    a.server_profiler_stop_path.as_deref(),
                    DEFAULT_PROFILER_STOP_PATH,
                    t,
                )?,
            ))
        }
    };
    Ok(ControlHooks {
        reset_kv_cache,
        profiler,
    })
}

fn timeout(flag: &str, seconds: Option<f64>) -> Result<Duration, ConfigError> {
    seconds.map_or(Ok(DEFAULT_TIMEOUT), |s| {
        limits::seconds(flag, s, limits::Zero::Refused)
    })
}

/// `scheme://host:port` of each server, first seen first, each once.
fn origins(servers: &[Uri]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for uri in servers {
        let origin = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        if !out.contains(&origin) {
            out.push(origin);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_post_per_origin_and_bad_paths_are_refused() {
        let servers: Vec<Uri> = [
            "http://a:8000/v1/chat/completions",
            "http://a:8000/v1/completions",
            "https://b/v1/chat/completions",
        ]
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
        let args = ControlHookArgs {
            reset_kv_cache_path: Some("/flush".into()),
            server_profiler_timeout_seconds: Some(5.0),
            ..Default::default()
        };
        let hooks = control_hooks(&args, &servers).unwrap();
        let reset = hooks.reset_kv_cache.unwrap();
        let shown: Vec<String> = reset.uris.iter().map(|u| u.to_string()).collect();
        assert_eq!(shown, ["http://a:8000/flush", "https://b/flush"]);
        assert_eq!(reset.timeout, DEFAULT_TIMEOUT);
        let (start, stop) = hooks.profiler.unwrap();
        assert_eq!(start.uris[0].path(), "/start_profile");
        assert_eq!(stop.uris[1].to_string(), "https://b/stop_profile");
        assert_eq!(stop.timeout, Duration::from_secs(5));
        assert_eq!(
            control_hooks(&ControlHookArgs::default(), &servers).unwrap(),
            ControlHooks::default()
        );
        for bad in ["flush", "http://x/flush"] {
            let args = ControlHookArgs {
                reset_kv_cache_path: Some(bad.into()),
                ..Default::default()
            };
            let e = control_hooks(&args, &servers).unwrap_err().to_string();
            assert!(e.contains("starting with /"), "{e}");
        }
        let args = ControlHookArgs {
            server_profiler: true,
            server_profiler_timeout_seconds: Some(0.0),
            ..Default::default()
        };
        assert!(control_hooks(&args, &servers).is_err());
    }
}
