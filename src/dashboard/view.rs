//! Draws the dashboard from one [`Screen`] of figures: a pure function of its input, so
//! tests render it into ratatui's `TestBackend` and read the buffer.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Gauge, Paragraph, Row, Sparkline, Table};

use crate::export::console::format_count as count;
use crate::metrics::live::{LiveMetric, LivePhase, LiveSnapshot, Quantiles, WINDOW_SECS};

/// The panels; keys 2-6 maximise one (as AIPerf's, with the client panel where AIPerf has
/// its workers: this client is one process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    Progress,
    Metrics,
    Client,
    Server,
    Logs,
}

/// What the user chose to see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    pub maximized: Option<Panel>,
    pub logs_hidden: bool,
}

/// How long the run is meant to be.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Plan {
    pub warmup_requests: u64,
    /// Profiling requests to complete, when the run is counted in requests.
    pub profiling_requests: Option<u64>,
    /// Profiling seconds, when the run is timed (`--benchmark-duration`).
    pub duration_s: Option<f64>,
}

/// The client process itself (the truth line: is the client keeping up?).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientUsage {
    /// CPU used over the last second, in % of one core (the in-process mock left out).
    pub cpu_pct: Option<f64>,
    pub rss_bytes: Option<u64>,
}

/// One server `/metrics` endpoint's headline gauges, from its latest scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerView {
    pub url: String,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache use, 0-1.
    pub kv_cache: Option<f64>,
    /// The server's own mean TTFT over its recent scrapes, ns.
    pub ttft_ns: Option<f64>,
}

/// One GPU's latest readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuView {
    pub name: String,
    pub power_w: Option<f64>,
    pub utilization_pct: Option<f64>,
    pub memory_used_gb: Option<f64>,
    pub temperature_c: Option<f64>,
}

/// Everything one frame shows.
#[derive(Debug, Clone, Default)]
pub struct Screen {
    pub title: String,
    pub phase: Option<LivePhase>,
    /// Seconds since the dashboard started, and since the current phase started.
    pub elapsed_s: f64,
    pub phase_elapsed_s: f64,
    pub in_flight: u64,
    pub plan: Plan,
    pub live: Arc<LiveSnapshot>,
    pub client: ClientUsage,
    pub servers: Vec<ServerView>,
    pub gpus: Vec<GpuView>,
    pub logs: Vec<String>,
    pub colour: bool,
}

impl Screen {
    fn style(&self, colour: Color) -> Style {
        if self.colour {
            Style::default().fg(colour)
        } else {
            Style::default()
        }
    }

    fn title_style(&self) -> Style {
        self.style(Color::Cyan).add_modifier(Modifier::BOLD)
    }
}

/// Draws the whole dashboard.
pub fn render(frame: &mut Frame, s: &Screen, view: &View) {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header_line(s)), header);
    frame.render_widget(Paragraph::new(footer_line(s)), footer);

    if let Some(panel) = view.maximized {
        draw_panel(frame, s, panel, body);
        return;
    }
    let has_server = !s.servers.is_empty() || !s.gpus.is_empty();
    let server_rows = (s.servers.len() + s.gpus.len()) as u16 + 2;
    let mut constraints = vec![Constraint::Length(13), Constraint::Length(3)];
    if has_server {
        constraints.push(Constraint::Length(server_rows));
    }
    if !view.logs_hidden {
        constraints.push(Constraint::Min(3));
    }
    let rows = Layout::vertical(constraints).split(body);
    let [progress, metrics] =
        Layout::horizontal([Constraint::Ratio(1, 3), Constraint::Ratio(2, 3)]).areas(rows[0]);
    draw_panel(frame, s, Panel::Progress, progress);
    draw_panel(frame, s, Panel::Metrics, metrics);
    draw_panel(frame, s, Panel::Client, rows[1]);
    let mut next = 2;
    if has_server {
        draw_panel(frame, s, Panel::Server, rows[next]);
        next += 1;
    }
    if !view.logs_hidden {
        draw_panel(frame, s, Panel::Logs, rows[next]);
    }
}

fn draw_panel(frame: &mut Frame, s: &Screen, panel: Panel, area: Rect) {
    match panel {
        Panel::Progress => progress_panel(frame, s, area),
        Panel::Metrics => metrics_panel(frame, s, area),
        Panel::Client => client_panel(frame, s, area),
        Panel::Server => server_panel(frame, s, area),
        Panel::Logs => logs_panel(frame, s, area),
    }
}

fn block<'a>(s: &Screen, title: &'a str) -> Block<'a> {
    Block::bordered()
        .title(Line::from(title).centered())
        .title_style(s.title_style())
}

fn header_line(s: &Screen) -> Line<'static> {
    let phase = match s.phase {
        Some(LivePhase::Warmup) => "warmup",
        Some(LivePhase::Profiling) => "profiling",
        Some(LivePhase::Done) => "done",
        Some(LivePhase::Starting) | None => "starting",
    };
    Line::from(vec![
        Span::styled(format!(" {} ", s.title), s.title_style()),
        Span::raw(format!("· {phase} · elapsed {}", clock(s.elapsed_s))),
    ])
}

fn footer_line(s: &Screen) -> Line<'static> {
    let keys = [
        ("1", "Overview"),
        ("2", "Progress"),
        ("3", "Metrics"),
        ("4", "Client"),
        ("5", "Server/GPU"),
        ("6", "Logs"),
        ("L", "Toggle logs"),
        ("Esc", "Restore"),
        ("q", "Quit"),
    ];
    let mut spans = vec![Span::raw(" ")];
    for (key, what) in keys {
        spans.push(Span::styled(
            key,
            s.style(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::raw(format!(" {what}  ")));
    }
    Line::from(spans)
}

/// `mm:ss`, or `h:mm:ss` past an hour.
fn clock(secs: f64) -> String {
    let t = secs.max(0.0) as u64;
    if t >= 3600 {
        format!("{}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60)
    } else {
        format!("{:02}:{:02}", t / 60, t % 60)
    }
}

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

fn progress_panel(frame: &mut Frame, s: &Screen, area: Rect) {
    let outer = block(s, "Profile Progress");
    let inner = outer.inner(area);
    frame.render_widget(outer, area);
    let [warmup, profiling, text] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(inner);
    let live = &s.live;
    if s.plan.warmup_requests > 0 {
        let done = live.warmup.completed.min(s.plan.warmup_requests);
        let ratio = done as f64 / s.plan.warmup_requests as f64;
        frame.render_widget(
            gauge(
                s,
                ratio,
                format!("Warmup {}/{}", count(done), count(s.plan.warmup_requests)),
            ),
            warmup,
        );
    }
    let profiling_phase = matches!(s.phase, Some(LivePhase::Profiling | LivePhase::Done));
    let (ratio, label, left) = profiling_progress(s, profiling_phase);
    frame.render_widget(gauge(s, ratio, label), profiling);

    let sent = live.warmup.completed + live.profiling.completed + s.in_flight;
    let mut lines = vec![
        Line::from(format!(
            "Completed {} · in flight {} · sent {}",
            count(live.profiling.completed),
            count(s.in_flight),
            count(sent)
        )),
        Line::from(match left {
            Some(left) => format!("Elapsed {} · left {}", clock(s.phase_elapsed_s), left),
            None => format!("Elapsed {}", clock(s.phase_elapsed_s)),
        }),
    ];
    let errors = live.profiling.errors + live.warmup.errors;
    let error_style = if errors > 0 {
        s.style(Color::Red)
    } else {
        s.style(Color::Green)
    };
    lines.push(Line::from(Span::styled(
        format!("Errors {}", count(errors)),
        error_style,
    )));
    for (kind, n) in live.errors_by_type.iter().take(3) {
        lines.push(Line::from(Span::styled(
            format!("  {kind}: {}", count(*n)),
            s.style(Color::Red),
        )));
    }
    frame.render_widget(Paragraph::new(lines), text);
}

/// The profiling gauge's fill, label and time left.
fn profiling_progress(s: &Screen, started: bool) -> (f64, String, Option<String>) {
    if !started {
        return (0.0, "Profiling (not started)".into(), None);
    }
    let done = s.live.profiling.completed;
    if let Some(total_s) = s.plan.duration_s {
        let ratio = (s.phase_elapsed_s / total_s).clamp(0.0, 1.0);
        let left = (total_s - s.phase_elapsed_s).max(0.0);
        let label = format!(
            "Profiling {} of {}",
            clock(s.phase_elapsed_s),
            clock(total_s)
        );
        return (ratio, label, Some(clock(left)));
    }
    match s.plan.profiling_requests {
        Some(total) if total > 0 => {
            let ratio = (done as f64 / total as f64).clamp(0.0, 1.0);
            let left = s
                .live
                .window_request_rate()
                .filter(|r| *r > 0.0)
                .map(|rate| clock(total.saturating_sub(done) as f64 / rate));
            let label = format!("Profiling {}/{}", count(done.min(total)), count(total));
            (ratio, label, left)
        }
        _ => (0.0, format!("Profiling {}", count(done)), None),
    }
}

fn gauge(s: &Screen, ratio: f64, label: String) -> Gauge<'static> {
    let ratio = ratio.clamp(0.0, 1.0);
    Gauge::default()
        .ratio(ratio)
        .label(format!("{label} ({:.0}%)", ratio * 100.0))
        .gauge_style(s.style(Color::Green))
}

fn metrics_panel(frame: &mut Frame, s: &Screen, area: Rect) {
    let title = format!("Real-Time Metrics · last {WINDOW_SECS} s | since start");
    let outer = block(s, &title);
    let inner = outer.inner(area);
    frame.render_widget(outer, area);
    let [table_area, rates, sparks] = Layout::vertical([
        Constraint::Length(5),
        Constraint::Length(3),
        Constraint::Min(0),
    ])
    .areas(inner);

    let header = Row::new(
        ["Metric (ms)", "p50", "p90", "p99", "| avg", "p99", "count"]
            .map(|h| Cell::from(h).style(s.title_style())),
    );
    let rows = LiveMetric::ALL.map(|m| {
        let (window, total) = s.live.metric(m);
        let w = |f: fn(&Quantiles) -> f64| window.as_ref().map_or("N/A".into(), |q| ms(f(q)));
        let t = |f: fn(&Quantiles) -> f64| total.as_ref().map_or("N/A".into(), |q| ms(f(q)));
        Row::new(vec![
            Cell::from(m.label().to_string()),
            Cell::from(w(|q| q.p50)),
            Cell::from(w(|q| q.p90)),
            Cell::from(w(|q| q.p99)),
            Cell::from(format!("| {}", t(|q| q.avg))),
            Cell::from(t(|q| q.p99)),
            Cell::from(total.map_or("0".into(), |q| count(q.count))),
        ])
        .style(s.style(Color::Green))
    });
    let widths = [
        Constraint::Length(20),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    frame.render_widget(Table::new(rows, widths).header(header), table_area);

    let live = &s.live;
    let secs = live.profiling_secs.max(f64::MIN_POSITIVE);
    let rate = |v: Option<f64>| v.map_or("N/A".into(), |r| format!("{r:.1}"));
    let lines = vec![
        Line::from(format!(
            "Request Throughput (req/s)       {:>9} | {:>9.1}",
            rate(live.window_request_rate()),
            live.profiling
                .completed
                .saturating_sub(live.profiling.errors) as f64
                / secs
        )),
        Line::from(format!(
            "Output Token Throughput (tok/s)  {:>9} | {:>9.1}",
            rate(live.window_output_token_rate()),
            live.output_tokens / secs
        )),
        Line::from(format!(
            "Errors in the last {WINDOW_SECS} s: {}",
            count(live.window_errors)
        )),
    ];
    frame.render_widget(Paragraph::new(lines), rates);

    if sparks.height >= 2 {
        let [a, b] =
            Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(sparks);
        let history = &live.history;
        let take = |w: u16| history.len().saturating_sub(w as usize);
        let reqs: Vec<u64> = history[take(a.width)..]
            .iter()
            .map(|h| h.requests)
            .collect();
        let ttft: Vec<u64> = history[take(b.width)..]
            .iter()
            .map(|h| h.ttft_p50.map_or(0, |v| (v / 1e3) as u64))
            .collect();
        frame.render_widget(
            Sparkline::default()
                .block(Block::new().title("requests/s, per second"))
                .data(reqs)
                .style(s.style(Color::Cyan)),
            a,
        );
        frame.render_widget(
            Sparkline::default()
                .block(Block::new().title("TTFT p50, per second"))
                .data(ttft)
                .style(s.style(Color::Magenta)),
            b,
        );
    }
}

fn client_panel(frame: &mut Frame, s: &Screen, area: Rect) {
    let lag = match &s.live.send_lag {
        Some(q) => format!("send lag p50 {} ms, p99 {} ms", ms(q.p50), ms(q.p99)),
        None => "send lag n/a (closed loop)".into(),
    };
    let cpu = s
        .client
        .cpu_pct
        .map_or("n/a".into(), |c| format!("{c:.0}% of a core"));
    let rss = s
        .client
        .rss_bytes
        .map_or("n/a".into(), |b| format!("{:.0} MB", b as f64 / 1e6));
    let line = Line::from(format!(
        "{lag} · client CPU {cpu} · memory {rss} · in flight {}",
        count(s.in_flight)
    ));
    frame.render_widget(Paragraph::new(line).block(block(s, "Client")), area);
}

fn server_panel(frame: &mut Frame, s: &Screen, area: Rect) {
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("n/a".into(), f);
    let mut lines = Vec::new();
    for srv in &s.servers {
        let client_ttft = s.live.window[0].map(|q| q.avg);
        lines.push(Line::from(format!(
            "{} · running {} · waiting {} · KV cache {} · TTFT server {} ms / client {} ms",
            srv.url,
            opt(srv.running, &|v| format!("{v:.0}")),
            opt(srv.waiting, &|v| format!("{v:.0}")),
            opt(srv.kv_cache, &|v| format!("{:.1}%", v * 100.0)),
            opt(srv.ttft_ns, &|v| ms(v)),
            opt(client_ttft, &|v| ms(v)),
        )));
    }
    for gpu in &s.gpus {
        lines.push(Line::from(format!(
            "{} · power {} · utilization {} · memory used {} · {}",
            gpu.name,
            opt(gpu.power_w, &|v| format!("{v:.0} W")),
            opt(gpu.utilization_pct, &|v| format!("{v:.0}%")),
            opt(gpu.memory_used_gb, &|v| format!("{v:.1} GB")),
            opt(gpu.temperature_c, &|v| format!("{v:.0} °C")),
        )));
    }
    if lines.is_empty() {
        lines.push(Line::from(
            "No server metrics or GPU telemetry (--server-metrics, --gpu-telemetry)",
        ));
    }
    let title = "Server Metrics & GPU Telemetry";
    frame.render_widget(Paragraph::new(lines).block(block(s, title)), area);
}

fn logs_panel(frame: &mut Frame, s: &Screen, area: Rect) {
    let height = area.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = s.logs[s.logs.len().saturating_sub(height)..]
        .iter()
        .map(|l| {
            let style = if l.contains(" ERROR ") {
                s.style(Color::Red)
            } else if l.contains(" WARN ") {
                s.style(Color::Yellow)
            } else {
                Style::default()
            };
            Line::from(Span::styled(l.clone(), style))
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block(s, "Logs")), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::live::{HistoryPoint, PhaseCounts};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn q(p50_ms: f64, count: u64) -> Option<Quantiles> {
        Some(Quantiles {
            count,
            avg: p50_ms * 1.01e6,
            min: p50_ms * 0.9e6,
            max: p50_ms * 1.5e6,
            p50: p50_ms * 1e6,
            p90: p50_ms * 1.2e6,
            p99: p50_ms * 1.4e6,
        })
    }

    fn screen() -> Screen {
        let live = LiveSnapshot {
            warmup: PhaseCounts {
                completed: 10,
                errors: 0,
            },
            profiling: PhaseCounts {
                completed: 450,
                errors: 6,
            },
            window: [q(21.5, 380), q(4.25, 380), q(250.0, 380)],
            total: [q(22.0, 444), q(4.5, 444), q(260.0, 444)],
            window_secs: 10.0,
            window_requests: 380,
            window_errors: 2,
            window_output_tokens: 38_000.0,
            output_tokens: 44_400.0,
            profiling_secs: 12.0,
            send_lag: None,
            errors_by_type: vec![("Internal Server Error".into(), 6)],
            history: (0..30)
                .map(|i| HistoryPoint {
                    requests: 30 + i,
                    ttft_p50: Some(21e6),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        Screen {
            title: "AIPerf · Qwen/Qwen2-VL-2B-Instruct · chat · concurrency 4".into(),
            phase: Some(LivePhase::Profiling),
            elapsed_s: 13.2,
            phase_elapsed_s: 12.0,
            in_flight: 4,
            plan: Plan {
                warmup_requests: 10,
                profiling_requests: Some(1000),
                duration_s: None,
            },
            live: Arc::new(live),
            client: ClientUsage {
                cpu_pct: Some(12.0),
                rss_bytes: Some(31_000_000),
            },
            logs: vec![
                "13:45:50.000001  INFO Starting AIPerf".into(),
                "13:45:51.000001  WARN the server is slow".into(),
            ],
            colour: true,
            ..Default::default()
        }
    }

    fn draw(s: &Screen, view: &View, w: u16, h: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| render(f, s, view)).unwrap();
        let buffer = terminal.backend().buffer();
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
    }

    #[test]
    fn the_overview_shows_progress_metrics_client_and_logs() {
        let text = draw(&screen(), &View::default(), 120, 40);
        assert!(text.contains("Profile Progress"), "{text}");
        assert!(line_with(&text, "Warmup 10/10").contains("100%"));
        // 450 of 1000 at 38 req/s over the window: 550 / 38 = 14 s left.
        assert!(line_with(&text, "Profiling 450/1,000").contains("45%"));
        assert!(line_with(&text, "Elapsed 00:12").contains("left 00:14"));
        assert!(line_with(&text, "Completed 450").contains("in flight 4"));
        let ttft = line_with(&text, "Time to First Token");
        for figure in ["21.50", "25.80", "30.10", "| 22.22", "444"] {
            assert!(ttft.contains(figure), "{figure} in {ttft}");
        }
        assert!(line_with(&text, "Inter Token Latency").contains("4.25"));
        assert!(line_with(&text, "Request Throughput").contains("38.0"));
        // 44,400 tokens in 12 s.
        assert!(line_with(&text, "Output Token Throughput").contains("3700.0"));
        assert!(line_with(&text, "Errors 6").contains("Errors 6"));
        assert!(text.contains("Internal Server Error: 6"));
        assert!(line_with(&text, "client CPU").contains("12% of a core"));
        assert!(line_with(&text, "client CPU").contains("31 MB"));
        assert!(text.contains("WARN the server is slow"));
        assert!(line_with(&text, "Overview").contains("q Quit"));
        assert!(
            !text.contains("Server Metrics"),
            "no server panel without scrapes"
        );
    }

    #[test]
    fn a_maximised_panel_takes_the_screen_and_logs_can_hide() {
        let s = screen();
        let logs = draw(
            &s,
            &View {
                maximized: Some(Panel::Logs),
                logs_hidden: false,
            },
            100,
            20,
        );
        assert!(logs.contains("WARN the server is slow"));
        assert!(!logs.contains("Profile Progress"));
        let hidden = draw(
            &s,
            &View {
                maximized: None,
                logs_hidden: true,
            },
            100,
            30,
        );
        assert!(!hidden.contains("WARN the server is slow"));
        assert!(hidden.contains("Real-Time Metrics"));
    }

    #[test]
    fn server_and_gpu_figures_appear_when_scraped() {
        let mut s = screen();
        s.servers = vec![ServerView {
            url: "http://127.0.0.1:8000/metrics".into(),
            running: Some(4.0),
            waiting: Some(2.0),
            kv_cache: Some(0.125),
            ttft_ns: Some(20.1e6),
        }];
        s.gpus = vec![GpuView {
            name: "GPU0 H100".into(),
            power_w: Some(250.0),
            utilization_pct: Some(95.0),
            memory_used_gb: Some(40.0),
            temperature_c: Some(65.0),
        }];
        let text = draw(&s, &View::default(), 140, 44);
        let server = line_with(&text, "running 4");
        for figure in [
            "waiting 2",
            "KV cache 12.5%",
            "server 20.10 ms",
            "client 21.7",
        ] {
            assert!(server.contains(figure), "{figure} in {server}");
        }
        let gpu = line_with(&text, "GPU0 H100");
        for figure in ["250 W", "95%", "memory used 40.0 GB", "65 °C"] {
            assert!(gpu.contains(figure), "{figure} in {gpu}");
        }
    }

    #[test]
    fn a_timed_run_shows_time_left_and_no_colour_without_colour() {
        let mut s = screen();
        s.plan = Plan {
            warmup_requests: 0,
            profiling_requests: None,
            duration_s: Some(60.0),
        };
        s.colour = false;
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        terminal.draw(|f| render(f, &s, &View::default())).unwrap();
        let buffer = terminal.backend().buffer().clone();
        let text: String = buffer.content().iter().map(|c| c.symbol()).collect();
        assert!(text.contains("Profiling 00:12 of 01:00 (20%)"), "{text}");
        assert!(text.contains("left 00:48"));
        assert!(!text.contains("Warmup"));
        assert!(
            buffer.content().iter().all(|c| c.fg == Color::Reset),
            "NO_COLOR: no foreground colours"
        );
    }

    #[test]
    fn clocks_show_hours_past_an_hour() {
        assert_eq!(clock(59.9), "00:59");
        assert_eq!(clock(3725.0), "1:02:05");
    }
}
