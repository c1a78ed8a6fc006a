  /* ---------------------------------------------------------------- completions */

  var FOLD_CHARS = 240;  // longer texts show their start, the rest on demand

  /* A text cell: short texts whole, long ones folded in a <details> (all through textContent). */
  function foldedText(text) {
    text = str(text);
    if (text.length <= FOLD_CHARS) return el("div", "tc-comp-text", text);
    var det = el("details", "tc-comp-fold");
    add(det, el("summary", "tc-comp-text", text.slice(0, FOLD_CHARS) + "\u2026"), el("div", "tc-comp-text", text));
    return det;
  }

  function applyCompletionFilter() {
    var q = (S.dom.compSearch.value || "").toLowerCase(), shown = 0, rows = S.dom.compBody.children;
    for (var i = 0; i < rows.length; i++) {
      var hit = !q || (rows[i].getAttribute("data-text") || "").indexOf(q) >= 0;
      rows[i].hidden = !hit;
      if (hit) shown++;
    }
    S.dom.compCount.textContent = shown + " of " + rows.length + " shown";
  }

  function renderCompletions() {
    var c = S.payload.completions, sec = S.dom.completions;
    var ok = c && typeof c === "object" && Array.isArray(c.rows);
    sec.hidden = !ok;
    if (!ok) return;
    var names = Array.isArray(c.rewards) ? c.rewards.map(str) : [];
    sec.querySelector(".tc-count").textContent = fmtInt(c.seen);
    S.dom.compNote.textContent = "Sampled completions: " + fmtInt(c.rows.length) + " shown of " + fmtInt(c.kept) +
      " kept (the latest steps whole, a sample of earlier ones) of " + fmtInt(c.seen) + " scored.";
    var head = clear(S.dom.compHead), tr = el("tr");
    ["step", "prompt", "completion"].concat(names, ["advantage"]).forEach(function (h) {
      tr.appendChild(el("th", null, h, { scope: "col" }));
    });
    head.appendChild(tr);
    var body = clear(S.dom.compBody);
    c.rows.forEach(function (r) {
      if (!r || typeof r !== "object") return;
      var row = el("tr", "tc-comp-row", null, {
        "data-step": str(r.step), "data-text": (str(r.prompt) + "\n" + str(r.completion)).toLowerCase()
      });
      var scores = Array.isArray(r.rewards) ? r.rewards : [];
      add(row, el("td", "tc-num", fmtInt(r.step)), add(el("td", "tc-comp-prompt"), foldedText(r.prompt)),
        add(el("td", "tc-comp-completion"), foldedText(r.completion)));
      names.forEach(function (n, i) { row.appendChild(el("td", "tc-num", isNum(scores[i]) ? fmtNum(scores[i], 4) : "\u2013")); });
      row.appendChild(el("td", "tc-num", isNum(r.advantage) ? fmtNum(r.advantage, 4) : "\u2013"));
      body.appendChild(row);
    });
    applyCompletionFilter();
  }

  function buildCompletions() {
    var d = S.dom;
    d.completions = section("tc-completions", "Sampled completions");
    d.compNote = el("p", "tc-note");
    d.compSearch = el("input", "tc-input", null, {
      id: "tc-comp-search", type: "search", placeholder: "Search prompts and completions\u2026",
      "aria-label": "search completions", autocomplete: "off", spellcheck: "false"
    });
    d.compCount = el("span", "tc-log-count", null, { id: "tc-comp-count" });
    d.compSearch.addEventListener("input", applyCompletionFilter);
    var tools = add(el("div", "tc-log-tools"), d.compSearch, d.compCount);
    var wrap = el("div", "tc-table-wrap tc-comp-wrap");
    var table = el("table", "tc-table tc-comp-table");
    d.compHead = el("thead"); d.compBody = el("tbody");
    add(wrap, add(table, d.compHead, d.compBody));
    add(d.completions, d.compNote, tools, wrap);
    d.completions.hidden = true;
    return d.completions;
  }
