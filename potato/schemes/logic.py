"""Upstream's ``display_logic``: a scheme shown only when other schemes' answers say so.

    display_logic:
      show_when:
        - {schema: is_toxic, operator: equals, value: ["Yes", "Borderline"]}
      logic: all        # or any; all by default

Operators: ``equals`` / ``not_equals`` (the answer is, or is not, the value or one of the
values listed), ``contains`` / ``not_contains`` (a multiselect's labels, or a text answer,
hold the value), ``in_range`` (a number between ``[low, high]``, both included), ``empty`` /
``not_empty`` (no value needed). Values compare as text, so ``3`` matches a Likert answer 3.

The annotate page hides a scheme whose conditions do not hold (``static/annotate.js`` reads
``data-show-when``, and evaluates the same rules as ``shown`` below); the server decides
``label_requirement: required`` with ``shown``, so a hidden required scheme never blocks an
annotator. Answers are kept as given: hiding a scheme does not delete what it held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from potato.config.reader import Path, Reader, dotted

OPERATORS = ("equals", "not_equals", "contains", "not_contains", "in_range", "empty",
             "not_empty")
NO_VALUE = ("empty", "not_empty")


@dataclass
class Condition:
    schema: str
    operator: str
    value: Any = None


@dataclass
class DisplayLogic:
    conditions: List[Condition] = field(default_factory=list)
    any: bool = False  # logic: any (else all)

    def as_json(self) -> str:
        return json.dumps({"any": self.any, "when": [
            {"schema": c.schema, "op": c.operator, "value": c.value} for c in self.conditions]})


def parse(r: Reader, raw: Any, p: Path) -> Optional[DisplayLogic]:
    """A scheme's ``display_logic`` (errors recorded; None when absent or unusable)."""
    if raw is None:
        return None
    p = p + ("display_logic",)
    m = r.mapping(raw, p, ("show_when", "logic"), "display_logic")
    logic = r.text(m, "logic", p, "all")
    if logic not in ("all", "any"):
        r.error(p + ("logic",), f"{dotted(p + ('logic',))} is {logic!r}; give all (every "
                                f"condition holds) or any (one does).")
    when = m.get("show_when")
    if not isinstance(when, list) or not when:
        r.error(p + ("show_when",), f"{dotted(p)} needs show_when, a list of conditions like "
                                    f"{{schema: NAME, operator: equals, value: LABEL}}.")
        return None
    out = DisplayLogic(any=logic == "any")
    for j, c in enumerate(when):
        cond = _condition(r, c, p + ("show_when", j))
        if cond is not None:
            out.conditions.append(cond)
    return out if len(out.conditions) == len(when) else None


def _condition(r: Reader, raw: Any, p: Path) -> Optional[Condition]:
    m = r.mapping(raw, p, ("schema", "operator", "value"), "a display_logic condition")
    if not m:
        return None
    schema, op = r.text(m, "schema", p), r.text(m, "operator", p, "equals")
    if not schema:
        r.error(p, f"{dotted(p)} names no schema: give the scheme whose answer decides.")
        return None
    if op not in OPERATORS:
        r.error(p + ("operator",), f"{dotted(p + ('operator',))} is {op!r}; display_logic "
                                   f"operators here are {', '.join(OPERATORS)}.")
        return None
    value = m.get("value")
    if op == "in_range":
        if not (isinstance(value, list) and len(value) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
                and value[0] <= value[1]):
            r.error(p + ("value",), f"{dotted(p + ('value',))}: in_range takes [low, high], "
                                    f"two numbers with low <= high.")
            return None
    elif op not in NO_VALUE:
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                 for v in values):
            r.error(p + ("value",), f"{dotted(p + ('value',))} must be a label or number, or "
                                    f"a list of them.")
            return None
        value = [str(v) for v in values]
    return Condition(schema, op, value)


def check_names(r: Reader, schemes: List[Any], places: Optional[Dict[str, Any]] = None,
                skipped: Sequence[str] = ()) -> None:
    """Every condition names another scheme of the config. ``places``: each scheme's index in
    the config's list; ``skipped``: schemes of a type not here (already an error: a condition
    on one is not judged)."""
    names = {s.name for s in schemes}
    silent = {s.name for s in schemes if s.kind is not None and not s.kind.answers}
    for i, s in enumerate(schemes):
        for c in s.display_logic.conditions if s.display_logic else ():
            if c.schema in skipped:
                continue
            if c.schema in silent:  # review 39.7: it never holds an answer
                r.error(("annotation_schemes", (places or {}).get(s.name, i), "display_logic"),
                        f"{s.name}'s display_logic names the scheme {c.schema!r}, which takes "
                        f"no answer (it only shows a note), so the condition could never "
                        f"hold; name a scheme annotators answer.")
                continue
            if c.schema not in names or c.schema == s.name:
                r.error(("annotation_schemes", (places or {}).get(s.name, i), "display_logic"),
                        f"{s.name}'s display_logic names the scheme {c.schema!r}, which is "
                        f"{'itself' if c.schema == s.name else 'not a scheme of this config'}; "
                        f"name another scheme (schemes: {', '.join(sorted(names))}).")


def _holds(c: Condition, answer: Any) -> bool:
    empty = answer is None or answer == "" or answer == []
    if c.operator == "empty":
        return empty
    if c.operator == "not_empty":
        return not empty
    if c.operator == "in_range":
        ok = isinstance(answer, (int, float)) and not isinstance(answer, bool)
        return ok and c.value[0] <= answer <= c.value[1]
    if c.operator in ("contains", "not_contains"):
        if isinstance(answer, list):  # marks with labels (spans, regions): their labels
            found = any(str(a.get("label") if isinstance(a, dict) else a) in c.value
                        for a in answer)
        else:
            found = isinstance(answer, str) and any(v in answer for v in c.value)
        return found if c.operator == "contains" else not found
    is_one = not empty and not isinstance(answer, (list, dict)) and str(answer) in c.value
    return is_one if c.operator == "equals" else not is_one


def shown(scheme: Any, labels: Dict[str, Any]) -> bool:
    """Whether ``scheme`` is shown given the item's answers ``labels`` (True without logic)."""
    logic = scheme.display_logic
    if logic is None:
        return True
    results = [_holds(c, labels.get(c.schema)) for c in logic.conditions]
    return any(results) if logic.any else all(results)
