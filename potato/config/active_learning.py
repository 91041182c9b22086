"""Active learning's settings: ``assignment_strategy: active_learning`` and the
``active_learning:`` block, in upstream Potato's vocabulary.

The model in use (any trainer, on any backend) ranks the items that still need labels; the
order itself is potato/project/queue_order.py. Upstream trains a scikit-learn classifier inside
its server; here the automatic-retraining settings (``model_training.auto_retrain``: trainer,
backend, params, min_interval_s) say which model, so each of upstream's classifier keys gets a
decided answer below (``UPSTREAM``): mapped, or refused with what to set instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from potato.config.reader import Path, Reader, dotted

# query_strategy: how an item's score is computed (potato/project/queue_order.py)
STRATEGIES = ("uncertainty", "margin", "entropy", "diversity", "hybrid")
ALIASES = {"least_confidence": "uncertainty", "least_confident": "uncertainty",
           "margin_sampling": "margin", "entropy_sampling": "entropy"}
COLD_STARTS = ("random", "fixed_order")  # the order before a model is in use
KEYS = ("enabled", "schema_names", "query_strategy", "hybrid_weights",
        "min_instances_for_training", "update_frequency", "max_instances_to_reorder",
        "random_sample_percent", "cold_start_strategy", "cold_start_batch_size")

_MODEL = ("the model that orders the queue here is model_training.auto_retrain.trainer "
          "(text-naive-bayes unless set; hf-text-classification fine-tunes a transformer on "
          "any backend)")
# Upstream's other active_learning keys: (refused?, the sentence). Refused: keeping the config
# would change what annotators are given or which labels are stored, silently.
UPSTREAM: Dict[str, tuple] = {
    **{k: (False, "scikit-learn's classifier or vectorizer is not used: " + _MODEL +
           "; set its params under model_training.auto_retrain.params")
       for k in ("classifier_name", "vectorizer_name", "classifier_kwargs", "vectorizer_kwargs",
                 "classifier_params", "vectorizer_params")},
    "calibrate_probabilities": (False, "the ranking uses the trainer's own probabilities "
                                       "(text-naive-bayes fits a softmax temperature on the "
                                       "validation split, its calibrate param; the hf- "
                                       "trainers' softmax is used as it is)"),
    "database_enabled": (False, "the order and its reasons are kept in the project's store "
                                "(potato.db)"),
    "database_config": (False, "the order and its reasons are kept in the project's store "
                               "(potato.db)"),
    "min_annotations_per_instance": (False, "every label is used; several annotators' labels "
                                            "of an item are combined by "
                                            "model_training.aggregation"),
    "resolution_strategy": (False, "several annotators' labels of an item are combined by "
                                   "model_training.aggregation (majority or consensus)"),
    "bald_params": (True, "query_strategy bald is not implemented here. Remove bald_params and "
                          "use uncertainty, margin, entropy, diversity or hybrid"),
    "use_icl_ensemble": (True, "an LLM's in-context labels are not blended into the ranking "
                               "here. Remove it; to rank with an LLM, set "
                               "model_training.auto_retrain.trainer to hf-llm-classification"),
    "icl_ensemble_params": (True, "an LLM's in-context labels are not blended into the "
                                  "ranking here. Remove it"),
    "annotation_routing": (True, "routing would store a model's labels as annotations without "
                                 "an annotator. Remove it; a model's labels are shown as "
                                 "suggestions (model_training.writeback)"),
    "routing_thresholds": (True, "routing would store a model's labels as annotations without "
                                 "an annotator. Remove it; writeback.min_confidence sets which "
                                 "suggestions are shown"),
    "verification_sample_rate": (True, "routing is not implemented here. Remove it"),
    "llm": (True, "no LLM is called by the server here. Remove it; to rank with an LLM, set "
                  "model_training.auto_retrain.trainer to hf-llm-classification"),
}


@dataclass
class ActiveLearning:
    """``enabled``: the model in use orders the queue; ``schemes``: the schemes whose model
    ranks (their scores are averaged); the rest as upstream names them."""
    enabled: bool = False
    schemes: List[str] = field(default_factory=list)
    strategy: str = "uncertainty"
    weights: Dict[str, float] = field(default_factory=lambda: {"uncertainty": 0.7,
                                                               "diversity": 0.3})
    min_instances: int = 10          # labels before the first run
    update_frequency: int = 5        # new labels between runs
    max_reorder: Optional[int] = None  # None: every item that needs labels is ranked
    random_percent: float = 0.2      # of the ranked head, drawn at random instead
    cold_start: str = "random"       # the order before a model is in use


def parse(r: Reader, raw: Any, strategy: str, schemes) -> ActiveLearning:
    """The settings from upstream's ``active_learning`` block and ``assignment_strategy``,
    with problems recorded; ``schemes``: the config's (each with its kind)."""
    path: Path = ("active_learning",)
    al = ActiveLearning()
    valid = KEYS + tuple(UPSTREAM)
    m = r.mapping(raw, path, valid, "active_learning")
    named = strategy == "active_learning"
    enabled = r.boolean(m, "enabled", path, named)
    if named and not enabled:
        r.error(path + ("enabled",), "assignment_strategy is active_learning and "
                                     "active_learning.enabled is false: say which you mean. "
                                     "Set enabled: true, or choose another "
                                     "assignment_strategy.")
        return al
    if enabled and not named and ("assignment_strategy",) in r.lines:
        r.error(("assignment_strategy",), "active_learning.enabled is true and "
                                          "assignment_strategy is %s: the model cannot order "
                                          "the queue and %s too. Set assignment_strategy: "
                                          "active_learning, or active_learning.enabled: false."
                % (strategy, strategy))
        return al
    for key, (refused, why) in UPSTREAM.items():
        if key not in m or (key == "use_icl_ensemble" and m[key] is False) or (
                key == "annotation_routing" and m[key] is False):
            continue
        if key == "llm" and (m[key] is False or isinstance(m[key], dict)
                             and m[key].get("enabled") is False):
            continue
        text = "active_learning.%s: %s." % (key, why)
        (r.error if refused else r.warn)(path + (key,), text)
    if not enabled:
        return al
    al.enabled = True
    al.strategy = _strategy(r, m, path)
    if al.strategy == "hybrid":
        al.weights = _weights(r, m, path, al.weights)
    cold = r.text(m, "cold_start_strategy", path, al.cold_start)
    if cold not in COLD_STARTS:
        r.error(path + ("cold_start_strategy",),
                "active_learning.cold_start_strategy is %r: before a model is in use the order "
                "is random (the default) or fixed_order (data-file order); an LLM's cold start "
                "is not implemented here. Set one of those." % (cold,))
    else:
        al.cold_start = cold
    r.number(m, "cold_start_batch_size", path, None, 1, integer=True)  # the threshold below
    al.min_instances = r.number(m, "min_instances_for_training", path, al.min_instances, 2,
                                integer=True)
    al.update_frequency = r.number(m, "update_frequency", path, al.update_frequency, 1,
                                   integer=True)
    al.max_reorder = r.number(m, "max_instances_to_reorder", path, None, 1, integer=True)
    percent = r.number(m, "random_sample_percent", path, al.random_percent, 0, 100)
    # upstream writes a fraction (0.2); 20 means 20 %
    al.random_percent = percent / 100.0 if percent > 1 else float(percent)
    if percent == 1:
        r.warn(path + ("random_sample_percent",),
               "active_learning.random_sample_percent is 1: every ranked place is drawn at "
               "random (upstream writes a fraction: 0.2 is 20 %), so the model orders nothing. "
               "Write 0.01 for 1 %, or a lower fraction.")
    al.schemes = _schemes(r, m, path, schemes)
    return al


def _strategy(r: Reader, m: Dict[str, Any], path: Path) -> str:
    raw = m.get("query_strategy", "uncertainty")
    name = raw.strip().lower().replace("-", "_") if isinstance(raw, str) else None
    name = ALIASES.get(name, name)
    if name in STRATEGIES:
        return name
    if name in ("badge", "bald"):
        why = ("%s is upstream's and not implemented here; hybrid (uncertainty with diversity) "
               "is the nearest" % name)
    else:
        why = "%r is not a query strategy" % (raw,)
    r.error(path + ("query_strategy",), "active_learning.query_strategy: %s. Use one of %s."
            % (why, ", ".join(STRATEGIES)))
    return "uncertainty"


def _weights(r: Reader, m: Dict[str, Any], path: Path, default: Dict[str, float]):
    raw = m.get("hybrid_weights")
    if raw is None:
        return dict(default)
    where = path + ("hybrid_weights",)
    if not isinstance(raw, dict) or not raw:
        r.error(where, "active_learning.hybrid_weights must be a mapping of strategies to "
                       "weights, such as {uncertainty: 0.7, diversity: 0.3}.")
        return dict(default)
    out = {}
    for key, value in raw.items():
        name = ALIASES.get(key, key)
        if name not in STRATEGIES or name == "hybrid":
            r.error(where + (key,), "active_learning.hybrid_weights.%s is not a strategy hybrid "
                                    "combines; use uncertainty, margin, entropy and diversity."
                    % (key,))
            continue
        w = r.number(raw, key, where, None, 0, 1000)
        if w is not None:
            out[name] = out.get(name, 0.0) + float(w)
    if out and sum(out.values()) <= 0:
        r.error(where, "active_learning.hybrid_weights are all 0: give at least one weight "
                       "above 0.")
    return out if out and sum(out.values()) > 0 else dict(default)


def _schemes(r: Reader, m: Dict[str, Any], path: Path, schemes) -> List[str]:
    """The schemes named (or every scheme a strategy fits); a scheme no strategy fits is an
    error naming why."""
    fits = [s.name for s in schemes if s.kind is not None and s.kind.ranks_by]
    names = r.text_list(m, "schema_names", path)
    if not names:
        if schemes and not fits:
            r.error(path, "active_learning: no scheme of this project can be ranked by a "
                          "model's uncertainty (%s). Active learning needs a radio, select, "
                          "multiselect, likert or span scheme; choose another "
                          "assignment_strategy." % ", ".join(
                              "%s is %s" % (s.name, s.annotation_type) for s in schemes))
        return fits
    out = []
    for i, name in enumerate(names):
        scheme = next((s for s in schemes if s.name == name), None)
        where = path + ("schema_names", i)
        if scheme is None:
            r.error(where, "%s names %r, which is not a scheme of this config (%s)."
                    % (dotted(where), name, ", ".join(s.name for s in schemes) or "none"))
        elif scheme.kind is not None and not scheme.kind.ranks_by:
            r.error(where, "%s names %s, a %s scheme: a model's answer to it has no "
                           "uncertainty to rank items by. "
                           "Name radio, select, multiselect, likert or span schemes, or "
                           "remove it." % (dotted(where), name, scheme.annotation_type))
        elif name not in out:
            out.append(name)
    return out
