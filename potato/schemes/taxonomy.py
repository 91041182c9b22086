"""Labels from a tree: ``hierarchical_multiselect``, upstream Potato's choice of any number of
nodes of a ``taxonomy`` (a nested mapping whose leaves are lists of names). An annotator may
tick a node at any level; the value is the list of the ticked nodes' paths, each the names from
the root joined by ``/`` ("Science/Physics/Genetics"), in the taxonomy's order.

The paths, not the bare names, are stored because two branches may hold the same name
(Biology/Genetics and Medicine/Genetics). Upstream's output holds the bare names, comma-joined
(``{"selected_labels": "Physics,Genetics"}``); a name that two nodes share is written as its
path there, since a bare name could not say which node it was.

Aggregated as a multiselect's lists (the list most annotators gave, ``aggregate_as = "multi"``);
no trainer takes this kind (the trainers list the kinds they learn), so it is annotate-only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, short

SEP = "/"
MAX_NODES = 2000   # a tree larger than this is no checklist for a person (use search + spans)
MAX_DEPTH = 8
MAX_NAME = 200     # characters in one node's name
# Upstream's taxonomy presets are refused: the tree must be written out here.
PRESET_HINT = ("Upstream's taxonomy presets are not built in here: remove taxonomy_preset and "
               "write the tree out under taxonomy (a mapping whose leaves are lists of names).")


class HierarchicalMultiselect(Kind):
    type_name = "hierarchical_multiselect"
    keys = ("taxonomy", "auto_select_children", "auto_select_parent", "show_search",
            "max_selections", "expand_depth", "tooltips", "taxonomy_preset")
    label_rule = "none"
    script = "taxonomy.js"
    aggregate_as = "multi"
    one_label = False
    label_values = True  # a value is a list of node paths: counted per node
    predicts = "labels"
    multi_label = True

    def __init__(self, scheme):
        super().__init__(scheme)
        # each node: (path, name, depth, has children), in the taxonomy's order
        self.nodes: List[Tuple[str, str, int, bool]] = []
        self.auto_children = self.auto_parent = self.search = False
        self.max_selections: Optional[int] = None
        self.tooltips: Dict[str, str] = {}

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        if m.get("taxonomy_preset") is not None:
            r.error(p + ("taxonomy_preset",), f"{dotted(p + ('taxonomy_preset',))}: "
                                              f"{PRESET_HINT}")
        raw = m.get("taxonomy")
        if not isinstance(raw, dict) or not raw:
            r.error(p + ("taxonomy",), f"{dotted(p)} ({self.name}) needs taxonomy: a mapping "
                                       f"of top-level names to their children (a mapping "
                                       f"again, or a list of leaf names), for example "
                                       f"taxonomy: {{Science: [Physics, Biology], Arts: "
                                       f"[Music]}}.")
        else:
            self._walk(r, raw, p + ("taxonomy",), (), 1)
        self.auto_children = r.boolean(m, "auto_select_children", p, False)
        self.auto_parent = r.boolean(m, "auto_select_parent", p, False)
        self.search = r.boolean(m, "show_search", p, False)
        self.max_selections = r.number(m, "max_selections", p, None, 1, MAX_NODES,
                                       integer=True)
        r.number(m, "expand_depth", p, None, 0, MAX_DEPTH, integer=True)  # the tree shows open
        self.tooltips = self._tooltips(r, m.get("tooltips"), p + ("tooltips",))
        self.scheme.labels = [path for path, *_ in self.nodes]
        odd = [name for _, name, *_ in self.nodes if "," in name or ";" in name]
        if odd:  # review 36.8: upstream's comma-joined output and the CSV's ";" split them
            r.warn(p + ("taxonomy",), f"{dotted(p)} ({self.name}): node {odd[0]!r}"
                                      f"{' and %d more' % (len(odd) - 1) if len(odd) > 1 else ''}"
                                      f" holds ',' or ';', which upstream's output format "
                                      f"(comma-joined names) and the CSV export (';'-joined "
                                      f"paths) cannot tell apart from two nodes: an export "
                                      f"read back may differ. Rename it if you use them.")

    def _tooltips(self, r, raw: Any, q) -> Dict[str, str]:
        """Upstream's tooltips: a node name's hover text (the label's title here)."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            r.error(q, f"{dotted(q)} must be a mapping of node names to their hover text.")
            return {}
        names, out = set(self.names()), {}
        for key, text in raw.items():
            if key not in names:
                r.error(q + (key,), f"{dotted(q + (key,))}: {short(key)} is not a node name of "
                                    f"the taxonomy of {self.name}; remove it or fix the name.")
            elif isinstance(text, bool) or not isinstance(text, (str, int, float)):
                r.error(q + (key,), f"{dotted(q + (key,))} must be text, not {short(text)}.")
            else:
                out[key] = str(text)
        return out

    def _walk(self, r, raw: Any, p, parents: Tuple[str, ...], depth: int) -> None:
        """Add the nodes under ``parents`` (``raw``: a mapping or a list of leaf names)."""
        if depth > MAX_DEPTH:
            r.error(p, f"{dotted(p)}: the taxonomy of {self.name} is deeper than {MAX_DEPTH} "
                       f"levels; flatten it (or split it into several schemes).")
            return
        if isinstance(raw, dict):
            entries = list(raw.items())
        elif isinstance(raw, list):
            entries = [(leaf, None) for leaf in raw]
        else:
            r.error(p, f"{dotted(p)} must be a mapping of names to their children or a list "
                       f"of leaf names, not {short(raw)}.")
            return
        seen = set()
        for j, (key, children) in enumerate(entries):
            q = p + ((key if isinstance(raw, dict) else j),)
            name = self._name(r, key, q)
            if name is None:
                continue
            if name in seen:
                r.error(q, f"{dotted(q)}: {short(name)} is listed twice under the same parent "
                           f"in the taxonomy of {self.name}; list it once.")
                continue
            seen.add(name)
            if len(self.nodes) >= MAX_NODES:
                r.error(p, f"{dotted(p)}: the taxonomy of {self.name} has more than "
                           f"{MAX_NODES} nodes; a tree that large is no checklist for a "
                           f"person: cut it down, or split it into several schemes.")
                return
            path = parents + (name,)
            self.nodes.append((SEP.join(path), name, depth, bool(children)))
            if children:
                self._walk(r, children, q, path, depth + 1)

    def _name(self, r, key: Any, q) -> Optional[str]:
        if isinstance(key, bool) or not isinstance(key, (str, int, float)):
            r.error(q, f"{dotted(q)}: a taxonomy node must be a name (quote a Yes, No, On or "
                       f"Off), not {short(key)}; a list holds leaf names only (give a node "
                       f"with children as a mapping key).")
            return None
        name = str(key).strip()
        if not name or len(name) > MAX_NAME or SEP in name or not name.isprintable():
            r.error(q, f"{dotted(q)}: the node name {short(name)} must be 1 to {MAX_NAME} "
                       f"printable characters without {SEP!r} (a stored value joins the names "
                       f"of a node's path with it); rename the node.")
            return None
        return name

    def names(self) -> List[str]:
        return list(dict.fromkeys(name for _, name, *_ in self.nodes))

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == [] or value == "":
            return None
        values = value if isinstance(value, list) else [value]
        if len(values) > len(self.nodes):
            raise self.fail(f"{len(values)} nodes given; the taxonomy has {len(self.nodes)}.")
        order = {path: i for i, (path, *_) in enumerate(self.nodes)}
        seen = set()
        for v in values:
            if not isinstance(v, str) or v not in order:
                raise self.fail(f"{short(v)} is not a node of the taxonomy (a node is its path "
                                f"from the top, names joined by {SEP!r}, e.g. "
                                f"{short(self.nodes[-1][0] if self.nodes else 'A/B')}).")
            if v in seen:
                raise self.fail(f"{short(v)} is given twice; give each node once.")
            seen.add(v)
        if self.max_selections is not None and len(values) > self.max_selections:
            raise self.fail(f"{len(values)} nodes are ticked; at most {self.max_selections} "
                            f"may be (max_selections).")
        return sorted(values, key=order.__getitem__)

    def answer_bytes(self, longest_text: int = 0) -> int:
        # every node ticked, each posted as label:<scheme>=<path>, percent-encoded (12 bytes
        # covers any character a form or JSON may send)
        return 12 * sum(len(path) + len(self.name) + 8 for path, *_ in self.nodes)

    def from_form(self, values: List[str]) -> Any:
        return values

    def cell(self, value: Any) -> str:
        return ";".join(value) if isinstance(value, list) else super().cell(value)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        paths = value if isinstance(value, list) else [value]
        shared = self._shared()
        return {"selected_labels": ",".join(
            p if not isinstance(p, str) or p.rsplit(SEP, 1)[-1] in shared
            else p.rsplit(SEP, 1)[-1] for p in map(str, paths))}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = next(iter(cell.values()), None) if cell else None
        if not isinstance(raw, str):
            return raw  # check names it
        shared, by_name = self._shared(), {name: path for path, name, *_ in self.nodes}
        out = []
        for part in (x.strip() for x in raw.split(",") if x.strip()):
            out.append(by_name[part] if part in by_name and part not in shared else part)
        return out

    def _shared(self) -> set:
        """The names two or more nodes share."""
        seen, shared = set(), set()
        for _, name, *_ in self.nodes:
            (shared if name in seen else seen).add(name)
        return shared

    def summary(self) -> str:
        top = [name for _, name, depth, _ in self.nodes if depth == 1]
        return (f"any nodes of a taxonomy of {len(self.nodes)} "
                f"(top: {', '.join(top)})")

    # -- the annotate page ---------------------------------------------------------------------
    def inputs(self, current: Any, first_key: int) -> Safe:
        chosen = set(current) if isinstance(current, list) else set()
        search = render('<label class="tree-search">Find <input type="search" '
                        'class="tree-filter" aria-label="Find a node of {s}" '
                        'autocomplete="off"></label>', s=self.name) if self.search else ""
        return render('<div class="tree" data-tree="{s}"{c}{pa}{mx}>{search}{ul}'
                      '<p class="tree-none hint" hidden>No node matches.</p></div>',
                      s=self.name, c=Safe(' data-auto-children="1"' if self.auto_children
                                          else ""),
                      mx=Safe(' data-max="%d"' % self.max_selections
                              if self.max_selections else ""),
                      pa=Safe(' data-auto-parent="1"' if self.auto_parent else ""),
                      search=search, ul=self._list(0, 1, chosen)[0])

    def _list(self, i: int, depth: int, chosen) -> Tuple[Safe, int]:
        """The <ul> of the nodes from ``self.nodes[i]`` at ``depth``, and the index after."""
        items = []
        while i < len(self.nodes) and self.nodes[i][2] == depth:
            path, name, _, parent = self.nodes[i]
            tip = self.tooltips.get(name)
            box = render('<label class="tree-node{c}"{t}><input type="checkbox" '
                         'name="label:{s}" value="{v}"{checked}> {n}</label>',
                         c=" chosen" if path in chosen else "", s=self.name, v=path, n=name,
                         t=render(' title="{t}"', t=tip) if tip else "",
                         checked=Safe(" checked" if path in chosen else ""))
            i += 1
            sub: Any = ""
            if parent:
                sub, i = self._list(i, depth + 1, chosen)
            items.append(render("<li>{box}{sub}</li>", box=box, sub=sub))
        return render('<ul class="tree-level">{li}</ul>', li=join(items)), i
