// Keyboard shortcuts on the annotate page: 1-9 pick a label, Enter saves, ArrowLeft goes back.
(function () {
  var form = document.getElementById("annotate-form");
  if (!form) return;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey || (t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text")))) return;
    if (e.key >= "1" && e.key <= "9") {
      var box = form.querySelector('input[data-key="' + e.key + '"]');
      if (box) { box.type === "checkbox" ? (box.checked = !box.checked) : (box.checked = true); e.preventDefault(); }
    } else if (e.key === "Enter") {
      form.querySelector('button[value="next"]').click(); e.preventDefault();
    } else if (e.key === "ArrowLeft") {
      var prev = form.querySelector('button[value="prev"]');
      if (prev && !prev.disabled) { prev.click(); e.preventDefault(); }
    }
  });
})();
