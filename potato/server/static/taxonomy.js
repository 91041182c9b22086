// hierarchical_multiselect (potato/schemes/taxonomy.py): a tree of checkboxes, ticked with the
// mouse or with Tab and Space like any checkbox. This script adds what a scheme's keys ask:
// data-auto-children (ticking or unticking a node does the same to all below it),
// data-auto-parent (ticking a node's last unticked child ticks the node, and so on up; no
// node is unticked behind the annotator's back),
// and the search box (shows the nodes whose name holds the text, with their ancestors). The
// form posts the ticked boxes itself; the server checks them.
(function () {
  function boxOf(li) { return li.querySelector(":scope > label > input[type=checkbox]"); }
  function childItems(li) {
    var ul = li.querySelector(":scope > ul");
    return ul ? Array.prototype.slice.call(ul.children) : [];
  }

  document.querySelectorAll(".tree[data-tree]").forEach(function (tree) {
    var autoChildren = tree.hasAttribute("data-auto-children");
    var autoParent = tree.hasAttribute("data-auto-parent");
    function settleParents(li) {  // from li's parent up: ticked once all its children are
      var parent = li.parentElement.closest("li");
      while (parent && tree.contains(parent)) {
        var box = boxOf(parent);
        var all = childItems(parent).every(function (c) { return boxOf(c).checked; });
        if (!all) break;
        box.checked = true;
        parent = parent.parentElement.closest("li");
      }
    }
    tree.addEventListener("change", function (e) {
      var box = e.target;
      if (!box.matches || !box.matches("input[type=checkbox]")) return;
      var li = box.closest("li");
      if (autoChildren) {
        li.querySelectorAll("ul input[type=checkbox]").forEach(function (b) {
          b.checked = box.checked;
        });
      }
      if (autoParent && box.checked) settleParents(li);
      tree.querySelectorAll("label.tree-node").forEach(function (l) {
        l.classList.toggle("chosen", boxOf(l.parentElement).checked);
      });
      limit();
    });
    // more ticked nodes than max_selections are not sent (annotate.js says why)
    var most = Number(tree.getAttribute("data-max")) || 0;
    function limit() {
      var n = tree.querySelectorAll("input[type=checkbox]:checked").length;
      if (most && n > most) {
        tree.setAttribute("data-not-ready", tree.getAttribute("data-tree") + ": " + n +
                          " nodes are ticked, and at most " + most + " may be.");
      } else {
        tree.removeAttribute("data-not-ready");
      }
    }
    limit();
    var filter = tree.querySelector("input.tree-filter");
    var none = tree.querySelector(".tree-none");
    if (!filter) return;
    function apply() {
      var q = filter.value.trim().toLowerCase(), any = false;
      function show(li) {  // whether li or a node below it matches
        var own = !q || boxOf(li).parentElement.textContent.toLowerCase().indexOf(q) >= 0;
        var below = childItems(li).map(show).some(Boolean);
        li.hidden = !(own || below);
        any = any || own;
        return own || below;
      }
      Array.prototype.forEach.call(tree.querySelector("ul").children, show);
      if (none) none.hidden = any;
    }
    filter.addEventListener("input", apply);
    // Enter in the search box would save the item (annotate.js): here it only searches
    filter.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); e.stopPropagation(); apply(); }
    });
  });
})();
