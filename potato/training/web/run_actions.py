"""A run's name and note, and running it again: the boundary for the name and note an admin
types, the run page's cells for both, and the command line that runs the same request again.

Run again starts the same trainer, schemes, backend and params (every param the run resolved,
so a later change of a default does not change what runs). The Training form remembers the
params of each trainer's newest run that an admin asked for (``RunStore.last_by_trainer``):
there is no separate memory to fall out of step with the runs."""

import shlex
from typing import Any, Dict, List, Optional, Tuple

from potato.markup import Safe, render
from potato.training.exchange import boundary
from potato.training.core.runs import RequestError
from potato.training.core.view import RunView

NAME_MAX = 80
NOTE_MAX = 2000


def _clean(value: Any, what: str, limit: int, lines: bool) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RequestError(400, "The run's %s must be text." % what)
    value = value.replace("\r\n", "\n").strip()
    if len(value) > limit:
        raise RequestError(400, "The %s is %d characters long; at most %d fit. Shorten it and "
                                "save again." % (what, len(value), limit))
    allowed = "\n\t" if lines else ""
    if boundary.has_hidden("".join(" " if c in allowed else c for c in value)):
        raise RequestError(400, "The %s holds control characters%s, or characters that print "
                                "nothing or reverse the text around them (such as U+202E); "
                                "remove them and save again." % (
                                    what, "" if lines else " or line breaks"))
    return value


def parse_label(name: Any, note: Any) -> Tuple[str, str]:
    """(name, note) from a form or JSON body, checked once here: text, trimmed, at most
    NAME_MAX / NOTE_MAX characters, no control characters (a note keeps its lines). An empty
    value clears it. Raises RequestError(400) with what to do."""
    return (_clean(name, "name", NAME_MAX, False), _clean(note, "note", NOTE_MAX, True))


def label_cell(view: RunView) -> Safe:
    """The run page's name and note, with the form that edits them."""
    note = render('<p class="run-note" id="run-note">{n}</p>', n=view.note) \
        if view.note else Safe('<p class="hint">No note.</p>')
    return render(
        '{note}<details id="edit-label"><summary>Edit name and note</summary>'
        '<form method="post" action="/admin/training/runs/{id}/label" class="label-form">'
        '<label for="run-name">Name (at most {nmax} characters)</label>'
        '<input id="run-name" name="name" maxlength="{nmax}" value="{name}">'
        '<label for="run-note-text">Note (at most {tmax} characters)</label>'
        '<textarea id="run-note-text" name="note" rows="4" maxlength="{tmax}">{text}</textarea>'
        '<button type="submit" class="secondary" id="save-label">Save</button></form>'
        '</details>', note=note, id=view.run_id, nmax=NAME_MAX, tmax=NOTE_MAX,
        name=view.name or "", text=view.note or "")


def again_cell(view: RunView, config_path: str) -> Safe:
    """Run again: start the same request now (a POST, the confirm), or open the Training form
    filled with it to change something first; and the equivalent command line."""
    if view.status in ("queued", "running"):
        return Safe("")
    return render(
        '<section class="card" id="again-card"><h2>Run again</h2>'
        '<form method="post" action="/admin/training/runs/{id}/again" class="inline">'
        '<button type="submit" class="secondary" id="run-again">Run again with these params'
        '</button></form> <a id="run-again-form" href="/admin/training?again={id}">or change '
        'them first in the Training form</a><p class="hint">The same trainer, schemes, backend '
        '({backend}) and params. From a shell:</p><pre class="again-command"><code>{cmd}</code>'
        '</pre></section>', id=view.run_id, backend=view.backend,
        cmd=again_command(config_path, view))


def again_command(config_path: str, view: RunView) -> str:
    """The ``potato training run`` line that asks for the same run (params that differ from
    the trainer's defaults, so the line stays short), every value shell-quoted."""
    argv = ["potato", "training", "run", config_path, "--trainer", str(view.trainer),
            "--schemas", ",".join(map(str, view.schemas)), "--backend", str(view.backend)]
    for k, v in sorted(view.params_changed.items()):
        argv += ["--param", "%s=%s" % (k, param_text(v))]
    return " ".join(shlex.quote(a) for a in argv)


def param_text(value: Any) -> str:
    """A param as the form and ``--param`` take it (true/false, numbers, text as it is)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def replayable(params: Any) -> Dict[str, Any]:
    """A run's stored params as a new request gives them: a param stored as None kept its
    default (``learning_rate`` of the hf trainers), and a request cannot ask for None, so it
    is left out and the new run takes the default too."""
    return {k: v for k, v in params.items() if v is not None} if isinstance(params, dict) \
        else {}


def form_values(run: Optional[Any]) -> Dict[str, str]:
    """A run's params as the Training form's inputs show them ({} for no run)."""
    return {k: param_text(v) for k, v in replayable(getattr(run, "params", None)).items()}


def again_request(run: Any) -> Tuple[str, List[str], str, Dict[str, Any]]:
    """(trainer, schemas, backend, params) that start ``run`` again."""
    return run.trainer, list(run.schemas), run.backend, replayable(run.params)
