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

  function threadStack(t) {
    var lines = (t.frames || []).map(function (f) { return "  " + str(f.file) + ":" + str(f.line) + " in " + str(f.func); });
    var more = isNum(t.depth) && t.depth > lines.length ? ["  \u2026 " + (t.depth - lines.length) + " outer frames"] : [];
    return el("pre", "tc-stack", "thread " + str(t.name) + (t.main ? " (main)" : "") +
      " \u2014 innermost first\n" + lines.concat(more).join("\n"));
  }

  function renderGangStacks(st) {
    var box = el("div", "tc-gang-stacks", null, { id: "tc-gang-stacks" });
    box.appendChild(el("h3", null, "Where each rank is"));
    var fr = st.flight_recorder;
    if (fr && typeof fr === "object") {
      box.appendChild(el("p", "tc-note", "Flight recorder: " + str(fr.text), { id: "tc-gang-flight-recorder",
        "data-not-joined": (fr.not_joined || []).join(",") }));
    }
    (st.groups || []).forEach(function (g) {
      var d = el("details", "tc-gang-stack" + (g.culprit ? " tc-gang-culprit" : ""), null,
        { "data-ranks": (g.ranks || []).join(","), "data-culprit": g.culprit ? "1" : "0" });
      var head = str(g.label) + ": " + str(g.where) + (g.culprit ? " (the others wait for it)" : "") +
        (has(g.time) ? " \u00b7 " + str(g.reason) + " dump at " + fmtClock(g.time) : "");
      d.appendChild(el("summary", null, head));
      (g.threads || []).forEach(function (t) { d.appendChild(threadStack(t)); });
      var own = g.own_threads || [];
      if (own.length) {  // traincard's background threads: folded, the user's code comes first
        var o = el("details", "tc-gang-own-threads", null, { "data-count": String(own.length) });
        o.appendChild(el("summary", null, "+ " + own.length + " traincard thread" + (own.length > 1 ? "s" : "") +
          ": " + own.map(function (t) { return str(t.name).replace(/^traincard-/, ""); }).join(", ")));
        own.forEach(function (t) { o.appendChild(threadStack(t)); });
        d.appendChild(o);
      }
      box.appendChild(d);
    });
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
    if (g.stacks && typeof g.stacks === "object") box.appendChild(renderGangStacks(g.stacks));

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

    var slow = (g.stragglers || {}).slowest || (g.stragglers || {}).anatomy;
    var hung = {};
    (g.hung || []).forEach(function (x) { hung[x.rank] = "hung"; });
    (g.waiting || []).forEach(function (x) { hung[x.rank] = "waiting"; });
    var failedRank = g.first_failure ? g.first_failure.rank : null;
    var ranks = gangTable("tc-gang-ranks", ["rank", "node", "local", "pid", "status", "step", "heartbeat",
      "step time (median)", "recent", "data wait", "where"]);
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
      gangCell(tr, has(r.where) ? str(r.where) : "\u2013");
      rb.appendChild(tr);
    });
    ranks.appendChild(rb);
    var st = g.stragglers || {};
    var spread = isNum(st.spread) ? "Spread of recent step time across ranks: " + gangShare(st.spread) + " of the median" +
      " (a rank is named slowest at " + str(st.factor) + "\u00d7 the others)." : "";
    add(box, el("h3", null, "Ranks"), ranks, spread ? el("p", "tc-note", spread, { id: "tc-gang-spread" }) : null);
  }
