"""Upstream's agent trace displays (``instance_display`` fields of type ``agent_trace`` and
``coding_trace``): an agent's steps, read only, on the annotate page.

A trace is a list of steps. Each step is a mapping; its speaker is the field
``display_options.speaker_key`` names (else ``agent``, ``role``, ``speaker`` or ``name``), its
message the one ``display_options.text_key`` names (else ``content``, ``text`` or
``message``), and every other field is shown under its own name: a string as text (line breaks
kept), a list or mapping (tool calls, their input and output) one level at a time, down to
``MAX_DEPTH`` levels and then as JSON. A step that is not a mapping is shown as text.

Everything comes from a data file and is escaped (``markup.render``). Bounded: at most
``MAX_STEPS`` steps, ``MAX_PARTS`` fields or list entries at each level and ``MAX_TEXT``
characters of one string, each with a line that says what was left out; a text longer than
``FOLD_LINES`` lines (``display_options.max_output_lines``) is folded in a ``<details>`` the
annotator opens (no script).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from potato.markup import Safe, join, render

MAX_STEPS = 200
MAX_PARTS = 50
MAX_TEXT = 20000
MAX_DEPTH = 4
MAX_VALUES = 5000  # values (texts, numbers, lists, mappings) one trace shows in all
FOLD_LINES = 30
SPEAKERS = ("agent", "role", "speaker", "name")
MESSAGES = ("content", "text", "message")


def _text(value: str, fold: int) -> Safe:
    cut = len(value) > MAX_TEXT
    shown = value[:MAX_TEXT]
    more = render('<span class="hint"> … ({n} more characters)</span>',
                  n=len(value) - MAX_TEXT) if cut else Safe("")
    lines = shown.count("\n") + 1
    if lines > fold:
        return render('<details class="trace-long"><summary>{n} lines</summary><div '
                      'class="trace-text">{t}{m}</div></details>', n=lines, t=shown, m=more)
    return render('<div class="trace-text">{t}{m}</div>', t=shown, m=more)


class _Budget:
    """How many more values one trace may show (``MAX_VALUES``), and how many it left out."""

    def __init__(self):
        self.left, self.cut = MAX_VALUES, 0

    def more(self) -> bool:
        """Whether another value may be shown (else it is counted as left out)."""
        if self.left > 0:
            return True
        self.cut += 1
        return False

    def take(self) -> bool:
        if self.left > 0:
            self.left -= 1
            return True
        self.cut += 1
        return False


def _value(value: Any, depth: int, fold: int, budget: "_Budget") -> Safe:
    if not budget.take():
        return Safe("")
    if isinstance(value, str):
        return _text(value, fold)
    if value is None or isinstance(value, (bool, int, float)):
        return render('<div class="trace-text">{t}</div>', t=json.dumps(value))
    if depth >= MAX_DEPTH:
        return _text(json.dumps(value, ensure_ascii=False, indent=1), fold)
    if isinstance(value, dict):
        rows = [render('<dt>{k}</dt><dd>{v}</dd>', k=str(k),
                       v=_value(v, depth + 1, fold, budget))
                for k, v in list(value.items())[:MAX_PARTS] if budget.more()]
        return render('<dl class="trace-fields">{r}</dl>{m}', r=join(rows),
                      m=_more(len(value), "fields"))
    if isinstance(value, list):
        rows = [render('<li>{v}</li>', v=_value(v, depth + 1, fold, budget))
                for v in value[:MAX_PARTS] if budget.more()]
        return render('<ul class="trace-list">{r}</ul>{m}', r=join(rows),
                      m=_more(len(value), "entries"))
    return _text(str(value), fold)


def _more(n: int, what: str) -> Safe:
    return render('<p class="hint">{k} more {w} not shown.</p>', k=n - MAX_PARTS, w=what) \
        if n > MAX_PARTS else Safe("")


def _first(step: Dict[str, Any], named: Any, usual) -> Any:
    keys = [named] if isinstance(named, str) else list(usual)
    return next((k for k in keys if k in step), None)


def trace(value: Any, options: Dict[str, Any]) -> Safe:
    """The steps of ``value`` as an ordered list (numbered unless ``show_turn_numbers`` /
    ``show_step_numbers`` is false)."""
    steps: List[Any] = value if isinstance(value, list) else [value]
    fold = options.get("max_output_lines")
    fold = fold if isinstance(fold, int) and not isinstance(fold, bool) and fold > 0 \
        else FOLD_LINES
    rows, budget = [], _Budget()
    for step in steps[:MAX_STEPS]:
        if not isinstance(step, dict):
            rows.append(render('<li class="trace-step">{v}</li>', v=_value(step, MAX_DEPTH,
                                                                          fold, budget)))
            continue
        who = _first(step, options.get("speaker_key"), SPEAKERS)
        said = _first(step, options.get("text_key"), MESSAGES)
        rest = {k: v for k, v in step.items() if k not in (who, said)}
        rows.append(render(
            '<li class="trace-step"><div class="trace-head"><span class="speaker">{s}</span>'
            '</div>{t}{r}</li>', s=_cell(step.get(who, "")) if who else "",
            t=_value(step[said], 1, fold, budget) if said else Safe(""),
            r=_value(rest, 0, fold, budget) if rest else Safe("")))
    numbered = all(options.get(k, True) is not False
                   for k in ("show_turn_numbers", "show_step_numbers"))
    more = render('<p class="hint">{k} more steps not shown.</p>', k=len(steps) - MAX_STEPS) \
        if len(steps) > MAX_STEPS else Safe("")
    if budget.cut:
        more = render('{m}<p class="hint">This trace is longer than a page shows: its last '
                      'values are left out.</p>', m=more)
    return render('<ol class="trace{n}">{r}</ol>{m}', n="" if numbered else " plain",
                  r=join(rows), m=more)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
