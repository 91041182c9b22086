// Post-editing (text_edit; potato/schemes/edit.py): each scheme's box starts with the item's
// text to edit, shown above it as the original. "Reset to the original" puts that text back;
// the edit distance (characters inserted, deleted or replaced: Levenshtein) is shown as the
// annotator types, counted only while both texts are within the page's limit. The server
// checks the edited text.
(function () {
  function original(name) {
    var found = null;
    document.querySelectorAll(".edit-source[data-scheme]").forEach(function (el) {
      if (el.getAttribute("data-scheme") === name) found = el.querySelector(".edit-source-text");
    });
    return found ? found.textContent : null;
  }
  function distance(a, b) {
    var prev = [], cur = [], i, j;
    for (j = 0; j <= b.length; j++) prev.push(j);
    for (i = 1; i <= a.length; i++) {
      cur = [i];
      for (j = 1; j <= b.length; j++) {
        cur.push(a[i - 1] === b[j - 1] ? prev[j - 1]
          : 1 + Math.min(prev[j], cur[j - 1], prev[j - 1]));
      }
      prev = cur;
    }
    return prev[b.length];
  }
  document.querySelectorAll("textarea[data-edit-box]").forEach(function (box) {
    var name = box.getAttribute("data-edit-box");
    var source = original(name);
    var wrap = box.parentNode;
    var reset = wrap.querySelector("button[data-edit-reset]");
    var shown = wrap.querySelector("[data-edit-distance] output");
    var limit = shown ? Number(shown.parentNode.getAttribute("data-limit")) : 0;
    function count() {
      if (!shown || source === null) return;
      var text = box.value.replace(/\r\n?/g, "\n");
      shown.textContent = (text.length > limit || source.length > limit)
        ? "too long to count" : String(distance(source, text));
    }
    if (reset) {
      if (source === null) reset.disabled = true;
      reset.addEventListener("click", function () {
        if (source === null) return;
        box.value = source;
        count();
        box.dispatchEvent(new Event("change", { bubbles: true }));
        box.focus();
      });
    }
    // counted when typing pauses: a long text's table is millions of cells (review 36.10)
    var timer = null;
    box.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(count, source !== null && source.length > 500 ? 250 : 0);
    });
    count();
  });
})();
