// The run page's "Publish to Hugging Face Hub" card: sends the form to the API (so a refusal
// shows here, in a sentence) and follows a publish in progress from the server-rendered
// fragment every second. Without this script the form posts and the page shows the state.
(function () {
  "use strict";
  var box = document.getElementById("publish");
  if (!box) return;
  var runId = box.getAttribute("data-run");
  var path = "/admin/training/api/runs/" + encodeURIComponent(runId) + "/publish";
  var message = document.getElementById("publish-message");
  var timer = null;

  function say(text, kind) {
    message.textContent = text || "";
    message.className = text ? (kind || "error") : "";
  }

  function call(method, body) {
    var opts = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (r) {
      return r.text().then(function (t) {
        var data = null;
        try { data = t ? JSON.parse(t) : null; } catch (e) { data = null; }
        if (!r.ok) throw new Error((data && data.error) || ("The server answered " + r.status));
        return data;
      });
    });
  }

  function show(state) {
    box.innerHTML = state.html;  // rendered (and escaped) by the server
    box.setAttribute("data-state", state.state || "");
    bind();
    if (state.state === "publishing") {
      timer = window.setTimeout(poll, 1000);
    } else if (state.state === "published") {
      say("Published to " + state.repo_id + ".", "ok");
    }
  }

  function poll() {
    timer = null;
    call("GET").then(show).catch(function (err) {
      say("Lost contact with the server: " + err.message);
      timer = window.setTimeout(poll, 3000);
    });
  }

  function bind() {
    var form = document.getElementById("publish-form");
    if (!form) return;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var button = document.getElementById("publish-button");
      var checked = form.querySelector('input[name="private"]:checked');
      button.disabled = true;
      say("", "");
      call("POST", {
        repo_id: form.elements.repo_id.value,
        private: !!checked && checked.value === "true",
        commit_message: form.elements.commit_message.value
      }).then(function (state) {
        if (timer) window.clearTimeout(timer);
        show(state);
      }).catch(function (err) { button.disabled = false; say(err.message); });
    });
  }

  bind();
  if (box.getAttribute("data-state") === "publishing") timer = window.setTimeout(poll, 1000);
})();
