//! Secrets given on the command line (API key, secret headers in every `-H` spelling, URL
//! credentials) never reach stdout, stderr, the logs or the exports; URL credentials are
//! sent as HTTP Basic auth.

mod common;

use std::path::Path;

use common::{RecordingServer, read_json, run_aiperf_in};

/// Every file under `dir`, as text.
fn all_text_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(all_text_under(&path));
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path.display().to_string(), text));
        }
    }
    out
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn profile(cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "profile",
        "-m",
        "m",
        "--tokenizer",
        "builtin",
        "--request-count",
        "2",
        "--isl",
        "8",
        "--artifact-dir",
        "run",
    ];
    all.extend_from_slice(args);
    run_aiperf_in(cwd, &all)
}

#[test]
fn no_spelling_of_a_secret_reaches_the_output() {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://me:pw-F@{}", server.addr);
    let json_header = r#"{"Authorization":"Bearer tok-G","X-Api-Key":"xkey-B"}"#;
    let out = profile(
        tmp.path(),
        &[
            "--url",
            &url,
            "--api-key",
            "sk-KEY-A",
            "-H",
            json_header,
            "-HCookie: cookie-C",
            // A second value after one -H is a header too.
            "-H",
            "X-Plain: visible",
            "Proxy-Authorization: Basic proxy-D",
            "--header=Set-Cookie: setcookie-E",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");

    let secrets = [
        "sk-KEY-A",
        "xkey-B",
        "cookie-C",
        "proxy-D",
        "setcookie-E",
        "pw-F",
        "tok-G",
    ];
    let mut texts = all_text_under(&tmp.path().join("run"));
    texts.push(("stdout".into(), stdout.to_string()));
    texts.push(("stderr".into(), stderr.to_string()));
    for (name, text) in &texts {
        for s in secrets {
            assert!(!text.contains(s), "{s} leaked into {name}:\n{text}");
        }
    }

    // The command line is still shown, with the harmless header intact.
    let cli = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CLI Command: "))
        .expect("a CLI Command line");
    assert!(cli.contains("'X-Plain: visible'"), "{cli}");
    assert!(cli.contains("'--header=Set-Cookie: ***'"), "{cli}");
    assert!(cli.contains("http://***@"), "{cli}");
    let console =
        std::fs::read_to_string(tmp.path().join("run/profile_export_console.txt")).unwrap();
    assert!(
        console.contains(&format!("CLI Command: {cli}")),
        "{console}"
    );
    let json = read_json(&tmp.path().join("run/profile_export_aiperf.json"));
    assert_eq!(json["run_info"]["cli_command"], cli);
    let headers = &json["input_config"]["endpoint"]["headers"];
    for name in [
        "authorization",
        "x-api-key",
        "cookie",
        "proxy-authorization",
        "set-cookie",
    ] {
        assert_eq!(headers[name], "***", "{name}: {headers}");
    }
    assert_eq!(headers["x-plain"], "visible");

    // The explicit Authorization header is the one sent; the URL's credentials are not.
    // (Scrapes of /metrics carry no credentials.)
    let heads: Vec<String> = server
        .heads()
        .into_iter()
        .filter(|h| h.starts_with("POST"))
        .collect();
    assert!(!heads.is_empty());
    for head in &heads {
        assert_eq!(
            header(head, "authorization"),
            Some("Bearer tok-G"),
            "{head}"
        );
        assert_eq!(header(head, "cookie"), Some("cookie-C"), "{head}");
    }
    assert!(stderr.contains("not sent"), "{stderr}");
}

#[test]
fn url_credentials_are_sent_as_basic_auth() {
    let server = RecordingServer::start(true);
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://me:p%40ss-F@{}", server.addr);
    let out = profile(tmp.path(), &["--url", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr_text(&out));
    let heads: Vec<String> = server
        .heads()
        .into_iter()
        .filter(|h| h.starts_with("POST"))
        .collect();
    assert!(!heads.is_empty());
    for head in &heads {
        // base64("me:p@ss-F")
        assert_eq!(
            header(head, "authorization"),
            Some("Basic bWU6cEBzcy1G"),
            "{head}"
        );
        assert!(head.starts_with("POST /v1/chat/completions "), "{head}");
    }
    for (name, text) in all_text_under(&tmp.path().join("run")) {
        assert!(!text.contains("ss-F"), "the password leaked into {name}");
        assert!(
            !text.contains("bWU6cEBzcy1G"),
            "the token leaked into {name}"
        );
    }
}
