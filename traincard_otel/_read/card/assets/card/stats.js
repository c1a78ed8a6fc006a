  /* ---------------------------------------------------------------- stats */

  function renderStats() {
    var st = S.payload.stats && typeof S.payload.stats === "object" ? S.payload.stats : {};
    var box = clear(S.dom.stats);
    var dropped = st.dropped && typeof st.dropped === "object" ? st.dropped : {};
    var total = 0, reasons = [];
    Object.keys(dropped).forEach(function (k) {
      var n = Number(dropped[k]) || 0;
      total += n;
      if (n) reasons.push(k + " " + fmtInt(n));
    });
    var parts = [];
    parts.push(el("span", null, fmtInt(st.points || 0) + " records", { "data-stat": "points" }));
    parts.push(el("span", null, fmtInt(st.segments || 0) + " segments", { "data-stat": "segments" }));
    parts.push(el("span", total ? "tc-stat--warn" : null,
      fmtInt(total) + " dropped" + (reasons.length ? " (" + reasons.join(", ") + ")" : ""),
      { "data-stat": "dropped-total", "data-value": total }));
    healthParts().forEach(function (p) { parts.push(p); });
    var corrupt = Number(st.corrupt_segments) || 0;
    parts.push(el("span", corrupt ? "tc-stat--warn" : null, fmtInt(corrupt) + " corrupt segments",
      { "data-stat": "corrupt", "data-value": corrupt }));
    parts.push(el("span", "tc-stat-gen", (S.payload.final ? "final card" : "live card") + " \u00B7 generated " +
      fmtDateTime(S.payload.generated_at)));
    if (S.updates) parts.push(el("span", null, S.updates + " live updates"));
    parts.forEach(function (p, i) {
      if (i && p.className !== "tc-stat-gen") box.appendChild(el("span", "tc-sep", "\u00B7", { "aria-hidden": "true" }));
      box.appendChild(p);
    });
  }

  /* Loss counters besides the dropped ones (payload.health): rejected values with their top reasons, store
     write errors with the last error, rows waiting to be written. Absent fields are not shown. */
  function healthParts() {
    var h = S.payload.health && typeof S.payload.health === "object" ? S.payload.health : {};
    var out = [];
    if (isNum(h.rejected_total)) {
      var top = (Array.isArray(h.rejected_top) ? h.rejected_top : []).filter(Array.isArray).map(function (r) {
        return str(r[0]) + " " + fmtInt(r[1]);
      });
      out.push(el("span", h.rejected_total ? "tc-stat--warn" : null,
        fmtInt(h.rejected_total) + " rejected" + (top.length ? " (" + top.join(", ") + ")" : ""),
        { "data-stat": "rejected", "data-value": h.rejected_total }));
    }
    if (isNum(h.write_errors)) {
      var text = fmtInt(h.write_errors) + " write errors";
      if (has(h.last_error)) text += " (last" + (isNum(h.last_error_at) ? " at " + fmtClock(h.last_error_at) : "") + ": " + str(h.last_error).slice(0, 200) + ")";
      out.push(el("span", h.write_errors ? "tc-stat--warn" : null, text,
        { "data-stat": "write-errors", "data-value": h.write_errors, title: str(h.last_error) }));
    }
    if (isNum(h.pending_rows)) {
      out.push(el("span", h.pending_rows ? "tc-stat--warn" : null,
        fmtInt(h.pending_rows) + " rows waiting to be written" + (h.retrying ? " (retrying)" : ""),
        { "data-stat": "pending", "data-value": h.pending_rows }));
    }
    return out;
  }
