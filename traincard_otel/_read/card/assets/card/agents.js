  /* ---------------------------------------------------------------- agent loop */

  function fmtLatency(s) { return isNum(s) ? (s < 1 ? fmtNum(s * 1000, 3) + " ms" : fmtNum(s, 3) + " s") : "\u2013"; }
  function fmtCost(v) { return isNum(v) ? "$" + (v < 0.01 ? v.toPrecision(2) : v.toFixed(4)) : "\u2013"; }

  /* A table of rows: columns are [heading, function (row) -> text, numeric?]. */
  function agentTable(id, columns, rows, rowAttrs) {
    var wrap = el("div", "tc-table-wrap"), table = el("table", "tc-table", null, { id: id });
    var tr = el("tr");
    columns.forEach(function (c) { tr.appendChild(el("th", null, c[0], { scope: "col" })); });
    var body = el("tbody");
    rows.forEach(function (r) {
      if (!r || typeof r !== "object") return;
      var row = el("tr", null, null, rowAttrs ? rowAttrs(r) : undefined);
      columns.forEach(function (c) { row.appendChild(el("td", c[2] ? "tc-num" : null, c[1](r))); });
      body.appendChild(row);
    });
    add(wrap, add(table, add(el("thead"), tr), body));
    return wrap;
  }

  function renderAgents() {
    var a = S.payload.agents, sec = S.dom.agents;
    var ok = a && typeof a === "object";
    sec.hidden = !ok;
    if (!ok) return;
    var body = clear(S.dom.agentsBody), list = function (v) { return Array.isArray(v) ? v : []; };
    sec.querySelector(".tc-count").textContent = fmtInt(a.episode_count);
    var episodes = list(a.episodes), calls = episodes.map(function (e) { return (e.model_calls || 0) + (e.tool_calls || 0); });
    var mean = calls.length ? calls.reduce(function (x, y) { return x + y; }, 0) / calls.length : null;
    add(body, el("p", "tc-note", fmtInt(a.episode_count) + " episodes, " + fmtInt(a.spans) + " spans, " +
      (isNum(mean) ? fmtNum(mean, 3) : "\u2013") + " calls per episode, " + fmtInt(a.failure_count) + " failed calls" +
      (a.priced ? "" : " (no price configured: TRAINCARD_GENAI_PRICES for the cost per episode)")));
    body.appendChild(el("h3", "tc-h3", "Episodes"));
    var cols = [
      ["agent", function (e) { return str(e.agent); }],
      ["started", function (e) { return fmtClock(e.start); }, true],
      ["duration", function (e) { return fmtLatency(e.duration_s); }, true],
      ["LLM calls", function (e) { return fmtInt(e.model_calls); }, true],
      ["tool calls", function (e) { return fmtInt(e.tool_calls); }, true],
      ["input tokens", function (e) { return fmtInt(e.input_tokens); }, true],
      ["output tokens", function (e) { return fmtInt(e.output_tokens); }, true],
      ["errors", function (e) { return fmtInt(e.errors); }, true]
    ];
    if (a.priced) cols.push(["cost", function (e) { return fmtCost(e.cost); }, true]);
    body.appendChild(agentTable("tc-agent-episodes", cols, episodes, function (e) { return { "data-trace": str(e.trace) }; }));
    body.appendChild(el("h3", "tc-h3", "Tool calls"));
    body.appendChild(agentTable("tc-agent-tools", [
      ["tool", function (t) { return str(t.name); }],
      ["calls", function (t) { return fmtInt(t.calls); }, true],
      ["errors", function (t) { return fmtInt(t.errors); }, true],
      ["error share", function (t) { return isNum(t.error_share) ? fmtNum(100 * t.error_share, 3) + "%" : "\u2013"; }, true],
      ["p50", function (t) { return fmtLatency(t.p50_s); }, true],
      ["p95", function (t) { return fmtLatency(t.p95_s); }, true]
    ], list(a.tools), function (t) { return { "data-tool": str(t.name) }; }));
    body.appendChild(el("h3", "tc-h3", "LLM calls"));
    var mcols = [
      ["model", function (m) { return str(m.model); }],
      ["calls", function (m) { return fmtInt(m.calls); }, true],
      ["input tokens", function (m) { return fmtInt(m.input_tokens); }, true],
      ["output tokens", function (m) { return fmtInt(m.output_tokens); }, true],
      ["p50", function (m) { return fmtLatency(m.p50_s); }, true],
      ["p90", function (m) { return fmtLatency(m.p90_s); }, true],
      ["p99", function (m) { return fmtLatency(m.p99_s); }, true],
      ["errors", function (m) { return fmtInt(m.errors); }, true]
    ];
    if (a.priced) mcols.push(["cost", function (m) { return fmtCost(m.cost); }, true]);
    body.appendChild(agentTable("tc-agent-models", mcols, list(a.models), function (m) { return { "data-model": str(m.model) }; }));
    var failures = list(a.failures);
    if (failures.length) {
      body.appendChild(el("h3", "tc-h3", "Failed calls"));
      body.appendChild(agentTable("tc-agent-failures", [
        ["at", function (f) { return fmtClock(f.time); }, true],
        ["operation", function (f) { return str(f.operation); }],
        ["tool or model", function (f) { return str(f.target); }],
        ["error type", function (f) { return str(f.error_type); }],
        ["trace", function (f) { return str(f.trace).slice(0, 12); }]
      ], failures));
    }
  }

  function buildAgents() {
    var d = S.dom;
    d.agents = section("tc-agents", "Agent loop");
    d.agentsBody = el("div", "tc-agents-body");
    d.agents.appendChild(d.agentsBody);
    d.agents.hidden = true;
    return d.agents;
  }
