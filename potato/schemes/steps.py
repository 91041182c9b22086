"""Per-step correctness of an agent's trace: ``process_reward`` (upstream Potato's data for
process reward models). The steps are the list in the item's ``steps_key`` field (default
``steps``; at most ``MAX_STEPS``); each is listed in the scheme, briefly (its ``step_text_key``
field, default ``action``, else its content or text, else its JSON), with its controls.

- ``mode: first_error`` (the default): one choice for the whole trace, the first wrong step
  (every earlier step is then correct and it and every later one wrong), or "No step is
  wrong". The choices are one radio group: arrow keys or a click choose; steps.js marks each
  step correct or wrong as the choice implies.
- ``mode: per_step``: each step is correct, wrong or, with ``allow_neutral: true``, neutral
  (a deliberate "neither helped nor hurt"), or left unmarked; each step is its own radio
  group, and steps.js writes the rewards into the scheme's hidden field.

Stored, in both modes, as the list of rewards, one per step: 1 correct, -1 wrong, 0 neutral,
None unmarked (a first_error answer is some 1s then -1s, none unmarked). ``check`` bounds it
without the item (at most ``MAX_STEPS`` steps); ``fits`` checks its length against the item's
steps, which the annotate form and the JSON API do (an import of answers does not).
``reward_labels: {correct, incorrect, neutral}`` renames the controls.

Upstream's output holds ``{<scheme>: '{"steps": [{"index": 0, "reward": 1}, ...], "mode": ...}'}``
(an unmarked step is 0, or null with allow_neutral, as upstream). Annotators' answers are
aggregated step by step (the majority of those who marked it); no trainer learns them.
``inline_with_trace`` is accepted: the steps are listed in the scheme under the trace.
Upstream's ``ai_prelabel`` and ``require_verification`` ask an external model, which this
Potato does not call: true is refused, saying what to do.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from potato.config.reader import dotted
from potato.markup import Safe, join, render
from potato.schemes.base import Kind, short

MAX_STEPS = 500
SHOWN = 200  # characters of a step's text shown beside its controls
MODES = ("first_error", "per_step")
TEXTS = ("content", "text", "reasoning", "message")  # a step's text when step_text_key is absent
WORDS = {1: "correct", -1: "incorrect", 0: "neutral"}  # upstream's reward_labels keys
DEFAULT_WORDS = {"correct": "Correct", "incorrect": "Wrong", "neutral": "Neutral"}
EXTERNAL = ("ai_prelabel", "require_verification")


def step_text(step: Any, key: str) -> str:
    """A step's text, short: its ``key`` field, else its content or text, else its JSON."""
    if isinstance(step, dict):
        found = next((step[k] for k in (key,) + TEXTS if isinstance(step.get(k), str)
                      and step[k].strip()), None)
        text = found if found is not None else json.dumps(step, ensure_ascii=False)[:SHOWN + 1]
    elif isinstance(step, str):
        text = step
    else:
        text = json.dumps(step)[:SHOWN + 1]
    text = " ".join(text.split())
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


class ProcessReward(Kind):
    type_name = "process_reward"
    keys = ("steps_key", "step_text_key", "mode", "allow_neutral", "reward_labels",
            "inline_with_trace") + EXTERNAL
    label_rule = "none"
    aggregate_as = "majority_each"
    script = "steps.js"

    def __init__(self, scheme):
        super().__init__(scheme)
        self.steps_key, self.step_text_key, self.mode = "steps", "action", "first_error"
        self.allow_neutral = False
        self.words = dict(DEFAULT_WORDS)

    # -- config --------------------------------------------------------------------------------
    def parse(self, r, m, p) -> None:
        mode = m.get("mode", "first_error")
        if mode not in MODES:
            r.error(p + ("mode",), f"{dotted(p + ('mode',))} is {short(mode)}; give first_error "
                                   f"(the first wrong step) or per_step (each step).")
            mode = "first_error"
        self.mode = mode
        self.steps_key = r.text(m, "steps_key", p, "steps", numbers_ok=False) or "steps"
        self.step_text_key = r.text(m, "step_text_key", p, "action", numbers_ok=False) \
            or "action"
        self.allow_neutral = r.boolean(m, "allow_neutral", p, False)
        if self.allow_neutral and mode != "per_step":
            r.error(p + ("allow_neutral",), f"{dotted(p + ('allow_neutral',))}: a neutral step "
                                            f"is a per_step judgment; in first_error every step "
                                            f"is correct or wrong. Set mode: per_step, or remove "
                                            f"allow_neutral.")
            self.allow_neutral = False
        r.boolean(m, "inline_with_trace", p, False)  # the steps are listed in the scheme
        for key in EXTERNAL:
            if r.boolean(m, key, p, False):
                r.error(p + (key,), f"{dotted(p + (key,))}: true asks an external model to "
                                    f"suggest each step's reward, which this Potato does not "
                                    f"call; remove {key} (or set it to false) and annotators "
                                    f"mark every step themselves.")
        q = p + ("reward_labels",)
        names = r.mapping(m.get("reward_labels"), q, tuple(DEFAULT_WORDS), dotted(q))
        for key in DEFAULT_WORDS:
            word = r.text(names, key, q, None)
            if word is not None and word.strip():
                self.words[key] = word.strip()[:80]

    # -- the item ------------------------------------------------------------------------------
    def item_fields(self):
        return (self.steps_key,)

    def check_item(self, row: Dict[str, Any]) -> Optional[str]:
        where = f"{self.steps_key!r} (steps_key of process_reward scheme {self.name!r})"
        if self.steps_key not in row:
            return f"has no {where}: give it the list of the trace's steps."
        steps = row[self.steps_key]
        if not isinstance(steps, list):
            return f"has {where} as a {type(steps).__name__}, not a list of the trace's steps."
        if not steps:
            return f"has no steps in {where}; give it the trace's steps."
        if len(steps) > MAX_STEPS:
            return (f"has {len(steps)} steps in {where}, more than the {MAX_STEPS} a scheme "
                    f"lists; split the trace into items of at most {MAX_STEPS} steps.")
        return None

    def steps(self, row: Dict[str, Any]) -> List[Any]:
        steps = row.get(self.steps_key)
        return steps[:MAX_STEPS] if isinstance(steps, list) else []

    def fits(self, value: Any, row: Dict[str, Any],
             answers: Optional[Dict[str, Any]] = None) -> Any:
        n = len(self.steps(row))
        if value is not None and len(value) != n:
            raise self.fail(f"gives {len(value)} step reward(s), and the item has {n} steps "
                            f"in {self.steps_key!r}; give one per step.")
        return value

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        if value is None or value == "" or value == []:
            return None
        allowed = (1, -1) if self.mode == "first_error" else \
            ((1, 0, -1, None) if self.allow_neutral else (1, -1, None))
        what = ", ".join("None" if a is None else str(a) for a in allowed)
        if not isinstance(value, list) or len(value) > MAX_STEPS:
            raise self.fail(f"takes a list of at most {MAX_STEPS} step rewards ({what}), not "
                            f"{short(value)}.")
        for i, reward in enumerate(value):
            if isinstance(reward, bool) or reward not in allowed or (
                    reward is not None and not isinstance(reward, int)):
                raise self.fail(f"step {i + 1}'s reward is {short(reward)}; each is one of "
                                f"{what}.")
        if self.mode == "first_error" and any(a == -1 and b == 1
                                              for a, b in zip(value, value[1:])):
            raise self.fail(f"{short(value)} has a correct step after a wrong one; in "
                            f"first_error every step from the first wrong one is wrong.")
        return None if all(v is None for v in value) else value

    def answer_bytes(self, longest_text: int = 0) -> int:
        return 40 * MAX_STEPS  # per_step: each step's radio field, and the hidden list

    def from_form(self, values: List[str]) -> Any:
        raw = values[-1].strip() if values else ""
        if not raw:
            return None
        if self.mode == "first_error":  # "k/n": step k (from 0) of n is the first wrong one
            k, _, n = raw.partition("/")
            if not (k.isdigit() and n.isdigit() and len(raw) < 12 and int(k) <= int(n)):
                return raw  # check names it
            return [1] * int(k) + [-1] * (int(n) - int(k))
        if len(raw) > 40 * MAX_STEPS:
            return raw[:40] + "…"
        try:
            return json.loads(raw)
        except ValueError:
            return raw

    def cell(self, value: Any) -> str:
        return "" if value is None else json.dumps(value)

    def upstream_cell(self, value: Any) -> Dict[str, str]:
        if not isinstance(value, list):
            return {}
        unmarked = None if self.allow_neutral else 0
        steps = [{"index": i, "reward": unmarked if r is None else r}
                 for i, r in enumerate(value)]
        return {self.name: json.dumps({"steps": steps, "mode": self.mode})}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        raw = super().from_upstream_cell(cell)
        try:
            blob = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return raw
        steps = blob.get("steps") if isinstance(blob, dict) else None
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            return raw  # check names it
        rewards = [s.get("reward") for s in steps]
        if not self.allow_neutral:  # upstream's unmarked step
            rewards = [None if r == 0 and not isinstance(r, bool) else r for r in rewards]
        return rewards

    def training_schema(self) -> Dict[str, Any]:
        return {"labels": [], "mode": self.mode}

    def summary(self) -> str:
        if self.mode == "first_error":
            return f"the first wrong step of the trace in {self.steps_key!r} (or none)"
        return (f"each step of the trace in {self.steps_key!r}: "
                + ", ".join(self.words[w] for w in self.word_keys()))

    # -- the annotate page ---------------------------------------------------------------------
    def word_keys(self) -> List[str]:
        return ["correct", "incorrect"] + (["neutral"] if self.allow_neutral else [])

    def item_inputs(self, current: Any, first_key: int, row: Dict[str, Any]) -> Safe:
        steps = self.steps(row)
        if not steps:
            return render('<p class="hint">This item has no steps in {k}.</p>', k=self.steps_key)
        rewards = current if isinstance(current, list) and len(current) == len(steps) else \
            [None] * len(steps)
        if self.mode == "first_error":
            return self._first_error(steps, rewards)
        return self._per_step(steps, rewards)

    def inputs(self, current: Any, first_key: int) -> Safe:
        return self.item_inputs(current, first_key, {})

    def _row(self, i: int, step: Any, reward: Any, controls: Safe) -> Safe:
        group = ' role="radiogroup"' if self.mode == "per_step" else ""  # first_error: the list
        return render('<li class="prm-step" data-step="{i}" data-reward="{r}">'
                      '<span class="prm-text">{t}</span> <span class="prm-controls"{g} '
                      'aria-label="Step {n}">{c}</span></li>', g=Safe(group), i=str(i),
                      r="" if reward is None else str(reward), t=step_text(step,
                                                                          self.step_text_key),
                      n=str(i + 1), c=controls)

    def _radio(self, name: str, value: str, word: str, checked: bool, aria: str) -> Safe:
        return render('<label class="option prm-{w}"><input type="radio" name="{n}" '
                      'value="{v}" aria-label="{a}"{c}> {t}</label>', w=word, n=name, v=value,
                      a=aria, c=Safe(" checked" if checked else ""),
                      t=self.words.get(word, "No step is wrong"))

    def _first_error(self, steps: List[Any], rewards: List[Any]) -> Safe:
        n = len(steps)
        first = rewards.index(-1) if -1 in rewards else (n if rewards[0] == 1 else None)
        name = f"label:{self.name}"
        rows = [self._row(i, step, rewards[i], self._radio(
            name, f"{i}/{n}", "incorrect", first == i, f"Step {i + 1} is the first wrong step"))
            for i, step in enumerate(steps)]
        none = self._radio(name, f"{n}/{n}", "none", first == n, "No step is wrong")
        return render('<ol class="prm-steps" data-mode="first_error" role="radiogroup" '
                      'aria-label="The first wrong step">{r}</ol>'
                      '<p class="prm-none">{x}</p>', r=join(rows), x=none)

    def _per_step(self, steps: List[Any], rewards: List[Any]) -> Safe:
        value = {"correct": 1, "incorrect": -1, "neutral": 0}
        rows = []
        for i, step in enumerate(steps):
            controls = join(self._radio(f"step:{self.name}:{i}", str(value[w]), w,
                                        rewards[i] == value[w] and rewards[i] is not None,
                                        f"Step {i + 1}: {self.words[w]}")
                            for w in self.word_keys())
            rows.append(self._row(i, step, rewards[i], controls))
        shown = "" if all(r is None for r in rewards) else json.dumps(rewards)
        return render('<ol class="prm-steps" data-mode="per_step">{r}</ol><input type="hidden" '
                      'name="label:{s}" value="{v}"><p class="hint">Each step: Tab to it, arrow '
                      'keys or a click to mark it.</p>', r=join(rows), s=self.name, v=shown)
