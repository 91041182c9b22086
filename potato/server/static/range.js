// A range on a scale (range_slider; potato/schemes/ranges.py): two range inputs, low and
// high. Moving one (mouse, or the arrow keys when it has the focus) keeps low <= high by
// pushing the other along, shows "low – high", and fills the scheme's two hidden fields,
// which stay empty (no answer) until a thumb is moved. The server checks the range.
(function () {
  document.querySelectorAll(".range-slider").forEach(function (wrap) {
    var low = wrap.querySelector("input[data-range-end=low]");
    var high = wrap.querySelector("input[data-range-end=high]");
    var fields = wrap.querySelectorAll("input[type=hidden][name^='label:']");
    var shown = wrap.querySelector("output.range-values");
    var unset = wrap.parentNode.querySelector(".range-unset");
    function set(moved) {
      if (Number(low.value) > Number(high.value)) {
        if (moved === low) high.value = low.value; else low.value = high.value;
      }
      fields[0].value = low.value;
      fields[1].value = high.value;
      shown.textContent = low.value + " – " + high.value;
      if (unset) unset.hidden = true;
      fields[0].dispatchEvent(new Event("change", { bubbles: true }));
    }
    [low, high].forEach(function (el) {
      ["input", "change"].forEach(function (name) {
        el.addEventListener(name, function () { set(el); });
      });
    });
  });
})();
