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
      var li = el("li", "tc-attention-item" + (a.critical ? " tc-attention-item--critical" : ""), null,
        { "data-kind": str(a.kind), "data-step": str(a.step) });
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
    var hint = e ? "" : str(ins.mfu_hint);
    var box = clear(S.dom.efficiency);
    box.hidden = !e && !c && !hint;
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
    if (facts.childNodes.length) box.appendChild(facts);
    if (e && !isNum(e.mfu) && e.peak_source) box.appendChild(el("p", "tc-note", "MFU: " + str(e.peak_source), { id: "tc-mfu-note" }));
    if (hint) box.appendChild(el("p", "tc-note", hint, { id: "tc-mfu-hint" }));
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
