  /* ---------------------------------------------------------------- baseline (payload.baseline) */
  /* An earlier run's loss and eval curves, overlaid on the charts they belong to (dashed and lighter,
     named "<role> \u00b7 baseline <run>" in the legend), and a line in the status bar saying whether this
     run is ahead of or behind it at its latest step, or a quiet note why there is no baseline. A baseline
     is a finished run: a live update without one keeps what the page drew, and a coarse live copy never
     replaces the finer one of a full payload. */

  function baselineInfo() {
    var b = S.payload && S.payload.baseline;
    return b && typeof b === "object" ? b : null;
  }

  function fadeColour(colour, alpha) {
    var m = /^#([0-9a-f]{6})$/i.exec(str(colour).trim());
    if (!m) return colour;
    var n = parseInt(m[1], 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function baselineStyles(spec, styles) {
    return styles.map(function (st, i) {
      return spec.series[i] && spec.series[i].baseline ? { stroke: fadeColour(st.stroke, 0.6), dash: [7, 4] } : st;
    });
  }

  /* Without a cursor the legend shows each series' latest value: for a chart with a baseline, this run's
     latest step and the baseline's value there (not the baseline's own last step, often further on). */
  function baselineLegendValues(ch) {
    var own = null, any = false;
    ch.spec.series.forEach(function (s) {
      if (s.baseline) { any = true; return; }
      if (s.x.length && (own === null || s.x[s.x.length - 1] > own)) own = s.x[s.x.length - 1];
    });
    if (!any || own === null) return;
    ch.lastX = own;
    ch.spec.series.forEach(function (s, i) {
      if (!s.baseline) return;
      var v = null;
      for (var k = 0; k < s.x.length && s.x[k] <= own; k++) if (s.y[k] !== null) v = s.y[k];
      ch.lastY[i] = v;
    });
  }

  /* Put the payload's baseline series into the charts they name (charts created later get theirs on
     the next call); a chart is redrawn only when its baseline series change. */
  function applyBaselineSeries() {
    var b = baselineInfo();
    var list = b && Array.isArray(b.series) ? b.series.filter(function (s) { return s && has(s.chart); }) : [];
    S.charts.forEach(function (ch) {
      var have = ch.spec.series.filter(function (s) { return s.baseline; });
      var want = list.filter(function (s) { return String(s.chart) === ch.spec.id; }).map(function (raw) {
        var s = cleanSeries(raw), old = null;
        have.forEach(function (h) { if (h.label === s.label) old = h; });
        if (old && old.x.length >= s.x.length) return old;
        s.baseline = true;
        return s;
      });
      var same = want.length === have.length && want.every(function (s, i) { return s === have[i]; });
      if (same) return;
      ch.spec.series = ch.spec.series.filter(function (s) { return !s.baseline; }).concat(want);
      ch.box.setAttribute("data-baseline", String(want.length));
      if (ch.plot) buildPlot(ch);
    });
  }

  function updateBaseline(u) {
    if (u.baseline && typeof u.baseline === "object") S.payload.baseline = u.baseline;
    applyBaselineSeries();
  }

  /* The status-bar line: "baseline <run>", then each comparison, or the note. */
  function baselineBar() {
    var b = baselineInfo();
    var bar = el("div", "tc-baseline", null, { id: "tc-baseline", role: "status" });
    bar.hidden = !b;
    if (!b) return bar;
    add(bar, el("span", "tc-baseline-label", "baseline"),
      el("span", "tc-baseline-run", str(b.label), { id: "tc-baseline-run", title: str(b.name) }));
    (Array.isArray(b.status) ? b.status : []).forEach(function (f) {
      if (!f || typeof f !== "object") return;
      var verdict = str(f.verdict).replace(/[^a-z]/gi, "");
      bar.appendChild(el("span", "tc-baseline-fig tc-baseline--" + verdict, str(f.text),
        { "data-kind": str(f.kind), "data-verdict": verdict }));
    });
    var notes = [b.note].concat(Array.isArray(b.notes) ? b.notes : []).filter(has);
    if (notes.length) bar.appendChild(el("span", "tc-baseline-note", notes.map(str).join("; "), { id: "tc-baseline-note" }));
    return bar;
  }
