/* traincard: draws the training card from the JSON payload in #tc-payload (docs/card-payload.md).
 *
 * Plain browser JavaScript, no build step and no network access. Every string that comes from the
 * payload is inserted with textContent / createTextNode (or as an attribute value), never as HTML.
 * Live pages also load live.js, which hands each live payload to TC.update (merge, no reload).
 */
(function () {
  "use strict";

  var CHART_HEIGHT = 210;
  var TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172800, 604800, 2592000, 31536000];
  var STACK_LINES = 18;
  var UNIT_WORDS = { "1": "no unit", By: "bytes", s: "seconds" };

  /* Every wire name the page treats specially comes from the payload's "names" object
     (docs/card-payload.md); the page keeps no copies of its own. */
  var N = { sections: [], banners: [], levels: Object.create(null), verdicts: Object.create(null),
    ratio: Object.create(null), bytes: Object.create(null), colors: Object.create(null), groups: Object.create(null), axes: Object.create(null), filterLevels: [], warn: 30, error: 40 };
  function readNames(p) {
    var n = p && p.names && typeof p.names === "object" ? p.names : null;
    if (!n) return;
    var set = function (list) {
      var o = Object.create(null);
      (Array.isArray(list) ? list : []).forEach(function (k) { o[k] = true; });
      return o;
    };
    var dict = function (obj) {
      var o = Object.create(null);
      if (obj && typeof obj === "object") Object.keys(obj).forEach(function (k) { o[k] = obj[k]; });
      return o;
    };
    N = {
      sections: Array.isArray(n.sections) ? n.sections : [],
      banners: Array.isArray(n.banners) ? n.banners.filter(function (b) { return b && typeof b === "object"; }) : [],
      levels: dict(n.levels),
      verdicts: dict(n.verdicts),
      ratio: set(n.ratio_metrics),
      bytes: set(n.byte_metrics),
      colors: dict(n.series_colors),
      groups: dict(n.groups),
      axes: dict(n.axes),
      filterLevels: Array.isArray(n.filter_levels) ? n.filter_levels : [],
      warn: isNum(n.warning_level) ? n.warning_level : 30,
      error: isNum(n.error_level) ? n.error_level : 40
    };
  }
  function bannerInfo(kind) {
    for (var i = 0; i < N.banners.length; i++) if (N.banners[i].kind === kind) return { rank: i, b: N.banners[i] };
    return null;
  }

  var S = {
    payload: null,
    receivedAt: now(),
    charts: new Map(),          // chart id -> chart state (see createChart)
    updates: 0,
    log: { query: "", level: "all", rank: "all", open: new Set(), stick: true, follow: true },
    dom: {},
    resizeQueued: false
  };

  /* ---------------------------------------------------------------- helpers */

  function now() { return Date.now() / 1000; }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function has(v) { return v !== null && v !== undefined && v !== ""; }
  function str(v) { return v === null || v === undefined ? "" : String(v); }

  /* Build an element. Text goes through textContent; attributes through setAttribute. */
  function el(tag, cls, text, attrs) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (attrs) for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k) && attrs[k] !== undefined) {
      node.setAttribute(k, String(attrs[k]));
    }
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      parent.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return parent;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function fmtNum(v, sig) {
    if (v === null || v === undefined) return "\u2013";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) return v.toExponential(2).replace("e+", "e");
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return String(Number(v.toPrecision(sig || 4)));
  }
  function fmtAxis(v) {
    if (v === null || v === undefined || !isFinite(v)) return "";
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return +(v / 1e3).toPrecision(3) + "k";
    if (a < 1e-3) return v.toExponential(1).replace("e+", "e");
    return String(+v.toPrecision(4));
  }
  function fmtInt(v) { return isNum(v) ? Math.round(v).toLocaleString("en-US") : "\u2013"; }
  function fmtDur(s) {
    if (!isNum(s)) return "\u2013";
    s = Math.max(0, Math.round(s));
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + (m < 10 ? "0" : "") + m + "m";
    if (m) return m + "m " + (x < 10 ? "0" : "") + x + "s";
    return x + "s";
  }
  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  function fmtClock(t) {
    if (!isNum(t)) return "\u2013";
    var d = new Date(t * 1000);
    return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
  }
  function fmtDateTime(t) {
    if (!isNum(t)) return "";
    var d = new Date(t * 1000);
    return d.getFullYear() + "-" + pad2(d.getMonth() + 1) + "-" + pad2(d.getDate()) + " " + fmtClock(t);
  }
  function fmtBytes(b) {
    if (!isNum(b)) return "\u2013";
    var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0, v = Math.abs(b);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (b < 0 ? "-" : "") + (i ? v.toFixed(v < 10 ? 2 : 1) : String(v)) + " " + units[i];
  }
  function fmtMoney(v) { return isNum(v) ? "$" + v.toFixed(v < 10 ? 2 : 0) : "\u2013"; }

  /* A reading from system.latest / failure.last_system, formatted from its name and unit
     ("hw.power[gpu0]": the unit recorded for hw.power when none is given). */
  function fmtReading(name, value, unit) {
    name = str(name).replace(/[\[{].*$/, "");
    var units = S.payload.system && S.payload.system.units;
    unit = str(unit) || str(units && typeof units === "object" ? units[name] : "");
    if (/^\{.*\}$/.test(unit)) unit = "";  // an annotation such as {error}: a plain count
    if (!isNum(value)) return fmtNum(value);
    if (unit === "%") return fmtNum(value, 3) + " %";
    if (unit === "By" || (unit === "" && N.bytes[name])) return fmtBytes(value);
    if ((unit === "1" || unit === "") && N.ratio[name] && Math.abs(value) <= 1.5) {
      return (value * 100).toFixed(value * 100 >= 10 ? 0 : 1) + " %";
    }
    if (unit === "Cel") return fmtNum(value, 3) + " \u00B0C";
    return fmtNum(value) + (unit && unit !== "1" ? " " + unit : "");
  }

  function levelNum(level) {
    var n = N.levels[str(level).toUpperCase()];
    return isNum(n) ? n : 20;
  }

  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  function theme() {
    var pal = [];
    for (var i = 0; i < 10; i++) pal.push(cssVar("--tc-c" + i) || "#888");
    return {
      palette: pal,
      axis: cssVar("--tc-muted") || "#666",
      grid: cssVar("--tc-grid") || "#eee",
      panel: cssVar("--tc-panel") || "#fff",
      marker: function (kind) { return cssVar("--tc-marker-" + str(kind).replace(/[^a-z0-9_-]/gi, "")) || cssVar("--tc-err") || "#d33"; },
      font: cssVar("--tc-font") || "sans-serif"
    };
  }

  /* ---------------------------------------------------------------- header */

  function fact(id, label, value, hint) {
    var box = el("div", "tc-fact", null, { id: id });
    add(box, el("dt", null, label), el("dd", null, value, hint ? { title: hint } : null));
    return box;
  }

  function renderHeader() {
    var run = S.payload.run || {};
    var head = clear(S.dom.header);
    var status = str(run.status) || "unknown";
    head.setAttribute("data-status", status);
    document.body.setAttribute("data-status", status);

    var top = el("div", "tc-head-top");
    var pill = el("span", "tc-pill tc-pill--" + status.replace(/[^a-z_-]/gi, ""), null, { "data-status": status });
    add(pill, el("span", "tc-dot", null, { "aria-hidden": "true" }), el("span", "tc-pill-text", status));
    var title = el("h1", "tc-title", run.title || "training run", { title: str(run.title) });
    var phaseWrap = el("span", "tc-phase-wrap");
    add(phaseWrap, el("span", "tc-phase-label", "phase"),
      el("span", "tc-phase", run.phase || "\u2013", { id: "tc-phase" }));
    var mode = el("span", "tc-mode", S.payload.final ? "final" : "live", {
      id: "tc-mode", title: "payload generated " + fmtDateTime(S.payload.generated_at)
    });
    add(top, pill, title, phaseWrap, mode);
    head.appendChild(top);

    // Step and progress.
    var progress = el("div", "tc-progress-row");
    var stepText = (has(run.step) ? str(run.step) : "\u2013") + (has(run.max_steps) ? " / " + str(run.max_steps) : "");
    var stepBox = el("div", "tc-step-box");
    var counted = run.unit === "item" ? "items" : "step";
    add(stepBox, el("span", "tc-step-label", counted),
      el("span", "tc-step", stepText, { id: "tc-step", "data-step": has(run.step) ? run.step : "" }));
    progress.appendChild(stepBox);
    if (isNum(run.step) && isNum(run.max_steps) && run.max_steps > 0) {
      var frac = Math.max(0, Math.min(1, run.step / run.max_steps));
      var bar = el("div", "tc-progress", null, {
        id: "tc-progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": run.max_steps,
        "aria-valuenow": run.step
      });
      var fill = el("div", "tc-progress-fill");
      fill.style.width = (frac * 100).toFixed(2) + "%";
      bar.appendChild(fill);
      add(progress, bar, el("span", "tc-pct", (frac * 100).toFixed(frac < 0.1 ? 1 : 0) + "%"));
    } else {
      progress.appendChild(el("div", "tc-progress tc-progress--none", null, { id: "tc-progress" }));
    }
    head.appendChild(progress);

    // Facts.
    var facts = el("dl", "tc-facts");
    var epoch = has(run.epoch) ? fmtNum(run.epoch, 3) : "\u2013";
    if (has(run.num_epochs)) epoch += " / " + fmtNum(run.num_epochs);
    if (!run.kind || run.kind === "training") facts.appendChild(fact("tc-epoch", "epoch", epoch));
    add(facts,
      fact("tc-elapsed", "elapsed", fmtDur(run.elapsed_s), run.started_at ? "started " + fmtDateTime(run.started_at) : null),
      fact("tc-eta", "ETA", isNum(run.eta_s) ? fmtDur(run.eta_s) : "\u2013",
        isNum(run.eta_s) ? "finishes around " + fmtClock(S.payload.generated_at + run.eta_s) : null),
      fact("tc-batch", "batch size", has(run.batch_size) ? fmtNum(run.batch_size) : "\u2013"),
      fact("tc-world", "world size", has(run.world_size) ? fmtNum(run.world_size) : "\u2013"),
      fact("tc-restarts", "restarts", fmtNum(run.restarts || 0)),
      fact("tc-attempt", "attempt", fmtNum(run.attempt || 0)),
      fact("tc-updated", "last update", "\u2013", run.updated_at ? fmtDateTime(run.updated_at) : null));
    if (run.restarts) facts.querySelector("#tc-restarts").classList.add("tc-fact--warn");
    if (run.cost && typeof run.cost === "object") {
      var c = run.cost;
      var costText = fmtMoney(c.so_far) + (isNum(c.at_eta) && status === "running" ? " \u2192 " + fmtMoney(c.at_eta) : "");
      facts.appendChild(fact("tc-cost", "cost", costText, isNum(c.hourly) ? fmtMoney(c.hourly) + " per hour" + (c.nodes > 1 ? " (" + fmtInt(c.nodes) + " nodes)" : "") +
        (isNum(c.at_eta) ? "; " + fmtMoney(c.at_eta) + " at ETA" : "") : null));
    }
    head.appendChild(facts);
    head.appendChild(baselineBar());
    tick();
  }

  /* Ticking clocks on a live page: elapsed time and the age of the last update. */
  function tick() {
    var run = (S.payload && S.payload.run) || {};
    var since = now() - S.receivedAt;
    var running = run.status === "running" && !S.payload.final;
    var elapsed = document.querySelector("#tc-elapsed dd");
    if (elapsed && isNum(run.elapsed_s)) elapsed.textContent = fmtDur(run.elapsed_s + (running ? since : 0));
    var updated = document.querySelector("#tc-updated dd");
    if (!updated) return;
    var box = updated.parentNode;
    if (isNum(run.heartbeat_age_s) && running) {
      var age = run.heartbeat_age_s + since;
      updated.textContent = fmtDur(age) + " ago";
      box.classList.toggle("tc-fact--warn", age > 60);
      box.setAttribute("data-age", age.toFixed(1));
    } else {
      updated.textContent = isNum(run.updated_at) ? fmtClock(run.updated_at) : "\u2013";
      box.classList.remove("tc-fact--warn");
    }
  }

  /* ---------------------------------------------------------------- banners */

  function renderBanners() {
    var box = clear(S.dom.banners);
    var list = (S.payload.banners || []).filter(function (b) { return b && typeof b === "object"; });
    list = list.map(function (b, i) { return { b: b, i: i, info: bannerInfo(str(b.kind)) }; }).sort(function (p, q) {
      var a = p.info ? p.info.rank : 99, b = q.info ? q.info.rank : 99;
      return a - b || p.i - q.i;
    });
    list.forEach(function (p) {
      // An unknown kind is shown like the least severe known one.
      var fallback = N.banners.length ? N.banners[N.banners.length - 1] : {};
      var info = p.info ? p.info.b : fallback, kind = str(p.b.kind) || str(fallback.kind);
      var safe = str(info.kind).replace(/[^a-z0-9_-]/gi, "");
      var row = el("div", "tc-banner tc-banner--" + safe, null,
        { "data-kind": kind, role: info.alert ? "alert" : "status" });
      add(row, el("span", "tc-banner-icon", str(info.icon) || "i", { "aria-hidden": "true" }),
        el("span", "tc-banner-kind", str(info.title) || kind),
        el("span", "tc-banner-text", p.b.text));
      box.appendChild(row);
    });
    box.hidden = !list.length;
  }

  /* ---------------------------------------------------------------- failure */

  function kvTable(obj, id, reading) {
    var keys = obj && typeof obj === "object" ? Object.keys(obj) : [];
    if (!keys.length) return el("p", "tc-note", "none recorded", { id: id });
    var table = el("table", "tc-table tc-kv-table", null, { id: id });
    var body = el("tbody");
    keys.forEach(function (k) {
      var tr = el("tr");
      add(tr, el("th", null, k, { scope: "row" }), el("td", null, reading ? fmtReading(k, obj[k], "") : fmtNum(obj[k])));
      body.appendChild(tr);
    });
    table.appendChild(body);
    return table;
  }

  function renderFailure() {
    var f = S.payload.failure;
    var box = clear(S.dom.failure);
    box.hidden = !f || typeof f !== "object";
    if (box.hidden) return;

    var head = el("div", "tc-failure-head");
    var where = [];
    if (has(f.phase)) where.push("phase " + f.phase);
    if (has(f.step)) where.push("step " + str(f.step));
    add(head, el("span", "tc-failure-label", "Training failed"),
      where.length ? el("span", "tc-failure-where", "in " + where.join(", ")) : null);
    box.appendChild(head);
    var exc = el("p", "tc-failure-exc");
    add(exc, el("code", "tc-failure-type", f.type || "Error", { id: "tc-failure-type" }),
      el("span", "tc-failure-colon", ": "),
      el("span", "tc-failure-message", has(f.message) ? f.message : "(no message)", { id: "tc-failure-message" }));
    box.appendChild(exc);

    var v = f.verdict;
    if (v && typeof v === "object" && (has(v.kind) || has(v.text))) {
      var vb = el("div", "tc-verdict" + (has(v.kind) ? "" : " tc-verdict--none"), null,
        { id: "tc-verdict", "data-kind": has(v.kind) ? v.kind : "none", "data-verdict": has(v.kind) ? v.kind : "none" });
      var title = el("div", "tc-verdict-title");
      add(title, el("span", "tc-verdict-label", has(v.kind) ? "Likely cause" : "Verdict"),
        el("strong", null, has(v.kind) ? (str(N.verdicts[v.kind]) || v.kind) : "no specific cause identified"));
      vb.appendChild(title);
      if (has(v.text)) vb.appendChild(el("p", "tc-verdict-text", v.text));
      var ev = Array.isArray(v.evidence) ? v.evidence : [];
      if (ev.length) {
        var ul = el("ul", "tc-evidence");
        ev.forEach(function (e) { ul.appendChild(el("li", null, typeof e === "string" ? e : JSON.stringify(e))); });
        vb.appendChild(ul);
      }
      box.appendChild(vb);
    }

    var tb = str(f.traceback).replace(/\s+$/, "");
    if (tb) {
      var lines = tb.split("\n");
      box.appendChild(el("h3", null, "Stack (last frames)"));
      box.appendChild(el("pre", "tc-stack", lines.slice(-STACK_LINES).join("\n"), { id: "tc-failure-stack" }));
      if (lines.length > STACK_LINES) {
        var d = el("details", "tc-stack-full");
        add(d, el("summary", null, "Full traceback (" + lines.length + " lines)"), el("pre", "tc-stack", tb));
        box.appendChild(d);
      }
    }
    var cols = el("div", "tc-failure-tables");
    var m = el("div"), s = el("div");
    add(m, el("h3", null, "Last metrics"), kvTable(f.last_metrics, "tc-failure-metrics", false));
    add(s, el("h3", null, "Last system readings"), kvTable(f.last_system, "tc-failure-system", true));
    add(cols, m, s);
    box.appendChild(cols);
  }

  /* ---------------------------------------------------------------- gang (multi-node) */
  /* The gang panel: world size, nodes side by side, ranks, stragglers, first failure, hung ranks. */

  function gangCell(tr, text, attrs) { tr.appendChild(el("td", null, text, attrs)); }

  function gangTable(id, heads) {
    var table = el("table", "tc-table tc-gang-table", null, { id: id });
    var hr = el("tr");
    heads.forEach(function (h) { hr.appendChild(el("th", null, h, { scope: "col" })); });
    add(table, add(el("thead"), hr));
    return table;
  }

  function gangShare(v) { return isNum(v) ? Math.round(v * 100) + "%" : "\u2013"; }

  function renderGangFailure(f) {
    var box = el("div", "tc-gang-failure", null, { id: "tc-gang-failure", "data-rank": str(f.rank) });
    box.appendChild(el("h3", null, "First failure"));
    box.appendChild(el("p", "tc-gang-first", "Rank " + str(f.rank) + " on node " + str(f.node) + " (" +
      (str(f.host) || "?") + ", pid " + str(f.pid) + ") " + str(f.how) + " at step " + str(f.step) +
      "; last heartbeat " + fmtClock(f.heartbeat_at), { id: "tc-gang-first" }));
    var ev = Array.isArray(f.evidence) ? f.evidence : [];
    if (ev.length) {
      var ul = el("ul", "tc-evidence");
      ev.forEach(function (e) { ul.appendChild(el("li", null, str(e))); });
      box.appendChild(ul);
    }
    if (has(f.traceback)) {
      var lines = str(f.traceback).replace(/\s+$/, "").split("\n");
      box.appendChild(el("pre", "tc-stack", lines.slice(-STACK_LINES).join("\n")));
    }
    var later = Array.isArray(f.consequences) ? f.consequences : [];
    if (later.length) {
      box.appendChild(el("h3", null, "Then (consequences, not causes)"));
      var ol = el("ol", "tc-gang-consequences", null, { id: "tc-gang-consequences" });
      later.forEach(function (c) {
        ol.appendChild(el("li", null, "rank " + str(c.rank) + " on node " + str(c.node) + ": " + str(c.how) +
          (has(c.step) ? " at step " + str(c.step) : "")));
      });
      box.appendChild(ol);
    }
    var lm = {};
    Object.keys(f.last_metrics || {}).forEach(function (k) { lm[k + " (step " + str(f.last_metrics[k].step) + ")"] = f.last_metrics[k].value; });
    add(box, el("h3", null, "Last metrics"), kvTable(lm, "tc-gang-last-metrics", false));
    return box;
  }

  function renderGang() {
    var g = S.payload.gang;
    var box = clear(S.dom.gang);
    box.hidden = !g || typeof g !== "object";
    if (box.hidden) return;
    var h = el("h2", "tc-h2");
    add(h, el("span", null, "Gang"), el("span", "tc-count", "world size " + str(g.world_size) + " \u00b7 " +
      str(g.num_nodes) + " node" + (g.num_nodes === 1 ? "" : "s"), { id: "tc-gang-world" }));
    box.appendChild(h);
    var lines = Array.isArray(g.headline) ? g.headline : [];
    if (lines.length) {
      var hl = el("ul", "tc-gang-headline", null, { id: "tc-gang-headline" });
      lines.forEach(function (b) { hl.appendChild(el("li", "tc-gang-line tc-gang-line--" + str(b.kind), str(b.text), { "data-kind": str(b.kind) })); });
      box.appendChild(hl);
    }
    if (g.first_failure && typeof g.first_failure === "object") box.appendChild(renderGangFailure(g.first_failure));

    var nodes = gangTable("tc-gang-nodes", ["node", "host", "task", "ranks", "CPU", "memory", "GPUs", "step process"]);
    var nb = el("tbody");
    (g.nodes || []).forEach(function (n) {
      var tr = el("tr", null, null, { "data-node": str(n.node_index) });
      var sys = n.system || {};
      var gpus = (sys.gpus || []).map(function (x) { return str(x.id) + " " + gangShare(x.utilization) + " " + fmtBytes(x.memory_used); });
      gangCell(tr, "node " + str(n.node_index)); gangCell(tr, str(n.host)); gangCell(tr, str(n.task_id));
      gangCell(tr, (n.ranks || []).join(", ")); gangCell(tr, gangShare(sys.cpu_utilization));
      gangCell(tr, isNum(sys.memory_used) ? fmtBytes(sys.memory_used) + (isNum(sys.memory_limit) ? " / " + fmtBytes(sys.memory_limit) : "") : "\u2013");
      gangCell(tr, gpus.length ? gpus.join("; ") : "\u2013"); gangCell(tr, str(n.launcher_status) || "\u2013");
      nb.appendChild(tr);
    });
    nodes.appendChild(nb);
    var agg = g.aggregates || {};
    var aggText = "All nodes: CPU mean " + gangShare(agg.cpu_utilization_mean) + ", memory used " +
      (isNum(agg.memory_used_total) ? fmtBytes(agg.memory_used_total) : "\u2013");
    if (agg.gpus) aggText += ", " + str(agg.gpus) + " GPUs: mean utilization " + gangShare(agg.gpu_utilization_mean) +
      ", memory in use " + fmtBytes(agg.gpu_memory_used_total);
    add(box, el("h3", null, "Nodes"), nodes, el("p", "tc-note", aggText, { id: "tc-gang-aggregates" }));

    var slow = (g.stragglers || {}).slowest;
    var hung = {};
    (g.hung || []).forEach(function (x) { hung[x.rank] = "hung"; });
    (g.waiting || []).forEach(function (x) { hung[x.rank] = "waiting"; });
    var failedRank = g.first_failure ? g.first_failure.rank : null;
    var ranks = gangTable("tc-gang-ranks", ["rank", "node", "local", "pid", "status", "step", "heartbeat",
      "step time (median)", "recent", "data wait"]);
    var rb = el("tbody");
    (g.ranks || []).forEach(function (r) {
      var cls = slow && slow.rank === r.rank ? "tc-gang-slow" : "";
      if (hung[r.rank] === "hung") cls += " tc-gang-hung";
      if (failedRank === r.rank) cls += " tc-gang-failed";
      var tr = el("tr", cls.trim() || null, null, { "data-rank": str(r.rank) });
      var status = hung[r.rank] || str(r.status);
      gangCell(tr, str(r.rank)); gangCell(tr, str(r.node)); gangCell(tr, str(r.local_rank)); gangCell(tr, str(r.pid));
      gangCell(tr, status, { "data-status": status }); gangCell(tr, has(r.step) ? str(r.step) : "\u2013");
      gangCell(tr, isNum(r.heartbeat_age_s) ? fmtDur(r.heartbeat_age_s) + " ago" : "\u2013");
      gangCell(tr, isNum(r.step_time_median_s) ? fmtNum(r.step_time_median_s, 3) + " s" : "\u2013");
      gangCell(tr, isNum(r.step_time_recent_s) ? fmtNum(r.step_time_recent_s, 3) + " s" : "\u2013");
      gangCell(tr, gangShare(r.data_wait_share));
      rb.appendChild(tr);
    });
    ranks.appendChild(rb);
    var st = g.stragglers || {};
    var spread = isNum(st.spread) ? "Spread of recent step time across ranks: " + gangShare(st.spread) + " of the median" +
      " (a rank is named slowest at " + str(st.factor) + "\u00d7 the others)." : "";
    add(box, el("h3", null, "Ranks"), ranks, spread ? el("p", "tc-note", spread, { id: "tc-gang-spread" }) : null);
  }

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
    return { label: str(s && s.label) || "series", x: x, y: y };
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
    spec.series.forEach(function (s, i) {
      series.push({
        label: s.label,
        stroke: styles[i].stroke,
        dash: styles[i].dash,
        width: 1.6,
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
        return min === max ? [min - pad, max + pad] : [min, max];
      } } },
      axes: [
        Object.assign({}, axis, isTime ? { values: timeTicks, incrs: TIME_INCRS } :
          { values: function (u, ticks) { return ticks.map(fmtAxis); } }),
        Object.assign({}, axis, { size: axisSize, values: function (u, ticks) { return ticks.map(fmtAxis); } })
      ],
      hooks: { draw: [drawMarkers] },
      series: series
    };
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
    var training = [], system = [];
    S.charts.forEach(function (ch) { (ch.spec.isSystem ? system : training).push(ch); });
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

  /* ---------------------------------------------------------------- run summary */

  function summaryRows() {
    return (Array.isArray(S.payload.summary) ? S.payload.summary : []).filter(function (r) { return r && typeof r === "object"; });
  }

  /* Figures reported once or a few times (runtimes, rates, FLOPs, the run's average loss): one
     compact table instead of a chart each (docs/card-payload.md, "summary"). */
  function renderSummary() {
    var rows = summaryRows(), box = clear(S.dom.summary);
    box.hidden = !rows.length;
    if (!rows.length) return;
    box.appendChild(el("h3", "tc-h3", "Run summary"));
    var wrap = el("div", "tc-table-wrap");
    var table = el("table", "tc-table tc-summary-table", null, { id: "tc-summary-table" });
    var thead = el("thead"), hr = el("tr");
    ["figure", "value", "unit", "reported", "range", "at step"].forEach(function (h) { hr.appendChild(el("th", null, h, { scope: "col" })); });
    thead.appendChild(hr);
    var tbody = el("tbody");
    rows.forEach(function (r) {
      var tr = el("tr", null, null, { "data-name": str(r.name) });
      var unit = str(r.unit);
      add(tr, el("th", "tc-summary-name", str(r.name), { scope: "row" }),
        el("td", "tc-num", fmtNum(r.value, 5)),
        el("td", "tc-summary-unit", UNIT_WORDS[unit] || unit || "no unit"),
        el("td", "tc-num", isNum(r.count) ? (r.count === 1 ? "once" : fmtInt(r.count) + " times") : "\u2013"),
        el("td", "tc-num", isNum(r.min) && isNum(r.max) ? fmtNum(r.min, 4) + " \u2013 " + fmtNum(r.max, 4) : "\u2013"),
        el("td", "tc-num", has(r.step) ? fmtInt(r.step) : "\u2013"));
      tbody.appendChild(tr);
    });
    add(table, thead, tbody);
    wrap.appendChild(table);
    box.appendChild(wrap);
    S.dom.trainEmpty.hidden = true;
  }

  /* ---------------------------------------------------------------- system */

  function renderSystemInfo() {
    var sys = S.payload.system && typeof S.payload.system === "object" ? S.payload.system : {};
    var notes = clear(S.dom.sysNotes), tiles = clear(S.dom.sysTiles);
    (Array.isArray(sys.notes) ? sys.notes : []).forEach(function (n) {
      add(notes, el("p", "tc-note tc-sys-note", n));
    });
    (Array.isArray(sys.latest) ? sys.latest : []).forEach(function (t) {
      if (!t || typeof t !== "object") return;
      var tile = el("div", "tc-tile", null, { title: str(t.name), "data-name": str(t.name) });
      // "system.memory.usage{system.memory.state=used}": the name, then its attributes in small print.
      var label = str(t.label || t.name), m = /^([^{]+)\{(.*)\}$/.exec(label);
      add(tile, el("div", "tc-tile-label", m ? m[1] : label),
        m ? el("div", "tc-tile-tags", m[2]) : null,
        el("div", "tc-tile-value", fmtReading(t.name, t.value, t.unit)));
      tiles.appendChild(tile);
    });
    notes.hidden = !notes.childNodes.length;
    tiles.hidden = !tiles.childNodes.length;
    renderSystemEmpty();
  }

  function emptyText(section, fallback) {
    var e = S.payload.empty && typeof S.payload.empty === "object" ? S.payload.empty : {};
    return has(e[section]) ? str(e[section]) : fallback;
  }

  function renderSystemEmpty() {
    var any = !S.dom.sysTiles.hidden || !S.dom.sysGrid.hidden;
    S.dom.sysEmpty.hidden = any || !S.dom.sysNotes.hidden;
    S.dom.sysEmpty.textContent = emptyText("system", "No system metrics recorded.");
    S.dom.system.classList.toggle("tc-section--empty", !any);
  }

  /* ---------------------------------------------------------------- checkpoints */

  function renderCheckpoints() {
    var list = (Array.isArray(S.payload.checkpoints) ? S.payload.checkpoints : []).filter(function (c) {
      return c && typeof c === "object";
    });
    var body = clear(S.dom.ckptBody);
    S.dom.checkpoints.classList.toggle("tc-section--empty", !list.length);
    S.dom.checkpoints.querySelector(".tc-count").textContent = list.length ? String(list.length) : "";
    if (!list.length) { body.appendChild(el("p", "tc-note", emptyText("checkpoints", "No checkpoints saved yet."))); return; }

    var best = null;
    list.forEach(function (c) { if (c.best) best = c; });
    if (best) {
      var sum = el("p", "tc-best-summary");
      add(sum, el("span", "tc-star", "\u2605"), " best: step " + fmtInt(best.step),
        has(best.metric) ? " \u00B7 " + best.metric + " = " + fmtNum(best.value, 5) : "");
      body.appendChild(sum);
    }
    var wrap = el("div", "tc-table-wrap");
    var table = el("table", "tc-table tc-ckpt-table");
    var thead = el("thead"), hr = el("tr");
    ["", "step", "size", "saved", "metric", "path"].forEach(function (h) { hr.appendChild(el("th", null, h, { scope: "col" })); });
    thead.appendChild(hr);
    var tbody = el("tbody");
    list.slice().reverse().forEach(function (c) {
      var tr = el("tr", c.best ? "tc-best best" : null, null, { "data-step": str(c.step) });
      var star = el("td", "tc-ckpt-star");
      if (c.best) star.appendChild(el("span", "tc-star", "\u2605", {
        title: "best" + (has(c.metric) ? " by " + c.metric + " = " + fmtNum(c.value, 5) : "")
      }));
      var metric = el("td", "tc-ckpt-metric");
      if (has(c.metric) || has(c.value)) {
        add(metric, el("span", "tc-metric-name", has(c.metric) ? c.metric : "value"), " ",
          el("span", "tc-metric-value", fmtNum(c.value, 5)));
        if (c.best) metric.appendChild(el("span", "tc-tag", "best"));
      } else metric.textContent = "\u2013";
      add(tr, star, el("td", "tc-num", fmtInt(c.step)), el("td", "tc-num", fmtBytes(c.size_bytes)),
        el("td", "tc-num", fmtClock(c.time), { title: fmtDateTime(c.time) }), metric);
      var ptd = el("td", "tc-ckpt-path");
      ptd.appendChild(el("code", "tc-path", c.path || "\u2013", { title: str(c.path) }));
      tr.appendChild(ptd);
      tbody.appendChild(tr);
    });
    add(table, thead, tbody);
    wrap.appendChild(table);
    body.appendChild(wrap);
  }

  /* ---------------------------------------------------------------- logs */

  function logKey(r) { return str(r.time) + "|" + str(r.rank) + "|" + str(r.message).slice(0, 80); }

  function renderLogLine(r) {
    var lvl = levelNum(r.level), level = str(r.level).toUpperCase() || "\u2013";
    var cls = "tc-log" + (lvl >= N.error ? " tc-log--error" : lvl >= N.warn ? " tc-log--warning" : lvl < 20 ? " tc-log--debug" : "");
    var row = el("div", cls, null, { "data-level": level, "data-lvl": lvl, "data-rank": str(r.rank), "data-stream": str(r.stream) });
    add(row,
      el("span", "tc-log-time", fmtClock(r.time), { title: fmtDateTime(r.time) }),
      el("span", "tc-log-level", level),
      el("span", "tc-log-rank", has(r.rank) ? "r" + r.rank : "", { title: has(r.rank) ? "rank " + r.rank : "" }));
    var msg = el("div", "tc-log-body");
    if (has(r.stream)) msg.appendChild(el("span", "tc-log-stream", str(r.stream)));
    msg.appendChild(el("span", "tc-log-msg", str(r.message)));
    if (has(r.traceback)) {
      var tb = str(r.traceback).replace(/\s+$/, ""), lines = tb.split("\n");
      var last = lines[lines.length - 1];
      var d = el("details", "tc-tb");
      add(d, el("summary", null, "Traceback \u00B7 " + lines.length + " lines" + (last ? " \u00B7 " + last.slice(0, 140) : "")),
        el("pre", null, tb));
      var key = logKey(r);
      if (S.log.open.has(key)) d.open = true;
      d.addEventListener("toggle", function () { if (d.open) S.log.open.add(key); else S.log.open.delete(key); });
      msg.appendChild(d);
    }
    row.appendChild(msg);
    row.tcSearch = (str(r.message) + "\n" + str(r.traceback) + "\n" + level + "\nrank " + str(r.rank)).toLowerCase();
    return row;
  }

  function renderLogs() {
    var logs = (Array.isArray(S.payload.logs) ? S.payload.logs : []).filter(function (r) { return r && typeof r === "object"; });
    var list = S.dom.logList;
    var atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 24;
    var keepTop = list.scrollTop;
    clear(list);
    var frag = document.createDocumentFragment();
    logs.forEach(function (r) { frag.appendChild(renderLogLine(r)); });
    list.appendChild(frag);
    S.dom.logs.classList.toggle("tc-section--empty", !logs.length);
    S.dom.logEmpty.hidden = !!logs.length;
    S.dom.logEmpty.textContent = emptyText("logs", "No log lines yet.");
    S.dom.logTools.hidden = !logs.length;
    list.hidden = !logs.length;
    renderRankOptions();
    applyLogFilter();
    if (S.log.follow || S.log.stick || (atBottom && S.log.follow)) list.scrollTop = list.scrollHeight;
    else list.scrollTop = keepTop;
    S.log.stick = false;
  }

  /* The rank filter lists every rank that wrote a log line (log_info.ranks), shown with two or more. */
  function renderRankOptions() {
    var info = S.payload.log_info && typeof S.payload.log_info === "object" ? S.payload.log_info : {};
    var ranks = (Array.isArray(info.ranks) ? info.ranks : []).filter(isNum);
    if (!Array.isArray(info.ranks)) {  // a payload without log_info: the ranks of the lines it holds
      var seen = {};
      (Array.isArray(S.payload.logs) ? S.payload.logs : []).forEach(function (r) { if (r && isNum(r.rank)) seen[r.rank] = true; });
      ranks = Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
    }
    var sel = S.dom.logRank, want = ["all"].concat(ranks.map(String));
    var have = Array.prototype.map.call(sel.options, function (o) { return o.value; });
    if (have.join(",") !== want.join(",")) {
      clear(sel);
      want.forEach(function (v) { sel.appendChild(el("option", null, v === "all" ? "All ranks" : "rank " + v, { value: v })); });
      if (want.indexOf(S.log.rank) < 0) S.log.rank = "all";
      sel.value = S.log.rank;
    }
    sel.hidden = ranks.length < 2;
  }

  function trimmedText() {
    var info = S.payload.log_info && typeof S.payload.log_info === "object" ? S.payload.log_info : {};
    if (!isNum(info.trimmed) || info.trimmed <= 0) return "";
    return fmtInt(info.trimmed) + " of " + fmtInt(info.total) + " lines in the store not shown (the card keeps the last " +
      fmtInt(info.tail) + " and the latest warnings and errors; traincard tail or export reads them all)";
  }

  function applyLogFilter() {
    var q = S.log.query.trim().toLowerCase();
    var min = S.log.level === "all" ? 0 : levelNum(S.log.level), rank = S.log.rank;
    var rows = S.dom.logList.children, shown = 0, total = 0;
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      if (!row.classList.contains("tc-log")) continue;
      total++;
      var ok = Number(row.getAttribute("data-lvl")) >= min && (!q || row.tcSearch.indexOf(q) >= 0) &&
        (rank === "all" || row.getAttribute("data-rank") === rank);
      row.hidden = !ok;
      if (ok) shown++;
    }
    S.dom.logList.setAttribute("data-shown", String(shown));
    S.dom.logCount.textContent = shown === total ? total + " lines" : shown + " of " + total + " lines";
    S.dom.logs.querySelector(".tc-count").textContent = total ? String(total) : "";
    S.dom.logNone.hidden = !(total && !shown);
    var trimmed = trimmedText();
    S.dom.logTrimmed.textContent = trimmed;
    S.dom.logTrimmed.hidden = !trimmed;
    if (S.log.follow) S.dom.logList.scrollTop = S.dom.logList.scrollHeight;
  }

  /* ---------------------------------------------------------------- stats */

  function renderStats() {
    var st = S.payload.stats && typeof S.payload.stats === "object" ? S.payload.stats : {};
    var box = clear(S.dom.stats);
    var dropped = st.dropped && typeof st.dropped === "object" ? st.dropped : {};
    var total = 0, reasons = [];
    Object.keys(dropped).forEach(function (k) {
      var n = Number(dropped[k]) || 0;
      total += n;
      if (n) reasons.push(k + " " + fmtInt(n));
    });
    var parts = [];
    parts.push(el("span", null, fmtInt(st.points || 0) + " records", { "data-stat": "points" }));
    parts.push(el("span", null, fmtInt(st.segments || 0) + " segments", { "data-stat": "segments" }));
    parts.push(el("span", total ? "tc-stat--warn" : null,
      fmtInt(total) + " dropped" + (reasons.length ? " (" + reasons.join(", ") + ")" : ""),
      { "data-stat": "dropped-total", "data-value": total }));
    healthParts().forEach(function (p) { parts.push(p); });
    var corrupt = Number(st.corrupt_segments) || 0;
    parts.push(el("span", corrupt ? "tc-stat--warn" : null, fmtInt(corrupt) + " corrupt segments",
      { "data-stat": "corrupt", "data-value": corrupt }));
    parts.push(el("span", "tc-stat-gen", (S.payload.final ? "final card" : "live card") + " \u00B7 generated " +
      fmtDateTime(S.payload.generated_at)));
    if (S.updates) parts.push(el("span", null, S.updates + " live updates"));
    parts.forEach(function (p, i) {
      if (i && p.className !== "tc-stat-gen") box.appendChild(el("span", "tc-sep", "\u00B7", { "aria-hidden": "true" }));
      box.appendChild(p);
    });
  }

  /* Loss counters besides the dropped ones (payload.health): rejected values with their top reasons, store
     write errors with the last error, rows waiting to be written. Absent fields are not shown. */
  function healthParts() {
    var h = S.payload.health && typeof S.payload.health === "object" ? S.payload.health : {};
    var out = [];
    if (isNum(h.rejected_total)) {
      var top = (Array.isArray(h.rejected_top) ? h.rejected_top : []).filter(Array.isArray).map(function (r) {
        return str(r[0]) + " " + fmtInt(r[1]);
      });
      out.push(el("span", h.rejected_total ? "tc-stat--warn" : null,
        fmtInt(h.rejected_total) + " rejected" + (top.length ? " (" + top.join(", ") + ")" : ""),
        { "data-stat": "rejected", "data-value": h.rejected_total }));
    }
    if (isNum(h.write_errors)) {
      var text = fmtInt(h.write_errors) + " write errors";
      if (has(h.last_error)) text += " (last" + (isNum(h.last_error_at) ? " at " + fmtClock(h.last_error_at) : "") + ": " + str(h.last_error).slice(0, 200) + ")";
      out.push(el("span", h.write_errors ? "tc-stat--warn" : null, text,
        { "data-stat": "write-errors", "data-value": h.write_errors, title: str(h.last_error) }));
    }
    if (isNum(h.pending_rows)) {
      out.push(el("span", h.pending_rows ? "tc-stat--warn" : null,
        fmtInt(h.pending_rows) + " rows waiting to be written" + (h.retrying ? " (retrying)" : ""),
        { "data-stat": "pending", "data-value": h.pending_rows }));
    }
    return out;
  }


  /* ---------------------------------------------------------------- insights (payload.insights) */
  /* What needs attention (anomalies, step + one line), where the time went (goodput bar), how well the
     accelerators are used (MFU) and what it costs. Each part is hidden when the payload has nothing for it. */

  function fmtPct(v) { return isNum(v) ? (v < 0.1 && v > 0 ? (v * 100).toFixed(1) : Math.round(v * 100)) + "%" : "\u2013"; }
  function fmtSecs(s) { return isNum(s) && s < 10 ? (s < 0.05 ? "0s" : s.toFixed(1) + "s") : fmtDur(s); }
  function fmtFlops(v) {
    if (!isNum(v)) return "\u2013";
    var units = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) if (Math.abs(v) >= units[i][0]) return fmtNum(v / units[i][0], 3) + " " + units[i][1];
    return fmtNum(v, 3) + " ";
  }

  function renderAttention(ins) {
    var list = (Array.isArray(ins.attention) ? ins.attention : []).filter(function (a) { return a && typeof a === "object"; });
    var box = clear(S.dom.attention);
    box.hidden = !list.length;
    if (!list.length) return 0;
    var total = isNum(ins.attention_total) ? ins.attention_total : list.length;
    var h = el("h2", "tc-h2");
    add(h, el("span", null, "Attention"), el("span", "tc-count", fmtInt(total), { id: "tc-attention-count" }));
    var ul = el("ul", "tc-attention-list", null, { id: "tc-attention-list" });
    list.slice().reverse().forEach(function (a) {
      var li = el("li", "tc-attention-item", null, { "data-kind": str(a.kind), "data-step": str(a.step) });
      add(li, el("span", "tc-attention-step", has(a.step) ? "step " + fmtInt(a.step) : "\u2013"),
        el("span", "tc-attention-kind", str(a.label || a.kind)),
        el("span", "tc-attention-text", str(a.text)));
      ul.appendChild(li);
    });
    add(box, h, ul);
    if (total > list.length) box.appendChild(el("p", "tc-note", fmtInt(total - list.length) + " earlier anomalies not listed"));
    return list.length;
  }

  function renderGoodput(ins) {
    var g = ins.goodput && typeof ins.goodput === "object" ? ins.goodput : null;
    var box = clear(S.dom.goodput);
    var cats = g && Array.isArray(g.categories) ? g.categories.filter(function (c) { return c && isNum(c.seconds); }) : [];
    box.hidden = !g || !isNum(g.wall_s) || g.wall_s <= 0;
    if (box.hidden) return 0;
    var head = el("h3", "tc-goodput-head");
    add(head, el("span", null, "Where the time went"),
      el("span", "tc-goodput-ratio", fmtPct(g.ratio) + " productive of " + fmtSecs(g.wall_s) + (g.running ? " so far" : ""),
        { id: "tc-goodput-ratio" }));
    var bar = el("div", "tc-goodput-bar", null, { id: "tc-goodput-bar", role: "img",
      "aria-label": cats.map(function (c) { return str(c.label) + " " + fmtPct(c.seconds / g.wall_s); }).join(", ") });
    var legend = el("ul", "tc-goodput-legend", null, { id: "tc-goodput-legend" });
    cats.forEach(function (c) {
      var share = c.seconds / g.wall_s;
      var key = str(c.key).replace(/[^a-z_]/gi, "");
      if (share > 0) {
        bar.appendChild(el("span", "tc-gp tc-gp--" + key, null, {
          "data-key": key, title: str(c.label) + ": " + fmtSecs(c.seconds) + " (" + fmtPct(share) + ")",
          style: "width:" + (share * 100).toFixed(3) + "%"
        }));
      }
      if (c.seconds >= 0.005 * g.wall_s || key === "productive") {
        var li = el("li", "tc-goodput-item", null, { "data-key": key, "data-seconds": String(c.seconds) });
        add(li, el("span", "tc-gp-swatch tc-gp--" + key, null, { "aria-hidden": "true" }),
          el("span", "tc-gp-label", str(c.label)), el("span", "tc-gp-value", fmtSecs(c.seconds) + " \u00B7 " + fmtPct(share)));
        legend.appendChild(li);
      }
    });
    add(box, head, bar, legend);
    return 1;
  }

  function renderEfficiency(ins) {
    var e = ins.efficiency && typeof ins.efficiency === "object" ? ins.efficiency : null;
    var c = ins.cost && typeof ins.cost === "object" ? ins.cost : null;
    var box = clear(S.dom.efficiency);
    box.hidden = !e && !c;
    if (box.hidden) return 0;
    var facts = el("dl", "tc-facts tc-efficiency-facts");
    if (e) {
      var mfuText = isNum(e.mfu) ? fmtPct(e.mfu) : "unknown peak";
      facts.appendChild(fact("tc-mfu", "MFU", mfuText, str(e.peak_source)));
      facts.appendChild(fact("tc-achieved", "model FLOP/s", fmtFlops(e.achieved_flops) + "FLOP/s",
        (isNum(e.accelerators) ? e.accelerators + " accelerator(s)" : "") + (e.dtype ? ", " + str(e.dtype) : "")));
      facts.appendChild(fact("tc-flops-token", "FLOPs / token", fmtFlops(e.flops_per_token) + "FLOP",
        isNum(e.seq_len) ? "sequence length " + fmtNum(e.seq_len, 4) : "dense term only"));
      if (isNum(e.peak_flops)) facts.appendChild(fact("tc-peak", "peak", fmtFlops(e.peak_flops) + "FLOP/s", str(e.peak_source)));
    }
    if (c) {
      if (isNum(c.per_1k_tokens)) facts.appendChild(fact("tc-cost-tokens", "per 1k tokens", "$" + fmtNum(c.per_1k_tokens, 3)));
      if (isNum(c.badput)) facts.appendChild(fact("tc-cost-badput", "badput cost", fmtMoney(c.badput),
        "the cost of the time that was not productive training" + (c.nodes > 1 ? ", " + c.nodes + " nodes" : "")));
    }
    box.appendChild(facts);
    if (e && !isNum(e.mfu) && e.peak_source) box.appendChild(el("p", "tc-note", "MFU: " + str(e.peak_source), { id: "tc-mfu-note" }));
    return 1;
  }

  function renderInsights() {
    var ins = S.payload.insights && typeof S.payload.insights === "object" ? S.payload.insights : {};
    var n = renderAttention(ins) + renderGoodput(ins) + renderEfficiency(ins);
    S.dom.insights.hidden = !n;
  }

  function buildInsights() {
    var d = S.dom;
    d.insights = el("section", "tc-section tc-insights", null, { id: "tc-insights" });
    d.attention = el("div", "tc-attention", null, { id: "tc-attention", role: "region", "aria-label": "anomalies" });
    d.goodput = el("div", "tc-goodput", null, { id: "tc-goodput" });
    d.efficiency = el("div", "tc-efficiency", null, { id: "tc-efficiency" });
    add(d.insights, d.attention, d.goodput, d.efficiency);
    return d.insights;
  }

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

  /* ---------------------------------------------------------------- page */

  function section(id, title, extraCls) {
    var s = el("section", "tc-section" + (extraCls ? " " + extraCls : ""), null, { id: id });
    var h = el("h2", "tc-h2");
    add(h, el("span", null, title), el("span", "tc-count"));
    s.appendChild(h);
    return s;
  }

  function buildSkeleton(root) {
    var d = S.dom;
    d.header = el("header", "tc-header", null, { id: "tc-status" });
    d.banners = el("div", "tc-banners", null, { id: "tc-banners" });
    d.failure = el("section", "tc-failure", null, { id: "tc-failure" });
    d.gang = el("section", "tc-section tc-gang", null, { id: "tc-gang" });

    d.charts = section("tc-charts", "Training metrics");
    d.trainGrid = el("div", "tc-grid");
    d.trainEmpty = el("p", "tc-note tc-empty", "No training metrics reported yet.");
    d.summary = el("div", "tc-summary", null, { id: "tc-summary" });
    add(d.charts, d.trainGrid, d.summary, d.trainEmpty);

    d.system = section("tc-system", "System");
    d.sysNotes = el("div", "tc-sys-notes");
    d.sysTiles = el("div", "tc-tiles");
    d.sysGrid = el("div", "tc-grid");
    d.sysEmpty = el("p", "tc-note tc-empty", "No system metrics recorded.");
    add(d.system, d.sysNotes, d.sysTiles, d.sysGrid, d.sysEmpty);

    d.checkpoints = section("tc-checkpoints", "Checkpoints");
    d.ckptBody = el("div", "tc-ckpt-body");
    d.checkpoints.appendChild(d.ckptBody);

    d.logs = section("tc-logs", "Logs");
    d.logTools = el("div", "tc-log-tools");
    var search = el("input", "tc-input", null, {
      id: "tc-log-search", type: "search", placeholder: "Filter log lines\u2026", "aria-label": "filter log lines",
      autocomplete: "off", spellcheck: "false"
    });
    var level = el("select", "tc-input", null, { id: "tc-log-level", "aria-label": "minimum log level" });
    level.appendChild(el("option", null, "All levels", { value: "all" }));
    N.filterLevels.forEach(function (name) { level.appendChild(el("option", null, str(name) + "+", { value: str(name) })); });
    d.logRank = el("select", "tc-input", null, { id: "tc-log-rank", "aria-label": "rank" });
    var followBox = el("input", null, null, { id: "tc-log-follow", type: "checkbox" });
    followBox.checked = S.log.follow;
    var follow = el("label", "tc-log-follow", null, { title: "keep the newest line in view as lines arrive" });
    add(follow, followBox, " follow");
    d.logCount = el("span", "tc-log-count", null, { id: "tc-log-count" });
    search.addEventListener("input", function () { S.log.query = search.value; applyLogFilter(); });
    level.addEventListener("change", function () { S.log.level = level.value; applyLogFilter(); });
    d.logRank.addEventListener("change", function () { S.log.rank = d.logRank.value; applyLogFilter(); });
    followBox.addEventListener("change", function () {
      S.log.follow = followBox.checked;
      if (S.log.follow) d.logList.scrollTop = d.logList.scrollHeight;
    });
    add(d.logTools, search, level, d.logRank, follow, d.logCount);
    d.logList = el("div", "tc-log-list", null, { role: "log", "aria-live": "off" });
    d.logList.addEventListener("scroll", function () {  // scrolling up to read stops following
      var bottom = d.logList.scrollHeight - d.logList.scrollTop - d.logList.clientHeight < 24;
      if (bottom !== S.log.follow) { S.log.follow = bottom; followBox.checked = bottom; }
    });
    d.logTrimmed = el("p", "tc-note tc-log-trimmed", null, { id: "tc-log-trimmed" });
    d.logEmpty = el("p", "tc-note", "No log lines yet.");
    d.logNone = el("p", "tc-note", "No log lines match the filter.");
    d.logNone.hidden = true;
    add(d.logs, d.logTools, d.logTrimmed, d.logList, d.logNone, d.logEmpty);

    d.stats = el("footer", "tc-stats", null, { id: "tc-stats" });
    add(root, d.header, d.banners, buildInsights(), d.failure, d.gang, d.charts, d.system, d.checkpoints, d.logs, d.stats);
  }

  function renderAll() {
    renderHeader();
    renderBanners();
    renderInsights();
    renderFailure();
    renderGang();
    renderSystemInfo();
    applyBaselineSeries();
    renderChartSections();
    renderSummary();
    renderCheckpoints();
    renderLogs();
    renderStats();
  }

  /* Live update: append newer chart points, create new charts and series, replace the rest. */
  function update(u) {
    if (!u || typeof u !== "object") return false;
    try {
      var p = S.payload;
      S.receivedAt = now();
      if ("names" in u) { p.names = u.names; readNames(p); }
      N.sections.forEach(function (k) { if (k in u) p[k] = u[k]; });
      var markersChanged = false;
      if (Array.isArray(u.markers) && JSON.stringify(u.markers) !== JSON.stringify(p.markers || [])) {
        p.markers = u.markers; markersChanged = true;
      }
      S.updates++;
      mergeCharts(u.charts);
      updateBaseline(u);
      if (markersChanged) S.charts.forEach(function (ch) { if (ch.plot && !ch.spec.byTime) ch.plot.redraw(false, false); });
      renderHeader();
      renderBanners();
      if ("insights" in u) renderInsights();
      renderFailure();
      renderGang();
      if ("system" in u) renderSystemInfo();
      if ("checkpoints" in u) renderCheckpoints();
      if ("summary" in u) renderSummary();
      if ("logs" in u) renderLogs();
      renderStats();
      document.body.removeAttribute("data-error");
    } catch (err) {
      document.body.setAttribute("data-error", String(err && err.stack || err));
      if (window.console) console.error("traincard update failed", err);
    }
    document.body.dataset.updates = String(S.updates);
    return true;
  }

  function showError(root, err) {
    var box = el("div", "tc-banner tc-banner--failed", null, { "data-kind": "render-error" });
    add(box, el("span", "tc-banner-kind", "Card error"), el("span", "tc-banner-text", String(err && err.message || err)));
    root.insertBefore(box, root.firstChild);
    document.body.setAttribute("data-error", String(err && err.stack || err));
  }

  function init() {
    var root = document.getElementById("tc-root");
    if (!root) { root = el("div", null, null, { id: "tc-root" }); document.body.appendChild(root); }
    document.body.dataset.updates = "0";
    var payload = {};
    try {
      var node = document.getElementById("tc-payload");
      payload = JSON.parse(node ? node.textContent : "{}") || {};
    } catch (err) { payload = {}; showError(root, err); }
    S.payload = payload;
    readNames(payload);
    S.log.stick = true;
    try {
      buildSkeleton(root);
      (Array.isArray(payload.charts) ? payload.charts : []).forEach(function (c) {
        if (c && has(c.id) && !S.charts.has(String(c.id))) createChart(c);
      });
      renderAll();
      document.body.setAttribute("data-ready", "1");
    } catch (err) { showError(root, err); }

    if (window.ResizeObserver) new ResizeObserver(queueResize).observe(root);
    else window.addEventListener("resize", queueResize);
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      var onScheme = function () { rebuildAllPlots(); };
      if (mq.addEventListener) mq.addEventListener("change", onScheme); else if (mq.addListener) mq.addListener(onScheme);
    }
    if (!payload.final) setInterval(tick, 1000);
  }

  window.TC = {
    update: update,
    payload: function () { return S.payload; },
    charts: function () { return S.charts; }
  };
  init();
})();
