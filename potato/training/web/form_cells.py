"""The Training form's cells: the trainer menu (a trainer that cannot run is disabled, with
why), a trainer's param inputs (filled in from its last run), and the line that says the form
starts with the backend and trainer last used."""

from typing import Any, Dict, List

from potato.markup import esc


def trainer_options(trainers: List[Dict[str, Any]], on_server: bool, first) -> str:
    out = []
    for t in trainers:
        reason = unavailable_reason(t, on_server)
        out.append('<option value="%s"%s%s>%s%s</option>' % (
            esc(t["name"]), " disabled" if reason else "", " selected" if t is first else "",
            esc(t["name"]), " (unavailable: %s)" % esc(reason) if reason else ""))
    return "".join(out)


def unavailable_reason(trainer: Dict[str, Any], on_server: bool) -> str:
    """Why a trainer cannot run on a backend (``on_server``: the backend runs here), or for
    this project at all (``unfit``: fit.py)."""
    if trainer.get("unfit"):
        return trainer["unfit"]
    if trainer.get("local_only") and not on_server:
        return "it reads the server's store, so it runs only on local"
    if on_server and trainer.get("missing_packages"):
        return "needs %s here" % ", ".join(trainer["missing_packages"])
    return ""


def param_inputs(trainer: Dict[str, Any], shown: bool, remembered=None) -> str:
    """One trainer's param inputs; hidden (and disabled, so not submitted) unless ``shown``.
    ``remembered``: (run_id, {param: text}) of this trainer's last run, whose values the
    inputs start with (run_actions.form_values)."""
    off = "" if shown else " disabled"
    out = ['<div class="param-set" data-trainer="%s"%s>' % (esc(trainer["name"]),
                                                           "" if shown else " hidden")]
    from_run, values = remembered or (None, {})
    if from_run:
        out.append('<p class="hint remembered">Filled in with the params of run <a href="/admin/'
                   'training/runs/%s">%s</a>; clear a box for its default.</p>' % (
                       esc(from_run), esc(from_run)))
    for p in trainer["params"]:
        pid = "param-%s-%s" % (trainer["name"], p["name"])
        default = values.get(p["name"], "" if p["default"] is None else p["default"])
        if p["type"] == "bool":
            out.append('<label for="%s">%s</label><select id="%s" name="param:%s"%s>'
                       '<option value="true"%s>true</option><option value="false"%s>false'
                       '</option></select>' % (pid, esc(p["name"]), pid, esc(p["name"]), off,
                                               " selected" if default in (True, "true") else "",
                                               " selected" if default in (False, "false")
                                               else ""))
        elif p.get("choices"):
            out.append('<label for="%s">%s</label><select id="%s" name="param:%s"%s>%s'
                       '</select>' % (pid, esc(p["name"]), pid, esc(p["name"]), off, "".join(
                           '<option value="%s"%s>%s</option>' % (
                               esc(c), " selected" if str(c) == str(default) else "", esc(c))
                           for c in p["choices"])))
        elif p.get("multiline"):
            out.append('<label for="%s">%s</label><textarea id="%s" name="param:%s" rows="6" '
                       'placeholder="default"%s>%s</textarea>' % (
                           pid, esc(p["name"]), pid, esc(p["name"]), off, esc(default)))
        else:
            out.append('<label for="%s">%s</label><input id="%s" name="param:%s" value="%s" '
                       'placeholder="default"%s>' % (pid, esc(p["name"]), pid, esc(p["name"]),
                                                     esc(default), off))
        out.append('<p class="hint">%s</p>' % esc(p["help"]))
    if not trainer["params"]:
        out.append('<p class="hint">This trainer has no params.</p>')
    return "".join(out) + "</div>"


def remembered_choice(form: Dict[str, Any], backend, trainer) -> str:
    """The line that says the form starts with the backend and trainer of the last run an
    admin started (``form["last"]``: its id), as far as it does."""
    last = form.get("last")
    same = [what for what, ok in (("Runs on", backend["name"] == form.get("backend")),
                                  ("Trainer", trainer["name"] == form.get("trainer"))) if ok]
    if not last or not same:
        return ""
    return ('<p class="hint remembered" id="remembered-choice">%s start%s as in run <a href="'
            '/admin/training/runs/%s">%s</a>, the last run started by hand; change %s for '
            'this one.</p>' % (" and ".join(same), "" if len(same) > 1 else "s", esc(last),
                               esc(last), "them" if len(same) > 1 else "it"))
