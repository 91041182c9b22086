// image_annotation schemes (potato/schemes/regions.py): boxes, polygons and points drawn on
// the item's image, each with a label, kept as JSON in the scheme's hidden input. The image is
// the page's own (figure.media-image), shown here in a stage that zooms and scrolls, with an
// SVG over it whose coordinates are fractions of the image (viewBox 0 0 1 1): what is stored.
// Mouse: a tool draws (drag a box; click a polygon's corners, double click or Enter closes;
// click a point); a click on a region selects it; drag it or its handles to move or resize.
// Keys, while the focus is on the image or its buttons (capture phase, before annotate.js):
// the tool keys, v (select), n (a new box in the middle), label keys (relabel the selected
// region), Delete, arrows (move), Shift+arrows (resize), Esc, + - and 0 (zoom).
(function () {
  var SVGNS = "http://www.w3.org/2000/svg";
  var MAX_POINTS = 200;  // a polygon's corners (regions.py checks the same)
  var COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22"];
  var page = document.querySelector("figure.media-image img.media-img");
  var widgets = [];
  var active = null;

  function el(name, attrs) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function clamp(v) { return Math.min(1, Math.max(0, v)); }
  function round(v) { return Math.round(v * 1e6) / 1e6; }

  function Widget(root) {
    var w = this;
    w.root = root;
    w.scheme = root.getAttribute("data-scheme");
    w.input = root.querySelector("input[data-regions]");
    w.max = Number(root.getAttribute("data-max")) || 500;
    w.min = Number(root.getAttribute("data-min")) || 0;
    w.zoomable = !!root.querySelector("[data-zoom]");
    w.message = root.querySelector(".region-message");
    w.list = root.querySelector(".region-list");
    w.stage = root.querySelector(".region-stage");
    w.toolButtons = [].slice.call(root.querySelectorAll(".region-tool"));
    w.labelButtons = [].slice.call(root.querySelectorAll(".region-label"));
    w.labels = w.labelButtons.map(function (b) { return b.getAttribute("data-label"); });
    w.keys = {};
    w.labelButtons.forEach(function (b) {
      var k = b.getAttribute("data-key");
      if (k) w.keys[k] = b.getAttribute("data-label");
      b.addEventListener("click", function () { w.chooseLabel(b.getAttribute("data-label")); });
    });
    w.toolButtons.forEach(function (b) {
      b.addEventListener("click", function () { w.chooseTool(b.getAttribute("data-tool")); });
    });
    root.querySelectorAll("[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () { w.zoomBy(b.getAttribute("data-zoom")); });
    });
    try { w.shapes = JSON.parse(w.input.value || "[]"); } catch (e) { w.shapes = []; }
    if (!Array.isArray(w.shapes)) w.shapes = [];
    w.selected = -1;
    w.draft = null;  // a polygon being drawn: its points
    w.zoom = 1;
    w.chooseTool(w.toolButtons.length ? w.toolButtons[0].getAttribute("data-tool") : "select");
    w.chooseLabel(w.labels[0]);
    if (!page) {
      root.querySelector(".region-noimage").hidden = false;
      return;
    }
    var fig = page.closest("figure");
    if (!fig.hidden) {  // the first such scheme draws where the image was (the others: here)
      fig.hidden = true;
      fig.parentNode.insertBefore(w.stage, fig);
    }
    w.box = document.createElement("div");
    w.box.className = "region-canvas";
    w.img = document.createElement("img");
    w.img.src = page.src;
    w.img.alt = page.alt;
    w.img.draggable = false;
    w.svg = el("svg", {viewBox: "0 0 1 1", preserveAspectRatio: "none", "class": "region-svg"});
    w.box.appendChild(w.img);
    w.box.appendChild(w.svg);
    w.stage.appendChild(w.box);
    w.img.addEventListener("load", function () { w.fit(); });
    w.img.addEventListener("error", function () {  // (media.js says so where it was)
      w.box.remove();
      w.svg = null;
      root.querySelector(".region-noimage").hidden = false;
    });
    if (w.img.complete) w.fit();
    w.svg.addEventListener("pointerdown", function (e) { w.down(e); });
    w.svg.addEventListener("dblclick", function (e) { w.close(); e.preventDefault(); });
    w.stage.addEventListener("focus", function () { active = w; });
    w.stage.addEventListener("pointerdown", function () { active = w; });
    root.addEventListener("pointerdown", function () { active = w; });
    root.addEventListener("focusin", function () { active = w; });
    w.render();
  }

  Widget.prototype.say = function (text) {
    this.message.textContent = text;
    this.message.hidden = !text;
  };
  Widget.prototype.chooseTool = function (tool) {
    this.tool = tool;
    this.toolButtons.forEach(function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-tool") === tool ? "true" : "false");
    });
    if (tool !== "polygon") this.draft = null;
    if (this.svg) this.render();
  };
  Widget.prototype.chooseLabel = function (label) {
    this.label = label;
    this.labelButtons.forEach(function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-label") === label ? "true" : "false");
    });
    if (this.selected >= 0 && this.shapes[this.selected].label !== label) {
      this.shapes[this.selected].label = label;
      this.changed();
    }
  };
  Widget.prototype.fit = function () {
    var natural = this.img.naturalWidth || 640;
    var room = this.stage.parentNode.clientWidth - 4;  // the stage itself is as wide as it
    this.base = Math.min(natural, Math.max(200, room));
    this.zoom = 1;
    this.box.style.width = this.base + "px";
  };
  Widget.prototype.zoomBy = function (how) {
    if (!this.box) return;
    if (how === "fit") { this.fit(); return; }
    this.zoom = Math.min(8, Math.max(1, this.zoom * (how === "in" ? 1.5 : 1 / 1.5)));
    this.box.style.width = Math.round(this.base * this.zoom) + "px";
  };
  Widget.prototype.at = function (e) {
    var r = this.svg.getBoundingClientRect();
    return {x: clamp((e.clientX - r.left) / r.width), y: clamp((e.clientY - r.top) / r.height)};
  };
  Widget.prototype.add = function (shape) {
    if (this.shapes.length >= this.max) {
      this.say("This image holds at most " + this.max + " regions here: delete one first.");
      return;
    }
    this.say("");
    this.shapes.push(shape);
    this.selected = -1;  // not selected: the next label chosen is for the next region
    this.changed();
  };
  Widget.prototype.close = function () {
    if (!this.draft) return false;
    if (this.draft.length >= 3) {
      this.add({type: "polygon", label: this.label, coordinates: this.draft.map(function (p) {
        return {x: round(p.x), y: round(p.y)};
      })});
    } else {
      this.say("A polygon needs at least 3 corners.");
    }
    this.draft = null;
    this.render();
    return true;
  };
  Widget.prototype.changed = function () {
    this.input.value = JSON.stringify(this.shapes);
    this.input.dispatchEvent(new Event("change", {bubbles: true}));
    this.render();
  };
  // Pointer: on a handle, resize; on a region, select it (and drag to move); elsewhere, draw.
  Widget.prototype.down = function (e) {
    var w = this, p = w.at(e), t = e.target;
    active = w;
    w.stage.focus({preventScroll: true});
    e.preventDefault();
    var index = t.hasAttribute("data-index") ? Number(t.getAttribute("data-index")) : -1;
    var handle = t.hasAttribute("data-handle") ? Number(t.getAttribute("data-handle")) : -1;
    if (w.draft) {  // a polygon under way takes every click
      var last = w.draft[w.draft.length - 1];
      if (e.detail >= 2) { w.close(); return; }  // a double click closes it
      if (Math.abs(last.x - p.x) < 0.002 && Math.abs(last.y - p.y) < 0.002) return;
      if (w.draft.length >= MAX_POINTS) {
        w.say("A polygon has at most " + MAX_POINTS + " corners: press Enter to close it.");
        return;
      }
      w.draft.push(p);
      w.render();
      return;
    }
    if (index >= 0 && (w.tool === "select" || handle >= 0)) {
      w.selected = index;
      w.chooseLabel(w.shapes[index].label);
      w.drag(e, p, index, handle);
      w.render();
      return;
    }
    if (w.tool === "bbox") {
      var start = p, rect = el("rect", {"class": "region-draft"});
      w.svg.appendChild(rect);
      w.follow(function (q) {
        rect.setAttribute("x", Math.min(start.x, q.x));
        rect.setAttribute("y", Math.min(start.y, q.y));
        rect.setAttribute("width", Math.abs(q.x - start.x));
        rect.setAttribute("height", Math.abs(q.y - start.y));
      }, function (q) {
        rect.remove();
        var wd = Math.abs(q.x - start.x), ht = Math.abs(q.y - start.y);
        if (wd > 0.004 && ht > 0.004) {
          w.add({type: "bbox", label: w.label, coordinates: {
            x: round(Math.min(start.x, q.x)), y: round(Math.min(start.y, q.y)),
            width: round(wd), height: round(ht)}});
        } else if (index >= 0) {
          w.selected = index;  // a click on a region: select it
          w.chooseLabel(w.shapes[index].label);
          w.render();
        }
      });
    } else if (w.tool === "polygon") {
      w.draft = [p];
      w.render();
    } else if (w.tool === "landmark") {
      w.add({type: "landmark", label: w.label, coordinates: {x: round(p.x), y: round(p.y)}});
    } else {
      w.selected = -1;
      w.render();
    }
  };
  Widget.prototype.follow = function (move, up) {
    var w = this;
    function onMove(e) { move(w.at(e)); }
    function onUp(e) {
      document.removeEventListener("pointermove", onMove);
      document.removeEventListener("pointerup", onUp);
      up(w.at(e));
    }
    document.addEventListener("pointermove", onMove);
    document.addEventListener("pointerup", onUp);
  };
  // Move a region (handle < 0) or one of its corners, from where the pointer went down.
  Widget.prototype.drag = function (e, from, index, handle) {
    var w = this, before = JSON.stringify(w.shapes[index]);
    w.follow(function (q) {
      var s = JSON.parse(before);
      if (handle >= 0) w.reshape(s, handle, q); else w.shift(s, q.x - from.x, q.y - from.y);
      w.shapes[index] = s;
      w.render();
    }, function () {
      if (JSON.stringify(w.shapes[index]) !== before) w.changed();
    });
  };
  Widget.prototype.shift = function (s, dx, dy) {
    var c = s.coordinates;
    if (s.type === "bbox") {
      c.x = round(clamp(Math.min(c.x + dx, 1 - c.width)));
      c.y = round(clamp(Math.min(c.y + dy, 1 - c.height)));
    } else if (s.type === "landmark") {
      c.x = round(clamp(c.x + dx));
      c.y = round(clamp(c.y + dy));
    } else {
      var xs = c.map(function (p) { return p.x; }), ys = c.map(function (p) { return p.y; });
      dx = Math.max(-Math.min.apply(null, xs), Math.min(dx, 1 - Math.max.apply(null, xs)));
      dy = Math.max(-Math.min.apply(null, ys), Math.min(dy, 1 - Math.max.apply(null, ys)));
      c.forEach(function (p) { p.x = round(clamp(p.x + dx)); p.y = round(clamp(p.y + dy)); });
    }
  };
  // Shift+arrows: a box's right or bottom edge moves out (right, down) or in; a polygon
  // grows or shrinks around its centre (right, down: larger).
  Widget.prototype.grow = function (s, dx, dy) {
    var c = s.coordinates;
    if (s.type === "bbox") {
      c.width = round(Math.min(1 - c.x, Math.max(0.004, c.width + dx)));
      c.height = round(Math.min(1 - c.y, Math.max(0.004, c.height + dy)));
    } else if (s.type === "polygon") {
      var f = 1 + 5 * (dx + dy), mx = 0, my = 0;
      c.forEach(function (p) { mx += p.x / c.length; my += p.y / c.length; });
      c.forEach(function (p) {
        p.x = round(clamp(mx + (p.x - mx) * f));
        p.y = round(clamp(my + (p.y - my) * f));
      });
    }
  };
  Widget.prototype.reshape = function (s, handle, q) {
    var c = s.coordinates;
    if (s.type === "polygon") { c[handle] = {x: round(q.x), y: round(q.y)}; return; }
    if (s.type !== "bbox") { c.x = round(q.x); c.y = round(q.y); return; }
    // the corner opposite the handle stays
    var x0 = c.x, y0 = c.y, x1 = c.x + c.width, y1 = c.y + c.height;
    if (handle === 0 || handle === 3) x0 = q.x; else x1 = q.x;
    if (handle === 0 || handle === 1) y0 = q.y; else y1 = q.y;
    var nx = Math.min(x0, x1), ny = Math.min(y0, y1);
    s.coordinates = {x: round(nx), y: round(ny), width: round(Math.max(0.004, Math.abs(x1 - x0))),
                     height: round(Math.max(0.004, Math.abs(y1 - y0)))};
    s.coordinates.width = round(Math.min(s.coordinates.width, 1 - s.coordinates.x));
    s.coordinates.height = round(Math.min(s.coordinates.height, 1 - s.coordinates.y));
  };
  Widget.prototype.color = function (label) {
    return COLORS[Math.max(0, this.labels.indexOf(label)) % COLORS.length];
  };
  Widget.prototype.render = function () {
    var w = this;
    w.list.textContent = "";
    w.shapes.forEach(function (s, i) {
      var li = document.createElement("li");
      li.textContent = s.label + " (" + s.type + ") ";
      if (i === w.selected) li.className = "selected";
      var del = document.createElement("button");
      del.type = "button";
      del.className = "link";
      del.textContent = "delete";
      del.addEventListener("click", function () { w.remove(i); });
      li.appendChild(del);
      w.list.appendChild(li);
    });
    if (!w.svg) return;
    while (w.svg.firstChild) w.svg.removeChild(w.svg.firstChild);
    w.shapes.forEach(function (s, i) {
      var c = s.coordinates, color = w.color(s.label), shape;
      var attrs = {"data-index": i, "data-label": s.label, "data-type": s.type,
                   stroke: color, "class": "region" + (i === w.selected ? " selected" : "")};
      if (s.type === "bbox") {
        attrs.x = c.x; attrs.y = c.y; attrs.width = c.width; attrs.height = c.height;
        shape = el("rect", attrs);
      } else if (s.type === "polygon") {
        attrs.points = c.map(function (p) { return p.x + "," + p.y; }).join(" ");
        shape = el("polygon", attrs);
      } else {
        attrs.cx = c.x; attrs.cy = c.y; attrs.r = 0.008; attrs.fill = color;
        shape = el("circle", attrs);
      }
      shape.style.fill = s.type === "landmark" ? color : color + "33";
      w.svg.appendChild(shape);
    });
    var s = w.shapes[w.selected];
    if (s) {
      var pts = s.type === "polygon" ? s.coordinates : s.type === "bbox" ? [
        {x: s.coordinates.x, y: s.coordinates.y},
        {x: s.coordinates.x + s.coordinates.width, y: s.coordinates.y},
        {x: s.coordinates.x + s.coordinates.width, y: s.coordinates.y + s.coordinates.height},
        {x: s.coordinates.x, y: s.coordinates.y + s.coordinates.height}] : [];
      pts.forEach(function (p, k) {
        w.svg.appendChild(el("rect", {"class": "region-handle", "data-index": w.selected,
                                      "data-handle": k, x: p.x - 0.008, y: p.y - 0.008,
                                      width: 0.016, height: 0.016}));
      });
    }
    if (w.draft) {
      w.svg.appendChild(el("polyline", {"class": "region-draft", points: w.draft.map(
        function (p) { return p.x + "," + p.y; }).join(" ")}));
    }
  };
  Widget.prototype.remove = function (i) {
    this.shapes.splice(i, 1);
    this.selected = -1;
    this.say("");
    this.changed();
  };
  Widget.prototype.key = function (e) {
    var w = this, k = e.key, s = w.shapes[w.selected];
    if (k === "Enter" && w.draft) return w.close();
    if (k === "Escape" && (w.draft || s)) { w.draft = null; w.selected = -1; w.render(); return true; }
    if ((k === "Delete" || k === "Backspace") && s) { w.remove(w.selected); return true; }
    if (/^Arrow/.test(k) && s) {
      var dx = k === "ArrowLeft" ? -1 : k === "ArrowRight" ? 1 : 0;
      var dy = k === "ArrowUp" ? -1 : k === "ArrowDown" ? 1 : 0;
      if (e.shiftKey) w.grow(s, dx * 0.01, dy * 0.01); else w.shift(s, dx * 0.005, dy * 0.005);
      w.changed();
      return true;
    }
    if (k === "n" && w.toolButtons.some(function (b) {
      return b.getAttribute("data-tool") === "bbox"; })) {  // a box to move and size by keys
      w.add({type: "bbox", label: w.label, coordinates: {x: 0.4, y: 0.4, width: 0.2,
                                                         height: 0.2}});
      if (w.shapes[w.shapes.length - 1].coordinates.width === 0.2) {  // added: selected
        w.selected = w.shapes.length - 1;
        w.render();
      }
      return true;
    }
    if (w.keys[k] !== undefined) { w.chooseLabel(w.keys[k]); return true; }
    var tool = {r: "bbox", p: "polygon", k: "landmark", v: "select"}[k];
    if (tool && (tool === "select" || w.toolButtons.some(function (b) {
      return b.getAttribute("data-tool") === tool; }))) { w.chooseTool(tool); return true; }
    if (w.zoomable && (k === "+" || k === "=")) { w.zoomBy("in"); return true; }
    if (w.zoomable && k === "-") { w.zoomBy("out"); return true; }
    if (w.zoomable && k === "0") { w.zoomBy("fit"); return true; }
    return false;
  };

  document.querySelectorAll(".regions[data-scheme]").forEach(function (root) {
    widgets.push(new Widget(root));
  });
  // Save and next with fewer regions than min_annotations, or a polygon not closed: the
  // drawing stays on the page and the note says what is missing (the server refuses it too).
  var form = document.getElementById("annotate-form");
  if (form) form.addEventListener("submit", function (e) {
    if (!e.submitter || e.submitter.value !== "next") return;
    widgets.forEach(function (w) {
      if (e.defaultPrevented) return;
      if (w.draft) {
        w.say("Close the polygon (Enter or a double click) or drop it (Esc) first.");
      } else if (w.shapes.length < w.min) {
        w.say("Draw at least " + w.min + " region(s) on the image (" + w.shapes.length +
              " drawn).");
      } else {
        return;
      }
      e.preventDefault();
      w.message.scrollIntoView({block: "nearest"});
    });
  });
  active = widgets[0] || null;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    // only while the annotator works on the image (the stage or a button of it has the
    // focus): the number keys are the other schemes' too
    var here = active && (active.root.contains(document.activeElement) ||
                          active.stage.contains(document.activeElement));
    if (!here || e.altKey || e.ctrlKey || e.metaKey) return;
    if (t && /^(TEXTAREA|SELECT|INPUT)$/.test(t.tagName) && !/^(radio|checkbox)$/.test(t.type)) return;
    if (t && t.tagName === "BUTTON" && e.key === "Enter") return;
    if (active.key(e)) { e.preventDefault(); e.stopPropagation(); }
  }, true);
})();
