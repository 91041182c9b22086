// Span schemes on the annotate page. Select text with the mouse, or click the text (or Tab to
// it) and move with the arrow keys, Shift+arrows extending the selection (Ctrl: by word, Home
// and End); then press a label's key or click its button. A span's label is changed or the
// span deleted in the list under its scheme (clicking a span focuses its entry), or with the
// cursor inside it: a label key relabels it, Delete or Backspace deletes it. Spans of one
// scheme may not overlap; a selection that would says so and marks nothing. A model's suggested
// spans are drawn dashed: a click accepts one, A accepts them all, saving ignores the rest.
// A scheme of one span (data-max-spans="1": extractive_qa's answer) replaces its span with
// the new one; its "none" box (Unanswerable) deletes it, and marking one unticks the box.
//
// Offsets: the server counts Unicode code points (Python str indices), the DOM counts UTF-16
// code units. `cps` holds the text's code points and `u16[i]` the UTF-16 offset of code point
// i; a DOM offset inside a surrogate pair is rounded outward, so a span never splits one.
(function () {
  var box = document.getElementById("item-text");
  var form = document.getElementById("annotate-form");
  if (!box || !form || !box.hasAttribute("data-text")) return;
  var cps = Array.from(JSON.parse(box.getAttribute("data-text")));
  var u16 = [0];
  cps.forEach(function (c, i) { u16.push(u16[i] + c.length); });
  var order = [], byName = {}, keys = {};
  var sel = null;  // {anchor, caret}: the selection in code points (collapsed: a cursor)

  form.querySelectorAll("input[data-spans]").forEach(function (input) {
    var fs = input.closest("fieldset");
    var s = {name: input.getAttribute("data-spans"), input: input, index: order.length,
             max: Number(input.getAttribute("data-max-spans")) || 0,
             none: fs.querySelector("input[data-spans-none]"),
             list: fs.querySelector("ul.span-list"), message: fs.querySelector(".span-message"),
             labels: [], spans: []};
    try { s.spans = JSON.parse(input.value || "[]"); } catch (e) { s.spans = []; }
    order.push(s); byName[s.name] = s;
  });
  form.querySelectorAll("button.span-label").forEach(function (b) {
    var target = {scheme: byName[b.getAttribute("data-scheme")], label: b.getAttribute("data-label")};
    if (!target.scheme) return;
    target.scheme.labels.push(target.label);
    var k = b.getAttribute("data-key");
    if (k && !keys[k]) keys[k] = target;  // a key two span schemes share goes to the first
    b.addEventListener("mousedown", function (e) { e.preventDefault(); });  // keep the selection
    b.addEventListener("click", function () { apply(target.scheme, target.label); });
  });
  // The model's suggested spans (the run in use; .span-suggestions): drawn dashed, apart from
  // the annotator's own, and never saved until accepted: a click on one (or its Accept button,
  // Tab and Enter) accepts it, A accepts them all. One that overlaps the annotator's own span
  // is not offered.
  document.querySelectorAll(".span-suggestions[data-scheme]").forEach(function (el) {
    var s = byName[el.getAttribute("data-scheme")];
    if (!s) return;
    var raw = [];
    try { raw = JSON.parse(el.getAttribute("data-spans") || "[]"); } catch (e) { raw = []; }
    s.suggested = raw.filter(function (g) {
      return g && Number.isInteger(g.start) && Number.isInteger(g.end) && g.start >= 0 &&
        g.start < g.end && g.end <= cps.length && s.labels.indexOf(g.label) >= 0 &&
        (g.text == null || g.text === cps.slice(g.start, g.end).join(""));
    }).map(function (g) {
      return {start: g.start, end: g.end, label: g.label, confidence: g.confidence,
              text: cps.slice(g.start, g.end).join("")};
    });
    s.suggestBox = el;
    s.suggestList = el.querySelector("ul.suggested-list");
    var all = el.querySelector(".accept-all-spans");
    if (all) all.addEventListener("click", function () { acceptAll(); box.focus(); });
  });
  // A scheme's "none" box (extractive_qa's Unanswerable): ticking it deletes its spans.
  order.forEach(function (s) {
    if (!s.none) return;
    s.none.addEventListener("change", function () {
      if (s.none.checked && s.spans.length) { s.spans = []; say(null); sync(); }
    });
  });
  box.tabIndex = 0;
  box.setAttribute("aria-label", "Item text: select text to mark a span");

  function pending(s) {  // suggestions not accepted and not overlapping the annotator's spans
    return (s.suggested || []).filter(function (g) {
      return !s.spans.some(function (sp) { return sp.start < g.end && g.start < sp.end; });
    });
  }
  function acceptOne(s, g) {
    if (pending(s).indexOf(g) < 0) return;
    s.spans.push({start: g.start, end: g.end, label: g.label, text: g.text});
    say(null);
    sync();
  }
  function acceptAll() {
    var n = 0;
    order.forEach(function (s) {
      pending(s).forEach(function (g) {
        s.spans.push({start: g.start, end: g.end, label: g.label, text: g.text}); n++;
      });
    });
    if (n) { say(null); sync(); }
    return n;
  }

  function toCp(u, up) {  // code point index of a UTF-16 offset, rounded down or up
    var i = 0;
    while (i < cps.length && u16[i + 1] <= u) i++;
    return (up && u16[i] < u) ? i + 1 : i;
  }
  function pointToCp(node, offset, up) {
    var all = document.createRange();
    all.selectNodeContents(box);
    var c = all.comparePoint(node, offset);
    if (c < 0) return 0;
    if (c > 0) return cps.length;
    var r = document.createRange();
    r.setStart(box, 0);
    r.setEnd(node, offset);
    return toCp(r.toString().length, up);
  }
  function fromDom() {  // the mouse's selection, when it covers some of the text
    var ds = window.getSelection();
    if (!ds || ds.rangeCount === 0 || ds.isCollapsed) return false;
    var rg = ds.getRangeAt(0);
    var a = pointToCp(rg.startContainer, rg.startOffset, false);
    var b = pointToCp(rg.endContainer, rg.endOffset, true);
    if (a >= b) return false;
    sel = {anchor: a, caret: b};
    return true;
  }
  function range() {
    return sel ? {start: Math.min(sel.anchor, sel.caret), end: Math.max(sel.anchor, sel.caret)} : null;
  }
  function covering(pos) {  // the first span (in scheme order) with the cursor inside it
    for (var i = 0; i < order.length; i++) {
      for (var j = 0; j < order[i].spans.length; j++) {
        var sp = order[i].spans[j];
        if (sp.start <= pos && pos < sp.end) return {scheme: order[i], span: sp};
      }
    }
    return null;
  }
  function say(s, text) {
    order.forEach(function (o) { if (o.message) { o.message.textContent = ""; o.message.hidden = true; } });
    if (s && s.message && text) { s.message.textContent = text; s.message.hidden = false; }
  }

  function apply(s, label) {
    var r = (fromDom() || sel) ? range() : null;
    window.getSelection().removeAllRanges();
    if (r && r.start === r.end) {
      var hit = covering(r.start);
      if (hit && hit.scheme === s) { hit.span.label = label; say(null); return sync(); }
    }
    if (r) {
      while (r.start < r.end && /\s/.test(cps[r.start])) r.start++;
      while (r.end > r.start && /\s/.test(cps[r.end - 1])) r.end--;
    }
    if (!r || r.start === r.end) {
      say(s, "Select some text first: with the mouse, or click the text and use Shift+arrows.");
      return render();
    }
    if (s.max === 1) s.spans = [];  // one answer: a new one replaces it
    for (var i = 0; i < s.spans.length; i++) {
      var sp = s.spans[i];
      if (sp.start === r.start && sp.end === r.end) { sp.label = label; say(null); return sync(); }
      if (sp.start < r.end && r.start < sp.end) {
        say(s, "This selection overlaps the span \u201c" + sp.text + "\u201d (" + sp.label +
            "); spans of " + s.name + " may not overlap. Delete or change that span first.");
        return render();
      }
    }
    s.spans.push({start: r.start, end: r.end, label: label, text: cps.slice(r.start, r.end).join("")});
    sel = {anchor: r.end, caret: r.end};
    say(null);
    sync();
  }
  function remove(s, sp) {
    s.spans.splice(s.spans.indexOf(sp), 1);
    sync();
  }
  function sync() {
    order.forEach(function (s) {
      if (s.none && s.spans.length) s.none.checked = false;  // an answer: not "none"
      s.spans.sort(function (a, b) { return a.start - b.start || a.end - b.end; });
      s.input.value = JSON.stringify(s.spans);
      list(s);
    });
    render();
    form.dispatchEvent(new Event("change"));  // annotate.js: something is chosen now
  }

  function listSuggested(s) {
    if (!s.suggestList) return;
    var open = pending(s);
    s.suggestBox.hidden = open.length === 0;
    s.suggestList.textContent = "";
    open.forEach(function (g) {
      var li = document.createElement("li");
      var q = document.createElement("q");
      q.textContent = g.text;
      var conf = typeof g.confidence === "number" ? " (" + g.confidence.toFixed(2) + ")" : "";
      var ok = document.createElement("button");
      ok.type = "button"; ok.className = "link accept-span"; ok.textContent = "Accept";
      ok.setAttribute("aria-label", "Accept the suggested span \u201c" + g.text + "\u201d (" + g.label + ")");
      ok.addEventListener("click", function () { acceptOne(s, g); box.focus(); });
      li.append(q, " " + g.label + conf + " ", ok);
      s.suggestList.appendChild(li);
    });
  }
  function list(s) {
    listSuggested(s);
    s.list.textContent = "";
    s.spans.forEach(function (sp, i) {
      var li = document.createElement("li");
      li.setAttribute("data-index", String(i));
      var q = document.createElement("q");
      q.textContent = sp.text;
      var pick = document.createElement("select");
      pick.setAttribute("aria-label", "Label of \u201c" + sp.text + "\u201d");
      s.labels.forEach(function (l) {
        var o = document.createElement("option");
        o.value = l; o.textContent = l; o.selected = l === sp.label;
        pick.appendChild(o);
      });
      pick.addEventListener("change", function () { sp.label = pick.value; sync(); });
      var del = document.createElement("button");
      del.type = "button"; del.className = "link delete-span"; del.textContent = "Delete";
      del.setAttribute("aria-label", "Delete the span \u201c" + sp.text + "\u201d");
      del.addEventListener("click", function () { remove(s, sp); box.focus(); });
      li.append(q, " ", pick, " ", del);
      s.list.appendChild(li);
    });
  }

  function render() {
    var bounds = {0: 1};
    bounds[cps.length] = 1;
    order.forEach(function (s) {
      s.spans.concat(pending(s)).forEach(function (sp) { bounds[sp.start] = bounds[sp.end] = 1; });
    });
    var r = range();
    if (r) { bounds[r.start] = bounds[r.end] = 1; }
    var points = Object.keys(bounds).map(Number).sort(function (a, b) { return a - b; });
    box.textContent = "";
    for (var k = 0; k < points.length; k++) {
      var a = points[k];
      if (sel && sel.caret === a) box.appendChild(caret());
      if (k + 1 === points.length) break;
      var b = points[k + 1], seg = cps.slice(a, b).join(""), el = null;
      order.forEach(function (s) {
        s.spans.forEach(function (sp, i) {
          if (sp.start > a || b > sp.end) return;
          el = el || document.createElement("span");
          el.classList.add("mark", "mark-" + s.index % 4, "label-" + s.labels.indexOf(sp.label) % 8);
          if (!el.hasAttribute("data-scheme")) { el.setAttribute("data-scheme", s.name); el.setAttribute("data-index", String(i)); }
          if (sp.start === a) { el.classList.add("mark-start"); el.setAttribute("data-label", sp.label); }
        });
      });
      if (!el) {
        order.forEach(function (s) {
          pending(s).forEach(function (g) {
            if (el || g.start > a || b > g.end) return;
            el = document.createElement("span");
            el.className = "suggested label-" + s.labels.indexOf(g.label) % 8;
            el.setAttribute("data-suggested", s.name);
            el.setAttribute("data-index", String(s.suggested.indexOf(g)));
            el.title = "Suggested: " + g.label + " (click to accept)";
            if (g.start === a) { el.classList.add("suggested-start"); el.setAttribute("data-label", g.label); }
          });
        });
      }
      if (r && r.start <= a && b <= r.end && r.start < r.end) {
        el = el || document.createElement("span");
        el.classList.add("kbd-selection");
      }
      if (el) { el.textContent = seg; box.appendChild(el); } else box.appendChild(document.createTextNode(seg));
    }
  }
  function caret() {
    var c = document.createElement("span");
    c.className = "caret";
    return c;
  }

  function word(pos, dir) {
    var i = pos;
    if (dir > 0) {
      while (i < cps.length && /\s/.test(cps[i])) i++;
      while (i < cps.length && !/\s/.test(cps[i])) i++;
    } else {
      while (i > 0 && /\s/.test(cps[i - 1])) i--;
      while (i > 0 && !/\s/.test(cps[i - 1])) i--;
    }
    return i;
  }
  function move(e) {
    if (!sel) sel = {anchor: 0, caret: 0};
    var c = sel.caret;
    if (e.key === "ArrowRight") c = e.ctrlKey ? word(c, 1) : Math.min(cps.length, c + 1);
    else if (e.key === "ArrowLeft") c = e.ctrlKey ? word(c, -1) : Math.max(0, c - 1);
    else if (e.key === "Home") c = 0;
    else c = cps.length;
    sel = {anchor: e.shiftKey ? sel.anchor : c, caret: c};
    render();
  }

  // The mouse's press: a focus it brings does not redraw the text under a starting drag (that
  // would drop the selection), and a press that did not move is a click.
  var down = null;
  box.addEventListener("mousedown", function (e) { down = {x: e.clientX, y: e.clientY}; });
  window.addEventListener("mouseup", function () { setTimeout(function () { down = null; }, 0); });
  box.addEventListener("focus", function () {
    if (!sel) { sel = {anchor: 0, caret: 0}; if (!down) render(); }
  });
  box.addEventListener("mouseup", function (e) {
    var still = !down || Math.abs(e.clientX - down.x) + Math.abs(e.clientY - down.y) < 4;
    down = null;
    var mark = e.target.closest ? e.target.closest(".mark") : null;
    var hint = e.target.closest ? e.target.closest(".suggested") : null;
    var ds = window.getSelection();
    if (fromDom()) {
      ds.removeAllRanges();
      mark = hint = null;
    } else if (hint && still) {  // a click on a suggested span accepts it
      var hs = byName[hint.getAttribute("data-suggested")];
      acceptOne(hs, hs.suggested[Number(hint.getAttribute("data-index"))]);
      box.focus();
      return;
    } else if (ds && ds.rangeCount) {
      var c = pointToCp(ds.focusNode, ds.focusOffset, false);
      sel = {anchor: c, caret: c};
    }
    render();
    if (mark) {  // a click on a span: its entry in the list, to change or delete it
      var s = byName[mark.getAttribute("data-scheme")];
      var li = s && s.list.querySelector('li[data-index="' + mark.getAttribute("data-index") + '"] select');
      if (li) li.focus();
    } else {
      box.focus();
    }
  });
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.metaKey || (t && t !== box && /^(TEXTAREA|SELECT|INPUT)$/.test(t.tagName) &&
        !/^(radio|checkbox)$/.test(t.type))) return;
    var inBox = document.activeElement === box;
    if (inBox && /^(ArrowRight|ArrowLeft|Home|End)$/.test(e.key)) {
      move(e); e.preventDefault(); e.stopPropagation(); return;
    }
    if (e.ctrlKey) return;
    var r = range();
    if (inBox && (e.key === "Delete" || e.key === "Backspace") && r && r.start === r.end) {
      var hit = covering(r.start);
      if (hit) { remove(hit.scheme, hit.span); e.preventDefault(); e.stopPropagation(); }
      return;
    }
    if (e.key === "Escape" && sel) { sel = {anchor: sel.caret, caret: sel.caret}; render(); return; }
    var target = keys[e.key];
    if (target) {
      var selecting = (r && r.start < r.end) || fromDom();
      var hitHere = inBox && r && covering(r.start);
      if (selecting || (hitHere && hitHere.scheme === target.scheme)) {
        apply(target.scheme, target.label);
        e.preventDefault(); e.stopPropagation();
        return;
      }
    }
    // A: accept every suggested span (annotate.js accepts choice suggestions on the same key)
    if ((e.key === "a" || e.key === "A") && acceptAll()) e.preventDefault();
  }, true);
  order.forEach(list);
  render();
})();
