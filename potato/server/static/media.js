// The annotate page's media: a click on the image (or Enter / Space on its button) switches
// between "scaled to fit" and full size; an image, audio or video file that does not load is
// replaced by a note that says so (the server checked it when the page was made, so this is
// a file removed since, or a URL that does not answer). Label keys are annotate.js's.
(function () {
  document.querySelectorAll("figure.media-image").forEach(function (fig) {
    var button = fig.querySelector("button.media-zoom");
    if (!button) return;
    button.addEventListener("click", function (e) {
      var full = fig.classList.toggle("full");
      button.setAttribute("aria-pressed", full ? "true" : "false");
      // After a mouse click, Enter should save the item again, not toggle the image.
      if (e.detail > 0) button.blur();
    });
  });
  function failed(fig, kind) {
    var note = document.createElement("div");
    note.className = "media-missing";
    note.setAttribute("role", "note");
    note.setAttribute("data-kind", kind);
    var p = document.createElement("p");
    var b = document.createElement("b");
    b.textContent = "The " + kind + " of this item did not load.";
    p.appendChild(b);
    p.appendChild(document.createTextNode(" Label what you can or move on, and tell the " +
                                          "project's admin."));
    note.appendChild(p);
    fig.replaceWith(note);
  }
  document.querySelectorAll("figure.media").forEach(function (fig) {
    var el = fig.querySelector("img, audio, video");
    if (!el) return;
    var kind = fig.getAttribute("data-kind");
    if (el.tagName === "IMG" && el.complete && el.naturalWidth === 0 && el.src) {
      failed(fig, kind);
      return;
    }
    el.addEventListener("error", function () { failed(fig, kind); });
    // A small image (a 32-pixel digit) scaled up stays sharp: its pixels, not a blur.
    function sharpen() {
      if (el.naturalWidth > 0 && el.naturalWidth <= 128) el.classList.add("pixelated");
    }
    if (el.tagName === "IMG") {
      if (el.complete) sharpen(); else el.addEventListener("load", sharpen);
    }
  });
})();
