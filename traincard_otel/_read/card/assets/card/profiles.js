  /* ---------------------------------------------------------------- profiles (payload.profiles) */
  /* Every torch.profiler capture: what asked for it, its steps and ranks, the profiler's own cost, and
     per rank the breakdown of the profiled time, its top operators and where its trace is. */

  function profileWhy(c) {
    return c.trigger === "request" ? "asked with traincard profile" :
      "triggered by " + str(c.trigger).replace(/_/g, " ") + (has(c.detail) ? ": " + str(c.detail) : "");
  }

  function profileCost(r) {
    var parts = [];
    if (isNum(r.overhead)) parts.push((r.overhead >= 0 ? "+" : "") + fmtPct(r.overhead) + " step time (" +
      fmtMs(r.step_before_s) + " \u2192 " + fmtMs(r.step_during_s) + ")");
    if (isNum(r.start_s) || isNum(r.stop_s)) parts.push("start " + fmtMs(r.start_s) + ", stop " + fmtMs(r.stop_s));
    return parts.length ? "profiler's cost: " + parts.join("; ") : "";
  }

  function profileRank(r) {
    var box = el("div", "tc-profile-rank", null, { "data-rank": str(r.rank) });
    var head = el("div", "tc-anatomy-head");
    add(head, el("span", "tc-anatomy-label", "rank " + str(r.rank) + (r.device ? " \u00b7 device time" : " \u00b7 host time")),
      el("span", "tc-anatomy-step", profileCost(r)));
    box.appendChild(head);
    var shares = r.shares && typeof r.shares === "object" ? r.shares : {};
    var keys = Object.keys(shares).filter(function (k) { return isNum(shares[k]); });
    var bar = el("div", "tc-anatomy-bar tc-profile-bar", null, { role: "img",
      "aria-label": keys.map(function (k) { return k + " " + fmtPct(shares[k]); }).join(", ") });
    var legend = el("ul", "tc-anatomy-legend");
    keys.forEach(function (k) {
      var key = k.replace(/[^a-z_]/gi, "");
      if (shares[k] > 0) bar.appendChild(el("span", "tc-part tc-prof--" + key, null, { "data-part": key,
        title: key + " " + fmtPct(shares[k]), style: "width:" + (shares[k] * 100).toFixed(3) + "%" }));
      var li = el("li", "tc-anatomy-item", null, { "data-part": key });
      add(li, el("span", "tc-gp-swatch tc-prof--" + key, null, { "aria-hidden": "true" }), el("span", "tc-gp-label", key),
        el("span", "tc-gp-value", fmtPct(shares[k])));
      legend.appendChild(li);
    });
    add(box, bar, legend);
    if (isNum(r.overlap)) box.appendChild(el("p", "tc-note", "communication hidden under computation: " + fmtPct(r.overlap)));
    var ops = Array.isArray(r.operators) ? r.operators : [];
    if (ops.length) {
      var table = el("table", "tc-table tc-profile-ops");
      var hr = el("tr");
      ["operator", "calls", "self time", "share"].forEach(function (h) { hr.appendChild(el("th", null, h, { scope: "col" })); });
      add(table, add(el("thead"), hr));
      var tb = el("tbody");
      ops.forEach(function (o) {
        var tr = el("tr", null, null, { "data-operator": str(o.name) });
        add(tr, el("td", "tc-profile-op", str(o.name)), el("td", null, fmtInt(o.calls)), el("td", null, fmtNum(o.self_ms, 3) + " ms"),
          el("td", null, isNum(o.share) ? fmtPct(o.share) : "\u2013"));
        tb.appendChild(tr);
      });
      add(box, add(table, tb));
    }
    var where = str(r.location) + " (" + fmtBytes(r.trace_bytes) + (r.events_cut ? ", " + fmtInt(r.events_cut) + " events cut to fit" : "") + ")";
    box.appendChild(el("p", "tc-note tc-profile-trace", "trace: " + where));
    return box;
  }

  function renderProfiles() {
    var sec = S.payload.profiles && typeof S.payload.profiles === "object" ? S.payload.profiles : null;
    var box = clear(S.dom.profiles);
    var list = sec && Array.isArray(sec.captures) ? sec.captures.filter(function (c) { return c && typeof c === "object"; }) : [];
    box.hidden = !list.length;
    if (box.hidden) return;
    var h = el("h2", "tc-h2");
    add(h, el("span", null, "Profiles"), el("span", "tc-count", fmtInt(sec.total), { id: "tc-profiles-count" }));
    box.appendChild(h);
    list.forEach(function (c) {
      var d = el("details", "tc-profile", null, { "data-id": str(c.id), "data-trigger": str(c.trigger) });
      if (c === list[0]) d.open = true;
      var steps = Array.isArray(c.steps) ? "steps " + str(c.steps[0]) + "\u2013" + str(c.steps[1]) : "steps unknown";
      var ranks = Array.isArray(c.ranks) ? c.ranks : [];
      d.appendChild(el("summary", null, fmtDateTime(c.asked_at) + " \u00b7 " + steps + " \u00b7 " + fmtInt(c.rank_count) +
        " rank" + (c.rank_count === 1 ? "" : "s") + " \u00b7 " + profileWhy(c)));
      ranks.forEach(function (r) { if (r && typeof r === "object") d.appendChild(profileRank(r)); });
      if (c.rank_count > ranks.length) d.appendChild(el("p", "tc-note", fmtInt(c.rank_count - ranks.length) + " more ranks in the store"));
      d.appendChild(el("p", "tc-note tc-profile-open", "Open a trace in https://ui.perfetto.dev: copy it with " + str(c.export) +
        " (add --rank N for another rank), or fetch it from its path above."));
      box.appendChild(d);
    });
  }

  function buildProfiles() {
    S.dom.profiles = el("section", "tc-section tc-profiles", null, { id: "tc-profiles" });
    return S.dom.profiles;
  }
