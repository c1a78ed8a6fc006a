  /* ---------------------------------------------------------------- header */

  function fact(id, label, value, hint) {
    var box = el("div", "tc-fact", null, { id: id });
    add(box, el("dt", null, label), el("dd", null, value, hint ? { title: hint } : null));
    return box;
  }

  function renderHeader() {
    var run = S.payload.run || {};
    var head = clear(S.dom.header);
    var status = str(run.status) || "unknown";
    head.setAttribute("data-status", status);
    document.body.setAttribute("data-status", status);

    var top = el("div", "tc-head-top");
    var pill = el("span", "tc-pill tc-pill--" + status.replace(/[^a-z_-]/gi, ""), null, { "data-status": status });
    add(pill, el("span", "tc-dot", null, { "aria-hidden": "true" }), el("span", "tc-pill-text", status.replace(/_/g, " ")));
    var title = el("h1", "tc-title", run.title || "training run", { title: str(run.title) });
    var phaseWrap = el("span", "tc-phase-wrap");
    add(phaseWrap, el("span", "tc-phase-label", "phase"),
      el("span", "tc-phase", run.phase || "\u2013", { id: "tc-phase" }));
    var mode = el("span", "tc-mode", S.payload.final ? "final" : "live", {
      id: "tc-mode", title: "payload generated " + fmtDateTime(S.payload.generated_at)
    });
    add(top, pill, title, phaseWrap, mode);
    head.appendChild(top);

    // Step and progress.
    var progress = el("div", "tc-progress-row");
    var stepText = (has(run.step) ? str(run.step) : "\u2013") + (has(run.max_steps) ? " / " + str(run.max_steps) : "");
    var stepBox = el("div", "tc-step-box");
    var counted = run.unit === "item" ? "items" : "step";
    add(stepBox, el("span", "tc-step-label", counted),
      el("span", "tc-step", stepText, { id: "tc-step", "data-step": has(run.step) ? run.step : "" }));
    progress.appendChild(stepBox);
    if (isNum(run.step) && isNum(run.max_steps) && run.max_steps > 0) {
      var frac = Math.max(0, Math.min(1, run.step / run.max_steps));
      var bar = el("div", "tc-progress", null, {
        id: "tc-progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": run.max_steps,
        "aria-valuenow": run.step
      });
      var fill = el("div", "tc-progress-fill");
      fill.style.width = (frac * 100).toFixed(2) + "%";
      bar.appendChild(fill);
      add(progress, bar, el("span", "tc-pct", (frac * 100).toFixed(frac < 0.1 ? 1 : 0) + "%"));
    } else {
      progress.appendChild(el("div", "tc-progress tc-progress--none", null, { id: "tc-progress" }));
    }
    head.appendChild(progress);

    // Facts.
    var facts = el("dl", "tc-facts");
    var epoch = has(run.epoch) ? fmtNum(run.epoch, 3) : "\u2013";
    if (has(run.num_epochs)) epoch += " / " + fmtNum(run.num_epochs);
    if (!run.kind || run.kind === "training") facts.appendChild(fact("tc-epoch", "epoch", epoch));
    add(facts,
      fact("tc-elapsed", "elapsed", fmtDur(run.elapsed_s), run.started_at ? "started " + fmtDateTime(run.started_at) : null),
      fact("tc-eta", "ETA", isNum(run.eta_s) ? fmtDur(run.eta_s) : "\u2013",
        isNum(run.eta_s) ? "finishes around " + fmtClock(S.payload.generated_at + run.eta_s) : null),
      fact("tc-batch", "batch size", has(run.batch_size) ? fmtNum(run.batch_size) : "\u2013"),
      fact("tc-world", "world size", has(run.world_size) ? fmtNum(run.world_size) : "\u2013"),
      fact("tc-restarts", "restarts", fmtNum(run.restarts || 0)),
      fact("tc-attempt", "attempt", fmtNum(run.attempt || 0)),
      fact("tc-updated", "last update", "\u2013", run.updated_at ? fmtDateTime(run.updated_at) : null));
    if (run.restarts) facts.querySelector("#tc-restarts").classList.add("tc-fact--warn");
    if (run.cost && typeof run.cost === "object") {
      var c = run.cost;
      var costText = fmtMoney(c.so_far) + (isNum(c.at_eta) && status === "running" ? " \u2192 " + fmtMoney(c.at_eta) : "");
      facts.appendChild(fact("tc-cost", "cost", costText, isNum(c.hourly) ? fmtMoney(c.hourly) + " per hour" + (c.nodes > 1 ? " (" + fmtInt(c.nodes) + " nodes)" : "") +
        (isNum(c.at_eta) ? "; " + fmtMoney(c.at_eta) + " at ETA" : "") : null));
    }
    head.appendChild(facts);
    head.appendChild(baselineBar());
    tick();
  }

  /* Ticking clocks on a live page: elapsed time and the age of the last update. */
  function tick() {
    var run = (S.payload && S.payload.run) || {};
    var since = now() - S.receivedAt;
    var running = run.status === "running" && !S.payload.final;
    var elapsed = document.querySelector("#tc-elapsed dd");
    if (elapsed && isNum(run.elapsed_s)) elapsed.textContent = fmtDur(run.elapsed_s + (running ? since : 0));
    var updated = document.querySelector("#tc-updated dd");
    if (!updated) return;
    var box = updated.parentNode;
    if (isNum(run.heartbeat_age_s) && running) {
      var age = run.heartbeat_age_s + since;
      updated.textContent = fmtDur(age) + " ago";
      box.classList.toggle("tc-fact--warn", age > 60);
      box.setAttribute("data-age", age.toFixed(1));
    } else {
      updated.textContent = isNum(run.updated_at) ? fmtClock(run.updated_at) : "\u2013";
      box.classList.remove("tc-fact--warn");
    }
  }
