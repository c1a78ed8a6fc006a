  /* ---------------------------------------------------------------- charts */

  /* Clean a payload series: numeric x only, sorted by x, y null where not a finite number. */
  function cleanSeries(s) {
    var xs = Array.isArray(s && s.x) ? s.x : [], ys = Array.isArray(s && s.y) ? s.y : [];
    var n = Math.min(xs.length, ys.length), x = new Array(n), y = new Array(n), k = 0, sorted = true;
    for (var i = 0; i < n; i++) {
      var xv = xs[i];
      if (typeof xv !== "number" || !isFinite(xv)) continue;
      var yv = ys[i];
      if (k && xv < x[k - 1]) sorted = false;
      x[k] = xv; y[k] = typeof yv === "number" && isFinite(yv) ? yv : null; k++;
    }
    x.length = k; y.length = k;
    if (!sorted) {
      var idx = new Array(k);
      for (var j = 0; j < k; j++) idx[j] = j;
      idx.sort(function (a, b) { return x[a] - x[b] || a - b; });
      x = idx.map(function (i2) { return x[i2]; });
      y = idx.map(function (i2) { return y[i2]; });
    }
    return { label: str(s && s.label) || "series", x: x, y: y, band: s && (s.band === "hi" || s.band === "lo") ? s.band : "" };
  }

  /* uPlot wants one shared x array: the sorted union of all series' x, with null where a series
   * has no point. Series arrays are sorted, so one merge pass per series is enough. */
  function align(series) {
    var n = series.length;
    if (!n) return [[]];
    var first = series[0].x, same = true;
    for (var s = 1; s < n && same; s++) {
      var xs = series[s].x;
      if (xs.length !== first.length) { same = false; break; }
      for (var i = 0; i < xs.length; i++) if (xs[i] !== first[i]) { same = false; break; }
    }
    if (same) {
      var out = [first.slice()];
      for (var t = 0; t < n; t++) out.push(series[t].y.slice());
      return out;
    }
    var total = 0;
    for (var a = 0; a < n; a++) total += series[a].x.length;
    var all = new Float64Array(total), p = 0;
    for (var b = 0; b < n; b++) { all.set(series[b].x, p); p += series[b].x.length; }
    all.sort();
    var union = [];
    for (var c = 0; c < total; c++) if (c === 0 || all[c] !== all[c - 1]) union.push(all[c]);
    var data = [union];
    for (var d = 0; d < n; d++) {
      var sx = series[d].x, sy = series[d].y, ys = new Array(union.length).fill(null), u = 0;
      for (var e = 0; e < sx.length; e++) {
        while (union[u] < sx[e]) u++;
        ys[u] = sy[e];
      }
      data.push(ys);
    }
    return data;
  }

  /* Per series: drawn points (to decide on dots) and the latest value (legend without a cursor). */
  function countPoints(ch) {
    ch.counts = []; ch.lastY = []; ch.lastX = null;
    ch.spec.series.forEach(function (s) {
      var n = 0, last = null;
      for (var i = 0; i < s.y.length; i++) if (s.y[i] !== null) { n++; last = s.y[i]; }
      ch.counts.push(n); ch.lastY.push(last);
      if (s.x.length && (ch.lastX === null || s.x[s.x.length - 1] > ch.lastX)) ch.lastX = s.x[s.x.length - 1];
    });
    baselineLegendValues(ch);
  }

  function timeTicks(u, ticks) {
    var span = u.scales.x.max - u.scales.x.min;
    return ticks.map(function (t) {
      var d = new Date(t * 1000), hm = pad2(d.getHours()) + ":" + pad2(d.getMinutes());
      if (span < 300) return hm + ":" + pad2(d.getSeconds());
      if (span > 2 * 86400) return (d.getMonth() + 1) + "/" + d.getDate() + " " + hm;
      return hm;
    });
  }

  /* Pixels between time ticks, as wide as timeTicks' labels: hh:mm:ss, m/d hh:mm or hh:mm. */
  function timeSpace(u, axisIdx, min, max) {
    var span = max - min;
    return span < 300 ? 66 : span > 2 * 86400 ? 84 : 50;
  }

  function pointCount(spec) {
    var n = 0;
    spec.series.forEach(function (s) { n += s.x.length; });
    return n;
  }

  /* train blue, eval orange in every chart; "rank N" gets palette colour N; the rest in order. */
  function seriesStyles(spec, th) {
    var n = th.palette.length, used = {}, styles = [];
    var bases = spec.series.map(function (s) { return s.label.toLowerCase().replace(/ \(resumed \d+\)$/, ""); });
    var roles = Object.keys(N.colors);
    var role = function (b) {
      for (var r = 0; r < roles.length; r++) if (b === roles[r] || b.indexOf(roles[r] + " ") === 0 || b.indexOf(roles[r] + ",") === 0) return roles[r];
      return null;
    };
    var reserved = 0;
    roles.forEach(function (r) { if (isNum(N.colors[r])) reserved = Math.max(reserved, N.colors[r] + 1); });
    var next = bases.some(function (b) { return role(b) !== null; }) ? reserved : 0;
    spec.series.forEach(function (s, i) {
      var base = bases[i], idx = used[base], m, r = role(base);
      if (idx === undefined) {
        if (r !== null && isNum(N.colors[r])) idx = N.colors[r] % n;
        else if ((m = /^rank (\d+)$/.exec(base))) idx = Number(m[1]) % n;
        else idx = next++ % n;
        used[base] = idx;
      }
      styles.push({ stroke: th.palette[idx], dash: base !== s.label.toLowerCase() ? [6, 3] : undefined });
    });
    return styles;
  }

  function axisSize(self, values, axisIdx, cycleNum) {
    var axis = self.axes[axisIdx];
    if (cycleNum > 1) return axis._size;
    var size = axis.ticks.size + axis.gap, longest = "";
    (values || []).forEach(function (v) { if (v && v.length > longest.length) longest = v; });
    if (longest) { self.ctx.font = axis.font[0]; size += self.ctx.measureText(longest).width / devicePixelRatio; }
    return Math.ceil(size) + 4;
  }

  function drawMarkers(u) {
    var ch = u.tcChart;
    if (!ch || ch.spec.byTime) return;
    var markers = (S.payload && S.payload.markers) || [];
    var th = ch.theme, ctx = u.ctx, dpr = devicePixelRatio || 1, drawn = 0;
    var min = u.scales.x.min, max = u.scales.x.max, box = u.bbox;
    if (!isNum(min) || !isNum(max)) { ch.box.setAttribute("data-markers", "0"); return; }
    ctx.save();
    ctx.beginPath(); ctx.rect(box.left, box.top, box.width, box.height); ctx.clip();
    ctx.font = "600 " + Math.round(10 * dpr) + "px " + th.font;
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    var rows = [];  // right edge of the last label in each text row, to avoid overlaps
    markers.filter(function (m) { return m && isNum(m.x) && m.x >= min && m.x <= max; })
      .sort(function (a, b) { return a.x - b.x; }).forEach(function (m) {
      var colour = th.marker(m.kind);
      var x = Math.round(u.valToPos(m.x, "x", true)) + 0.5;
      ctx.strokeStyle = colour; ctx.lineWidth = Math.max(1, dpr); ctx.setLineDash([5 * dpr, 4 * dpr]);
      ctx.beginPath(); ctx.moveTo(x, box.top); ctx.lineTo(x, box.top + box.height); ctx.stroke();
      var label = str(m.label);
      if (label) {
        var w = ctx.measureText(label).width + 8 * dpr, h = 14 * dpr;
        var left = x + 4 * dpr + w > box.left + box.width ? x - 4 * dpr - w : x + 4 * dpr;
        var row = 0;
        while (rows[row] !== undefined && rows[row] > left - 2 * dpr && row < 4) row++;
        rows[row] = left + w;
        var top = box.top + 3 * dpr + row * (h + 2 * dpr);
        ctx.setLineDash([]);
        ctx.globalAlpha = 0.88; ctx.fillStyle = th.panel; ctx.fillRect(left, top, w, h);
        ctx.globalAlpha = 1; ctx.strokeStyle = colour; ctx.lineWidth = dpr; ctx.strokeRect(left, top, w, h);
        ctx.fillStyle = colour; ctx.fillText(label, left + 4 * dpr, top + 2 * dpr);
      }
      drawn++;
    });
    ctx.restore();
    ch.box.setAttribute("data-markers", String(drawn));
  }

  function plotWidth(ch) { return Math.max(240, Math.floor(ch.holder.clientWidth || ch.box.clientWidth - 20 || 420)); }

  function buildPlot(ch) {
    if (ch.plot) { ch.plot.destroy(); ch.plot = null; }
    clear(ch.holder);
    var spec = ch.spec, isTime = spec.byTime, th = theme();
    ch.theme = th;
    var styles = baselineStyles(spec, seriesStyles(spec, th));
    countPoints(ch);
    var series = [{
      label: isTime ? "time" : str(spec.x || "step"),
      value: function (u, v, si, idx) {
        if (idx === null || idx === undefined) v = ch.lastX;
        return v === null || v === undefined ? "\u2013" : isTime ? fmtClock(v) : fmtInt(v);
      }
    }];
    var band = { hi: 0, lo: 0 };  // a mean's +/- 1 std edges: a shaded band (series index + 1)
    spec.series.forEach(function (s, i) { if (s.band && !band[s.band]) band[s.band] = i + 1; });
    spec.series.forEach(function (s, i) {
      series.push({
        label: s.label,
        stroke: s.band ? th.palette[0] : styles[i].stroke,
        dash: s.band ? [2, 3] : styles[i].dash,
        width: s.band ? 0.8 : 1.6,
        spanGaps: true,
        points: {
          size: 5, fill: styles[i].stroke, stroke: styles[i].stroke,
          show: function (u, si) { return ch.counts[si - 1] <= Math.max(8, u.bbox.width / devicePixelRatio / 9); }
        },
        value: function (u, v, si, idx) {
          if (idx === null || idx === undefined) v = ch.lastY[si - 1];
          return v === null || v === undefined ? "\u2013" : fmtNum(v, 5);
        }
      });
    });
    var axisFont = "11px " + th.font;
    var axis = { stroke: th.axis, font: axisFont, grid: { stroke: th.grid, width: 1 }, ticks: { stroke: th.grid, width: 1, size: 4 } };
    var opts = {
      width: plotWidth(ch),
      height: CHART_HEIGHT,
      pxAlign: 0,
      cursor: { sync: { key: isTime ? "tc-time" : "tc-step" }, drag: { x: true, y: false, setScale: true }, points: { size: 7 } },
      legend: { show: true, live: true },
      scales: { x: { time: isTime, range: function (u, min, max) {
        if (min === null || max === null) return [0, 1];
        var pad = isTime ? 30 : 1;
        if (u.data[0].length === 1) min = max = u.data[0][0];  // (uPlot gives a lone time 1000 days)
        return min === max ? [min - pad, max + pad] : [min, max];
      } } },
      axes: [
        Object.assign({}, axis, isTime ? { values: timeTicks, incrs: TIME_INCRS, space: timeSpace } :
          { values: function (u, ticks) { return ticks.map(fmtAxis); } }),
        Object.assign({}, axis, { size: axisSize, values: function (u, ticks) { return ticks.map(fmtAxis); } })
      ],
      hooks: { draw: [drawMarkers] },
      series: series
    };
    if (band.hi && band.lo) {
      opts.bands = [{ series: [band.hi, band.lo], fill: th.palette[0] + "33" }];
      ch.box.setAttribute("data-band", "1");
    }
    ch.plot = new uPlot(opts, align(spec.series), ch.holder);
    ch.plot.tcChart = ch;
    ch.width = opts.width;
    ch.box.setAttribute("data-points", String(pointCount(spec)));
    ch.box.setAttribute("data-series", String(spec.series.length));
  }

  function refreshPlot(ch) {
    countPoints(ch);
    // Keep a zoomed-in view where the user put it; otherwise follow the new points.
    var xs = ch.plot.data[0], sc = ch.plot.scales.x;
    var zoomed = xs.length > 1 && isNum(sc.min) && isNum(sc.max) && (sc.min > xs[0] || sc.max < xs[xs.length - 1]);
    ch.plot.setData(align(ch.spec.series), !zoomed);
    ch.box.setAttribute("data-points", String(pointCount(ch.spec)));
  }

  function createChart(c) {
    var spec = {
      id: str(c.id), title: str(c.title) || str(c.id), unit: str(c.unit),
      group: str(c.group), x: str(c.x),
      isSystem: has(N.groups.system) && c.group === N.groups.system,
      byTime: has(N.axes.time) && c.x === N.axes.time,
      series: (Array.isArray(c.series) ? c.series : []).map(cleanSeries)
    };
    var box = el("figure", "tc-chart", null, { "data-chart-id": spec.id, "data-group": spec.group, "data-x": spec.x });
    var cap = el("figcaption", "tc-chart-head");
    add(cap, el("span", "tc-chart-title", spec.title),
      el("span", "tc-chart-unit", UNIT_WORDS[spec.unit] || spec.unit || "no unit", { title: "unit" }),
      el("span", "tc-chart-x", "by " + (spec.x || "step")));
    var holder = el("div", "tc-chart-plot");
    add(box, cap, holder);
    var ch = { spec: spec, box: box, holder: holder, plot: null, counts: [], width: 0, theme: null };
    S.charts.set(spec.id, ch);
    return ch;
  }

  function renderChartSections() {
    var training = [], system = [], rl = S.dom.rlGrids || {}, rlCount = Object.create(null);
    S.charts.forEach(function (ch) {
      var g = rl[ch.spec.group];
      if (g) {
        if (ch.box.parentNode !== g.grid) g.grid.appendChild(ch.box);
        rlCount[ch.spec.group] = (rlCount[ch.spec.group] || 0) + 1;
      } else (ch.spec.isSystem ? system : training).push(ch);
    });
    Object.keys(rl).forEach(function (k) {
      rl[k].section.hidden = !rlCount[k];
      rl[k].section.querySelector(".tc-count").textContent = rlCount[k] ? String(rlCount[k]) : "";
    });
    var tg = S.dom.trainGrid, sg = S.dom.sysGrid;
    training.forEach(function (ch) { if (ch.box.parentNode !== tg) tg.appendChild(ch.box); });
    system.forEach(function (ch) { if (ch.box.parentNode !== sg) sg.appendChild(ch.box); });
    S.dom.charts.classList.toggle("tc-section--empty", !training.length);
    S.dom.trainEmpty.hidden = !!training.length || summaryRows().length > 0;
    S.dom.trainEmpty.textContent = emptyText("training", "No training metrics reported yet.");
    tg.hidden = !training.length;
    sg.hidden = !system.length;
    var heading = S.dom.charts.querySelector(".tc-h2 span");
    var run = (S.payload && S.payload.run) || {};
    if (heading && run.metrics_title) heading.textContent = str(run.metrics_title);
    var count = S.dom.charts.querySelector(".tc-count");
    if (count) count.textContent = training.length ? String(training.length) : "";
    S.charts.forEach(function (ch) { if (!ch.plot) buildPlot(ch); });
    renderSystemEmpty();
  }

  /* A live series may carry a coarse "head" of its whole history: it back-fills what this page
   * never received (opened mid-run, or missed polls), without touching points already drawn. */
  function backfill(mine, raw, tailFirst) {
    var hx = Array.isArray(raw && raw.head_x) ? raw.head_x : null, hy = Array.isArray(raw && raw.head_y) ? raw.head_y : null;
    if (!hx || !hy) return false;
    var first = mine.x.length ? mine.x[0] : Infinity, last = mine.x.length ? mine.x[mine.x.length - 1] : -Infinity;
    var before = { x: [], y: [] }, gap = { x: [], y: [] };
    for (var i = 0; i < Math.min(hx.length, hy.length); i++) {
      var x = hx[i], y = typeof hy[i] === "number" && isFinite(hy[i]) ? hy[i] : null;
      if (typeof x !== "number") continue;
      if (x < Math.min(first, tailFirst)) { before.x.push(x); before.y.push(y); }
      else if (x > last && x < tailFirst) { gap.x.push(x); gap.y.push(y); }  // missed between two updates
    }
    if (!before.x.length && !gap.x.length) return false;
    mine.x = before.x.concat(mine.x, gap.x); mine.y = before.y.concat(mine.y, gap.y);
    return true;
  }

  function mergeCharts(list) {
    var changed = false;
    (Array.isArray(list) ? list : []).forEach(function (c) {
      if (!c || !has(c.id)) return;
      var ch = S.charts.get(String(c.id));
      if (!ch) { createChart(c); changed = true; return; }
      var rebuild = false;
      (Array.isArray(c.series) ? c.series : []).forEach(function (raw) {
        var s = cleanSeries(raw);
        var mine = null;
        for (var i = 0; i < ch.spec.series.length; i++) if (ch.spec.series[i].label === s.label) { mine = ch.spec.series[i]; break; }
        var tailFirst = s.x.length ? s.x[0] : Infinity;
        if (!mine) {
          var fresh = { label: s.label, x: [], y: [] };
          backfill(fresh, raw, tailFirst);
          s.x = fresh.x.concat(s.x); s.y = fresh.y.concat(s.y);
          ch.spec.series.push(s); rebuild = true; return;
        }
        backfill(mine, raw, tailFirst);
        var last = mine.x.length ? mine.x[mine.x.length - 1] : -Infinity;
        for (var j = 0; j < s.x.length; j++) {
          if (s.x[j] > last) { mine.x.push(s.x[j]); mine.y.push(s.y[j]); last = s.x[j]; }
        }
      });
      if (!ch.plot) return;
      if (rebuild) buildPlot(ch); else refreshPlot(ch);
    });
    if (changed) renderChartSections();
  }

  function rebuildAllPlots() { S.charts.forEach(function (ch) { if (ch.plot) buildPlot(ch); }); }

  function queueResize() {
    if (S.resizeQueued) return;
    S.resizeQueued = true;
    requestAnimationFrame(function () {
      S.resizeQueued = false;
      S.charts.forEach(function (ch) {
        if (!ch.plot) return;
        var w = plotWidth(ch);
        if (Math.abs(w - ch.width) > 1) { ch.width = w; ch.plot.setSize({ width: w, height: CHART_HEIGHT }); }
      });
    });
  }
