//! `--url`, `--header`, `--api-key` and `--extra-inputs`: the request URI, headers and body extras.

use crate::endpoint::EndpointType;
use http::{HeaderName, HeaderValue, Uri};
use serde_json::{Map, Value};

use super::*;

/// `localhost:8000` -> `http://localhost:8000/v1/chat/completions`. A base URL that already
/// ends in `/v1` is not doubled.
pub(super) fn build_request_uri(
    url: &str,
    custom_endpoint: Option<&str>,
    endpoint: EndpointType,
) -> Result<Uri, ConfigError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(config_error(
            "--url: empty; give a server address such as localhost:8000",
        ));
    }
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let (base, query) = split_query(&with_scheme, url)?;
    let base = base.trim_end_matches('/');
    let path = custom_endpoint.unwrap_or(endpoint.default_path());
    let path = if path.is_empty() {
        // raw and template: the URL as given.
        String::new()
    } else if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let path = if base.ends_with("/v1") && path.starts_with("/v1/") {
        path[3..].to_string()
    } else {
        path
    };
    // The URL's query goes after the endpoint path (joined to one the endpoint may have).
    let full = match query {
        None => format!("{base}{path}"),
        Some(q) if path.contains('?') => format!("{base}{path}&{q}"),
        Some(q) => format!("{base}{path}?{q}"),
    };
    let uri: Uri = full.parse().map_err(|e| {
        config_error(format!(
            "--url: '{url}' is not a valid URL ({e}); give e.g. http://localhost:8000"
        ))
    })?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        other => {
            return Err(config_error(format!(
                "--url: scheme '{}' is not supported; use http:// or https://",
                other.unwrap_or("")
            )));
        }
    }
    if uri.host().is_none() {
        return Err(config_error(format!(
            "--url: '{url}' has no host; give e.g. localhost:8000"
        )));
    }
    check_port(&uri, url)?;
    Ok(uri)
}

/// `http://h/base?q=1` -> (`http://h/base`, `q=1`). A fragment is refused: it is never
/// sent, so it can only be a typo.
pub(super) fn split_query<'a>(
    with_scheme: &'a str,
    url: &str,
) -> Result<(&'a str, Option<&'a str>), ConfigError> {
    if with_scheme.contains('#') {
        return Err(config_error(format!(
            "--url: '{url}' has a fragment ('#...'), which is never sent to a server; drop it"
        )));
    }
    Ok(match with_scheme.split_once('?') {
        Some((base, q)) => (base, (!q.is_empty()).then_some(q)),
        None => (with_scheme, None),
    })
}

/// A port in the URL must be a number from 1 to 65535: otherwise the client would fall back
/// to the scheme's default port and benchmark another server.
pub(super) fn check_port(uri: &Uri, url: &str) -> Result<(), ConfigError> {
    let Some(authority) = uri.authority() else {
        return Ok(());
    };
    let host_port = authority.as_str().rsplit('@').next().unwrap_or("");
    // `[::1]:8000`: the port follows the bracket.
    let port = match host_port.rfind(']') {
        Some(i) => host_port[i + 1..].strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, p)| p),
    };
    match port {
        None => Ok(()),
        Some(p) if p.parse::<u16>().is_ok_and(|n| n > 0) => Ok(()),
        Some(p) => Err(config_error(format!(
            "--url: port '{p}' in '{url}' is not allowed; give a port from 1 to 65535, e.g. localhost:8000"
        ))),
    }
}

/// `-H Name:Value` or a JSON object of headers, as (name, value) text pairs (trimmed).
pub(super) fn parse_header_pairs(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for item in items {
        if item.trim_start().starts_with('{') {
            let obj: Map<String, Value> = serde_json::from_str(item).map_err(|e| {
                config_error(format!(
                    "--header: '{}' is not a JSON object ({e}); give Name:Value or {{\"Name\": \"Value\"}}",
                    redact_json_headers(item)
                ))
            })?;
            out.extend(obj.into_iter().map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_string()),
            }));
        } else {
            let (k, v) = item.split_once(':').ok_or_else(|| {
                config_error(format!(
                    "--header: '{}' has no ':'; give Name:Value",
                    redact_header_arg(item)
                ))
            })?;
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(out)
}

pub(super) fn header_values(
    pairs: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| config_error(format!("--header: '{k}' is not a valid header name")))?;
        let mut value = HeaderValue::from_str(v).map_err(|_| {
            config_error(format!(
                "--header: the value for '{k}' is not a valid header value"
            ))
        })?;
        value.set_sensitive(is_secret_header(k));
        out.push((name, value));
    }
    Ok(out)
}

/// `user:password@` from `--url`, as typed and percent-decoded.
#[derive(Debug, Clone)]
pub(super) struct UserInfo {
    pub(super) raw: String,
    pub(super) raw_password: Option<String>,
    pub(super) user: String,
    pub(super) password: String,
}

/// Takes the credentials out of the request URI: they travel as HTTP Basic auth, never in
/// the URI (which is logged and exported).
pub(super) fn split_userinfo(uri: Uri) -> Result<(Uri, Option<UserInfo>), ConfigError> {
    let Some(auth) = uri.authority().map(|a| a.as_str().to_string()) else {
        return Ok((uri, None));
    };
    let Some(at) = auth.rfind('@') else {
        return Ok((uri, None));
    };
    let raw = auth[..at].to_string();
    let (raw_user, raw_password) = match raw.split_once(':') {
        Some((u, p)) => (u, Some(p.to_string())),
        None => (raw.as_str(), None),
    };
    let decode = |s: &str| {
        percent_decode(s).ok_or_else(|| {
            config_error("--url: the user name or password is not valid percent-encoded UTF-8; encode special characters as %XX")
        })
    };
    let info = UserInfo {
        user: decode(raw_user)?,
        password: decode(raw_password.as_deref().unwrap_or(""))?,
        raw_password,
        raw,
    };
    let mut parts = uri.into_parts();
    parts.authority = Some(auth[at + 1..].parse().map_err(|_| {
        config_error("--url: no host after the credentials; give e.g. http://user:pass@host:8000")
    })?);
    let uri = Uri::from_parts(parts).map_err(|e| config_error(format!("--url: {e}")))?;
    Ok((uri, Some(info)))
}

/// A scrape URL's `user:password@`, taken out: the URL without it (the one logs, files and
/// the console show) and the credentials, which travel as `Authorization: Basic`.
pub(super) fn scrape_credentials(url: &str) -> (String, Option<UserInfo>) {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return (url.to_string(), None);
    };
    let raw = rest[..at].to_string();
    let (raw_user, raw_password) = match raw.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (raw.clone(), None),
    };
    // A bad escape is taken as typed: it is still the user's secret.
    let decode = |s: &str| percent_decode(s).unwrap_or_else(|| s.to_string());
    let info = UserInfo {
        user: decode(&raw_user),
        password: decode(raw_password.as_deref().unwrap_or("")),
        raw_password,
        raw,
    };
    (format!("{scheme}{}", &rest[at + 1..]), Some(info))
}

/// `Authorization: Basic base64(user:password)`, marked sensitive.
pub(super) fn basic_auth(info: &UserInfo) -> Option<HeaderValue> {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", info.user, info.password));
    let mut value = HeaderValue::from_str(&format!("Basic {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// `%41` -> `A`; `None` for a bad escape or bytes that are not UTF-8.
pub(super) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `--api-key` travels as `Authorization: Bearer <key>`: a key that cannot be a header value
/// (a line break from a key file, another control character) is bad input, refused before
/// anything is built. The key itself is never echoed.
pub(super) fn check_api_key(key: &str) -> Result<(), ConfigError> {
    if HeaderValue::from_str(&format!("Bearer {key}")).is_ok() {
        return Ok(());
    }
    let what = if key.contains(['\r', '\n']) {
        "contains a line break (CR or LF)"
    } else {
        "contains a control or non-ASCII character"
    };
    Err(config_error(format!(
        "--api-key: the key {what}, which an HTTP header cannot carry; give the key alone \
         (a key read from a file: strip its line ending, e.g. --api-key \"$(tr -d '\\r\\n' < key.txt)\")"
    )))
}

/// Credentials in `--url` become `Authorization: Basic base64(user:password)`, unless
/// `--api-key` or an `Authorization` header says otherwise (then a warning says they are
/// not sent).
pub(super) fn url_basic_auth(
    info: &UserInfo,
    api_key_given: bool,
    headers: &mut Vec<(HeaderName, HeaderValue)>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let explicit = headers
        .iter()
        .any(|(k, _)| k == http::header::AUTHORIZATION);
    if api_key_given || explicit {
        let by = if explicit {
            "-H Authorization"
        } else {
            "--api-key"
        };
        warnings.push(format!(
            "--url: the user name and password in the URL are not sent: {by} sets the Authorization header"
        ));
        return Ok(());
    }
    let value = basic_auth(info)
        .ok_or_else(|| config_error("--url: the credentials cannot be sent in a header"))?;
    headers.push((http::header::AUTHORIZATION, value));
    Ok(())
}

/// `--extra-inputs key:value` (value parsed as JSON when it is valid JSON, else a string), or
/// a JSON object.
pub(super) fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ConfigError> {
    let mut out = Map::new();
    for item in items {
        if item.trim_start().starts_with('{') {
            let obj: Map<String, Value> = serde_json::from_str(item).map_err(|e| {
                config_error(format!(
                    "--extra-inputs: '{item}' is not a JSON object ({e}); give key:value or a JSON object"
                ))
            })?;
            out.extend(obj);
        } else {
            let (k, v) = item.split_once(':').ok_or_else(|| {
                config_error(format!(
                    "--extra-inputs: '{item}' is not key:value or a JSON object; e.g. ignore_eos:true"
                ))
            })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(config_error(format!(
                    "--extra-inputs: '{item}' has an empty key; give key:value"
                )));
            }
            let v = v.trim();
            let value =
                serde_json::from_str::<Value>(v).unwrap_or_else(|_| Value::String(v.to_string()));
            out.insert(k.to_string(), value);
        }
    }
    Ok(out)
}

/// Every `--url`, each with the endpoint path, credentials taken out. Several servers must
/// share one set of credentials (they travel as one Authorization header).
pub(super) fn build_request_uris(
    urls: &[String],
    custom_endpoint: Option<&str>,
    endpoint: EndpointType,
) -> Result<(Vec<Uri>, Option<UserInfo>), ConfigError> {
    let mut uris = Vec::with_capacity(urls.len());
    let mut first_info: Option<UserInfo> = None;
    for (i, url) in urls.iter().enumerate() {
        let uri = build_request_uri(url, custom_endpoint, endpoint)?;
        let (uri, info) = split_userinfo(uri)?;
        if i == 0 {
            first_info = info;
        } else if info.as_ref().map(|u| &u.raw) != first_info.as_ref().map(|u| &u.raw) {
            return Err(config_error(
                "--url: the servers' URLs carry different user names or passwords; give the same credentials in every URL (or none, and use --api-key or -H Authorization)",
            ));
        }
        uris.push(uri);
    }
    if uris.is_empty() {
        return Err(config_error(
            "--url: no server given; give e.g. --url localhost:8000",
        ));
    }
    Ok((uris, first_info))
}

/// `--session-header` as a header name, and `--request-content-type`, which must be JSON for
/// the chat and completions endpoints (their bodies are JSON documents).
pub(super) fn check_session_header_and_content_type(
    session_header: &str,
    content_type: &str,
    typed: bool,
    endpoint: EndpointType,
) -> Result<HeaderName, ConfigError> {
    let name = HeaderName::from_bytes(session_header.trim().as_bytes()).map_err(|_| {
        config_error(format!(
            "--session-header: '{session_header}' is not a valid header name; give e.g. X-Correlation-ID"
        ))
    })?;
    // As AIPerf: form endpoints (audio transcription, image edit, video generation) send
    // multipart/form-data and refuse a typed application/json; the others send JSON.
    let wanted = content_type.trim();
    let form = endpoint.content_type().starts_with("multipart/form-data");
    let refused = match form {
        true if typed => !wanted.eq_ignore_ascii_case("multipart/form-data"),
        true => false,
        false => !wanted.eq_ignore_ascii_case("application/json"),
    };
    if refused {
        let sends = match form {
            true => "multipart/form-data; application/json is not supported",
            false => {
                "JSON bodies; use application/json (multipart/form-data is for audio_transcription, image_edit and video_generation)"
            }
        };
        return Err(config_error(format!(
            "--request-content-type: '{content_type}' cannot be used with --endpoint-type {}: its requests are {sends}",
            endpoint.as_str()
        )));
    }
    Ok(name)
}

/// `--apply-chat-template` counts the chat messages of a request body: only the APIs
/// whose bodies carry them.
pub(super) fn apply_chat_template(
    a: &crate::cli::ProfileArgs,
    endpoint: EndpointType,
) -> Result<bool, ConfigError> {
    if !a.apply_chat_template {
        return Ok(false);
    }
    match endpoint {
        EndpointType::Chat
        | EndpointType::Responses
        | EndpointType::Messages
        | EndpointType::ChatEmbeddings
        | EndpointType::Raw => Ok(true),
        other => Err(config_error(format!(
            "--apply-chat-template counts a request's chat messages through the chat template; \
             --endpoint-type {} sends none: drop the flag",
            other.as_str()
        ))),
    }
}
