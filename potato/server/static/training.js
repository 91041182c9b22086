// The Training page: Check, start, cancel, and a live card updated in place every second from
// server-rendered fragments (potato/training/web/live.py): only the parts whose HTML changed are
// replaced, and the log is appended to, so a selection in it survives and its scroll position
// stays (it follows the tail only when scrolled to the bottom). A run's page follows its run the
// same way, and the runs list its rows. Every page reads fine without this script (reload it to
// see more).
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var message = $("message");
  var afterCancel = function () {};  // what the page does once a cancel is on its way

  function show(text, kind) {
    if (!message) return;
    message.textContent = text || "";
    message.className = kind || "error";
  }

  // A run, said in words: [sentence, class]. A failure is a failure, with its reason.
  function said(run) {
    var id = "Run " + run.run_id;
    var warnings = (run.warnings || []).length;
    if (run.status === "error") return [id + " failed: " + (run.error || "no reason was given."), "error"];
    if (run.status === "cancelled") return [id + " was cancelled.", "warning"];
    if (run.status === "success") {
      return [id + " succeeded" + (warnings ? ", with " + warnings + " warning" +
        (warnings === 1 ? "" : "s") : "") + ".", warnings ? "warning" : "ok"];
    }
    if (run.step === "cancelling") return ["Cancelling run " + run.run_id + "…", "warning"];
    return [id + " is " + run.status + ".", "ok"];
  }

  // Replaces an element's content only when the new HTML differs (parsed the same way, so the
  // browser's serialisation is compared with itself).
  function patch(el, html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    if (el.innerHTML !== tpl.innerHTML) el.innerHTML = html;
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
      .then(function (run) { var s = said(run); show(s[0], s[1]); afterCancel(); })
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

  // A run's page while its run is queued or running: its parts and log follow the run; once
  // the run has ended the page is loaded again, with the report and Run again.
  var follow = document.querySelector("[data-follow-run]");
  if (follow) {
    var runId = follow.getAttribute("data-follow-run"), runBusy = false, runTimer = null;
    var followRun = function () {
      if (runBusy) return;
      runBusy = true;
      var log = $("run-log");
      api("GET", "/admin/training/api/fragments/runs/" + encodeURIComponent(runId) +
          "?log_from=" + encodeURIComponent(log.getAttribute("data-log-end") || "0"))
        .then(function (f) {
          Object.keys(f.parts).forEach(function (name) {
            var el = document.querySelector('[data-part="' + name + '"]');
            if (el) patch(el, f.parts[name]);
          });
          if (f.log) appendLog(log, f.log);
          if (f.terminal) {
            clearInterval(runTimer);
            window.location.reload();
          }
        })
        .catch(function (err) { show("Lost contact with the server: " + err.message); })
        .then(function () { runBusy = false; });
    };
    afterCancel = followRun;
    followTail($("run-log"), true);
    runTimer = setInterval(followRun, 1000);
    return;
  }

  // The runs list: its rows follow the runs (the filters as the page shows them); a ticked
  // run stays ticked.
  var list = $("runs-list");
  if (list && list.hasAttribute("data-query")) {
    var listBusy = false, lastRows = null;
    setInterval(function () {
      if (listBusy) return;
      listBusy = true;
      var query = list.getAttribute("data-query");
      api("GET", "/admin/training/api/fragments/runs" + (query ? "?" + query : ""))
        .then(function (f) {
          if (f.rows === lastRows) return;
          lastRows = f.rows;
          var ticked = Array.prototype.map.call(list.querySelectorAll("input[name=runs]:checked"),
                                                function (el) { return el.value; });
          patch(list, f.rows);
          Array.prototype.forEach.call(list.querySelectorAll("input[name=runs]"), function (el) {
            if (ticked.indexOf(el.value) >= 0) el.checked = true;
          });
          var head = $("list-h");
          if (head && head.textContent !== f.heading) head.textContent = f.heading;
        })
        .catch(function (err) { show("Lost contact with the server: " + err.message); })
        .then(function () { listBusy = false; });
    }, 2000);
    return;
  }

  var form = $("run-form");
  if (!form) return;  // other pages need only the cancel handler
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

  // Check's verdict holds for the backend, trainer and params it was given: a change to any of
  // them clears it (and a Check still on its way is not shown). After a failed Check, Start asks
  // first, until something changes.
  var checkSeq = 0, checkFailed = null;
  function clearCheck() {
    checkSeq += 1;
    checkFailed = null;
    report.innerHTML = "";
  }

  backend.addEventListener("change", function () { clearCheck(); syncDescription(); syncTrainers(); });
  trainer.addEventListener("change", function () { clearCheck(); syncParams(); });
  $("params").addEventListener("input", clearCheck);
  $("params").addEventListener("change", clearCheck);

  $("check").addEventListener("click", function () {
    var name = backend.value, button = this;
    button.disabled = true;
    clearCheck();
    var seq = checkSeq;
    var p = document.createElement("p");
    p.textContent = "Checking " + name + " ...";
    report.appendChild(p);
    // with the trainer and params the form holds: Check resolves the model where runs execute
    api("POST", "/admin/training/api/backends/" + encodeURIComponent(name) + "/check",
        { trainer: trainer.value, params: formParams() })
      .then(function (r) {
        if (seq !== checkSeq) return;  // the form changed meanwhile: this verdict is stale
        checkFailed = r.ok ? null : r.label;
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
      .catch(function (err) {
        if (seq !== checkSeq) return;
        report.innerHTML = "";
        var p = document.createElement("p");
        p.className = "error";
        p.textContent = "Check of " + name + " failed: " + err.message;
        report.appendChild(p);
      })
      .then(function () { button.disabled = false; });
  });

  // After Start run, what happened is said where the eye is: the message under the button and
  // the live card come into view, and the card takes the focus.
  function showStarted() {
    var card = $("live-card");
    if (message) message.scrollIntoView({ block: "start" });
    if (card) card.focus({ preventScroll: true });
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (checkFailed && !window.confirm("Check said " + checkFailed + " cannot start a run with " +
        "this trainer and these params. Start it anyway?")) return;
    var schemas = Array.prototype.map.call(form.querySelectorAll('input[name="schemas"]:checked'),
      function (el) { return el.value; });
    var params = formParams();
    var button = $("start-run");
    button.disabled = true;
    show("", "");
    startedRun = null;
    api("POST", "/admin/training/api/runs",
        { trainer: trainer.value, schemas: schemas, backend: backend.value, params: params })
      .then(function (r) {
        startedRun = r.run_id;
        startedEnded = false;
        var s = said(r);
        show(s[0], s[1]);
        refresh(showStarted);
      })
      .catch(function (err) { show(err.message); if (message) message.scrollIntoView({ block: "nearest" }); })
      .then(function () { button.disabled = false; });
  });

  var busy = false, startedRun = null, startedEnded = false;
  // The message about a run we started follows that run's status, never goes stale; once the
  // run has ended it says how, with the reason of a failure.
  function followStarted() {
    if (!startedRun || startedEnded || !message) return;
    var badge = document.querySelector('#runs-body tr[data-run="' + startedRun + '"] .status');
    if (!badge) return;
    if (!/\bstatus-(success|warning|error|cancelled)\b/.test(badge.className)) {
      message.textContent = "Run " + startedRun + " is " + badge.textContent + ".";
      return;
    }
    startedEnded = true;
    var id = startedRun;
    api("GET", "/admin/training/api/runs/" + encodeURIComponent(id))
      .then(function (run) { if (startedRun === id) { var s = said(run); show(s[0], s[1]); } })
      .catch(function (err) { show("Lost contact with the server: " + err.message); });
  }

  var lastRuns = null, lastConfig = null;
  // ``then``: what to do once this update is on the page (a refresh already on its way is
  // waited for).
  function refresh(then) {
    if (busy) {
      if (then) setTimeout(function () { refresh(then); }, 100);
      return;
    }
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
        if (then) then();
      })
      .catch(function (err) { show("Lost contact with the server: " + err.message); })
      .then(function () { busy = false; });
  }
  afterCancel = refresh;

  syncTrainers();
  followTail($("live-log"), true);
  setInterval(function () { refresh(); }, 1000);
})();
