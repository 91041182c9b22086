// The annotate page: 1-9 pick a label (or a Likert point; 0 the tenth label), A accepts the model's suggestion
// (a Likert, slider or number suggestion is pre-selected instead, see preselect()),
// Enter saves (with nothing chosen it warns first; a second Enter skips; a required scheme
// without an answer stops it), ArrowLeft goes back. The chosen label is highlighted (class
// "chosen" on its <label>). Keys typed into a text box, a number, a slider or a dropdown stay
// there. Span schemes have their own script (spans.js). A scheme with display_logic is shown
// only while its conditions hold (applyLogic).
(function () {
  var form = document.getElementById("annotate-form");
  if (!form) return;
  var warning = document.getElementById("nothing-chosen");
  var missingNote = document.getElementById("required-missing");
  var warned = false;

  function hasValue(el) {
    if (el.type === "radio" || el.type === "checkbox") return el.checked;
    var v = (el.value || "").trim();
    return v !== "" && v !== "[]";
  }
  function fields(root) {
    return Array.prototype.slice.call(root.querySelectorAll("[name^='label:']"));
  }
  function mark() {
    form.querySelectorAll("label.option").forEach(function (l) {
      var box = l.querySelector("input");
      l.classList.toggle("chosen", !!(box && box.checked));
    });
    if (anything()) { warned = false; if (warning) warning.hidden = true; }
    if (missingNote && !missing().length && !form.querySelector("[data-not-ready]"))
      missingNote.hidden = true;
  }
  function anything() {
    return fields(form).some(hasValue);
  }
  // display_logic (potato/schemes/logic.py decides the same on the server): a scheme with
  // data-show-when is shown only while the other schemes' answers meet its conditions.
  function answer(name) {
    var fs = Array.prototype.filter.call(form.querySelectorAll("fieldset[data-scheme]"),
      function (f) { return f.getAttribute("data-scheme") === name; })[0];
    if (!fs || fs.hidden) return null;
    var out = fields(fs).filter(hasValue).map(function (el) { return el.value.trim(); });
    if (!out.length) return null;
    var marked = labelsOf(fs, out[out.length - 1]);
    if (marked) return marked;
    // checkboxes (multiselect, a taxonomy's nodes) answer with the list of those ticked
    var boxes = fields(fs).some(function (el) { return el.type === "checkbox"; });
    return boxes ? out : out[out.length - 1];
  }
  // A kind whose answer is a list of marks with labels (spans, regions) keeps it as JSON in a
  // hidden input: a condition sees the list of its labels, as logic.py does.
  function labelsOf(fs, value) {
    var hidden = Array.prototype.some.call(fs.querySelectorAll("input[type=hidden]"),
      function (el) { return el.name && el.name.indexOf("label:") === 0; });
    if (!hidden || value.charAt(0) !== "[") return null;
    try {
      var list = JSON.parse(value);
      if (!Array.isArray(list) || !list.every(function (x) {
        return x && typeof x === "object" && typeof x.label === "string"; })) return null;
      return list.map(function (x) { return x.label; });
    } catch (e) { return null; }
  }
  function holds(c, a) {
    var empty = a === null || (Array.isArray(a) && !a.length);
    var vals = c.value || [];
    if (c.op === "empty") return empty;
    if (c.op === "not_empty") return !empty;
    if (c.op === "in_range") {
      var n = Number(a);
      return !empty && !Array.isArray(a) && a !== "" && !isNaN(n) && n >= vals[0] && n <= vals[1];
    }
    if (c.op === "contains" || c.op === "not_contains") {
      var found = Array.isArray(a) ? a.some(function (x) { return vals.indexOf(x) >= 0; })
        : (!empty && vals.some(function (v) { return a.indexOf(v) >= 0; }));
      return c.op === "contains" ? found : !found;
    }
    var one = !empty && !Array.isArray(a) && vals.indexOf(a) >= 0;
    return c.op === "equals" ? one : !one;
  }
  function applyLogic() {
    // twice: a scheme shown by another conditional scheme follows it in the same pass
    for (var pass = 0; pass < 2; pass++) {
      form.querySelectorAll("fieldset[data-show-when]").forEach(function (fs) {
        var logic = JSON.parse(fs.getAttribute("data-show-when"));
        var results = logic.when.map(function (c) { return holds(c, answer(c.schema)); });
        fs.hidden = !(logic.any ? results.some(Boolean) : results.every(Boolean));
      });
    }
  }
  function missing() {  // the names of shown required schemes without an answer
    return Array.prototype.filter.call(form.querySelectorAll("fieldset[data-required]"),
      function (fs) { return !fs.hidden && !fields(fs).some(hasValue); })
      .map(function (fs) { return fs.getAttribute("data-scheme"); });
  }
  // Accept the suggestions, only into schemes where the annotator has chosen nothing:
  // a stray key never replaces a choice they made.
  function accept() {
    document.querySelectorAll(".suggestion[data-scheme]").forEach(function (s) {
      var labels = JSON.parse(s.getAttribute("data-labels") || "[]");
      var name = "label:" + s.getAttribute("data-scheme");
      var boxes = Array.prototype.filter.call(
        form.querySelectorAll("input[name^='label:']"), function (b) { return b.name === name; });
      if (boxes.some(function (b) { return b.checked; })) return;
      boxes.forEach(function (b) { if (labels.indexOf(b.value) >= 0) b.checked = true; });
    });
    mark();
  }
  // False (and says why) when the form may not be sent as "next". A kind's script marks an
  // answer the server would refuse with data-not-ready (its sentence) on an element of its
  // fieldset; a scheme display_logic hides is not asked.
  function mayGo() {
    var names = missing();
    if (names.length && missingNote) {
      missingNote.textContent = "An answer is required for: " + names.join(", ") + ".";
      missingNote.hidden = false;
      return false;
    }
    var notReady = Array.prototype.filter.call(form.querySelectorAll("[data-not-ready]"),
      function (el) { var fs = el.closest("fieldset"); return !(fs && fs.hidden); });
    if (notReady.length && missingNote) {
      missingNote.textContent = "Not saved yet: " + notReady.map(function (el) {
        return el.getAttribute("data-not-ready"); }).join(" ") + " Everything you gave is " +
        "still here.";
      missingNote.hidden = false;
      return false;
    }
    if (!anything() && !warned && warning) {
      warned = true; warning.hidden = false; return false;
    }
    return true;
  }
  function next() {
    if (mayGo()) form.querySelector('button[value="next"]').click();
  }
  // A slider holds no answer until it is moved or clicked (a click at its start value is an
  // answer too, though the value does not change): its hidden field gets the value then.
  form.querySelectorAll("input[type=range][data-slider]").forEach(function (r) {
    var wrap = r.closest("fieldset");
    function set() {
      wrap.querySelector("input[type=hidden][name^='label:']").value = r.value;
      wrap.querySelector("output.slider-value").textContent = r.value;
      var unset = wrap.querySelector(".slider-unset");
      if (unset) unset.hidden = true;
      mark();
    }
    ["input", "change", "click"].forEach(function (name) { r.addEventListener(name, set); });
  });
  // A Likert, slider or number suggestion pre-selects its value, only in a scheme where the
  // annotator has no answer yet (never over their own); the scheme is marked "suggested"
  // until they change it. Saving keeps the pre-selected value as their answer.
  function preselect() {
    document.querySelectorAll(".suggestion[data-value]").forEach(function (s) {
      var fs = Array.prototype.filter.call(form.querySelectorAll("fieldset[data-scheme]"),
        function (f) { return f.getAttribute("data-scheme") === s.getAttribute("data-scheme"); })[0];
      if (!fs || fields(fs).some(hasValue)) return;
      var v = s.getAttribute("data-value");
      var point = Array.prototype.filter.call(fs.querySelectorAll("input[type=radio]"),
        function (b) { return b.value === v; })[0];
      var range = fs.querySelector("input[type=range][data-slider]");
      var box = fs.querySelector("input[type=number]");
      if (point) {
        point.checked = true;
        point.closest("label").classList.add("suggested");
      } else if (range) {
        range.value = v;
        fs.querySelector("input[type=hidden][name^='label:']").value = range.value;
        fs.querySelector("output.slider-value").textContent = range.value;
        var unset = fs.querySelector(".slider-unset");
        if (unset) unset.hidden = true;
      } else if (box) {
        box.value = v;
      } else {
        return;
      }
      fs.classList.add("suggested");
      s.classList.add("preselected");
      function own() {
        fs.classList.remove("suggested");
        fs.querySelectorAll("label.suggested").forEach(function (l) { l.classList.remove("suggested"); });
        fs.removeEventListener("change", own);
        fs.removeEventListener("input", own);
      }
      fs.addEventListener("change", own);
      fs.addEventListener("input", own);
    });
  }
  preselect();
  form.addEventListener("change", applyLogic);
  form.addEventListener("input", applyLogic);
  form.addEventListener("change", mark);
  form.addEventListener("input", mark);
  applyLogic();
  mark();
  document.querySelectorAll(".accept-suggestion").forEach(function (b) {
    b.addEventListener("click", accept);
  });
  form.querySelector('button[value="next"]').addEventListener("click", function (e) {
    if (!mayGo()) e.preventDefault();
  });
  // A save the server would refuse for its size is not sent: the answers stay in the form and
  // the note says why. The size is counted as the browser sends the form (UTF-8, percent-encoded,
  // a newline as CR LF); the server's cap follows from the schemes, so this is rare (a proxy in
  // front with a smaller cap still answers on its own).
  var maxBody = Number(form.getAttribute("data-max-body")) || 0;
  form.addEventListener("submit", function (e) {
    if (!maxBody) return;
    var data = new FormData(form);
    if (e.submitter && e.submitter.name) data.append(e.submitter.name, e.submitter.value);
    var size = 0;
    data.forEach(function (v, k) {
      if (typeof v !== "string") return;
      size += encodeURIComponent(k).length + 2 +
        encodeURIComponent(v.replace(/\r?\n/g, "\r\n")).length;
    });
    if (size <= maxBody) return;
    e.preventDefault();
    missingNote.textContent = "Not saved: these answers take " + size + " bytes as the browser " +
      "sends them, and the server takes at most " + maxBody + " in one save. Shorten the " +
      "longest answer (a text, or fewer spans); everything you typed is still here.";
    missingNote.hidden = false;
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var typing = t && (t.tagName === "TEXTAREA" || t.tagName === "SELECT" ||
                       (t.tagName === "INPUT" && !/^(radio|checkbox)$/.test(t.type)));
    if (typing) {
      // Enter in a one-line field would submit the form with its first button (Previous).
      if (e.key === "Enter" && t.tagName === "INPUT") { next(); e.preventDefault(); }
      return;
    }
    if (e.key >= "0" && e.key <= "9") {
      var box = form.querySelector('input[data-key="' + e.key + '"]');
      if (box) {
        box.type === "checkbox" ? (box.checked = !box.checked) : (box.checked = true);
        box.dispatchEvent(new Event("change", { bubbles: true }));  // marks, ends a suggestion
        e.preventDefault();
      }
    } else if (e.key === "a" || e.key === "A") {
      if (document.querySelector(".suggestion[data-scheme]")) { accept(); e.preventDefault(); }
    } else if (t && /^(AUDIO|VIDEO)$/.test(t.tagName)) {
      return;  // a focused player's own keys: Enter or Space plays, the arrows seek
    } else if (e.key === "Enter") {
      // a focused button, link, menu or disclosure handles Enter itself
      if (t && /^(BUTTON|A|SUMMARY|SELECT)$/.test(t.tagName)) return;
      next(); e.preventDefault();
    } else if (e.key === "ArrowLeft") {
      var prev = form.querySelector('button[value="prev"]');
      if (prev && !prev.disabled) { prev.click(); e.preventDefault(); }
    }
  });
})();
