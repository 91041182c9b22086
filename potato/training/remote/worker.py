"""``python -m potato.training.worker --spec SPEC``: train, predict, report. The same program on
every backend (standard library only at module level; trainers import their own packages).

It reads ``spec.json``, loads the bundle, runs the trainer, writes ``predictions.jsonl``
(val, test and unlabeled items) and emits JSON-lines events on stdout (see protocol.py). Success
is a ``result`` event and exit 0; every failure emits an ``error`` event and exits with one of
the reserved codes in protocol.py. SIGTERM asks the trainer to stop at its next check.

Spec fields (paths relative to the spec's directory, so a run directory can be moved)::

    run_id, trainer, schemas {name: {type, labels}}, params {..}, bundle, artifacts,
    predictions, device ("auto", "cpu", "mps", "cuda", "cuda:N"), num_threads, extra {..}
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback

from potato.training.remote import protocol as events
from potato.training.remote import media, model_source, nodes, trainers
from potato.training.remote.bundle import BundleError, read
from potato.training.remote.paths import RunPaths, write_atomic


class Cancelled(Exception):
    pass


class RunFailure(Exception):
    """A failure the trainer can explain in one sentence (no traceback needed)."""


class Context:
    """What a trainer gets: the bundle, params, where to save, how to report and stop."""

    RunFailure = RunFailure
    Cancelled = Cancelled

    def __init__(self, spec, base, emitter):
        self.spec = spec
        self.run_id = spec.get("run_id", "")
        self.params = spec.get("params", {})
        self.schemas = spec["schemas"]
        self.device_request = spec.get("device") or "auto"
        self.extra = spec.get("extra") or {}
        self.artifacts = RunPaths.in_spec(base, spec, "artifacts")
        self.bundle_dir = RunPaths.in_spec(base, spec, "bundle")
        self.emitter = emitter
        self.bundle = None
        self.cancelled = False
        self.spec_path = None  # set by run(): data-parallel ranks read the same spec
        self.owns_process = False

    def check_cancelled(self):
        if self.cancelled:
            raise Cancelled()

    def log(self, message, level="info"):
        self.emitter.log(message, level)


def watch_parent(on_gone, done, parent=None, interval=1.0, name="parent-watch"):
    """Call ``on_gone()`` once when the process that started us (``parent``: by default our
    parent now) dies: a SIGKILLed supervisor or agent must not leave a worker training on,
    unseen, nor a worker its data-parallel ranks (rank.py). Ends when ``done`` is set."""
    parent = os.getppid() if parent is None else parent

    def watch():
        while not done.wait(interval):
            if os.getppid() != parent:
                on_gone()
                return

    t = threading.Thread(target=watch, daemon=True, name=name)
    t.start()
    return t


def _fetch_url_media(ctx, base, emitter, info):
    """URL media, fetched by this host into the run directory (remote/media.py), for a
    trainer that reads media (``info.media``); items whose media could not be had are left
    out of the run, each named in the log. Returns how many were left out."""
    if not info.media:
        return 0
    try:
        fetched, failed = media.fetch_urls(
            ctx.bundle.items, os.path.join(base, media.URL_DIR), emitter.status,
            lambda error: emitter.log(error, "warning"))
    except media.TooManyFailed as e:
        raise RunFailure(str(e))
    if fetched or failed:
        emitter.log("media URLs: %d fetched, %d failed (those items are left out)"
                    % (fetched, failed))
    ctx.bundle.items, left = media.left_out(ctx.bundle.items)
    for item in left[:20]:
        emitter.log("item %s left out of this run: %s" % (item["id"], item["media"]["error"]),
                    "warning")
    if len(left) > 20:
        emitter.log("%d more items left out for their media" % (len(left) - 20), "warning")
    return len(left)


def _fail(emitter, code, message, kind, **fields):
    emitter.emit("error", message=message, kind=kind, **fields)
    return code


def _import_failed(emitter, info, exc, python_fix=None):
    """A trainer whose module (or a package it loads) cannot be imported: the exit code.
    ``python_fix``: the backend's way to point at a Python that has the packages (the spec's;
    a spec from an older server has none)."""
    fix = python_fix if isinstance(python_fix, str) and python_fix else \
        trainers.DEFAULT_PYTHON_FIX
    hint = (" (%s, %s)" % (info.install_hint, fix)) if info.install_hint else ""
    return _fail(emitter, events.EXIT_MISSING_DEPENDENCY,
                 "Trainer '%s' could not be imported. %s (Python %s)%s"
                 % (info.name, exc, sys.executable, hint), "missing_dependency")


def _is_oom(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return isinstance(exc, MemoryError) or "out of memory" in text.lower()


def run(spec_path, emitter=None, owns_process=False):
    """Run the worker; returns its exit code (the process exits with it). ``owns_process``:
    this is the worker's own process (main), which a data-parallel run may end with os._exit
    when a rank's failure leaves rank 0 stuck (trainers/launch.py)."""
    emitter = emitter or events.Emitter()
    try:
        with open(spec_path, encoding="utf-8") as f:
            spec = json.load(f)
        base = os.path.dirname(os.path.abspath(spec_path))
        ctx = Context(spec, base, emitter)
        ctx.spec_path = os.path.abspath(spec_path)
        ctx.owns_process = owns_process
    except (OSError, ValueError, KeyError, TypeError) as e:
        return _fail(emitter, events.EXIT_BAD_SPEC, "the run spec %s cannot be read: %s"
                     % (spec_path, e), "bad_spec")

    def on_term(signum, frame):
        ctx.cancelled = True

    emitter.emit("where", **events.here())
    previous = signal.signal(signal.SIGTERM, on_term)
    done = threading.Event()
    watcher = watch_parent(lambda: setattr(ctx, "cancelled", True), done)
    try:
        return _train(ctx, spec, base, emitter)
    finally:
        done.set()
        watcher.join(5)
        signal.signal(signal.SIGTERM, previous)


def _train(ctx, spec, base, emitter):
    """Import the trainer, train, predict; the exit code."""
    if spec.get("num_threads"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(spec["num_threads"])

    info = trainers.get(spec.get("trainer"))
    if info is None:
        return _fail(emitter, events.EXIT_BAD_SPEC, "unknown trainer %r" % spec.get("trainer"),
                     "bad_spec")
    try:
        trainer_cls = trainers.load(info)
    except ImportError as e:
        return _import_failed(emitter, info, e, spec.get("python_fix"))
    try:
        emitter.status("reading the bundle")
        ctx.bundle = read(ctx.bundle_dir)
        os.makedirs(ctx.artifacts, exist_ok=True)
        counts = ctx.bundle.manifest.get("counts", {})
        emitter.log("bundle: %s" % ", ".join("%s %s" % (n, k) for k, n in counts.items()))
        left_out = _fetch_url_media(ctx, base, emitter, info)
        if nodes.requested() > 1 and "processes" not in ctx.params:
            emitter.log("%s trains in one process: the other %d node(s) of this SLURM job stay "
                        "idle; set nodes to 1 for it (nodes is for the data-parallel hf "
                        "trainers)" % (info.name, nodes.requested() - 1), "warning")
        for model in trainers.model_sources(info, ctx.params):
            emitter.status("finding model %s" % model)
            ok, sentence = model_source.resolve(model)
            if not ok:
                raise RunFailure(sentence)
            emitter.log(sentence)
        started = time.time()
        trainer = trainer_cls(ctx)
        metrics = trainer.train() or {}
        ctx.check_cancelled()
        emitter.status("predicting")
        n = _predict(ctx, trainer, RunPaths.in_spec(base, spec, "predictions"))
        metrics["train_seconds"] = round(time.time() - started, 2)
        metrics["predictions"] = n
        if left_out:
            metrics["media_left_out"] = left_out
        emitter.emit("result", metrics=metrics)
        return events.EXIT_OK
    except Cancelled:
        return _fail(emitter, events.EXIT_CANCELLED, "the run was cancelled", "cancelled")
    except BundleError as e:
        return _fail(emitter, events.EXIT_BAD_SPEC, str(e), "bad_spec")
    except RunFailure as e:  # a whole sentence: nothing from stderr is added to it
        return _fail(emitter, events.EXIT_OTHER, str(e), "other", complete=True)
    except ImportError as e:
        return _import_failed(emitter, info, e, spec.get("python_fix"))
    except Exception as e:  # the worker's choke point: the detail goes to stderr
        traceback.print_exc()
        if _is_oom(e):
            return _fail(emitter, events.EXIT_OUT_OF_MEMORY, "the training process ran out of "
                         "memory: %s" % str(e).splitlines()[0][:300], "out_of_memory")
        first = str(e).splitlines()[0][:300] if str(e) else ""
        return _fail(emitter, events.EXIT_OTHER, "%s: %s%s" % (type(e).__name__, first,
                                                               _known_hint(first)), "other")


# Failures whose cause is known (the tutorial's common failures): what to do about them.
KNOWN_HINTS = (
    ("libnvrtc-builtins", "The host's torch and its nvidia-cuda-nvrtc package are for different "
                          "CUDA versions: install the nvidia-cuda-nvrtc that matches the torch "
                          "build, or point python at another interpreter."),
)


def _known_hint(message):
    for fragment, hint in KNOWN_HINTS:
        if fragment in message:
            return " " + hint
    return ""


def _predict(ctx, trainer, path, batch=256):
    """Predict every val, test and unlabeled item for each scheme; returns the line count.

    A trainer that re-scores stored predictions instead (``prediction_records``) gives them
    as they are.
    """
    if hasattr(trainer, "prediction_records"):
        lines = [json.dumps(r, ensure_ascii=False) for r in trainer.prediction_records()]
        write_atomic(path, "".join(line + "\n" for line in lines))
        return len(lines)
    items = [it for it in ctx.bundle.items if it["split"] in ("val", "test", "unlabeled")]
    # active learning (the spec's "ranking"): a trainer's predict_ranked adds what a query
    # strategy ranks by: (label, confidence, {probabilities, vector, uncertainty})
    predict = trainer.predict
    if ctx.spec.get("ranking") and getattr(trainer, "predict_ranked", None) is not None:
        predict = trainer.predict_ranked
    lines = []
    total = len(items) * len(ctx.schemas)
    done = 0
    for scheme in ctx.schemas:
        for start in range(0, len(items), batch):
            ctx.check_cancelled()
            chunk = items[start:start + batch]
            inputs = chunk if getattr(trainer, "takes_items", False) else [i["text"] for i in chunk]
            for it, answer in zip(chunk, predict(scheme, inputs)):
                row = {"id": it["id"], "split": it["split"], "scheme": scheme,
                       "label": answer[0], "confidence": round(float(answer[1]), 6)}
                if len(answer) > 2 and answer[2]:  # what active learning ranks by
                    row.update(_ranking(answer[2]))
                lines.append(json.dumps(row, ensure_ascii=False))
            done += len(chunk)
            ctx.emitter.progress(done, total, unit="prediction")
    write_atomic(path, "".join(line + "\n" for line in lines))
    return len(lines)


def _ranking(extra):
    """A prediction's extras for active learning, rounded: ``probabilities`` (label: p, the
    labels as text), ``vector`` (an item's representation) and ``uncertainty`` (spans)."""
    out = {}
    if extra.get("probabilities") is not None:
        out["probabilities"] = {str(k): round(float(v), 6)
                                for k, v in extra["probabilities"].items()}
    if extra.get("vector") is not None:
        out["vector"] = [round(float(x), 5) for x in extra["vector"]]
    if extra.get("uncertainty") is not None:
        out["uncertainty"] = round(float(extra["uncertainty"]), 6)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m potato.training.worker",
                                description="Train one run from its spec and report events.")
    p.add_argument("--spec", required=True, help="path to the run's spec.json")
    args = p.parse_args(argv)
    return run(args.spec, owns_process=True)


if __name__ == "__main__":
    sys.exit(main())
