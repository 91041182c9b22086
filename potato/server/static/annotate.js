// The annotate page: 1-9 pick a label, A accepts the model's suggestion, Enter saves (with
// nothing chosen it warns first; a second Enter skips), ArrowLeft goes back. The chosen label
// is highlighted (class "chosen" on its <label>).
(function () {
  var form = document.getElementById("annotate-form");
  if (!form) return;
  var warning = document.getElementById("nothing-chosen");
  var warned = false;

  function mark() {
    form.querySelectorAll("label.option").forEach(function (l) {
      var box = l.querySelector("input");
      l.classList.toggle("chosen", !!(box && box.checked));
    });
    if (anything()) { warned = false; if (warning) warning.hidden = true; }
  }
  function anything() {
    return !!form.querySelector("input[name^='label:']:checked");
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
  function next() {
    if (!anything() && !warned && warning) {
      warned = true; warning.hidden = false; return;
    }
    form.querySelector('button[value="next"]').click();
  }
  form.addEventListener("change", mark);
  document.querySelectorAll(".accept-suggestion").forEach(function (b) {
    b.addEventListener("click", accept);
  });
  form.querySelector('button[value="next"]').addEventListener("click", function (e) {
    if (!anything() && !warned && warning) { e.preventDefault(); warned = true; warning.hidden = false; }
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey || (t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text")))) return;
    if (e.key >= "1" && e.key <= "9") {
      var box = form.querySelector('input[data-key="' + e.key + '"]');
      if (box) { box.type === "checkbox" ? (box.checked = !box.checked) : (box.checked = true); mark(); e.preventDefault(); }
    } else if (e.key === "a" || e.key === "A") {
      if (document.querySelector(".suggestion[data-scheme]")) { accept(); e.preventDefault(); }
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
