"""Cells of a run's page about the model in use: in use or why not, "Use this model", and the
pin (see ``choice``). Buttons appear only where the action can work; otherwise the reason is
said in place."""

from typing import Any, Dict

from potato.markup import Safe, join, render

PIN_HINT = ("a pinned run stays in use until you change it, whatever writeback.policy says, "
            "and retain_runs never deletes its model files")


def in_use_cell(view: Dict[str, Any]) -> Safe:
    """In use (for which schemes), else the Use button, else why it cannot be used.
    ``view["use_refusal"]`` is choice.use_refusal's sentence ("" when the run can be used)."""
    if view.get("in_use"):
        return render('<b class="in-use-badge">in use for {s}</b> (its predictions are the '
                      'suggestions annotators see)', s=", ".join(map(str, view["in_use"])))
    refusal = view.get("use_refusal")
    if refusal or view["status"] != "success":
        return render('no <span class="hint" id="use-refusal">{r}</span>', r=refusal or "")
    return render('<form method="post" action="/admin/training/runs/{id}/use" class="inline">'
                  '<button type="submit" class="secondary" id="use-run">Use this model'
                  '</button></form> <span class="hint">its predictions become the suggestions '
                  'annotators see</span>', id=view["run_id"])


def pin_cell(view: Dict[str, Any]) -> Safe:
    """Pinned or not, with the button that changes it (successful runs only)."""
    if view["status"] != "success":
        return Safe("")
    if view.get("pinned"):
        return render('<b class="pinned-badge">pinned</b> <form method="post" '
                      'action="/admin/training/runs/{id}/unpin" class="inline"><button '
                      'type="submit" class="secondary" id="unpin-run">Unpin</button></form> '
                      '<span class="hint">{hint}</span>', id=view["run_id"], hint=PIN_HINT)
    what = "Pin" if view.get("in_use") or view.get("use_refusal") else "Use and pin"
    return render('not pinned <form method="post" action="/admin/training/runs/{id}/pin" '
                  'class="inline"><button type="submit" class="secondary" id="pin-run">{what}'
                  '</button></form> <span class="hint">{hint}</span>', id=view["run_id"],
                  what=what, hint=PIN_HINT)


def message_box(message: str, ok: bool) -> Safe:
    """The page's message line: what the admin's last action did, or why it could not."""
    if not message:
        return Safe('<div id="message" role="alert"></div>')
    return render('<div id="message" role="alert" class="{kind}">{m}</div>',
                  kind="ok" if ok else "error", m=message)


def runs_table_marks(view: Dict[str, Any]) -> Safe:
    """The runs table's In use cell."""
    parts = []
    if view.get("in_use"):
        parts.append(render('<span class="badge in-use-badge" title="its predictions are the '
                            'suggestions annotators see">in use: {s}</span>',
                            s=", ".join(map(str, view["in_use"]))))
    if view.get("pinned"):
        parts.append(render(' <span class="badge pinned-badge" title="{t}">pinned</span>',
                            t=PIN_HINT))
    return join(parts)
