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
  // The axis rules of the PNG/SVG charts (src/plot/scale.rs): an axis asked to start at 0
  // does so only when the data comes near it; value axes leave room above the data.
  var ZERO_REACH = 0.4;
  var HEADROOM = 0.1;
  var PAD = 0.05;
  // Tick steps of count axes: whole numbers only.
  var WHOLE_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4,
    1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9];
  var MARK_FONT = 11;
  var MARK_ROW = 14;

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

  // The range of an axis whose data spans min..max: from 0 when asked and the data comes
  // near it, else fitted; `below` and `above` are room as shares of the span.
  function fitted(fromZero, fillsToZero, below, above) {
    return function (u, min, max) {
      if (min == null || max == null) return [0, 1];
      var lo = fillsToZero ? Math.min(0, min) : min, hi = max;
      var atZero = fromZero && lo >= 0 && lo <= hi * ZERO_REACH;
      if (atZero) lo = 0;
      var mag = Math.max(Math.abs(lo), Math.abs(hi));
      if (hi - lo <= mag * 1e-12) hi = lo + (mag === 0 ? 1 : mag * 0.1);
      var span = hi - lo;
      return [atZero ? 0 : lo - span * below, hi + span * above];
    };
  }

  // `key` is "x", "y" or "y2"; bars and areas are filled down to 0, so their axis holds it.
  function scale(chart, key) {
    var axis = chart[key];
    var sc = { time: false, auto: true };
    if (axis.log) { sc.distr = 3; sc.log = 10; return sc; }
    if (key === "x") {
      // A time axis keeps 0 at its start (and its zoom); others fit their data, with room
      // on both sides so points and their labels at the ends stay inside.
      if (axis.time) {
        sc.range = function (u, min, max) {
          if (min == null || max == null) return [0, 1];
          return uPlot.rangeNum(Math.min(0, min), Math.max(max, 0), 0.1, true);
        };
      } else {
        sc.range = fitted(axis.from_zero, false, PAD, PAD);
      }
      return sc;
    }
    var fills = chart.series.some(function (s) {
      return (key === "y2") === !!s.on_y2 && (s.kind === "bars" || s.kind === "area");
    });
    sc.range = fitted(axis.from_zero, fills, PAD, HEADROOM);
    return sc;
  }

  // A count axis: ticks at whole numbers only, printed without decimals.
  function countAxis(a, noted) {
    a.incrs = WHOLE_STEPS;
    a.values = function (u, splits) {
      var out = splits.map(function (v) { return Number.isInteger(v) ? fmt(v) : ""; });
      noted.length = 0;
      out.forEach(function (t) { if (t) noted.push(t); });
      return out;
    };
    return a;
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
  function overlay(chart, aligned, notes) {
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
      ctx.font = Math.round(MARK_FONT * px) + "px sans-serif";
      // A vertical mark's label sits above the plot, centred on its line, in the lowest row
      // where it clears the labels already placed: never on the data, never on another.
      var rows = [];
      var placed = [];
      var order = chart.marks.slice().sort(function (a, b) { return a.value - b.value; });
      order.forEach(function (m) {
        var pos = u.valToPos(m.value, m.on_x ? "x" : "y", true);
        if (!finite(pos)) return;
        ctx.beginPath();
        if (m.on_x) {
          if (pos < left || pos > right) return;
          ctx.moveTo(pos, top); ctx.lineTo(pos, bottom);
          ctx.stroke();
          var w = ctx.measureText(m.label).width;
          var x = Math.max(0, Math.min(pos - w / 2, u.ctx.canvas.width - w));
          var row = 0;
          while (row < rows.length && rows[row] + 8 * px > x) row++;
          rows[row] = x + w;
          var base = top - (4 + MARK_ROW * row) * px;
          ctx.fillText(m.label, x, base);
          // Relative to the plotting area, in CSS pixels.
          placed.push({ text: m.label, box: [(x - left) / px, (base - top) / px - MARK_FONT,
            (x + w - left) / px, (base - top) / px] });
        } else {
          if (pos < top || pos > bottom) return;
          ctx.moveTo(left, pos); ctx.lineTo(right, pos);
          ctx.stroke();
          ctx.fillText(m.label, left + 4 * px, pos - 3 * px);
        }
      });
      notes.marks = placed;
      ctx.restore();
    };
  }

  // Legend samples drawn as their series: dashed lines dashed, dotted dotted.
  function markerDash(u, i) {
    var d = u.series[i].dash;
    if (!d || !d.length) return "solid";
    return d[0] <= 2 ? "dotted" : "dashed";
  }

  function options(chart, aligned, width, notes) {
    var axes = [
      { label: chart.x.label, grid: { stroke: "#e4e4e4" } },
      { label: chart.y.label, grid: { stroke: "#e4e4e4" }, size: 70 },
    ];
    var scales = { x: scale(chart, "x"), y: scale(chart, "y") };
    if (chart.y2) {
      scales.y2 = scale(chart, "y2");
      axes.push({ label: chart.y2.label, scale: "y2", side: 1, grid: { show: false }, size: 70 });
    }
    [chart.x, chart.y, chart.y2].forEach(function (axis, i) {
      if (axis && axis.integer) countAxis(axes[i], notes.ticks[i]);
    });
    var markRows = chart.marks.filter(function (m) { return m.on_x; }).length;
    return {
      width: width,
      height: HEIGHT + markRows * MARK_ROW,
      // Room above the plot for the marks' labels.
      padding: [markRows ? markRows * MARK_ROW + 10 : null, null, null, null],
      legend: { markers: { dash: markerDash } },
      scales: scales,
      axes: axes,
      series: [{ label: chart.x.label, value: function (u, v) { return fmt(v); } }]
        .concat(seriesOptions(chart, aligned)),
      // Drag to zoom and double-click to reset on time axes only.
      cursor: { drag: { x: !!chart.x.time, y: false }, points: { size: 7 } },
      hooks: { draw: [overlay(chart, aligned, notes)] },
    };
  }

  function box(el) {
    var r = el.getBoundingClientRect();
    return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]
      .map(Math.round).join(",");
  }

  // The values drawn against axis `key` ("x", "y", "y2"), bars and areas down to 0.
  function valuesOn(chart, key) {
    var out = [];
    chart.series.forEach(function (s) {
      if (key === "x") {
        var w = finite(s.bar_width) ? s.bar_width : 0;
        s.points.forEach(function (p) { out.push(p[0], p[0] + w); });
        return;
      }
      if ((key === "y2") !== !!s.on_y2) return;
      s.points.forEach(function (p) { out.push(p[1]); });
      s.y_err.forEach(function (e) { out.push(e[0], e[1]); });
      if ((s.kind === "bars" || s.kind === "area") && s.points.length) out.push(0);
    });
    return out.filter(finite);
  }

  // Where a chart's parts went, in CSS pixels relative to its plotting area, for checks
  // on the drawn page: each axis's length, ticks and the span its data takes; the marks'
  // label boxes; each legend sample's border style.
  function layout(u, chart, notes) {
    var axes = {};
    ["x", "y", "y2"].forEach(function (key, i) {
      if (!chart[key] || !u.scales[key]) return;
      var v = valuesOn(chart, key);
      var len = key === "x" ? u.over.clientWidth : u.over.clientHeight;
      var span = null;
      if (v.length) {
        var a = u.valToPos(Math.min.apply(null, v), key), b = u.valToPos(Math.max.apply(null, v), key);
        span = [Math.min(a, b), Math.max(a, b)];
      }
      var ax = u.axes[i] || {};
      var ticks = chart[key].integer ? notes.ticks[i] : (ax._values || []).filter(Boolean);
      axes[key] = { len: len, data_px: span, integer: !!chart[key].integer, ticks: ticks };
    });
    var markers = Array.prototype.map.call(
      u.root.querySelectorAll(".u-legend .u-series .u-marker"),
      function (m) { return m.style.borderStyle || ""; });
    // The legend's last rows are the chart's series (a first may be the x value's).
    markers = markers.slice(markers.length - chart.series.length);
    return { axes: axes, marks: notes.marks, legend_markers: markers,
      series_dashed: chart.series.map(function (s, i) { return markerDash(u, i + 1); }) };
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
      var sub = document.createElement("p");
      sub.className = "subtitle";
      sub.textContent = chart.subtitle || "";
      var p = document.createElement("p");
      p.className = "description";
      p.textContent = chart.description + (chart.x.time ? " Drag across the chart to zoom, double-click to reset." : "");
      var plot = document.createElement("div");
      plot.className = "plot";
      section.appendChild(h);
      if (chart.subtitle) section.appendChild(sub);
      section.appendChild(p);
      section.appendChild(plot);
      host.appendChild(section);
      var aligned = alignedData(chart);
      var notes = { marks: [], ticks: [[], [], []] };
      var opts = options(chart, aligned, plot.clientWidth || 900, notes);
      var u = new uPlot(opts, aligned.data, plot);
      plots.push([u, plot, section, chart, notes, opts.height]);
    });
    // Where each chart's plotting area is on the page, for checks on a screenshot; uPlot
    // lays a chart out after this script's turn.
    setTimeout(function () {
      plots.forEach(function (p) {
        p[2].setAttribute("data-plot-box", box(p[0].over));
        p[2].setAttribute("data-layout", JSON.stringify(layout(p[0], p[3], p[4])));
        p[2].setAttribute("data-rendered", "1");
      });
      document.body.setAttribute("data-charts-rendered", String(plots.length));
    }, 0);
    function fit() {
      plots.forEach(function (p) { p[0].setSize({ width: p[1].clientWidth, height: p[5] }); });
    }
    window.addEventListener("resize", fit);
    // Canvases do not shrink with the paper: draw them at a printable width while printing.
    window.addEventListener("beforeprint", function () {
      plots.forEach(function (p) { p[0].setSize({ width: PRINT_WIDTH, height: p[5] * 0.8 }); });
    });
    window.addEventListener("afterprint", fit);
  }

  render();
})();
