"""What every annotation kind is: a ``Scheme`` record from the config, and the ``Kind`` whose
subclasses (one per ``annotation_type``) own that type's config keys, value check, form field,
form reading and export cell.

Values are checked against the scheme (and, for spans, the item's text) by ``Kind.check``, the
one place that decides whether a value may be stored; the annotate page, the JSON API and
``potato annotations import`` all go through it (``potato.labels.annotations.check_label``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from potato.config.reader import Path, Reader, dotted
from potato.markup import Safe, render

# The largest magnitude a number scheme without bounds stores: beyond it a float has no
# integer precision left, and a "number" that size is a typo or an attack.
MAX_MAGNITUDE = 1e15


class LabelError(ValueError):
    """A value that its scheme does not accept (the message names the scheme and the problem)."""


class _Keep:
    """``Kind.from_form``'s answer when the form says nothing about a scheme: leave it as is."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


@dataclass
class Scheme:
    name: str
    annotation_type: str
    labels: List[str]
    description: str = ""
    required: bool = False  # label_requirement: {required: true}
    # Per-label keys (span: key_value, or 1..9 in order); empty: no keys.
    label_keys: List[str] = field(default_factory=list)
    kind: Optional["Kind"] = field(default=None, repr=False, compare=False)
    display_logic: Optional[Any] = None  # upstream's display_logic (schemes/logic.py)


class Kind:
    """One annotation type. An instance belongs to one scheme and holds its options."""

    type_name = ""
    keys: Tuple[str, ...] = ()   # scheme keys of this type, beyond potato.schemes.COMMON_KEYS
    label_rule = "required"      # "required": a non-empty list; "none"; "optional-one";
    #                              "optional" (a non-empty list, or none: the kind's default)
    script: Optional[str] = None  # a static script the annotate page needs for this type
    label_values = False         # values are made of the scheme's labels (counted per label)
    answers = True               # annotators answer it (False: it only shows a note)
    marks_text = False           # the page gives its script the item's exact text (data-text)
    # What the server does with the values. Each attribute names one of a few ways, which the
    # module that does it implements; a new kind picks among them (or its module and that one
    # grow a way). None of the ways is named after a kind.
    aggregate_as = "choice"      # annotators' values become one (potato/labels/aggregate.py): "choice"
    #                              (majority, or Dawid-Skene), "multi" (label lists: majority),
    #                              "spans" (agreed spans), "agreed_entries" (list
    #                              entries at least half the annotators gave), "median",
    #                              "median_each", "mean_per_label", "majority_each" (lists of
    #                              marks: the majority of each place), "order" (orders: mean
    #                              rank), "whole"
    #                              (the value most gave, whole), "none" (not aggregated)
    one_label = False            # a value is one of a fixed set (a label, a scale point): the
    #                              annotators' agreement (Cohen's and Fleiss' kappa) applies
    suggests_labels = False      # the annotate page offers a model's label(s) to accept
    quantity = False             # a value is a quantity (not counted per label; a model needs
    #                              min_labels_per_class train items in all, not per label)
    predicts = "label"           # the prediction a run may return (potato/training/exchange/boundary.py):
    #                              "label" (one of the labels), "labels" (a set of them),
    #                              "point" (a scale's integer point), "value" (a bounded number),
    #                              "spans" (spans of the item's text)
    ranks_by: Optional[str] = None  # how active learning ranks an item by a model's prediction
    #                              (potato/project/queue_order.py): "distribution" (each
    #                              label's probability, summing to 1), "each" (each label's own
    #                              yes/no probability), "confidence" (the prediction's
    #                              confidence, or the model's item-level uncertainty), None (no
    #                              strategy fits: active learning refuses the scheme)
    report_as = "classes"        # the held-out report (potato/training/reports/report.py): "classes"
    #                              (accuracy, macro-F1, per label), "numbers" (MAE, RMSE,
    #                              Spearman), "entities" (entity-level F1)
    multi_label = False          # "classes": a value is a set of labels, scored label by label
    ordinal = False              # "classes": the labels are ordered points (adds MAE and kappa)
    confusion = False            # "classes": the report has a confusion matrix
    upstream_spans = False       # upstream's output holds the values in span_annotations

    def __init__(self, scheme: Scheme):
        self.scheme = scheme

    @property
    def name(self) -> str:
        return self.scheme.name

    # -- config --------------------------------------------------------------------------------
    @classmethod
    def form(cls, m: Dict[str, Any]) -> type:
        """The class that reads the scheme mapping ``m``: this one, or, for a kind whose
        modes are stored and aggregated differently (pairwise's ``mode: scale``), the
        subclass for its mode, listed in ``forms`` (found by ``schemes.kind_class`` too)."""
        return cls

    forms: Tuple[type, ...] = ()

    def parse(self, r: Reader, m: Dict[str, Any], p: Path) -> None:
        """Read this type's keys from the scheme mapping ``m`` (at key path ``p``)."""

    def settle(self, r: Reader, schemes: List[Scheme], p: Path) -> None:
        """Read what this scheme's keys say about the config's other schemes (span_link's
        span_schema), once every scheme is read (``schemes``: all of them, in order)."""

    # -- values --------------------------------------------------------------------------------
    def check(self, value: Any, text: Optional[str] = None) -> Any:
        """The normalised value, None for "no value", or LabelError. ``text`` is the item's."""
        raise NotImplementedError

    def answer_bytes(self, longest_text: int = 0) -> int:
        """The most bytes one answer of this scheme may take in a save request beyond the
        allowance every save has (``schemes.save_bytes``), however it is sent: a kind whose
        answers can be long (free text, spans that quote the item's text) says how long, so
        the server's cap follows from the project's own schemes and no answer the page
        accepts is refused for its size. ``longest_text``: the longest item text, in
        characters."""
        return 0

    def from_form(self, values: List[str]) -> Any:
        """The raw value a posted annotate form holds (``label:<scheme>`` fields), or KEEP."""
        return values[-1] if values else None

    def cell(self, value: Any) -> str:
        """The value as one CSV cell."""
        return "" if value is None else str(value)

    def summary(self) -> str:
        """One line for the admin page: what this scheme asks."""
        return ", ".join(self.scheme.labels)

    # -- upstream Potato's output (potato/labels/upstream_output.py) -----------------------------------
    def upstream_cell(self, value: Any) -> Dict[str, str]:
        """The value as upstream's ``label_annotations`` entry: by default ``{type: value}``."""
        return {self.type_name: str(value)}

    def from_upstream_cell(self, cell: Dict[str, Any]) -> Any:
        """The value an upstream ``label_annotations`` entry holds, for ``check`` to judge."""
        return next(iter(cell.values()), None) if cell else None

    def preselect(self, predicted: Any) -> Optional[str]:
        """The form value a model's prediction pre-selects on the annotate page (as a
        suggestion, where the annotator has chosen nothing), or None: choices are accepted
        with a key instead (pages.annotate_page), and other kinds suggest nothing here."""
        return None

    # -- training --------------------------------------------------------------------------------
    def training_schema(self) -> Dict[str, Any]:
        """The scheme's entry in a run's bundle beyond its type: what a trainer predicts
        (``labels``: the classes, as the values the store holds) and what bounds a prediction
        (checked by potato/training/exchange/boundary.py)."""
        return {"labels": list(self.scheme.labels)}

    # -- the item --------------------------------------------------------------------------------
    def item_fields(self) -> Tuple[str, ...]:
        """The item fields this scheme reads beside the text (pairwise's ``items_key``): a
        field named here may hold what ``check_item`` accepts (a list), even the text_key."""
        return ()

    def check_item(self, row: Dict[str, Any]) -> Optional[str]:
        """What is wrong with an item's record for this scheme (a sentence that follows the
        item's name, e.g. "has no 'responses' ..."), or None; checked when items are read."""
        return None

    def fits(self, value: Any, row: Dict[str, Any],
             answers: Optional[Dict[str, Any]] = None) -> Any:
        """``value`` (already ``check``ed) or LabelError when it does not fit the item's record
        ``row`` (process_reward: one reward per step of the item's trace) or the annotator's
        other ``answers`` for the item once this save is stored (span_link: the spans it links
        are marked); the annotate form and the JSON API ask, where the record is at hand. By
        default every value fits."""
        return value

    def image_field(self) -> Optional[str]:
        """The item field holding the image this scheme is drawn on (regions), "" for the
        project's ``image_key`` (or, without one, ``text_key``), None: not drawn on an image."""
        return None

    def text_field(self) -> Optional[str]:
        """The item field this scheme's config says its spans are marked in (extractive_qa's
        ``passage_field``), None when it names none: spans are marked in the item's text, so
        the config is refused unless it is ``item_properties.text_key``."""
        return None

    def initial(self, row: Dict[str, Any]) -> Any:
        """The value the scheme's inputs start with on an item the annotator has not answered
        (text_edit: the item's text to edit), from the item's record; None: empty inputs."""
        return None

    def view(self, row: Dict[str, Any]) -> Safe:
        """What the annotate page shows of the item's record for this scheme, beside its text
        (pairwise: the responses side by side); the same view is shown once."""
        return Safe("")

    # -- the annotate page ---------------------------------------------------------------------
    def key_count(self) -> int:
        """How many of the page's shared number keys (1..9, in scheme order) this type uses."""
        return 0

    def inputs(self, current: Any, first_key: int) -> Safe:
        """The scheme's inputs inside its fieldset; ``first_key`` is its first number key."""
        raise NotImplementedError

    def item_inputs(self, current: Any, first_key: int, row: Dict[str, Any]) -> Safe:
        """The inputs for the item whose record is ``row``: a kind whose inputs are made of
        the item (process_reward: a control per step) reads it here; by default ``inputs``."""
        return self.inputs(current, first_key)

    def suggestion(self, prediction: Optional[Dict[str, Any]]) -> Safe:
        """A model's suggestion that this kind's own script shows (spans); choices are shown
        by the annotate page itself, so by default nothing."""
        return Safe("")

    def fieldset(self, current: Any, first_key: int, row: Optional[Dict[str, Any]] = None
                 ) -> Safe:
        s = self.scheme
        desc = render('<p class="hint">{d}</p>', d=s.description) if s.description else ""
        req = render('<span class="required"> (required)</span>') if s.required else ""
        logic = render(' data-show-when="{j}"', j=s.display_logic.as_json()) \
            if s.display_logic else ""
        return render('<fieldset class="scheme scheme-{t}" data-scheme="{n}" data-type="{t}"'
                      '{r}{logic}><legend>{n}{req}</legend>{desc}'
                      '<input type="hidden" name="present:{n}" value="1">{inputs}</fieldset>',
                      t=self.type_name, n=s.name, r=Safe(' data-required="1"' if s.required
                                                         else ""), logic=Safe(logic),
                      req=req, desc=Safe(desc),
                      inputs=self.item_inputs(current, first_key, row or {}))

    # -- helpers for subclasses ----------------------------------------------------------------
    def fail(self, problem: str) -> LabelError:
        return LabelError(f"scheme {self.name!r} ({self.type_name}): {problem}")

    def only_keys(self, where: str, value: Any, allowed, needs: str, noun: str) -> Dict:
        """``value`` as an object with keys from ``allowed`` only (a span, a region), or
        LabelError naming ``where``: ``needs`` says what it must have, ``noun`` what it is."""
        if not isinstance(value, dict):
            raise self.fail(f"{where} must be an object with {needs}, not {short(value)}.")
        extra = [k for k in value if k not in allowed]
        if extra:
            raise self.fail(f"{where} has the key {short(extra[0])}; a {noun} has only "
                            f"{', '.join(allowed)}.")
        return value

    def offsets(self, where: str, mark: Dict[str, Any], text: str) -> Tuple[int, int]:
        """(start, end) of a mark of the item's text (a span, a link's end): whole numbers
        with 0 <= start < end <= len(text), or LabelError naming ``where``."""
        for key in ("start", "end"):
            v = mark.get(key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise self.fail(f"{where}: {key} must be a whole number (a character offset), "
                                f"not {short(v)}.")
        start, end = mark["start"], mark["end"]
        if not 0 <= start < end <= len(text):
            raise self.fail(f"{where}: start {short(start)} and end {short(end)} must satisfy "
                            f"0 <= start < end <= {len(text)} (the item's text has {len(text)} "
                            f"characters).")
        return start, end

    def number(self, value: Any, what: str = "a number") -> float:
        """A finite int or float (never a bool or a string), or LabelError."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"takes {what}, not {short(value)}.")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(f"takes a finite number, not {value!r}.")
        if abs(value) > MAX_MAGNITUDE:
            raise self.fail(f"{short(value)} is too large (at most {MAX_MAGNITUDE:g} either "
                            f"way).")
        return value


def parse_number_text(text: str) -> Any:
    """A form field's number (int when it has no fraction), the text itself when it is not a
    number (the check then names it), or None when empty."""
    text = text.strip()
    if not text:
        return None
    if len(text) > 40:
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def short(value: Any) -> str:
    """A value for a message: its repr, cut to 80 characters."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def number_key(r: Reader, m: Dict[str, Any], key: str, p: Path, default=None):
    """A finite number key of a scheme (YAML), within MAX_MAGNITUDE."""
    value = r.number(m, key, p, default)
    if isinstance(value, float) and not math.isfinite(value) or (
            value is not None and abs(value) > MAX_MAGNITUDE):
        r.error(p + (key,), f"{dotted(p + (key,))} must be a finite number of at most "
                            f"{MAX_MAGNITUDE:g} either way, not {value}.")
        return default
    return value
