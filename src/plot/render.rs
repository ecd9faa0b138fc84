//! Draws a [`Chart`] as SVG and PNG with plotters. plotters draws the frame (axes, grid,
//! tick labels); the series, marks and legend are drawn in pixels from the axes' mapping,
//! so primary and secondary axes share one drawing path.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::artifacts::PlotError;
use super::chart::{Chart, Series, SeriesKind};

pub const WIDTH: u32 = 1600;
pub const HEIGHT: u32 = 800;
const FONT: &str = "sans-serif";
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

fn register_font() {
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

/// The value range an axis shows: from 0 when asked (and nothing is negative), with 5% room
/// above the data.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    if from_zero && lo >= 0.0 {
        lo = 0.0;
    }
    // A span within rounding of its magnitude has no ticks to find: widen it.
    let magnitude = lo.abs().max(hi.abs());
    if hi - lo <= magnitude * 1e-12 {
        hi = lo
            + if magnitude == 0.0 {
                1.0
            } else {
                magnitude * 0.1
            };
    }
    let pad = (hi - lo) * 0.05;
    let lo = if from_zero && lo == 0.0 {
        0.0
    } else {
        lo - pad
    };
    lo..hi + pad
}

/// Tick labels with as many decimals as the axis's span needs (about ten ticks), the same
/// for every tick.
fn tick_format(r: &Range<f64>) -> impl Fn(&f64) -> String {
    let step = (r.end - r.start) / 10.0;
    let decimals = if step > 0.0 {
        (-step.log10().floor()).clamp(0.0, 6.0) as usize
    } else {
        0
    };
    move |v: &f64| format!("{v:.decimals$}")
}

type Ctx<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The primary axes: labels, grid, descriptions.
fn mesh<DB: DrawingBackend>(
    ctx: &mut Ctx<'_, DB>,
    chart: &Chart,
    c: &Colors,
    fx: &dyn Fn(&f64) -> String,
    fy: &dyn Fn(&f64) -> String,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let text = |size: f64| (FONT, size).into_font().color(&c.text);
    ctx.configure_mesh()
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
}

#[derive(serde::Serialize)]
struct SeriesInfo {
    name: String,
    color: String,
    y2: bool,
}

#[derive(serde::Serialize)]
struct Layout {
    x: AxisMap,
    y: AxisMap,
    y2: Option<AxisMap>,
    series: Vec<SeriesInfo>,
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

/// Draws `chart` on `root`; returns the axes' pixel mapping.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    theme: Theme,
) -> Result<Layout, PlotError> {
    let err = draw_err(chart);
    let c = colors(theme);
    root.fill(&c.background).map_err(&err)?;
    let primary: Vec<&Series> = chart.series.iter().filter(|s| !s.on_y2).collect();
    let secondary: Vec<&Series> = chart.series.iter().filter(|s| s.on_y2).collect();
    let xs = chart.series.iter().flat_map(|s| {
        let w = s.bar_width.unwrap_or(0.0);
        s.points.iter().flat_map(move |p| [p.0, p.0 + w])
    });
    let mark_x = chart.marks.iter().filter(|m| m.on_x).map(|m| m.value);
    let x_range = range(xs.chain(mark_x), chart.x.from_zero);
    let ys = |series: &[&Series]| -> Vec<f64> {
        series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .map(|p| p.1)
                    .chain(s.y_err.iter().flat_map(|e| [e.0, e.1]))
            })
            .collect()
    };
    let mark_y = chart.marks.iter().filter(|m| !m.on_x).map(|m| m.value);
    let y_range = range(ys(&primary).into_iter().chain(mark_y), chart.y.from_zero);
    let y2_from_zero = chart.y2.as_ref().is_some_and(|a| a.from_zero);
    let y2_range = range(ys(&secondary).into_iter(), y2_from_zero);

    let text = |size: f64| (FONT, size).into_font().color(&c.text);
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&chart.title, text(34.0))
        .margin(24)
        .x_label_area_size(80)
        .y_label_area_size(110);
    if chart.y2.is_some() {
        builder.right_y_label_area_size(110);
    }
    let ctx = builder
        .build_cartesian_2d(x_range.clone(), y_range.clone())
        .map_err(&err)?;
    let (fx, fy, fy2) = (
        tick_format(&x_range),
        tick_format(&y_range),
        tick_format(&y2_range),
    );
    // The secondary axis takes the right label area, so it is set before the primary mesh
    // is drawn (else the primary labels land on both sides).
    let (p0, p1, secondary) = match &chart.y2 {
        None => {
            let mut ctx = ctx;
            mesh(&mut ctx, chart, &c, &fx, &fy).map_err(&err)?;
            let p0 = ctx.backend_coord(&(x_range.start, y_range.start));
            let p1 = ctx.backend_coord(&(x_range.end, y_range.end));
            (p0, p1, None)
        }
        Some(y2) => {
            let mut dual = ctx.set_secondary_coord(x_range.clone(), y2_range.clone());
            mesh(&mut dual, chart, &c, &fx, &fy).map_err(&err)?;
            dual.configure_secondary_axes()
                .y_desc(&y2.label)
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
    let x_map = AxisMap {
        range: [x_range.start, x_range.end],
        px: [p0.0, p1.0],
    };
    let y_map = AxisMap {
        range: [y_range.start, y_range.end],
        px: [p0.1, p1.1],
    };
    let mut maps = vec![linear(&x_range, &y_range, p0, p1)];
    let mut y2_map = None;
    if let Some((q0, q1)) = secondary {
        y2_map = Some(AxisMap {
            range: [y2_range.start, y2_range.end],
            px: [q0.1, q1.1],
        });
        maps.push(linear(&x_range, &y2_range, q0, q1));
    }

    let mut infos = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        let color = if s.error_points {
            c.error
        } else {
            c.series[i % c.series.len()]
        };
        let map = &maps[usize::from(s.on_y2 && maps.len() > 1)];
        draw_series(root, s, i, color, map, &err)?;
        infos.push(SeriesInfo {
            name: s.name.clone(),
            color: hex(color),
            y2: s.on_y2,
        });
    }
    let main = &maps[0];
    for m in &chart.marks {
        let (a, b, at) = if m.on_x {
            (
                main(m.value, y_range.start),
                main(m.value, y_range.end),
                main(m.value, y_range.end),
            )
        } else {
            (
                main(x_range.start, m.value),
                main(x_range.end, m.value),
                main(x_range.start, m.value),
            )
        };
        for d in dashes(&[a, b], 10.0, 6.0) {
            root.draw(&PathElement::new(d, c.text.stroke_width(2)))
                .map_err(&err)?;
        }
        let pos = if m.on_x {
            (
                at.0 + 6,
                at.1 + 6 + 26 * (marks_before(chart, m.value) as i32),
            )
        } else {
            (at.0 + 6, at.1 - 26)
        };
        root.draw(&Text::new(m.label.clone(), pos, text(20.0)))
            .map_err(&err)?;
    }
    legend(root, chart, &c, &err)?;
    Ok(Layout {
        x: x_map,
        y: y_map,
        y2: y2_map,
        series: infos,
    })
}

/// Staggers the labels of vertical marks so close ones do not overprint.
fn marks_before(chart: &Chart, value: f64) -> usize {
    chart
        .marks
        .iter()
        .filter(|m| m.on_x && m.value < value)
        .count()
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
            // The third and later lines are dashed, to tell them apart without colour.
            if index >= 2 && index.is_multiple_of(2) {
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

/// The legend, in the plot's top-left corner.
fn legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    c: &Colors,
    err: &dyn Fn(DrawingAreaErrorKind<DB::ErrorType>) -> PlotError,
) -> Result<(), PlotError> {
    let rows = chart.series.len() as i32;
    let width = 20 + 60 + 12 * chart.series.iter().map(|s| s.name.len()).max().unwrap_or(0) as i32;
    let x0 = 160;
    let y0 = 90;
    let bg = c.background.mix(0.85).filled();
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + width, y0 + 14 + 30 * rows)],
        bg,
    ))
    .map_err(err)?;
    root.draw(&Rectangle::new(
        [(x0, y0), (x0 + width, y0 + 14 + 30 * rows)],
        c.grid.stroke_width(1),
    ))
    .map_err(err)?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = if s.error_points {
            c.error
        } else {
            c.series[i % c.series.len()]
        };
        let y = y0 + 22 + 30 * i as i32;
        let p = (x0 + 35, y);
        match s.kind {
            SeriesKind::Scatter if s.error_points => cross(root, p, color, err)?,
            SeriesKind::Scatter => marker(root, p, i, color, err)?,
            SeriesKind::Bars | SeriesKind::Area => root
                .draw(&Rectangle::new(
                    [(x0 + 15, y - 8), (x0 + 55, y + 8)],
                    color.mix(0.75).filled(),
                ))
                .map_err(err)?,
            _ => root
                .draw(&PathElement::new(
                    vec![(x0 + 15, y), (x0 + 55, y)],
                    color.stroke_width(3),
                ))
                .map_err(err)?,
        }
        let style = (FONT, 20.0).into_font().color(&c.text);
        root.draw(&Text::new(s.name.clone(), (x0 + 68, y - 11), style))
            .map_err(err)?;
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
    use crate::plot::chart::Axis;

    #[test]
    fn ranges_start_at_zero_and_leave_room() {
        let r = range([3.0, 10.0].into_iter(), true);
        assert_eq!(r.start, 0.0);
        assert!((r.end - 10.5).abs() < 1e-9);
        let r = range([3.0, 10.0].into_iter(), false);
        assert!(r.start < 3.0 && r.start > 2.0);
        assert_eq!(range(std::iter::empty(), true), 0.0..1.0);
    }

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
            });
            let s = &chart.series[0];
            let w = s.bar_width.unwrap();
            for r in [
                range(s.points.iter().flat_map(|p| [p.0, p.0 + w]), true),
                range(s.points.iter().map(|p| p.1), false),
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
