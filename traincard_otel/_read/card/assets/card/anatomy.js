  /* ---------------------------------------------------------------- step anatomy (payload.anatomy) */
  /* Where each step's time goes: per rank shown, a bar of each part's median share of its recent steps,
     and a stacked chart of the parts over steps; a gang shows its slowest rank beside the median rank. */

  var ANATOMY_CHART_HEIGHT = 170;

  function partColor(part) {
    return cssVar("--tc-part-" + str(part).replace(/[^a-z_]/gi, "")) || cssVar("--tc-neutral") || "#888";
  }

  function anatomyLabel(r) {
    return "rank " + str(r.rank) + (r.role ? " \u00b7 " + str(r.role) : "");
  }

  function anatomyBar(r) {
    var row = el("div", "tc-anatomy-rank", null, { "data-rank": str(r.rank), "data-role": str(r.role) });
    var parts = (Array.isArray(r.parts) ? r.parts : []).filter(function (p) { return p && isNum(p.share) && isNum(p.seconds); });
    var head = el("div", "tc-anatomy-head");
    add(head, el("span", "tc-anatomy-label", anatomyLabel(r)),
      el("span", "tc-anatomy-step", "step " + fmtMs(r.step_s) + " median of " + fmtInt(r.steps) + " recent steps"));
    var bar = el("div", "tc-anatomy-bar", null, { role: "img",
      "aria-label": parts.map(function (p) { return str(p.part) + " " + fmtPct(p.share); }).join(", ") });
    var legend = el("ul", "tc-anatomy-legend");
    parts.forEach(function (p) {
      var key = str(p.part).replace(/[^a-z_]/gi, "");
      if (p.share > 0) bar.appendChild(el("span", "tc-part tc-part--" + key, null, {
        "data-part": key, title: key + ": " + fmtSecs(p.seconds) + " (" + fmtPct(p.share) + ")",
        style: "width:" + (p.share * 100).toFixed(3) + "%" }));
      var li = el("li", "tc-anatomy-item", null, { "data-part": key, "data-seconds": String(p.seconds), "data-share": String(p.share) });
      add(li, el("span", "tc-gp-swatch tc-part--" + key, null, { "aria-hidden": "true" }), el("span", "tc-gp-label", key),
        el("span", "tc-gp-value", fmtMs(p.seconds) + " \u00b7 " + fmtPct(p.share)));
      legend.appendChild(li);
    });
    add(row, head, bar, legend);
    return row;
  }

  function fmtMs(s) { return !isNum(s) ? "\u2013" : s < 1 ? fmtNum(s * 1000, 3) + " ms" : fmtNum(s, 3) + " s"; }

  /* A stacked area chart: the cumulative sums drawn from the top part down, each filled to the axis. */
  function anatomyChart(sec, steps) {
    var names = (Array.isArray(sec.parts) ? sec.parts : []).filter(function (p) { return steps.parts && Array.isArray(steps.parts[p]); });
    var xs = Array.isArray(steps.x) ? steps.x : [];
    var box = el("figure", "tc-chart tc-anatomy-chart", null, { "data-rank": str(steps.rank), "data-points": String(xs.length) });
    var cap = el("figcaption", "tc-chart-head");
    add(cap, el("span", "tc-chart-title", "rank " + str(steps.rank) + ": parts of each step"), el("span", "tc-chart-unit", "seconds"),
      el("span", "tc-chart-x", "by step"));
    var holder = el("div", "tc-chart-plot");
    add(box, cap, holder);
    if (!xs.length || !names.length || typeof uPlot === "undefined") return box;
    var sums = [], running = xs.map(function () { return 0; });
    names.forEach(function (p) {
      var ys = steps.parts[p];
      running = running.map(function (v, i) { return v + (isNum(ys[i]) ? ys[i] : 0); });
      sums.push(running.slice());
    });
    var th = theme(), series = [{ label: "step", value: function (u, v) { return v === null || v === undefined ? "\u2013" : fmtInt(v); } }];
    var data = [xs.slice()];
    for (var k = names.length - 1; k >= 0; k--) {
      (function (part, idx) {
        var c = partColor(part);
        series.push({ label: part, stroke: c, fill: c + "cc", width: 1, points: { show: false },
          value: function (u, v, si, i) {
            if (i === null || i === undefined) return "\u2013";
            var own = steps.parts[part][i];
            return isNum(own) ? fmtMs(own) : "\u2013";
          } });
        data.push(sums[idx]);
      })(names[k], k);
    }
    var axis = { stroke: th.axis, font: "11px " + th.font, grid: { stroke: th.grid, width: 1 }, ticks: { stroke: th.grid, width: 1, size: 4 } };
    var width = Math.max(240, Math.floor((S.dom.anatomy && S.dom.anatomy.clientWidth ? S.dom.anatomy.clientWidth / 2 : 420) - 24));
    new uPlot({
      width: width, height: ANATOMY_CHART_HEIGHT, pxAlign: 0, legend: { show: true, live: true },
      cursor: { sync: { key: "tc-step" }, drag: { x: true, y: false, setScale: true } },
      scales: { x: { time: false } },
      axes: [Object.assign({}, axis, { values: function (u, t) { return t.map(fmtAxis); } }),
        Object.assign({}, axis, { size: axisSize, values: function (u, t) { return t.map(fmtAxis); } })],
      series: series
    }, data, holder);
    box.setAttribute("data-series", String(names.length));
    return box;
  }

  function renderAnatomy() {
    var sec = S.payload.anatomy && typeof S.payload.anatomy === "object" ? S.payload.anatomy : null;
    var box = clear(S.dom.anatomy);
    var ranks = sec && Array.isArray(sec.ranks) ? sec.ranks.filter(function (r) { return r && typeof r === "object"; }) : [];
    box.hidden = !ranks.length;
    if (box.hidden) return;
    var h = el("h2", "tc-h2");
    var count = ranks.length > 1 ? "slowest and median of " + fmtInt(sec.ranks_timed) + " ranks" : "rank " + str(ranks[0].rank);
    add(h, el("span", null, "Step anatomy"), el("span", "tc-count", count, { id: "tc-anatomy-count" }));
    box.appendChild(h);
    if (has(sec.straggler)) box.appendChild(el("p", "tc-anatomy-straggler", str(sec.straggler), { id: "tc-anatomy-straggler" }));
    var bars = el("div", "tc-anatomy-bars", null, { id: "tc-anatomy-bars" });
    ranks.forEach(function (r) { bars.appendChild(anatomyBar(r)); });
    box.appendChild(bars);
    var grid = el("div", "tc-grid tc-anatomy-charts", null, { id: "tc-anatomy-charts" });
    (Array.isArray(sec.series) ? sec.series : []).forEach(function (s) { if (s && typeof s === "object") grid.appendChild(anatomyChart(sec, s)); });
    box.appendChild(grid);
    var notes = Array.isArray(sec.notes) ? sec.notes : [];
    if (notes.length) {
      var ul = el("ul", "tc-note tc-anatomy-notes", null, { id: "tc-anatomy-notes" });
      notes.forEach(function (n) { ul.appendChild(el("li", null, str(n))); });
      box.appendChild(ul);
    }
  }

  function buildAnatomy() {
    S.dom.anatomy = el("section", "tc-section tc-anatomy", null, { id: "tc-anatomy" });
    return S.dom.anatomy;
  }
