  /* ---------------------------------------------------------------- sweep (foreach branches) */
  /* The branches of this task's foreach (or the runs compared): folded constants, a sortable table
     with the varying hyperparameters first, the main metric of every branch overlaid, and one
     scatter per numeric varying hyperparameter against the best value. The best branch is marked. */

  var SVG_NS = "http://www.w3.org/2000/svg";
  var SWEEP_SORT = { key: null, dir: 1 };

  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, String(attrs[k]));
    return node;
  }

  function sweepScale(lo, hi, a, b) {
    var span = hi - lo || 1;
    return function (v) { return a + (v - lo) / span * (b - a); };
  }

  function sweepPlot(id, title, xLabel, yLabel) {
    var box = el("figure", "tc-sweep-plot", null, { id: id });
    add(box, el("figcaption", null, title));
    var svg = svgEl("svg", { viewBox: "0 0 320 180", width: "100%", role: "img", "aria-label": title });
    box.appendChild(svg);
    box.dataset.x = xLabel;
    box.dataset.y = yLabel;
    return { box: box, svg: svg };
  }

  function sweepAxes(svg, xs, ys) {
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    svg.appendChild(svgEl("line", { x1: 36, y1: 160, x2: 312, y2: 160, stroke: "currentColor", "stroke-opacity": 0.3 }));
    svg.appendChild(svgEl("line", { x1: 36, y1: 8, x2: 36, y2: 160, stroke: "currentColor", "stroke-opacity": 0.3 }));
    [[x0, 36, 175, "start"], [x1, 312, 175, "end"]].forEach(function (t) {
      var label = svgEl("text", { x: t[1], y: t[2], "font-size": 10, fill: "currentColor", "text-anchor": t[3] });
      label.textContent = fmtNum(t[0], 3);
      svg.appendChild(label);
    });
    [[y1, 14], [y0, 160]].forEach(function (t) {
      var label = svgEl("text", { x: 33, y: t[1], "font-size": 10, fill: "currentColor", "text-anchor": "end" });
      label.textContent = fmtNum(t[0], 3);
      svg.appendChild(label);
    });
    return { x: sweepScale(x0, x1, 40, 310), y: sweepScale(y0, y1, 156, 10) };
  }

  function sweepCurves(sw) {
    var curves = Array.isArray(sw.curves) ? sw.curves : [];
    var xs = [], ys = [];
    curves.forEach(function (c) {
      (c.points || []).forEach(function (p) { if (isNum(p[0]) && isNum(p[1])) { xs.push(p[0]); ys.push(p[1]); } });
    });
    if (!xs.length) return null;
    var plot = sweepPlot("tc-sweep-curves", str(sw.metric) + " of every branch", "step", str(sw.metric));
    var sc = sweepAxes(plot.svg, xs, ys);
    var ordered = curves.filter(function (c) { return !c.best && !c.self; })
      .concat(curves.filter(function (c) { return c.self && !c.best; }), curves.filter(function (c) { return c.best; }));
    ordered.forEach(function (c) {
      var d = (c.points || []).filter(function (p) { return isNum(p[0]) && isNum(p[1]); })
        .map(function (p, i) { return (i ? "L" : "M") + sc.x(p[0]).toFixed(1) + "," + sc.y(p[1]).toFixed(1); }).join("");
      if (!d) return;
      var path = svgEl("path", {
        d: d, fill: "none", "stroke-width": c.best ? 2.5 : c.self ? 2 : 1,
        stroke: c.best ? "#e8590c" : c.self ? "#1c7ed6" : "currentColor",
        "stroke-opacity": c.best || c.self ? 1 : 0.35, "stroke-dasharray": c.self && !c.best ? "4 2" : "0",
        "data-branch": str(c.id), "class": c.best ? "tc-sweep-best" : ""
      });
      var t = svgEl("title", {});
      t.textContent = "branch " + str(c.id) + (c.best ? " (best)" : "") + (c.self ? " (this task)" : "");
      path.appendChild(t);
      plot.svg.appendChild(path);
    });
    return plot.box;
  }

  function sweepScatters(sw, rows) {
    var out = [];
    (sw.varying || []).forEach(function (name) {
      var pts = rows.filter(function (r) { return isNum(r.hp[name]) && isNum(r.best); });
      if (pts.length < 2 || out.length >= 4) return;
      var plot = sweepPlot("tc-sweep-scatter-" + out.length, str(name) + " \u2192 best " + str(sw.metric), name, str(sw.metric));
      var sc = sweepAxes(plot.svg, pts.map(function (r) { return r.hp[name]; }), pts.map(function (r) { return r.best; }));
      pts.forEach(function (r) {
        var dot = svgEl("circle", {
          cx: sc.x(r.hp[name]).toFixed(1), cy: sc.y(r.best).toFixed(1), r: r.is_best ? 5 : 3.5,
          fill: r.is_best ? "#e8590c" : r.self ? "#1c7ed6" : "currentColor", "fill-opacity": r.is_best || r.self ? 1 : 0.55,
          "data-branch": str(r.id)
        });
        var t = svgEl("title", {});
        t.textContent = "branch " + str(r.id) + ": " + str(name) + " = " + str(r.hp[name]) + ", best " + fmtNum(r.best, 4);
        dot.appendChild(t);
        plot.svg.appendChild(dot);
      });
      out.push(plot.box);
    });
    return out;
  }

  function sweepValue(r, key) {
    if (key.indexOf("hp:") === 0) return r.hp[key.slice(3)];
    return r[key];
  }

  function sweepSorted(rows) {
    if (!SWEEP_SORT.key) return rows;
    var key = SWEEP_SORT.key, dir = SWEEP_SORT.dir;
    return rows.slice().sort(function (a, b) {
      var x = sweepValue(a, key), y = sweepValue(b, key);
      if (!has(x) && !has(y)) return 0;
      if (!has(x)) return 1;
      if (!has(y)) return -1;
      if (isNum(x) && isNum(y)) return (x - y) * dir;
      return String(x).localeCompare(String(y)) * dir;
    });
  }

  function sweepTable(sw, rows) {
    var cols = [["id", "branch"]];
    (sw.varying || []).forEach(function (name) { cols.push(["hp:" + name, name]); });
    cols = cols.concat([["status", "status"], ["step", "step"], ["latest", "latest " + str(sw.metric)],
      ["best", "best " + str(sw.metric)], ["duration_s", "duration"], ["goodput", "goodput"], ["mfu", "MFU"]]);
    var table = el("table", "tc-table tc-sweep-table", null, { id: "tc-sweep-table" });
    var hr = el("tr");
    cols.forEach(function (c) {
      var on = SWEEP_SORT.key === c[0];
      var th = el("th", "tc-sortable", c[1] + (on ? (SWEEP_SORT.dir > 0 ? " \u25b2" : " \u25bc") : ""), {
        scope: "col", "data-key": c[0], "aria-sort": on ? (SWEEP_SORT.dir > 0 ? "ascending" : "descending") : "none"
      });
      th.style.cursor = "pointer";
      th.addEventListener("click", function () {
        SWEEP_SORT.dir = SWEEP_SORT.key === c[0] ? -SWEEP_SORT.dir : 1;
        SWEEP_SORT.key = c[0];
        renderSweep();
      });
      hr.appendChild(th);
    });
    add(table, add(el("thead"), hr));
    var body = el("tbody");
    sweepSorted(rows).forEach(function (r) {
      var tr = el("tr", (r.is_best ? "tc-sweep-best " : "") + (r.self ? "tc-sweep-self" : ""), null, {
        "data-branch": str(r.id), "data-status": str(r.status)
      });
      cols.forEach(function (c) {
        var v = sweepValue(r, c[0]), text;
        if (c[0] === "id") text = str(r.id) + (r.is_best ? " \u2605 best" : "") + (r.self ? " (this task)" : "");
        else if (c[0] === "duration_s") text = isNum(v) ? fmtDur(v) : "\u2013";
        else if (c[0] === "goodput" || c[0] === "mfu") text = isNum(v) ? (v * 100).toFixed(1) + "%" : "\u2013";
        else if (isNum(v)) text = fmtNum(v, 5);
        else text = has(v) ? str(v) : "\u2013";
        var td = el("td", null, text);
        if (c[0] === "status" && r.failure) td.title = str(r.failure);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    return add(el("div", "tc-table-wrap"), table);
  }

  function renderSweep() {
    var sw = S.payload.sweep;
    var box = clear(S.dom.sweep);
    box.hidden = !sw || typeof sw !== "object";
    document.body.classList.toggle("tc-standalone-sweep", !box.hidden && !!sw.standalone);
    if (box.hidden) return;
    var rows = Array.isArray(sw.rows) ? sw.rows : [];
    var h = el("h2", "tc-h2");
    add(h, el("span", null, "Sweep \u00b7 " + str(sw.title)), el("span", "tc-count",
      str(sw.total) + " branch" + (sw.total === 1 ? "" : "es") + (has(sw.metric) ? " \u00b7 " + str(sw.metric) +
      (sw.higher_is_better ? " (higher is better)" : " (lower is better)") : ""), { id: "tc-sweep-count" }));
    box.appendChild(h);
    var constant = sw.constant || {};
    var names = Object.keys(constant);
    if (names.length) {
      var fold = el("details", "tc-sweep-constant", null, { id: "tc-sweep-constant" });
      add(fold, el("summary", null, names.length + " hyperparameter" + (names.length === 1 ? "" : "s") + " the same in every branch"));
      add(fold, el("p", "tc-note", names.map(function (k) { return k + " = " + str(constant[k]); }).join(" \u00b7 ")));
      box.appendChild(fold);
    }
    var notes = (sw.notes || []).slice();
    if (sw.hidden_rows) notes.push(sw.hidden_rows + " more branches not listed here (the best are shown; traincard render on the step lists all)");
    if (sw.hidden_curves) notes.push(sw.hidden_curves + " more curves not drawn");
    notes.forEach(function (n) { box.appendChild(el("p", "tc-note tc-sweep-note", n)); });
    var plots = el("div", "tc-sweep-plots");
    add(plots, sweepCurves(sw));
    sweepScatters(sw, rows).forEach(function (p) { plots.appendChild(p); });
    if (plots.firstChild) box.appendChild(plots);
    box.appendChild(sweepTable(sw, rows));
  }
