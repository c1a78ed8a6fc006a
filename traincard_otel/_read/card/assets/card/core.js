/* traincard: draws the training card from the JSON payload in #tc-payload (docs/card-payload.md).
 *
 * Plain browser JavaScript, no build step and no network access. Every string that comes from the
 * payload is inserted with textContent / createTextNode (or as an attribute value), never as HTML.
 * Live pages also load live.js, which hands each live payload to TC.update (merge, no reload).
 *
 * One file per card section under assets/card/, concatenated by _html.py (CARD_SCRIPTS, in order)
 * inside one function: this file (names, state, helpers) first, page.js (skeleton, init) last.
 */
  var CHART_HEIGHT = 210;
  var TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172800, 604800, 2592000, 31536000];
  var STACK_LINES = 18;
  var UNIT_WORDS = { "1": "no unit", By: "bytes", s: "seconds" };

  /* Every wire name the page treats specially comes from the payload's "names" object
     (docs/card-payload.md); the page keeps no copies of its own. */
  var N = { sections: [], banners: [], levels: Object.create(null), verdicts: Object.create(null),
    ratio: Object.create(null), bytes: Object.create(null), colors: Object.create(null), groups: Object.create(null), rlGroups: [], axes: Object.create(null), filterLevels: [], warn: 30, error: 40 };
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
      rlGroups: Array.isArray(n.rl_groups) ? n.rl_groups.filter(function (g) { return g && has(g.group); }) : [],
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
