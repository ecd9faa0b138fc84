//! Draws a [`Chart`] as SVG and PNG with plotters. plotters draws the frame (axes, grid,
//! tick labels); the series, marks and legend are drawn in pixels from the axes' mapping,
//! so primary and secondary axes share one drawing path.

use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::artifacts::PlotError;
use super::chart::{Axis, Chart, Series, SeriesKind};
use super::scale;

pub const WIDTH: u32 = 1600;
pub const HEIGHT: u32 = 800;
pub(crate) const FONT: &str = "sans-serif";
/// DejaVu Sans, so PNG text needs no system font (licence beside it).
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// `--theme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Theme {
    #[default]
    Light,
    Dark,
}

struct Colors {
    background: RGBColor,
    text: RGBColor,
    grid: RGBColor,
    faint: RGBColor,
    /// Series colours, alternating dark and light so they stay apart in grayscale.
    series: [RGBColor; 5],
    error: RGBColor,
}

fn colors(theme: Theme) -> Colors {
    match theme {
        Theme::Light => Colors {
            background: RGBColor(255, 255, 255),
            text: RGBColor(34, 34, 34),
            grid: RGBColor(200, 200, 200),
            faint: RGBColor(235, 235, 235),
            series: [
                RGBColor(31, 78, 140),
                RGBColor(240, 150, 40),
                RGBColor(20, 20, 20),
                RGBColor(120, 190, 230),
                RGBColor(150, 60, 140),
            ],
            error: RGBColor(200, 30, 30),
        },
        Theme::Dark => Colors {
            background: RGBColor(24, 26, 30),
            text: RGBColor(230, 230, 230),
            grid: RGBColor(90, 90, 90),
            faint: RGBColor(48, 50, 55),
            series: [
                RGBColor(110, 170, 240),
                RGBColor(250, 180, 70),
                RGBColor(235, 235, 235),
                RGBColor(60, 110, 170),
                RGBColor(210, 120, 200),
            ],
            error: RGBColor(255, 90, 90),
        },
    }
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            // The bytes are a valid TTF compiled in; a failure would be a build mistake.
            let _ = plotters::style::register_font(FONT, style, FONT_BYTES);
        }
    });
}

/// Largest magnitude drawn: far beyond any measurement, and small enough that an axis's
/// span, its padding and plotters' tick arithmetic stay finite (a range reaching
/// f64::MAX overflowed to infinity, and plotters' tick search never ended). Values beyond
/// it are drawn at it.
const AXIS_LIMIT: f64 = 1e300;

/// `chart` with every value clamped to +-[`AXIS_LIMIT`] (infinities too; NaN stays).
fn bounded(chart: &Chart) -> Chart {
    let b = |v: f64| v.clamp(-AXIS_LIMIT, AXIS_LIMIT);
    let mut c = chart.clone();
    for s in &mut c.series {
        for p in &mut s.points {
            *p = (b(p.0), b(p.1));
        }
        for e in &mut s.y_err {
            *e = (b(e.0), b(e.1));
        }
        s.bar_width = s.bar_width.map(b);
    }
    for m in &mut c.marks {
        m.value = b(m.value);
    }
    c
}

type Ctx<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The primary axes: labels, grid, descriptions.
fn mesh<DB: DrawingBackend>(
    ctx: &mut Ctx<'_, DB>,
    chart: &Chart,
    c: &Colors,
    fx: &dyn Fn(&f64) -> String,
    fy: &dyn Fn(&f64) -> String,
    ticks: (usize, usize),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let text = |size: f64| (FONT, size).into_font().color(&c.text);
    ctx.configure_mesh()
        .x_labels(ticks.0)
        .y_labels(ticks.1)
        .x_desc(&chart.x.label)
        .y_desc(&chart.y.label)
        .axis_desc_style(text(26.0))
        .label_style(text(20.0))
        .x_label_formatter(fx)
        .y_label_formatter(fy)
        .bold_line_style(c.grid)
        .light_line_style(c.faint)
        .max_light_lines(1)
        .axis_style(c.text)
        .draw()
}

/// Where the axes put their ranges in pixels, written into the SVG for tools and tests
/// that read values back from it.
#[derive(serde::Serialize)]
struct AxisMap {
    range: [f64; 2],
    px: [i32; 2],
    /// Where the data drawn on this axis begins and ends, in pixels.
    data_px: Option<[i32; 2]>,
    integer: bool,
    /// The tick labels printed.
    ticks: Vec<String>,
}

#[derive(serde::Serialize)]
struct SeriesInfo {
    name: String,
    color: String,
    y2: bool,
    dashed: bool,
}

/// Text this module placed (not the axes' own), with its box: `[left, top, right, bottom]`.
#[derive(serde::Serialize)]
struct Placed {
    kind: &'static str,
    text: String,
    #[serde(rename = "box")]
    bounds: [i32; 4],
}

#[derive(serde::Serialize)]
struct Layout {
    /// The plotting area: `[left, top, right, bottom]`.
    plot: [i32; 4],
    x: AxisMap,
    y: AxisMap,
    y2: Option<AxisMap>,
    series: Vec<SeriesInfo>,
    labels: Vec<Placed>,
}

fn draw_err<E: std::fmt::Debug>(chart: &Chart) -> impl Fn(E) -> PlotError + '_ {
    move |e| PlotError::Render {
        name: chart.name.clone(),
        what: format!("{e:?}"),
    }
}

/// Splits a polyline into dashes of `on` pixels with `off` pixel gaps.
fn dashes(points: &[(i32, i32)], on: f64, off: f64) -> Vec<Vec<(i32, i32)>> {
    let mut out = Vec::new();
    let mut cur: Vec<(i32, i32)> = Vec::new();
    let (mut drawing, mut left) = (true, on);
    for w in points.windows(2) {
        let (a, b) = (
            (w[0].0 as f64, w[0].1 as f64),
            (w[1].0 as f64, w[1].1 as f64),
        );
        let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
        let mut t = 0.0;
        if drawing && cur.is_empty() {
            cur.push(w[0]);
        }
        while len - t > left {
            t += left;
            let p = (
                (a.0 + (b.0 - a.0) * t / len) as i32,
                (a.1 + (b.1 - a.1) * t / len) as i32,
            );
            if drawing {
                cur.push(p);
                out.push(std::mem::take(&mut cur));
            } else {
                cur.push(p);
            }
            drawing = !drawing;
            left = if drawing { on } else { off };
        }
        left -= len - t;
        if drawing {
            cur.push(w[1]);
        }
    }
    if drawing && cur.len() > 1 {
        out.push(cur);
    }
    out
}

type PixelMap = Box<dyn Fn(f64, f64) -> (i32, i32)>;

/// The linear map from data to pixels that puts the ranges' corners at `p0` and `p1`
/// (plotters' own mapping, recomputed so it outlives the chart context).
fn linear(xr: &Range<f64>, yr: &Range<f64>, p0: (i32, i32), p1: (i32, i32)) -> PixelMap {
    let (x0, y0) = (xr.start, yr.start);
    let (dx, dy) = (xr.end - x0, yr.end - y0);
    Box::new(move |x, y| {
        (
            // Saturating: a point far off the axes stays a far-off pixel, not an overflow.
            p0.0.saturating_add(((x - x0) / dx * (p1.0 - p0.0) as f64).round() as i32),
            p0.1.saturating_add(((y - y0) / dy * (p1.1 - p0.1) as f64).round() as i32),
        )
    })
}

/// Pixel sizes of the page's parts.
const MARGIN: i32 = 24;
const Y_LABEL_AREA: i32 = 110;
const LEGEND_ROW: i32 = 32;
const MARK_ROW: i32 = 26;
const SWATCH: i32 = 44;

/// Whether series `index` of `kind` is drawn dashed: the third and later lines are, to tell
/// them apart without colour.
fn dashed(kind: SeriesKind, index: usize) -> bool {
    matches!(kind, SeriesKind::Line | SeriesKind::Step) && index >= 2 && index.is_multiple_of(2)
}

fn series_color(c: &Colors, s: &Series, index: usize) -> RGBColor {
    if s.error_points {
        c.error
    } else {
        c.series[index % c.series.len()]
    }
}

/// The x values of every series (bars to their right edge) and the y values of `on_y2`
/// series or the others; bars and areas reach down to 0, where they are filled from.
fn values(chart: &Chart, y: Option<bool>) -> Vec<f64> {
    let mut out = Vec::new();
    for s in &chart.series {
        match y {
            None => {
                let w = s.bar_width.unwrap_or(0.0);
                out.extend(s.points.iter().flat_map(|p| [p.0, p.0 + w]));
            }
            Some(on_y2) if s.on_y2 == on_y2 => {
                out.extend(s.points.iter().map(|p| p.1));
                out.extend(s.y_err.iter().flat_map(|e| [e.0, e.1]));
                if matches!(s.kind, SeriesKind::Bars | SeriesKind::Area) && !s.points.is_empty() {
                    out.push(0.0);
                }
            }
            Some(_) => {}
        }
    }
    out
}

/// A text's size in pixels as the backend will draw it.
fn text_size<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
) -> (i32, i32) {
    let font: TextStyle = (FONT, size).into_font().into();
    root.estimate_text_size(text, &font)
        .map(|(w, h)| (w as i32, h as i32))
        // Roughly DejaVu's advance, should the backend not say.
        .unwrap_or((
            (text.chars().count() as f64 * size * 0.6) as i32,
            size as i32,
        ))
}

/// Where each legend entry goes, left to right in rows that wrap at `width`: (series index,
/// x offset, row, entry width).
fn legend_layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    width: i32,
) -> Vec<(usize, i32, i32, i32)> {
    let mut out = Vec::new();
    let (mut x, mut row) = (0, 0);
    for (i, s) in chart.series.iter().enumerate() {
        let w = SWATCH + 10 + text_size(root, &s.name, 20.0).0;
        if x > 0 && x + w > width {
            x = 0;
            row += 1;
        }
        out.push((i, x, row, w));
        x += w + 36;
    }
    out
}

/// Draws `chart` on `root`; returns where everything went. Title, failed-request line,
/// legend and the marks' labels sit in a band above the plotting area, so none of them
/// covers data.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    theme: Theme,
) -> Result<Layout, PlotError> {
    let err = draw_err(chart);
    let c = colors(theme);
    root.fill(&c.background).map_err(&err)?;
    let mut labels = Vec::new();
    let text = |size: f64| (FONT, size).into_font().color(&c.text);
    let width = WIDTH as i32;

    // The band above the plot: title, subtitle, legend rows, one row per vertical mark.
    let mut top = MARGIN / 2;
    for (kind, line, size) in [
        ("title", &chart.title, 34.0),
        ("subtitle", &chart.subtitle, 22.0),
    ] {
        if line.is_empty() {
            continue;
        }
        let (w, h) = text_size(root, line, size);
        let x = (width - w) / 2;
        root.draw(&Text::new(line.clone(), (x, top), text(size)))
            .map_err(&err)?;
        labels.push(Placed {
            kind,
            text: line.clone(),
            bounds: [x, top, x + w, top + h],
        });
        top += h + 8;
    }
    let right_area = if chart.y2.is_some() { Y_LABEL_AREA } else { 0 };
    let plot_left = MARGIN + Y_LABEL_AREA;
    let entries = legend_layout(root, chart, width - plot_left - MARGIN - right_area);
    let legend_top = top + 4;
    let legend_rows = entries.iter().map(|e| e.2 + 1).max().unwrap_or(0);
    top = legend_top + legend_rows * LEGEND_ROW;
    let primary: Vec<f64> = values(chart, Some(false));
    let secondary: Vec<f64> = values(chart, Some(true));
    let xs = values(chart, None);
    let mark_x = chart.marks.iter().filter(|m| m.on_x).map(|m| m.value);
    let mark_y = chart.marks.iter().filter(|m| !m.on_x).map(|m| m.value);
    let x_extent = scale::extent(xs.iter().copied().chain(mark_x));
    let y_extent = scale::extent(primary.iter().copied().chain(mark_y));
    let y2_extent = scale::extent(secondary.iter().copied());
    let x_range = scale::range(x_extent, chart.x.from_zero, scale::PAD);
    let y_range = scale::range(y_extent, chart.y.from_zero, scale::HEADROOM);
    let y2_axis = chart.y2.clone().unwrap_or_else(|| Axis::linear("", true));
    let y2_range = scale::range(y2_extent, y2_axis.from_zero, scale::HEADROOM);
    let places = mark_places(
        root,
        chart,
        &x_range,
        (plot_left, width - MARGIN - right_area),
    );
    let mark_rows = places.iter().map(|p| p.2 + 1).max().unwrap_or(0);
    top += mark_rows * MARK_ROW + 8;

    let body = root.margin(top, 0, 0, 0);
    let mut builder = ChartBuilder::on(&body);
    builder
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_bottom(MARGIN)
        .margin_top(0)
        .x_label_area_size(80)
        .y_label_area_size(Y_LABEL_AREA);
    if chart.y2.is_some() {
        builder.right_y_label_area_size(Y_LABEL_AREA);
    }
    let ctx = builder
        .build_cartesian_2d(x_range.clone(), y_range.clone())
        .map_err(&err)?;
    // Each formatter notes the labels it printed, for the layout note.
    let seen: [RefCell<Vec<String>>; 3] = Default::default();
    let noted = |i: usize, f: Box<dyn Fn(&f64) -> String>| {
        let seen = &seen[i];
        move |v: &f64| {
            let t = f(v);
            if !t.is_empty() {
                seen.borrow_mut().push(t.clone());
            }
            t
        }
    };
    let fx = noted(0, Box::new(scale::tick_format(&x_range, chart.x.integer)));
    let fy = noted(1, Box::new(scale::tick_format(&y_range, chart.y.integer)));
    let fy2 = noted(2, Box::new(scale::tick_format(&y2_range, y2_axis.integer)));
    let ticks = (
        scale::max_ticks(&x_range, chart.x.integer),
        scale::max_ticks(&y_range, chart.y.integer),
    );
    // The secondary axis takes the right label area, so it is set before the primary mesh
    // is drawn (else the primary labels land on both sides).
    let (p0, p1, secondary_px) = match &chart.y2 {
        None => {
            let mut ctx = ctx;
            mesh(&mut ctx, chart, &c, &fx, &fy, ticks).map_err(&err)?;
            let p0 = ctx.backend_coord(&(x_range.start, y_range.start));
            let p1 = ctx.backend_coord(&(x_range.end, y_range.end));
            (p0, p1, None)
        }
        Some(y2) => {
            let mut dual = ctx.set_secondary_coord(x_range.clone(), y2_range.clone());
            mesh(&mut dual, chart, &c, &fx, &fy, ticks).map_err(&err)?;
            dual.configure_secondary_axes()
                .y_desc(&y2.label)
                .y_labels(scale::max_ticks(&y2_range, y2.integer))
                .axis_desc_style(text(26.0))
                .label_style(text(20.0))
                .y_label_formatter(&fy2)
                .axis_style(c.text)
                .draw()
                .map_err(&err)?;
            let p0 = dual.backend_coord(&(x_range.start, y_range.start));
            let p1 = dual.backend_coord(&(x_range.end, y_range.end));
            let sec = dual.borrow_secondary();
            let q0 = sec.backend_coord(&(x_range.start, y2_range.start));
            let q1 = sec.backend_coord(&(x_range.end, y2_range.end));
            (p0, p1, Some((q0, q1)))
        }
    };
    let mut maps = vec![linear(&x_range, &y_range, p0, p1)];
    if let Some((q0, q1)) = secondary_px {
        maps.push(linear(&x_range, &y2_range, q0, q1));
    }
    let data_px = |e: Option<(f64, f64)>, m: &PixelMap, on_x: bool| {
        e.map(|(lo, hi)| {
            let (a, b) = if on_x {
                (m(lo, 0.0).0, m(hi, 0.0).0)
            } else {
                (m(0.0, lo).1, m(0.0, hi).1)
            };
            [a, b]
        })
    };
    let take = |i: usize| seen[i].borrow().clone();
    let x_map = AxisMap {
        range: [x_range.start, x_range.end],
        px: [p0.0, p1.0],
        data_px: data_px(scale::extent(xs.iter().copied()), &maps[0], true),
        integer: chart.x.integer,
        ticks: take(0),
    };
    let y_map = AxisMap {
        range: [y_range.start, y_range.end],
        px: [p0.1, p1.1],
        data_px: data_px(scale::extent(primary.iter().copied()), &maps[0], false),
        integer: chart.y.integer,
        ticks: take(1),
    };
    let y2_map = secondary_px.map(|(q0, q1)| AxisMap {
        range: [y2_range.start, y2_range.end],
        px: [q0.1, q1.1],
        data_px: data_px(y2_extent, &maps[1], false),
        integer: y2_axis.integer,
        ticks: take(2),
    });

    let mut infos = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        let color = series_color(&c, s, i);
        let map = &maps[usize::from(s.on_y2 && maps.len() > 1)];
        draw_series(root, s, i, color, map, &err)?;
        infos.push(SeriesInfo {
            name: s.name.clone(),
            color: hex(color),
            y2: s.on_y2,
            dashed: dashed(s.kind, i),
        });
    }
    let plot_top = p1.1.min(p0.1);
    let ranges = (&x_range, &y_range);
    marks(
        root,
        chart,
        &places,
        &maps[0],
        ranges,
        plot_top,
        &c,
        &mut labels,
        &err,
    )?;
    legend(
        root,
        chart,
        &entries,
        (plot_left, legend_top),
        &c,
        &mut labels,
        &err,
    )?;
    Ok(Layout {
        plot: [p0.0, plot_top, p1.0, p0.1.max(p1.1)],
        x: x_map,
        y: y_map,
        y2: y2_map,
        series: infos,
        labels,
    })
}

/// Where the vertical marks' labels go above the plot: (mark, left edge, row counted up
/// from the plot's top). Each is centred on its line, in the lowest row where it clears
/// the labels already placed; worked out before the plot is laid out, from the same
/// horizontal mapping (`left` and `right` are the plot's edges), to reserve just the rows
/// needed.
fn mark_places<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    x: &Range<f64>,
    (left, right): (i32, i32),
) -> Vec<(usize, i32, i32)> {
    let mut order: Vec<(usize, f64)> = (chart.marks.iter().enumerate())
        .filter(|(_, m)| m.on_x)
        .map(|(i, m)| (i, m.value))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut rows: Vec<i32> = Vec::new(); // right end of each row's last label
    let mut out = Vec::new();
    for (i, v) in order {
        let at = left as f64 + (v - x.start) / (x.end - x.start) * (right - left) as f64;
        let w = text_size(root, &chart.marks[i].label, 20.0).0;
        let x0 = (at as i32 - w / 2).clamp(MARGIN, WIDTH as i32 - MARGIN - w);
        let row = rows
            .iter()
            .position(|&end| end + 12 <= x0)
            .unwrap_or(rows.len());
        if row == rows.len() {
            rows.push(0);
        }
        rows[row] = x0 + w;
        out.push((i, x0, row as i32));
    }
    out
}

/// The reference lines, dashed across the plot; a vertical one's label where `places`
/// puts it, above the plot, so no label covers data or another label.
#[allow(clippy::too_many_arguments)]
fn marks<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    places: &[(usize, i32, i32)],
    main: &PixelMap,
    (x_range, y_range): (&Range<f64>, &Range<f64>),
    plot_top: i32,
    c: &Colors,
    labels: &mut Vec<Placed>,
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    let style = (FONT, 20.0).into_font().color(&c.text);
    for (i, m) in chart.marks.iter().enumerate() {
        let (a, b) = if m.on_x {
            (main(m.value, y_range.start), main(m.value, y_range.end))
        } else {
            (main(x_range.start, m.value), main(x_range.end, m.value))
        };
        for d in dashes(&[a, b], 10.0, 6.0) {
            root.draw(&PathElement::new(d, c.text.stroke_width(2)))
                .map_err(err)?;
        }
        let (w, h) = text_size(root, &m.label, 20.0);
        let (x, y) = match places.iter().find(|p| p.0 == i) {
            Some(&(_, x, row)) => (x, plot_top - 6 - h - MARK_ROW * row),
            None => (a.0 + 6, a.1 - 6 - h),
        };
        root.draw(&Text::new(m.label.clone(), (x, y), style.clone()))
            .map_err(err)?;
        labels.push(Placed {
            kind: "mark",
            text: m.label.clone(),
            bounds: [x, y, x + w, y + h],
        });
    }
    Ok(())
}

fn draw_series<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: &Series,
    index: usize,
    color: RGBColor,
    map: &dyn Fn(f64, f64) -> (i32, i32),
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    let line = color.stroke_width(3);
    let pts: Vec<(i32, i32)> = match s.kind {
        SeriesKind::Step => {
            let mut out = Vec::new();
            for (i, &(x, y)) in s.points.iter().enumerate() {
                if i > 0 {
                    out.push(map(x, s.points[i - 1].1));
                }
                out.push(map(x, y));
            }
            out
        }
        _ => s.points.iter().map(|&(x, y)| map(x, y)).collect(),
    };
    match s.kind {
        SeriesKind::Bars => {
            let w = s.bar_width.unwrap_or(1.0);
            for &(x, y) in &s.points {
                let (a, b) = (map(x, 0.0), map(x + w, y));
                let fill = color.mix(0.75).filled();
                root.draw(&Rectangle::new([(a.0 + 1, a.1), (b.0 - 1, b.1)], fill))
                    .map_err(err)?;
            }
        }
        SeriesKind::Area => {
            if let (Some(first), Some(last)) = (s.points.first(), s.points.last()) {
                let mut poly = pts.clone();
                poly.push(map(last.0, 0.0));
                poly.push(map(first.0, 0.0));
                root.draw(&Polygon::new(poly, color.mix(0.35).filled()))
                    .map_err(err)?;
            }
            root.draw(&PathElement::new(pts.clone(), line))
                .map_err(err)?;
        }
        SeriesKind::Line | SeriesKind::Step => {
            if dashed(s.kind, index) {
                for d in dashes(&pts, 14.0, 8.0) {
                    root.draw(&PathElement::new(d, line)).map_err(err)?;
                }
            } else {
                root.draw(&PathElement::new(pts.clone(), line))
                    .map_err(err)?;
            }
            if s.kind == SeriesKind::Line && s.points.len() <= 12 {
                for &p in &pts {
                    marker(root, p, index, color, err)?;
                }
            }
        }
        SeriesKind::Scatter => {
            for &p in &pts {
                if s.error_points {
                    cross(root, p, color, err)?;
                } else {
                    marker(root, p, index, color, err)?;
                }
            }
        }
    }
    for (i, &(lo, hi)) in s.y_err.iter().enumerate() {
        let Some(&(x, _)) = s.points.get(i) else {
            break;
        };
        let (a, b) = (map(x, lo), map(x, hi));
        let style = color.stroke_width(2);
        root.draw(&PathElement::new(vec![a, b], style))
            .map_err(err)?;
        for y in [a.1, b.1] {
            root.draw(&PathElement::new(vec![(a.0 - 8, y), (a.0 + 8, y)], style))
                .map_err(err)?;
        }
    }
    for (i, label) in s.labels.iter().enumerate() {
        if let Some(&p) = pts.get(i) {
            let style = (FONT, 20.0).into_font().color(&color);
            root.draw(&Text::new(label.clone(), (p.0 + 10, p.1 - 28), style))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// A filled circle, triangle or square by series, so scatter series differ in shape too.
fn marker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: (i32, i32),
    index: usize,
    color: RGBColor,
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    let style = color.filled();
    match index % 3 {
        0 => root.draw(&Circle::new(p, 5, style)),
        1 => root.draw(&Polygon::new(
            vec![(p.0, p.1 - 7), (p.0 - 6, p.1 + 5), (p.0 + 6, p.1 + 5)],
            style,
        )),
        _ => root.draw(&Rectangle::new(
            [(p.0 - 5, p.1 - 5), (p.0 + 5, p.1 + 5)],
            style,
        )),
    }
    .map_err(err)
}

fn cross<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: (i32, i32),
    color: RGBColor,
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    let style = color.stroke_width(3);
    root.draw(&PathElement::new(
        vec![(p.0 - 7, p.1 - 7), (p.0 + 7, p.1 + 7)],
        style,
    ))
    .map_err(err)?;
    root.draw(&PathElement::new(
        vec![(p.0 - 7, p.1 + 7), (p.0 + 7, p.1 - 7)],
        style,
    ))
    .map_err(err)
}

/// The legend, in rows above the plot: each series' sample drawn as the series is (dashed
/// lines dashed), then its name.
fn legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    entries: &[(usize, i32, i32, i32)],
    (left, top): (i32, i32),
    c: &Colors,
    labels: &mut Vec<Placed>,
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    for &(i, dx, row, w) in entries {
        let s = &chart.series[i];
        let color = series_color(c, s, i);
        let (x0, y0) = (left + dx, top + row * LEGEND_ROW);
        let y = y0 + LEGEND_ROW / 2;
        let p = (x0 + SWATCH / 2, y);
        match s.kind {
            SeriesKind::Scatter if s.error_points => cross(root, p, color, err)?,
            SeriesKind::Scatter => marker(root, p, i, color, err)?,
            SeriesKind::Bars | SeriesKind::Area => root
                .draw(&Rectangle::new(
                    [(x0 + 4, y - 8), (x0 + SWATCH - 4, y + 8)],
                    color.mix(0.75).filled(),
                ))
                .map_err(err)?,
            _ => {
                let line = vec![(x0, y), (x0 + SWATCH, y)];
                let pieces = if dashed(s.kind, i) {
                    dashes(&line, 14.0, 8.0)
                } else {
                    vec![line]
                };
                for piece in pieces {
                    root.draw(&PathElement::new(piece, color.stroke_width(3)))
                        .map_err(err)?;
                }
            }
        }
        let style = (FONT, 20.0).into_font().color(&c.text);
        let (_, h) = text_size(root, &s.name, 20.0);
        root.draw(&Text::new(
            s.name.clone(),
            (x0 + SWATCH + 10, y - h / 2),
            style,
        ))
        .map_err(err)?;
        labels.push(Placed {
            kind: "legend",
            text: s.name.clone(),
            bounds: [x0, y0, x0 + w, y0 + LEGEND_ROW],
        });
    }
    Ok(())
}

/// XML text escaping for the layout note.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes `<dir>/<name>.svg` and `<dir>/<name>.png`; returns their paths.
pub fn write_chart(dir: &Path, chart: &Chart, theme: Theme) -> Result<Vec<PathBuf>, PlotError> {
    register_font();
    let chart = &bounded(chart);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PlotError::Io { path, source }
    };
    let mut svg = String::new();
    let layout = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let layout = draw(&root, chart, theme)?;
        root.present().map_err(draw_err(chart))?;
        layout
    };
    // The axes' pixel mapping, so values can be read back from the drawing.
    let note = format!(
        "<metadata id=\"aiperf-plot-layout\">{}</metadata>",
        escape(&serde_json::to_string(&layout).expect("plain values"))
    );
    if let Some(end) = svg.find('>') {
        svg.insert_str(end + 1, &format!("\n{note}"));
    }
    let svg_path = dir.join(format!("{}.svg", chart.name));
    std::fs::write(&svg_path, svg).map_err(io(&svg_path))?;

    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, chart, theme)?;
        root.present().map_err(draw_err(chart))?;
    }
    let png_path = dir.join(format!("{}.png", chart.name));
    let img = image::RgbImage::from_raw(WIDTH, HEIGHT, pixels).expect("buffer sized to the image");
    img.save_with_format(&png_path, image::ImageFormat::Png)
        .map_err(|e| PlotError::Render {
            name: chart.name.clone(),
            what: format!("writing {}: {e}", png_path.display()),
        })?;
    Ok(vec![png_path, svg_path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_finite_and_wide_enough_for_ticks_whatever_the_values() {
        let cases: [&[f64]; 6] = [
            &[1e308; 3],
            &[f64::MAX, f64::MAX],
            &[-f64::MAX, f64::MAX],
            &[5e-324, 1e-300, 0.0, f64::MAX],
            &[1000.0, 1000.0 + 1e-10],
            &[f64::INFINITY, f64::NAN, 1.0],
        ];
        for values in cases {
            let mut series = Series::new("s", SeriesKind::Bars, Vec::new());
            series.points = values.iter().map(|&v| (v, v)).collect();
            series.bar_width = Some(f64::MAX);
            let chart = bounded(&Chart {
                name: "c".into(),
                title: String::new(),
                description: String::new(),
                x: Axis::linear("x", true),
                y: Axis::linear("y", false),
                y2: None,
                series: vec![series],
                marks: Vec::new(),
                subtitle: String::new(),
            });
            let s = &chart.series[0];
            let w = s.bar_width.unwrap();
            for r in [
                scale::range(
                    scale::extent(s.points.iter().flat_map(|p| [p.0, p.0 + w])),
                    true,
                    scale::PAD,
                ),
                scale::range(
                    scale::extent(s.points.iter().map(|p| p.1)),
                    false,
                    scale::HEADROOM,
                ),
            ] {
                let span = r.end - r.start;
                let magnitude = r.start.abs().max(r.end.abs());
                assert!(
                    span.is_finite() && span > magnitude * 1e-12,
                    "{values:?}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn dashes_cover_the_line_in_pieces() {
        let d = dashes(&[(0, 0), (100, 0)], 10.0, 10.0);
        assert_eq!(d.len(), 5);
        assert_eq!(d[0], vec![(0, 0), (10, 0)]);
        assert_eq!(d[1], vec![(20, 0), (30, 0)]);
    }
}
