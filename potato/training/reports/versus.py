"""Did a run's model learn anything? Its held-out headline figure against two references on the
same test items.

- **The baseline**: a model that learned nothing but the label counts — always answering the
  train split's most common label (choices, Likert), the train median (numbers), or marking
  nothing (spans): the report's own ``baseline``.
- **Chance**: the model's own answers, shuffled across the test items (a permutation test,
  ``SHUFFLES`` seeded shuffles). Shuffling keeps everything about the answers — how often each
  label is given — except their link to the items, so a model that guesses (at random, at the
  class rates, always one label) scores as well shuffled as not. Spans cannot move between
  items (their offsets are their item's): their chance puts as many spans of the same lengths
  at random places of each item's own text (``span_chance``). ``chance_bound`` is the 97.5th percentile of the shuffled scores (the 2.5th
  for a figure where lower is better).

The model *beats* them when its figure is better than the baseline's and better than
``chance_bound``: a one-sided test at the 2.5 % level that its answers depend on the items. A
model in use must (docs/training.md, "Which run is in use"). Seeded: a run's verdict never
changes when it is computed again.

Each shape gives its answers and gold values encoded once, and a figure computed from a
(shuffled) answer list in one pass over the items, so a shuffle costs the number of items.
"""

import random
import re
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence

SHUFFLES = 1000
MAX_WORK = 2_000_000  # items scored in all; a larger test split gets fewer shuffles (>= 200)
SEED = 3335  # fixed: the verdict is a property of the run's predictions, not of the clock
TAIL = 0.025


def compare(name: str, higher_is_better: bool, answers: Sequence[Any], golds: Sequence[Any],
            figure: Callable[[Sequence[Any], Sequence[Any]], float], baseline: float,
            baseline_is: str, chance: Optional[Callable[[random.Random], Sequence[Any]]] = None
            ) -> Optional[Dict[str, Any]]:
    """The model's figure (``figure(answers, golds)``) against ``baseline`` and chance; None
    without items. ``chance(rng)``: one set of answers as a model that learned nothing would
    give them (by default the model's own answers shuffled across the items)."""
    n = len(answers)
    if n == 0 or len(golds) != n:
        return None
    model = figure(answers, golds)
    shuffles = max(200, min(SHUFFLES, MAX_WORK // n))
    rng = random.Random(SEED)
    pool = list(answers)
    scores = []
    for _ in range(shuffles):
        if chance is None:
            rng.shuffle(pool)
        else:
            pool = chance(rng)
        scores.append(figure(pool, golds))
    scores.sort()
    if higher_is_better:
        bound = scores[min(shuffles - 1, int((1 - TAIL) * shuffles))]
        beats = model > baseline and model > bound
    else:
        bound = scores[int(TAIL * shuffles)]
        beats = model < baseline and model < bound
    return {"figure": name, "higher_is_better": higher_is_better, "model": round(model, 4),
            "baseline": round(baseline, 4), "baseline_is": baseline_is, "n": n,
            "shuffles": shuffles, "chance": round(scores[shuffles // 2], 4),
            "chance_bound": round(bound, 4), "beats": beats}


# -- figures, each in one pass over the items ----------------------------------------------------

def macro_f1(labels: int, gold_counts: Sequence[int], answer_counts: Sequence[int]):
    """Macro-F1 of single-label answers (label indices) as a figure: the answer and gold counts
    per label are the same whatever the order, so a pass counts the matches only. A label with
    no answer and no gold item says nothing and is left out, as the report does."""
    def figure(answers: Sequence[int], golds: Sequence[int]) -> float:
        tp = [0] * labels
        for a, g in zip(answers, golds):
            if a == g:
                tp[a] += 1
        return _macro(tp, answer_counts, gold_counts)
    return figure


def macro_f1_sets(labels: int, gold_counts: Sequence[int], answer_counts: Sequence[int]):
    """Macro-F1 of label sets (bit masks, bit i for label i), each label scored on its own."""
    def figure(answers: Sequence[int], golds: Sequence[int]) -> float:
        tp = [0] * labels
        for a, g in zip(answers, golds):
            both = a & g
            while both:
                low = both & -both
                tp[low.bit_length() - 1] += 1
                both ^= low
        return _macro(tp, answer_counts, gold_counts)
    return figure


def _macro(tp: Sequence[int], answered: Sequence[int], gold: Sequence[int]) -> float:
    scored = [2 * t / (a + g) for t, a, g in zip(tp, answered, gold) if a + g]
    return sum(scored) / len(scored) if scored else 0.0


def counts(values: Sequence[int], labels: int, sets: bool = False) -> List[int]:
    """How many values hold each label (indices, or bit masks with ``sets``)."""
    out = [0] * labels
    for v in values:
        if sets:
            for i in range(labels):
                if v >> i & 1:
                    out[i] += 1
        else:
            out[v] += 1
    return out


def qwk(points: int):
    """The quadratic-weighted kappa of point indices (0 .. points-1); 0 where chance agreement
    leaves nothing to measure (a constant answer agrees no better than chance)."""
    def figure(answers: Sequence[int], golds: Sequence[int]) -> float:
        n = len(golds)
        cells = Counter(zip(golds, answers))
        gold = [0] * points
        answered = [0] * points
        for (g, a), c in cells.items():
            gold[g] += c
            answered[a] += c
        num = sum((g - a) ** 2 * c for (g, a), c in cells.items())
        den = sum((i - j) ** 2 * gold[i] * answered[j] for i in range(points)
                  for j in range(points)) / n
        return 0.0 if den == 0 else 1 - num / den
    return figure


def mae(answers: Sequence[float], golds: Sequence[float]) -> float:
    return sum(abs(a - g) for a, g in zip(answers, golds)) / len(golds)


def entity_micro_f1(answers: Sequence[frozenset], golds: Sequence[frozenset]) -> float:
    """Entity micro-F1 of per-item sets of (start, end, label): a predicted span counts when a
    gold span of its item has its start, end and label."""
    tp = sum(len(a & g) for a, g in zip(answers, golds))
    predicted = sum(len(a) for a in answers)
    gold = sum(len(g) for g in golds)
    return 2 * tp / (predicted + gold) if predicted + gold else 0.0


def spans(value: Any) -> frozenset:
    return frozenset((s["start"], s["end"], s["label"]) for s in value or []
                     if isinstance(s, dict))


TOKEN = re.compile(r"\w+|[^\w\s]")


def span_chance(answers: Sequence[frozenset], texts: Sequence[str]):
    """Chance for spans: offsets belong to their own item's text, so answers are not shuffled
    across items. Instead each item keeps as many spans as the model marked there, each as many
    tokens long (words and punctuation), put at random places in that item's own text, each
    with a label drawn from the model's labels: what marking that much of the text, knowing
    nothing of the entities, scores."""
    labels = [label for a in answers for _, _, label in a]
    plans = []
    for a, text in zip(answers, texts):
        tokens = [(m.start(), m.end()) for m in TOKEN.finditer(text or "")]
        lengths = [max(1, sum(1 for s, e in tokens if s >= start and e <= end))
                   for start, end, _ in a]
        plans.append((tokens, lengths))

    def draw(rng: random.Random) -> List[frozenset]:
        out = []
        for tokens, lengths in plans:
            marked = set()
            for length in lengths:
                if len(tokens) >= length:
                    first = rng.randrange(len(tokens) - length + 1)
                    marked.add((tokens[first][0], tokens[first + length - 1][1],
                                rng.choice(labels)))
            out.append(frozenset(marked))
        return out
    return draw
