// Draws the report's charts with uPlot from the chart models embedded in #report-data.
// One chart model = axes, series of (x, y) points, reference marks; see src/plot/chart.rs.
(function () {
  "use strict";

  // Colour-blind-safe colours that stay apart in grayscale (with the dashes below).
  var COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B"];
  var DASHES = [[], [8, 4], [2, 3], [10, 3, 2, 3]];
  var ERROR_COLOUR = "#C00000";
  var HEIGHT = 340;
  var PRINT_WIDTH = 680;

  function colour(i) { return COLOURS[i % COLOURS.length]; }

  function finite(v) { return typeof v === "number" && isFinite(v); }

  // A series' points as drawn: bars become the outline of their histogram (steps down
  // to zero between bins that do not touch), everything else as given.
  function drawnPoints(s) {
    var pts = s.points.filter(function (p) { return finite(p[0]) && finite(p[1]); });
    if (s.kind !== "bars") return pts.map(function (p, i) { return [p[0], p[1], i]; });
    var w = finite(s.bar_width) ? s.bar_width : 0;
    var out = [];
    var end = null;
    pts.forEach(function (p, i) {
      if (end !== null && p[0] > end) out.push([end, 0, -1]);
      if (end === null) out.push([p[0], 0, -1]);
      out.push([p[0], p[1], i]);
      end = p[0] + w;
    });
    if (end !== null) { out.push([end, pts[pts.length - 1][1], -1]); out.push([end, 0, -1]); }
    return out;
  }

  // uPlot wants one shared, sorted x column: every point gets a row, and points of other
  // series at the same x share it. A row a series has no point in holds `undefined`, which
  // uPlot lines pass over and the hover skips to the nearest real point.
  function alignedData(chart) {
    var entries = [];
    chart.series.forEach(function (s, si) {
      drawnPoints(s).forEach(function (p, k) {
        if (chart.y.log && !s.on_y2 && p[1] <= 0) return;
        if (chart.x.log && p[0] <= 0) return;
        entries.push({ x: p[0], y: p[1], s: si, k: k, point: p[2] });
      });
    });
    entries.sort(function (a, b) { return a.x - b.x || a.s - b.s || a.k - b.k; });
    var xs = [];
    var cols = chart.series.map(function () { return []; });
    var pointAt = chart.series.map(function () { return {}; });
    var rowOf = chart.series.map(function () { return {}; });
    entries.forEach(function (e) {
      var row = xs.length - 1;
      if (row < 0 || xs[row] !== e.x || cols[e.s][row] !== undefined) {
        xs.push(e.x);
        cols.forEach(function (c) { c.push(undefined); });
        row++;
      }
      cols[e.s][row] = e.y;
      if (e.point >= 0) { pointAt[e.s][row] = e.point; rowOf[e.s][e.point] = row; }
    });
    return { data: [xs].concat(cols), pointAt: pointAt, rowOf: rowOf };
  }

  function fmt(v) {
    if (!finite(v)) return "-";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return v.toLocaleString("en-US", { maximumFractionDigits: a >= 100 ? 1 : 3 });
  }

  function scale(axis) {
    var sc = { time: false, auto: true };
    if (axis.log) { sc.distr = 3; sc.log = 10; }
    else if (axis.from_zero) {
      sc.range = function (u, min, max) {
        if (min == null || max == null) return [0, 1];
        return uPlot.rangeNum(Math.min(0, min), Math.max(max, 0), 0.1, true);
      };
    }
    return sc;
  }

  // Failed requests are drawn as crosses.
  function crosses(u, si, i0, i1) {
    var p = new Path2D();
    var r = 4;
    var xs = u.data[0], ys = u.data[si];
    var key = u.series[si].scale;
    for (var i = i0; i <= i1; i++) {
      if (ys[i] == null) continue;
      var cx = u.valToPos(xs[i], "x", true), cy = u.valToPos(ys[i], key, true);
      p.moveTo(cx - r, cy - r); p.lineTo(cx + r, cy + r);
      p.moveTo(cx - r, cy + r); p.lineTo(cx + r, cy - r);
    }
    return { stroke: p, fill: null, clip: null, flags: 0 };
  }

  function seriesOptions(chart, aligned) {
    return chart.series.map(function (s, si) {
      var c = s.error_points ? ERROR_COLOUR : colour(si);
      var opt = {
        label: s.name,
        stroke: c,
        width: 2,
        scale: s.on_y2 ? "y2" : "y",
        dash: DASHES[si % DASHES.length],
        value: function (u, v, sIdx, row) {
          if (v == null) return "-";
          var p = aligned.pointAt[si][row];
          var label = p !== undefined && s.labels[p] ? " (" + s.labels[p] + ")" : "";
          return fmt(v) + label;
        },
        points: { show: false },
      };
      if (s.kind === "step") opt.paths = uPlot.paths.stepped({ align: 1 });
      if (s.kind === "bars") {
        opt.paths = uPlot.paths.stepped({ align: 1 });
        opt.fill = c + "55";
        opt.width = 1;
        opt.dash = [];
      }
      if (s.kind === "area") { opt.fill = c + "33"; }
      if (s.kind === "scatter") {
        opt.paths = function () { return null; };
        opt.dash = [];
        opt.points = { show: true, size: 6, width: 1, stroke: c, fill: c + "99" };
        if (s.error_points) opt.points = { show: true, size: 9, width: 2, stroke: c, paths: crosses };
      }
      return opt;
    });
  }

  // Reference lines (p50/p90/p99), error bars and point labels, on top of the series.
  function overlay(chart, aligned) {
    return function (u) {
      var ctx = u.ctx;
      var px = uPlot.pxRatio;
      var left = u.bbox.left, top = u.bbox.top, right = left + u.bbox.width, bottom = top + u.bbox.height;
      ctx.save();
      ctx.font = Math.round(11 * px) + "px sans-serif";
      ctx.lineWidth = px;
      chart.series.forEach(function (s, si) {
        if (!u.series[si + 1].show) return;
        var key = s.on_y2 ? "y2" : "y";
        ctx.strokeStyle = ctx.fillStyle = s.error_points ? ERROR_COLOUR : colour(si);
        s.y_err.forEach(function (e, pi) {
          var row = aligned.rowOf[si][pi];
          if (row === undefined || !finite(e[0]) || !finite(e[1])) return;
          var x = u.valToPos(u.data[0][row], "x", true);
          var lo = u.valToPos(e[0], key, true), hi = u.valToPos(e[1], key, true);
          ctx.beginPath();
          ctx.moveTo(x, lo); ctx.lineTo(x, hi);
          ctx.moveTo(x - 4 * px, lo); ctx.lineTo(x + 4 * px, lo);
          ctx.moveTo(x - 4 * px, hi); ctx.lineTo(x + 4 * px, hi);
          ctx.stroke();
        });
        s.labels.forEach(function (text, pi) {
          var row = aligned.rowOf[si][pi];
          if (row === undefined || !text) return;
          var v = u.data[si + 1][row];
          if (v == null) return;
          var x = u.valToPos(u.data[0][row], "x", true), y = u.valToPos(v, key, true);
          if (x < left || x > right || y < top || y > bottom) return;
          ctx.fillText(text, x + 5 * px, y - 5 * px);
        });
      });
      ctx.strokeStyle = ctx.fillStyle = "#555";
      ctx.setLineDash([5 * px, 4 * px]);
      chart.marks.forEach(function (m, mi) {
        var pos = u.valToPos(m.value, m.on_x ? "x" : "y", true);
        if (!finite(pos)) return;
        ctx.beginPath();
        if (m.on_x) {
          if (pos < left || pos > right) return;
          ctx.moveTo(pos, top); ctx.lineTo(pos, bottom);
          ctx.stroke();
          ctx.fillText(m.label, pos + 3 * px, top + (12 + 13 * mi) * px);
        } else {
          if (pos < top || pos > bottom) return;
          ctx.moveTo(left, pos); ctx.lineTo(right, pos);
          ctx.stroke();
          ctx.fillText(m.label, left + 4 * px, pos - 3 * px);
        }
      });
      ctx.restore();
    };
  }

  function options(chart, aligned, width) {
    var axes = [
      { label: chart.x.label, grid: { stroke: "#e4e4e4" } },
      { label: chart.y.label, grid: { stroke: "#e4e4e4" }, size: 70 },
    ];
    var scales = { x: scale(chart.x), y: scale(chart.y) };
    if (chart.y2) {
      scales.y2 = scale(chart.y2);
      axes.push({ label: chart.y2.label, scale: "y2", side: 1, grid: { show: false }, size: 70 });
    }
    return {
      width: width,
      height: HEIGHT,
      scales: scales,
      axes: axes,
      series: [{ label: chart.x.label, value: function (u, v) { return fmt(v); } }]
        .concat(seriesOptions(chart, aligned)),
      // Drag to zoom and double-click to reset on time axes only.
      cursor: { drag: { x: !!chart.x.time, y: false }, points: { size: 7 } },
      hooks: { draw: [overlay(chart, aligned)] },
    };
  }

  function box(el) {
    var r = el.getBoundingClientRect();
    return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]
      .map(Math.round).join(",");
  }

  function render() {
    var source = document.getElementById("report-data");
    var host = document.getElementById("charts");
    if (!source || !host) return;
    var charts = JSON.parse(source.textContent).charts || [];
    var plots = [];
    charts.forEach(function (chart) {
      var section = document.createElement("section");
      section.className = "chart";
      section.id = "chart-" + chart.name;
      var h = document.createElement("h3");
      h.textContent = chart.title;
      var p = document.createElement("p");
      p.className = "description";
      p.textContent = chart.description + (chart.x.time ? " Drag across the chart to zoom, double-click to reset." : "");
      var plot = document.createElement("div");
      plot.className = "plot";
      section.appendChild(h);
      section.appendChild(p);
      section.appendChild(plot);
      host.appendChild(section);
      var aligned = alignedData(chart);
      var u = new uPlot(options(chart, aligned, plot.clientWidth || 900), aligned.data, plot);
      plots.push([u, plot, section]);
    });
    // Where each chart's plotting area is on the page, for checks on a screenshot; uPlot
    // lays a chart out after this script's turn.
    setTimeout(function () {
      plots.forEach(function (p) {
        p[2].setAttribute("data-plot-box", box(p[0].over));
        p[2].setAttribute("data-rendered", "1");
      });
      document.body.setAttribute("data-charts-rendered", String(plots.length));
    }, 0);
    function fit() {
      plots.forEach(function (p) { p[0].setSize({ width: p[1].clientWidth, height: HEIGHT }); });
    }
    window.addEventListener("resize", fit);
    // Canvases do not shrink with the paper: draw them at a printable width while printing.
    window.addEventListener("beforeprint", function () {
      plots.forEach(function (p) { p[0].setSize({ width: PRINT_WIDTH, height: HEIGHT * 0.8 }); });
    });
    window.addEventListener("afterprint", fit);
  }

  render();
})();
