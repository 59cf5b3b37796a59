// The report's only script: page switching for paged charts, the detail panel that
// shows a whole message (#msg-<id>), LLM call (#call-<seq>) or tool call (#tool-<n>) when a
// mark is clicked, the tooltip of a tool call's mark (#tip), and
// an artifact (#artifact-<path>, the verdict's evidence) opened when its link is followed. Data
// sits in <script type="application/json"> blocks (or gzip + base64 ones in big runs,
// inflated by the browser's DecompressionStream), read on first use, and is put into the
// page with textContent only: it is model output.
(function () {
  "use strict";
  var cache = {};
  function text(node) {
    if (node.dataset.encoding !== "gzip-base64") return Promise.resolve(node.textContent);
    var bytes = Uint8Array.from(atob(node.textContent.trim()), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }
  function table(id, key) {
    if (!cache[id]) {
      var node = document.getElementById(id);
      cache[id] = (node ? text(node) : Promise.resolve("[]")).then(function (raw) {
        var map = {};
        JSON.parse(raw).forEach(function (row) { map[row[key]] = row; });
        return map;
      });
    }
    return cache[id];
  }
  function el(tag, content, cls) {
    var node = document.createElement(tag);
    if (content !== undefined) node.textContent = content;
    if (cls) node.className = cls;
    return node;
  }
  function pairs(body, rows) {
    var dl = el("dl");
    rows.forEach(function (kv) {
      dl.appendChild(el("dt", kv[0]));
      dl.appendChild(typeof kv[1] === "string" ? el("dd", kv[1]) : kv[1]);
    });
    body.appendChild(dl);
  }
  function showMessage(body, m) {
    body.appendChild(el("h3", "message " + m.id + " (" + m.cause_by + ")"));
    var parents = el("dd");
    m.parents.forEach(function (p, i) {
      if (i) parents.appendChild(document.createTextNode(", "));
      var a = el("a", p); a.href = "#msg-" + p; parents.appendChild(a);
    });
    pairs(body, [["round", String(m.round)], ["from", m.from],
      ["to", m.undelivered === null ? (m.to.join(", ") || "-") : "nobody: " + m.undelivered],
      ["published", m.t.toFixed(3) + " s after the start"], ["parents", parents]]);
    body.appendChild(el("h4", "content"));
    body.appendChild(el("pre", m.content || "(empty)"));
    if (m.cut) body.appendChild(el("p", m.cut + " more characters cut to keep this big run's page small; " +
      "`sopbus show RUN --json` prints every message whole", "note"));
    body.appendChild(el("h4", "payload"));
    body.appendChild(el("pre", m.payload === null ? "(none)" : JSON.stringify(m.payload, null, 2)));
  }
  function showCall(body, c) {
    body.appendChild(el("h3", "LLM call " + c.seq + " (" + c.role + ", " + c.action + ")" + (c.mark ? ": " + c.mark : "")));
    pairs(body, Object.keys(c).map(function (k) { return [k, String(c[k])]; }));
  }
  function cut(s, n) { return s.length > n ? s.slice(0, n) + "\u2026" : s; }
  function toolFacts(t) {
    return [["tool", t.name], ["arguments", cut(t.arguments || "{}", 160)],
      ["duration", t.duration_ms + " ms"],
      ["result", t.result_chars + " characters" + (t.cut ? " (cut)" : "")],
      ["error", t.error === null ? "none" : cut(t.error, 160)],
      ["cost", t.cost_usd === null ? "free" : "$" + t.cost_usd + (t.replayed ? " (replayed)" : "")]];
  }
  function showTool(body, t) {
    body.appendChild(el("h3", "tool call " + t.n + " (" + t.role + ", " + t.action + ")" + (t.error === null ? "" : ": error")));
    pairs(body, [["round", String(t.round)], ["call id", t.call]].concat(toolFacts(t).slice(0, 1),
      [["arguments", el("pre", t.arguments || "{}")]], toolFacts(t).slice(2),
      [["ended", t.end_s.toFixed(3) + " s after the start"]]));
  }
  function toolOf(node) {
    var a = node && node.closest ? node.closest("a") : null;
    if (!a) return null;
    var href = a.getAttribute("href") || a.getAttribute("xlink:href") || "";
    return href.indexOf("#tool-") === 0 ? href.slice(6) : null;
  }
  function tooltip() {
    var tip = document.getElementById("tip");
    document.addEventListener("mouseover", function (e) {
      var n = toolOf(e.target);
      if (n === null) { tip.hidden = true; return; }
      table("tools-data", "n").then(function (t) {
        var row = t[n];
        if (!row) return;
        tip.replaceChildren(el("strong", "tool call " + n));
        toolFacts(row).forEach(function (kv) { tip.appendChild(el("div", kv[0] + ": " + kv[1])); });
        tip.style.left = Math.min(e.clientX + 12, innerWidth - 340) + "px";
        tip.style.top = (e.clientY + 14) + "px";
        tip.hidden = false;
        tip.dataset.shown = n;
      });
    });
  }
  function show() {
    var panel = document.getElementById("detail"), body = document.getElementById("detail-body");
    var hash = decodeURIComponent(location.hash.slice(1));
    var call = hash.indexOf("call-") === 0, tool = hash.indexOf("tool-") === 0;
    if (hash.indexOf("artifact-") === 0) { openArtifact(hash); return; }
    if (!call && !tool && hash.indexOf("msg-") !== 0) { panel.hidden = true; return; }
    var found = call ? table("calls-data", "seq").then(function (t) { return t[hash.slice(5)]; })
              : tool ? table("tools-data", "n").then(function (t) { return t[hash.slice(5)]; })
                     : table("messages-data", "id").then(function (t) { return t[hash.slice(4)]; });
    found.then(function (row) {
      if (!row) { panel.hidden = true; return; }
      body.replaceChildren();
      if (call) showCall(body, row); else if (tool) showTool(body, row); else showMessage(body, row);
      panel.hidden = false;
      panel.dataset.shown = hash;
    }).catch(function (e) { console.error("report: cannot show " + hash + ": " + e); });
  }
  function openArtifact(id) {
    var entry = document.getElementById(id);
    if (!entry) return;
    entry.open = true;  // a link to a closed <details> would land on its summary alone
    entry.scrollIntoView();
  }
  function pager(root) {
    var select = root.querySelector("select"), view = root.querySelector(".page-view"), first = null;
    var packed = root.querySelectorAll("script[data-page]");
    if (!select) return;
    select.addEventListener("change", function () {
      if (!first) { first = document.createDocumentFragment(); first.append.apply(first, view.childNodes); }
      var i = Number(select.value);
      if (i === 0) { view.replaceChildren(first.cloneNode(true)); return; }
      text(packed[i - 1]).then(function (svg) {
        var doc = new DOMParser().parseFromString(svg, "image/svg+xml");
        view.replaceChildren(document.importNode(doc.documentElement, true));
        root.dataset.page = String(i);
      }).catch(function (e) { console.error("report: cannot draw page " + i + ": " + e); });
    });
  }
  document.querySelectorAll("[data-pager]").forEach(pager);
  tooltip();
  document.getElementById("detail-close").addEventListener("click", function () {
    history.replaceState(null, "", location.pathname + location.search);
    document.getElementById("detail").hidden = true;
  });
  window.addEventListener("hashchange", show);
  show();
})();
