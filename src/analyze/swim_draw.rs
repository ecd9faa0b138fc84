//! Draws a [`SwimLane`] with plotters: the lanes on top (requests as bars, a session's
//! gaps between turns shaded, a black tick where a lane gets a new session), the
//! concurrency panel beneath. PNG for the file, SVG inside the HTML page.

use std::fmt::Write as _;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::swim_lane::SwimLane;
use crate::plot::render::{FONT, register_font};

const WIDTH: u32 = 2000;
const CONC_HEIGHT: u32 = 360;
const LEFT: u32 = 80;
const BAR: f64 = 0.7;

/// matplotlib's tab20, one colour per lane occupant in turn.
const TAB20: [(u8, u8, u8); 20] = [
    (31, 119, 180),
    (174, 199, 232),
    (255, 127, 14),
    (255, 187, 120),
    (44, 160, 44),
    (152, 223, 138),
    (214, 39, 40),
    (255, 152, 150),
    (148, 103, 189),
    (197, 176, 213),
    (140, 86, 75),
    (196, 156, 148),
    (227, 119, 194),
    (247, 182, 210),
    (127, 127, 127),
    (199, 199, 199),
    (188, 189, 34),
    (219, 219, 141),
    (23, 190, 207),
    (158, 218, 229),
];

const ACTIVE: RGBColor = RGBColor(33, 150, 243);
const IDLE: RGBColor = RGBColor(153, 153, 153);
const RAMP: RGBColor = RGBColor(255, 165, 0);
const END: RGBColor = RGBColor(220, 30, 30);
const TARGET: RGBColor = RGBColor(40, 150, 40);

fn color(i: usize, alpha: f64) -> RGBAColor {
    let (r, g, b) = TAB20[i % TAB20.len()];
    RGBColor(r, g, b).mix(alpha)
}

/// Pixels per row: lanes stay readable up to a few hundred rows.
fn row_px(rows: usize) -> u32 {
    (2400 / rows.max(1) as u32).clamp(3, 28)
}

pub fn size(lane: &SwimLane) -> (u32, u32) {
    let swim = (lane.total_rows() as u32 * row_px(lane.total_rows()) + 140).max(420);
    (WIDTH, swim + CONC_HEIGHT)
}

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("drawing the swim lane: {e:?}")
}

/// The chart on `root`: `title` above, `target` the reference concurrency.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    lane: &SwimLane,
    title: &str,
    target: Option<u64>,
) -> Result<(), String> {
    register_font();
    root.fill(&WHITE).map_err(err)?;
    let (_, height) = root.dim_in_pixel();
    let (top, bottom) = root.split_vertically(height - CONC_HEIGHT);
    let x_max = (lane.t_max_s * 1.01).max(1.0);
    lanes(&top, lane, title, x_max)?;
    concurrency(&bottom, lane, target, x_max)?;
    Ok(())
}

fn lanes<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lane: &SwimLane,
    title: &str,
    x_max: f64,
) -> Result<(), String> {
    let text = |size: f64| (FONT, size).into_font().color(&BLACK);
    let bold = (FONT, 28.0, FontStyle::Bold).into_font().color(&BLACK);
    area.draw_text(title, &bold, (LEFT as i32, 12))
        .map_err(err)?;
    let mut items = vec![("Active request".to_string(), Mark::Box(color(0, 1.0)))];
    if lane.subagents() > 0 {
        items.push(("Subagent request".into(), Mark::Box(color(0, 0.55))));
    }
    items.push(("Inter-turn delay".into(), Mark::Box(color(0, 0.25))));
    items.push(("New session in slot".into(), Mark::Tick(BLACK)));
    legend(area, 56, &items)?;
    let total = lane.total_rows();
    let offsets = lane.slot_offsets();
    // Rows run downwards: row r is drawn at y = -r.
    let mut chart = ChartBuilder::on(area)
        .margin_top(90)
        .margin_right(30)
        .x_label_area_size(10)
        .y_label_area_size(LEFT)
        .build_cartesian_2d(0f64..x_max, -(total as f64 - 0.5)..0.5)
        .map_err(err)?;
    let stride = match lane.slots {
        0..=30 => 1,
        31..=60 => 2,
        _ => 5,
    };
    let slot_at_row = |row: f64| {
        let r = (-row).round();
        (r >= 0.0 && (r - (-row)).abs() < 1e-9)
            .then(|| offsets.iter().position(|&o| o as f64 == r))
            .flatten()
            .filter(|s| s % stride == 0)
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_labels(12)
        .y_labels(total + 2)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|v| slot_at_row(*v).map(|s| s.to_string()).unwrap_or_default())
        .y_desc("Session Slot")
        .axis_desc_style(text(22.0))
        .label_style(text(16.0))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    let secs = |ns: u64| lane.seconds(ns);
    let bar = |x0: f64, x1: f64, center: f64, height: f64, style: ShapeStyle| {
        // At least a pixel's worth, so a short request still shows.
        let x1 = x1.max(x0 + x_max / 4000.0);
        Rectangle::new(
            [
                (x0, -(center - height / 2.0)),
                (x1, -(center + height / 2.0)),
            ],
            style,
        )
    };
    // Free stretches of each slot, pale.
    let mut free = Vec::new();
    for (slot, &rows) in lane.slot_rows.iter().enumerate() {
        let mut spans: Vec<(f64, f64)> = lane
            .groups
            .iter()
            .filter(|g| g.slot == slot)
            .map(|g| (secs(g.span.0), secs(g.span.1)))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let center = offsets[slot] as f64 + (rows as f64 - 1.0) / 2.0;
        let height = rows as f64 - (1.0 - BAR);
        let mut from = 0.0;
        for (s, e) in spans {
            if s > from {
                free.push(bar(
                    from,
                    s,
                    center,
                    height,
                    RGBColor(240, 240, 240).filled(),
                ));
            }
            from = from.max(e);
        }
        if from < lane.t_max_s {
            free.push(bar(
                from,
                lane.t_max_s,
                center,
                height,
                RGBColor(240, 240, 240).filled(),
            ));
        }
    }
    chart.draw_series(free).map_err(err)?;
    let mut idle = Vec::new();
    let mut busy = Vec::new();
    for (i, g) in lane.groups.iter().enumerate() {
        for m in &g.members {
            let s = &lane.sessions[m.session];
            let sub = s.is_sub();
            let base = offsets[g.slot] + m.row0;
            let merged = s.busy();
            for w in merged.windows(2) {
                let center = base as f64 + (m.rows as f64 - 1.0) / 2.0;
                let alpha = if sub { 0.15 } else { 0.25 };
                idle.push(bar(
                    secs(w[0].1),
                    secs(w[1].0),
                    center,
                    m.rows as f64 - (1.0 - BAR),
                    color(i, alpha).filled(),
                ));
            }
            let alpha = if sub { 0.55 } else { 1.0 };
            for (r, depth) in s.requests.iter().zip(&m.depths) {
                busy.push(bar(
                    secs(r.start_ns),
                    secs(r.end_ns),
                    (base + depth) as f64,
                    BAR,
                    color(i, alpha).filled(),
                ));
            }
        }
    }
    chart.draw_series(idle).map_err(err)?;
    chart.draw_series(busy).map_err(err)?;
    // A tick where a slot takes its next session.
    let mut ticks = Vec::new();
    for (slot, &rows) in lane.slot_rows.iter().enumerate() {
        let mut starts: Vec<f64> = lane
            .groups
            .iter()
            .filter(|g| g.slot == slot)
            .map(|g| secs(g.span.0))
            .collect();
        starts.sort_by(f64::total_cmp);
        for &x in starts.iter().skip(1) {
            let y0 = -(offsets[slot] as f64 - BAR / 2.0);
            let y1 = -(offsets[slot] as f64 + rows as f64 - 1.0 + BAR / 2.0);
            ticks.push(PathElement::new(
                vec![(x, y0), (x, y1)],
                BLACK.stroke_width(2),
            ));
        }
    }
    chart.draw_series(ticks).map_err(err)?;
    let y_top = 0.5;
    let y_bottom = -(total as f64 - 0.5);
    for (x, c) in [(lane.ramp_s, RAMP), (lane.bench_s, END)] {
        if let Some(x) = x {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x, y_top), (x, y_bottom)],
                    8,
                    6,
                    c.stroke_width(2),
                ))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// How a legend entry is marked.
enum Mark {
    Box(RGBAColor),
    /// A vertical tick.
    Tick(RGBColor),
    Line(RGBAColor),
}

/// One row of legend entries from pixel (`LEFT`, `y`) of `area`.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    y: i32,
    items: &[(String, Mark)],
) -> Result<(), String> {
    let text = (FONT, 17.0).into_font().color(&BLACK);
    let mut x = LEFT as i32;
    for (label, mark) in items {
        match mark {
            Mark::Box(c) => area.draw(&Rectangle::new([(x, y - 8), (x + 22, y + 8)], c.filled())),
            Mark::Tick(c) => area.draw(&PathElement::new(
                vec![(x + 10, y - 8), (x + 10, y + 8)],
                c.stroke_width(2),
            )),
            Mark::Line(c) => area.draw(&PathElement::new(
                vec![(x, y), (x + 22, y)],
                c.stroke_width(3),
            )),
        }
        .map_err(err)?;
        area.draw_text(label, &text, (x + 30, y - 10))
            .map_err(err)?;
        let (w, _) = area.estimate_text_size(label, &text).map_err(err)?;
        x += 30 + w as i32 + 36;
    }
    Ok(())
}

/// Seconds for a label: whole above 10 s, else to a tenth.
fn secs(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}s")
    } else {
        format!("{v:.1}s")
    }
}

/// Steps (time, value) as a polyline that holds each value until the next time.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, &(t, v)) in points.iter().enumerate() {
        if i > 0 {
            out.push((t, points[i - 1].1));
        }
        out.push((t, v));
    }
    out
}

fn concurrency<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lane: &SwimLane,
    target: Option<u64>,
    x_max: f64,
) -> Result<(), String> {
    let text = |size: f64| (FONT, size).into_font().color(&BLACK);
    let peak = lane.peak_active();
    let y_max = [
        peak as f64,
        lane.slots as f64,
        target.unwrap_or(0) as f64,
        1.0,
    ]
    .into_iter()
    .fold(0.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin_right(30)
        .margin_bottom(50)
        .x_label_area_size(60)
        .y_label_area_size(LEFT)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(12)
        .y_labels(6)
        .y_label_formatter(&|v| match (v - v.round()).abs() < 1e-9 {
            true => format!("{v:.0}"),
            false => format!("{v:.1}"),
        })
        .x_desc("Time (seconds)")
        .y_desc("Sessions")
        .axis_desc_style(text(22.0))
        .label_style(text(16.0))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    let active = steps(&lane.active);
    chart
        .draw_series(AreaSeries::new(active.clone(), 0.0, ACTIVE.mix(0.3)))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(active, ACTIVE.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(steps(&lane.idle), IDLE.stroke_width(2)))
        .map_err(err)?;
    let mut items = vec![
        (
            format!("Active requests (peak {peak})"),
            Mark::Line(ACTIVE.mix(1.0)),
        ),
        (
            "Idle sessions (between turns)".to_string(),
            Mark::Line(IDLE.mix(1.0)),
        ),
        (
            format!("Slot count ({})", lane.slots),
            Mark::Line(END.mix(0.7)),
        ),
    ];
    let hline = |v: f64| vec![(0.0, v), (x_max, v)];
    let vline = |x: f64| vec![(x, 0.0), (x, y_max)];
    let mut dashed = vec![(hline(lane.slots as f64), 3, END.mix(0.7))];
    if let Some(t) = target {
        dashed.push((hline(t as f64), 10, TARGET.mix(1.0)));
        items.push((
            format!("Target concurrency ({t})"),
            Mark::Line(TARGET.mix(1.0)),
        ));
    }
    if let Some(r) = lane.ramp_s {
        dashed.push((vline(r), 8, RAMP.mix(1.0)));
        items.push((
            format!("Ramp done ({})", secs(r)),
            Mark::Line(RAMP.mix(1.0)),
        ));
    }
    if let Some(b) = lane.bench_s {
        dashed.push((vline(b), 8, END.mix(1.0)));
        items.push((
            format!("Benchmark end ({})", secs(b)),
            Mark::Line(END.mix(1.0)),
        ));
    }
    for (points, dash, c) in dashed {
        chart
            .draw_series(DashedLineSeries::new(points, dash, 6, c.stroke_width(2)))
            .map_err(err)?;
    }
    let (_, h) = area.dim_in_pixel();
    legend(area, h as i32 - 22, &items)
}

pub fn write_png(
    path: &Path,
    lane: &SwimLane,
    title: &str,
    target: Option<u64>,
) -> Result<(), String> {
    let (w, h) = size(lane);
    let mut pixels = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (w, h)).into_drawing_area();
        draw(&root, lane, title, target)?;
        root.present().map_err(err)?;
    }
    let img = image::RgbImage::from_raw(w, h, pixels).expect("buffer sized to the image");
    img.save_with_format(path, image::ImageFormat::Png)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A page with the chart as SVG and a table of every session.
pub fn html(lane: &SwimLane, title: &str, target: Option<u64>) -> Result<String, String> {
    let (w, h) = size(lane);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        draw(&root, lane, title, target)?;
        root.present().map_err(err)?;
    }
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;margin:16px}}\
         svg{{width:100%;height:auto}}table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:nth-child(2){{text-align:left}}</style></head><body>\n\
         <h2>{t}</h2>\n<div class=\"chart\">{svg}</div>\n<h3>Sessions</h3>\n<table id=\"sessions\">\n\
         <tr><th>Slot</th><th>Session</th><th>Subagent</th><th>Requests</th><th>First start (s)</th>\
         <th>Last end (s)</th><th>Busy (s)</th><th>Idle between turns (s)</th></tr>\n",
        t = escape(title)
    );
    let mut rows = Vec::new();
    for g in &lane.groups {
        for m in &g.members {
            let s = &lane.sessions[m.session];
            let (start, end) = s.span();
            let busy_ns: u64 = s.busy().iter().map(|(a, b)| b - a).sum();
            let idle_ns = (end - start).saturating_sub(busy_ns);
            rows.push((g.slot, lane.seconds(start), s, busy_ns, idle_ns, end));
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    for (slot, start, s, busy, idle, end) in rows {
        let _ = writeln!(
            page,
            "<tr><td>{slot}</td><td>{}</td><td>{}</td><td>{}</td><td>{start:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(&s.id),
            if s.is_sub() { "yes" } else { "no" },
            s.requests.len(),
            lane.seconds(end),
            busy as f64 / 1e9,
            idle as f64 / 1e9,
        );
    }
    page.push_str("</table>\n</body></html>\n");
    Ok(page)
}
