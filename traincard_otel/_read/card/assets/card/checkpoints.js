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
