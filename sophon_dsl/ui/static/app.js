// sophon-dsl dashboard. Values reach the page only through textContent (never innerHTML),
// and the only requests go to this server (the Content-Security-Policy allows no other).
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var run = document.getElementById("run");

  // timeline bars: positions come as data attributes (the CSP allows no inline styles)
  function place(root) {
    root.querySelectorAll(".bar").forEach(function (b) {
      b.style.left = b.dataset.left + "%";
      b.style.width = b.dataset.width + "%";
    });
  }
  place(document);
  if (!run) { return; }
  var runId = run.dataset.run;
  var base = "/api/runs/" + encodeURIComponent(runId);

  function setStatus(el, st, prefixClass) {
    el.className = el.className.split(" ").filter(function (c) { return c.indexOf("st-") !== 0; }).join(" ")
      + " st-" + st.replace(/ /g, "-");
    if (!prefixClass) { el.textContent = st; }
  }

  // the elements that show each call's status, found once: a snapshot of a 10,000-call run
  // updates them by id without searching the page per call
  var shows = {};
  function index(attr, kind) {
    document.querySelectorAll("[" + attr + "]").forEach(function (el) {
      var id = el.getAttribute(attr);
      (shows[id] = shows[id] || []).push([kind, el]);
    });
  }
  index("data-status-of", "cell");
  index("data-node", "node");
  index("data-map-of", "map");
  index("data-attempts-of", "attempts");
  var ENDED = {succeeded: 1, failed: 1, skipped: 1, cancelled: 1};
  var seenTries = {};  // call id -> attempts seen so far of a call being retried

  // returns whether a call shown on the page has ended (or an attempt of it) since it was drawn
  function apply(snap) {
    var ended = false;
    var rs = document.getElementById("run-status");
    if (rs) { setStatus(rs, snap.status); }
    run.dataset.status = snap.status;
    var calls = snap.calls || {};
    Object.keys(calls).forEach(function (id) {
      var st = calls[id];
      (shows[id] || []).forEach(function (pair) {
        var el = pair[1];
        if (pair[0] === "cell") {
          if (el.textContent !== st && ENDED[st]) { ended = true; }
          setStatus(el, st);
        }
        else if (pair[0] === "node") {
          el.setAttribute("class", "node st-" + st.replace(/ /g, "-"));
          var t = el.querySelector("[data-node-status]");
          if (t) { t.textContent = st; }
        }
      });
    });
    // a map's items: their counts per status, in the map's node
    var maps = snap.maps || {};
    Object.keys(maps).forEach(function (id) {
      var counts = maps[id];
      var text = Object.keys(counts).sort().map(function (k) { return counts[k] + " " + k; }).join(", ");
      (shows[id] || []).forEach(function (pair) {
        if (pair[0] === "map") { pair[1].textContent = "items: " + text; }
      });
    });
    // calls being retried: their attempts so far (each failed one gets its bar as it ends)
    var tries = snap.attempts || {};
    Object.keys(tries).forEach(function (id) {
      if (tries[id] > (seenTries[id] || 0)) {
        seenTries[id] = tries[id];
        ended = true;
        (shows[id] || []).forEach(function (pair) {
          if (pair[0] === "attempts") { pair[1].textContent = String(tries[id]); }
        });
      }
    });
    var w = document.getElementById("waiting");
    if (w && snap.status !== "waiting") { w.hidden = true; }
    run.dataset.live = String(Number(run.dataset.live || 0) + 1);  // frames applied (tests, benchmark)
    return ended;
  }

  // the timeline and the attempt counts, drawn again once calls end (after a pause four times
  // as long as the last redraw's request took: a large run's timeline is not fetched nonstop)
  var redraw = null, pause = 300;
  function drawTimeline(tl) {
    var box = document.getElementById("timeline"), note = document.getElementById("timeline-note");
    if (!box || !note) { return; }
    note.textContent = tl.note;
    box.textContent = "";
    var total = tl.total || 1e-9;
    function bar(track, start, end, cls, title) {
      var el = document.createElement("span");
      el.className = cls;
      el.dataset.left = (100 * start / total).toFixed(3);
      el.dataset.width = Math.max(100 * (end - start) / total, 0.3).toFixed(3);
      el.title = title;
      track.appendChild(el);
    }
    (tl.bars || []).forEach(function (b) {
      var row = document.createElement("div"); row.className = "bar-row"; row.setAttribute("data-bar", b.id);
      var id = document.createElement("span"); id.className = "bar-id";
      id.textContent = visible(b.id) + (b.attempts > 1 ? " ×" + b.attempts : "");
      var track = document.createElement("span"); track.className = "track";
      var crit = b.critical ? " critical" : "";
      var segs = b.segments || [];
      if (segs.length > 1) {  // a bar per attempt: the gaps between them are the backoff
        segs.forEach(function (g) {
          bar(track, g.start, g.end, "bar attempt" + crit + " st-" + (g.status || ""),
              visible(b.id) + " attempt " + g.attempt + ": " + (g.end - g.start).toFixed(3) + " s, " + g.status
              + (g.error ? " (" + visible(String(g.error)) + ")" : ""));
        });
      } else {
        bar(track, b.start, b.end, "bar" + crit + " st-" + (b.status || ""),
            visible(b.id) + ": " + (b.end - b.start).toFixed(3) + " s, " + b.attempts + " attempt(s), " + b.status);
      }
      row.appendChild(id); row.appendChild(track); box.appendChild(row);
      (shows[b.id] || []).forEach(function (pair) {
        if (pair[0] === "attempts") { pair[1].textContent = String(b.attempts); }
      });
    });
    place(box);
  }
  function timelineLater() {
    if (redraw !== null) { return; }
    redraw = setTimeout(function () {
      var asked = Date.now();
      fetch(base + "/timeline", {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (tl) {
          pause = Math.max(300, 4 * (Date.now() - asked));
          redraw = null;
          if (tl) { drawTimeline(tl); }
        }, function () { redraw = null; });
    }, pause);
  }

  // agent and goal runs: their turns and steps, drawn again from the stream's `view` events
  // (the turns new or changed since the last one; a goal's whole view), in the shape the
  // server draws them (app.py: _agent_body, _goal_body, _ended, _waiting_panel)
  var LIMIT = 20000;  // as the server's esc(): a longer value is cut
  function shown(v) {
    var s = typeof v === "string" ? v : JSON.stringify(v);
    if (s === undefined) { s = ""; }
    if (s.length > LIMIT) { s = s.slice(0, LIMIT) + "\u2026 (" + (s.length - LIMIT) + " more characters)"; }
    return visible(s);
  }
  function pretty(v) { return shown(JSON.stringify(v, null, 2)); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = text; }
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function stCell(st) {
    var td = el("td");
    add(td, el("span", "st st-" + String(st).replace(/ /g, "-"), shown(st)));
    return td;
  }
  function table(cls, heads, rows, empty, bodyId) {
    var box = el("div", "scroll"), t = add(box, el("table", cls));
    var tr = add(add(t, el("thead")), el("tr"));
    heads.forEach(function (h) { add(tr, el("th", null, h)); });
    var body = add(t, el("tbody"));
    if (bodyId) { body.id = bodyId; }
    fill(body, rows, empty, heads.length);
    return box;
  }
  function fill(body, rows, empty, span) {
    body.textContent = "";
    rows.forEach(function (r) { body.appendChild(r); });
    if (!rows.length) { var td = add(add(body, el("tr")), el("td", null, empty)); td.colSpan = span; }
  }
  function errText(e) {
    if (e === null || e === undefined) { return ""; }
    return typeof e === "object" ? shown(e.error) + ": " + shown(e.cause) : shown(e);
  }
  function turnSection(t) {
    var sec = el("section", "turn");
    sec.setAttribute("data-turn", String(t.turn));
    add(sec, el("h3", null, "Turn " + shown(t.turn) + (t.complete ? "" : " \u00b7 reply incomplete")));
    add(sec, el("h4", null, "Reply"));
    add(sec, el("pre", "reply", shown(t.reply || "")));
    if (t.plan) { add(sec, el("h4", null, "Plan")); add(sec, el("pre", "plan", shown(t.plan))); }
    add(sec, el("h4", null, "Calls"));
    var rows = (t.calls || []).map(function (c) {
      var tr = el("tr"), st = c.in_doubt ? "in doubt" : String(c.status || "");
      add(tr, el("td", null, shown(c.id))); tr.appendChild(stCell(st));
      add(tr, el("td", null, shown(c.attempts))); add(tr, el("td", "err", errText(c.error)));
      return tr;
    });
    add(sec, table("calls", ["call", "status", "attempts", "error"], rows, "no calls"));
    return sec;
  }
  function drawTurns(v) {
    var box = document.getElementById("turns");
    if (!box) { return; }
    (v.turns || []).forEach(function (t) {
      var sec = turnSection(t), old = null, next = null;
      box.querySelectorAll("section.turn").forEach(function (s) {
        var n = Number(s.getAttribute("data-turn"));
        if (n === t.turn) { old = s; } else if (next === null && n > t.turn) { next = s; }
      });
      if (old) { box.replaceChild(sec, old); } else { box.insertBefore(sec, next); }
    });
    var count = document.getElementById("turn-count");
    if (count) { count.textContent = String(v.count); }
  }
  function drawGoal(v) {
    var steps = v.steps || [], body = document.getElementById("steps");
    if (body) {
      fill(body, steps.map(function (st) {
        var tr = el("tr");
        tr.setAttribute("data-step", shown(st.id));
        add(tr, el("td", null, shown(st.id))); add(tr, el("td", null, shown(st.task || "")));
        tr.appendChild(stCell(st.status)); add(tr, el("td", "verdict", shown(st.verdict || "")));
        add(tr, el("td", null, st.confidence === null || st.confidence === undefined ? "" : shown(st.confidence)));
        add(tr, el("td", null, shown(st.note || "")));
        return tr;
      }), "no steps recorded yet", 6);
    }
    var facts = v.facts || {}, fbody = document.getElementById("facts");
    if (fbody) {
      fill(fbody, Object.keys(facts).map(function (k) {
        var tr = el("tr");
        add(tr, el("td", null, shown(k))); add(add(tr, el("td")), el("pre", null, pretty(facts[k])));
        return tr;
      }), "none", 2);
    }
    var sc = document.getElementById("step-count"), fc = document.getElementById("fact-count");
    if (sc) { sc.textContent = String(steps.length); }
    if (fc) { fc.textContent = String(Object.keys(facts).length); }
    var extra = document.getElementById("goal-extra");
    if (extra) {
      var parts = [];
      if (v.replans !== null && v.replans !== undefined) { parts.push(shown(v.replans) + " replan(s)"); }
      if (v.steps_run !== null && v.steps_run !== undefined) { parts.push(shown(v.steps_run) + " step(s) run"); }
      if (v.elapsed_s !== null && v.elapsed_s !== undefined) { parts.push(shown(v.elapsed_s) + " s"); }
      extra.textContent = parts.join(" \u00b7 ");
    }
  }
  function drawEnded(v) {
    var box = document.getElementById("ended");
    if (!box) { return; }
    box.textContent = "";
    if (v.output !== null && v.output !== undefined) {
      add(box, el("h2", null, "Output")); add(box, el("pre", "output", pretty(v.output)));
    }
    if (v.error) { add(box, el("h2", null, "Error")); add(box, el("pre", "err", shown(v.error))); }
  }
  // a run that comes to wait for a person while its page is open: the panel the server draws
  function drawWaiting(v) {
    var w = document.getElementById("waiting");
    if (v.status !== "waiting" || !v.waiting) {
      if (w) { w.hidden = true; }
      return;
    }
    if (w && !w.hidden) { return; }
    if (w) { w.parentNode.removeChild(w); }
    w = el("section", "waiting"); w.id = "waiting";
    add(w, el("h2", null, "Waiting for approval"));
    var p = add(w, el("p", null, shown(v.waiting.kind || "") + " decision "));
    add(p, el("code", null, shown(v.waiting.decision)));
    var ul = add(w, el("ul"));
    (v.waiting.calls || []).forEach(function (c) {
      var li = add(ul, el("li"));
      add(li, el("b", null, shown(c.id)));
      li.appendChild(document.createTextNode(" " + shown(c.tool) + " \u00b7 risk " + shown(c.risk)));
      add(li, el("pre", null, shown(c.args || "")));
    });
    var label = add(w, el("label", null, "reason "));
    var input = add(label, el("input")); input.id = "reason"; input.maxLength = 500;
    w.appendChild(document.createTextNode(" "));  // (the spaces the server's markup has between them)
    var ok = add(w, el("button", "approve", "Approve"));
    w.appendChild(document.createTextNode(" "));
    var no = add(w, el("button", "reject", "Reject"));
    ok.id = "approve"; no.id = "reject";
    ok.addEventListener("click", function () { decide("approve"); });
    no.addEventListener("click", function () { decide("reject"); });
    var note = add(w, el("p")); note.id = "decision-note"; note.setAttribute("role", "status");
    var line = run.querySelector("p");
    run.insertBefore(w, line ? line.nextSibling : run.firstChild);
  }
  function applyView(v) {
    var rs = document.getElementById("run-status");
    if (rs) { setStatus(rs, v.status); }
    run.dataset.status = v.status;
    if (v.kind === "agent") { drawTurns(v); } else if (v.kind === "goal") { drawGoal(v); }
    drawEnded(v);
    drawWaiting(v);
    run.dataset.views = String(Number(run.dataset.views || 0) + 1);  // view frames applied (tests)
  }

  if (window.EventSource) {
    var es = new EventSource(base + "/events");
    es.addEventListener("snapshot", function (e) {
      var snap;
      try { snap = JSON.parse(e.data); } catch (err) { return; /* a bad frame is skipped */ }
      if (apply(snap)) { timelineLater(); }
    });
    es.addEventListener("view", function (e) {
      var v;
      try { v = JSON.parse(e.data); } catch (err) { return; }
      applyView(v);
    });
  }

  // invisible and direction-changing characters shown as \u escapes, as the server does
  var HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;
  function visible(s) {
    return s.replace(HIDDEN, function (c) { return "\\u" + ("000" + c.charCodeAt(0).toString(16)).slice(-4); });
  }

  function field(parent, label, value) {
    if (value === null || value === undefined || value === "" || (Array.isArray(value) && !value.length)) { return; }
    var h = document.createElement("h3"); h.textContent = label; parent.appendChild(h);
    var pre = document.createElement("pre");
    pre.textContent = visible(typeof value === "string" ? value : JSON.stringify(value, null, 2));
    parent.appendChild(pre);
  }

  // each attempt: start and end (seconds from the call's start), duration, outcome and error
  function attemptsTable(parent, log, t0) {
    if (!log.length) { return; }
    var h = document.createElement("h3"); h.textContent = "attempts"; parent.appendChild(h);
    var table = document.createElement("table"); table.className = "attempts";
    var head = table.createTHead().insertRow();
    ["#", "start", "end", "duration", "outcome", "error"].forEach(function (t) {
      var th = document.createElement("th"); th.textContent = t; head.appendChild(th);
    });
    var tb = table.createTBody();
    log.forEach(function (a) {
      var tr = tb.insertRow(); tr.className = "attempt st-" + (a.status || "");
      tr.setAttribute("data-attempt", String(a.attempt));
      var base0 = typeof t0 === "number" ? t0 : a.started_at;
      var s = typeof a.started_at === "number" ? "+" + (a.started_at - base0).toFixed(3) + " s" : "";
      var e = typeof a.ended_at === "number" ? "+" + (a.ended_at - base0).toFixed(3) + " s" : "";
      var dur = typeof a.started_at === "number" && typeof a.ended_at === "number"
        ? ((a.ended_at - a.started_at) * 1000).toFixed(1) + " ms" : "";
      var err = a.error && typeof a.error === "object" ? a.error.error + ": " + a.error.cause : "";
      [String(a.attempt), s, e, dur, a.status || "", err].forEach(function (t) {
        tr.insertCell().textContent = visible(String(t));
      });
    });
    parent.appendChild(table);
  }

  function openCall(id) {
    fetch(base + "/calls/" + encodeURIComponent(id), {credentials: "same-origin"})
      .then(function (r) {
        return r.json().then(function (d) { return r.ok ? d : {status: d.error || "not found"}; });
      })
      .then(function (d) {
        var panel = document.getElementById("panel");
        document.getElementById("panel-id").textContent = id;
        var body = document.getElementById("panel-body");
        body.textContent = "";
        field(body, "call", d.call);
        field(body, "status", (d.status || "pending") + (d.attempts ? " after " + d.attempts + " attempt(s)" : ""));
        field(body, "error", d.error);
        field(body, "reason", d.reason);
        if (d.started && d.ended) { field(body, "time", ((d.ended - d.started) * 1000).toFixed(1) + " ms"); }
        attemptsTable(body, d.attempt_log || [], d.started);
        field(body, "result", d.output);  // (null when the call wrote it to its output paths: see "wrote")
        field(body, "wrote", d.writes);
        field(body, "items", d.items);
        panel.hidden = false;
      });
  }
  // the call table's buttons and the graph's nodes open a call's panel (one listener each)
  document.addEventListener("click", function (e) {
    var b = e.target.closest ? e.target.closest("button.open, g.node[data-node]") : null;
    if (b) { openCall(b.getAttribute("data-call") || b.getAttribute("data-node")); }
  });
  var find = document.getElementById("find-call");
  if (find) {
    find.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && find.value.trim()) { openCall(find.value.trim()); }
    });
  }

  function decide(action) {
    var note = document.getElementById("decision-note");
    var reason = (document.getElementById("reason") || {}).value || "";
    fetch(base + "/" + action, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({reason: reason})
    }).then(function (r) { return r.json().then(function (d) { return [r.status, d]; }); })
      .then(function (res) {
        note.textContent = res[0] === 202 ? (action === "approve" ? "approved: the run continues" : "rejected")
                                          : (res[1].error || "refused");
      });
  }
  var a = document.getElementById("approve"), r = document.getElementById("reject");
  if (a) { a.addEventListener("click", function () { decide("approve"); }); }
  if (r) { r.addEventListener("click", function () { decide("reject"); }); }
})();
