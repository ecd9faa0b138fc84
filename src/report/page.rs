//! The HTML of `report.html`: one file with its styles, the charting library, the chart
//! models as JSON and the script that draws them inline, so it opens anywhere without a
//! network.

use std::fmt::Write;

use super::console::{Block, Table};

/// uPlot 1.6.32 (MIT, see assets/uplot/LICENSE), from the npm package `uplot`.
const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
const CHARTS_JS: &str = include_str!("charts.js");
const REPORT_CSS: &str = include_str!("report.css");

/// Before any other script: a script error shows on the page (and marks the body, which
/// the browser test reads back).
const ERROR_CATCHER: &str = r#"window.addEventListener("error", function (e) {
  var box = document.getElementById("js-errors");
  box.hidden = false;
  box.textContent += "Script error: " + (e.message || e) + "\n";
  document.body.setAttribute("data-js-errors", "1");
});"#;

/// What one report shows.
pub struct Page {
    pub title: String,
    /// Header facts: (name, value).
    pub facts: Vec<(String, String)>,
    /// Sections of console output: (heading, blocks).
    pub tables: Vec<(String, Vec<Block>)>,
    /// Links to other reports: (text, relative path).
    pub links: Vec<(String, String)>,
    /// The command line, secrets already redacted.
    pub command: Option<String>,
    /// The resolved configuration, pretty-printed JSON.
    pub config: Option<String>,
    /// The chart models: a JSON array of serialized `plot::Chart`s.
    pub charts: String,
    /// Why there are no charts, when there are none.
    pub charts_note: Option<String>,
}

impl Page {
    pub fn html(&self) -> String {
        let mut h = String::with_capacity(UPLOT_JS.len() + 64 * 1024);
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{UPLOT_CSS}</style>\n<style>{REPORT_CSS}</style>\n\
             </head>\n<body>\n<div id=\"js-errors\" hidden></div>\n<header>\n<h1>{}</h1>\n\
             <dl class=\"facts\">\n",
            escape(&self.title),
            escape(&self.title)
        );
        for (name, value) in &self.facts {
            let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
        }
        h.push_str("</dl>\n<nav><a href=\"#charts\">Charts</a>");
        if !self.tables.is_empty() {
            h.push_str("<a href=\"#tables\">Tables</a>");
        }
        if !self.links.is_empty() {
            h.push_str("<a href=\"#runs\">Runs</a>");
        }
        if self.command.is_some() || self.config.is_some() {
            h.push_str("<a href=\"#configuration\">Configuration</a>");
        }
        h.push_str("</nav>\n</header>\n<h2>Charts</h2>\n");
        if let Some(note) = &self.charts_note {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(note));
        }
        h.push_str(
            "<p class=\"note\">Hover for values; click a legend entry to hide or show its series.</p>\n\
             <div id=\"charts\"></div>\n",
        );
        if !self.tables.is_empty() {
            h.push_str("<h2 id=\"tables\">Tables</h2>\n");
            for (heading, blocks) in &self.tables {
                if !heading.is_empty() {
                    let _ = writeln!(h, "<h3>{}</h3>", escape(heading));
                }
                for block in blocks {
                    match block {
                        Block::Table(t) => table_html(&mut h, t),
                        Block::Text(text) => {
                            let _ = writeln!(h, "<pre>{}</pre>", escape(text));
                        }
                    }
                }
            }
        }
        if !self.links.is_empty() {
            h.push_str("<h2 id=\"runs\">Runs</h2>\n<ul>\n");
            for (text, href) in &self.links {
                let _ = writeln!(
                    h,
                    "<li><a href=\"{}\">{}</a></li>",
                    escape(href),
                    escape(text)
                );
            }
            h.push_str("</ul>\n");
        }
        if self.command.is_some() || self.config.is_some() {
            h.push_str("<h2 id=\"configuration\">Configuration</h2>\n");
            if let Some(c) = &self.command {
                let _ = writeln!(h, "<p>Command line</p>\n<pre>{}</pre>", escape(c));
            }
            if let Some(c) = &self.config {
                let _ = writeln!(
                    h,
                    "<details open><summary>Resolved configuration</summary>\n<pre>{}</pre>\n</details>",
                    escape(c)
                );
            }
        }
        let _ = write!(
            h,
            "<footer>Written by aiperf {} after the run. Charts drawn with uPlot (MIT licence), \
             embedded in this file.</footer>\n<script>{ERROR_CATCHER}</script>\n\
             <script type=\"application/json\" id=\"report-data\">{{\"charts\":{}}}</script>\n\
             <script>{UPLOT_JS}</script>\n<script>{CHARTS_JS}</script>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION"),
            script_json(&self.charts)
        );
        h
    }
}

fn table_html(h: &mut String, t: &Table) {
    h.push_str("<table class=\"metrics\">\n");
    if !t.title.is_empty() {
        let _ = writeln!(h, "<caption>{}</caption>", escape(&t.title));
    }
    let class = |i: usize| {
        if i > 0 && t.right.get(i).copied().unwrap_or(true) {
            "num"
        } else {
            "txt"
        }
    };
    h.push_str("<thead><tr>");
    for (i, cell) in t.header.iter().enumerate() {
        let _ = write!(h, "<th class=\"{}\">{}</th>", class(i), escape(cell));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        h.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let _ = write!(h, "<td class=\"{}\">{}</td>", class(i), escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}

/// Text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON text made safe inside a `<script>` element, in one pass: `<`, `>` and `&` only
/// occur inside JSON strings, where their `\u` escapes mean the same.
fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 64);
    let mut from = 0;
    for i in memchr::memchr3_iter(b'<', b'>', b'&', json.as_bytes()) {
        // ASCII bytes: char boundaries on both sides.
        out.push_str(&json[from..i]);
        out.push_str(match json.as_bytes()[i] {
            b'<' => "\\u003c",
            b'>' => "\\u003e",
            _ => "\\u0026",
        });
        from = i + 1;
    }
    out.push_str(&json[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Page {
        Page {
            title: "Run <1>".into(),
            facts: vec![("Model".into(), "a&b".into())],
            tables: vec![(
                String::new(),
                vec![Block::Table(Table {
                    title: "LLM Metrics".into(),
                    header: vec!["Metric".into(), "avg".into()],
                    right: vec![true, true],
                    rows: vec![vec!["TTFT (ms)".into(), "20.81".into()]],
                })],
            )],
            links: vec![("concurrency_4".into(), "concurrency_4/report.html".into())],
            command: Some("aiperf profile --api-key ***".into()),
            config: Some("{}".into()),
            charts: serde_json::json!([{"name": "x", "title": "</script><b>&c"}]).to_string(),
            charts_note: None,
        }
    }

    #[test]
    fn text_is_escaped_and_the_chart_json_cannot_close_its_script() {
        let html = page().html();
        assert!(html.contains("<title>Run &lt;1&gt;</title>"));
        assert!(html.contains("<dd>a&amp;b</dd>"));
        assert!(html.contains("<td class=\"txt\">TTFT (ms)</td><td class=\"num\">20.81</td>"));
        assert!(html.contains(r#"\u003c/script\u003e\u003cb\u003e\u0026c"#));
        assert_eq!(
            html.matches("</script>").count(),
            4,
            "four scripts, closed once each"
        );
        assert!(html.contains("<a href=\"concurrency_4/report.html\">"));
        // The JSON still parses to the same title.
        let start = html.find("id=\"report-data\">").unwrap() + "id=\"report-data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let v: serde_json::Value = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(v["charts"][0]["title"], "</script><b>&c");
    }
}
