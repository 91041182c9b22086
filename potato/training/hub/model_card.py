"""The model card (``README.md``) published with a run's model to the Hugging Face Hub.

Pure: built from the run's record, its bundle's manifest and the config, so a test can read
every line. The YAML header is written by hand (each value a JSON string, which YAML reads as
the same string), so the server needs no YAML writer; the Hub checks it before the commit.
"""

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from potato import __version__
from potato.training.core.view import RunView
from potato.training.reports import heldout, ratings as report_ratings, run_texts
from potato.training.remote import trainers

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _md(value: Any) -> str:
    """A value from the config or a record as one line of Markdown text (no markup, no table
    break)."""
    text = " ".join(str(value).split())
    for ch in "\\|<>*_`[]":
        text = text.replace(ch, "\\" + ch)
    return text


def _code(value: Any) -> str:
    """A value as one Markdown code span: shown exactly as it is (a backslash escape would show
    inside one: ``adapter\\_config.json``), on one line, fenced by more backticks than it
    holds in a row."""
    text = " ".join(str(value).split())
    longest = max((len(m) for m in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def load_code(view: RunView, repo_id: str, files: List[str]) -> str:
    """The Python that loads the published files (the trainer's ``load_code``, reading the repo
    ``repo_id`` whose ``files`` are listed), or "" for a trainer without one."""
    info = trainers.get(view.trainer) if isinstance(view.trainer, str) else None
    if info is None:
        return ""
    params = view.params if isinstance(view.params, dict) else {}
    used = []

    def hub_file(rel: str) -> str:  # publish.repo_files put model/'s files at the root
        name = rel[len("model/"):] if rel.startswith("model/") and rel not in files else rel
        used.append(name)
        return "hf_hub_download(%s, %s)" % (json.dumps(repo_id), json.dumps(name))

    schemas = view.schemas or []
    code = trainers.fill_load_code(info.load_template(params), repo_id, hub_file,
                                   str(schemas[0]) if schemas else "SCHEME")
    if used:
        code = "from huggingface_hub import hf_hub_download\n" + code
    return code


def metadata(view: RunView, license: Optional[str]) -> List[str]:
    """The YAML header's lines (between the --- lines)."""
    params = view.params if isinstance(view.params, dict) else {}
    info = trainers.get(view.trainer) if isinstance(view.trainer, str) else None
    tag, library = info.hub_meta(params) if info is not None else (None, None)
    lines = []
    base = params.get("model")
    if library and isinstance(base, str) and HUB_ID.match(base):  # not a local directory
        lines.append("base_model: %s" % json.dumps(base))
    if library:
        lines.append("library_name: %s" % json.dumps(library))
    if tag:
        lines.append("pipeline_tag: %s" % json.dumps(tag))
    if license:
        lines.append("license: %s" % json.dumps(license))
    lines.append("tags:")
    lines.extend("- %s" % json.dumps(t) for t in ("potato-annotation", view.trainer))
    return lines


def _per_label_table(per: Dict[str, Any]) -> List[str]:
    out = ["| Label | Precision | Recall | F1 | Support |", "|---|---|---|---|---|"]
    for label, v in per.items():
        v = v if isinstance(v, dict) else {}
        out.append("| %s | %.3f | %.3f | %.3f | %d |" % (
            _md(label), _num(v.get("precision")) or 0.0, _num(v.get("recall")) or 0.0,
            _num(v.get("f1")) or 0.0, int(_num(v.get("support")) or 0)))
    return out + [""]


def _span_lines(name: str, r: Dict[str, Any]) -> List[str]:
    """A span scheme's entity-level figures (span_report.py): micro precision, recall and F1,
    the macro-F1, and per label with its support."""
    out = ["### %s" % _md(name), "",
           "Entity-level (a predicted span counts only with a human span's exact start, end and "
           "label): precision **%.3f**, recall **%.3f**, micro-F1 **%.3f**, macro-F1 %.3f, on "
           "%d held-out (test split) items holding %d human spans; the model predicted %d." % (
               _num(r.get("precision")) or 0.0, _num(r.get("recall")) or 0.0,
               _num(r.get("micro_f1")) or 0.0, _num(r.get("macro_f1")) or 0.0,
               int(_num(r.get("n")) or 0), int(_num(r.get("entities")) or 0),
               int(_num(r.get("predicted")) or 0)), ""] + _verdict(r)
    if r.get("note"):
        out += ["> %s" % _md(r["note"]), ""]
    per = r.get("per_label") if isinstance(r.get("per_label"), dict) else {}
    return out + (_per_label_table(per) if per else [])


def _verdict(r: Dict[str, Any]) -> List[str]:
    """The model against its baseline and chance, in a sentence (none in an older report)."""
    versus = heldout.HeldOut.from_dict(r).versus
    return [_md(versus.sentence()), ""] if versus is not None else []


def _scheme_lines(name: str, r: Dict[str, Any]) -> List[str]:
    if heldout.HeldOut.from_dict(r).shape == heldout.ENTITIES:
        return _span_lines(name, r)
    acc = _num(r.get("accuracy"))
    rating = report_ratings.summary_line("", r)  # Likert: MAE and kappa; numbers: their report
    if acc is None:
        return ["### %s" % _md(name), "", _md(rating.strip()), ""] + _verdict(r) \
            if rating else []
    ci = r.get("accuracy_ci95") if isinstance(r.get("accuracy_ci95"), list) else [0, 1]
    base = r.get("baseline") if isinstance(r.get("baseline"), dict) else {}
    out = ["### %s" % _md(name), "",
           "Accuracy **%.3f** (95%% interval %.2f to %.2f), macro-F1 **%.3f**, on %d held-out "
           "(test split) items. Always answering \"%s\" (the most common label in the train "
           "split) scores accuracy %.3f; the model's is %s." % (
               acc, _num(ci[0]) or 0.0, _num(ci[1]) or 0.0, _num(r.get("macro_f1")) or 0.0,
               int(_num(r.get("n")) or 0), _md(run_texts.answer_words(base.get("label"))),
               _num(base.get("accuracy")) or 0.0,
               run_texts.above(_num(r.get("above_baseline")) or 0.0)), ""]
    out += _verdict(r)
    if rating:
        out += [_md(rating.strip()), ""]
    if r.get("note"):
        out += ["> %s" % _md(r["note"]), ""]
    per = r.get("per_label") if isinstance(r.get("per_label"), dict) else {}
    if per:
        out += _per_label_table(per)
    return out


def holdout_lines(view: RunView) -> List[str]:
    if view.holdout is None:
        return ["No held-out report: the run had no labelled test item to score.", ""]
    h = view.holdout.as_dict()
    per = h.get("per_scheme") if isinstance(h.get("per_scheme"), dict) else {
        ", ".join(map(str, view.schemas)): h}
    out: List[str] = []
    for name, r in per.items():
        if isinstance(r, dict):
            out += _scheme_lines(str(name), r)
    return out


@dataclass(frozen=True)
class Release:
    """The publish a card is for: into ``repo_id``, committing ``files`` (paths in the repo),
    under ``license`` (None: no license line); the ``number``-th publish of the run, made at
    ``now`` (None: when the card is made)."""

    repo_id: str
    files: List[str] = field(default_factory=list)
    license: Optional[str] = None
    number: int = 1
    now: Optional[float] = None


def card(view: RunView, release: Release, schemes: Dict[str, Any],
         counts: Optional[Dict[str, int]], params_changed: Dict[str, Any]) -> str:
    """README.md for ``release``: metadata, what the model labels (``schemes``: the bundle's),
    how well (the held-out report), how it was trained (on ``counts`` items per split, with
    ``params_changed``), and the Python that loads it. The last line names the publish
    (``number`` of this run, ``now``), so publishing the same run again changes the card and
    makes a new commit."""
    repo_id, files, license = release.repo_id, release.files, release.license
    number, now = release.number, release.now
    params = view.params if isinstance(view.params, dict) else {}
    name = repo_id.split("/")[-1]
    finished = _num(view.finished_at)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(finished)) if finished else "?"
    out = ["---"] + metadata(view, license) + ["---", "", "# %s" % _md(name), "",
           "A model trained with Potato (potato-annotation %s) from human annotations: trainer "
           "%s, run %s, finished %s." % (__version__, _code(view.trainer),
                                          _md(view.run_id), when), ""]
    out += ["## What it labels", ""]
    for scheme in view.schemas:
        info = schemes.get(scheme) if isinstance(schemes.get(scheme), dict) else {}
        labels = ", ".join(_code(x) for x in info.get("labels") or []) or "?"
        out.append("- scheme **%s** (%s): %s" % (_md(scheme), _md(info.get("type") or "?"),
                                                labels))
    out += ["", "## Held-out report", ""] + holdout_lines(view)
    out += ["## Training", "", "- trainer: %s" % _code(view.trainer)]
    if isinstance(params.get("model"), str):
        out.append("- base model: %s" % _code(params["model"]))
    changed = ", ".join(_code("%s=%s" % (k, json.dumps(v, default=str)))
                        for k, v in sorted(params_changed.items()))
    out.append("- params that differ from the trainer's defaults: %s" % (changed or "none"))
    if counts:
        out.append("- items: %d train, %d val, %d test" % tuple(
            int(counts.get(k) or 0) for k in ("train", "val", "test")))
    out += ["- Potato version: %s" % __version__, "", "## Files", ""]
    out += ["- %s" % _code(f) for f in files] + [""]
    code = load_code(view, repo_id, files)
    if code:
        out += ["## Use it", "", "```python", code, "```", "",
                "A private repo needs a token with read access (`HF_TOKEN`) to download.", ""]
    out += ["---", "", "Published by Potato on %s (publish %d of run %s)." % (
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() if now is None else now)),
        number, _md(view.run_id)), ""]
    return "\n".join(out)
