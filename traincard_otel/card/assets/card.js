/* traincard: draws the card from the payload in #tc-payload (docs/card-payload.md).
 * Every string from telemetry is inserted as text (textContent / createTextNode), never as HTML. */
(function () {
  "use strict";
  var PALETTE = ["#2563eb", "#f97316", "#16a34a", "#dc2626", "#9333ea", "#0891b2", "#ca8a04", "#db2777", "#4b5563", "#65a30d"];
  var state = { payload: null, charts: {}, logFilter: "", logLevel: "all" };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function fmtNum(v, digits) {
    if (v === null || v === undefined || v === "") return "–";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    return Number(v.toFixed(digits === undefined ? 4 : digits)).toString();
  }
  function fmtAxis(v) {
    if (v === null || v === undefined) return "";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
    if (a !== 0 && a < 1e-3) return v.toExponential(0);
    return String(Number(v.toPrecision(4)));
  }
  function fmtDur(s) {
    if (s === null || s === undefined || !isFinite(s)) return "–";
    s = Math.max(0, Math.round(s));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return h ? h + "h " + m + "m" : m ? m + "m " + sec + "s" : sec + "s";
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "–";
    var u = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(1) : b) + " " + u[i];
  }
  function fmtTime(t) { return t ? new Date(t * 1000).toLocaleTimeString() : "–"; }
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  function section(id, title) { var s = el("section", { id: id }); if (title) s.appendChild(el("h2", { text: title })); return s; }

  /* ---------- status and banners ---------- */
  function kv(k, v, id) { var n = el("div", { cls: "tc-kv" }, [el("span", { cls: "k", text: k }), el("span", { cls: "v", text: v })]); if (id) n.id = id; return n; }
  function renderStatus(run) {
    var box = el("div", { id: "tc-status" });
    box.appendChild(el("span", { cls: "tc-title", text: run.title || "training" }));
    box.appendChild(el("span", { cls: "tc-pill " + (run.status || "unknown"), text: run.status || "unknown" }));
    box.appendChild(kv("phase", run.phase || "–", "tc-phase"));
    var step = (run.step === null || run.step === undefined ? "–" : String(run.step)) + (run.max_steps ? " / " + run.max_steps : "");
    box.appendChild(kv("step", step, "tc-step"));
    if (run.max_steps && run.step !== null && run.step !== undefined) {
      var bar = el("div", { cls: "tc-progress", title: Math.round(100 * run.step / run.max_steps) + "%" });
      var fill = el("div"); fill.style.width = Math.min(100, 100 * run.step / run.max_steps) + "%"; bar.appendChild(fill); box.appendChild(bar);
    }
    box.appendChild(kv("epoch", fmtNum(run.epoch, 2) + (run.num_epochs ? " / " + fmtNum(run.num_epochs, 2) : "")));
    box.appendChild(kv("elapsed", fmtDur(run.elapsed_s)));
    box.appendChild(kv("ETA", run.status === "running" ? fmtDur(run.eta_s) : "–", "tc-eta"));
    box.appendChild(kv("batch", fmtNum(run.batch_size, 0)));
    box.appendChild(kv("world", fmtNum(run.world_size, 0)));
    box.appendChild(kv("attempt", String(run.attempt || 0) + (run.restarts ? " (" + run.restarts + " restarts)" : "")));
    if (run.heartbeat_age_s !== null && run.heartbeat_age_s !== undefined) box.appendChild(kv("last update", fmtDur(run.heartbeat_age_s) + " ago"));
    if (run.cost) box.appendChild(kv("cost", "$" + run.cost.so_far.toFixed(2) + (run.status === "running" ? " → $" + run.cost.at_eta.toFixed(2) + " at ETA" : "")));
    return box;
  }
  function renderBanners(banners) {
    var box = el("div", { id: "tc-banners" });
    (banners || []).forEach(function (b) { box.appendChild(el("div", { cls: "tc-banner " + b.kind, "data-kind": b.kind, text: b.text })); });
    return box;
  }

  /* ---------- charts ---------- */
  function align(series) {
    var set = {}, xs = [];
    series.forEach(function (s) { s.x.forEach(function (x) { if (!set.hasOwnProperty(x)) { set[x] = 1; xs.push(x); } }); });
    xs.sort(function (a, b) { return a - b; });
    var index = {}; xs.forEach(function (x, i) { index[x] = i; });
    var data = [xs];
    series.forEach(function (s) {
      var ys = new Array(xs.length).fill(null);
      for (var i = 0; i < s.x.length; i++) ys[index[s.x[i]]] = s.y[i];
      data.push(ys);
    });
    return data;
  }
  function markerPlugin(isStep) {
    return { hooks: { draw: [function (u) {
      if (!isStep || !state.payload || !state.payload.markers) return;
      var ctx = u.ctx; ctx.save();
      ctx.strokeStyle = cssVar("--warn"); ctx.fillStyle = cssVar("--warn"); ctx.setLineDash([5, 4]); ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.font = (10 * devicePixelRatio) + "px system-ui";
      state.payload.markers.forEach(function (m) {
        var x = u.valToPos(m.x, "x", true);
        if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        ctx.fillText(m.label, x + 3 * devicePixelRatio, u.bbox.top + 10 * devicePixelRatio);
      });
      ctx.restore();
    }] } };
  }
  function countPoints(c) { return c.series.reduce(function (n, s) { return n + s.x.length; }, 0); }
  function makeChart(c, holder) {
    var isStep = c.x !== "time";
    var axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--line"), width: 1 }, ticks: { stroke: cssVar("--line") } };
    var width = Math.max(300, holder.clientWidth - 16 || 420);
    var opts = {
      width: width, height: 200, plugins: [markerPlugin(isStep)],
      scales: { x: { time: !isStep } },
      axes: [Object.assign({}, axis), Object.assign({ size: 60, values: function (u, splits) { return splits.map(fmtAxis); } }, axis)],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      series: [{ label: isStep ? "step" : "time" }].concat(c.series.map(function (s, i) {
        return { label: s.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true, points: { show: s.x.length < 40 } };
      })),
    };
    return new uPlot(opts, align(c.series), holder);
  }
  function renderChart(c) {
    var box = el("div", { cls: "tc-chart", "data-chart-id": c.id });
    box.appendChild(el("div", { cls: "tc-chart-title", text: c.title + (c.unit ? " (" + c.unit + ")" : "") }));
    var holder = el("div"); box.appendChild(holder);
    box.setAttribute("data-points", String(countPoints(c)));
    state.charts[c.id] = { spec: c, box: box, holder: holder, plot: null };
    return box;
  }
  function drawCharts() {
    Object.keys(state.charts).forEach(function (id) {
      var ch = state.charts[id];
      if (ch.plot) ch.plot.destroy();
      ch.holder.textContent = "";
      ch.plot = makeChart(ch.spec, ch.holder);
      ch.box.setAttribute("data-points", String(countPoints(ch.spec)));
    });
  }
  function chartGrid(charts, group) {
    var grid = el("div", { cls: "tc-grid" });
    charts.filter(function (c) { return (c.group || "training") === group; }).forEach(function (c) { grid.appendChild(renderChart(c)); });
    return grid;
  }

  /* ---------- system ---------- */
  function renderSystem(p) {
    var s = section("tc-system", "System");
    var sys = p.system || {};
    (sys.notes || []).forEach(function (n) { s.appendChild(el("p", { cls: "tc-note", text: n })); });
    if ((sys.latest || []).length) {
      var tiles = el("div", { cls: "tc-tiles" });
      sys.latest.forEach(function (t) { tiles.appendChild(el("div", { cls: "tc-tile" }, [el("div", { cls: "k", text: t.label }), el("div", { cls: "v", text: fmtNum(t.value, 3) + (t.unit && t.unit !== "1" ? " " + t.unit : "") })])); });
      s.appendChild(tiles);
    }
    var grid = chartGrid(p.charts || [], "system");
    if (grid.children.length) s.appendChild(grid);
    else if (!(sys.notes || []).length) s.appendChild(el("p", { cls: "tc-note", text: "No system telemetry recorded." }));
    return s;
  }

  /* ---------- checkpoints ---------- */
  function renderCheckpoints(list) {
    var s = section("tc-checkpoints", "Checkpoints");
    if (!list || !list.length) { s.appendChild(el("p", { cls: "tc-note", text: "No checkpoints yet." })); return s; }
    var t = el("table"), head = el("tr");
    ["", "step", "size", "time", "metric", "location"].forEach(function (h) { head.appendChild(el("th", { text: h })); });
    t.appendChild(head);
    list.forEach(function (c) {
      var tr = el("tr", { cls: c.best ? "best" : "" });
      tr.appendChild(el("td", {}, [c.best ? el("span", { cls: "tc-star", title: "best", text: "★ best" }) : ""]));
      tr.appendChild(el("td", { text: String(c.step) }));
      tr.appendChild(el("td", { text: fmtBytes(c.size_bytes) }));
      tr.appendChild(el("td", { text: fmtTime(c.time) }));
      tr.appendChild(el("td", { text: c.metric ? c.metric + " = " + fmtNum(c.value) : "–" }));
      tr.appendChild(el("td", { cls: "path", text: c.path || "" }));
      t.appendChild(tr);
    });
    s.appendChild(t);
    return s;
  }

  /* ---------- logs ---------- */
  var LEVELS = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40, CRITICAL: 50 };
  function logVisible(node) {
    var lvl = LEVELS[node.getAttribute("data-level")] || 20;
    var min = state.logLevel === "all" ? 0 : LEVELS[state.logLevel];
    var q = state.logFilter.toLowerCase();
    return lvl >= min && (!q || node.textContent.toLowerCase().indexOf(q) >= 0);
  }
  function applyLogFilter() {
    var nodes = document.querySelectorAll("#tc-logs .tc-log"), shown = 0;
    nodes.forEach(function (n) { var v = logVisible(n); n.style.display = v ? "" : "none"; if (v) shown++; });
    var list = document.querySelector("#tc-logs .tc-log-list"); if (list) list.setAttribute("data-shown", String(shown));
  }
  function renderLogLine(r) {
    var row = el("div", { cls: "tc-log " + r.level, "data-level": r.level });
    row.appendChild(el("span", { cls: "meta", text: fmtTime(r.time) + " rank " + (r.rank === undefined ? "?" : r.rank) + " " + r.level }));
    row.appendChild(document.createTextNode(r.message));
    if (r.traceback) {
      var d = el("details", { cls: "tc-tb" }, [el("summary", { text: "traceback" }), el("pre", { text: r.traceback })]);
      row.appendChild(d);
    }
    return row;
  }
  function renderLogs(logs) {
    var s = section("tc-logs", "Logs");
    var controls = el("div", { cls: "tc-log-controls" });
    var search = el("input", { id: "tc-log-search", type: "search", placeholder: "search logs", value: state.logFilter });
    var level = el("select", { id: "tc-log-level" });
    [["all", "All levels"], ["WARNING", "Warnings and errors"], ["ERROR", "Errors only"]].forEach(function (o) {
      var opt = el("option", { value: o[0], text: o[1] }); if (o[0] === state.logLevel) opt.selected = true; level.appendChild(opt);
    });
    search.addEventListener("input", function () { state.logFilter = search.value; applyLogFilter(); });
    level.addEventListener("change", function () { state.logLevel = level.value; applyLogFilter(); });
    controls.appendChild(search); controls.appendChild(level); s.appendChild(controls);
    var list = el("div", { cls: "tc-log-list" });
    if (!logs || !logs.length) list.appendChild(el("p", { cls: "tc-note", text: "No log lines yet." }));
    (logs || []).forEach(function (r) { list.appendChild(renderLogLine(r)); });
    s.appendChild(list);
    return s;
  }

  /* ---------- failure ---------- */
  function kvTable(obj) {
    var t = el("table"), keys = Object.keys(obj || {});
    if (!keys.length) return el("p", { cls: "tc-note", text: "none recorded" });
    keys.forEach(function (k) { t.appendChild(el("tr", {}, [el("td", { text: k }), el("td", { text: fmtNum(obj[k]) })])); });
    return t;
  }
  function renderFailure(f) {
    var box = el("section", { id: "tc-failure" });
    box.appendChild(el("h2", { text: "Failure summary" }));
    box.appendChild(el("div", { cls: "tc-exc", text: f.type + ": " + f.message }));
    box.appendChild(el("div", { text: "phase " + (f.phase || "–") + " · step " + (f.step === null || f.step === undefined ? "–" : f.step) }));
    var v = f.verdict || {};
    if (v.kind) {
      var vb = el("div", { cls: "tc-verdict", "data-verdict": v.kind }, [el("strong", { text: v.text || v.kind })]);
      var ul = el("ul"); (v.evidence || []).forEach(function (e) { ul.appendChild(el("li", { text: e })); });
      vb.appendChild(ul); box.appendChild(vb);
    }
    var lines = String(f.traceback || "").trim().split("\n");
    box.appendChild(el("pre", { cls: "tc-stack", text: lines.slice(-14).join("\n") }));
    if (lines.length > 14) box.appendChild(el("details", {}, [el("summary", { text: "full traceback" }), el("pre", { text: f.traceback })]));
    box.appendChild(el("div", { cls: "tc-cols" }, [
      el("div", {}, [el("h2", { text: "Last metrics" }), kvTable(f.last_metrics)]),
      el("div", {}, [el("h2", { text: "Last system state" }), kvTable(f.last_system)]),
    ]));
    return box;
  }

  /* ---------- page ---------- */
  function renderStats(st) {
    st = st || {};
    var dropped = st.dropped || {}, n = 0; for (var k in dropped) n += dropped[k];
    return el("div", { id: "tc-stats", text: (st.points || 0) + " records in " + (st.segments || 0) + " segments · " + n + " dropped · " + (st.corrupt_segments || 0) + " unreadable segments" });
  }
  function render(p) {
    state.payload = p; state.charts = {};
    var root = document.getElementById("tc-root"); root.textContent = "";
    root.appendChild(renderStatus(p.run || {}));
    root.appendChild(renderBanners(p.banners));
    if (p.failure) root.appendChild(renderFailure(p.failure));
    var charts = section("tc-charts", "Training metrics");
    var grid = chartGrid(p.charts || [], "training");
    charts.appendChild(grid.children.length ? grid : el("p", { cls: "tc-note", text: "No training metrics reported yet." }));
    root.appendChild(charts);
    root.appendChild(renderSystem(p));
    root.appendChild(renderCheckpoints(p.checkpoints));
    root.appendChild(renderLogs(p.logs));
    root.appendChild(renderStats(p.stats));
    drawCharts();
    applyLogFilter();
  }
  function replaceNode(id, node) { var old = document.getElementById(id); if (old) old.replaceWith(node); }

  /* Live update: append newer points per chart and series, replace the rest wholesale. */
  function update(u) {
    var p = state.payload, rebuild = false;
    (u.charts || []).forEach(function (c) {
      var ch = state.charts[c.id];
      if (!ch) { p.charts.push(c); rebuild = true; return; }
      c.series.forEach(function (s) {
        var mine = ch.spec.series.find(function (m) { return m.label === s.label; });
        if (!mine) { ch.spec.series.push({ label: s.label, x: s.x.slice(), y: s.y.slice() }); return; }
        var last = mine.x.length ? mine.x[mine.x.length - 1] : -Infinity;
        for (var i = 0; i < s.x.length; i++) if (s.x[i] > last) { mine.x.push(s.x[i]); mine.y.push(s.y[i]); }
      });
    });
    ["run", "banners", "markers", "checkpoints", "logs", "failure", "system", "stats"].forEach(function (k) { if (k in u) p[k] = u[k]; });
    if (rebuild) { render(p); }
    else {
      replaceNode("tc-status", renderStatus(p.run || {}));
      replaceNode("tc-banners", renderBanners(p.banners));
      var fail = document.getElementById("tc-failure");
      if (p.failure) { if (fail) fail.replaceWith(renderFailure(p.failure)); else document.getElementById("tc-banners").after(renderFailure(p.failure)); }
      replaceNode("tc-checkpoints", renderCheckpoints(p.checkpoints));
      var list = document.querySelector("#tc-logs .tc-log-list");
      if (list) { list.textContent = ""; (p.logs || []).forEach(function (r) { list.appendChild(renderLogLine(r)); }); }
      replaceNode("tc-stats", renderStats(p.stats));
      Object.keys(state.charts).forEach(function (id) {
        var ch = state.charts[id];
        if (ch.plot && ch.plot.series.length - 1 === ch.spec.series.length) { ch.plot.setData(align(ch.spec.series)); ch.box.setAttribute("data-points", String(countPoints(ch.spec))); }
        else { if (ch.plot) ch.plot.destroy(); ch.holder.textContent = ""; ch.plot = makeChart(ch.spec, ch.holder); ch.box.setAttribute("data-points", String(countPoints(ch.spec))); }
      });
      applyLogFilter();
    }
    document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates") || 0) + 1));
  }

  window.TC = { update: update, render: render };
  var payload = JSON.parse(document.getElementById("tc-payload").textContent);
  render(payload);
  var resizeTimer = null;
  window.addEventListener("resize", function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(drawCharts, 150); });
})();
