// ranking (potato/schemes/ranking.py): each label has a rank menu (Tab to it, then the arrow
// keys or a digit; or the mouse). Without ties (no data-ties), giving a label a rank another
// label holds swaps them (that label takes the rank the first one left, or none), so a full
// order stays one while the arrow keys step through it; once all labels but one have ranks,
// the last gets the rank left. The order they make is shown under the menus. The form
// posts the menus; the server checks the ranking.
(function () {
  document.querySelectorAll("ul.ranking[data-ranking]").forEach(function (list) {
    var menus = Array.prototype.slice.call(list.querySelectorAll("select"));
    var ties = list.hasAttribute("data-ties");
    var out = list.parentElement.querySelector("output.ranking-order");
    function rankOf(m) { return m.value ? parseInt(m.value, 10) : 0; }
    function labelOf(m) { return m.value ? m.value.slice(m.value.indexOf(":") + 1) : ""; }
    function setRank(m, k) {
      var opt = Array.prototype.filter.call(m.options, function (o) {
        return o.value && parseInt(o.value, 10) === k; })[0];
      m.value = opt ? opt.value : "";
    }
    function show() {
      var places = {};
      menus.forEach(function (m) {
        var k = rankOf(m);
        if (k) (places[k] = places[k] || []).push(labelOf(m));
      });
      out.textContent = Object.keys(places).map(Number).sort(function (a, b) { return a - b; })
        .map(function (k) { return places[k].join(" = "); }).join(" > ");
    }
    menus.forEach(function (m) { m.setAttribute("data-was", rankOf(m)); });
    list.addEventListener("change", function (e) {
      var moved = e.target;
      if (menus.indexOf(moved) < 0) return;
      if (!ties && rankOf(moved)) {
        var was = parseInt(moved.getAttribute("data-was"), 10) || 0;
        menus.forEach(function (m) {  // the label that held the rank takes the one left
          if (m !== moved && rankOf(m) === rankOf(moved)) setRank(m, was);
        });
        var free = [];
        for (var k = 1; k <= menus.length; k++) free.push(k);
        menus.forEach(function (m) {
          if (rankOf(m) && free.indexOf(rankOf(m)) >= 0) free.splice(free.indexOf(rankOf(m)), 1);
        });
        var open = menus.filter(function (m) { return !rankOf(m); });
        if (open.length === 1 && free.length === 1) setRank(open[0], free[0]);
      }
      menus.forEach(function (m) { m.setAttribute("data-was", rankOf(m)); });
      show();
    });
    show();
  });
})();
