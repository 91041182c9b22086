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
      // a sum that is off is not sent (annotate.js); all blank is no answer, and may go
      var given = Array.prototype.some.call(inputs, function (el) { return el.value.trim(); });
      var name = box.getAttribute("data-scheme"), least = Number(box.getAttribute("data-min"));
      var low = Array.prototype.some.call(inputs, function (el) {
        return el.value.trim() !== "" && !(Number(el.value) >= least); });
      if (given && low) {
        box.setAttribute("data-not-ready", name + ": each share must be a number of at " +
                         "least " + least + ".");
      } else if (given && left !== 0) {
        box.setAttribute("data-not-ready", name + ": the shares add up to " +
                         (Math.round(sum * 1e6) / 1e6) + ", not " + total + ".");
      } else {
        box.removeAttribute("data-not-ready");
      }
    }
    inputs.forEach(function (el) { el.addEventListener("input", update); });
    update();
  });
})();
