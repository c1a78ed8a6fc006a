  /* ---------------------------------------------------------------- banners */

  function renderBanners() {
    var box = clear(S.dom.banners);
    var list = (S.payload.banners || []).filter(function (b) { return b && typeof b === "object"; });
    list = list.map(function (b, i) { return { b: b, i: i, info: bannerInfo(str(b.kind)) }; }).sort(function (p, q) {
      var a = p.info ? p.info.rank : 99, b = q.info ? q.info.rank : 99;
      return a - b || p.i - q.i;
    });
    list.forEach(function (p) {
      // An unknown kind is shown like the least severe known one.
      var fallback = N.banners.length ? N.banners[N.banners.length - 1] : {};
      var info = p.info ? p.info.b : fallback, kind = str(p.b.kind) || str(fallback.kind);
      var safe = str(info.kind).replace(/[^a-z0-9_-]/gi, "");
      var row = el("div", "tc-banner tc-banner--" + safe, null,
        { "data-kind": kind, role: info.alert ? "alert" : "status" });
      add(row, el("span", "tc-banner-icon", str(info.icon) || "i", { "aria-hidden": "true" }),
        el("span", "tc-banner-kind", str(info.title) || kind),
        el("span", "tc-banner-text", p.b.text));
      box.appendChild(row);
    });
    box.hidden = !list.length;
  }
