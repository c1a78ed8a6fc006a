  /* ---------------------------------------------------------------- page */

  function section(id, title, extraCls) {
    var s = el("section", "tc-section" + (extraCls ? " " + extraCls : ""), null, { id: id });
    var h = el("h2", "tc-h2");
    add(h, el("span", null, title), el("span", "tc-count"));
    s.appendChild(h);
    return s;
  }

  function buildSkeleton(root) {
    var d = S.dom;
    d.header = el("header", "tc-header", null, { id: "tc-status" });
    d.banners = el("div", "tc-banners", null, { id: "tc-banners" });
    d.failure = el("section", "tc-failure", null, { id: "tc-failure" });
    d.gang = el("section", "tc-section tc-gang", null, { id: "tc-gang" });
    d.sweep = el("section", "tc-section tc-sweep", null, { id: "tc-sweep" });

    d.rlGrids = Object.create(null);  // the RL layout's sections (Rewards, Policy, Completions)
    d.rlSections = N.rlGroups.map(function (g) {
      var sec = section("tc-rl-" + str(g.group), str(g.title), "tc-rl");
      var grid = el("div", "tc-grid");
      sec.appendChild(grid);
      sec.hidden = true;
      d.rlGrids[str(g.group)] = { section: sec, grid: grid };
      return sec;
    });

    d.charts = section("tc-charts", "Training metrics");
    d.trainGrid = el("div", "tc-grid");
    d.trainEmpty = el("p", "tc-note tc-empty", "No training metrics reported yet.");
    d.summary = el("div", "tc-summary", null, { id: "tc-summary" });
    add(d.charts, d.trainGrid, d.summary, d.trainEmpty);

    d.system = section("tc-system", "System");
    d.sysNotes = el("div", "tc-sys-notes");
    d.sysTiles = el("div", "tc-tiles");
    d.sysGrid = el("div", "tc-grid");
    d.sysEmpty = el("p", "tc-note tc-empty", "No system metrics recorded.");
    add(d.system, d.sysNotes, d.sysTiles, d.sysGrid, d.sysEmpty);

    d.checkpoints = section("tc-checkpoints", "Checkpoints");
    d.ckptBody = el("div", "tc-ckpt-body");
    d.checkpoints.appendChild(d.ckptBody);

    d.logs = section("tc-logs", "Logs");
    d.logTools = el("div", "tc-log-tools");
    var search = el("input", "tc-input", null, {
      id: "tc-log-search", type: "search", placeholder: "Filter log lines\u2026", "aria-label": "filter log lines",
      autocomplete: "off", spellcheck: "false"
    });
    var level = el("select", "tc-input", null, { id: "tc-log-level", "aria-label": "minimum log level" });
    level.appendChild(el("option", null, "All levels", { value: "all" }));
    N.filterLevels.forEach(function (name) { level.appendChild(el("option", null, str(name) + "+", { value: str(name) })); });
    d.logRank = el("select", "tc-input", null, { id: "tc-log-rank", "aria-label": "rank" });
    var followBox = el("input", null, null, { id: "tc-log-follow", type: "checkbox" });
    followBox.checked = S.log.follow;
    var follow = el("label", "tc-log-follow", null, { title: "keep the newest line in view as lines arrive" });
    add(follow, followBox, " follow");
    d.logCount = el("span", "tc-log-count", null, { id: "tc-log-count" });
    search.addEventListener("input", function () { S.log.query = search.value; applyLogFilter(); });
    level.addEventListener("change", function () { S.log.level = level.value; applyLogFilter(); });
    d.logRank.addEventListener("change", function () { S.log.rank = d.logRank.value; applyLogFilter(); });
    followBox.addEventListener("change", function () {
      S.log.follow = followBox.checked;
      if (S.log.follow) d.logList.scrollTop = d.logList.scrollHeight;
    });
    add(d.logTools, search, level, d.logRank, follow, d.logCount);
    d.logList = el("div", "tc-log-list", null, { role: "log", "aria-live": "off" });
    d.logList.addEventListener("scroll", function () {  // scrolling up to read stops following
      var bottom = d.logList.scrollHeight - d.logList.scrollTop - d.logList.clientHeight < 24;
      if (bottom !== S.log.follow) { S.log.follow = bottom; followBox.checked = bottom; }
    });
    d.logTrimmed = el("p", "tc-note tc-log-trimmed", null, { id: "tc-log-trimmed" });
    d.logEmpty = el("p", "tc-note", "No log lines yet.");
    d.logNone = el("p", "tc-note", "No log lines match the filter.");
    d.logNone.hidden = true;
    add(d.logs, d.logTools, d.logTrimmed, d.logList, d.logNone, d.logEmpty);

    d.stats = el("footer", "tc-stats", null, { id: "tc-stats" });
    add(root, d.header, d.banners, d.sweep, buildInsights(), d.failure, d.gang, buildAnatomy(), buildProfiles());
    d.rlSections.forEach(function (sec) { root.appendChild(sec); });
    add(root, buildAgents(), buildCompletions(), d.charts, d.system, d.checkpoints, d.logs, d.stats);
  }

  function renderAll() {
    renderHeader();
    renderBanners();
    renderInsights();
    renderFailure();
    renderGang();
    renderAnatomy();
    renderProfiles();
    renderSweep();
    renderSystemInfo();
    applyBaselineSeries();
    renderChartSections();
    renderSummary();
    renderCheckpoints();
    renderCompletions();
    renderAgents();
    renderLogs();
    renderStats();
  }

  /* Live update: append newer chart points, create new charts and series, replace the rest. */
  function update(u) {
    if (!u || typeof u !== "object") return false;
    try {
      var p = S.payload;
      S.receivedAt = now();
      if ("names" in u) { p.names = u.names; readNames(p); }
      N.sections.forEach(function (k) { if (k in u) p[k] = u[k]; });
      var markersChanged = false;
      if (Array.isArray(u.markers) && JSON.stringify(u.markers) !== JSON.stringify(p.markers || [])) {
        p.markers = u.markers; markersChanged = true;
      }
      S.updates++;
      mergeCharts(u.charts);
      updateBaseline(u);
      if (markersChanged) S.charts.forEach(function (ch) { if (ch.plot && !ch.spec.byTime) ch.plot.redraw(false, false); });
      renderHeader();
      renderBanners();
      if ("insights" in u) renderInsights();
      renderFailure();
      renderGang();
      if ("anatomy" in u) renderAnatomy();
      if ("profiles" in u) renderProfiles();
      if ("sweep" in u) renderSweep();
      if ("system" in u) renderSystemInfo();
      if ("checkpoints" in u) renderCheckpoints();
      if ("completions" in u) renderCompletions();
      if ("agents" in u) renderAgents();
      if ("summary" in u) renderSummary();
      if ("logs" in u) renderLogs();
      renderStats();
      document.body.removeAttribute("data-error");
    } catch (err) {
      document.body.setAttribute("data-error", String(err && err.stack || err));
      if (window.console) console.error("traincard update failed", err);
    }
    document.body.dataset.updates = String(S.updates);
    return true;
  }

  function showError(root, err) {
    var box = el("div", "tc-banner tc-banner--failed", null, { "data-kind": "render-error" });
    add(box, el("span", "tc-banner-kind", "Card error"), el("span", "tc-banner-text", String(err && err.message || err)));
    root.insertBefore(box, root.firstChild);
    document.body.setAttribute("data-error", String(err && err.stack || err));
  }

  function init() {
    var root = document.getElementById("tc-root");
    if (!root) { root = el("div", null, null, { id: "tc-root" }); document.body.appendChild(root); }
    document.body.dataset.updates = "0";
    var payload = {};
    try {
      var node = document.getElementById("tc-payload");
      payload = JSON.parse(node ? node.textContent : "{}") || {};
    } catch (err) { payload = {}; showError(root, err); }
    S.payload = payload;
    readNames(payload);
    S.log.stick = true;
    try {
      buildSkeleton(root);
      (Array.isArray(payload.charts) ? payload.charts : []).forEach(function (c) {
        if (c && has(c.id) && !S.charts.has(String(c.id))) createChart(c);
      });
      renderAll();
      document.body.setAttribute("data-ready", "1");
    } catch (err) { showError(root, err); }

    if (window.ResizeObserver) new ResizeObserver(queueResize).observe(root);
    else window.addEventListener("resize", queueResize);
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      var onScheme = function () { rebuildAllPlots(); };
      if (mq.addEventListener) mq.addEventListener("change", onScheme); else if (mq.addListener) mq.addListener(onScheme);
    }
    if (!payload.final) setInterval(tick, 1000);
  }

  window.TC = {
    update: update,
    payload: function () { return S.payload; },
    charts: function () { return S.charts; }
  };
  init();
