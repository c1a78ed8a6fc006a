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

  /* The largest live CUDA allocations at the out-of-memory error, each with the Python frames that made it. */
  function oomAllocations(mem) {
    var box = el("div", "tc-oom", null, { id: "tc-oom" });
    box.appendChild(el("h3", null, "Largest live allocations at the OOM (peak " + fmtBytes(mem.peak) + ")"));
    (Array.isArray(mem.largest) ? mem.largest : []).forEach(function (b) {
      if (!b || typeof b !== "object") return;
      var d = el("details", "tc-oom-block", null, { "data-size": str(b.size) });
      d.appendChild(el("summary", null, fmtBytes(b.size) + " at " + (str(b.where) || "an unknown place")));
      var frames = (Array.isArray(b.frames) ? b.frames : []).map(function (f) {
        return "  " + str(f && f.file) + ":" + str(f && f.line) + " in " + str(f && f.name);
      });
      d.appendChild(el("pre", "tc-stack", "innermost first\n" + frames.join("\n")));
      box.appendChild(d);
    });
    if (has(mem.snapshot)) box.appendChild(el("p", "tc-note", "snapshot in the store: " + str(mem.snapshot) +
      " (open it in https://pytorch.org/memory_viz)"));
    return box;
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
      if (v.memory && typeof v.memory === "object") vb.appendChild(oomAllocations(v.memory));
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
