// Per-step rewards of a trace (process_reward; potato/schemes/steps.py). first_error: the
// steps' "wrong" radios and "No step is wrong" are one group (the form posts the choice);
// this marks each step correct (before it) or wrong (it and after). per_step: each step is
// its own radio group; this writes the list of rewards (null unmarked) into the scheme's
// hidden field. Arrow keys or a click choose. The server checks the rewards.
(function () {
  document.querySelectorAll("ol.prm-steps").forEach(function (list) {
    var fs = list.closest("fieldset");
    var rows = Array.prototype.slice.call(list.querySelectorAll("li.prm-step"));
    function show(row, reward) {
      row.setAttribute("data-reward", reward === null ? "" : String(reward));
    }
    if (list.getAttribute("data-mode") === "first_error") {
      var update = function () {
        var chosen = fs.querySelector("input[type=radio][name^='label:']:checked");
        var first = chosen ? Number(chosen.value.split("/")[0]) : -1;
        rows.forEach(function (row, i) {
          show(row, first < 0 ? null : (i < first ? 1 : -1));
        });
      };
      fs.addEventListener("change", update);
      update();
      return;
    }
    var field = fs.querySelector("input[type=hidden][name^='label:']");
    fs.addEventListener("change", function (e) {
      if (!e.target || e.target.type !== "radio") return;
      var rewards = rows.map(function (row) {
        var on = row.querySelector("input[type=radio]:checked");
        return on ? Number(on.value) : null;
      });
      rows.forEach(function (row, i) { show(row, rewards[i]); });
      field.value = rewards.some(function (r) { return r !== null; })
        ? JSON.stringify(rewards) : "";
      field.dispatchEvent(new Event("change", { bubbles: true }));
    });
  });
})();
