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
