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
