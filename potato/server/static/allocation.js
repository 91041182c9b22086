// Shares of a total (constant_sum, soft_label; potato/schemes/allocation.py): one number box
// per label, and the line "N of TOTAL left" kept up to date as the annotator types. The line
// only helps: the server checks the sum (a blank box counts as 0 there too).
(function () {
  document.querySelectorAll(".allocation[data-total]").forEach(function (box) {
    var total = Number(box.getAttribute("data-total"));
    var inputs = box.querySelectorAll("input[data-share]");
    var line = box.querySelector(".allocation-left");
    var out = line.querySelector("output");
    function update() {
      var sum = 0;
      inputs.forEach(function (el) {
        var v = Number(el.value);
        if (el.value.trim() !== "" && isFinite(v)) sum += v;
      });
      var left = Math.round((total - sum) * 1e6) / 1e6;  // no float noise: 0.1 + 0.2
      out.textContent = String(left);
      line.classList.toggle("over", left < 0);
      line.classList.toggle("done", left === 0);
    }
    inputs.forEach(function (el) { el.addEventListener("input", update); });
    update();
  });
})();
