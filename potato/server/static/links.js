// span_link schemes on the annotate page: typed links between the spans of another (span)
// scheme, whose spans spans.js keeps in its hidden field (input[data-spans="<name>"]). Choose a
// link type (its button), then click the source span's mark and the target span's mark in the
// item text; or pick the two spans in the menus (keyboard) and press Add link. Links are listed
// under the scheme with a delete button each; when a span is deleted (spans.js announces every
// change with a "change" event on the form) the links that use it go too. Nothing is drawn as
// arcs. The server checks every link again.
(function () {
  var form = document.getElementById("annotate-form");
  var box = document.getElementById("item-text");
  if (!form) return;
  var schemes = [];
  form.querySelectorAll("input[data-links]").forEach(function (input) {
    var fs = input.closest("fieldset");
    var s = {name: input.getAttribute("data-links"), input: input, fs: fs,
             spanScheme: input.getAttribute("data-span-scheme"), type: null, links: [],
             source: fs.querySelector("select.link-source"), target: fs.querySelector("select.link-target"),
             list: fs.querySelector("ul.link-list"), message: fs.querySelector(".link-message"),
             types: {}, picked: null};
    try { s.links = JSON.parse(input.value || "[]"); } catch (e) { s.links = []; }
    fs.querySelectorAll("button.link-type").forEach(function (b) {
      var t = {name: b.getAttribute("data-type"), directed: b.getAttribute("data-directed") === "1",
               sources: JSON.parse(b.getAttribute("data-sources") || "[]"),
               targets: JSON.parse(b.getAttribute("data-targets") || "[]"), button: b};
      s.types[t.name] = t;
      b.addEventListener("click", function () { choose(s, t); });
    });
    fs.querySelector("button.link-add").addEventListener("click", function () {
      var spans = spansOf(s);
      add(s, spans[Number(s.source.value)], spans[Number(s.target.value)]);
    });
    schemes.push(s);
  });
  if (!schemes.length) return;

  function spansOf(s) {
    var input = form.querySelector('input[data-spans="' + CSS.escape(s.spanScheme) + '"]');
    try { return JSON.parse((input && input.value) || "[]"); } catch (e) { return []; }
  }
  function same(a, b) { return a && b && a.start === b.start && a.end === b.end && a.label === b.label; }
  function end(sp) { return {start: sp.start, end: sp.end, label: sp.label}; }
  function show(sp, spans) {
    var hit = spans.filter(function (x) { return same(x, sp); })[0];
    return "\u201c" + (hit ? hit.text : sp.start + ".." + sp.end) + "\u201d (" + sp.label + ")";
  }
  function say(s, text) { s.message.textContent = text || ""; s.message.hidden = !text; }
  function choose(s, t) {
    s.type = t; s.picked = null;
    Object.keys(s.types).forEach(function (n) {
      s.types[n].button.setAttribute("aria-pressed", String(s.types[n] === t));
    });
    say(s, null);
  }
  function fits(t, a, b) {
    return (!t.sources.length || t.sources.indexOf(a.label) >= 0) &&
      (!t.targets.length || t.targets.indexOf(b.label) >= 0);
  }
  function add(s, a, b) {
    if (!s.type) { say(s, "Choose a link type first."); return; }
    if (!a || !b) { say(s, "Pick a source span and a target span."); return; }
    if (same(a, b)) { say(s, "A link joins two different spans."); return; }
    var t = s.type;
    if (!t.directed && (b.start - a.start || b.end - a.end) < 0) { var c = a; a = b; b = c; }
    if (!fits(t, a, b) && !(!t.directed && fits(t, b, a))) {
      say(s, "A " + t.name + " link goes from " + (t.sources.join(" or ") || "any label") + " to " +
          (t.targets.join(" or ") || "any label") + ", not from " + a.label + " to " + b.label + ".");
      return;
    }
    var link = {type: t.name, source: end(a), target: end(b)};
    if (s.links.some(function (l) { return l.type === link.type && same(l.source, link.source) && same(l.target, link.target); })) {
      say(s, "That link is already there."); return;
    }
    s.links.push(link);
    say(s, null);
    update(s);
  }
  function update(s) {
    var spans = spansOf(s);
    // a link whose span is gone goes too
    s.links = s.links.filter(function (l) {
      return spans.some(function (x) { return same(x, l.source); }) && spans.some(function (x) { return same(x, l.target); });
    });
    s.input.value = JSON.stringify(s.links);
    [s.source, s.target].forEach(function (menu) {
      var keep = menu.value;
      menu.textContent = "";
      spans.forEach(function (sp, i) {
        var o = document.createElement("option");
        o.value = String(i);
        o.textContent = show(sp, spans);
        menu.appendChild(o);
      });
      if (keep && Number(keep) < spans.length) menu.value = keep;
    });
    s.list.textContent = "";
    s.links.forEach(function (l, i) {
      var li = document.createElement("li");
      li.setAttribute("data-index", String(i));
      var t = s.types[l.type];
      li.appendChild(document.createTextNode(l.type + ": " + show(l.source, spans) +
        (t && !t.directed ? " \u2194 " : " \u2192 ") + show(l.target, spans) + " "));
      var del = document.createElement("button");
      del.type = "button";
      del.className = "link-delete";
      del.textContent = "delete";
      del.setAttribute("aria-label", "Delete the link " + li.textContent);
      del.addEventListener("click", function () {
        s.links.splice(i, 1);
        update(s);
      });
      li.appendChild(del);
      s.list.appendChild(li);
    });
  }
  // A click on a span's mark (spans.js redraws the text on mouseup, so the mark is read here,
  // before it does): the first click picks the source, the second the target and makes the link.
  document.addEventListener("mouseup", function (e) {
    if (!box || !e.target.closest) return;
    var mark = e.target.closest(".mark");
    var ds = window.getSelection();
    if (!mark || !box.contains(mark) || (ds && !ds.isCollapsed)) return;
    schemes.forEach(function (s) {
      if (!s.type || mark.getAttribute("data-scheme") !== s.spanScheme) return;
      var spans = spansOf(s), sp = spans[Number(mark.getAttribute("data-index"))];
      if (!sp) return;
      if (!s.picked) {
        s.picked = sp;
        s.source.value = String(spans.indexOf(sp));
        say(s, "Source: " + show(sp, spans) + "; now click the target span.");
      } else {
        var a = s.picked;
        s.picked = null;
        s.target.value = String(spans.indexOf(sp));
        add(s, a, sp);
      }
    });
  }, true);
  form.addEventListener("change", function () { schemes.forEach(update); });
  schemes.forEach(update);
})();
