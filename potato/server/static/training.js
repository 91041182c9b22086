// The Training page: Check, start, cancel, and a live card updated in place every second from
// server-rendered fragments (potato/training/web/live.py): only the parts whose HTML changed are
// replaced, and the log is appended to, so a selection in it survives and its scroll position
// stays (it follows the tail only when scrolled to the bottom). The page reads fine without
// this script (reload it to see more).
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var message = $("message");

  function show(text, kind) {
    if (!message) return;
    message.textContent = text || "";
    message.className = kind || "error";
  }

  function api(method, path, body) {
    var opts = { method: method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (r) {
      return r.text().then(function (t) {
        var data = null;
        try { data = t ? JSON.parse(t) : null; } catch (e) { data = null; }
        if (!r.ok) {
          throw new Error((data && data.error) || ("The server answered " + r.status + " " + r.statusText));
        }
        return data;
      });
    });
  }

  // Cancel buttons live inside refreshed fragments: one delegated handler.
  document.addEventListener("click", function (e) {
    var b = e.target.closest ? e.target.closest("[data-cancel]") : null;
    if (!b || b.disabled) return;
    var id = b.getAttribute("data-cancel");
    if (!window.confirm("Cancel run " + id + "? Its worker is stopped and the run ends cancelled.")) return;
    b.disabled = true;
    b.textContent = "Cancelling…";
    api("POST", "/admin/training/api/runs/" + encodeURIComponent(b.getAttribute("data-cancel")) + "/cancel")
      .then(function (run) { show("Run " + run.run_id + ": " + run.status + ".", "ok"); refresh(); })
      .catch(function (err) { b.disabled = false; show(err.message); });
  });

  var LOG_MAX = 200000;  // characters the card's log keeps (trimmed from the top when followed)

  function atBottom(log) {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 4;
  }

  function followTail(log, follow) {
    if (log && follow) log.scrollTop = log.scrollHeight;
  }

  function selectionIn(node) {
    var sel = window.getSelection ? window.getSelection() : null;
    return !!(sel && sel.rangeCount && !sel.isCollapsed &&
              (node.contains(sel.anchorNode) || node.contains(sel.focusNode)));
  }

  // Appends what the log gained (f.log: {text, end, reset}); a reset starts it again.
  function appendLog(log, more) {
    var follow = atBottom(log);
    if (more.reset) {
      log.textContent = more.text;
    } else if (more.text) {
      log.appendChild(document.createTextNode(more.text));
      if (follow && !selectionIn(log)) {
        while (log.textContent.length > LOG_MAX && log.childNodes.length > 1) {
          log.removeChild(log.firstChild);
        }
      }
    }
    log.setAttribute("data-log-end", String(more.end));
    followTail(log, follow);
  }

  // The card of the same run is patched part by part; another run's card replaces it.
  function updateLive(f) {
    var live = $("live-run");
    var card = live.querySelector(".live");
    var tpl = document.createElement("template");
    tpl.innerHTML = f.live;
    var fresh = tpl.content.querySelector(".live");
    if (!card || !fresh || card.getAttribute("data-run") !== fresh.getAttribute("data-run") ||
        !f.log) {
      if (card && fresh && card.getAttribute("data-run") === fresh.getAttribute("data-run")) {
        var d = card.querySelector("details"), nd = fresh.querySelector("details");
        if (d && nd) nd.open = d.open;
      }
      live.innerHTML = "";
      live.appendChild(tpl.content);
      followTail($("live-log"), true);
      return;
    }
    Array.prototype.forEach.call(fresh.querySelectorAll("[data-part]"), function (part) {
      var old = card.querySelector('[data-part="' + part.getAttribute("data-part") + '"]');
      if (old && old.innerHTML !== part.innerHTML) old.innerHTML = part.innerHTML;
    });
    card.setAttribute("data-status", fresh.getAttribute("data-status"));
    appendLog($("live-log"), f.log);
  }

  var form = $("run-form");
  if (!form) return;  // the run page needs only the cancel handler
  var data = JSON.parse($("training-data").textContent);
  var backend = $("backend"), trainer = $("trainer"), report = $("check-report");

  function syncTrainers() {
    var reasons = data.unavailable[backend.value] || {};
    var firstUsable = null;
    Array.prototype.forEach.call(trainer.options, function (opt) {
      var reason = reasons[opt.value];
      opt.disabled = !!reason;
      opt.textContent = opt.value + (reason ? " (unavailable: " + reason + ")" : "");
      if (!reason && firstUsable === null) firstUsable = opt.value;
    });
    if (trainer.selectedOptions.length && trainer.selectedOptions[0].disabled && firstUsable) {
      trainer.value = firstUsable;
    }
    syncParams();
  }

  function syncParams() {
    Array.prototype.forEach.call(document.querySelectorAll(".param-set"), function (set) {
      var on = set.getAttribute("data-trainer") === trainer.value;
      set.hidden = !on;
      Array.prototype.forEach.call(set.querySelectorAll("input, select, textarea"), function (el) { el.disabled = !on; });
    });
  }

  function syncDescription() {
    var d = $("backend-description");
    if (d) d.textContent = (data.descriptions || {})[backend.value] || "";
  }

  function formParams() {
    var params = {};
    Array.prototype.forEach.call(form.querySelectorAll(".param-set:not([hidden]) [name^='param:']"), function (el) {
      // a text box (a prompt template) keeps its lines and spaces; other fields are trimmed
      var v = el.tagName === "TEXTAREA" ? el.value : el.value.trim();
      if (v.trim() !== "") params[el.name.slice(6)] = v;
    });
    return params;
  }

  backend.addEventListener("change", function () { report.innerHTML = ""; syncDescription(); syncTrainers(); });
  trainer.addEventListener("change", syncParams);

  $("check").addEventListener("click", function () {
    var name = backend.value, button = this;
    button.disabled = true;
    report.innerHTML = "";
    var p = document.createElement("p");
    p.textContent = "Checking " + name + " ...";
    report.appendChild(p);
    // with the trainer and params the form holds: Check resolves the model where runs execute
    api("POST", "/admin/training/api/backends/" + encodeURIComponent(name) + "/check",
        { trainer: trainer.value, params: formParams() })
      .then(function (r) {
        report.innerHTML = "";
        var verdict = document.createElement("p");
        verdict.className = "verdict " + (r.ok ? "ok" : "error");
        verdict.textContent = r.label + ": " + (r.ok ? "can start a run" : "cannot start a run");
        var ul = document.createElement("ul");
        (r.lines || []).forEach(function (line) {
          var li = document.createElement("li");
          li.textContent = line;
          ul.appendChild(li);
        });
        report.appendChild(verdict);
        report.appendChild(ul);
      })
      .catch(function (err) { report.innerHTML = ""; show("Check of " + name + " failed: " + err.message); })
      .then(function () { button.disabled = false; });
  });

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var schemas = Array.prototype.map.call(form.querySelectorAll('input[name="schemas"]:checked'),
      function (el) { return el.value; });
    var params = formParams();
    var button = $("start-run");
    button.disabled = true;
    show("", "");
    api("POST", "/admin/training/api/runs",
        { trainer: trainer.value, schemas: schemas, backend: backend.value, params: params })
      .then(function (r) { startedRun = r.run_id; show("Run " + r.run_id + " is " + r.status + ".", "ok"); refresh(); })
      .catch(function (err) { show(err.message); })
      .then(function () { button.disabled = false; });
  });

  var busy = false, startedRun = null;
  // The message about a run we started follows that run's status, never goes stale.
  function followStarted() {
    if (!startedRun || !message || message.className !== "ok") return;
    var row = document.querySelector('#runs-body tr[data-run="' + startedRun + '"] .status');
    if (row) message.textContent = "Run " + startedRun + " is " + row.textContent + ".";
  }

  var lastRuns = null, lastConfig = null;
  function refresh() {
    if (busy) return;
    busy = true;
    var card = document.querySelector("#live-run .live"), log = $("live-log");
    var path = "/admin/training/api/fragments";
    if (card && log) {
      path += "?run=" + encodeURIComponent(card.getAttribute("data-run")) +
        "&log_from=" + encodeURIComponent(log.getAttribute("data-log-end") || "0");
    }
    api("GET", path)
      .then(function (f) {
        updateLive(f);
        if (f.runs !== lastRuns) {  // unchanged rows stay as they are (and a selection in them)
          $("runs-body").innerHTML = f.runs;
          lastRuns = f.runs;
        }
        var notice = $("config-notice");  // the config file on disk differs (reload.py)
        if (notice && typeof f.config === "string" && f.config !== lastConfig) {
          notice.innerHTML = f.config;
          lastConfig = f.config;
        }
        followStarted();
      })
      .catch(function (err) { show("Lost contact with the server: " + err.message); })
      .then(function () { busy = false; });
  }

  syncTrainers();
  followTail($("live-log"), true);
  setInterval(refresh, 1000);
})();
