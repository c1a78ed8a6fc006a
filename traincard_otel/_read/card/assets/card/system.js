  /* ---------------------------------------------------------------- system */

  function renderSystemInfo() {
    var sys = S.payload.system && typeof S.payload.system === "object" ? S.payload.system : {};
    var notes = clear(S.dom.sysNotes), tiles = clear(S.dom.sysTiles);
    (Array.isArray(sys.notes) ? sys.notes : []).forEach(function (n) {
      add(notes, el("p", "tc-note tc-sys-note", n));
    });
    (Array.isArray(sys.latest) ? sys.latest : []).forEach(function (t) {
      if (!t || typeof t !== "object") return;
      var tile = el("div", "tc-tile", null, { title: str(t.name), "data-name": str(t.name) });
      // "system.memory.usage{system.memory.state=used}": the name, then its attributes in small print.
      var label = str(t.label || t.name), m = /^([^{]+)\{(.*)\}$/.exec(label);
      add(tile, el("div", "tc-tile-label", m ? m[1] : label),
        m ? el("div", "tc-tile-tags", m[2]) : null,
        el("div", "tc-tile-value", fmtReading(t.name, t.value, t.unit)));
      tiles.appendChild(tile);
    });
    notes.hidden = !notes.childNodes.length;
    tiles.hidden = !tiles.childNodes.length;
    renderSystemEmpty();
  }

  function emptyText(section, fallback) {
    var e = S.payload.empty && typeof S.payload.empty === "object" ? S.payload.empty : {};
    return has(e[section]) ? str(e[section]) : fallback;
  }

  function renderSystemEmpty() {
    var any = !S.dom.sysTiles.hidden || !S.dom.sysGrid.hidden;
    S.dom.sysEmpty.hidden = any || !S.dom.sysNotes.hidden;
    S.dom.sysEmpty.textContent = emptyText("system", "No system metrics recorded.");
    S.dom.system.classList.toggle("tc-section--empty", !any);
  }
