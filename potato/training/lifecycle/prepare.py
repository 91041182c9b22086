"""A run's inputs, from the server's store: the bundle (items, labels, splits) and the spec the
worker reads. Server side; what it writes is what travels to the run (potato/training/remote/)."""

import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from potato.labels import aggregate
from potato.project import media
from potato.config.settings import Config
from potato.project.store import Store
from potato.training.exchange import media_bundle
from potato.training.backends import Outcome
from potato.training.remote import bundle as bundle_mod, trainers
from potato.training.remote.paths import RunPaths, write_json
from potato.training.core.runs import Run
from potato.training.reports import run_texts


@dataclass(frozen=True)
class Destination:
    """Where the run's worker executes, as far as its inputs differ: ``local``: on this
    server (the spec gets its device, threads, store); ``heldout_on_server`` (None: not
    ``local``): the test split's labels stay here; ``python_fix``: the backend's way to a
    Python with the trainer's packages (the worker quotes it when a trainer cannot be
    imported)."""

    local: bool
    heldout_on_server: Optional[bool] = None
    python_fix: Optional[str] = None


def prepare(cfg: Config, store: Store, run: Run, paths: RunPaths, dest: Destination,
            set_step: Callable[[str], None], log: Callable[[str], None]) -> Optional[Outcome]:
    """Build the run's bundle and spec in ``paths`` for a worker at ``dest``; an Outcome when
    the run cannot start."""
    local, python_fix = dest.local, dest.python_fix
    heldout_on_server = not local if dest.heldout_on_server is None else dest.heldout_on_server
    if os.path.isdir(paths.bundle):
        shutil.rmtree(paths.bundle)
    paths.create()
    schemas = {}
    for name in run.schemas:
        scheme = cfg.scheme(name)
        if scheme is None:
            return Outcome("error", "Scheme %s is no longer in the config." % name)
        schemas[name] = dict({"type": scheme.annotation_type}, **scheme.kind.training_schema())
        if scheme.description:  # the LLM trainer's prompt quotes it
            schemas[name]["description"] = scheme.description
    mt = cfg.model_training
    info = trainers.get(run.trainer)
    reads = info.media if info is not None else ()  # a text model travels without images
    items = [(r["id"], r["text"], bundle_media(cfg, r["data"], reads)) for r in
             store.conn().execute("SELECT id, text, data FROM items WHERE active=1 "
                                  "ORDER BY position")]
    if not local:  # the files travel by content: listed by sha256 (training/media_bundle.py)
        items = media_bundle.to_cache_form(cfg, items, paths.media_index, log)
    labels: Dict[str, Dict[str, List[Any]]] = {}
    decided: Dict[str, Dict[str, Any]] = {}
    fractions = (mt.splits.train, mt.splits.val, mt.splits.test)
    active = {item[0] for item in items}
    for name in schemas:
        votes = scheme_votes(store, name)
        result = aggregate.aggregate(schemas[name]["type"], votes, mt.aggregation)
        decided[name] = result.labels
        log("%s: labels aggregated by %s%s" % (name, result.method, "; " + result.note
                                                 if result.note else ""))
        for item_id, by_annotator in votes.items():
            labels.setdefault(item_id, {})[name] = list(by_annotator.values())
        short = left_out(cfg, decided[name], schemas[name]["labels"], active)
        if short and len(schemas[name]["labels"]) - len(short) >= 2:
            # a label too few items have: this run does not learn it (issue 35, item 4); with
            # fewer than two left the run is refused before it queues (refusal)
            schemas[name]["all_labels"] = list(schemas[name]["labels"])  # what is scored
            schemas[name]["labels"] = [x for x in schemas[name]["labels"] if x not in short]
            schemas[name]["left_out"] = [[x, n] for x, n in short.items()]
            log(run_texts.left_out_sentence(name, short, mt.min_labels_per_class))
    skipped: Dict[str, int] = {}
    agree = _agreed(cfg, schemas, decided, skipped)
    ranking = ranks(cfg, run)  # active learning: the items that need labels travel too
    manifest = bundle_mod.build(paths.bundle, items, labels, schemas, fractions=fractions,
                                seed=mt.split_seed,
                                include_unlabeled=mt.writeback.include_unlabeled
                                or ranking,
                                heldout=paths.heldout if heldout_on_server else None,
                                agree=agree)
    c = manifest["counts"]
    log(_bundle_sentence(manifest, skipped))
    if c["train"] == 0:
        return Outcome("error", "No labelled items in the train split for %s: label some "
                                "items (or import labels) before training."
                       % ", ".join(run.schemas))
    spec = dict(RunPaths.SPEC_NAMES, run_id=run.run_id, trainer=run.trainer,
                schemas=schemas, params=run.params, device="auto", num_threads=None,
                extra={}, **({"ranking": True} if ranking else {}))
    if python_fix:  # the backend's words for a Python with the trainer's packages
        spec["python_fix"] = python_fix
    if local:
        # device, num_threads and max_ram_mb describe this machine. A remote run uses its
        # backend's num_threads (set by the agent) and device auto over the GPUs it got;
        # the server's paths never leave it.
        spec.update(device=mt.device, num_threads=mt.num_threads,
                    extra={"db_path": cfg.db_path, "runs_dir": cfg.runs_dir})
    write_json(paths.spec, spec)
    set_step("bundle ready: %d items" % sum(c.values()))
    return None


def _bundle_sentence(manifest, skipped: Dict[str, int]) -> str:
    c = manifest["counts"]
    ties = sum(manifest["ties_skipped"].values()) - sum(skipped.values())
    return "bundle: %d train, %d val, %d test, %d unlabeled items; %s%s" % (
        c["train"], c["val"], c["test"], c["unlabeled"],
        "no tie skipped" if not ties else "%d tied item%s skipped (no label agreed)" % (
            ties, "" if ties == 1 else "s"),
        "; not trained on, for a left-out label: %s" % ", ".join(
            "%d %s label%s" % (n, name, "" if n == 1 else "s") for name, n in skipped.items())
        if skipped else "")


def ranks(cfg: Config, run: Run) -> bool:
    """Whether the run ranks items for active learning: the items that need labels are in
    its bundle and predicted, with what a query strategy ranks by (the spec's ``ranking``)."""
    return cfg.active_learning.enabled and bool(set(run.schemas) &
                                                set(cfg.active_learning.schemes))


def bundle_media(cfg: Config, data: str, reads=("image", "audio")) -> Optional[Dict[str, Any]]:
    """An item's "media" entry in the bundle (remote/media.py), from its stored record: the
    file in place or the URL; None unless its kind is one of ``reads`` (the trainer's
    ``media``). A file that cannot be used is left out here; ``potato validate`` and the
    annotate page report it. A URL no host should fetch (not a plain http(s) address: a tab,
    a space, user info ...) travels with its ``error``, so that item alone is left out."""
    if not reads or not media.keys(cfg):
        return None
    try:
        ref = media.item_media(cfg, json.loads(data))
        if ref is None or ref.kind not in reads:
            return None
        if ref.is_url:
            if media.url_origin(ref.url) is None:
                return {"kind": ref.kind, "url": ref.url[:2000], "error": "%s is not a plain "
                        "http:// or https:// address (potato validate lists it)"
                        % ascii(ref.url[:200])}
            return {"kind": ref.kind, "url": ref.url}
        return {"kind": ref.kind, "path": media.probe(cfg, ref)[0]}
    except (media.MediaError, ValueError):
        return None


def scheme_votes(store: Store, scheme: str, active=None) -> Dict[str, Dict[str, Any]]:
    """One scheme's labels as ``{item_id: {annotator: label}}`` (only ``active`` items when
    given: those still in the data files)."""
    votes: Dict[str, Dict[str, Any]] = {}
    for item_id, annotator, label in store.conn().execute(
            "SELECT item_id, annotator, label FROM annotations WHERE scheme=?", (scheme,)):
        if active is None or item_id in active:
            votes.setdefault(item_id, {})[annotator] = json.loads(label)
    return votes


def _agreed(cfg: Config, schemas, decided, skipped: Dict[str, int]):
    """The bundle's ``agree``: an item's aggregated label, without the labels a scheme leaves
    out outside the test split (a single label left out: no label, counted in ``skipped``)."""
    mt = cfg.model_training
    fractions = (mt.splits.train, mt.splits.val, mt.splits.test)

    def agree(item_id, name, _):
        label = decided[name].get(item_id)
        drop = [x for x, _ in schemas[name].get("left_out", ())]
        if not drop or label is None or \
                bundle_mod.split_of(item_id, mt.split_seed, fractions) == "test":
            return label  # the test split keeps its gold labels: the report stays honest
        if isinstance(label, list):  # labels of a multi-label item, or spans: keep the rest
            return [x for x in label if (x.get("label") if isinstance(x, dict) else x)
                    not in drop]
        if label in drop:
            skipped[name] = skipped.get(name, 0) + 1
            return None
        return label
    return agree


def _train_counts(cfg: Config, decided: Dict[str, Any], classes: List[Any],
                  active=None) -> Dict[Any, int]:
    """How many train-split items have each class (a label, or a Likert point) as their
    aggregated label; the same splits as the bundle's."""
    mt = cfg.model_training
    fractions = (mt.splits.train, mt.splits.val, mt.splits.test)
    train: Dict[Any, int] = {label: 0 for label in classes}
    for item_id, label in decided.items():
        if label is None or (active is not None and item_id not in active):
            continue
        if bundle_mod.split_of(item_id, mt.split_seed, fractions) == "train":
            points = [label] if isinstance(label, int) else []  # a Likert point
            for one in dict.fromkeys(bundle_mod.label_names(label) or points):
                if one in train:
                    train[one] += 1
    return train


def left_out(cfg: Config, decided: Dict[str, Any], classes: List[Any],
             active=None) -> Dict[Any, int]:
    """The classes a run leaves out, with their count of train items: those fewer than
    ``model_training.min_labels_per_class`` train items have (a Likert point nobody chose, a
    rare label). The model does not predict them; the test split still scores them."""
    counts = _train_counts(cfg, decided, classes, active)
    return {label: n for label, n in counts.items()
            if n < cfg.model_training.min_labels_per_class}


def refusal(cfg: Config, store: Store, schemes: List[str]) -> Optional[str]:
    """Why a run on ``schemes`` could say nothing (too few labels per label in the train split,
    or no labelled test item to score it on), or None. The same splits as the bundle's."""
    mt = cfg.model_training
    fractions = (mt.splits.train, mt.splits.val, mt.splits.test)
    active = {r[0] for r in store.conn().execute("SELECT id FROM items WHERE active=1")}
    for name in schemes:
        scheme = cfg.scheme(name)
        if scheme is None:
            continue
        decided = aggregate.aggregate(scheme.annotation_type, scheme_votes(store, name, active),
                                      mt.aggregation).labels
        # The classes a model learns: the labels, or a Likert scale's points (integers);
        # none for a number scheme, which needs as many train items in all instead.
        classes = scheme.kind.training_schema()["labels"]
        train = _train_counts(cfg, decided, classes)
        splits = [bundle_mod.split_of(item_id, mt.split_seed, fractions)
                  for item_id, label in decided.items() if label is not None]
        test, in_train = splits.count("test"), splits.count("train")
        kept = [label for label, n in train.items() if n >= mt.min_labels_per_class]
        if classes and len(kept) < 2:
            return ("Scheme %s has %s in the train split; a model needs at least two labels with "
                    "%d labelled items each (model_training.min_labels_per_class), so it can "
                    "tell them apart. Label more items before training."
                    % (name, "; ".join("%d labelled item%s with %s" % (
                        n, "" if n == 1 else "s", label) for label, n in train.items()),
                       mt.min_labels_per_class))
        if not classes and scheme.kind.quantity and \
                in_train < mt.min_labels_per_class:
            return ("Scheme %s has %d labelled item(s) in the train split; a model needs at "
                    "least %d (model_training.min_labels_per_class). Label more items before "
                    "training." % (name, in_train, mt.min_labels_per_class))
        if test == 0:
            return ("Scheme %s has no labelled item in the test split, so the run could not be "
                    "scored. Label more items (or raise model_training.splits.test)." % name)
    return None
