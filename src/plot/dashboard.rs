//! `aiperf plot --dashboard`: the charts just drawn, served to a browser until Ctrl-C.
//! `/` is a page of every chart (SVG, in chart order) with a link to the page comparing
//! the runs when there is one; `/files/<name>` is any file of the output directory, read
//! on each request so a plot run in another shell shows at the next reload.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::Written;

struct Site {
    dir: PathBuf,
    /// SVG file names, in chart order.
    charts: Vec<String>,
    page: Option<String>,
    runs: usize,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn index(State(site): State<Arc<Site>>) -> Html<String> {
    let mut body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>AIPerf plots</title>\
         <style>body{{font-family:sans-serif;margin:2em}}img{{max-width:100%;display:block;margin:1em 0}}</style>\
         </head><body><h1>AIPerf plots</h1><p>{} run(s), {} charts from {}</p>",
        site.runs,
        site.charts.len(),
        escape(&site.dir.display().to_string())
    );
    if let Some(page) = &site.page {
        body.push_str(&format!(
            "<p><a href=\"/files/{0}\">The runs compared ({0})</a></p>",
            escape(page)
        ));
    }
    for name in &site.charts {
        body.push_str(&format!(
            "<h2>{0}</h2><img src=\"/files/{0}\" alt=\"{0}\">",
            escape(name)
        ));
    }
    body.push_str("</body></html>");
    Html(body)
}

fn content_type(name: &str) -> &'static str {
    match Path::new(name).extension().and_then(|e| e.to_str()) {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

async fn file(State(site): State<Arc<Site>>, UrlPath(name): UrlPath<String>) -> Response {
    // One file name of the directory: nothing above or below it.
    if name.contains(['/', '\\']) || name.starts_with('.') {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    match tokio::fs::read(site.dir.join(&name)).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&name))], bytes).into_response(),
        Err(_) => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// Serves `written` on `host:port` (port 0: any free port) until Ctrl-C or SIGTERM;
/// prints the address first.
pub fn serve(written: &Written, host: &str, port: u16) -> anyhow::Result<()> {
    let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let site = Arc::new(Site {
        dir: written.output.clone(),
        charts: written
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .filter_map(name)
            .collect(),
        page: written
            .page
            .as_ref()
            .filter(|p| p.parent() == Some(written.output.as_path()))
            .and_then(name),
        runs: written.runs,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((host, port))
            .await
            .with_context(|| format!("--dashboard: cannot listen on {host}:{port}"))?;
        let addr: SocketAddr = listener.local_addr()?;
        println!("Dashboard at http://{addr}/ (Ctrl-C to stop)");
        let app = axum::Router::new()
            .route("/", axum::routing::get(index))
            .route("/files/{name}", axum::routing::get(file))
            .with_state(site);
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("a SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await
            .context("--dashboard: the server stopped")
    })
}
